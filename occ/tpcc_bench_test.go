package occ_test

import (
	"context"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// tpccBench is one warehouse of TPC-C (1,000 items, 100 customers per
// district) loaded on an in-memory device, with one coordinator taking
// every lock by memory-node CAS: the engine's own cost per transaction,
// without actors, routing or an owner path.
type tpccBench struct {
	wl    *tpcc.Workload
	coord *occ.Coordinator
	gen   *tpcc.Generator
}

func newTPCCBench(b *testing.B, expectedNewOrders int) *tpccBench {
	b.Helper()
	ctx := context.Background()
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses, cfg.ItemCount, cfg.CustomersPerDistrict = 1, 1000, 100
	cfg.ExpectedNewOrders = expectedNewOrders
	wl, err := tpcc.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dev, err := rdma.NewMemDevice(rdma.NewMemory(2<<30), rdma.MemConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dev.Close() })
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.LoadOnce(ctx, layout, dev, func(ctx context.Context, l *store.Loader) error { return wl.Load(ctx, l) }); err != nil {
		b.Fatal(err)
	}
	e, err := occ.NewEngine(layout, func() occ.Locker {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			b.Fatal(err)
		}
		return occ.NewCASLocker(qp)
	}, func(r txn.Ref) uint64 { return wl.Rule().KeyGroup(r) }, occ.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	c := e.NewCoordinator(qp)
	b.Cleanup(func() { c.Close() })
	return &tpccBench{wl: wl, coord: c, gen: wl.Generator(1, 0)}
}

// run runs n transactions of the generator's mix for which keep says yes,
// failing the benchmark on anything but a commit or a program's rollback.
func (tb *tpccBench) run(b *testing.B, keep func(*messages.TxnSubmit) bool) {
	ctx := context.Background()
	id := uint64(0)
	for b.Loop() {
		msg := tb.gen.Next()
		for !keep(msg) {
			msg = tb.gen.Next()
		}
		id++
		res := &messages.TxnResult{}
		prog, err := tb.wl.Program(msg, res)
		if err != nil {
			b.Fatal(err)
		}
		if r := tb.coord.Run(ctx, id, prog); r.Outcome != occ.Committed && r.Outcome != occ.RolledBack {
			b.Fatalf("txn %d: %v: %v", id, r.Outcome, r.Err)
		}
	}
}

// BenchmarkNewOrder is an OCC read / lock / validate / commit of a TPC-C
// NewOrder: ~10 item reads, a district and ~10 stock rows locked and
// written, an order, a new-order and ~10 order lines inserted (about 23
// locks by memory-node CAS). Run with -benchmem: allocs/op is the engine's
// allocations per NewOrder.
func BenchmarkNewOrder(b *testing.B) {
	tb := newTPCCBench(b, 300_000)
	tb.run(b, func(m *messages.TxnSubmit) bool { return m.GetNewOrder() != nil })
}

// BenchmarkTPCCMix runs the specification's mix (45/43/4/4/4) on the
// engine alone: the figure to set next to aura bench's mn-only
// cpu_us_per_txn, which adds actors, clients and routing.
func BenchmarkTPCCMix(b *testing.B) {
	tb := newTPCCBench(b, 300_000)
	tb.run(b, func(*messages.TxnSubmit) bool { return true })
}
