package planner

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/messages"
)

// inlineCluster is a fakeCluster whose nodes also serve migration
// messages in the planner's process (InlineMigrator), acknowledging each
// at once, and record every call.
type inlineCluster struct {
	*fakeCluster
	// waitDrains leaves every Drain unanswered inline, as a node does
	// whose cohort still holds locks.
	waitDrains bool
	mu         sync.Mutex
	batches    []inlineBatch
	async      map[string]int // messages sent through Migrate, by kind
}

type inlineBatch struct {
	node string
	msgs []proto.Message
}

func okAck(node string, msg proto.Message) proto.Message {
	const ok = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_OK
	switch m := msg.(type) {
	case *messages.Freeze:
		return &messages.FreezeAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: node, Status: ok}
	case *messages.Drain:
		return &messages.DrainAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: node, Status: ok}
	case *messages.Handoff:
		return &messages.HandoffAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: node,
			Status: ok, NewEpoch: m.GetNewEpoch()}
	case *messages.Publish:
		return &messages.PublishAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: node, Status: ok}
	case *messages.MigrationAbort:
		return &messages.MigrationAbortAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: node, Status: ok}
	}
	return nil
}

func (c *inlineCluster) Migrate(_ context.Context, node string, msg proto.Message) (proto.Message, error) {
	c.mu.Lock()
	c.async[fmt.Sprintf("%T", msg)]++
	c.mu.Unlock()
	return okAck(node, msg), nil
}

func (c *inlineCluster) TryMigrate(node string, msgs []proto.Message) []proto.Message {
	c.mu.Lock()
	c.batches = append(c.batches, inlineBatch{node: node, msgs: msgs})
	c.mu.Unlock()
	reps := make([]proto.Message, len(msgs))
	for i, m := range msgs {
		if _, drain := m.(*messages.Drain); !drain || !c.waitDrains {
			reps[i] = okAck(node, m)
		}
	}
	return reps
}

// TestPlannerBatchesInlineMigrations: with nodes in its process, the
// planner hands each node all its messages of a step in one call (so a
// node takes its owner-table lock once for them, not once per cohort),
// never sends one through a goroutine when the node answers at once, and
// finishes the moves the drift asks for. A Drain the node leaves
// unanswered (holders remain) goes through a goroutine instead, and the
// moves still finish.
func TestPlannerBatchesInlineMigrations(t *testing.T) {
	for _, waitDrains := range []bool{false, true} {
		t.Run(fmt.Sprintf("waitDrains=%v", waitDrains), func(t *testing.T) {
			testInlineMigrations(t, waitDrains)
		})
	}
}

func testInlineMigrations(t *testing.T, waitDrains bool) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	ic := &inlineCluster{fakeCluster: newFakeCluster(names...), waitDrains: waitDrains, async: map[string]int{}}
	cfg := DefaultConfig("cn-0", len(names))
	cfg.PushTimeout = 100 * time.Millisecond
	sys, pid := spawn(t, ic, cfg)
	defer stop(sys, pid)
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 1})
	d := newDriver(t, len(names))
	waitFor(t, d, sys, pid, "a map with a cohort per tenant", func(s Status) bool { return s.Acked >= 1 && s.Cohorts >= 12 })
	d.shift = 1 // every tenant's transactions move to the next node
	st := waitFor(t, d, sys, pid, "the drift's moves", func(s Status) bool { return s.Transfer.Moved >= 4 })

	ic.mu.Lock()
	defer ic.mu.Unlock()
	drains := 0
	msgs, multi := 0, 0
	for _, b := range ic.batches {
		seen := map[string]bool{}
		for _, m := range b.msgs {
			// One message per migration and kind in a call: a step never
			// sends a migration the same message twice.
			k := fmt.Sprintf("%T %v", m, m)
			if seen[k] {
				t.Fatalf("call to %s repeats %v", b.node, m)
			}
			seen[k] = true
			if _, ok := m.(*messages.Drain); ok {
				drains++
			}
		}
		msgs += len(b.msgs)
		if len(b.msgs) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Fatalf("%d messages in %d calls, none with more than one message: nodes were not given their messages of a step together", msgs, len(ic.batches))
	}
	switch async := ic.async["*messages.Drain"]; {
	case !waitDrains && len(ic.async) != 0:
		t.Fatalf("migration messages sent through goroutines although every node answers inline: %v", ic.async)
	case waitDrains && (async < int(st.Transfer.Moved) || async > drains+int(st.Transfer.Resends)):
		t.Fatalf("%d Drains through goroutines for %d moves (%d Drains inline, %d resends)", async, st.Transfer.Moved, drains, st.Transfer.Resends)
	case waitDrains && len(ic.async) != 1:
		t.Fatalf("messages other than Drains sent through goroutines: %v", ic.async)
	}
	t.Logf("%d migration messages in %d inline calls; through goroutines: %v", msgs, len(ic.batches), ic.async)
}
