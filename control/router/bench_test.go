package router

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// kgOf packs a reshaped TPC-C key group: table in the top byte, warehouse
// and bucket below (the reshaped encoding of SPEC §5).
func kgOf(table, wh, bucket uint64) uint64 { return table<<56 | wh<<16 | bucket }

// tpccLike returns a router over nodes nodes whose map has warehouses ×
// tables cohorts (one per warehouse and table, 64 buckets each), warehouse w
// owned by w % nodes, and a NewOrder-like write set of 12 key groups: the
// district, one customer, the order, new-order and order lines, and stock
// buckets, of warehouse 3, one stock bucket remote.
func tpccLike(nodes, warehouses, tables int) (*Router, []uint64) {
	m := &control.OwnerMap{Epoch: 1}
	for w := range warehouses {
		for tb := range tables {
			p := control.Placement{Cohort: control.Cohort{ID: uint64(w*tables + tb)}, Owner: w % nodes}
			for b := range 64 {
				p.KeyGroups = append(p.KeyGroups, kgOf(uint64(tb), uint64(w), uint64(b)))
			}
			m.Cohorts = append(m.Cohorts, p)
		}
	}
	r := New(DefaultConfig(nodes))
	if err := r.Install(m); err != nil {
		panic(err)
	}
	const w = 3
	writes := []uint64{
		kgOf(1, w, 5), kgOf(2, w, 17), kgOf(3, w, 40), kgOf(4, w, 40), kgOf(5, w, 40),
		kgOf(6, w, 1), kgOf(6, w, 9), kgOf(6, w, 22), kgOf(6, w, 31), kgOf(6, w, 50),
		kgOf(6, (w+1)%uint64(warehouses), 12), kgOf(7, w, 40),
	}
	return r, writes
}

// bigRouter returns a router over 8 nodes whose map has size key groups in
// cohorts of 64 (reshaped TPC-C-like ids), and the key groups.
func bigRouter(size int) (*Router, []uint64) {
	const perCohort = 64
	m := &control.OwnerMap{Epoch: 1}
	kgs := make([]uint64, 0, size)
	for c := 0; c*perCohort < size; c++ {
		p := control.Placement{Cohort: control.Cohort{ID: uint64(c)}, Owner: c % 8}
		for k := range perCohort {
			if c*perCohort+k == size {
				break
			}
			kg := kgOf(uint64(c%9), uint64(c/9), uint64(k))
			p.KeyGroups = append(p.KeyGroups, kg)
			kgs = append(kgs, kg)
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	r := New(DefaultConfig(8))
	if err := r.Install(m); err != nil {
		panic(err)
	}
	return r, kgs
}

// BenchmarkOwnerOfKeyGroup looks up random installed key groups (and, in
// the miss case, key groups that are not installed) in maps of 9,216 key
// groups (the tutorial's 9 tables × 1024 buckets) and 1,000,000 (SPEC §11's
// simulator scale), one at a time: uniformly at random (the worst case,
// where each lookup of the large map is a cache and TLB miss), and with
// Zipf(1.1) skew over key groups scattered through the map (the hot set of a
// real workload stays in cache). SPEC §11's target: ≤ 50 ns per key group.
func BenchmarkOwnerOfKeyGroup(b *testing.B) {
	for _, size := range []int{9216, 1_000_000} {
		r, kgs := bigRouter(size)
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		const probes = 1 << 16
		hit := make([]uint64, probes)
		miss := make([]uint64, probes)
		skewed := make([]uint64, probes)
		perm := rng.Perm(len(kgs)) // hot key groups scattered over the map
		zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(kgs)-1))
		for i := range hit {
			hit[i] = kgs[rng.IntN(len(kgs))]
			miss[i] = kgOf(200, rng.Uint64N(1<<32), uint64(rng.IntN(1<<16)))
			skewed[i] = kgs[perm[zipf.Uint64()]]
		}
		for _, tc := range []struct {
			name string
			kgs  []uint64
		}{{"hit", hit}, {"miss", miss}, {"zipf", skewed}} {
			b.Run(fmt.Sprintf("kgs=%d/%s", size, tc.name), func(b *testing.B) {
				var sink int
				i := 0
				for b.Loop() {
					_, o, _ := r.OwnerOfKeyGroup(tc.kgs[i&(probes-1)])
					sink += o
					i++
				}
				_ = sink
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/kg")
			})
		}
	}
}

// BenchmarkRouteCold routes transactions of 12 write key groups drawn
// uniformly from maps of 9,216 and 1,000,000 key groups, a different
// transaction each time (so, in the large map, every key group is a cache
// miss), against looking the same key groups up one by one.
func BenchmarkRouteCold(b *testing.B) {
	const txns, width = 4096, 12
	for _, size := range []int{9216, 1_000_000} {
		r, kgs := bigRouter(size)
		rng := rand.New(rand.NewPCG(2, uint64(size)))
		ws := make([][]uint64, txns)
		for i := range ws {
			for range width {
				ws[i] = append(ws[i], kgs[rng.IntN(len(kgs))])
			}
		}
		b.Run(fmt.Sprintf("kgs=%d/route", size), func(b *testing.B) {
			i := 0
			for b.Loop() {
				r.Route(ws[i&(txns-1)], nil, 3, nil)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/width, "ns/kg")
		})
		b.Run(fmt.Sprintf("kgs=%d/one-by-one", size), func(b *testing.B) {
			i, sink := 0, 0
			for b.Loop() {
				for _, kg := range ws[i&(txns-1)] {
					_, o, _ := r.OwnerOfKeyGroup(kg)
					sink += o
				}
				i++
			}
			_ = sink
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/width, "ns/kg")
		})
	}
}

// BenchmarkRoute routes a NewOrder-like transaction of 12 write key groups
// through the overlay (8 nodes, 1024 warehouses × 9 tables = 9,216 cohorts of
// 64 key groups).
func BenchmarkRoute(b *testing.B) {
	r, writes := tpccLike(8, 1024, 9)
	queue := []float64{0.5, 0, 1, 0, 0, 0.25, 0, 0}
	b.Run("overlay", func(b *testing.B) {
		for b.Loop() {
			r.Route(writes, nil, 3, queue)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(writes)), "ns/kg")
	})
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			r.RouteNaive(writes, 3)
		}
	})
	unowned := make([]uint64, len(writes))
	for i := range unowned {
		unowned[i] = kgOf(100, 3, uint64(i))
	}
	b.Run("fallback", func(b *testing.B) {
		for b.Loop() {
			r.Route(unowned, nil, 3, queue)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(writes)), "ns/kg")
	})
}

// BenchmarkInstall builds the index for 9,216 cohorts × 64 key groups
// (589,824 key groups).
func BenchmarkInstall(b *testing.B) {
	m := &control.OwnerMap{}
	for c := range 9216 {
		p := control.Placement{Cohort: control.Cohort{ID: uint64(c)}, Owner: c % 8}
		for k := range 64 {
			p.KeyGroups = append(p.KeyGroups, kgOf(uint64(c%9), uint64(c/9), uint64(k)))
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	r := New(DefaultConfig(8))
	for b.Loop() {
		m.Epoch++
		if err := r.Install(m); err != nil {
			b.Fatal(err)
		}
	}
}
