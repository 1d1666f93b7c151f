package cohortgen

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/community"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
)

// refineCooldownRounds: a cohort that was part of a refinement region is
// not chosen as the seed of another for this many refinement periods, so
// refinement rotates over the graph.
const refineCooldownRounds = 4

// RegionCohort is one cohort of a refinement region.
type RegionCohort struct {
	ID      control.CohortID
	Version uint64
	// Members are local indices into RefineRequest.KGs.
	Members []int32
}

// RefineEdge is an edge of a refinement region (local indices, A < B).
type RefineEdge struct {
	A, B int32
	W    float64
}

// RefineRequest is a self-contained snapshot of one refinement region: it
// shares no memory with the generator or the graph, so Refine may run on
// any goroutine.
type RefineRequest struct {
	// Tick is the generator tick the snapshot was taken at.
	Tick uint64
	// KGs are the region's key groups, ascending; W their write weights.
	KGs []control.KeyGroup
	W   []float64
	// Old are the region's cohorts.
	Old []RegionCohort
	// Edges are the significant edges among KGs (combined weights; see
	// Config.Significance).
	Edges []RefineEdge
	// Out[i] is KGs[i]'s heaviest significant connection to one cohort
	// outside the region (nil: none known). A key group whose proposed
	// cohort holds less than strayShare of that stays a singleton: the
	// region does not hold the group it belongs to.
	Out []float64
	// Home[i] is KGs[i]'s clear home CN (its transactions run there at
	// least half the time), or −1. A stray (see Out) stays in its proposed
	// cohort when it has that cohort's home.
	Home []int
	// Parameters copied from the Config.
	MaxSize, MaxEdges   int
	MinGain, Resolution float64
	Seed                uint64
}

// RefineResult is Refine's answer for one request.
type RefineResult struct {
	// Req is the request answered.
	Req *RefineRequest
	// Communities is the proposed partition of the region (local indices,
	// each sorted, none larger than MaxSize).
	Communities [][]int32
	// OldInternal and NewInternal are the edge weight inside the old and the
	// proposed cohorts; Total the region's edge weight.
	OldInternal, NewInternal, Total float64
	// Adopt reports that the proposal keeps at least MinGain·Total more
	// weight inside cohorts than the old partition.
	Adopt bool
}

// Gain returns (NewInternal − OldInternal) / Total.
func (r *RefineResult) Gain() float64 {
	if r.Total <= 0 {
		return 0
	}
	return (r.NewInternal - r.OldInternal) / r.Total
}

// PrepareRefine snapshots the next refinement region: a seed cohort (the
// one with the largest share of its weight on edges leaving it, among
// those not refined in the last few periods) grown with the neighbouring
// cohorts it is most connected to, up to RefineMaxKGs key groups. Call it
// right after Step, before the graph changes; it returns nil when there is
// nothing to refine. Use it with RefineInline false: run Refine on another
// goroutine and hand the result to OfferRefinement; the next Step adopts
// it if the region's cohorts have not changed in between.
func (gen *Generator) PrepareRefine(g *accessgraph.Graph) *RefineRequest {
	gen.index(g)
	return gen.prepare(g)
}

// OfferRefinement hands a Refine result to the generator; the next Step
// applies it if every cohort of its region still exists unchanged, and
// discards it otherwise.
func (gen *Generator) OfferRefinement(r *RefineResult) { gen.offered = r }

