package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/workload/bank"
)

// TestLeaveBudgetSplitsTheTimeout: the handoff may use all of
// --leave-timeout but a tail (a quarter, at most leaveTailMax), the drain
// of transactions half the tail less, the membership leave what is left;
// a step that finds the budget spent still gets leaveMinStep.
func TestLeaveBudgetSplitsTheTimeout(t *testing.T) {
	near := func(got, want time.Duration) bool { return got <= want && got > want-50*time.Millisecond }
	b := newLeaveBudget(5 * time.Second)
	if h, d, l := b.handOff(), b.drain(), b.broadcast(); !near(h, 3750*time.Millisecond) ||
		!near(d, 4375*time.Millisecond) || !near(l, 5*time.Second) {
		t.Errorf("5 s: handoff %v, drain %v, broadcast %v", h, d, l)
	}
	b = newLeaveBudget(20 * time.Second)
	if h := b.handOff(); !near(h, 20*time.Second-leaveTailMax) {
		t.Errorf("20 s: handoff %v, want all but %v", h, leaveTailMax)
	}
	b = newLeaveBudget(0)
	if h, l := b.handOff(), b.broadcast(); h != leaveMinStep || l != leaveMinStep {
		t.Errorf("spent budget: handoff %v, broadcast %v, want %v each", h, l, leaveMinStep)
	}
}

// TestTxnEndpointRefusesAndDrainsWhenLeaving: once closing, the endpoint
// answers new transactions REJECTED without running them, and drain
// returns as soon as the transactions in flight are answered, or at its
// budget.
func TestTxnEndpointRefusesAndDrainsWhenLeaving(t *testing.T) {
	bcfg := bank.DefaultConfig()
	bcfg.Accounts = 100
	wl, err := bank.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rdma.NewMemDevice(rdma.NewMemory(64<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	layout := loadTables(t, context.Background(), dev, wl)
	quiet := slog.New(slog.DiscardHandler)
	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.Logger = quiet
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	ep := &txnEndpoint{node: node, slots: make(chan struct{}, 4)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return ep }))
	submit := func(id uint64) *messages.TxnResult {
		t.Helper()
		msg := wl.NewGenerator(1, 0).Next()
		msg.TxnId = id
		r, err := sys.Root.RequestFuture(pid, msg, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return r.(*messages.TxnResult)
	}
	if r := submit(1); r.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED {
		t.Fatalf("before leaving: %v %s", r.GetOutcome(), r.GetError())
	}
	ep.closing.Store(true)
	before := node.TxnStats()
	r := submit(2)
	if r.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_REJECTED || r.GetError() == "" {
		t.Fatalf("while leaving: %v %q, want REJECTED with a reason", r.GetOutcome(), r.GetError())
	}
	if node.TxnStats() != before {
		t.Errorf("a refused transaction ran")
	}

	// drain: returns when the slot in flight is released…
	ep.slots <- struct{}{}
	go func() { time.Sleep(30 * time.Millisecond); <-ep.slots }()
	start := time.Now()
	ep.drain(5*time.Second, quiet)
	if took := time.Since(start); took > 2*time.Second || len(ep.slots) != 0 {
		t.Errorf("drain returned after %v with %d in flight, want once the one in flight ended", took, len(ep.slots))
	}
	// …or at its budget.
	ep.slots <- struct{}{}
	start = time.Now()
	ep.drain(50*time.Millisecond, quiet)
	if took := time.Since(start); took < 50*time.Millisecond || took > 2*time.Second {
		t.Errorf("drain with a stuck transaction returned after %v, want its 50ms budget", took)
	}
}
