package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// MigrationActorName is the name of every node's migration participant:
// the receiver of the TransferController's Freeze, Drain, Handoff, Publish
// and MigrationAbort (package control/transfer, SPEC §6).
const MigrationActorName = "migration"

// Migration participant bounds.
const (
	// drainPoll is how often a drain re-checks its cohort's holders: a
	// fraction of the longest transaction (≈ 10 ms), so the freeze window
	// is not stretched by the polling.
	drainPoll = 250 * time.Microsecond
	// maxDrainWait bounds one Drain request whatever deadline it asks for
	// (the planner's default is 50 ms).
	maxDrainWait = 10 * time.Second
	// maxMigrationsInFlight bounds the migration requests a node serves at
	// once (each Drain waits on its own goroutine); more are refused with
	// ERROR and the controller resends them.
	maxMigrationsInFlight = 1024
	// maxBatchPerHold bounds the messages of a batch (Node.TryMigration)
	// served under one hold of the node's locks, so that a large wave
	// (a watchdog's resends of a whole round) does not keep every grant
	// and release of the node waiting for all of it.
	maxBatchPerHold = 64
)

var errNotMigration = errors.New("not a migration message")

// HandleMigration serves one migration-protocol message and returns the
// acknowledgement (blocking for a Drain until the cohort is drained or
// fenced). Callable directly by an in-process transport.
func (n *Node) HandleMigration(ctx context.Context, msg proto.Message) (proto.Message, error) {
	if n.own == nil {
		return nil, errors.New("actors: node has no owner path")
	}
	return n.own.migrate(ctx, msg)
}

// TryMigration serves msgs, in order, at once where that needs no waiting:
// every message but a Drain whose cohort still holds locks, whose reply is
// left nil. The batch takes the node's ownership lock and its owner
// table's lock once per maxBatchPerHold messages: on a loaded node that lock is contended by every
// transaction's grants and releases, and each wait for it costs the caller
// (the planner's own actor) a trip through the scheduler's run queue once
// the lock is handed over. (Taking the locks only when free, and leaving
// the batch to goroutines of the caller otherwise, made the freeze window
// longer: those goroutines and their replies wait in the same queue.)
func (n *Node) TryMigration(msgs []proto.Message) []proto.Message {
	if n.own == nil {
		return make([]proto.Message, len(msgs))
	}
	return n.own.migrateBatch(msgs)
}

// migrate dispatches one migration message, waiting for a Drain.
// The activator is told to Sync (outside o.mu) when the owned set changed.
func (o *ownership) migrate(ctx context.Context, msg proto.Message) (proto.Message, error) {
	if d, ok := msg.(*messages.Drain); ok {
		return o.drain(ctx, d), nil
	}
	if !isMigration(msg) {
		return nil, fmt.Errorf("actors: %w: %T", errNotMigration, msg)
	}
	return o.migrateBatch([]proto.Message{msg})[0], nil
}

// isMigration reports whether msg is one of the protocol's requests.
func isMigration(msg proto.Message) bool {
	switch msg.(type) {
	case *messages.Freeze, *messages.Drain, *messages.Handoff, *messages.Publish, *messages.MigrationAbort:
		return true
	}
	return false
}

// migrateBatch serves msgs in order, at most maxBatchPerHold of them under
// one hold of o.mu and of the owner table's lock; a Drain is checked once
// and its reply left nil if its cohort still holds locks, as is any
// message that is not a migration request. The activator is told to Sync
// (outside o.mu) when the owned set changed.
func (o *ownership) migrateBatch(msgs []proto.Message) []proto.Message {
	reps := make([]proto.Message, len(msgs))
	changed := false
	for start := 0; start < len(msgs); start += maxBatchPerHold {
		end := min(start+maxBatchPerHold, len(msgs))
		if o.migrateHold(msgs[start:end], reps[start:end]) {
			changed = true
		}
	}
	if changed {
		o.syncActivations()
	}
	return reps
}

// migrateHold serves msgs into reps under one hold of both locks and
// reports whether the owned set changed. Publishes only mark their cohorts;
// the drained ones are retired once, after all of msgs.
func (o *ownership) migrateHold(msgs, reps []proto.Message) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	changed := false
	_ = o.svc.Do(func(t *owner.Table) error {
		published := false
		for i, msg := range msgs {
			var c bool
			switch m := msg.(type) {
			case *messages.Freeze:
				reps[i], c = o.freezeIn(t, m)
			case *messages.Drain:
				if done, st, aborted, _, errText := o.drainStepIn(t, m.GetCohortId(), false); done {
					ack := drainAck(m, o.self)
					ack.Status, ack.Error, ack.AbortedHolders = st, errText, aborted
					reps[i] = ack
				}
			case *messages.Handoff:
				reps[i], c = o.handoffIn(t, m)
			case *messages.Publish:
				var p bool
				reps[i], p = o.publishMoveIn(m)
				published = published || p
			case *messages.MigrationAbort:
				reps[i], c = o.abortMoveIn(t, m)
			}
			changed = changed || c
		}
		if published {
			before := len(o.frozen)
			o.retireIn(t)
			changed = changed || len(o.frozen) < before
		}
		return nil
	})
	return changed
}

