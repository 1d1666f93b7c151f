package cohort

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// fakeNode is an Authority and a Server: owned cohorts at their install
// epochs, cohorts still held (frozen, draining), and a table that grants
// owned cohorts and refuses the rest with MOVED.
type fakeNode struct {
	mu    sync.Mutex
	owned map[control.CohortID]uint64
	held  map[control.CohortID]uint64
	locks int
}

func newFakeNode() *fakeNode {
	return &fakeNode{owned: map[control.CohortID]uint64{}, held: map[control.CohortID]uint64{}}
}

func (f *fakeNode) own(id control.CohortID, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owned[id], f.held[id] = epoch, epoch
}

// freeze: no longer granted, still held (draining).
func (f *fakeNode) freeze(id control.CohortID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owned, id)
}

func (f *fakeNode) retire(id control.CohortID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owned, id)
	delete(f.held, id)
}

func (f *fakeNode) Owned(id control.CohortID) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.owned[id]
	return e, ok
}

func (f *fakeNode) Held(id control.CohortID, epoch uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.held[id]
	return ok && e == epoch
}

func (f *fakeNode) HandleLock(r *messages.LockRequest) *messages.LockReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.owned[r.GetCohortId()]; ok && e <= r.GetEpoch() {
		f.locks++
		return &messages.LockReply{Status: messages.LockStatus_LOCK_STATUS_OK, RequestId: r.GetRequestId()}
	}
	return &messages.LockReply{Status: messages.LockStatus_LOCK_STATUS_MOVED, RequestId: r.GetRequestId(),
		Moved: &messages.Moved{Owner: "elsewhere", Epoch: r.GetEpoch() + 1}}
}

func (f *fakeNode) HandleUnlock(r *messages.UnlockRequest) *messages.UnlockReply {
	return &messages.UnlockReply{Status: messages.LockStatus_LOCK_STATUS_OK, RequestId: r.GetRequestId()}
}

func quiet() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

type harness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	pid  *actor.PID
	node *fakeNode
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	sys := quiet()
	node := newFakeNode()
	pid, err := Spawn(sys, cfg, node, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sys.Root.PoisonFuture(pid).Wait()
		sys.Shutdown()
	})
	return &harness{t: t, sys: sys, pid: pid, node: node}
}

func (h *harness) lock(to *actor.PID, id control.CohortID, epoch uint64) any {
	h.t.Helper()
	r, err := h.sys.Root.RequestFuture(to, &messages.LockRequest{CohortId: id, Epoch: epoch, RequestId: 1}, 5*time.Second).Result()
	if err != nil {
		h.t.Fatalf("lock cohort %d: %v", id, err)
	}
	return r
}

// answers reports whether a request sent straight to pid gets a reply: a
// stopped activation's name yields a dead letter, or — when the request
// slipped into its mailbox as it stopped — no reply at all.
func (h *harness) answers(pid *actor.PID, id control.CohortID, epoch uint64) bool {
	r, err := h.sys.Root.RequestFuture(pid, &messages.LockRequest{CohortId: id, Epoch: epoch, RequestId: 1}, 200*time.Millisecond).Result()
	if err != nil {
		return false
	}
	_, dead := r.(*actor.DeadLetterResponse)
	return !dead
}

func (h *harness) status(id control.CohortID, epoch uint64) messages.LockStatus {
	h.t.Helper()
	rep, ok := h.lock(h.pid, id, epoch).(*messages.LockReply)
	if !ok {
		h.t.Fatalf("lock cohort %d: not a LockReply", id)
	}
	return rep.GetStatus()
}