func (gen *Generator) prepare(g *accessgraph.Graph) *RefineRequest {
	cfg := &gen.cfg
	cool := uint64(cfg.RefineEvery * refineCooldownRounds)
	seed := -1
	bestScore := 0.0
	for i, c := range gen.cohorts {
		if c.dead || c.touched || c.statsTick != gen.tick || c.ext <= 0 || len(c.kgs) > cfg.RefineMaxKGs {
			continue
		}
		if c.refinedAt != 0 && gen.tick-c.refinedAt < cool {
			continue
		}
		score := c.ext / (c.intra + cfg.SelfWeight*c.w + c.ext)
		if seed < 0 || score > bestScore || (score == bestScore && c.w > gen.cohorts[seed].w) {
			seed, bestScore = i, score
		}
	}
	if seed < 0 {
		return nil
	}
	// Grow the region by the heaviest connection.
	n := len(gen.cohorts)
	inRegion := make([]bool, n)
	acc := make([]float64, n)
	var touched []int32
	region := []int32{}
	size := 0
	add := func(slot int32) {
		inRegion[slot] = true
		region = append(region, slot)
		size += len(gen.cohorts[slot].kgs)
		for _, gid := range gen.cohorts[slot].gids {
			nb, ws := g.NeighborsOf(gid)
			for k, v := range nb {
				d := gen.slotOf(v)
				if d < 0 || inRegion[d] {
					continue
				}
				if acc[d] == 0 {
					touched = append(touched, d)
				}
				acc[d] += ws[k]
			}
		}
	}
	add(int32(seed))
	for {
		best := int32(-1)
		for _, d := range touched {
			c := gen.cohorts[d]
			if inRegion[d] || c.dead || c.touched || size+len(c.kgs) > cfg.RefineMaxKGs {
				continue
			}
			if best < 0 || acc[d] > acc[best] || (acc[d] == acc[best] && c.id < gen.cohorts[best].id) {
				best = d
			}
		}
		if best < 0 {
			break
		}
		add(best)
	}

	// Snapshot the region.
	type member struct {
		kg    control.KeyGroup
		gid   accessgraph.NodeID
		w     float64
		owner int
	}
	var ms []member
	for k, slot := range region {
		c := gen.cohorts[slot]
		for j, kg := range c.kgs {
			ms = append(ms, member{kg, c.gids[j], c.mw[j], k})
		}
	}
	slices.SortFunc(ms, func(x, y member) int { return cmp.Compare(x.kg, y.kg) })
	req := &RefineRequest{
		Tick: gen.tick, KGs: make([]control.KeyGroup, len(ms)), W: make([]float64, len(ms)),
		Old:     make([]RegionCohort, len(region)),
		MaxSize: cfg.MaxCohortSize, MaxEdges: cfg.RefineMaxEdges,
		MinGain: cfg.RefineMinGain, Resolution: cfg.RefineResolution, Seed: cfg.Seed,
	}
	local := make(map[accessgraph.NodeID]int32, len(ms))
	for i, m := range ms {
		req.KGs[i], req.W[i] = m.kg, m.w
		local[m.gid] = int32(i)
		req.Old[m.owner].Members = append(req.Old[m.owner].Members, int32(i))
	}
	for k, slot := range region {
		c := gen.cohorts[slot]
		req.Old[k].ID, req.Old[k].Version = c.id, c.version
	}
	slices.SortFunc(req.Old, func(x, y RegionCohort) int { return cmp.Compare(x.ID, y.ID) })
	req.Out = make([]float64, len(ms))
	req.Home = make([]int, len(ms))
	var one cohort
	for i, m := range ms {
		one = cohort{kgs: []control.KeyGroup{m.kg}, mw: []float64{m.w}}
		req.Home[i] = gen.home(g, &one)
	}
	clear(acc)
	var outT []int32
	for i, m := range ms {
		nb, ws := g.NeighborsOf(m.gid)
		for k, v := range nb {
			if !gen.significant(m.gid, v, ws[k]) {
				continue
			}
			if j, ok := local[v]; ok {
				if int32(i) < j {
					req.Edges = append(req.Edges, RefineEdge{A: int32(i), B: j, W: ws[k]})
				}
				continue
			}
			if d := gen.slotOf(v); d >= 0 {
				if acc[d] == 0 {
					outT = append(outT, d)
				}
				acc[d] += ws[k]
			}
		}
		for _, d := range outT {
			req.Out[i] = max(req.Out[i], acc[d])
			acc[d] = 0
		}
		outT = outT[:0]
	}
	for _, slot := range region {
		gen.cohorts[slot].refinedAt = gen.tick
	}
	return req
}

