package router

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aura-runtime/aura/control"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig(4).Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{Nodes: 0, Beta: math.NaN(), WriteWeight: 0, ReadWeight: -1}.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 3 {
		t.Fatalf("want four problems reported, got %v", err)
	}
	if err := (Config{Nodes: control.MaxNodes + 1, WriteWeight: 1}).Validate(); err == nil {
		t.Fatal("256 nodes accepted")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted an invalid config")
		}
	}()
	New(Config{})
}

func TestNilFallbackIsModulo(t *testing.T) {
	cfg := DefaultConfig(3)
	cfg.Fallback = nil
	r := New(cfg)
	for home := range uint64(10) {
		if n, _ := r.FallbackNode(home); n != int(home%3) {
			t.Fatalf("home %d → %d", home, n)
		}
	}
}

func TestBadFallbackResultIsClamped(t *testing.T) {
	cfg := DefaultConfig(3)
	cfg.Fallback = func(uint64) int { return 7 }
	r := New(cfg)
	if n, _ := r.FallbackNode(5); n != 2 {
		t.Fatalf("got %d, want 5 %% 3", n)
	}
}

func TestRendezvousFallback(t *testing.T) {
	const parts = 20000
	for _, n := range []int{1, 2, 4, 8, 64} {
		f := RendezvousFallback(n)
		counts := make([]int, n)
		for p := range uint64(parts) {
			i := f(p * 7919)
			if i < 0 || i >= n {
				t.Fatalf("n=%d: node %d", n, i)
			}
			counts[i]++
		}
		mean := float64(parts) / float64(n)
		for i, c := range counts {
			if math.Abs(float64(c)-mean) > 0.2*mean+20 {
				t.Fatalf("n=%d: node %d got %d partitions, mean %.0f", n, i, c, mean)
			}
		}
	}
	// Growing from 8 to 9 nodes moves only partitions the new node wins.
	f8, f9 := RendezvousFallback(8), RendezvousFallback(9)
	moved := 0
	for p := range uint64(parts) {
		a, b := f8(p), f9(p)
		if a != b {
			if b != 8 {
				t.Fatalf("partition %d moved from %d to %d, not to the new node", p, a, b)
			}
			moved++
		}
	}
	if frac := float64(moved) / parts; frac < 0.08 || frac > 0.14 {
		t.Fatalf("%.3f of partitions moved, want ≈ 1/9", frac)
	}
	for _, bad := range []func(){func() { RendezvousFallback(0) }, func() { ModuloFallback(0) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic for 0 nodes")
				}
			}()
			bad()
		}()
	}
}

func TestStaleEpochIsTyped(t *testing.T) {
	r := New(DefaultConfig(2))
	if err := r.Install(&control.OwnerMap{Epoch: 5}); err != nil {
		t.Fatal(err)
	}
	err := r.Install(&control.OwnerMap{Epoch: 4})
	var se *StaleEpochError
	if !errors.Is(err, ErrStaleEpoch) || !errors.As(err, &se) || se.Installed != 5 || se.Got != 4 {
		t.Fatalf("got %v", err)
	}
	if err := r.Install(nil); !errors.Is(err, ErrInvalidMap) {
		t.Fatalf("nil map: %v", err)
	}
	if e, ok := r.Epoch(); e != 5 || !ok {
		t.Fatalf("epoch %d %v", e, ok)
	}
}

func TestInstallDoesNotRetainTheMap(t *testing.T) {
	r := New(DefaultConfig(4))
	m := &control.OwnerMap{Epoch: 1, Fallback: []uint8{3}, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{5}}, Owner: 2}}}
	if err := r.Install(m); err != nil {
		t.Fatal(err)
	}
	m.Fallback[0] = 0
	m.Cohorts[0].Owner = 1
	m.Cohorts[0].KeyGroups[0] = 6
	if c, o, ok := r.OwnerOfKeyGroup(5); !ok || c != 1 || o != 2 {
		t.Fatalf("kg 5: %d %d %v", c, o, ok)
	}
	if n, fromTable := r.FallbackNode(0); n != 3 || !fromTable {
		t.Fatalf("fallback %d %v", n, fromTable)
	}
}

