package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/messages"
)

// askLease sends node's heartbeat, reporting installed, as a request and
// returns the planner's answer.
func askLease(t *testing.T, root *actor.RootContext, pid *actor.PID, node string, installed uint64, roster ...string) *messages.LeaseGrant {
	t.Helper()
	// A tick far above the driver's: the summary is applied (or dropped)
	// like any other; the lease is answered either way.
	s := &messages.AccessSummary{Version: 2, Node: node, Tick: uint64(time.Now().UnixNano()), OwnermapEpoch: installed,
		Roster: roster}
	r, err := root.RequestFuture(pid, s, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	g, ok := r.(*messages.LeaseGrant)
	if !ok {
		t.Fatalf("answer %T, want *messages.LeaseGrant", r)
	}
	return g
}

// placesOn reports whether the idx-th map node installed places a cohort
// on slot.
func placesOn(fc *fakeCluster, node string, idx, slot int) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, p := range fc.maps[node][idx].Cohorts {
		if p.Owner == slot {
			return true
		}
	}
	return false
}

// TestPlannerLeases: a live node's heartbeat earns a lease; a node that
// departs keeps its cohorts until every lease it was granted ran out (plus
// the margin), and only then does a map move them; one that acknowledged a
// map placing nothing on it holds nothing up; back, a node gets no lease
// before it installed the map that was current when it returned.
func TestPlannerLeases(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(append(names, "cn-3")...)
	// No transaction runs on cn-3, so it gets no cohort as long as the
	// three others have room: with four nodes live each may carry 1.26×
	// a quarter of the load by default, 95% for three, and the planner
	// would rescue what does not fit onto the idle cn-3 (this driver's
	// transactions do not follow ownership, a router's would). A budget
	// slack of 0.5 leaves the three room for everything.
	cfg := DefaultConfig("cn-0", 4)
	cfg.Loop.Ownership.BudgetSlack = 0.5
	sys, pid := startConfig(t, fc, append(names, "cn-3"), cfg)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	d.installed = fc.installed
	st := waitFor(t, d, sys, pid, "an acknowledged map with cohorts on every node but cn-3", func(s Status) bool {
		return s.Acked >= 1 && s.Acked == s.Epoch && ownsAny(fc, "cn-0", 0) && ownsAny(fc, "cn-0", 1) && ownsAny(fc, "cn-0", 2) &&
			fc.installed("cn-3") == s.Epoch
	})
	if ownsAny(fc, "cn-0", 3) {
		t.Fatal("cn-3 owns a cohort without a transaction")
	}

	// cn-3, leased but owning nothing, departs: planning goes on.
	if g := askLease(t, sys.Root, pid, "cn-3", fc.installed("cn-3")); !g.Granted {
		t.Fatalf("cn-3: %+v", g)
	}
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 2})
	holds := status(t, sys.Root, pid).LeaseHolds
	st = waitFor(t, d, sys, pid, "20 ticks after cn-3 left", func(s Status) bool { return s.Tick >= st.Tick+20 })
	if st.LeaseHolds != holds {
		t.Fatalf("cn-3 owned nothing, yet its departure held planning up %d times", st.LeaseHolds-holds)
	}
	// Nothing moved, yet the nodes' installed roster drops cn-3 (a later
	// planner would count it among the known nodes).
	waitFor(t, d, sys, pid, "a map whose roster drops cn-3", func(Status) bool {
		return !slices.Contains(fc.lastRoster("cn-0"), "cn-3")
	})
	if g := askLease(t, sys.Root, pid, "cn-9", 0); g.Granted || g.Reason != "not live" {
		t.Fatalf("a node that is not live: %+v", g)
	}
	askedAt := time.Now() // the planner's grant is no earlier
	g := askLease(t, sys.Root, pid, "cn-1", fc.installed("cn-1"))
	if !g.Granted || g.LeaseMicros != uint64(time.Second.Microseconds()) || g.Planner != "cn-0" || g.Epoch != st.Epoch {
		t.Fatalf("a live node with the current map: %+v (epoch %d)", g, st.Epoch)
	}
	fc.mu.Lock()
	before := len(fc.maps["cn-0"])
	fc.mu.Unlock()

	// cn-1 departs (crashed, or cut off: the planner cannot tell).
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0", "cn-2"}, MembershipEpoch: 3})
	st = waitFor(t, d, sys, pid, "cn-1's cohorts to move", func(s Status) bool { return !ownsAny(fc, "cn-0", 1) })
	wait := leaseWait(t, DefaultConfig("cn-0", 3))
	fc.mu.Lock()
	for i := before; i < len(fc.maps["cn-0"]); i++ {
		m, at := fc.maps["cn-0"][i], fc.at["cn-0"][i]
		fc.mu.Unlock()
		if !placesOn(fc, "cn-0", i, 1) && at.Sub(askedAt) < wait {
			t.Fatalf("epoch %d moved cn-1's cohorts %v after its lease was granted, want ≥ %v", m.Epoch, at.Sub(askedAt), wait)
		}
		fc.mu.Lock()
	}
	fc.mu.Unlock()
	if st.LeaseHolds == 0 || st.LeaseGrants == 0 || !st.Quorum {
		t.Fatalf("status %+v: want lease holds, grants and a quorum", st)
	}

	// cn-1 returns, still holding the map it had when it went.
	stale := fc.installed("cn-1")
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 4})
	cur := status(t, sys.Root, pid).Epoch
	if g := askLease(t, sys.Root, pid, "cn-1", stale); g.Granted || g.Reason != "stale map" {
		t.Fatalf("back with epoch %d while %d is current: %+v", stale, cur, g)
	}
	if g := askLease(t, sys.Root, pid, "cn-1", cur); !g.Granted {
		t.Fatalf("back with the current map %d: %+v", cur, g)
	}
}