func drainAck(m *messages.Drain, self string) *messages.DrainAck {
	return &messages.DrainAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self}
}

const (
	ackOK       = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_OK
	ackStale    = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_STALE_EPOCH
	ackNotOwner = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_NOT_OWNER
	ackError    = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_ERROR
	noMigration = 0 // frozenCohort.migration of a cohort frozen by a map or a leave
)

// noteMembership records the newest membership epoch the node has seen
// from the planner (OwnerMap pushes and migration messages). o.mu is held.
func (o *ownership) noteMembership(e uint64) { o.memberEpoch = max(o.memberEpoch, e) }

// freezeIn stops the node granting cohort m.CohortId (step 1): whatever
// activation of it the node holds below m.NewEpoch is frozen — new requests
// get RETRY, releases are still accepted — and kept (not retired) until the
// move is published. It reports whether the owned set changed. o.mu and
// the table's lock are held.
func (o *ownership) freezeIn(t *owner.Table, m *messages.Freeze) (*messages.FreezeAck, bool) {
	o.noteMembership(m.GetMembershipEpoch())
	ack := &messages.FreezeAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: o.self}
	id := m.GetCohortId()
	now := o.nowMicros()
	if f, ok := o.frozen[id]; ok {
		// Frozen already (this migration's Freeze repeated, or frozen by a
		// map or a leave): it grants nothing, which is all a freeze promises.
		if mapEpoch := max(f.moved.Epoch, o.asm.Installed().Epoch); f.migration == noMigration && mapEpoch >= m.GetNewEpoch() {
			// The map that froze it (f.moved.Epoch), or a later one, is at
			// or past the move's epoch: the Freeze is an older planner's
			// (as for Handoff). Adopting it would hold the cohort back for
			// awaitPublishLimit, waiting for a publish that never comes, or
			// for good if the move's epoch is not above the activation's
			// (Retire refuses such a move).
			ack.Status, ack.Error = ackStale, fmt.Sprintf("cohort %d frozen by OwnerMap epoch %d ≥ %d", id, mapEpoch, m.GetNewEpoch())
			return ack, false
		}
		if f.migration == noMigration {
			f.migration, f.awaitPublish, f.awaitSince = m.GetMigrationId(), true, now
			f.moved = owner.Moved{Owner: m.GetNewOwner(), Epoch: m.GetNewEpoch()}
			o.frozen[id] = f
		}
		ack.Status, ack.HeldLocks = ackOK, heldLocks(t, id)
		return ack, false
	}
	e, owned := o.epoch[id]
	if !owned {
		ack.Status = ackNotOwner
		return ack, false
	}
	if e >= m.GetNewEpoch() {
		// Installed at or above the epoch it would move at: the planner's
		// view is older than the node's.
		ack.Status, ack.Error = ackStale, fmt.Sprintf("cohort %d installed at epoch %d ≥ %d", id, e, m.GetNewEpoch())
		return ack, false
	}
	if err := t.Freeze(id, e, now); err != nil {
		ack.Status, ack.Error = ackError, err.Error()
		return ack, false
	}
	o.deactivated(id, e)
	o.frozen[id] = frozenCohort{epoch: e, moved: owner.Moved{Owner: m.GetNewOwner(), Epoch: m.GetNewEpoch()},
		migration: m.GetMigrationId(), awaitPublish: true, awaitSince: now, kgs: o.owned[id]}
	delete(o.owned, id)
	delete(o.epoch, id)
	ack.Status, ack.HeldLocks = ackOK, heldLocks(t, id)
	ack.FrozenAtUnixMicros = uint64(max(0, time.Now().UnixMicro()))
	return ack, true
}

// heldLocks is the cohort's held lock count in t.
func heldLocks(t *owner.Table, id control.CohortID) uint32 {
	if ds, err := t.Drain(id); err == nil {
		return uint32(ds.Locks)
	}
	return 0
}