func TestIndexEdgeCases(t *testing.T) {
	// Key group 0, the largest key group, and ids that differ only in high
	// bits or collide in the low bits all index correctly.
	var kgs []uint64
	kgs = append(kgs, 0, math.MaxUint64)
	for i := range uint64(300) {
		kgs = append(kgs, i<<56, i<<32|7, i<<20, 1+i*1024)
	}
	slices.Sort(kgs)
	kgs = slices.Compact(kgs)
	ix := newIndex(len(kgs))
	for i, kg := range kgs {
		if !ix.insert(kg, uint32(i), uint32(i%7)) {
			t.Fatalf("kg %d rejected", kg)
		}
	}
	if ix.insert(kgs[3], 0, 0) {
		t.Fatal("duplicate accepted")
	}
	for i, kg := range kgs {
		ref, o, ok := ix.find(kg)
		if !ok || ref != uint32(i) || o != uint32(i%7) {
			t.Fatalf("kg %d: %d %d %v", kg, ref, o, ok)
		}
	}
	for _, kg := range []uint64{5, 1 << 40, math.MaxUint64 - 1} {
		if _, _, ok := ix.find(kg); ok {
			t.Fatalf("kg %d found", kg)
		}
	}
	var empty index
	if _, _, ok := empty.find(0); ok {
		t.Fatal("empty index found kg 0")
	}
	// findMany agrees with find, hits and misses mixed, kg 0 included.
	probe := slices.Clone(kgs)
	probe = append(probe, 5, 1<<40, math.MaxUint64-1, 2<<56|3)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(probe), func(a, b int) { probe[a], probe[b] = probe[b], probe[a] })
	var out [batch]hit
	for start := 0; start < len(probe); start += batch {
		chunk := probe[start:min(len(probe), start+batch)]
		ix.findMany(chunk, &out)
		for j, kg := range chunk {
			ref, o, ok := ix.find(kg)
			if out[j] != (hit{ref: ref, owner: o, ok: ok}) {
				t.Fatalf("kg %d: findMany %+v, find %d %d %v", kg, out[j], ref, o, ok)
			}
		}
	}
	// An index without kg 0 whose home slot for 0 is empty.
	small := newIndex(1)
	small.insert(12345, 0, 1)
	small.findMany([]uint64{0, 12345}, &out)
	if out[0].ok || !out[1].ok || out[1].owner != 1 {
		t.Fatalf("small index: %+v", out[:2])
	}
}

// randomMap returns a valid map of up to 50 cohorts over key groups below
// 500, owners below nodes.
func randomMap(rng *rand.Rand, epoch uint64, nodes int) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch}
	perm := rng.Perm(500)
	next := 0
	for c := range rng.IntN(50) {
		k := rng.IntN(12)
		if next+k > len(perm) {
			break
		}
		var kgs []uint64
		for _, v := range perm[next : next+k] {
			kgs = append(kgs, uint64(v))
		}
		next += k
		slices.Sort(kgs)
		m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: uint64(c * 3), KeyGroups: kgs}, Owner: rng.IntN(nodes)})
	}
	return m
}

// reference computes the decision from the formula directly, from the map.
func reference(m *control.OwnerMap, cfg Config, weights map[uint64][2]float64, writes, reads []uint64, home uint64, queue []float64) (node int, overlay bool) {
	owner := map[uint64]control.Placement{}
	for _, p := range m.Cohorts {
		for _, kg := range p.KeyGroups {
			owner[kg] = p
		}
	}
	w := func(id uint64) (float64, float64) {
		if x, ok := weights[id]; ok {
			return x[0], x[1]
		}
		return cfg.WriteWeight, cfg.ReadWeight
	}
	score := make([]float64, cfg.Nodes)
	owned := 0
	for _, kg := range writes {
		if p, ok := owner[kg]; ok {
			a, _ := w(p.ID)
			score[p.Owner] += a
			owned++
		}
	}
	if cfg.Beta > 0 {
		for _, kg := range reads {
			if p, ok := owner[kg]; ok {
				_, rr := w(p.ID)
				score[p.Owner] += cfg.Beta * rr
				owned++
			}
		}
	}
	fb := int(home % uint64(cfg.Nodes))
	if owned == 0 {
		return fb, false
	}
	best := math.Inf(-1)
	for i := range score {
		q := 0.0
		if i < len(queue) {
			q = queue[i]
		}
		score[i] -= q
		best = max(best, score[i])
	}
	if score[fb] == best {
		return fb, true
	}
	return slices.Index(score, best), true
}

func TestRouteMatchesTheFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 300 {
		nodes := 1 + rng.IntN(40)
		cfg := DefaultConfig(nodes)
		if rng.IntN(2) == 0 {
			cfg.Beta = float64(rng.IntN(4)) / 4
		}
		r := New(cfg)
		m := randomMap(rng, uint64(i), nodes)
		if err := r.Install(m); err != nil {
			t.Fatal(err)
		}
		weights := map[uint64][2]float64{}
		for _, p := range m.Cohorts {
			if rng.IntN(3) == 0 {
				a, rr := float64(rng.IntN(4)), float64(rng.IntN(3))
				if err := r.SetWeights(p.ID, a, rr); err != nil {
					t.Fatal(err)
				}
				weights[p.ID] = [2]float64{a, rr}
			}
		}
		for range 50 {
			var writes, reads []uint64
			for range rng.IntN(20) {
				writes = append(writes, uint64(rng.IntN(600)))
			}
			for range rng.IntN(8) {
				reads = append(reads, uint64(rng.IntN(600)))
			}
			var queue []float64
			for range rng.IntN(nodes + 2) {
				queue = append(queue, float64(rng.IntN(3)))
			}
			home := rng.Uint64N(1000)
			d := r.Route(writes, reads, home, queue)
			node, overlay := reference(m, cfg, weights, writes, reads, home, queue)
			if d.Node != node || (d.Layer == Overlay) != overlay {
				t.Fatalf("case %d: Route chose %d (%v), the formula %d (overlay %v)", i, d.Node, d.Layer, node, overlay)
			}
			scores := r.Scores(nil, writes, reads, queue)
			if d.Layer == Overlay && scores[d.Node] != d.Score {
				t.Fatalf("case %d: decision score %g, Scores %g", i, d.Score, scores[d.Node])
			}
			if d.Layer == Overlay && d.Score != d.Writes+d.Reads-d.Queue {
				t.Fatalf("case %d: score terms %+v do not add up", i, d)
			}
		}
	}
}

func TestManyOwnersInOneTransaction(t *testing.T) {
	// More distinct owners than the tally's inline buffer.
	const nodes = 40
	r := New(DefaultConfig(nodes))
	m := &control.OwnerMap{Epoch: 1}
	var writes []uint64
	for i := range nodes {
		m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: uint64(i), KeyGroups: []uint64{uint64(i)}}, Owner: i})
		writes = append(writes, uint64(i))
	}
	writes = append(writes, 33) // node 33 owns two of the write set
	if err := r.Install(m); err != nil {
		t.Fatal(err)
	}
	if d := r.Route(writes, nil, 0, nil); d.Node != 33 || d.LocalWrites != 2 || d.OwnedWrites != nodes+1 {
		t.Fatalf("got %+v", d)
	}
}

func TestRouteDoesNotAllocate(t *testing.T) {
	r, writes := tpccLike(8, 1024, 9)
	allocs := testing.AllocsPerRun(100, func() {
		r.Route(writes, nil, 3, nil)
		r.RouteNaive(writes, 3)
		r.OwnerOfKeyGroup(writes[0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per route", allocs)
	}
}

func TestConcurrentReaders(t *testing.T) {
	// The reading methods may run concurrently (run with -race).
	r, writes := tpccLike(4, 64, 9)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				r.Route(writes, writes[:2], uint64(g+i), []float64{1, 0, 2, 0})
				r.RouteNaive(writes, uint64(i))
				r.OwnerOfKeyGroup(uint64(i))
				r.Scores(nil, writes, nil, nil)
			}
		}()
	}
	wg.Wait()
}

func TestNonFiniteQueueDoesNotBreakRouting(t *testing.T) {
	for _, nodes := range []int{4, 40} {
		r := New(DefaultConfig(nodes))
		m := &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{1}}, Owner: 2}}}
		if err := r.Install(m); err != nil {
			t.Fatal(err)
		}
		nan, inf := make([]float64, nodes), make([]float64, nodes)
		for i := range nan {
			nan[i], inf[i] = math.NaN(), math.Inf(1)
		}
		for _, q := range [][]float64{nan, inf} {
			if d := r.Route([]uint64{1}, nil, 3, q); d.Node != 3 || d.Layer != Overlay {
				t.Fatalf("nodes=%d queue %v: got %+v, want the fallback node 3", nodes, q[0], d)
			}
		}
		nan[0] = 0 // the one finite score wins
		if d := r.Route([]uint64{1}, nil, 3, nan); d.Node != 0 {
			t.Fatalf("nodes=%d: got %+v", nodes, d)
		}
	}
}
