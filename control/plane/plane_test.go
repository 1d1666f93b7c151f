package plane

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
)

// world is a partitioned workload: tenants of kgsPerTenant key groups; a
// transaction writes three key groups of one tenant and runs on the tenant's
// home node, home(t) = t mod nodes, until drift() rotates the homes.
type world struct {
	nodes, tenants, kgsPerTenant int
	shift                        int
	rng                          *rand.Rand
	prof                         []*accessgraph.Profiler
}

func newWorld(t *testing.T, nodes, tenants, kgs int, seed uint64) *world {
	w := &world{nodes: nodes, tenants: tenants, kgsPerTenant: kgs, rng: rand.New(rand.NewPCG(seed, 1))}
	for i := range nodes {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed = fmt.Sprintf("cn-%d", i), uint32(i), seed+uint64(i)
		p, err := accessgraph.NewProfiler(pc)
		if err != nil {
			t.Fatal(err)
		}
		w.prof = append(w.prof, p)
	}
	return w
}

func (w *world) home(tenant int) int { return (tenant + w.shift) % w.nodes }

func (w *world) kg(tenant, i int) control.KeyGroup {
	return control.KeyGroup(uint64(tenant)<<20 | uint64(i))
}

// window runs n transactions and applies every node's summary to l.
func (w *world) window(t *testing.T, l *Loop, tick uint64, n int) {
	t.Helper()
	writes := make([]control.KeyGroup, 3)
	for range n {
		tn := w.rng.IntN(w.tenants)
		for j := range writes {
			writes[j] = w.kg(tn, w.rng.IntN(w.kgsPerTenant))
		}
		w.prof[w.home(tn)].Record(writes, nil)
	}
	for _, p := range w.prof {
		if err := l.Apply(p.Summary(tick, accessgraph.SummaryV2)); err != nil {
			t.Fatal(err)
		}
	}
}

// ownedAtHome returns the fraction of the tenants' key groups owned by the
// tenant's home node.
func (w *world) ownedAtHome(l *Loop) float64 {
	hit := 0
	for tn := range w.tenants {
		for i := range w.kgsPerTenant {
			if l.OwnerOf(w.kg(tn, i)) == w.home(tn) {
				hit++
			}
		}
	}
	return float64(hit) / float64(w.tenants*w.kgsPerTenant)
}

func run(t *testing.T, seed uint64, ticks int, onTick func(tick uint64, l *Loop, d Decision)) *Loop {
	return runCfg(t, DefaultConfig(4), seed, ticks, onTick)
}

func runCfg(t *testing.T, cfg Config, seed uint64, ticks int, onTick func(tick uint64, l *Loop, d Decision)) *Loop {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, 4, 16, 12, seed)
	for tick := uint64(1); tick <= uint64(ticks); tick++ {
		if tick == 40 {
			w.shift = 1 // drift: every tenant's transactions move to the next node
		}
		w.window(t, l, tick, 4000)
		prev := l.Current().Clone()
		d, err := l.Tick(TickInput{Tick: tick})
		if err != nil {
			t.Fatal(err)
		}
		checkDecision(t, prev, l, d)
		if onTick != nil {
			onTick(tick, l, d)
		}
		if tick == 39 {
			if f := w.ownedAtHome(l); f < 0.95 {
				t.Fatalf("after 39 ticks %.0f%% of the key groups are owned by their tenant's home node, want ≥ 95%%", 100*f)
			}
		}
	}
	if f := w.ownedAtHome(l); ticks >= 60 && f < 0.95 {
		t.Fatalf("%d ticks after a drift %.0f%% of the key groups are owned by their tenant's new home node, want ≥ 95%%", ticks-40, 100*f)
	}
	return l
}

