package cohortgen

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/messages"
)

// cpuTime is the process's user+system CPU time: on a shared machine it
// varies less than wall time (it still counts GC work on other threads).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workload generates a planner's per-tick input: transactions spread over
// CNs, recorded by one profiler per CN, closed into summaries.
type workload struct {
	profs   []*accessgraph.Profiler
	rng     *rand.Rand
	txn     func(rng *rand.Rand, w, r []control.KeyGroup) (cn int, _, _ []control.KeyGroup)
	perTick int
	tick    uint64
}

func newWorkload(tb testing.TB, cns, perTick int, txn func(*rand.Rand, []control.KeyGroup, []control.KeyGroup) (int, []control.KeyGroup, []control.KeyGroup)) *workload {
	wl := &workload{rng: rand.New(rand.NewPCG(11, 12)), txn: txn, perTick: perTick}
	for i := range cns {
		cfg := accessgraph.DefaultProfilerConfig()
		cfg.Node = fmt.Sprintf("cn-%d", i)
		cfg.NodeIndex = uint32(i)
		cfg.Seed = uint64(i + 1)
		// The benchmark feeds what the profilers would have sampled.
		cfg.SampleEvery = 1
		cfg.MaxSamplesPerWindow = 0
		p, err := accessgraph.NewProfiler(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		wl.profs = append(wl.profs, p)
	}
	return wl
}

func (wl *workload) window() []*messages.AccessSummary {
	var w, r []control.KeyGroup
	var cn int
	for range wl.perTick {
		cn, w, r = wl.txn(wl.rng, w, r)
		wl.profs[cn].Record(w, r)
	}
	wl.tick++
	out := make([]*messages.AccessSummary, len(wl.profs))
	for i, p := range wl.profs {
		out[i] = p.Summary(wl.tick, accessgraph.SummaryV2)
	}
	return out
}

func applyAll(tb testing.TB, g *accessgraph.Graph, ss []*messages.AccessSummary) int {
	edges := 0
	for _, s := range ss {
		edges += len(s.TypedEdges)
		if err := g.Apply(s); err != nil {
			tb.Fatal(err)
		}
	}
	return edges
}

// tpcc9216 is a TPC-C-like transaction of 16 warehouses × 9 tables × 64
// buckets (9,216 key groups; key group = table<<16 | warehouse<<8 |
// bucket): 12 written and 2 read key groups of one warehouse, most of them
// in the buckets of one district (6 of 64 per table), the rest anywhere in
// the warehouse; 1% of writes go to another warehouse (remote stock).
// Warehouse w runs on CN w % 8.
func tpcc9216(rng *rand.Rand, w, r []control.KeyGroup) (int, []control.KeyGroup, []control.KeyGroup) {
	const whs = 16
	w, r = w[:0], r[:0]
	wh := rng.IntN(whs)
	d := rng.IntN(10)
	kg := func(t, wh, b int) control.KeyGroup {
		return control.KeyGroup(t)<<16 | control.KeyGroup(wh)<<8 | control.KeyGroup(b)
	}
	bucket := func() int {
		if rng.IntN(10) < 7 {
			return (d*6 + rng.IntN(6)) % 64
		}
		return rng.IntN(64)
	}
	for range 12 {
		tw := wh
		if rng.IntN(100) == 0 {
			tw = rng.IntN(whs)
		}
		w = append(w, kg(rng.IntN(9), tw, bucket()))
	}
	r = append(r, kg(0, wh, 0), kg(8, wh, rng.IntN(64)))
	return wh % 8, w, r
}

// clusters1M is a transaction of a 1,000,000-key-group workload in 64
// clusters of 15,625 key groups (one per CN): 12 written and 2 read key
// groups, 90% from one block of 64 consecutive key groups of the cluster,
// the rest anywhere in the cluster.
func clusters1M(rng *rand.Rand, w, r []control.KeyGroup) (int, []control.KeyGroup, []control.KeyGroup) {
	const per = 15625
	w, r = w[:0], r[:0]
	c := rng.IntN(64)
	block := rng.IntN(per / 64)
	pick := func() control.KeyGroup {
		if rng.IntN(10) < 9 {
			return control.KeyGroup(c*per + block*64 + rng.IntN(64))
		}
		return control.KeyGroup(c*per + rng.IntN(per))
	}
	for range 12 {
		w = append(w, pick())
	}
	r = append(r, pick(), pick())
	return c, w, r
}

func benchStep(b *testing.B, g *accessgraph.Graph, gen *Generator, wl *workload, warm int) {
	edgesIn := 0
	for range warm {
		edgesIn = applyAll(b, g, wl.window())
		g.Tick()
		gen.Step(g)
	}
	// Pre-generate the measured windows' input.
	inputs := make([][]*messages.AccessSummary, 8)
	for i := range inputs {
		inputs[i] = wl.window()
	}
	nodes, edges := g.Len()
	out := gen.Step(g)
	b.Logf("graph: %d key groups (%d drifting), %d edges; %d edge updates per tick; cohorts: %d (published %d, %d key groups, sizes %d..%d)",
		nodes, g.Stats().Drifting, edges, edgesIn, out.Stats.Cohorts, out.Stats.Published, out.Stats.PublishedKGs, out.Stats.MinSize, out.Stats.MaxSize)
	trims0 := g.Stats().PerNodeTrims
	b.Cleanup(func() { b.Logf("per-node trims: %d in %d ticks", g.Stats().PerNodeTrims-trims0, b.N) })
	var tickCPU, stepCPU, applyCPU time.Duration
	var tickWall, stepWall, refineWall, worstWall, bgWall time.Duration
	refines, bgRefines := 0, 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ss := inputs[i%len(inputs)]
		for _, s := range ss {
			s.Tick = wl.tick + uint64(i) + 1
		}
		c0 := cpuTime()
		applyAll(b, g, ss)
		applyCPU += cpuTime() - c0
		b.StartTimer()
		c0, w0 := cpuTime(), time.Now()
		g.Tick()
		c1, w1 := cpuTime(), time.Now()
		out := gen.Step(g)
		var req *RefineRequest
		if out.RefineDue {
			// Off-tick refinement (RefineInline false): the snapshot is
			// taken on the planner's goroutine, so it counts in the Step.
			req = gen.PrepareRefine(g)
		}
		stepCPU += cpuTime() - c1
		worstWall = max(worstWall, time.Since(w0))
		if d := time.Since(w1); len(out.Refined) > 0 || (gen.cfg.RefineEvery > 0 && out.Tick%uint64(gen.cfg.RefineEvery) == 0) {
			refineWall += d
			refines++
		} else {
			stepWall += d
		}
		tickCPU += c1 - c0
		tickWall += w1.Sub(w0)
		if req != nil {
			b.StopTimer()
			r0 := time.Now()
			res := Refine(req)
			bgWall += time.Since(r0)
			bgRefines++
			gen.OfferRefinement(res)
			b.StartTimer()
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tickWall.Microseconds())/n, "tick-µs/op")
	b.ReportMetric(float64(stepWall.Microseconds())/max(n-float64(refines), 1), "step-µs/op")
	if refines > 0 {
		b.ReportMetric(float64(refineWall.Microseconds())/float64(refines), "refine-step-µs/op")
	}
	b.ReportMetric(float64((tickCPU+stepCPU).Microseconds())/n, "tick+step-cpu-µs/op")
	b.ReportMetric(float64(applyCPU.Microseconds())/n, "apply-cpu-µs/op")
	b.ReportMetric(float64(worstWall.Microseconds()), "worst-tick+step-µs")
	if bgRefines > 0 {
		b.ReportMetric(float64(bgWall.Microseconds())/float64(bgRefines), "bg-refine-µs/refine")
	}
}

