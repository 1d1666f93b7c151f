package plane

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/messages"
)

// BenchmarkTick64x1M is one planner tick of a 64-node cluster over 1,000,000
// key groups: 64 heartbeats (each profiler's default cap of sampled
// transactions per window; a transaction writes 4 key groups drawn from a
// 64-key-group block of one of 15,625 blocks, skewed), applied, then Tick.
// It reports the tick's wall time (apply + decay + cohorts + plan).
func BenchmarkTick64x1M(b *testing.B) {
	const nodes, kgs, block = 64, 1_000_000, 64
	l, err := New(DefaultConfig(nodes))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, kgs/block-1)
	var prof []*accessgraph.Profiler
	for i := range nodes {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed = fmt.Sprintf("cn-%d", i), uint32(i), uint64(i+1)
		p, err := accessgraph.NewProfiler(pc)
		if err != nil {
			b.Fatal(err)
		}
		prof = append(prof, p)
	}
	w := make([]control.KeyGroup, 4)
	window := func(tick uint64) []*messages.AccessSummary {
		for range nodes * 2000 {
			blk := int(zipf.Uint64())
			for j := range w {
				w[j] = control.KeyGroup(blk*block + rng.IntN(block))
			}
			prof[blk%nodes].Record(w, nil)
		}
		out := make([]*messages.AccessSummary, nodes)
		for i, p := range prof {
			out[i] = p.Summary(tick, accessgraph.SummaryV2)
		}
		return out
	}
	tick := uint64(0)
	step := func() time.Duration {
		tick++
		ss := window(tick)
		start := time.Now()
		for _, s := range ss {
			if err := l.Apply(s); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Tick(TickInput{Tick: tick}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 40 {
		step()
	}
	b.ResetTimer()
	var total, worst time.Duration
	for range b.N {
		d := step()
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "tick-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-tick-ms")
	nodesN, edges := l.Graph().Len()
	b.ReportMetric(float64(nodesN), "graph-kgs")
	b.ReportMetric(float64(edges), "graph-edges")
	b.ReportMetric(float64(len(l.Current().Cohorts)), "cohorts")
}
