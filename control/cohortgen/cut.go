package cohortgen

import "math"

// ledge is an edge of a small local graph (a cohort's or a region's
// induced subgraph), endpoints as local indices.
type ledge struct {
	a, b int32
	w    float64
}

// localGraph is a small undirected weighted graph in CSR form with node
// self weights (W(v)): the input of the cut heuristic. It is reused
// across calls to avoid allocation.
type localGraph struct {
	n    int
	self []float64
	deg  []float64 // Σ incident edge weight
	off  []int32
	nbr  []int32
	w    []float64
	sum  float64 // Σ self + Σ edges: intra(C) in the package's sense
	// sweep scratch
	inA   []bool
	conn  []float64
	order []int32
}

func (lg *localGraph) build(n int, self []float64, edges []ledge) {
	lg.n = n
	lg.self = self
	lg.deg = resizeF(lg.deg, n)
	lg.off = resizeI(lg.off, n+1)
	clear(lg.deg)
	clear(lg.off)
	lg.sum = 0
	for _, s := range self[:n] {
		lg.sum += s
	}
	for _, e := range edges {
		lg.off[e.a+1]++
		lg.off[e.b+1]++
		lg.deg[e.a] += e.w
		lg.deg[e.b] += e.w
		lg.sum += e.w
	}
	for i := 1; i <= n; i++ {
		lg.off[i] += lg.off[i-1]
	}
	m := int(lg.off[n])
	lg.nbr = resizeI(lg.nbr, m)
	lg.w = resizeF(lg.w, m)
	pos := resizeI(lg.order, n) // borrow order as cursor
	copy(pos, lg.off[:n])
	for _, e := range edges {
		lg.nbr[pos[e.a]], lg.w[pos[e.a]] = e.b, e.w
		pos[e.a]++
		lg.nbr[pos[e.b]], lg.w[pos[e.b]] = e.a, e.w
		pos[e.b]++
	}
	lg.order = pos
}

// cutResult is a bipartition found by the sweep.
type cutResult struct {
	ok         bool
	inA        []bool // side A membership by local index (owned by the caller)
	cut        float64
	volA, volB float64 // intra of each side: self weights + internal edges
	phi        float64 // cut / min(volA, volB)
}

// maxAdjacencyOrder orders the nodes greedily from seed, each next node
// being the one most connected to those already taken (ties: heavier self
// weight, then lower index). It calls visit after each addition with the
// prefix size, the prefix's intra and the cut between prefix and rest.
func (lg *localGraph) maxAdjacencyOrder(seed int32, visit func(k int, volA, cut float64)) []int32 {
	n := lg.n
	lg.inA = resizeB(lg.inA, n)
	lg.conn = resizeF(lg.conn, n)
	clear(lg.inA)
	clear(lg.conn)
	order := lg.order[:0]
	volA, cut := 0.0, 0.0
	x := seed
	for k := 1; k <= n; k++ {
		lg.inA[x] = true
		order = append(order, x)
		volA += lg.self[x] + lg.conn[x]
		cut += lg.deg[x] - 2*lg.conn[x]
		for p := lg.off[x]; p < lg.off[x+1]; p++ {
			lg.conn[lg.nbr[p]] += lg.w[p]
		}
		if visit != nil {
			visit(k, volA, cut)
		}
		if k == n {
			break
		}
		best := int32(-1)
		for y := int32(0); y < int32(n); y++ {
			if lg.inA[y] {
				continue
			}
			if best < 0 || lg.conn[y] > lg.conn[best] || (lg.conn[y] == lg.conn[best] && lg.self[y] > lg.self[best]) {
				best = y
			}
		}
		x = best
	}
	lg.order = order
	return order
}

// heaviest returns the node with the largest self + degree (lowest index
// on ties).
func (lg *localGraph) heaviest() int32 {
	best := int32(0)
	for y := int32(1); y < int32(lg.n); y++ {
		if lg.self[y]+lg.deg[y] > lg.self[best]+lg.deg[best] {
			best = y
		}
	}
	return best
}

// bestCut runs the sweep from two seeds — the heaviest node and the last
// node of the first sweep (the one least attached to it) — and returns the
// prefix cut with the smallest φ = cut/min(volA, volB) whose sides both
// have at least minSize nodes. res.inA is written into inA (len ≥ n).
func (lg *localGraph) bestCut(minSize int, inA []bool) cutResult {
	n := lg.n
	res := cutResult{phi: math.Inf(1), inA: inA[:n]}
	if n < 2*minSize || n < 2 {
		return res
	}
	seeds := [2]int32{lg.heaviest(), -1}
	for si, seed := range seeds {
		if seed < 0 {
			break
		}
		bestK, bestPhi, bestCut, bestVolA := -1, math.Inf(1), 0.0, 0.0
		order := lg.maxAdjacencyOrder(seed, func(k int, volA, cut float64) {
			if k < minSize || n-k < minSize {
				return
			}
			volB := lg.sum - volA - cut
			den := math.Min(volA, volB)
			phi := math.Inf(1)
			if den > 0 {
				phi = cut / den
			} else if cut == 0 {
				phi = 0
			}
			if phi < bestPhi {
				bestK, bestPhi, bestCut, bestVolA = k, phi, cut, volA
			}
		})
		if bestK >= 0 && bestPhi < res.phi {
			res.ok = true
			res.phi, res.cut, res.volA = bestPhi, bestCut, bestVolA
			res.volB = lg.sum - bestVolA - bestCut
			clear(res.inA)
			for _, x := range order[:bestK] {
				res.inA[x] = true
			}
		}
		if si == 0 && n > 1 {
			seeds[1] = order[n-1]
		}
	}
	return res
}

func resizeF(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func resizeI(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func resizeB(s []bool, n int) []bool {
	if cap(s) < n {
		return make([]bool, n)
	}
	return s[:n]
}

func resizeU8(s []uint8, n int) []uint8 {
	if cap(s) < n {
		return make([]uint8, n)
	}
	return s[:n]
}

func resizeU(s []uint64, n int) []uint64 {
	if cap(s) < n {
		return make([]uint64, n)
	}
	return s[:n]
}