// drain waits (step 2) until the frozen cohort holds no lock, or past the
// deadline fences its holders: they are forgotten by the table (their
// releases become no-ops) and their transactions abort at validation,
// since the lock words they hold stay held under the old epoch.
func (o *ownership) drain(ctx context.Context, m *messages.Drain) *messages.DrainAck {
	ack := drainAck(m, o.self)
	start := time.Now()
	deadline := time.Duration(min(m.GetDeadlineMicros(), uint64(maxDrainWait/time.Microsecond))) * time.Microsecond
	ctx, cancel := context.WithTimeout(ctx, maxDrainWait)
	defer cancel()
	var held0 uint32
	first := true
	for {
		done, st, aborted, held, errText := o.drainStep(m.GetCohortId(), time.Since(start) >= deadline)
		if first {
			held0, first = held, false
		}
		if done {
			ack.Status, ack.Error, ack.AbortedHolders = st, errText, aborted
			ack.Released = held0 - min(held0, held)
			ack.DrainMicros = uint64(time.Since(start).Microseconds())
			return ack
		}
		t := time.NewTimer(drainPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			ack.Status, ack.Error = ackError, "drain: "+ctx.Err().Error()
			return ack
		case <-t.C:
		}
	}
}

// drainStep checks the cohort once; pastDeadline allows fencing.
func (o *ownership) drainStep(id control.CohortID, pastDeadline bool) (done bool, st messages.MigrationAckStatus, aborted, held uint32, errText string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.svc.Do(func(t *owner.Table) error {
		done, st, aborted, held, errText = o.drainStepIn(t, id, pastDeadline)
		return nil
	})
	return done, st, aborted, held, errText
}

// drainStepIn is drainStep with o.mu and the table's lock held.
func (o *ownership) drainStepIn(t *owner.Table, id control.CohortID, pastDeadline bool) (done bool, st messages.MigrationAckStatus, aborted, held uint32, errText string) {
	f, ok := o.frozen[id]
	if !ok {
		if _, owned := o.owned[id]; owned {
			return true, ackError, 0, 0, fmt.Sprintf("cohort %d is not frozen", id)
		}
		return true, ackNotOwner, 0, 0, "" // retired already (drained) or never here
	}
	ds, err := t.Drain(id)
	if err != nil {
		return true, ackNotOwner, 0, 0, ""
	}
	held = uint32(ds.Locks)
	if ds.Drained {
		return true, ackOK, 0, held, ""
	}
	if !pastDeadline {
		return false, 0, 0, held, ""
	}
	fenced, err := t.Fence(id, f.epoch, o.nowMicros())
	if errors.Is(err, owner.ErrDrainPending) {
		return false, 0, 0, held, "" // the table's own deadline is later: wait for it
	}
	if err != nil {
		return true, ackError, 0, held, err.Error()
	}
	return true, ackOK, uint32(len(fenced)), 0, ""
}

// handoffIn installs the cohort at the new epoch (step 3). Key groups another
// active cohort of this node still holds (a re-cut planned in the same map)
// are left out; the map that records the move adds them once that cohort
// shrank. It reports whether the owned set changed. o.mu and the table's
// lock are held.
func (o *ownership) handoffIn(t *owner.Table, m *messages.Handoff) (*messages.HandoffAck, bool) {
	ack := &messages.HandoffAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: o.self}
	id, e := m.GetCohortId(), m.GetNewEpoch()
	switch {
	case m.GetMembershipEpoch() < o.memberEpoch:
		ack.Status, ack.Error = ackStale, fmt.Sprintf("membership epoch %d older than %d", m.GetMembershipEpoch(), o.memberEpoch)
		return ack, false
	case o.relinquished:
		ack.Status, ack.Error = ackError, "node is leaving"
		return ack, false
	case o.asm.Installed().Epoch >= e:
		// The map that records the move is installed already: it decided.
		if o.epoch[id] == e {
			ack.Status, ack.NewEpoch = ackOK, e
		} else {
			ack.Status, ack.Error = ackStale, fmt.Sprintf("OwnerMap epoch %d installed", o.asm.Installed().Epoch)
		}
		return ack, false
	}
	o.noteMembership(m.GetMembershipEpoch())
	if got, ok := o.epoch[id]; ok {
		if got == e {
			ack.Status, ack.NewEpoch = ackOK, e // repeated Handoff
		} else {
			ack.Status, ack.Error = ackStale, fmt.Sprintf("cohort %d installed at epoch %d", id, got)
		}
		return ack, false
	}
	if _, ok := o.frozen[id]; ok {
		ack.Status, ack.Error = ackError, fmt.Sprintf("cohort %d still drains an older activation here", id)
		return ack, false
	}
	kgs := slices.DeleteFunc(slices.Clone(m.GetKeyGroups()), func(kg control.KeyGroup) bool {
		c, _, ph, ok := t.CohortOf(kg)
		return ok && c != id && ph == owner.PhaseActive
	})
	if len(kgs) == 0 {
		ack.Status, ack.Error = ackError, fmt.Sprintf("every key group of cohort %d is held by another active cohort", id)
		return ack, false
	}
	if err := t.Install(id, kgs, e); err != nil {
		ack.Status, ack.Error = ackError, err.Error()
		return ack, false
	}
	o.activated(id, e)
	o.owned[id], o.epoch[id] = kgs, e
	ack.Status, ack.NewEpoch, ack.AdoptedLocks = ackOK, e, 0
	return ack, true
}