func (h *harness) stats() Stats {
	h.t.Helper()
	r, err := h.sys.Root.RequestFuture(h.pid, GetStats{}, 5*time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return r.(Stats)
}

func (h *harness) activation(id control.CohortID) *actor.PID {
	return h.sys.NewLocalPID(ActivationName(id))
}

func TestActivatorActivatesOnlyOwnedCohorts(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.node.own(7, 3)

	if s := h.status(7, 3); s != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("owned cohort 7: %v", s)
	}
	st := h.stats()
	if st.Active[7] != 3 || st.Activated != 1 || st.Direct != 0 {
		t.Fatalf("after the first request of an owned cohort: %+v", st)
	}
	// The activation is addressable by its name: a caller that cached it
	// skips the activator.
	if rep, ok := h.lock(h.activation(7), 7, 3).(*messages.LockReply); !ok || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("direct request to the activation: %v", rep)
	}
	if st := h.stats(); st.Activated != 1 {
		t.Fatalf("a second activation of cohort 7: %+v", st)
	}

	// Fencing: a cohort this node does not own gets the table's MOVED from
	// the activator; no activation exists for it.
	if s := h.status(8, 3); s != messages.LockStatus_LOCK_STATUS_MOVED {
		t.Fatalf("unowned cohort 8: %v", s)
	}
	if h.answers(h.activation(8), 8, 3) {
		t.Fatal("an activation of unowned cohort 8 answered")
	}
	if st := h.stats(); len(st.Active) != 1 || st.Direct != 1 {
		t.Fatalf("after the unowned request: %+v", st)
	}
}

func TestActivatorRetiresAndFences(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.node.own(7, 3)
	if s := h.status(7, 3); s != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("owned cohort 7: %v", s)
	}

	// Frozen (the map moved it) but still draining: the activation stays,
	// so releases reach it, and locks are refused by the table.
	h.node.freeze(7)
	h.sys.Root.Send(h.pid, Sync{})
	if st := h.stats(); st.Active[7] != 3 || st.Retired != 0 {
		t.Fatalf("a draining activation was stopped: %+v", st)
	}
	if s := h.status(7, 3); s != messages.LockStatus_LOCK_STATUS_MOVED {
		t.Fatalf("frozen cohort 7: %v", s)
	}
	r, err := h.sys.Root.RequestFuture(h.pid, &messages.UnlockRequest{CohortId: 7, Epoch: 3, All: true}, 5*time.Second).Result()
	if err != nil || r.(*messages.UnlockReply).GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("release in a draining cohort: %v, %v", r, err)
	}

	// Retired: the activation stops and is tombstoned; its name answers
	// dead letters, which send a caller back to the activator.
	h.node.retire(7)
	h.sys.Root.Send(h.pid, Sync{})
	st := h.stats()
	if len(st.Active) != 0 || st.Retired != 1 || st.Tombstones != 1 {
		t.Fatalf("after retirement: %+v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !h.answers(h.activation(7), 7, 3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retired activation still answers")
		}
		time.Sleep(time.Millisecond)
	}

	// A stale claim of the same activation (7, 3) is fenced by the
	// tombstone: no activation, the table's answer.
	h.node.own(7, 3)
	if s := h.status(7, 3); s != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("cohort 7 at the tombstoned epoch: %v", s)
	}
	st = h.stats()
	if len(st.Active) != 0 || st.Fenced != 1 {
		t.Fatalf("a tombstoned activation was restarted: %+v", st)
	}
	// Installed again at a later epoch: a new activation under the same
	// name.
	h.node.own(7, 5)
	if s := h.status(7, 5); s != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("cohort 7 at epoch 5: %v", s)
	}
	if st := h.stats(); st.Active[7] != 5 || st.Activated != 2 {
		t.Fatalf("after re-installation: %+v", st)
	}
}

func TestActivatorBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxActivations, cfg.MaxTombstones = 2, 2
	h := newHarness(t, cfg)
	for id := control.CohortID(1); id <= 3; id++ {
		h.node.own(id, 1)
		if s := h.status(id, 1); s != messages.LockStatus_LOCK_STATUS_OK {
			t.Fatalf("cohort %d: %v", id, s)
		}
	}
	// Past the cap requests are still served, by the activator itself.
	if st := h.stats(); len(st.Active) != 2 || st.Direct != 1 {
		t.Fatalf("with 2 activations allowed: %+v", st)
	}
	for id := control.CohortID(1); id <= 3; id++ {
		h.node.retire(id)
	}
	h.sys.Root.Send(h.pid, Sync{})
	if st := h.stats(); st.Tombstones > 2 {
		t.Fatalf("%d tombstones kept, cap 2", st.Tombstones)
	}

	err := Config{MaxActivations: 0, MaxTombstones: -1, MailboxSize: 0}.Validate()
	if err == nil {
		t.Fatal("a zero config validated")
	}
	for _, want := range []string{"MaxActivations", "MaxTombstones", "MailboxSize"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate: %v; does not name %s", err, want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewProps(DefaultConfig(), nil, nil); err == nil {
		t.Fatal("an activator without Authority and Server")
	}
}
