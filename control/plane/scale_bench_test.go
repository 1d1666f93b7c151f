package plane

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

// BenchmarkTick64x1M is one planner tick of a 64-node cluster over 1,000,000
// key groups: 64 heartbeats (each profiler's default cap of sampled
// transactions per window; a transaction writes 4 key groups drawn from a
// 64-key-group block of one of 15,625 blocks, skewed), applied, then Tick.
// It reports the tick's wall time (apply + decay + cohorts + plan), and the
// process CPU time of applying the heartbeats and of the Tick (steadier
// than wall time on a shared machine).
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
	var applyCPU, tickCPU time.Duration
	step := func() time.Duration {
		tick++
		ss := window(tick)
		start, c0 := time.Now(), cpuTime()
		for _, s := range ss {
			if err := l.Apply(s); err != nil {
				b.Fatal(err)
			}
		}
		c1 := cpuTime()
		if _, err := l.Tick(TickInput{Tick: tick}); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		c2 := cpuTime()
		applyCPU += c1 - c0
		tickCPU += c2 - c1
		return d
	}
	for range 40 {
		step()
	}
	b.ResetTimer()
	applyCPU, tickCPU = 0, 0
	var total, worst time.Duration
	for range b.N {
		d := step()
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "tick-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-tick-ms")
	b.ReportMetric(float64(applyCPU.Microseconds())/float64(b.N)/1000, "apply-cpu-ms")
	b.ReportMetric(float64(tickCPU.Microseconds())/float64(b.N)/1000, "tick-cpu-ms")
	nodesN, edges := l.Graph().Len()
	b.ReportMetric(float64(nodesN), "graph-kgs")
	b.ReportMetric(float64(edges), "graph-edges")
	b.ReportMetric(float64(len(l.Current().Cohorts)), "cohorts")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