// Refine runs Louvain (gonum's community.Modularize) on the region of req —
// its heaviest MaxEdges edges — splits communities larger than MaxSize
// along the max-adjacency order of their induced subgraph, cuts every part
// into its connected components over req.Edges (so no cohort holds key
// groups without co-access evidence between them), and compares
// the weight kept inside cohorts with the old partition's. It is a pure
// function of req (deterministic: Louvain's random order is seeded with
// req.Seed and req.Tick) and may run on any goroutine.
func Refine(req *RefineRequest) *RefineResult {
	res := &RefineResult{Req: req}
	n := len(req.KGs)
	if n == 0 {
		return res
	}
	edges := slices.Clone(req.Edges)
	if len(edges) > req.MaxEdges {
		slices.SortStableFunc(edges, func(x, y RefineEdge) int { return cmp.Compare(y.W, x.W) })
		edges = edges[:req.MaxEdges]
	}
	lg := newLouvainGraph(n, edges)
	src := rand.NewPCG(req.Seed, req.Tick)
	comms := community.Modularize(lg, req.Resolution, src).Communities()

	var parts [][]int32
	var cut localGraph
	for _, cm := range comms {
		p := make([]int32, len(cm))
		for i, nd := range cm {
			p[i] = int32(nd.ID())
		}
		slices.Sort(p)
		if len(p) <= req.MaxSize {
			parts = append(parts, p)
			continue
		}
		parts = append(parts, chunk(&cut, p, req)...)
	}
	parts = components(parts, req)
	parts = dropStrays(parts, req)
	slices.SortFunc(parts, func(x, y []int32) int { return cmp.Compare(x[0], y[0]) })
	res.Communities = parts

	oldOf := make([]int32, n)
	for k, c := range req.Old {
		for _, m := range c.Members {
			oldOf[m] = int32(k)
		}
	}
	newOf := make([]int32, n)
	for k, p := range parts {
		for _, m := range p {
			newOf[m] = int32(k)
		}
	}
	for _, e := range req.Edges {
		res.Total += e.W
		if oldOf[e.A] == oldOf[e.B] {
			res.OldInternal += e.W
		}
		if newOf[e.A] == newOf[e.B] {
			res.NewInternal += e.W
		}
	}
	res.Adopt = res.Total > 0 && res.NewInternal-res.OldInternal >= req.MinGain*res.Total && res.NewInternal > res.OldInternal
	return res
}

// partIndex returns, for each of n members, the index of its part.
func partIndex(parts [][]int32, n int) []int32 {
	partOf := make([]int32, n)
	for k, p := range parts {
		for _, m := range p {
			partOf[m] = int32(k)
		}
	}
	return partOf
}

// components cuts each part into its connected components over req.Edges
// (each component sorted; singletons included).
func components(parts [][]int32, req *RefineRequest) [][]int32 {
	n := len(req.KGs)
	partOf := partIndex(parts, n)
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = int32(i)
	}
	var find func(x int32) int32
	find = func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for _, e := range req.Edges {
		if partOf[e.A] != partOf[e.B] {
			continue
		}
		a, b := find(e.A), find(e.B)
		if a != b {
			if a > b {
				a, b = b, a
			}
			parent[b] = a
		}
	}
	var out [][]int32
	slot := make(map[int32]int, n)
	for _, p := range parts {
		clear(slot)
		for _, m := range p { // p is sorted, so each component comes out sorted
			r := find(m)
			k, ok := slot[r]
			if !ok {
				k = len(out)
				slot[r] = k
				out = append(out, nil)
			}
			out[k] = append(out[k], m)
		}
	}
	return out
}

// dropStrays makes a singleton of every member whose connection to the
// rest of its part is below strayShare of req.Out.
func dropStrays(parts [][]int32, req *RefineRequest) [][]int32 {
	if req.Out == nil {
		return parts
	}
	n := len(req.KGs)
	partOf := partIndex(parts, n)
	in := make([]float64, n)
	for _, e := range req.Edges {
		if partOf[e.A] == partOf[e.B] {
			in[e.A] += e.W
			in[e.B] += e.W
		}
	}
	var out [][]int32
	var homeW []float64
	for _, p := range parts {
		if len(p) == 1 {
			out = append(out, p)
			continue
		}
		// The part's clear home, if any.
		home, total := -1, 0.0
		clear(homeW)
		for _, m := range p {
			total += req.W[m]
			if req.Home != nil && req.Home[m] >= 0 {
				for len(homeW) <= req.Home[m] {
					homeW = append(homeW, 0)
				}
				homeW[req.Home[m]] += req.W[m]
			}
		}
		for i, x := range homeW {
			if x >= homeShare*total && x > 0 {
				home = i
			}
		}
		keep := p[:0:0]
		for _, m := range p {
			if in[m] < strayShare*req.Out[m] && (home < 0 || req.Home == nil || req.Home[m] != home) {
				out = append(out, []int32{m})
			} else {
				keep = append(keep, m)
			}
		}
		if len(keep) > 0 {
			out = append(out, keep)
		}
	}
	return out
}

