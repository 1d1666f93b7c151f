package actors

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

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
	mem, base, layout := loadedMemory(t, wl, 2<<30)

	names := []string{"cn-0", "cn-1", "cn-2"}
	net := NewInProcess()
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
	beats := NewHeartbeatSender(psys.Root)

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
			Heartbeat: func(s *messages.AccessSummary, reply func(*messages.LeaseGrant)) { beats.Send(ppid, s, reply) }}
		n, err := NewNode(nc, dev, layout, wl)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
		net.Add(n)
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
				backoff := 20 * time.Microsecond
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
					// Retry with a jittered exponential backoff, as clients
					// do (SPEC §4; the simulator's defaults: 20 µs doubling
					// up to 2 ms). Without it, attempts that conflict on the
					// hot WAREHOUSE / DISTRICT rows retry in lockstep.
					time.Sleep(backoff/2 + rand.N(backoff/2+1))
					backoff = min(2*backoff, 2*time.Millisecond)
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
	rate := func(c *counts) (local, atomics, attempts float64) {
		total := c.local.Load() + c.rpc.Load() + c.cas.Load()
		if total == 0 || c.committed.Load() == 0 {
			return 0, 0, 0
		}
		n := float64(c.committed.Load())
		return float64(c.local.Load()) / float64(total), float64(c.atomics.Load()) / n, float64(c.attempts.Load()) / n
	}
	el, ea, et := rate(&early)
	ll, la, lt := rate(&late)
	st, err := psys.Root.RequestFuture(ppid, planner.GetStatus{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("early: attempts %d failed CAS %d locks mn %d; late: attempts %d failed CAS %d locks mn %d rpc %d local %d", early.attempts.Load(), early.failed.Load(), early.cas.Load(), late.attempts.Load(), late.failed.Load(), late.cas.Load(), late.rpc.Load(), late.local.Load())
	t.Logf("first 3 s: %d committed, %.2f attempts/commit, local hit %.1f%%, %.2f atomics/txn; last 3 s: %d committed, %.2f attempts/commit, local hit %.1f%%, %.2f atomics/txn; planner %+v",
		early.committed.Load(), et, 100*el, ea, late.committed.Load(), lt, 100*ll, la, st)
	if late.committed.Load() == 0 {
		t.Fatal("nothing committed once ownership was learned")
	}
	if ll < 0.5 {
		t.Errorf("local hit %.1f%% after 3 s, want ≥ 50%%: ownership was not learned", 100*ll)
	}
	// Cohort re-cuts no longer abort attempts (see "Re-cut cohorts" in
	// package owner): once ownership is learned, nearly every transaction
	// commits at its first or second attempt (measured 1.10–1.17; before
	// the re-cut handling, 5.4 with this backoff and 8.6 without).
	if lt > maxAttemptsPerCommit {
		t.Errorf("last 3 s: %.2f attempts per commit, want ≤ %.1f", lt, maxAttemptsPerCommit)
	}
	// Atomics per committed transaction fall once ownership is learned
	// (measured: 14–15 in the first 3 s, 10–11.5 in the last; before the
	// re-cut handling they rose to 40+). They stay above the ≤ 1.5 of a
	// fully owned steady state because every TPC-C insert (ORDER_LINE,
	// ORDER, NEW_ORDER, HISTORY: about 6 per transaction of the mix)
	// claims a fresh empty slot, whose word 0 only a CAS may take, and the
	// records first touched in the run (STOCK, CUSTOMER) and those of key
	// groups the generator re-cuts pay one CAS each (see "Limits" in
	// package owner).
	if la > maxLateAtomicsPerTxn || la > lateAtomicsShare*ea {
		t.Errorf("last 3 s: %.2f atomics/txn, want ≤ %.0f and ≤ %.0f%% of the first 3 s (%.2f)", la, maxLateAtomicsPerTxn, 100*lateAtomicsShare, ea)
	}
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

// Bounds of TestClusterLearnsOwnership's last 3 s (see the test).
const (
	maxAttemptsPerCommit = 2.0
	maxLateAtomicsPerTxn = 15.0
	lateAtomicsShare     = 0.9
)

// TestOwnershipRecut: a node applying OwnerMaps reconfigures the cohorts it
// keeps with other key groups in place (same install epoch, still active:
// no freeze, no Retry), installs new ones even over key groups taken from
// a cohort of its own, and freezes and retires only the cohorts that leave.
func TestOwnershipRecut(t *testing.T) {
	o, err := newOwnership(OwnershipConfig{Names: []string{"cn-0", "cn-1"}}, "cn-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	place := func(id control.CohortID, owner int, kgs ...control.KeyGroup) control.Placement {
		return control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: kgs}, Owner: owner}
	}
	maps := []*control.OwnerMap{
		{Epoch: 1, Cohorts: []control.Placement{place(1, 0, 1, 2), place(2, 0, 3), place(5, 0, 6), place(9, 1, 7)}},
		// Key group 2 moves from cohort 1 to cohort 2, key group 1 to a new
		// cohort 3; cohort 5 leaves for cn-1.
		{Epoch: 2, Cohorts: []control.Placement{place(1, 0), place(2, 0, 2, 3), place(3, 0, 1), place(5, 1, 6), place(9, 1, 7)}},
		// Key group 6 comes back into cohort 1.
		{Epoch: 3, Cohorts: []control.Placement{place(1, 0, 6), place(2, 0, 2, 3), place(3, 0, 1), place(9, 1, 7)}},
	}
	want := []map[control.KeyGroup][2]uint64{ // key group → {cohort, install epoch}
		{1: {1, 1}, 2: {1, 1}, 3: {2, 1}, 6: {5, 1}},
		{1: {3, 2}, 2: {2, 1}, 3: {2, 1}},
		{1: {3, 2}, 2: {2, 1}, 3: {2, 1}, 6: {1, 1}},
	}
	for i, m := range maps {
		o.mu.Lock()
		err := o.install(m)
		o.mu.Unlock()
		if err != nil {
			t.Fatalf("epoch %d: %v", m.Epoch, err)
		}
		_ = o.svc.Do(func(tb *owner.Table) error {
			for kg := control.KeyGroup(1); kg <= 7; kg++ {
				c, e, p, ok := tb.CohortOf(kg)
				w, mine := want[i][kg]
				if ok != mine || ok && (c != w[0] || e != w[1] || p != owner.PhaseActive) {
					t.Errorf("epoch %d: key group %d in cohort %d at %d (%s, %v), want %v (%v)", m.Epoch, kg, c, e, p, ok, w, mine)
				}
			}
			if d, err := tb.Drain(5); m.Epoch == 2 && err == nil {
				t.Errorf("epoch 2: cohort 5 left but is still installed: %+v", d)
			}
			return nil
		})
	}
}