// BenchmarkStep measures one planner tick of the control plane's learning
// half — Graph.Tick plus Generator.Step — in steady state (op = both):
// tick-µs (Graph.Tick), step-µs (Step on ticks without refinement),
// refine-step-µs (Step on the ticks that run the inline refinement, every
// RefineEvery), tick+step-cpu-µs (process CPU, averaged over all ticks).
// Applying the tick's heartbeats is reported separately (apply-cpu-µs), as
// is the worst tick+step (worst-tick+step-µs). The refine=async variant is
// the planner actor's configuration (RefineInline false): a due refinement
// only snapshots its region in the Step (counted there) and runs Louvain
// off the tick (bg-refine-µs, not counted in op); the next Step adopts it.
//
//	go test ./control/cohortgen -run XXX -bench Step -benchtime 20x -v
func BenchmarkStep(b *testing.B) {
	for _, perNode := range []int{16, 8} {
		b.Run(fmt.Sprintf("tpcc9216/edgesPerNode=%d", perNode), func(b *testing.B) {
			gcfg := accessgraph.DefaultGraphConfig()
			gcfg.MaxEdgesPerNode = perNode
			g, err := accessgraph.NewGraph(gcfg)
			if err != nil {
				b.Fatal(err)
			}
			gen, err := New(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			// 8 CNs × 256 sampled transactions per tick (the profilers'
			// default MaxSamplesPerWindow).
			benchStep(b, g, gen, newWorkload(b, 8, 8*256, tpcc9216), 60)
		})
	}
	b.Run("tpcc9216/refine=async", func(b *testing.B) {
		g, err := accessgraph.NewGraph(accessgraph.DefaultGraphConfig())
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.RefineInline = false
		gen, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		benchStep(b, g, gen, newWorkload(b, 8, 8*256, tpcc9216), 60)
	})
	b.Run("clusters1M", func(b *testing.B) {
		g, err := accessgraph.NewGraph(accessgraph.DefaultGraphConfig())
		if err != nil {
			b.Fatal(err)
		}
		gen, err := New(DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		// 64 CNs × 64 sampled transactions per tick.
		benchStep(b, g, gen, newWorkload(b, 64, 64*64, clusters1M), 60)
	})
}