// chunk cuts an oversized community into ⌈n/MaxSize⌉ balanced runs of its
// max-adjacency order (from its heaviest node), so each run is a tightly
// connected piece.
func chunk(lg *localGraph, p []int32, req *RefineRequest) [][]int32 {
	pos := make(map[int32]int32, len(p))
	self := make([]float64, len(p))
	for i, m := range p {
		pos[m] = int32(i)
		self[i] = req.W[m]
	}
	var es []ledge
	for _, e := range req.Edges {
		a, oka := pos[e.A]
		b, okb := pos[e.B]
		if oka && okb {
			es = append(es, ledge{a, b, e.W})
		}
	}
	lg.build(len(p), self, es)
	order := lg.maxAdjacencyOrder(lg.heaviest(), nil)
	k := (len(p) + req.MaxSize - 1) / req.MaxSize
	var out [][]int32
	for i := range k {
		lo, hi := i*len(p)/k, (i+1)*len(p)/k
		c := make([]int32, 0, hi-lo)
		for _, x := range order[lo:hi] {
			c = append(c, p[x])
		}
		slices.Sort(c)
		out = append(out, c)
	}
	return out
}

// applyRefinement adopts r if its region is unchanged and r.Adopt.
func (gen *Generator) applyRefinement(r *RefineResult) {
	if r == nil || r.Req == nil {
		return
	}
	req := r.Req
	old := make([]*cohort, len(req.Old))
	for k, rc := range req.Old {
		c := gen.byID[rc.ID]
		if c == nil || c.dead || c.touched || c.version != rc.Version {
			return // stale: the region changed since the snapshot
		}
		old[k] = c
	}
	for _, c := range old {
		c.refinedAt = gen.tick
	}
	if !r.Adopt {
		return
	}
	type mref struct {
		gid accessgraph.NodeID
		w   float64
	}
	byKG := make(map[control.KeyGroup]mref, len(req.KGs))
	for _, c := range old {
		for j, kg := range c.kgs {
			byKG[kg] = mref{c.gids[j], c.mw[j]}
		}
	}
	news := make([]*cohort, len(r.Communities))
	for i, p := range r.Communities {
		c := &cohort{touched: true, refinedAt: gen.tick}
		for _, m := range p {
			kg := req.KGs[m]
			mr := byKG[kg]
			c.kgs = append(c.kgs, kg)
			c.gids = append(c.gids, mr.gid)
			c.mw = append(c.mw, mr.w)
			c.w += mr.w
		}
		news[i] = c
	}
	// Ids: greedy matching by Jaccard index (then overlap weight, old id).
	type match struct {
		n, o    int
		j, w    float64
		oldID   control.CohortID
		overlap int
	}
	var ms []match
	for i, nc := range news {
		for k, oc := range old {
			inter := intersectCount(nc.kgs, oc.kgs)
			if inter == 0 {
				continue
			}
			ms = append(ms, match{n: i, o: k, j: float64(inter) / float64(len(nc.kgs)+len(oc.kgs)-inter), w: nc.w, oldID: oc.id, overlap: inter})
		}
	}
	slices.SortFunc(ms, func(x, y match) int {
		if x.j != y.j {
			return cmp.Compare(y.j, x.j)
		}
		if x.overlap != y.overlap {
			return cmp.Compare(y.overlap, x.overlap)
		}
		if x.oldID != y.oldID {
			return cmp.Compare(x.oldID, y.oldID)
		}
		return cmp.Compare(x.n, y.n)
	})
	usedN := make([]bool, len(news))
	usedO := make([]bool, len(old))
	for _, m := range ms {
		if usedN[m.n] || usedO[m.o] || m.j < gen.cfg.JaccardKeep {
			continue
		}
		usedN[m.n], usedO[m.o] = true, true
		news[m.n].id = old[m.o].id
		news[m.n].version = old[m.o].version + 1
	}
	ev := Refined{Gain: r.Gain()}
	for _, c := range old {
		c.dead, c.touched = true, true
		ev.Old = append(ev.Old, c.id)
	}
	for i, c := range news {
		if !usedN[i] {
			c.id, c.version = gen.newID(), 1
		}
		c.resetAt = gen.tick
		ev.New = append(ev.New, c.id)
		gen.adopt(c)
	}
	slices.Sort(ev.Old)
	slices.Sort(ev.New)
	gen.ev.refined = append(gen.ev.refined, ev)
	gen.ev.stats.Refinements++
}