// TestPlannerNeedsAMajority: a planner that sees at most half of the known
// compute nodes (live ones, its roster, and the roster installed on its own
// node) publishes nothing and grants no lease; once a majority is live it
// goes on.
func TestPlannerNeedsAMajority(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	sys, pid := spawn(t, fc, DefaultConfig("cn-0", 3))
	defer stop(sys, pid)
	// Started on cn-0, cut off from the two others its installed map names.
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0"}, MembershipEpoch: 5, Known: names})
	d := newDriver(t, 3)
	st := waitFor(t, d, sys, pid, "30 ticks without a majority", func(s Status) bool { return s.NoQuorumTicks >= 30 })
	if st.Epoch != 0 || st.Quorum || fc.installed("cn-0") != 0 {
		t.Fatalf("in a minority: %+v, cn-0 installed %d", st, fc.installed("cn-0"))
	}
	if g := askLease(t, sys.Root, pid, "cn-0", 0); g.Granted || g.Reason != "no quorum" {
		t.Fatalf("lease in a minority: %+v", g)
	}
	sys.Root.Send(pid, Nodes{Names: names[:2], MembershipEpoch: 6, Known: names})
	waitFor(t, d, sys, pid, "a published map with two of three live", func(s Status) bool { return s.Acked >= 1 && s.Quorum })
	if g := askLease(t, sys.Root, pid, "cn-1", fc.installed("cn-1")); !g.Granted {
		t.Fatalf("lease with a majority: %+v", g)
	}
}

// TestPlannerTakeoverLeases: a planner taking over from another grants no
// lease before its first publication decision, and then only to nodes that
// installed its empty map: until then they hold the other planner's
// cohorts, which it may give to others.
func TestPlannerTakeoverLeases(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := clusterOfOldPlanner(t, names)
	cfg := DefaultConfig("cn-0", 2)
	cfg.StartupTicks = 1 << 20 // it starts once it heard from both nodes
	sys, pid := spawn(t, fc, cfg)
	defer stop(sys, pid)
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 1})
	if g := askLease(t, sys.Root, pid, "cn-0", 7, names...); g.Granted || g.Reason != "starting" {
		t.Fatalf("before hearing from cn-1: %+v", g)
	}
	d := newDriver(t, 2)
	d.installed = fc.installed
	waitFor(t, d, sys, pid, "the empty takeover map, acknowledged", func(s Status) bool { return s.Acked >= 9 })
	if g := askLease(t, sys.Root, pid, "cn-0", 7, names...); g.Granted || g.Reason != "stale map" {
		t.Fatalf("holding the other planner's map: %+v", g)
	}
	if g := askLease(t, sys.Root, pid, "cn-0", 9, names...); !g.Granted {
		t.Fatalf("holding the empty map: %+v", g)
	}
}

// TestPlannerCountsReportedRosters: a planner on a node that lost its map
// (Nodes.Known empty) still counts the nodes of the rosters its live
// nodes' heartbeats report: one live node whose map names three is no
// majority.
func TestPlannerCountsReportedRosters(t *testing.T) {
	fc := newFakeCluster("cn-0")
	sys, pid := start(t, fc, []string{"cn-0"})
	defer stop(sys, pid)
	if g := askLease(t, sys.Root, pid, "cn-0", 0, "cn-0", "cn-1", "cn-2"); g.Granted || g.Reason != "no quorum" {
		t.Fatalf("one live node of three reported: %+v", g)
	}
	if st := status(t, sys.Root, pid); st.Quorum || st.Epoch != 0 {
		t.Fatalf("status %+v: want no quorum and nothing published", st)
	}
}

