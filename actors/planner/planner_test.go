package planner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/control/cohortgen"
	"github.com/aura-runtime/aura/control/plane"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
)

// protoactor's dead-letter throttle keeps a goroutine for one throttle
// period after a message reaches a stopped actor (a late push result or tick
// after the test poisoned the planner); it ends by itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// fakeCluster is a Pusher whose nodes assemble pushes in memory; a node in
// mute never answers (its pushes time out).
type fakeCluster struct {
	mu      sync.Mutex
	asm     map[string]*Assembler
	mute    map[string]bool
	maps    map[string][]*control.OwnerMap // installed maps, in order
	rosters map[string][][]string          // the roster installed with each
	at      map[string][]time.Time         // when each was installed
	from    map[string][]string            // the planner that published each
	chunk   map[string]int                 // pushes received
}

func newFakeCluster(names ...string) *fakeCluster {
	c := &fakeCluster{asm: map[string]*Assembler{}, mute: map[string]bool{}, maps: map[string][]*control.OwnerMap{},
		rosters: map[string][][]string{}, chunk: map[string]int{}, at: map[string][]time.Time{}, from: map[string][]string{}}
	for _, n := range names {
		c.asm[n] = NewAssembler(0)
	}
	return c
}

func (c *fakeCluster) Push(ctx context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	c.mu.Lock()
	if c.mute[node] {
		c.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer c.mu.Unlock()
	a := c.asm[node]
	if a == nil {
		return nil, fmt.Errorf("no node %s", node)
	}
	c.chunk[node]++
	ack := &messages.OwnerMapAck{Epoch: p.GetEpoch(), Node: node, ChunkIndex: p.GetChunkIndex()}
	m, err := a.Offer(p)
	switch {
	case errors.Is(err, ErrNeedFull):
		ack.NeedFull = true
	case err != nil:
		ack.Error = err.Error()
	case m != nil:
		c.maps[node] = append(c.maps[node], m)
		c.rosters[node] = append(c.rosters[node], a.Roster())
		c.at[node] = append(c.at[node], time.Now())
		c.from[node] = append(c.from[node], a.InstalledFrom())
	}
	ack.InstalledEpoch = a.Installed().Epoch
	ack.InstalledPlanner = a.InstalledFrom()
	return ack, nil
}

func (c *fakeCluster) installed(node string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asm[node].Installed().Epoch
}

// driver feeds heartbeats of a partitioned workload (tenant t's transactions
// run on node t mod 3) to the planner actor.
type driver struct {
	prof  []*accessgraph.Profiler
	rng   *rand.Rand
	shift int // drift: tenant t runs on node (t + shift) mod n
	// installed, if set, gives each node's installed epoch for its
	// summaries (ownermap_epoch).
	installed func(node string) uint64
	// cross is the share of transactions whose last key group belongs to
	// another tenant (co-access across cohorts: what refinement looks at).
	cross float64
}

func newDriver(t *testing.T, n int) *driver {
	d := &driver{rng: rand.New(rand.NewPCG(7, 7))}
	for i := range n {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed = fmt.Sprintf("cn-%d", i), uint32(i), uint64(i+1)
		p, err := accessgraph.NewProfiler(pc)
		if err != nil {
			t.Fatal(err)
		}
		d.prof = append(d.prof, p)
	}
	return d
}

func (d *driver) beat(root *actor.RootContext, pid *actor.PID, tick uint64) {
	w := make([]control.KeyGroup, 3)
	for range 3000 {
		tn := d.rng.IntN(12)
		for j := range w {
			w[j] = control.KeyGroup(uint64(tn)<<20 | uint64(d.rng.IntN(10)))
		}
		if d.cross > 0 && d.rng.Float64() < d.cross {
			w[len(w)-1] = control.KeyGroup(uint64(d.rng.IntN(12))<<20 | uint64(d.rng.IntN(10)))
		}
		d.prof[(tn+d.shift)%len(d.prof)].Record(w, nil)
	}
	for i, p := range d.prof {
		s := p.Summary(tick, accessgraph.SummaryV2)
		if d.installed != nil {
			s.OwnermapEpoch = d.installed(fmt.Sprintf("cn-%d", i))
		}
		root.Send(pid, s)
	}
}

func status(t *testing.T, root *actor.RootContext, pid *actor.PID) Status {
	t.Helper()
	r, err := root.RequestFuture(pid, GetStatus{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return r.(Status)
}

func start(t *testing.T, fc *fakeCluster, names []string) (*actor.ActorSystem, *actor.PID) {
	return startWith(t, fc, names, len(names))
}

// startWith starts a planner with slots roster slots, told that names are
// live.
func startWith(t *testing.T, fc *fakeCluster, names []string, slots int) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	return startConfig(t, fc, names, DefaultConfig("cn-0", slots))
}

// startConfig is startWith with cfg (its push timeout and chunk size set
// for tests).
func startConfig(t *testing.T, fc *fakeCluster, names []string, cfg Config) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	cfg.PushTimeout = 100 * time.Millisecond
	cfg.ChunkBytes = 64 // many chunks per manifest: reassembly is exercised
	sys, pid := spawn(t, fc, cfg)
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 1})
	return sys, pid
}

