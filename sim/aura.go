package sim

import (
	"fmt"
	"slices"

	"github.com/aura-runtime/aura/bench"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/control/cohortgen"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/control/plane"
	"github.com/aura-runtime/aura/control/router"
)

// lambda is the access graph's EWMA decay per tick (SPEC §5).
const lambda = 0.95

// cohortSource turns the planner's access graph into cohorts of key groups.
type cohortSource interface {
	// step runs at tick number tick and returns the cohorts (each with
	// sorted, distinct key groups and a distinct id).
	step(tick uint64, g *accessgraph.Graph) ([]control.Cohort, error)
}

// aura is the learned mode: per-CN profilers → the planner's access graph →
// cohorts → Benefit planner → OwnerMap (epoch + 1) → affinity router.
type aura struct {
	base
	lever   string
	prof    []*accessgraph.Profiler
	graph   *accessgraph.Graph
	src     cohortSource
	planner *ownership.Planner
	rt      *router.Router
	tickN   uint64
	epoch   uint64
	cur     *control.OwnerMap
	nCohort int
	bytes   uint64
	queue   []float64
	wbuf    []uint64
	rbuf    []uint64
	homes   []accessgraph.Home
}

func newAura(s *sim) (policy, error) {
	cfg := ownership.OwnAllConfig()
	if s.cfg.LeverB == LeverNaive {
		cfg = ownership.NaiveConfig()
	}
	p, err := ownership.New(cfg)
	if err != nil {
		return nil, err
	}
	rc := router.DefaultConfig(s.cfg.CNs)
	rc.Fallback = s.fallback
	g, err := accessgraph.NewGraph(accessgraph.DefaultGraphConfig())
	if err != nil {
		return nil, err
	}
	a := &aura{base: base{s}, lever: s.cfg.LeverB, planner: p, rt: router.New(rc), graph: g,
		queue: make([]float64, s.cfg.CNs)}
	for i := range s.cfg.CNs {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed = fmt.Sprintf("cn-%d", i), uint32(i), s.cfg.Seed^uint64(i+1)*0x9E3779B97F4A7C15
		pc.WindowMicros = uint64(s.cfg.Tick.Microseconds())
		pr, err := accessgraph.NewProfiler(pc)
		if err != nil {
			return nil, err
		}
		a.prof = append(a.prof, pr)
	}
	if a.src, err = newCohortSource(s); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *aura) writeKGs(t *txnInfo) []uint64 {
	a.wbuf = a.wbuf[:0]
	for i := range t.writes {
		a.wbuf = append(a.wbuf, t.writes[i].kg)
	}
	return a.wbuf
}

func (a *aura) route(t *txnInfo) int {
	switch a.lever {
	case LeverOff:
		return a.s.staticNode(t.home)
	case LeverNaive:
		return a.rt.RouteNaive(a.writeKGs(t), t.home).Node
	}
	// Queue(i): node i's CPU backlog in score units (queueUnit).
	for i := range a.queue {
		a.queue[i] = float64(max(0, a.s.cpuFree[i]-a.s.now)) / queueUnit
	}
	return a.rt.Route(a.writeKGs(t), nil, t.home, a.queue).Node
}

// queueUnit is the CPU backlog (ns) that costs one point of router score
// (one locally granted write key group): 100 µs, about ten transactions.
// A point moves a transaction off the CN that owns one more of its write
// key groups, turning a local lock into an owner RPC (7 µs plus the
// owner's CPU), so only a backlog well above the noise of a closed loop
// (a few transactions) should do it. At 50 µs the penalty redirected
// enough of the tenant workload's transactions to double its remote locks
// (0.058 vs the oracle's 0.030 per transaction; 0.032 at 100 µs, with no
// loss of throughput).
const queueUnit = 100_000.0

func (a *aura) owner(acc *access) int {
	if _, o, ok := a.rt.OwnerOfKeyGroup(acc.kg); ok {
		return o
	}
	return -1
}

