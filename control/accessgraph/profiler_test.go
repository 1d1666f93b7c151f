package accessgraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// tpccKG names a TPC-C-like key group (table, warehouse, bucket) as the
// reshaped encoding does.
func tpccKG(table, wh, bucket int) control.KeyGroup {
	return control.KeyGroup(table)<<20 | control.KeyGroup(wh)<<8 | control.KeyGroup(bucket)
}

// tpccTxn fills w and r with a NewOrder-like footprint of one warehouse:
// 12 written key groups (district d, and order, new-order and order-line
// buckets of district d's slice of 6 buckets, 8 random stock buckets, 1% of
// them remote) and 2 read ones (warehouse, a customer bucket of district d).
// 16 warehouses give ~9,216 key groups and ~100k distinct edges.
func tpccTxn(rng *rand.Rand, warehouses int, w, r []control.KeyGroup) ([]control.KeyGroup, []control.KeyGroup) {
	w, r = w[:0], r[:0]
	wh := rng.IntN(warehouses)
	d := rng.IntN(10)
	w = append(w, tpccKG(1, wh, d))               // district
	w = append(w, tpccKG(5, wh, d*6+rng.IntN(6))) // order
	w = append(w, tpccKG(7, wh, d*6+rng.IntN(6))) // new_order
	w = append(w, tpccKG(6, wh, d*6+rng.IntN(6))) // order_line
	for range 8 {                                 // stock
		sw := wh
		if rng.IntN(100) == 0 {
			sw = rng.IntN(warehouses)
		}
		w = append(w, tpccKG(4, sw, rng.IntN(64)))
	}
	r = append(r, tpccKG(0, wh, 0), tpccKG(2, wh, d*6+rng.IntN(6))) // warehouse, customer
	return w, r
}