// checkDecision asserts Tick's promises: epoch + 1 on a change, a valid map,
// and Moves that turn the previous owners into the new ones.
func checkDecision(t *testing.T, prev *control.OwnerMap, l *Loop, d Decision) {
	t.Helper()
	if d.Map == nil {
		if len(d.Moves) != 0 || l.Current().Epoch != prev.Epoch {
			t.Fatalf("no new map but %d moves, epoch %d → %d", len(d.Moves), prev.Epoch, l.Current().Epoch)
		}
		return
	}
	if d.Map.Epoch != prev.Epoch+1 {
		t.Fatalf("new map at epoch %d after %d", d.Map.Epoch, prev.Epoch)
	}
	if err := d.Map.Validate(); err != nil {
		t.Fatal(err)
	}
	owners := map[control.KeyGroup]int{}
	for _, p := range prev.Cohorts {
		for _, kg := range p.KeyGroups {
			owners[kg] = p.Owner
		}
	}
	for _, m := range d.Moves {
		for _, kg := range m.KeyGroups {
			from, ok := owners[kg]
			if !ok {
				from = -1
			}
			if from != m.From {
				t.Fatalf("move of kg %d from %d, but it was owned by %d", kg, m.From, from)
			}
			if m.To < 0 {
				delete(owners, kg)
			} else {
				owners[kg] = m.To
			}
		}
	}
	want := map[control.KeyGroup]int{}
	for _, p := range d.Map.Cohorts {
		for _, kg := range p.KeyGroups {
			want[kg] = p.Owner
		}
	}
	if !reflect.DeepEqual(owners, want) {
		t.Fatalf("previous owners + moves ≠ new map's owners (%d vs %d key groups)", len(owners), len(want))
	}
}

func TestLoopLearnsOwnershipAndFollowsDrift(t *testing.T) {
	run(t, 1, 60, nil)
}

func TestLoopIsDeterministic(t *testing.T) {
	var a, b []*control.OwnerMap
	run(t, 3, 45, func(_ uint64, _ *Loop, d Decision) {
		if d.Map != nil {
			a = append(a, d.Map)
		}
	})
	run(t, 3, 45, func(_ uint64, _ *Loop, d Decision) {
		if d.Map != nil {
			b = append(b, d.Map)
		}
	})
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with the same input published different maps (%d vs %d)", len(a), len(b))
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	cfg := DefaultConfig(0)
	cfg.Fallback = []uint8{7}
	cfg.Cohorts.MaxCohortSize = 0
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"Nodes", "Fallback", "MaxCohortSize"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
}

func TestEvictBeforeMoveNeverHandsKeyGroupsOwnerToOwner(t *testing.T) {
	cfg := DefaultConfig(4)
	cfg.EvictBeforeMove = true
	split := 0
	runCfg(t, cfg, 5, 60, func(tick uint64, _ *Loop, d Decision) {
		for _, m := range d.Moves {
			if m.From >= 0 && m.To >= 0 {
				t.Fatalf("tick %d: %d key groups of cohort %d go from node %d straight to node %d", tick, len(m.KeyGroups), m.Cohort, m.From, m.To)
			}
			if m.To < 0 {
				split++
			}
		}
	})
	if split == 0 {
		t.Fatal("the drift moved nothing through the fallback path: the test exercises nothing")
	}
}