// spawn starts a planner with cfg and a 10 ms tick, told of no node yet.
func spawn(t *testing.T, fc Pusher, cfg Config) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	cfg.Tick = 10 * time.Millisecond
	a, err := NewActor(cfg, fc)
	if err != nil {
		t.Fatal(err)
	}
	return sys, sys.Root.Spawn(a.Props(4096))
}

func stop(sys *actor.ActorSystem, pid *actor.PID) {
	_ = sys.Root.PoisonFuture(pid).Wait()
	sys.Shutdown()
}

// waitFor polls cond every few milliseconds, feeding heartbeats, until it
// holds or 20 s pass.
func waitFor(t *testing.T, d *driver, sys *actor.ActorSystem, pid *actor.PID, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tick := uint64(1); ; tick++ {
		d.beat(sys.Root, pid, tick)
		time.Sleep(10 * time.Millisecond)
		st := status(t, sys.Root, pid)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, st)
		}
	}
}

func TestPlannerPublishesAcknowledgedEpochs(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	st := waitFor(t, d, sys, pid, "an acknowledged map with a cohort per tenant, after 30 ticks", func(s Status) bool {
		return s.Acked >= 1 && s.Cohorts >= 12 && s.Tick >= 30
	})
	for _, n := range names {
		if got := fc.installed(n); got < st.Acked {
			t.Fatalf("%s installed epoch %d < acknowledged %d", n, got, st.Acked)
		}
	}
	// Every node installed the same maps, epochs without gaps.
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ref := fc.maps[names[0]]
	for _, n := range names {
		ms := fc.maps[n]
		for i, m := range ms {
			if i > 0 && m.Epoch != ms[i-1].Epoch+1 {
				t.Fatalf("%s installed epoch %d after %d", n, m.Epoch, ms[i-1].Epoch)
			}
			if i < len(ref) && !manifest.Equal(m, ref[i]) {
				t.Fatalf("%s and %s installed different maps at epoch %d", n, names[0], m.Epoch)
			}
		}
	}
	// Tenants' key groups end up owned by their transactions' node.
	last := ref[len(ref)-1]
	local, total := 0, 0
	for _, p := range last.Cohorts {
		for _, kg := range p.KeyGroups {
			total++
			if int(uint64(kg)>>20)%3 == p.Owner {
				local++
			}
		}
	}
	if total == 0 || local*10 < total*9 {
		t.Fatalf("%d of %d owned key groups on their tenant's node", local, total)
	}
}

// TestPlannerRefinesOffTheActor: the actor runs the cohort generator's
// Louvain refinement on a goroutine of its own (RefineInline off), hands
// the result back to the loop, and keeps planning meanwhile.
func TestPlannerRefinesOffTheActor(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	d.cross = 0.1
	st := waitFor(t, d, sys, pid, "two refinements off the actor and an acknowledged map", func(s Status) bool {
		return s.Refines >= 2 && s.Acked >= 1 && s.Cohorts >= 1
	})
	if st.RefineMicros == 0 || st.MaxTickMicros <= 0 {
		t.Fatalf("refinement or tick time not accounted: %+v", st)
	}
}