// publishMoveIn marks the frozen activation of a published move (step 4)
// as retirable, and reports whether it did: the caller then retires the
// drained ones (retireIn); a still-held one is retired by the heartbeat
// loop when its holders are gone or fenced. o.mu is held.
func (o *ownership) publishMoveIn(m *messages.Publish) (*messages.PublishAck, bool) {
	ack := &messages.PublishAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: o.self,
		Status: ackOK, OwnermapEpoch: o.asm.Installed().Epoch}
	id := m.GetCohortId()
	f, ok := o.frozen[id]
	if !ok || f.migration != m.GetMigrationId() {
		return ack, false
	}
	f.awaitPublish = false
	o.frozen[id] = f
	return ack, true
}

// abortMoveIn rolls a migration back: the cohort this node froze for it
// becomes active again at its epoch (only the old owner is ever asked;
// the controller never rolls back after a handoff). o.mu and the table's
// lock are held.
func (o *ownership) abortMoveIn(t *owner.Table, m *messages.MigrationAbort) (*messages.MigrationAbortAck, bool) {
	ack := &messages.MigrationAbortAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: o.self, Status: ackOK}
	id := m.GetCohortId()
	f, ok := o.frozen[id]
	if !ok || f.migration != m.GetMigrationId() {
		return ack, false // never frozen for it, or rolled back already
	}
	if m.GetRestoreOwner() != o.self || o.relinquished || o.asm.Installed().Epoch >= f.moved.Epoch {
		// Stays frozen, retired once drained: the node is not to own it,
		// or is leaving, or already installed a map at or past the move's
		// epoch (a late abort of an older planner's migration: that map,
		// not the abort, decides where the cohort is). The migration is
		// over: nothing will publish it, so it no longer waits for that.
		f.awaitPublish = false
		o.frozen[id] = f
		return ack, false
	}
	if err := t.Thaw(id, f.epoch); err != nil {
		// Its key groups went to another cohort meanwhile: it cannot be
		// restored here, and is retired once drained like the above.
		f.awaitPublish = false
		o.frozen[id] = f
		ack.Status, ack.Error = ackError, err.Error()
		return ack, false
	}
	o.activated(id, f.epoch)
	delete(o.frozen, id)
	o.owned[id], o.epoch[id] = f.kgs, f.epoch
	return ack, true
}

// migrationActor serves migration messages: each on its own goroutine (a
// Drain waits), at most maxMigrationsInFlight at once.
type migrationActor struct {
	o    *ownership
	slot chan struct{}
}

func (a *migrationActor) Receive(ctx actor.Context) {
	msg, ok := ctx.Message().(proto.Message)
	if !ok {
		return
	}
	if !isMigration(msg) {
		return // not ours (system messages, unknown types): ignored
	}
	sender, root := ctx.Sender(), ctx.ActorSystem().Root
	if sender == nil {
		return // nobody to acknowledge to
	}
	select {
	case a.slot <- struct{}{}:
	default:
		root.Send(sender, busyAck(msg, a.o.self))
		return
	}
	go func() {
		defer func() { <-a.slot }()
		rep, err := a.o.migrate(context.Background(), msg)
		if err != nil {
			rep = busyAck(msg, a.o.self)
		}
		root.Send(sender, rep)
	}()
}

// busyAck is the ERROR acknowledgement of a message the node cannot serve
// now (the controller resends it).
func busyAck(msg proto.Message, self string) proto.Message {
	const why = "migration participant busy"
	switch m := msg.(type) {
	case *messages.Freeze:
		return &messages.FreezeAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self, Status: ackError, Error: why}
	case *messages.Drain:
		return &messages.DrainAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self, Status: ackError, Error: why}
	case *messages.Handoff:
		return &messages.HandoffAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self, Status: ackError, Error: why}
	case *messages.Publish:
		return &messages.PublishAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self, Status: ackError, Error: why}
	case *messages.MigrationAbort:
		return &messages.MigrationAbortAck{MigrationId: m.GetMigrationId(), CohortId: m.GetCohortId(), Epoch: m.GetEpoch(), Node: self, Status: ackError, Error: why}
	}
	return nil
}