func (a *aura) committed(home int, t *txnInfo) {
	a.rbuf = a.rbuf[:0]
	for i := range t.reads {
		a.rbuf = append(a.rbuf, t.reads[i].kg)
	}
	p := a.prof[home]
	p.Record(a.writeKGs(t), a.rbuf)
	p.RecordLocks(accessgraph.LockCounts{Local: t.nLocal, OwnerRPC: t.nRPC, MNCAS: t.nMN}, t.casKGs)
}

func (a *aura) tick(now int64) ([]migration, error) {
	a.tickN++
	for i, p := range a.prof {
		backlog := max(0, a.s.cpuFree[i]-now)
		p.SetLoad(uint64(backlog/int64(a.s.costs.TxnCPU+1)), 0)
		if err := a.graph.Apply(p.Summary(a.tickN, accessgraph.SummaryV2)); err != nil {
			return nil, fmt.Errorf("sim: access summary of cn-%d: %w", i, err)
		}
	}
	a.graph.Tick() // decay, then the generator reads the window
	cohorts, err := a.src.step(a.tickN, a.graph)
	if err != nil {
		return nil, err
	}
	in := ownership.Input{Tick: a.tickN, Nodes: a.s.cfg.CNs, Owners: plane.InheritOwners(cohorts, a.s.cfg.CNs, a.graph.W,
		func(kg control.KeyGroup) (int, bool) {
			_, o, ok := a.rt.OwnerOfKeyGroup(kg)
			return o, ok
		})}
	in.Cohorts, a.homes = plane.PlannerCohorts(a.graph, cohorts, a.s.cfg.CNs, a.homes)
	plan, err := a.planner.Plan(in)
	if err != nil {
		return nil, fmt.Errorf("sim: plan: %w", err)
	}
	next := plan.OwnerMap(a.epoch+1, fallbackTable(a.s), in.Cohorts)
	// Key groups whose owner changes from one CN to another migrate; the
	// key groups of a cohort that moves form one migration.
	var migs []migration
	for _, p := range next.Cohorts {
		var moved []uint64
		for _, kg := range p.KeyGroups {
			if _, o, ok := a.rt.OwnerOfKeyGroup(kg); ok && o != p.Owner {
				moved = append(moved, kg)
			}
		}
		if len(moved) > 0 {
			migs = append(migs, migration{kgs: moved})
		}
	}
	if !sameMap(a.cur, next) {
		a.epoch++
		if err := a.rt.Install(next); err != nil {
			return nil, fmt.Errorf("sim: router: %w", err)
		}
		a.cur = next
		a.bytes = manifestSize(next)
	}
	a.nCohort = len(next.Cohorts)
	return migs, nil
}

// sameMap reports equal assignments (epochs aside).
func sameMap(a, b *control.OwnerMap) bool {
	if a == nil {
		return len(b.Cohorts) == 0
	}
	if len(a.Cohorts) != len(b.Cohorts) {
		return false
	}
	for i := range a.Cohorts {
		x, y := a.Cohorts[i], b.Cohorts[i]
		if x.ID != y.ID || x.Owner != y.Owner || !slices.Equal(x.KeyGroups, y.KeyGroups) {
			return false
		}
	}
	return true
}

func (a *aura) cohorts() int { return a.nCohort }

func (a *aura) manifest() bench.Manifest { return bench.Manifest{Epoch: a.epoch, Bytes: a.bytes} }

// generator adapts cohortgen's LockCohortGenerator.
type generator struct{ gen *cohortgen.Generator }

func (g generator) step(_ uint64, graph *accessgraph.Graph) ([]control.Cohort, error) {
	return g.gen.Step(graph).Cohorts, nil
}

func newCohortSource(s *sim) (cohortSource, error) {
	if s.cfg.LeverB == LeverNaive {
		// The v25 generator (no size cap of 64, no hysteresis, splits or
		// refinement): cohortgen.Naive.
		cfg := cohortgen.NaiveConfig()
		cfg.Seed = s.cfg.Seed | 1
		gen, err := cohortgen.NewNaive(cfg)
		if err != nil {
			return nil, err
		}
		return naiveGenerator{gen}, nil
	}
	cfg := cohortgen.DefaultConfig()
	cfg.Seed = s.cfg.Seed | 1
	gen, err := cohortgen.New(cfg)
	if err != nil {
		return nil, err
	}
	return generator{gen}, nil
}