// leaseWait is how long after its last grant a planner with cfg keeps a
// departed node's cohorts where they are.
func leaseWait(t *testing.T, cfg Config) time.Duration {
	t.Helper()
	a, err := NewActor(cfg, newFakeCluster())
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(a.leaseWaitMicros()) * time.Microsecond
}

// installedMaps returns the maps node installed, in order, and when.
func (c *fakeCluster) installedMaps(node string) ([]*control.OwnerMap, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.maps[node]), slices.Clone(c.at[node])
}

// removeNode asks the planner to stop counting node.
func removeNode(t *testing.T, root *actor.RootContext, pid *actor.PID, node string) *messages.RemoveNodeReply {
	t.Helper()
	r, err := root.RequestFuture(pid, &messages.RemoveNode{Node: node, Requester: "test"}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	rep, ok := r.(*messages.RemoveNodeReply)
	if !ok {
		t.Fatalf("answer %T, want *messages.RemoveNodeReply", r)
	}
	return rep
}

// TestPlannerRemoveNode: of two compute nodes one crashes; the survivor is
// no majority, so nothing is published and no lease granted, and the lost
// node's cohorts stay placed on it. An operator removes it (a live node or
// an unknown one is refused): the survivor is a majority again, and the
// lost node's cohorts move to it — only once the lease the lost node held
// ran out — and its slot leaves the roster. Back, it is counted again.
func TestPlannerRemoveNode(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 2)
	d.installed = fc.installed
	st := waitFor(t, d, sys, pid, "an acknowledged map with cohorts on both nodes", func(s Status) bool {
		return s.Acked >= 1 && s.Acked == s.Epoch && ownsAny(fc, "cn-0", 0) && ownsAny(fc, "cn-0", 1)
	})
	grantedAt := time.Now() // the planner's grant is no earlier
	if g := askLease(t, sys.Root, pid, "cn-1", fc.installed("cn-1"), names...); !g.Granted {
		t.Fatalf("cn-1: %+v", g)
	}

	// cn-1 crashes: one of two is no majority.
	sys.Root.Send(pid, Nodes{Names: names[:1], MembershipEpoch: 2, Known: names})
	d = newDriver(t, 1) // only cn-0 runs transactions now
	d.installed = fc.installed
	st = waitFor(t, d, sys, pid, "20 ticks without a majority", func(s Status) bool { return s.NoQuorumTicks >= 20 })
	if st.Quorum || st.Epoch != st.Acked || !ownsAny(fc, "cn-0", 1) {
		t.Fatalf("one of two live: %+v; want no new epoch and cn-1's cohorts where they were", st)
	}
	if g := askLease(t, sys.Root, pid, "cn-0", fc.installed("cn-0"), names...); g.Granted || g.Reason != "no quorum" {
		t.Fatalf("survivor's lease without a majority: %+v", g)
	}
	for _, tc := range []struct{ node, reason string }{{"cn-0", "live"}, {"cn-9", "unknown"}, {"", "bad name"}} {
		if r := removeNode(t, sys.Root, pid, tc.node); r.Removed || r.Reason != tc.reason || r.Quorum {
			t.Fatalf("remove %q: %+v, want refused %q", tc.node, r, tc.reason)
		}
	}
	r := removeNode(t, sys.Root, pid, "cn-1")
	if !r.Removed || !r.Quorum || r.Live != 1 || r.Known != 1 || r.Planner != "cn-0" {
		t.Fatalf("remove cn-1: %+v", r)
	}
	if again := removeNode(t, sys.Root, pid, "cn-1"); !again.Removed {
		t.Fatalf("removing cn-1 again: %+v", again)
	}
	maps, _ := fc.installedMaps("cn-0")
	before := len(maps)
	st = waitFor(t, d, sys, pid, "cn-1's cohorts moved and cn-1 out of the roster", func(s Status) bool {
		return !ownsAny(fc, "cn-0", 1) && !slices.Contains(fc.lastRoster("cn-0"), "cn-1") && s.Acked == s.Epoch
	})
	wait := leaseWait(t, DefaultConfig("cn-0", 2))
	maps, at := fc.installedMaps("cn-0")
	for i := before; i < len(maps); i++ {
		if !placesOn(fc, "cn-0", i, 1) && at[i].Sub(grantedAt) < wait {
			t.Fatalf("epoch %d moved cn-1's cohorts %v after its lease was granted, want ≥ %v", maps[i].Epoch, at[i].Sub(grantedAt), wait)
		}
	}
	if !st.Quorum || st.Removals != 1 {
		t.Fatalf("after the removal: %+v", st)
	}
	if g := askLease(t, sys.Root, pid, "cn-0", fc.installed("cn-0"), "cn-0"); !g.Granted {
		t.Fatalf("survivor's lease after the removal: %+v", g)
	}

	// cn-1 comes back: it is known (and live) again.
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 3, Known: []string{"cn-0"}})
	if st := status(t, sys.Root, pid); len(st.Removed) != 0 || !st.Quorum {
		t.Fatalf("cn-1 back: %+v, want it no longer removed", st)
	}
	sys.Root.Send(pid, Nodes{Names: names[:1], MembershipEpoch: 4, Known: names})
	if st := status(t, sys.Root, pid); st.Quorum {
		t.Fatalf("cn-1 gone again, not removed this time: %+v, want no majority", st)
	}
}