// warehouseWindow records one tick of a TPC-C-like workload — 16
// warehouses × 9 tables × 64 buckets (9,216 key groups), 12 written and 2
// read key groups per transaction, mostly in the buckets of one district,
// 1% of writes in another warehouse; warehouse w runs on node w mod 4 —
// and applies the nodes' summaries to l. Regions of 576 key groups
// co-accessed alike are cut into cohorts of at most 64 in many equally
// good ways, so the generator keeps re-cutting a few of them.
func warehouseWindow(t *testing.T, l *Loop, profs []*accessgraph.Profiler, rng *rand.Rand, tick uint64) {
	t.Helper()
	const whs = 16
	kg := func(t, wh, b int) control.KeyGroup {
		return control.KeyGroup(t)<<16 | control.KeyGroup(wh)<<8 | control.KeyGroup(b)
	}
	var w, r []control.KeyGroup
	for range 1200 {
		w, r = w[:0], r[:0]
		wh, d := rng.IntN(whs), rng.IntN(10)
		for range 12 {
			tw, b := wh, rng.IntN(64)
			if rng.IntN(100) == 0 {
				tw = rng.IntN(whs)
			}
			if rng.IntN(10) < 7 {
				b = (d*6 + rng.IntN(6)) % 64
			}
			w = append(w, kg(rng.IntN(9), tw, b))
		}
		r = append(r, kg(0, wh, 0), kg(8, wh, rng.IntN(64)))
		profs[wh%len(profs)].Record(w, r)
	}
	for _, p := range profs {
		if err := l.Apply(p.Summary(tick, accessgraph.SummaryV2)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHoldRecutsChangesNoOwnership: holding back re-cuts (the default)
// publishes fewer maps, and every key group has, tick by tick, the owner it
// has when every re-cut is published — holding changes when cohort
// boundaries reach the nodes, never who owns what.
func TestHoldRecutsChangesNoOwnership(t *testing.T) {
	owners := func(m *control.OwnerMap) map[control.KeyGroup]int {
		o := map[control.KeyGroup]int{}
		for _, p := range m.Cohorts {
			for _, kg := range p.KeyGroups {
				o[kg] = p.Owner
			}
		}
		return o
	}
	const ticks = 90
	var all []map[control.KeyGroup]int
	// KeepCuts would publish no re-cut at all: this test is about
	// HoldRecuts alone.
	publishAll := DefaultConfig(4)
	publishAll.HoldRecuts, publishAll.KeepCuts = false, false
	allMaps := 0
	runWarehouses(t, publishAll, ticks, func(_ uint64, l *Loop, d Decision) {
		all = append(all, owners(l.Current()))
		if d.Map != nil {
			allMaps++
		}
	})
	hold := DefaultConfig(4)
	hold.KeepCuts = false
	held := 0
	runWarehouses(t, hold, ticks, func(tick uint64, l *Loop, d Decision) {
		if d.Map != nil {
			held++
		}
		if got, want := owners(l.Current()), all[tick-1]; !reflect.DeepEqual(got, want) {
			t.Fatalf("tick %d: owners differ from the run that publishes every re-cut (%d vs %d key groups owned)", tick, len(got), len(want))
		}
	})
	t.Logf("%d maps published over %d ticks holding re-cuts, %d publishing every re-cut", held, ticks, allMaps)
	if held >= allMaps {
		t.Errorf("holding re-cuts published %d maps, publishing every re-cut %d: nothing held", held, allMaps)
	}
}

// TestKeepCutsChangesNoOwnership: with KeepCuts (the default) a key group
// whose owner does not change keeps its cohort id unless next gives that id
// to another node, so almost no owned key group changes cohort (each such
// change costs its owner a fence give-back and claim on the memory node),
// against tens of thousands when the generator's cuts are published; and
// every key group has, tick by tick, the owner it has with the generator's
// cuts — but for GuardRecutMoves' remnants, which follow their previous
// cohort's id (a published id, so it differs between the two runs) and
// leave the map when next gives that id to another node.
func TestKeepCutsChangesNoOwnership(t *testing.T) {
	const ticks = 90
	type place struct {
		id    control.CohortID
		owner int
	}
	places := func(m *control.OwnerMap) map[control.KeyGroup]place {
		o := map[control.KeyGroup]place{}
		for _, p := range m.Cohorts {
			for _, kg := range p.KeyGroups {
				o[kg] = place{p.ID, p.Owner}
			}
		}
		return o
	}
	// recut counts the key groups that keep their owner but change cohort.
	recut := func(prev, next map[control.KeyGroup]place) int {
		n := 0
		for kg, q := range next {
			if p, ok := prev[kg]; ok && p.owner == q.owner && p.id != q.id {
				n++
			}
		}
		return n
	}
	generator := DefaultConfig(4)
	generator.KeepCuts = false
	var want []map[control.KeyGroup]place
	cutsWithout := 0
	runWarehouses(t, generator, ticks, func(tick uint64, l *Loop, _ Decision) {
		cur := places(l.Current())
		if tick > 1 {
			cutsWithout += recut(want[tick-2], cur)
		}
		want = append(want, cur)
	})
	var prev map[control.KeyGroup]place
	cutsWith, worst := 0, 0
	runWarehouses(t, DefaultConfig(4), ticks, func(tick uint64, l *Loop, d Decision) {
		cur := places(l.Current())
		differ := 0
		for kg, q := range cur {
			if w, ok := want[tick-1][kg]; !ok || w.owner != q.owner {
				differ++
			}
		}
		for kg := range want[tick-1] {
			if _, ok := cur[kg]; !ok {
				differ++
			}
		}
		worst = max(worst, differ)
		if differ*1000 > len(cur) {
			t.Fatalf("tick %d: %d of %d key groups have another owner than with the generator's cuts", tick, differ, len(cur))
		}
		if d.Map != nil {
			idOwner := map[control.CohortID]int{}
			for _, p := range d.Map.Cohorts {
				idOwner[p.ID] = p.Owner
			}
			for kg, q := range cur {
				p, ok := prev[kg]
				if !ok || p.owner != q.owner || p.id == q.id {
					continue
				}
				if o, used := idOwner[p.id]; !used || o == q.owner {
					t.Fatalf("tick %d: key group %d stays on node %d but moves from cohort %d to %d, and %d is free to keep", tick, kg, q.owner, p.id, q.id, p.id)
				}
			}
		}
		cutsWith += recut(prev, cur)
		prev = cur
	})
	t.Logf("owned key groups re-cut over %d ticks: %d keeping cuts, %d with the generator's; at most %d key groups owned otherwise in a tick", ticks, cutsWith, cutsWithout, worst)
	if cutsWithout == 0 {
		t.Fatal("the generator re-cut nothing: the workload does not test KeepCuts")
	}
	if cutsWith*100 > cutsWithout {
		t.Errorf("keeping cuts re-cut %d owned key groups, the generator's cuts %d: want at most 1%%", cutsWith, cutsWithout)
	}
}

// TestKeepCutsCases: keepCuts on small maps — a key group keeps its cohort
// while its owner does not change, takes its next cohort's id when the old
// id goes to another node, and past Cohorts.MaxCohorts the generator's
// cohorts split over the most kept ones take their own cuts again until the
// map is under the cap.
func TestKeepCutsCases(t *testing.T) {
	pl := func(id control.CohortID, owner int, kgs ...control.KeyGroup) control.Placement {
		return control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: kgs}, Owner: owner}
	}
	cases := []struct {
		name      string
		max       int
		cur, next []control.Placement
		want      []control.Placement
	}{
		{"re-cut kept, arrivals take the new id", 8,
			[]control.Placement{pl(1, 0, 10, 11), pl(2, 1, 12)},
			[]control.Placement{pl(5, 0, 10, 11, 12, 13)},
			[]control.Placement{pl(1, 0, 10, 11), pl(5, 0, 12, 13)}},
		{"generator id joined on the same owner", 8,
			[]control.Placement{pl(1, 0, 10), pl(2, 0, 11)},
			[]control.Placement{pl(2, 0, 10, 11, 12)},
			[]control.Placement{pl(1, 0, 10), pl(2, 0, 11, 12)}},
		{"old id placed elsewhere", 8,
			[]control.Placement{pl(1, 0, 10, 11)},
			[]control.Placement{pl(1, 1, 20), pl(7, 0, 10, 11)},
			[]control.Placement{pl(1, 1, 20), pl(7, 0, 10, 11)}},
		{"evicted key groups leave their cohort", 8,
			[]control.Placement{pl(1, 0, 10, 11, 12)},
			[]control.Placement{pl(3, 0, 10)},
			[]control.Placement{pl(1, 0, 10)}},
		{"past MaxCohorts the generator's cuts", 1,
			[]control.Placement{pl(1, 0, 10), pl(2, 0, 11)},
			[]control.Placement{pl(3, 0, 10, 11)},
			[]control.Placement{pl(3, 0, 10, 11)}},
		{"past MaxCohorts only the most split cohort merges", 2,
			[]control.Placement{pl(1, 0, 10), pl(2, 0, 11), pl(3, 1, 20)},
			[]control.Placement{pl(5, 0, 10, 11), pl(6, 1, 20)},
			[]control.Placement{pl(3, 1, 20), pl(5, 0, 10, 11)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig(2)
			cfg.Cohorts.MaxCohorts = c.max
			l, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			l.setCurrent(&control.OwnerMap{Epoch: 1, Cohorts: c.cur})
			got := l.keepCuts(&control.OwnerMap{Epoch: 2, Cohorts: c.next})
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Cohorts, c.want) {
				t.Errorf("got %v, want %v", got.Cohorts, c.want)
			}
		})
	}
}

