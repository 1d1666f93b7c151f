package actors

import (
	"context"
	"log/slog"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
)

// TestSubmitExactlyOnceAcrossNodes: a client that lost the reply of a
// committed transfer and resubmits it to another node gets a committed,
// replayed result, and the money moves once.
func TestSubmitExactlyOnceAcrossNodes(t *testing.T) {
	ctx := context.Background()
	cfg := bank.DefaultConfig()
	cfg.Accounts = 256
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, base, layout := loadedMemory(t, wl, 64<<20)
	var nodes []*Node
	for i, name := range []string{"cn-1", "cn-2"} {
		dev, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		nc := DefaultNodeConfig(name)
		nc.ID, nc.Coordinators, nc.Logger = uint32(i+1), 2, slog.New(slog.DiscardHandler)
		n, err := NewNode(nc, dev, layout, wl)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	transfer := func(attempt uint32) *messages.TxnSubmit {
		return &messages.TxnSubmit{TxnId: 3<<40 | 17, Client: "client-3", Attempt: attempt,
			Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 5, ToAccount: 6, AmountCents: 250}}}
	}
	first, err := nodes[0].Submit(ctx, transfer(1))
	if err != nil || first.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED || first.GetReplayed() {
		t.Fatalf("first attempt: %v %v", first, err)
	}
	again, err := nodes[1].Submit(ctx, transfer(2))
	if err != nil || again.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED || !again.GetReplayed() {
		t.Fatalf("resubmitted to the other node: %v %v", again, err)
	}
	snap := store.NewSnapshot(layout, base)
	for acct, want := range map[uint64]int64{5: cfg.InitialCents - 250, 6: cfg.InitialCents + 250} {
		v, ok, err := snap.Get(ctx, bank.Ref(acct))
		if err != nil || !ok {
			t.Fatalf("account %d: %v %v", acct, ok, err)
		}
		got, err := bank.DecodeAccount(acct, v)
		if err != nil || got != want {
			t.Fatalf("account %d: %d cents (%v), want %d: the transfer was applied %s", acct, got, err, want,
				map[bool]string{true: "twice", false: "not as once"}[got != want && (got-want)%250 == 0])
		}
	}
}

// loadedMemory returns an emulated memory node of size bytes with wl's
// tables created and loaded, a device on it (closed with the test) and the
// layout.
func loadedMemory(t *testing.T, wl workload.Workload, bytes uint64) (*rdma.Memory, rdma.Device, *store.Layout) {
	t.Helper()
	ctx := context.Background()
	mem := rdma.NewMemory(bytes)
	base, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	layout, err := store.Create(ctx, base, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.LoadOnce(ctx, layout, base, func(ctx context.Context, l *store.Loader) error { return wl.Load(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	return mem, base, layout
}