func mustProfiler(t testing.TB, mod func(*ProfilerConfig)) *Profiler {
	t.Helper()
	cfg := DefaultProfilerConfig()
	cfg.Node = "cn-0"
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProfiler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type exact struct {
	w, r   map[control.KeyGroup]float64
	ww, wr map[[2]control.KeyGroup]float64
}

func pair(a, b control.KeyGroup) [2]control.KeyGroup {
	if a > b {
		a, b = b, a
	}
	return [2]control.KeyGroup{a, b}
}

// truth computes the exact counts of a transaction list, with the same
// dedup semantics as Record.
func truth(txns [][2][]control.KeyGroup) exact {
	ex := exact{map[control.KeyGroup]float64{}, map[control.KeyGroup]float64{}, map[[2]control.KeyGroup]float64{}, map[[2]control.KeyGroup]float64{}}
	for _, t := range txns {
		ws := map[control.KeyGroup]bool{}
		var wl, rl []control.KeyGroup
		for _, k := range t[0] {
			if !ws[k] {
				ws[k] = true
				wl = append(wl, k)
			}
		}
		rs := map[control.KeyGroup]bool{}
		for _, k := range t[1] {
			if !ws[k] && !rs[k] {
				rs[k] = true
				rl = append(rl, k)
			}
		}
		for i, a := range wl {
			ex.w[a]++
			for _, b := range wl[i+1:] {
				ex.ww[pair(a, b)]++
			}
			for _, b := range rl {
				ex.wr[pair(a, b)]++
			}
		}
		for _, b := range rl {
			ex.r[b]++
		}
	}
	return ex
}

func genTxns(seed uint64, n, warehouses int) [][2][]control.KeyGroup {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([][2][]control.KeyGroup, n)
	for i := range out {
		w, r := tpccTxn(rng, warehouses, nil, nil)
		out[i] = [2][]control.KeyGroup{w, r}
	}
	return out
}

func TestProfilerExactWhenSamplingAll(t *testing.T) {
	txns := genTxns(1, 500, 2)
	ex := truth(txns)
	p := mustProfiler(t, func(c *ProfilerConfig) { c.SampleEvery = 1 })
	for _, tx := range txns {
		p.Record(tx[0], tx[1])
	}
	s := p.Summary(1, SummaryV2)
	if s.TotalTxns != 500 || s.SampledTxns != 500 {
		t.Fatalf("total/sampled = %d/%d", s.TotalTxns, s.SampledTxns)
	}
	if len(s.Nodes) != len(unionKeys(ex.w, ex.r)) {
		t.Fatalf("nodes %d, want %d", len(s.Nodes), len(unionKeys(ex.w, ex.r)))
	}
	for _, n := range s.Nodes {
		if n.WriteWeight != ex.w[n.Kg] || n.ReadWeight != ex.r[n.Kg] {
			t.Fatalf("kg %x: %v/%v want %v/%v", n.Kg, n.WriteWeight, n.ReadWeight, ex.w[n.Kg], ex.r[n.Kg])
		}
	}
	seen := 0
	for _, e := range s.TypedEdges {
		k := [2]control.KeyGroup{e.A, e.B}
		if e.A >= e.B {
			t.Fatalf("edge not ordered: %x %x", e.A, e.B)
		}
		if e.Ww != ex.ww[k] || e.Wr != ex.wr[k] {
			t.Fatalf("edge %x-%x: %v/%v want %v/%v", e.A, e.B, e.Ww, e.Wr, ex.ww[k], ex.wr[k])
		}
		seen++
	}
	if want := len(unionKeys(ex.ww, ex.wr)); seen != want {
		t.Fatalf("edges %d want %d", seen, want)
	}
	// The window was reset.
	if s2 := p.Summary(2, SummaryV2); len(s2.Nodes)+len(s2.TypedEdges) != 0 || s2.TotalTxns != 0 {
		t.Fatalf("window not reset: %v", s2)
	}
}

func unionKeys[K comparable](ms ...map[K]float64) map[K]bool {
	out := map[K]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// TestSamplingUnbiased checks that the scaled estimates average to the
// exact counts over many seeds, and that one window is within a few
// standard errors.
func TestSamplingUnbiased(t *testing.T) {
	const n, seeds = 4000, 200
	txns := genTxns(2, n, 2)
	ex := truth(txns)
	sumW := map[control.KeyGroup]float64{}
	sumWW := map[[2]control.KeyGroup]float64{}
	sumWR := map[[2]control.KeyGroup]float64{}
	for seed := uint64(1); seed <= seeds; seed++ {
		p := mustProfiler(t, func(c *ProfilerConfig) { c.Seed = seed })
		for _, tx := range txns {
			p.Record(tx[0], tx[1])
		}
		s := p.Summary(1, SummaryV2)
		if r := float64(s.SampledTxns) / n; math.Abs(r-1.0/8) > 0.02 {
			t.Fatalf("seed %d: sampled fraction %.4f, want ~1/8", seed, r)
		}
		for _, nw := range s.Nodes {
			sumW[nw.Kg] += nw.WriteWeight
		}
		for _, e := range s.TypedEdges {
			sumWW[[2]control.KeyGroup{e.A, e.B}] += e.Ww
			sumWR[[2]control.KeyGroup{e.A, e.B}] += e.Wr
		}
	}
	// Heavy entries: relative error of the mean over seeds is small.
	check := func(what string, k any, got, want float64) {
		t.Helper()
		if want < 100 {
			return
		}
		// one window: sd of a binomial-thinned count scaled by 8 is
		// ~sqrt(8·want); the mean of 200 windows has sd/sqrt(200).
		tol := 4 * math.Sqrt(8*want) / math.Sqrt(seeds)
		if math.Abs(got-want) > tol {
			t.Errorf("%s %v: mean estimate %.1f, exact %.0f (tolerance %.1f)", what, k, got, want, tol)
		}
	}
	for k, want := range ex.w {
		check("W", k, sumW[k]/seeds, want)
	}
	for k, want := range ex.ww {
		check("ww", k, sumWW[k]/seeds, want)
	}
	for k, want := range ex.wr {
		check("wr", k, sumWR[k]/seeds, want)
	}
	// Total mass of write weight is unbiased too.
	var tot, est float64
	for k, w := range ex.w {
		tot += w
		est += sumW[k] / seeds
	}
	if math.Abs(est-tot)/tot > 0.01 {
		t.Errorf("total write weight %.0f, estimated %.0f", tot, est)
	}
}

func TestAdaptiveSampling(t *testing.T) {
	p := mustProfiler(t, func(c *ProfilerConfig) { c.MaxSamplesPerWindow = 100 })
	w := []control.KeyGroup{1, 2}
	for range 8000 {
		p.Record(w, nil)
	}
	s := p.Summary(1, SummaryV2)
	if s.SampledTxns < 800 || s.SampledTxns > 1200 || p.Interval() != 80 {
		t.Fatalf("window 1: sampled %d, next interval %d", s.SampledTxns, p.Interval())
	}
	for range 8000 {
		p.Record(w, nil)
	}
	s = p.Summary(2, SummaryV2)
	if s.SampledTxns < 70 || s.SampledTxns > 130 {
		t.Fatalf("window 2 sampled %d, want ~100", s.SampledTxns)
	}
	if est := s.Nodes[0].WriteWeight; est != 8000 {
		t.Fatalf("estimate %v, want exactly 8000 (every txn writes kg 1)", est)
	}
	for range 100 {
		p.Record(w, nil)
	}
	p.Summary(3, SummaryV2)
	if p.Interval() != 8 {
		t.Fatalf("interval back to %d, want SampleEvery", p.Interval())
	}
}

func TestRecordDedupAndReadWrite(t *testing.T) {
	p := mustProfiler(t, func(c *ProfilerConfig) { c.SampleEvery = 1 })
	p.Record([]control.KeyGroup{1, 2, 2, 1}, []control.KeyGroup{2, 3, 3})
	s := p.Summary(1, SummaryV2)
	got := map[control.KeyGroup][2]float64{}
	for _, n := range s.Nodes {
		got[n.Kg] = [2]float64{n.WriteWeight, n.ReadWeight}
	}
	want := map[control.KeyGroup][2]float64{1: {1, 0}, 2: {1, 0}, 3: {0, 1}}
	if len(got) != len(want) {
		t.Fatalf("nodes %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("kg %d: %v want %v", k, got[k], v)
		}
	}
	edges := map[[2]control.KeyGroup][2]float64{}
	for _, e := range s.TypedEdges {
		edges[[2]control.KeyGroup{e.A, e.B}] = [2]float64{e.Ww, e.Wr}
	}
	wantE := map[[2]control.KeyGroup][2]float64{{1, 2}: {1, 0}, {1, 3}: {0, 1}, {2, 3}: {0, 1}}
	if len(edges) != len(wantE) {
		t.Fatalf("edges %v", edges)
	}
	for k, v := range wantE {
		if edges[k] != v {
			t.Fatalf("edge %v: %v want %v", k, edges[k], v)
		}
	}
}

func TestProfilerCaps(t *testing.T) {
	t.Run("pairs per txn", func(t *testing.T) {
		p := mustProfiler(t, func(c *ProfilerConfig) { c.SampleEvery = 1 })
		var big []control.KeyGroup
		for i := range 200 {
			big = append(big, control.KeyGroup(i))
		}
		p.Record(big, []control.KeyGroup{1000, 1001})
		s := p.Summary(1, SummaryV2)
		if len(s.Nodes) != 202 {
			t.Fatalf("every key group keeps its node weight: %d nodes", len(s.Nodes))
		}
		if len(s.TypedEdges) != 32*31/2 {
			t.Fatalf("edges %d, want %d", len(s.TypedEdges), 32*31/2)
		}
		if p.Stats().TruncatedTxns != 1 {
			t.Fatalf("truncated %d", p.Stats().TruncatedTxns)
		}
	})
	t.Run("nodes and edges", func(t *testing.T) {
		p := mustProfiler(t, func(c *ProfilerConfig) {
			c.SampleEvery = 1
			c.MaxNodes = 10
			c.MaxEdges = 20
		})
		for i := range 50 {
			p.Record([]control.KeyGroup{control.KeyGroup(i), control.KeyGroup(i + 1), control.KeyGroup(i + 2)}, nil)
		}
		s := p.Summary(1, SummaryV2)
		if len(s.Nodes) != 10 || len(s.TypedEdges) > 20 {
			t.Fatalf("nodes %d edges %d", len(s.Nodes), len(s.TypedEdges))
		}
		st := p.Stats()
		if st.DroppedNodes == 0 {
			t.Fatalf("no drops counted: %+v", st)
		}
		// First come: key groups 0..9 are the ones kept.
		for _, n := range s.Nodes {
			if n.Kg >= 10 {
				t.Fatalf("kept late kg %d", n.Kg)
			}
		}
	})
	t.Run("summary edges heaviest", func(t *testing.T) {
		p := mustProfiler(t, func(c *ProfilerConfig) {
			c.SampleEvery = 1
			c.MaxSummaryEdges = 3
		})
		for i := range 10 {
			for range i + 1 {
				p.Record([]control.KeyGroup{control.KeyGroup(100 + i), control.KeyGroup(200 + i)}, nil)
			}
		}
		for _, v := range []int{SummaryV1} {
			s := p.Summary(1, v)
			if len(s.Edges) != 3 {
				t.Fatalf("edges %d", len(s.Edges))
			}
			for _, e := range s.Edges {
				if e.A < 107 {
					t.Fatalf("kept light edge %v", e)
				}
			}
		}
		if p.Stats().TrimmedEdges != 7 {
			t.Fatalf("trimmed %d", p.Stats().TrimmedEdges)
		}
	})
	t.Run("table growth keeps entries", func(t *testing.T) {
		p := mustProfiler(t, func(c *ProfilerConfig) { c.SampleEvery = 1 })
		for i := range 5000 {
			p.Record([]control.KeyGroup{control.KeyGroup(i), control.KeyGroup(i + 1)}, nil)
		}
		s := p.Summary(1, SummaryV2)
		if len(s.Nodes) != 5001 || len(s.TypedEdges) != 5000 {
			t.Fatalf("nodes %d edges %d", len(s.Nodes), len(s.TypedEdges))
		}
	})
}

func TestRecordLocksAndMeta(t *testing.T) {
	p := mustProfiler(t, func(c *ProfilerConfig) {
		c.SampleEvery = 1
		c.NodeIndex = 2
		c.EmitHomes = true
	})
	p.SetLoad(7, 0.5)
	p.SetEpochs(3, 9)
	p.Record([]control.KeyGroup{5}, []control.KeyGroup{6})
	p.RecordLocks(LockCounts{Local: 3, OwnerRPC: 2, MNCAS: 4, MNCASFailed: 1, Redirected: 1}, []control.KeyGroup{5, 5, 8})
	s := p.Summary(11, SummaryV2)
	if s.Tick != 11 || s.QueueDepth != 7 || s.CpuLoad != 0.5 || s.MembershipEpoch != 3 || s.OwnermapEpoch != 9 || s.NodeIndex != 2 || s.Node != "cn-0" {
		t.Fatalf("meta %v", s)
	}
	l := s.Locks
	if l.Local != 3 || l.OwnerRpc != 2 || l.MnCas != 4 || l.MnCasFailed != 1 || l.Redirected != 1 {
		t.Fatalf("locks %v", l)
	}
	fb := map[uint64]uint64{}
	for _, c := range l.FallbackCas {
		fb[c.Kg] = c.Count
	}
	if len(fb) != 2 || fb[5] != 2 || fb[8] != 1 {
		t.Fatalf("fallback %v", fb)
	}
	if len(s.Nodes) != 2 { // kg 8 has only fallback counts
		t.Fatalf("nodes %v", s.Nodes)
	}
	if len(s.Homes) != 2 {
		t.Fatalf("homes %v", s.Homes)
	}
	for _, h := range s.Homes {
		if len(h.HomeCounts) != 3 || h.HomeCounts[2] != 1 || h.HomeCounts[0] != 0 {
			t.Fatalf("home %v", h)
		}
	}
	// Lock counts reset with the window.
	if s2 := p.Summary(12, SummaryV2); s2.Locks.Local != 0 || len(s2.Locks.FallbackCas) != 0 {
		t.Fatalf("locks not reset: %v", s2.Locks)
	}
}

func TestProfilerConfigValidate(t *testing.T) {
	if err := DefaultProfilerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := ProfilerConfig{NodeIndex: 300, AlphaWR: 2, MaxSummaryEdges: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, f := range []string{"NodeIndex", "SampleEvery", "MaxPairKGs", "MaxNodes", "MaxEdges", "MaxSummaryEdges", "AlphaWR"} {
		if !containsStr(err.Error(), f) {
			t.Errorf("error does not mention %s: %v", f, err)
		}
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || containsStr(s[1:], sub)))
}

func TestSummaryVersionPanics(t *testing.T) {
	p := mustProfiler(t, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("version 3 did not panic")
		}
	}()
	p.Summary(1, 3)
}

var sinkSummary *messages.AccessSummary

// BenchmarkRecord measures the profiler's cost per committed TPC-C-like
// transaction (12 written and 2 read key groups of one of 16 warehouses).
// Windows close every 10,000 transactions (a 100 ms window at 100k txn/s on
// the CN). "hotpath" times Record only (the cost on the transaction's
// commit path); "total" also times Summary, which expands the buffered
// pairs and builds the heartbeat (the profiler's whole CPU cost).
func BenchmarkRecord(b *testing.B) {
	for _, every := range []uint32{8, 32, 1} {
		for _, total := range []bool{false, true} {
			name := fmt.Sprintf("sample1in%d/hotpath", every)
			if total {
				name = fmt.Sprintf("sample1in%d/total", every)
			}
			b.Run(name, func(b *testing.B) {
				p := mustProfiler(b, func(c *ProfilerConfig) {
					c.SampleEvery = every
					c.MaxSamplesPerWindow = 0 // measure the fixed rate
				})
				rng := rand.New(rand.NewPCG(1, 2))
				const pool = 4096
				txns := make([][2][]control.KeyGroup, pool)
				for i := range txns {
					w, r := tpccTxn(rng, 16, nil, nil)
					txns[i] = [2][]control.KeyGroup{w, r}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					tx := &txns[i%pool]
					p.Record(tx[0], tx[1])
					if i%10000 == 9999 {
						if !total {
							b.StopTimer()
						}
						sinkSummary = p.Summary(uint64(i), SummaryV2)
						if !total {
							b.StartTimer()
						}
					}
				}
			})
		}
	}
}