// TestPlannerRemovalKeepsTheLeaseWait: a planner that starts on the
// survivor of two nodes and is told to remove the other one publishes its
// first map only once a lease the other one may hold — granted by the
// planner before it, which this one cannot know — has run out.
func TestPlannerRemovalKeepsTheLeaseWait(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := newFakeCluster(names...)
	started := time.Now()
	sys, pid := spawn(t, fc, DefaultConfig("cn-0", 2))
	defer stop(sys, pid)
	sys.Root.Send(pid, Nodes{Names: names[:1], MembershipEpoch: 3, Known: names})
	if r := removeNode(t, sys.Root, pid, "cn-1"); !r.Removed || !r.Quorum {
		t.Fatalf("remove cn-1: %+v", r)
	}
	d := newDriver(t, 1)
	d.installed = fc.installed
	waitFor(t, d, sys, pid, "a published map", func(s Status) bool { return s.Acked >= 1 })
	maps, at := fc.installedMaps("cn-0")
	wait := leaseWait(t, DefaultConfig("cn-0", 2))
	if len(maps) == 0 || at[0].Sub(started) < wait {
		t.Fatalf("first map %v after the planner started, want ≥ %v", at[0].Sub(started), wait)
	}
	if st := status(t, sys.Root, pid); st.LeaseHolds == 0 {
		t.Fatalf("status %+v: want the first map held for cn-1's lease", st)
	}
}

// TestFullDrainAfterRollbacksOverBudget: a cohort whose migrations were
// rolled back over the drain budget twice in a row is moved next with a
// drain that runs to the deadline (fencing holders that never release),
// so that it cannot stay unmovable; any other outcome resets the count.
func TestFullDrainAfterRollbacksOverBudget(t *testing.T) {
	a, err := NewActor(DefaultConfig("cn-0", 2), newFakeCluster("cn-0", "cn-1"))
	if err != nil {
		t.Fatal(err)
	}
	a.roster, a.pubRoster = []string{"cn-0", "cn-1"}, []string{"cn-0", "cn-1"}
	a.live = map[string]bool{"cn-0": true, "cn-1": true}
	a.cur = &control.OwnerMap{Epoch: 5, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 7, KeyGroups: []control.KeyGroup{1}}, Owner: 0},
		{Cohort: control.Cohort{ID: 8, KeyGroups: []control.KeyGroup{2}}, Owner: 0}}}
	next := &control.OwnerMap{Epoch: 6, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 7, KeyGroups: []control.KeyGroup{1}}, Owner: 1},
		{Cohort: control.Cohort{ID: 8, KeyGroups: []control.KeyGroup{2}}, Owner: 1}}}
	full := func() map[control.CohortID]bool {
		out := map[control.CohortID]bool{}
		for _, mv := range a.departures(next) {
			out[mv.Cohort] = mv.FullDrain
		}
		return out
	}
	record := func(c control.CohortID, o transfer.Outcome, reason string) {
		a.noteOverBudget(transfer.Record{Move: transfer.Move{Cohort: c}, Outcome: o, Reason: reason})
	}
	overBudget := transfer.ReasonDrainOverBudget
	if f := full(); len(f) != 2 || f[7] || f[8] {
		t.Fatalf("first attempt: %v, want both moves with the budget", f)
	}
	record(7, transfer.Kept, overBudget)
	record(8, transfer.Kept, overBudget)
	record(7, transfer.Kept, overBudget)
	record(8, transfer.Kept, "freeze refused: MIGRATION_ACK_STATUS_STALE_EPOCH") // another cause resets
	if f := full(); !f[7] || f[8] {
		t.Fatalf("after two rollbacks over budget of 7, one of 8: %v, want only 7 to drain fully", f)
	}
	record(7, transfer.Moved, "")
	if f := full(); f[7] {
		t.Fatalf("after 7 moved: %v, want the budget again", f)
	}
	// Entries of cohorts the published map no longer places go once the
	// map is bounded by the published cohorts.
	for c := control.CohortID(100); c < 103; c++ {
		record(c, transfer.Kept, overBudget)
	}
	if len(a.overBudget) > len(a.cur.Cohorts) {
		t.Fatalf("%d cohorts counted, the published map has %d", len(a.overBudget), len(a.cur.Cohorts))
	}
}
