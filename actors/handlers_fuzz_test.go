package actors

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// Bounds of one FuzzOwnerHandlers input: enough messages to walk a cohort
// through a push, a freeze, locks, a drain and a handoff; short enough that
// an input runs in well under a millisecond.
const (
	fuzzMaxMessages = 16
	// fuzzDrainWait bounds a fuzzed Drain, which waits for holders up to
	// the deadline it carries (at most maxDrainWait): the property checked
	// is the answer, not how long the wait lasts.
	fuzzDrainWait = 5 * time.Millisecond
)

// fuzzKinds are the messages other processes send a node's owner side
// (SPEC §6, §7): lock and unlock RPCs from coordinators, OwnerMap pushes
// and migration steps from the planner. Each frame of a fuzz input picks
// one by its first byte.
var fuzzKinds = []func() proto.Message{
	func() proto.Message { return &messages.LockRequest{} },
	func() proto.Message { return &messages.UnlockRequest{} },
	func() proto.Message { return &messages.OwnerMapPush{} },
	func() proto.Message { return &messages.Freeze{} },
	func() proto.Message { return &messages.Drain{} },
	func() proto.Message { return &messages.Handoff{} },
	func() proto.Message { return &messages.Publish{} },
	func() proto.Message { return &messages.MigrationAbort{} },
}

// fuzzFrame encodes one message for a FuzzOwnerHandlers input: a header
// byte (kind in the low bits, the receiving node in bit 7), a two-byte
// little-endian length and the protobuf encoding.
func fuzzFrame(kind int, toB bool, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil || len(b) > 0xffff {
		panic("fuzz seed too large")
	}
	h := byte(kind)
	if toB {
		h |= 0x80
	}
	return append([]byte{h, byte(len(b)), byte(len(b) >> 8)}, b...)
}

type fuzzRequest struct {
	node, requester string
	id              uint64
}

// FuzzOwnerHandlers delivers arbitrary sequences of decoded peer messages
// (garbage field values included: epochs, cohort ids, chunk indexes,
// deadlines, record lists) to the owner side of two nodes, the way the
// remote endpoint hands them over. No message may panic or block past its
// bound, every request gets an answer, and a lock is granted only by the
// node that owns the cohort at the epoch the answer names: a hostile or
// corrupt message can make a node refuse, never grant what it does not
// own.
func FuzzOwnerHandlers(f *testing.F) {
	pushes, err := planner.Pushes(nil, cohort7(1, 0), 4096, "p", 1)
	if err != nil || len(pushes) != 1 {
		f.Fatalf("push: %v", err)
	}
	push := pushes[0]
	lock := &messages.LockRequest{TxnId: 9, CohortId: 7, Epoch: 1, Requester: "c", RequestId: 1,
		Records: []*messages.RecordRef{{Table: 1, Key: 5}}}
	var seed []byte
	seed = append(seed, fuzzFrame(2, false, push)...)
	seed = append(seed, fuzzFrame(2, true, push)...)
	seed = append(seed, fuzzFrame(0, false, lock)...)
	seed = append(seed, fuzzFrame(3, false, &messages.Freeze{MigrationId: 1, CohortId: 7, Epoch: 1, NewOwner: "b", NewEpoch: 2})...)
	seed = append(seed, fuzzFrame(1, false, &messages.UnlockRequest{TxnId: 9, CohortId: 7, Epoch: 1, All: true})...)
	seed = append(seed, fuzzFrame(4, false, &messages.Drain{MigrationId: 1, CohortId: 7, Epoch: 1, DeadlineMicros: 100})...)
	seed = append(seed, fuzzFrame(5, true, &messages.Handoff{MigrationId: 1, CohortId: 7, Epoch: 1, NewEpoch: 2, KeyGroups: []uint64{1, 2}, MembershipEpoch: 1, FromOwner: "a", Planner: "p"})...)
	seed = append(seed, fuzzFrame(6, false, &messages.Publish{MigrationId: 1, CohortId: 7, Epoch: 1, OwnermapEpoch: 2, NewOwner: "b", NewEpoch: 2})...)
	seed = append(seed, fuzzFrame(0, true, &messages.LockRequest{TxnId: 10, CohortId: 7, Epoch: 2, RequestId: 2,
		Records: []*messages.RecordRef{{Table: 1, Key: 5}}})...)
	moved := proto.Clone(lock).(*messages.LockRequest)
	moved.RequestId = 3
	seed = append(seed, fuzzFrame(0, false, moved)...) // the old owner now answers MOVED
	f.Add(seed)
	f.Add(append(fuzzFrame(2, false, push), fuzzFrame(7, false, &messages.MigrationAbort{MigrationId: 3, CohortId: 7, Epoch: 1})...))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0x0a})

	f.Fuzz(func(t *testing.T, data []byte) {
		names := []string{"a", "b"}
		nodes := make([]*ownership, len(names))
		for i, name := range names {
			o, err := newOwnership(OwnershipConfig{Names: names}, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			nodes[i] = o
		}
		seen := map[fuzzRequest]bool{}
		for n := 0; n < fuzzMaxMessages && len(data) >= 3; n++ {
			h, size := data[0], int(data[1])|int(data[2])<<8
			data = data[3:]
			size = min(size, len(data))
			body := data[:size]
			data = data[size:]
			msg := fuzzKinds[int(h&0x7f)%len(fuzzKinds)]()
			if proto.Unmarshal(body, msg) != nil {
				continue // the remote endpoint drops what does not decode
			}
			o := nodes[int(h>>7)]
			switch m := msg.(type) {
			case *messages.LockRequest:
				rep := o.svc.HandleLock(m)
				if rep == nil {
					t.Fatalf("no answer to %v", m)
				}
				// A repeated (requester, request id) is answered from the
				// owner's idempotency cache with the first answer, whatever
				// happened since: a retry, not a new grant.
				id := fuzzRequest{o.self, m.GetRequester(), m.GetRequestId()}
				replay := seen[id]
				seen[id] = true
				if !replay && rep.GetStatus() == messages.LockStatus_LOCK_STATUS_OK {
					if e, ok := o.Owned(control.CohortID(m.GetCohortId())); !ok || e != rep.GetEpoch() {
						t.Fatalf("%s granted %v at epoch %d; it owns the cohort: %v at epoch %d", o.self, m, rep.GetEpoch(), ok, e)
					}
				}
			case *messages.UnlockRequest:
				if o.svc.HandleUnlock(m) == nil {
					t.Fatalf("no answer to %v", m)
				}
			case *messages.OwnerMapPush:
				if o.handlePush(m) == nil {
					t.Fatalf("no answer to %v", m)
				}
			default:
				ctx, cancel := context.WithTimeout(context.Background(), fuzzDrainWait)
				ack, err := o.migrate(ctx, m)
				cancel()
				if err != nil || ack == nil {
					t.Fatalf("%T: no answer (%v)", m, err)
				}
			}
		}
	})
}