// TestPlannerOffersOnlyItsOwnRefinement: a refinement result is offered
// only when it is the actor's in-flight one and its loop is still the
// actor's; a result of another planner that ran on this PID, one whose loop
// restarted (taking over) and a panicked one are dropped and counted.
func TestPlannerOffersOnlyItsOwnRefinement(t *testing.T) {
	a, err := NewActor(DefaultConfig("cn-0", 2), newFakeCluster("cn-0", "cn-1"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, refines, dropped uint64, refining bool) {
		t.Helper()
		if st := a.snapshot(); st.Refines != refines || st.RefinesDropped != dropped || st.Refining != refining {
			t.Fatalf("%s: refines %d dropped %d refining %v; want %d, %d, %v",
				what, st.Refines, st.RefinesDropped, st.Refining, refines, dropped, refining)
		}
	}
	start := func() *cohortgen.RefineRequest {
		req := &cohortgen.RefineRequest{}
		a.inflight, a.inflightLoop = req, a.loop
		return req
	}
	// Another planner's result while this one runs its own: dropped, and
	// this one's refinement is still running.
	own := start()
	a.onRefineDone(refineDone{req: &cohortgen.RefineRequest{}, res: &cohortgen.RefineResult{}})
	check("foreign result", 0, 1, true)
	// The loop restarted while it ran.
	l, err := plane.New(a.cfg.Loop)
	if err != nil {
		t.Fatal(err)
	}
	a.loop = l
	a.onRefineDone(refineDone{req: own, res: &cohortgen.RefineResult{Req: own}})
	check("result for a restarted loop", 1, 2, false)
	// A panicked refinement.
	p := start()
	a.onRefineDone(refineDone{req: p, panic: "boom"})
	check("panicked", 2, 3, false)
	// Its own, on its own loop: offered.
	ok := start()
	a.onRefineDone(refineDone{req: ok, res: &cohortgen.RefineResult{Req: ok}})
	check("own result", 3, 3, false)
	// A late duplicate of it: dropped.
	a.onRefineDone(refineDone{req: ok, res: &cohortgen.RefineResult{Req: ok}})
	check("late duplicate", 3, 4, false)
}

func TestPlannerWaitsForAcksAndDropsGoneNodes(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	fc.mute["cn-2"] = true
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	st := waitFor(t, d, sys, pid, "a first epoch held up by a silent node", func(s Status) bool {
		return s.Epoch >= 1 && s.Deferred >= 5
	})
	if st.Epoch != 1 || st.Acked != 0 {
		t.Fatalf("with cn-2 silent: epoch %d acked %d, want 1 published and none acknowledged", st.Epoch, st.Acked)
	}
	// cn-2 leaves the membership: the epoch no longer waits for it.
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0", "cn-1", ""}, MembershipEpoch: 2})
	st = waitFor(t, d, sys, pid, "epochs to advance without cn-2", func(s Status) bool { return s.Acked >= 2 })
	if fc.installed("cn-2") != 0 {
		t.Fatal("the silent node installed a map")
	}
	// The planner placed nothing on the node that is gone.
	fc.mu.Lock()
	ms := fc.maps["cn-0"]
	fc.mu.Unlock()
	for _, p := range ms[len(ms)-1].Cohorts {
		if p.Owner == 2 {
			t.Fatalf("cohort %d placed on the departed node at epoch %d", p.ID, ms[len(ms)-1].Epoch)
		}
	}
}

func TestPlannerResendsFullToNodeWithoutBase(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 2)
	waitFor(t, d, sys, pid, "a map with a cohort per tenant", func(s Status) bool { return s.Acked >= 1 && s.Cohorts >= 12 })
	// cn-1 restarts with nothing installed, and the workload drifts so that
	// new epochs follow as deltas it cannot apply: it asks for the full
	// manifest and catches up.
	fc.mu.Lock()
	fc.asm["cn-1"] = NewAssembler(0)
	fc.mu.Unlock()
	d.shift = 1
	st0 := status(t, sys.Root, pid)
	waitFor(t, d, sys, pid, "cn-1 to catch up", func(s Status) bool {
		return s.Acked > st0.Acked && fc.installed("cn-1") == s.Acked
	})
}