// louvainGraph adapts a small edge list to gonum's graph.Undirected and
// graph.Weighted with ordered iteration. (simple.WeightedUndirectedGraph
// iterates neighbours in Go map order, which makes Louvain's floating-point
// sums, and so its ties, vary between runs; this keeps refinement
// deterministic and avoids building maps.)
type louvainGraph struct {
	nodes []graph.Node
	nbr   [][]int32
	w     [][]float64
}

func newLouvainGraph(n int, edges []RefineEdge) *louvainGraph {
	g := &louvainGraph{nodes: make([]graph.Node, n), nbr: make([][]int32, n), w: make([][]float64, n)}
	for i := range n {
		g.nodes[i] = simple.Node(i)
	}
	type half struct {
		to int32
		w  float64
	}
	adj := make([][]half, n)
	for _, e := range edges {
		adj[e.A] = append(adj[e.A], half{e.B, e.W})
		adj[e.B] = append(adj[e.B], half{e.A, e.W})
	}
	for i, hs := range adj {
		slices.SortFunc(hs, func(x, y half) int { return cmp.Compare(x.to, y.to) })
		for _, h := range hs {
			g.nbr[i] = append(g.nbr[i], h.to)
			g.w[i] = append(g.w[i], h.w)
		}
	}
	return g
}

func (g *louvainGraph) has(id int64) bool { return id >= 0 && id < int64(len(g.nodes)) }

func (g *louvainGraph) find(x, y int64) (float64, bool) {
	if !g.has(x) || !g.has(y) {
		return 0, false
	}
	i, ok := slices.BinarySearch(g.nbr[x], int32(y))
	if !ok {
		return 0, false
	}
	return g.w[x][i], true
}

func (g *louvainGraph) Node(id int64) graph.Node {
	if !g.has(id) {
		return nil
	}
	return g.nodes[id]
}

func (g *louvainGraph) Nodes() graph.Nodes { return iterator.NewOrderedNodes(g.nodes) }

func (g *louvainGraph) From(id int64) graph.Nodes {
	if !g.has(id) || len(g.nbr[id]) == 0 {
		return graph.Empty
	}
	ns := make([]graph.Node, len(g.nbr[id]))
	for i, v := range g.nbr[id] {
		ns[i] = g.nodes[v]
	}
	return iterator.NewOrderedNodes(ns)
}

func (g *louvainGraph) HasEdgeBetween(x, y int64) bool { _, ok := g.find(x, y); return ok }

func (g *louvainGraph) Edge(u, v int64) graph.Edge { return g.WeightedEdge(u, v) }

func (g *louvainGraph) EdgeBetween(x, y int64) graph.Edge { return g.WeightedEdge(x, y) }

func (g *louvainGraph) WeightedEdge(u, v int64) graph.WeightedEdge {
	w, ok := g.find(u, v)
	if !ok {
		return nil
	}
	return simple.WeightedEdge{F: g.nodes[u], T: g.nodes[v], W: w}
}

func (g *louvainGraph) WeightedEdgeBetween(x, y int64) graph.WeightedEdge {
	return g.WeightedEdge(x, y)
}

func (g *louvainGraph) Weight(x, y int64) (float64, bool) {
	if x == y {
		return 0, true
	}
	return g.find(x, y)
}

var (
	_ graph.Undirected = (*louvainGraph)(nil)
	_ graph.Weighted   = (*louvainGraph)(nil)
)