// runWarehouses runs a loop of cfg for ticks ticks of warehouseWindow
// (4 nodes), checking each decision and handing it to onTick.
func runWarehouses(t *testing.T, cfg Config, ticks uint64, onTick func(tick uint64, l *Loop, d Decision)) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var profs []*accessgraph.Profiler
	for i := range 4 {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed, pc.SampleEvery = fmt.Sprintf("cn-%d", i), uint32(i), uint64(i+1), 1
		p, err := accessgraph.NewProfiler(pc)
		if err != nil {
			t.Fatal(err)
		}
		profs = append(profs, p)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for tick := uint64(1); tick <= ticks; tick++ {
		warehouseWindow(t, l, profs, rng, tick)
		prev := l.Current().Clone()
		d, err := l.Tick(TickInput{Tick: tick})
		if err != nil {
			t.Fatal(err)
		}
		checkDecision(t, prev, l, d)
		onTick(tick, l, d)
	}
}

// TestGuardRecutMovesKeepsCooldownAndHomes: with GuardRecutMoves (the
// default), a key group moves between two nodes without a planner decision
// on its cohort only outside its cooldown and toward the node that runs
// more of its transactions; without the guard, re-cuts move key groups
// that violate both.
func TestGuardRecutMovesKeepsCooldownAndHomes(t *testing.T) {
	const ticks = 90
	cd := DefaultConfig(4).Ownership.CooldownTicks
	check := func(cfg Config) (implicit, bad int) {
		changed := map[control.KeyGroup]uint64{}
		runWarehouses(t, cfg, ticks, func(tick uint64, l *Loop, d Decision) {
			decided := map[control.CohortID]bool{}
			for _, m := range d.Plan.Moves {
				decided[m.Cohort] = true
			}
			for _, in := range d.Plan.Installs {
				decided[in.Cohort] = true
			}
			for _, m := range d.Moves {
				for _, kg := range m.KeyGroups {
					if m.From >= 0 && m.To >= 0 && !decided[m.Cohort] {
						implicit++
						last, seen := changed[kg]
						if seen && tick-last < cd || l.Graph().HomeProb(kg, m.To) <= l.Graph().HomeProb(kg, m.From) {
							bad++
						}
					}
					changed[kg] = tick
				}
			}
		})
		return implicit, bad
	}
	implicit, bad := check(DefaultConfig(4))
	if bad != 0 {
		t.Errorf("guarded: %d of %d re-cut moves inside their cooldown or away from their transactions' node", bad, implicit)
	}
	off := DefaultConfig(4)
	off.GuardRecutMoves = false
	offImplicit, offBad := check(off)
	t.Logf("re-cut moves over %d ticks: guarded %d (%d violating), unguarded %d (%d violating)", ticks, implicit, bad, offImplicit, offBad)
	if offBad == 0 {
		t.Errorf("the unguarded run made no violating re-cut move: the test no longer exercises the guard")
	}
}