func (c *fakeCluster) lastRoster(node string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.rosters[node]
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

// TestPlannerRosterFollowsMembership: live nodes get stable slots, a
// joining node gets the current map at once and a fresh slot, a departed
// node's slot stays reserved while a map names it and is reused (by the
// next node to join, once the index space is full) only after no map does;
// in every map a node installed, each owner index names a node of that
// map's roster, and an index names the same node in consecutive maps that
// both use it.
func TestPlannerRosterFollowsMembership(t *testing.T) {
	all := []string{"cn-0", "cn-1", "cn-2", "cn-3", "cn-4"}
	fc := newFakeCluster(all...)
	sys, pid := startWith(t, fc, all[:3], 4)
	defer stop(sys, pid)
	d := newDriver(t, 5) // cn-3 and cn-4 beat too; dropped while they have no slot
	waitFor(t, d, sys, pid, "an acknowledged map on three nodes", func(s Status) bool { return s.Acked >= 1 && s.Cohorts >= 6 })
	if r := fc.lastRoster("cn-1"); !slices.Equal(r, all[:3]) {
		t.Fatalf("roster %v, want %v (slots in the order Nodes listed them)", r, all[:3])
	}

	// cn-3 joins: a slot at once, the current map at once, cohorts soon.
	sys.Root.Send(pid, Nodes{Names: all[:4], MembershipEpoch: 2})
	waitFor(t, d, sys, pid, "cn-3 to hold the current map and own a cohort", func(s Status) bool {
		r := fc.lastRoster("cn-3")
		return fc.installed("cn-3") == s.Epoch && len(r) == 4 && r[3] == "cn-3" && ownsAny(fc, "cn-3", 3)
	})

	// cn-1 leaves: its cohorts move, then its slot is freed.
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0", "cn-2", "cn-3"}, MembershipEpoch: 3})
	waitFor(t, d, sys, pid, "a map without cn-1", func(s Status) bool {
		r := fc.lastRoster("cn-0")
		return s.Acked == s.Epoch && len(r) == 4 && r[1] == "" && r[2] == "cn-2" && r[3] == "cn-3"
	})
	// cn-4 joins: the index space (4) is full, so it reuses freed slot 1.
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0", "cn-2", "cn-3", "cn-4"}, MembershipEpoch: 4})
	waitFor(t, d, sys, pid, "cn-4 in slot 1, owning a cohort", func(s Status) bool {
		r := fc.lastRoster("cn-4")
		return len(r) == 4 && r[1] == "cn-4" && ownsAny(fc, "cn-4", 1)
	})

	fc.mu.Lock()
	defer fc.mu.Unlock()
	ms, rs := fc.maps["cn-0"], fc.rosters["cn-0"]
	for i, m := range ms {
		if err := ValidateRoster(m, rs[i]); err != nil {
			t.Fatalf("epoch %d: %v", m.Epoch, err)
		}
		if i == 0 {
			continue
		}
		for _, p := range m.Cohorts {
			if referenced(ms[i-1], p.Owner) && rs[i-1][p.Owner] != rs[i][p.Owner] {
				t.Fatalf("owner index %d is %s at epoch %d and %s at epoch %d", p.Owner, rs[i-1][p.Owner], ms[i-1].Epoch,
					rs[i][p.Owner], m.Epoch)
			}
		}
	}
}

// ownsAny reports whether the last map node installed gives a cohort to
// owner index i.
func ownsAny(fc *fakeCluster, node string, i int) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ms := fc.maps[node]
	return len(ms) > 0 && referenced(ms[len(ms)-1], i)
}

// clusterOfOldPlanner returns a fake cluster of names (two nodes) that
// installed epoch 7 of another planner ("cn-9"), cohorts on both.
func clusterOfOldPlanner(t *testing.T, names []string) *fakeCluster {
	t.Helper()
	fc := newFakeCluster(names...)
	old := testMap(7, 4, 3, 0)
	for i := range old.Cohorts {
		old.Cohorts[i].Owner %= len(names)
	}
	ps, err := PushesWithRoster(nil, old, names, 1<<20, "cn-9", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if m, err := fc.asm[n].Offer(ps[0]); err != nil || m == nil {
			t.Fatal(err)
		}
	}
	return fc
}

// TestPlannerTakesOverAboveInstalledEpochs: nodes hold epoch 7 of another
// planner; a new planner first publishes an empty map at 9 (above anything
// the old one can have published), then its own maps above that.
func TestPlannerTakesOverAboveInstalledEpochs(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := clusterOfOldPlanner(t, names)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 2)
	d.installed = fc.installed
	st := waitFor(t, d, sys, pid, "the new planner's own cohorts", func(s Status) bool { return s.Acked >= 10 && s.Cohorts > 0 })
	if st.Base != 9 {
		t.Fatalf("base %d, want 9", st.Base)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ms := fc.maps["cn-1"] // installed through the planner (epoch 7 was not)
	if ms[0].Epoch != 9 || len(ms[0].Cohorts) != 0 {
		t.Fatalf("first map of the new planner: epoch %d with %d cohorts, want an empty map at 9", ms[0].Epoch, len(ms[0].Cohorts))
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Epoch != ms[i-1].Epoch+1 {
			t.Fatalf("epoch %d after %d", ms[i].Epoch, ms[i-1].Epoch)
		}
	}
}
