package accessgraph

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// GraphConfig configures a Graph. Start from DefaultGraphConfig.
type GraphConfig struct {
	// Lambda is the EWMA decay applied by every Tick: each weight is
	// multiplied by Lambda, so a weight is the decayed sum Σ λ^age·x of the
	// per-window totals. Default 0.95 (SPEC §5; half-life ≈ 13.5 ticks =
	// 1.35 s at the 100 ms planner tick). In steady state a key group written
	// x times per window has W ≈ x/(1−λ) = 20x.
	Lambda float64
	// AlphaWR weighs write–read edge weight in the combined edge weight
	// w(u,v) = ww + AlphaWR·wr. Default 0.3 (SPEC §5).
	AlphaWR float64
	// FastLambda is the decay of each edge's fast weight (Edge.Fast): a
	// second EWMA of the combined weight that forgets within a few ticks,
	// so that consumers see a change of co-access (a drift) long before
	// the decayed weights, which keep the old co-access for ~15 ticks, do.
	// FastScale converts it to the decayed weights' units. Default 0.5
	// (about three windows of memory: a single window's sampling noise is
	// smoothed, a drift shows within 2–3 ticks).
	FastLambda float64
	// Epsilon is the weight below which Tick forgets an entry: an edge whose
	// combined weight is below it, a key group whose W + R + fallback CAS is
	// below it and that has no edge left. It bounds memory by forgetting
	// what stopped happening: a single access (weight 1) is forgotten after
	// log(ε)/log(λ) ≈ 58 ticks at the default. Default 0.05.
	Epsilon float64
	// PruneEvery is how often, in ticks, Tick looks for key groups to forget
	// (below Epsilon with no edge left): a scan of every key group, so it
	// is amortised. Edges are forgotten at every merge. Default 8.
	PruneEvery int
	// MaxNodes is the hard cap on key groups. Apply drops key groups (and
	// their edges) first seen while the graph is full, counting them in
	// GraphStats.DroppedNodes; Tick then evicts the lightest key groups (by
	// W + R + fallback CAS) with all their edges until at most
	// TrimFraction·MaxNodes remain, so newcomers find room every tick while
	// the heaviest survive. Default 2,097,152 (twice the simulator's 1M key
	// groups; about 100 bytes each).
	MaxNodes int
	// MaxEdges is the hard cap on edges. Apply appends edge updates to a
	// pending batch that is merged into the sorted edge set once it reaches
	// a quarter of it (at least 8,192 updates), at Tick, or when an accessor
	// needs it; a merge that leaves more than the cap — or, at Tick, more
	// than TrimFraction of it — evicts the lightest (by combined weight),
	// counted in GraphStats.EvictedEdges. Default 1,048,576 (about
	// 100 bytes each with the merge buffers and the adjacency index).
	MaxEdges int
	// MaxEdgesPerNode bounds the graph by its structure: at Tick, when the
	// graph holds more than 1.25·MaxEdgesPerNode·(key groups) edges, every
	// key group keeps only its MaxEdgesPerNode heaviest incident edges by
	// projected weight (see ProjectTicks; an edge survives if it is among
	// the heaviest of either endpoint; exact ties are kept), and until the
	// next such trim, edges lighter than both endpoints' MaxEdgesPerNode-th
	// heaviest (as of that trim, decayed) are dropped, and new ones not
	// added. Sampled co-access produces far more distinct pairs than
	// structure (a pair seen once lingers for dozens of ticks) and each
	// planner tick costs O(edges); keeping every key group's strongest
	// associations — whatever its absolute weight, so that a lightly loaded
	// region keeps its structure too — bounds the tick (9,216 key groups →
	// ≤ 147,456 edges after a trim). 0 disables it. Default 16.
	MaxEdgesPerNode int
	// ProjectTicks is the horizon of the projected weight the per-node
	// trim ranks edges by: the combined weight the edge would have
	// ProjectTicks ticks on if its recent co-access (the fast weight) held,
	// c·λ^h + Fast·FastScale·(1 − λ^h). A new edge is weighed by its
	// decayed weight alone (its fast weight is one sample, no rate yet),
	// except at a key group that drifted: whose refused new co-access, by
	// fast weight, exceeds driftShare times its edges' (GraphStats.
	// Drifting). Why: after a drift a key group's new co-access is light in
	// the decayed weights for ~15 ticks while its old edges still fill its
	// MaxEdgesPerNode; ranked by decayed weight alone, the new edges were
	// refused as they came and the generator never saw the co-access move
	// (a tenant of 16 key groups has 15 partners: after a second drift two
	// old layouts filled the places). Projected, the old edges lose their
	// rank within a few ticks of going quiet, and the new ones enter.
	// Longer horizons let them in sooner and rank more of the sampling
	// noise's recent pairs up, which costs tick time: in the cohort
	// generator's Step/tpcc9216 benchmark and TestAuraTenantDriftRecovery
	// (temporary edits of this default), 3 gave 4.1 ms per tick and the
	// second drift back in 20 ticks, the limit; 5 gave 4.5 ms and 15
	// ticks; 8 gave 5.1 ms and 9 ticks. 0 ranks by decayed weight only.
	// Default 5.
	ProjectTicks int
	// TrimFraction is the fill level Tick trims an over-full table to.
	// Default 0.9: 10% headroom for new entries per tick, so a newly hot key
	// group gets in within a tick while the trimming sort runs rarely.
	TrimFraction float64
	// MaxHomes is how many CN indices a key group's home distribution keeps.
	// Beyond it, the lightest entry's weight moves into an "other" mass that
	// still counts in the denominator, so P(home(v)=i) stays calibrated for
	// the CNs kept and is 0 for those dropped. Default 4: routed traffic
	// concentrates a key group on one or two CNs; 4 leaves room for drift.
	MaxHomes int
	// MaxSenders caps the distinct node names Apply tracks for duplicate
	// detection; a summary from a further name is rejected with
	// ErrTooManySenders. Default 1,024 (control.MaxNodes CNs plus restarts
	// under new names).
	MaxSenders int
	// MaxSummaryNodes caps len(nodes), len(homes) and
	// len(locks.fallback_cas) of one summary; larger summaries are rejected
	// with ErrTooLarge before anything is allocated. Default 1,048,576.
	MaxSummaryNodes int
	// MaxSummaryEdges caps len(edges) + len(typed_edges) of one summary
	// (ErrTooLarge). Default 1,048,576.
	MaxSummaryEdges int
}

// DefaultGraphConfig returns the defaults documented on GraphConfig.
func DefaultGraphConfig() GraphConfig {
	return GraphConfig{
		Lambda:          0.95,
		AlphaWR:         0.3,
		FastLambda:      0.5,
		Epsilon:         0.05,
		PruneEvery:      8,
		MaxNodes:        1 << 21,
		MaxEdges:        1 << 20,
		MaxEdgesPerNode: 16,
		ProjectTicks:    5,
		TrimFraction:    0.9,
		MaxHomes:        4,
		MaxSenders:      1024,
		MaxSummaryNodes: 1 << 20,
		MaxSummaryEdges: 1 << 20,
	}
}

// Validate reports every invalid field.
func (c GraphConfig) Validate() error {
	var errs []error
	if !(c.Lambda > 0 && c.Lambda <= 1) {
		errs = append(errs, fmt.Errorf("Lambda %v must be in (0, 1]", c.Lambda))
	}
	if !(c.FastLambda > 0 && c.FastLambda < 1) {
		errs = append(errs, fmt.Errorf("FastLambda %v must be in (0, 1)", c.FastLambda))
	}
	if !(c.AlphaWR >= 0 && c.AlphaWR <= 1) {
		errs = append(errs, fmt.Errorf("AlphaWR %v must be in [0, 1]", c.AlphaWR))
	}
	if !(c.Epsilon >= 0) || math.IsInf(c.Epsilon, 0) {
		errs = append(errs, fmt.Errorf("Epsilon %v must be finite and ≥ 0", c.Epsilon))
	}
	if c.PruneEvery < 1 {
		errs = append(errs, fmt.Errorf("PruneEvery %d must be ≥ 1", c.PruneEvery))
	}
	if c.MaxNodes < 1 || c.MaxNodes > 1<<21 {
		errs = append(errs, fmt.Errorf("MaxNodes %d must be in [1, 2^21]", c.MaxNodes))
	}
	if c.MaxEdges < 1 || c.MaxEdges > 1<<22 {
		errs = append(errs, fmt.Errorf("MaxEdges %d must be in [1, 2^22]", c.MaxEdges))
	}
	if c.MaxEdgesPerNode < 0 {
		errs = append(errs, fmt.Errorf("MaxEdgesPerNode %d must not be negative", c.MaxEdgesPerNode))
	}
	if c.ProjectTicks < 0 || c.ProjectTicks > 1000 {
		errs = append(errs, fmt.Errorf("ProjectTicks %d must be in [0, 1000]", c.ProjectTicks))
	}
	if !(c.TrimFraction > 0 && c.TrimFraction <= 1) {
		errs = append(errs, fmt.Errorf("TrimFraction %v must be in (0, 1]", c.TrimFraction))
	}
	if c.MaxHomes < 1 || c.MaxHomes > 16 {
		errs = append(errs, fmt.Errorf("MaxHomes %d must be in [1, 16]", c.MaxHomes))
	}
	if c.MaxSenders < 1 {
		errs = append(errs, fmt.Errorf("MaxSenders %d must be ≥ 1", c.MaxSenders))
	}
	if c.MaxSummaryNodes < 0 {
		errs = append(errs, fmt.Errorf("MaxSummaryNodes %d must not be negative", c.MaxSummaryNodes))
	}
	if c.MaxSummaryEdges < 0 {
		errs = append(errs, fmt.Errorf("MaxSummaryEdges %d must not be negative", c.MaxSummaryEdges))
	}
	if len(errs) > 0 {
		return fmt.Errorf("accessgraph: invalid graph config: %w", errors.Join(errs...))
	}
	return nil
}

// NodeID is a Graph's dense internal index of a key group: stable while the
// key group stays in the graph, reused after Tick removes it. IDs let hot
// loops use arrays instead of maps; check KG(id) before trusting a cached
// id across a Tick.
type NodeID = int32

// NoNode is the NodeID of nothing.
const NoNode NodeID = -1

// Home is one entry of a key group's home distribution.
type Home struct {
	// Node is the CN index.
	Node int
	// Weight is the decayed number of transactions touching the key group
	// homed on Node.
	Weight float64
	// P is P(home(v)=Node).
	P float64
}

// Neighbor is an adjacent key group and the combined edge weight.
type Neighbor struct {
	KG     control.KeyGroup
	Weight float64
}

// Load is the planner's view of one CN, decayed like the graph weights.
type Load struct {
	// Seen reports whether any summary from this CN index was applied.
	Seen bool
	// Node is the membership name of the last summary applied.
	Node string
	// Txns and Sampled are the decayed sums of total_txns and sampled_txns.
	Txns, Sampled float64
	// Local, OwnerRPC, MNCAS, MNCASFailed, Redirected are the decayed lock
	// counts by path.
	Local, OwnerRPC, MNCAS, MNCASFailed, Redirected float64
	// QueueDepth and CPU are the values of the last summary applied.
	QueueDepth uint64
	CPU        float64
	// LastTick is the graph tick (TickCount) at which the last summary was
	// applied.
	LastTick uint64
}

// GraphStats are a Graph's lifetime counters.
type GraphStats struct {
	// Applied, Duplicates and Rejected count summaries passed to Apply:
	// folded in, ignored as an already-applied (node, tick) or an older
	// membership epoch, and rejected as malformed.
	Applied, Duplicates, Rejected uint64
	// DroppedNodes counts key groups Apply could not add because the graph
	// was at MaxNodes; DroppedEdges counts edge updates lost with them.
	DroppedNodes, DroppedEdges uint64
	// EvictedNodes and EvictedEdges count entries Tick removed to trim an
	// over-full table (lightest first).
	EvictedNodes, EvictedEdges uint64
	// PrunedNodes and PrunedEdges count entries Tick forgot below Epsilon.
	PrunedNodes, PrunedEdges uint64
	// Drifting is how many key groups the last Tick found drifting: their
	// new co-access refused by the per-node thresholds outweighs, by fast
	// weight, driftShare times their edges' (see ProjectTicks).
	Drifting int
	// PerNodeTrims counts the per-node trims (see MaxEdgesPerNode).
	PerNodeTrims uint64
}

type homeEntry struct {
	w    float32
	node uint8 // control.Unowned = empty
}

// Edge is an entry of EdgeList: an edge with its typed weights.
type Edge struct {
	// Key encodes the endpoints u < v as u<<32 | v; EdgeEnds decodes it.
	Key uint64
	// WW and WR are the write–write and write–read weights; the combined
	// weight is WW + AlphaWR·WR.
	WW, WR float64
	// Fast is the combined weight decayed by FastLambda instead of Lambda
	// (see GraphConfig.FastLambda): Fast·FastScale() is what the edge's
	// combined weight would be had the last few windows' co-access always
	// held.
	Fast float64
}

type sender struct {
	memEpoch uint64
	lastTick uint64
}

// Graph is the planner's aggregated access graph: key groups with decayed
// write, read and fallback-CAS weights and home distributions, typed edges,
// and per-CN load. It is fed by Apply, decayed by Tick, and read by the
// cohort generator and the ownership planner. It is not safe for concurrent
// use, reads included (the adjacency index is built lazily).
type Graph struct {
	cfg  GraphConfig
	tick uint64

	ids   kgIndex // key group → id: at most MaxNodes entries, 2–4 slots (16 bytes) each
	kg    []control.KeyGroup
	live  []bool
	w, r  []float64
	fb    []float64
	deg   []int32
	homes []homeEntry // MaxHomes per id
	other []float32   // home mass of dropped CN entries
	free  []NodeID
	nLive int

	// Edges: a base sorted by key (u<<32 | v, u < v, no duplicates), the
	// edges created since the base was last rebuilt (fresh, sorted by key,
	// disjoint from the base), and a batch of pending updates that Apply
	// appends and endBatch (or, at Tick, merge) folds in. Logically the edge
	// set is base ∪ fresh.
	base  []Edge // sorted by Key, unique
	next  []Edge // merge output, swapped with the base
	pend  []Edge
	ptmp  []Edge
	words []uint64 // sort scratch
	wtmp  []uint64

	// fresh holds the edges that batches created since the base was last
	// rebuilt (freshTmp is its merge buffer). Bounded by MaxEdges: endBatch
	// folds it into the base and trims when len(base)+len(fresh) exceeds
	// the cap; Tick and the accessors that need one sorted edge list fold
	// it in too.
	fresh, freshTmp []Edge
	// uoff indexes the base by smaller endpoint: the edges (u, ·) are
	// base[uoff[u]:uoff[u+1]]. Rebuilt (O(ids + edges)) by the first batch
	// after the base changed; ids ≥ len(uoff)−1 have no base edge as the
	// smaller endpoint. At most MaxNodes+1 entries.
	uoff   []int32
	uoffOK bool

	csrOK bool
	off   []int32
	nbr   []NodeID
	nw    []float64
	pos   []int32

	removals  uint64    // key groups removed so far (IDGeneration)
	thrActive bool      // thr holds thresholds of a per-node trim
	degOK     bool      // deg matches base
	thr       []float64 // per key group: projected weight of its MaxEdgesPerNode-th heaviest edge at the last trim (decayed)
	rej       []float64 // per key group: fast weight of its new edges the per-node thresholds refused (decayed by FastLambda)
	drift     []bool    // per key group: drifting at the last Tick (see ProjectTicks)
	fsum      []float64 // scratch of merge (per key group, its edges' fast weight) and trimPerNode (thresholds)
	fastAcc   float64   // lazy decay of rej: actual = stored·fastAcc
	local     localIDs  // kg → id of the summary being applied
	homeScale float64   // lazy decay of homes and other: actual = stored·homeScale
	nodeScale float64   // lazy decay of w, r, fb, thr: actual = stored·nodeScale

	cn      [control.MaxNodes]Load
	senders map[string]*sender

	stats   GraphStats
	scratch []float64
}

// NewGraph returns an empty graph, or the configuration's validation error.
func NewGraph(cfg GraphConfig) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Graph{
		cfg:       cfg,
		homeScale: 1,
		nodeScale: 1,
		fastAcc:   1,
		senders:   make(map[string]*sender),
	}
	return g, nil
}

// Config returns the graph's configuration.
func (g *Graph) Config() GraphConfig { return g.cfg }

// Stats returns the lifetime counters.
func (g *Graph) Stats() GraphStats { return g.stats }

// TickCount returns the number of Tick calls so far.
func (g *Graph) TickCount() uint64 { return g.tick }

// Len returns the number of key groups and edges in the graph.
func (g *Graph) Len() (nodes, edges int) {
	g.flush()
	return g.nLive, len(g.base)
}

// ---------------------------------------------------------------------------
// Apply

func (g *Graph) reject(s *messages.AccessSummary, field string, err error, format string, args ...any) error {
	e := &SummaryError{Field: field, Err: err, Detail: fmt.Sprintf(format, args...)}
	if s != nil {
		e.Node, e.Tick = s.GetNode(), s.GetTick()
	}
	return e
}

func badWeight(x float64) bool { return !(x >= 0) || math.IsInf(x, 0) }

func (g *Graph) validate(s *messages.AccessSummary) error {
	if s == nil {
		return g.reject(s, "summary", ErrInvalid, "nil")
	}
	if s.Version == 0 {
		return g.reject(s, "version", ErrVersion, "0 (unset)")
	}
	if s.Node == "" {
		return g.reject(s, "node", ErrInvalid, "empty")
	}
	if s.NodeIndex >= control.MaxNodes {
		return g.reject(s, "node_index", ErrInvalid, "%d ≥ %d", s.NodeIndex, control.MaxNodes)
	}
	if s.SampledTxns > s.TotalTxns {
		return g.reject(s, "sampled_txns", ErrInvalid, "%d > total_txns %d", s.SampledTxns, s.TotalTxns)
	}
	if badWeight(s.CpuLoad) {
		return g.reject(s, "cpu_load", ErrInvalid, "%v", s.CpuLoad)
	}
	if n := len(s.Nodes); n > g.cfg.MaxSummaryNodes {
		return g.reject(s, "nodes", ErrTooLarge, "%d > %d", n, g.cfg.MaxSummaryNodes)
	}
	if n := len(s.Homes); n > g.cfg.MaxSummaryNodes {
		return g.reject(s, "homes", ErrTooLarge, "%d > %d", n, g.cfg.MaxSummaryNodes)
	}
	if n := len(s.Locks.GetFallbackCas()); n > g.cfg.MaxSummaryNodes {
		return g.reject(s, "locks.fallback_cas", ErrTooLarge, "%d > %d", n, g.cfg.MaxSummaryNodes)
	}
	if n := len(s.Edges) + len(s.TypedEdges); n > g.cfg.MaxSummaryEdges {
		return g.reject(s, "edges", ErrTooLarge, "%d > %d", n, g.cfg.MaxSummaryEdges)
	}
	for i, n := range s.Nodes {
		if n == nil {
			return g.reject(s, fmt.Sprintf("nodes[%d]", i), ErrInvalid, "nil")
		}
		if badWeight(n.WriteWeight) || badWeight(n.ReadWeight) {
			return g.reject(s, fmt.Sprintf("nodes[%d]", i), ErrInvalid, "kg %d weights %v/%v", n.Kg, n.WriteWeight, n.ReadWeight)
		}
	}
	for i, e := range s.Edges {
		if e == nil {
			return g.reject(s, fmt.Sprintf("edges[%d]", i), ErrInvalid, "nil")
		}
		if e.A == e.B {
			return g.reject(s, fmt.Sprintf("edges[%d]", i), ErrInvalid, "self edge on kg %d", e.A)
		}
		if badWeight(e.Weight) {
			return g.reject(s, fmt.Sprintf("edges[%d].weight", i), ErrInvalid, "%v", e.Weight)
		}
	}
	for i, e := range s.TypedEdges {
		if e == nil {
			return g.reject(s, fmt.Sprintf("typed_edges[%d]", i), ErrInvalid, "nil")
		}
		if e.A == e.B {
			return g.reject(s, fmt.Sprintf("typed_edges[%d]", i), ErrInvalid, "self edge on kg %d", e.A)
		}
		if badWeight(e.Ww) || badWeight(e.Wr) {
			return g.reject(s, fmt.Sprintf("typed_edges[%d]", i), ErrInvalid, "weights %v/%v", e.Ww, e.Wr)
		}
	}
	for i, h := range s.Homes {
		if h == nil {
			return g.reject(s, fmt.Sprintf("homes[%d]", i), ErrInvalid, "nil")
		}
		if len(h.HomeCounts) > control.MaxNodes {
			return g.reject(s, fmt.Sprintf("homes[%d].home_counts", i), ErrTooLarge, "%d > %d CNs", len(h.HomeCounts), control.MaxNodes)
		}
	}
	for i, c := range s.Locks.GetFallbackCas() {
		if c == nil {
			return g.reject(s, fmt.Sprintf("locks.fallback_cas[%d]", i), ErrInvalid, "nil")
		}
	}
	return nil
}

// Apply folds one CN's AccessSummary into the graph at full weight (the
// next Tick decays it with everything else). It validates the summary first
// and rejects it as a whole with a *SummaryError (wrapping ErrVersion,
// ErrTooLarge, ErrInvalid or ErrTooManySenders) without changing anything.
// A summary whose (node, membership epoch, tick) is not newer than the last
// applied from that node — a duplicate or a reordered delivery — is ignored
// and counted in GraphStats.Duplicates; Apply returns nil for it.
//
// Version 1 summaries contribute their untyped edges as write–write weight
// (so the combined weight equals the v1 weight). Version 2 and later use
// typed_edges; a v2 summary with only untyped edges (a dual-format sender's
// v1 copy) is read like v1. Without homes, each key group's
// write_weight + read_weight counts as homed on the summary's node_index
// (a CN only sees the transactions it executes).
func (g *Graph) Apply(s *messages.AccessSummary) error {
	if err := g.validate(s); err != nil {
		g.stats.Rejected++
		return err
	}
	snd := g.senders[s.Node]
	if snd == nil {
		if len(g.senders) >= g.cfg.MaxSenders {
			g.stats.Rejected++
			return g.reject(s, "node", ErrTooManySenders, "%d senders tracked", len(g.senders))
		}
		snd = &sender{memEpoch: s.MembershipEpoch, lastTick: s.Tick}
		g.senders[s.Node] = snd
	} else {
		if s.MembershipEpoch < snd.memEpoch || (s.MembershipEpoch == snd.memEpoch && s.Tick <= snd.lastTick) {
			g.stats.Duplicates++
			return nil
		}
		snd.memEpoch, snd.lastTick = s.MembershipEpoch, s.Tick
	}
	g.stats.Applied++

	idx := int(s.NodeIndex)
	hasHomes := len(s.Homes) > 0
	g.local.reset(len(s.Nodes))
	for _, n := range s.Nodes {
		id := g.node(n.Kg)
		if id < 0 {
			continue
		}
		g.local.put(n.Kg, id)
		g.w[id] += n.WriteWeight / g.nodeScale
		g.r[id] += n.ReadWeight / g.nodeScale
		if !hasHomes {
			g.addHome(id, idx, n.WriteWeight+n.ReadWeight)
		}
	}
	for _, h := range s.Homes {
		id := g.node(h.Kg)
		if id < 0 {
			continue
		}
		for j, c := range h.HomeCounts {
			if c > 0 {
				g.addHome(id, j, float64(c))
			}
		}
	}
	if s.Version >= SummaryV2 && len(s.TypedEdges) > 0 {
		for _, e := range s.TypedEdges {
			g.addEdge(e.A, e.B, e.Ww, e.Wr)
		}
	} else {
		for _, e := range s.Edges {
			g.addEdge(e.A, e.B, e.Weight, 0)
		}
	}
	l := &g.cn[idx]
	l.Seen = true
	l.Node = s.Node
	l.Txns += float64(s.TotalTxns)
	l.Sampled += float64(s.SampledTxns)
	l.QueueDepth = s.QueueDepth
	l.CPU = s.CpuLoad
	l.LastTick = g.tick
	if ls := s.Locks; ls != nil {
		l.Local += float64(ls.Local)
		l.OwnerRPC += float64(ls.OwnerRpc)
		l.MNCAS += float64(ls.MnCas)
		l.MNCASFailed += float64(ls.MnCasFailed)
		l.Redirected += float64(ls.Redirected)
		for _, c := range ls.FallbackCas {
			if id := g.node(c.Kg); id >= 0 {
				g.fb[id] += float64(c.Count) / g.nodeScale
			}
		}
	}
	return nil
}

// node returns kg's id, adding it when absent and there is room.
func (g *Graph) node(kg control.KeyGroup) NodeID {
	if id, ok := g.ids.get(kg); ok {
		return id
	}
	if g.nLive >= g.cfg.MaxNodes {
		g.stats.DroppedNodes++
		return NoNode
	}
	var id NodeID
	if n := len(g.free); n > 0 {
		id = g.free[n-1]
		g.free = g.free[:n-1]
		g.kg[id] = kg
		g.live[id] = true
		g.w[id], g.r[id], g.fb[id], g.deg[id], g.other[id] = 0, 0, 0, 0, 0
		g.thr[id], g.rej[id], g.drift[id] = math.Inf(-1), 0, false
	} else {
		id = NodeID(len(g.kg))
		g.thr = append(g.thr, math.Inf(-1))
		g.rej = append(g.rej, 0)
		g.drift = append(g.drift, false)
		g.kg = append(g.kg, kg)
		g.live = append(g.live, true)
		g.w = append(g.w, 0)
		g.r = append(g.r, 0)
		g.fb = append(g.fb, 0)
		g.deg = append(g.deg, 0)
		g.other = append(g.other, 0)
		for range g.cfg.MaxHomes {
			g.homes = append(g.homes, homeEntry{})
		}
	}
	hs := g.homes[int(id)*g.cfg.MaxHomes : (int(id)+1)*g.cfg.MaxHomes]
	for j := range hs {
		hs[j] = homeEntry{node: control.Unowned}
	}
	g.ids.put(kg, id)
	g.nLive++
	g.csrOK = false
	return id
}

func (g *Graph) addHome(id NodeID, cn int, x float64) {
	if x <= 0 || cn >= control.MaxNodes {
		return
	}
	x /= g.homeScale // stored in units of the lazy decay
	hs := g.homes[int(id)*g.cfg.MaxHomes : (int(id)+1)*g.cfg.MaxHomes]
	empty, light := -1, -1
	for j := range hs {
		switch {
		case hs[j].node == uint8(cn):
			hs[j].w += float32(x)
			return
		case hs[j].node == control.Unowned:
			if empty < 0 {
				empty = j
			}
		case light < 0 || hs[j].w < hs[light].w:
			light = j
		}
	}
	if empty >= 0 {
		hs[empty] = homeEntry{w: float32(x), node: uint8(cn)}
		return
	}
	if float32(x) > hs[light].w {
		g.other[id] += hs[light].w
		hs[light] = homeEntry{w: float32(x), node: uint8(cn)}
		return
	}
	g.other[id] += float32(x)
}

func edgeKey(u, v NodeID) uint64 { return uint64(uint32(u))<<32 | uint64(uint32(v)) }

// findEdge returns the base index of edge (u, v), or -1.
func (g *Graph) findEdge(u, v NodeID) int {
	g.flush()
	if u > v {
		u, v = v, u
	}
	key := edgeKey(u, v)
	i, ok := slices.BinarySearchFunc(g.base, key, func(e Edge, k uint64) int { return cmp.Compare(e.Key, k) })
	if !ok {
		return -1
	}
	return i
}

func (g *Graph) addEdge(a, b control.KeyGroup, ww, wr float64) {
	if ww == 0 && wr == 0 {
		return
	}
	u, ok := g.local.get(a)
	if !ok {
		u = g.node(a)
	}
	v, ok := g.local.get(b)
	if !ok {
		v = g.node(b)
	}
	if u < 0 || v < 0 {
		g.stats.DroppedEdges++
		return
	}
	if u > v {
		u, v = v, u
	}
	g.pend = append(g.pend, Edge{Key: edgeKey(u, v), WW: ww, WR: wr, Fast: ww + g.cfg.AlphaWR*wr})
	g.csrOK = false
	// End the batch once it is a quarter of the edges (amortised O(1)
	// work per update), so that Tick, which must merge what is left, stays
	// O(edges) whatever the ingest; and bound the batch.
	if n := len(g.pend); n >= max(g.numEdges()/4, flushMin) || n >= g.cfg.MaxEdges {
		g.endBatch()
	}
}

// flushMin is the smallest pending batch ended before Tick.
const flushMin = 8192

// numEdges is the number of edges, the pending batch aside.
func (g *Graph) numEdges() int { return len(g.base) + len(g.fresh) }

// flush ends the pending batch and folds the fresh edges into the base,
// which is then the whole edge set, sorted.
func (g *Graph) flush() {
	g.endBatch()
	g.mergeFresh()
}

// buildUoff indexes the base by smaller endpoint.
func (g *Graph) buildUoff() {
	n := len(g.kg)
	g.uoff = resizeI32(g.uoff, n+1)
	u := 0
	for i := range g.base {
		for x := int(g.base[i].Key >> 32); u <= x; u++ {
			g.uoff[u] = int32(i)
		}
	}
	for ; u <= n; u++ {
		g.uoff[u] = int32(len(g.base))
	}
	g.uoffOK = true
}

// endBatch folds the pending batch in without decay: each update of an
// existing edge is added to it in place, and each new edge (its updates
// summed) is kept in fresh unless its weight is below both endpoints'
// per-node thresholds; then it trims to the edge cap. This is exactly what
// merging the batch into the base did — the same sums in the same order
// (the batch is sorted stably), the same survivors: an existing edge always
// survives, since its weight only grew since it last passed the per-node
// thresholds, which change only at Tick — without rewriting the base:
// the batch is walked in key order against the base (through uoff) and
// fresh, both read in ascending order.
func (g *Graph) endBatch() {
	if len(g.pend) == 0 {
		return
	}
	pend := g.sortPending()
	if !g.uoffOK {
		g.buildUoff()
	}
	alpha := g.cfg.AlphaWR
	perNode := g.thrActive
	projC, projF := g.projWeights()
	base, fresh, uoff := g.base, g.fresh, g.uoff
	// Survivors are appended to fresh's merge buffer as they come (in key
	// order) between the fresh edges that precede them.
	out := g.freshTmp[:0]
	bi, fi := 0, 0
	for j := 0; j < len(pend); {
		key := pend[j].Key
		var e *Edge
		if u := int(key >> 32); u+1 < len(uoff) {
			bi = max(bi, int(uoff[u]))
			hi := int(uoff[u+1])
			for bi < hi && base[bi].Key < key {
				bi++
			}
			if bi < hi && base[bi].Key == key {
				e = &base[bi]
			}
		}
		if e == nil {
			for fi < len(fresh) && fresh[fi].Key < key {
				out = append(out, fresh[fi])
				fi++
			}
			if fi < len(fresh) && fresh[fi].Key == key {
				e = &fresh[fi]
			}
		}
		if e != nil {
			for ; j < len(pend) && pend[j].Key == key; j++ {
				e.WW += pend[j].WW
				e.WR += pend[j].WR
				e.Fast += pend[j].Fast
			}
			continue
		}
		ne := Edge{Key: key}
		for ; j < len(pend) && pend[j].Key == key; j++ {
			ne.WW += pend[j].WW
			ne.WR += pend[j].WR
			ne.Fast += pend[j].Fast
		}
		u, v := NodeID(key>>32), NodeID(uint32(key))
		c := ne.WW + alpha*ne.WR
		if c < 0 { // the merge's ε (0 without decay)
			g.stats.PrunedEdges++
			continue
		}
		if perNode && !g.admit(c, ne.Fast, u, v, projC, projF) {
			g.stats.EvictedEdges++ // below both endpoints' per-node thresholds
			g.rej[u] += ne.Fast / g.fastAcc
			g.rej[v] += ne.Fast / g.fastAcc
			continue
		}
		out = append(out, ne)
	}
	if len(out) > 0 {
		out = append(out, fresh[fi:]...)
		g.fresh, g.freshTmp = out, fresh[:0]
		g.degOK = false
	} else {
		g.freshTmp = out
	}
	g.pend = g.pend[:0]
	g.csrOK = false
	if g.numEdges() > g.edgeCap() {
		g.mergeFresh()
		g.trimEdges(false)
	}
}

// mergeFresh merges the fresh edges into the base.
func (g *Graph) mergeFresh() {
	if len(g.fresh) == 0 {
		return
	}
	base, fresh, out := g.base, g.fresh, g.next[:0]
	if cap(out) < len(base)+len(fresh) {
		out = make([]Edge, 0, len(base)+len(fresh)+len(base)/4)
	}
	i, j := 0, 0
	for i < len(base) || j < len(fresh) {
		if j == len(fresh) || (i < len(base) && base[i].Key < fresh[j].Key) {
			out = append(out, base[i])
			i++
		} else {
			out = append(out, fresh[j])
			j++
		}
	}
	g.base, g.next = out, base[:0]
	g.fresh = fresh[:0]
	g.uoffOK = false
}

// merge (at Tick) sorts the pending batch, merges it into the base (and
// the fresh edges) multiplying every weight by scale, drops edges whose
// combined weight is below eps or that touch a key group not live, and
// trims to the edge cap.
func (g *Graph) merge(scale, fscale, eps float64, evicted []NodeID) {
	pend := g.sortPending()
	alpha := g.cfg.AlphaWR
	base, fresh, out := g.base, g.fresh, g.next[:0]
	if n := len(base) + len(fresh) + len(pend); cap(out) < n {
		out = make([]Edge, 0, n+len(base)/4)
	}
	checkLive := len(evicted) > 0
	perNode := g.thrActive // thresholds exist only after a per-node trim
	projC, projF := g.projWeights()
	thr, ns := g.thr, g.nodeScale
	var inF []float64
	if perNode {
		inF = g.fastSum()
	}
	emit := func(e Edge) {
		e.WW, e.WR, e.Fast = e.WW*scale, e.WR*scale, e.Fast*fscale
		u, v := NodeID(e.Key>>32), NodeID(uint32(e.Key))
		c := e.WW + alpha*e.WR
		if c < eps {
			g.stats.PrunedEdges++
			return
		}
		if p := projC*c + projF*e.Fast; perNode && p < thr[u]*ns && p < thr[v]*ns {
			g.stats.EvictedEdges++ // below both endpoints' per-node thresholds
			return
		}
		if checkLive && (!g.live[u] || !g.live[v]) {
			g.stats.EvictedEdges++
			return
		}
		if perNode {
			inF[u] += e.Fast
			inF[v] += e.Fast
		}
		out = append(out, e)
	}
	// The existing edges are base ∪ fresh (disjoint, both sorted): merge
	// the three streams at once rather than fold fresh into the base first.
	i, k, j := 0, 0, 0
	for i < len(base) || k < len(fresh) || j < len(pend) {
		var cur *Edge
		if i < len(base) {
			cur = &base[i]
		}
		if k < len(fresh) && (cur == nil || fresh[k].Key < cur.Key) {
			cur = &fresh[k]
		}
		if cur != nil && (j == len(pend) || cur.Key < pend[j].Key) {
			emit(*cur)
			if i < len(base) && cur == &base[i] {
				i++
			} else {
				k++
			}
			continue
		}
		e := Edge{Key: pend[j].Key}
		if cur != nil && cur.Key == e.Key {
			e = *cur
			if i < len(base) && cur == &base[i] {
				i++
			} else {
				k++
			}
		}
		for ; j < len(pend) && pend[j].Key == e.Key; j++ {
			e.WW += pend[j].WW
			e.WR += pend[j].WR
			e.Fast += pend[j].Fast
		}
		emit(e)
	}
	if perNode {
		fa := g.fastAcc // decayed by this Tick already, like e.Fast
		g.stats.Drifting = 0
		for i := range inF {
			g.drift[i] = g.rej[i]*fa > driftShare*inF[i]
			if g.drift[i] {
				g.stats.Drifting++
			}
		}
	}
	g.base, g.next = out, base[:0]
	g.fresh = fresh[:0]
	g.pend = g.pend[:0]
	g.csrOK = false
	g.degOK = false
	g.uoffOK = false
	g.trimEdges(scale != 1)
}

// trimEdges evicts the lightest edges of the base down to TrimFraction of
// the edge cap when it holds more than the cap, or (atTick) more than
// TrimFraction of it. Ties are kept in key order.
func (g *Graph) trimEdges(atTick bool) {
	alpha := g.cfg.AlphaWR
	limit := g.edgeCap()
	if len(g.base) > limit || (atTick && len(g.base) > int(float64(limit)*g.cfg.TrimFraction)) {
		g.uoffOK = false
		target := int(float64(limit) * g.cfg.TrimFraction)
		ws := g.scratch[:0]
		for _, e := range g.base {
			ws = append(ws, e.WW+alpha*e.WR)
		}
		g.scratch = ws
		threshold := KthLargest(ws, target)
		above := 0
		for _, c := range ws {
			if c > threshold {
				above++
			}
		}
		keepTies := target - above
		n := 0
		for _, e := range g.base {
			c := e.WW + alpha*e.WR
			if c < threshold || (c == threshold && keepTies == 0) {
				g.stats.EvictedEdges++
				continue
			}
			if c == threshold {
				keepTies--
			}
			g.base[n] = e
			n++
		}
		g.base = g.base[:n]
	}
}

// localIDs is a small open-addressing map from the key groups of the
// summary being applied to their ids: edges name the same key groups as
// the summary's nodes, and this table stays in cache where the graph-wide
// map does not.
type localIDs struct {
	keys  []uint64
	vals  []NodeID // id + 1; 0 = empty
	shift uint
}

func (t *localIDs) reset(n int) {
	size := 64
	for size < 2*n {
		size *= 2
	}
	if len(t.keys) != size {
		t.keys = make([]uint64, size)
		t.vals = make([]NodeID, size)
		t.shift = uint(64 - log2(size))
	} else {
		clear(t.vals)
	}
}

func (t *localIDs) put(kg uint64, id NodeID) {
	mask := uint64(len(t.keys) - 1)
	h := (kg * golden) >> t.shift
	for t.vals[h] != 0 && t.keys[h] != kg {
		h = (h + 1) & mask
	}
	t.keys[h], t.vals[h] = kg, id+1
}

func (t *localIDs) get(kg uint64) (NodeID, bool) {
	if len(t.keys) == 0 {
		return NoNode, false
	}
	mask := uint64(len(t.keys) - 1)
	h := (kg * golden) >> t.shift
	for t.vals[h] != 0 {
		if t.keys[h] == kg {
			return t.vals[h] - 1, true
		}
		h = (h + 1) & mask
	}
	return NoNode, false
}

// edgeCap is the effective global edge cap.
func (g *Graph) edgeCap() int { return g.cfg.MaxEdges }

// admit reports whether a new edge of combined weight c and fast weight f
// between u and v passes the per-node thresholds: its projected weight
// is at least either endpoint's threshold, counting its fast weight only
// at an endpoint that drifted (see ProjectTicks). One sample is no rate:
// counted everywhere, it let a tick's worth of sampling noise in at every
// key group.
func (g *Graph) admit(c, f float64, u, v NodeID, projC, projF float64) bool {
	ns := g.nodeScale
	pu, pv := projC*c, projC*c
	if g.drift[u] || g.drift[v] {
		p := projC*c + projF*f
		if g.drift[u] {
			pu = p
		}
		if g.drift[v] {
			pv = p
		}
	}
	return pu >= g.thr[u]*ns || pv >= g.thr[v]*ns
}

// driftShare: a key group is drifting when the new co-access the per-node
// thresholds refused it, by fast weight, exceeds driftShare times its
// edges' fast weight: its partners changed. Sampling noise refuses some
// of every key group's co-access; at 4, about 6% of reshaped TPC-C's key
// groups are flagged at a time (GraphStats.Drifting in the cohort
// generator's Step/tpcc benchmark: 585 of 9,216 at its end), and a
// drifted tenant's key groups within a few ticks of the drift.
const driftShare = 4

// fastSum returns a zeroed per-key-group scratch array (merge's fast
// weights, trimPerNode's thresholds).
func (g *Graph) fastSum() []float64 {
	n := len(g.kg)
	if cap(g.fsum) < n {
		g.fsum = make([]float64, n)
	}
	fs := g.fsum[:n]
	clear(fs)
	return fs
}

// projWeights returns the factors of the projected weight (ProjectTicks):
// projected = projC·combined + projF·Fast.
func (g *Graph) projWeights() (projC, projF float64) {
	pc := math.Pow(g.cfg.Lambda, float64(g.cfg.ProjectTicks))
	return pc, (1 - pc) * g.FastScale()
}

// trimPerNode keeps, of every key group's edges, its MaxEdgesPerNode
// heaviest by projected weight (ties kept): an edge survives if it is
// among the heaviest of either endpoint. It costs a few passes over the
// edges, so it runs at Tick
// only when the graph holds more than 1.25·MaxEdgesPerNode·(key groups)
// edges; it records each key group's threshold (decayed with the weights),
// and every merge in between drops incoming edges below the thresholds of
// both endpoints, which keeps the graph near its bound at no extra pass.
func (g *Graph) trimPerNode() {
	k := g.cfg.MaxEdgesPerNode
	if k <= 0 || 4*len(g.base) <= 5*k*g.nLive {
		return
	}
	projC, projF := g.projWeights()
	g.stats.PerNodeTrims++
	alpha := g.cfg.AlphaWR
	n := len(g.kg)
	// Incident weights grouped by key group (counting sort).
	off := resizeI32(g.off, n+1)
	clear(off)
	for _, e := range g.base {
		off[e.Key>>32+1]++
		off[uint32(e.Key)+1]++
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	m := 2 * len(g.base)
	ws := g.nw
	if cap(ws) < m {
		ws = make([]float64, m)
	}
	ws = ws[:m]
	pos := resizeI32(g.pos, n)
	copy(pos, off[:n])
	for _, e := range g.base {
		c := projC*(e.WW+alpha*e.WR) + projF*e.Fast
		u, v := e.Key>>32, uint32(e.Key)
		ws[pos[u]] = c
		pos[u]++
		ws[pos[v]] = c
		pos[v]++
	}
	// Per key group threshold: its k-th heaviest incident weight. The
	// trim compares with kth, the thresholds as they are: divided by the
	// decay scale and multiplied back, a threshold can round an ulp above
	// itself, and a key group whose edges all weigh the same would lose
	// every one.
	thr := g.thr[:n]
	kth := g.fastSum()
	for i := range n {
		lo, hi := off[i], off[i+1]
		if int(hi-lo) <= k {
			thr[i], kth[i] = math.Inf(-1), math.Inf(-1)
			continue
		}
		kth[i] = KthLargest(ws[lo:hi], k)
		thr[i] = kth[i] / g.nodeScale // stored like node weights
	}
	j := 0
	for _, e := range g.base {
		c := e.WW + alpha*e.WR
		u, v := NodeID(e.Key>>32), NodeID(uint32(e.Key))
		if p := projC*c + projF*e.Fast; p >= kth[u] || p >= kth[v] {
			g.base[j] = e
			j++
			continue
		}
		g.stats.EvictedEdges++
	}
	g.base = g.base[:j]
	g.uoffOK = false
	g.thrActive = true
	g.degOK = false
	g.off, g.nw, g.pos = off, ws, pos
	g.csrOK = false
}

func resizeI32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// sortPending sorts the pending batch by key, stably (equal keys keep
// their Apply order, so float sums are reproducible), and returns it. It
// radix-sorts 8-byte words holding the compacted key (u·2^b | v, b bits
// per id) above the update's index, then gathers the updates.
func (g *Graph) sortPending() []Edge {
	a := g.pend
	if len(a) < 2 {
		return a
	}
	b := uint(log2(len(g.kg)))
	ib := uint(log2(len(a)))
	words := g.words[:0]
	for j := range a {
		key := a[j].Key
		ck := (key>>32)<<b | key&(1<<32-1)
		words = append(words, ck<<ib|uint64(j))
	}
	if cap(g.wtmp) < len(words) {
		g.wtmp = make([]uint64, len(words))
	}
	sorted, other := radixSortFrom(words, g.wtmp[:len(words)], ib, ib+2*b)
	g.words, g.wtmp = sorted[:0], other[:0]
	if cap(g.ptmp) < len(a) {
		g.ptmp = make([]Edge, len(a))
	}
	out := g.ptmp[:len(a)]
	mask := uint64(1)<<ib - 1
	for k, w := range sorted {
		out[k] = a[w&mask]
	}
	g.pend, g.ptmp = out, a
	return out
}

// radixSortFrom sorts a by bits [from, to) (LSD, 11-bit digits), using tmp
// as scratch; it returns the sorted slice and the other one.
func radixSortFrom(a, tmp []uint64, from, to uint) (sorted, other []uint64) {
	const d = 11
	const m = 1<<d - 1
	var cnt [1 << d]int
	for shift := from; shift < to; shift += d {
		clear(cnt[:])
		for _, v := range a {
			cnt[(v>>shift)&m]++
		}
		sum := 0
		for i, c := range cnt {
			cnt[i] = sum
			sum += c
		}
		for _, v := range a {
			k := (v >> shift) & m
			tmp[cnt[k]] = v
			cnt[k]++
		}
		a, tmp = tmp, a
	}
	return a, tmp
}

// ---------------------------------------------------------------------------
// Tick

// Tick closes a window: it multiplies every weight (node, edge, home, per-CN
// load) by Lambda, so that after k Ticks without input every weight is
// exactly λ^k of itself (up to float64 rounding); forgets entries that fell
// below Epsilon; and trims tables that exceed their caps (lightest first).
// Node and home weights decay lazily (a global scale, O(1) per Tick);
// edges decay in the merge pass, so Tick costs O(edges + pending updates),
// plus a scan of the key groups every PruneEvery ticks: ~2–4 ms at 9,216
// key groups / ~137k edges / ~140k updates per tick on the 2-core
// development machine. NodeIDs of removed key groups become free for reuse.
func (g *Graph) Tick() {
	g.tick++
	lam := g.cfg.Lambda
	eps := g.cfg.Epsilon

	for i := range g.cn {
		l := &g.cn[i]
		if !l.Seen {
			continue
		}
		l.Txns *= lam
		l.Sampled *= lam
		l.Local *= lam
		l.OwnerRPC *= lam
		l.MNCAS *= lam
		l.MNCASFailed *= lam
		l.Redirected *= lam
	}

	// Node weights (and per-node edge thresholds) decay lazily: a global
	// scale, folded into the arrays when it gets small.
	g.nodeScale *= lam
	if g.nodeScale < 1e-100 {
		f := g.nodeScale
		for id := range g.kg {
			g.w[id] *= f
			g.r[id] *= f
			g.fb[id] *= f
			g.thr[id] *= f
		}
		g.nodeScale = 1
	}
	g.fastAcc *= g.cfg.FastLambda
	if g.fastAcc < 1e-100 {
		f := g.fastAcc
		for id := range g.rej {
			g.rej[id] *= f
		}
		g.fastAcc = 1
	}
	// Home weights only matter relative to each other (P(home)), so they
	// decay lazily: a global scale, folded into the entries when it gets
	// small.
	g.homeScale *= lam
	if g.homeScale < 1e-20 {
		f := float32(g.homeScale)
		for j := range g.homes {
			g.homes[j].w *= f
		}
		for j := range g.other {
			g.other[j] *= f
		}
		g.homeScale = 1
	}

	// Node cap: evict the lightest key groups (with their edges).
	var evicted []NodeID
	if target := int(float64(g.cfg.MaxNodes) * g.cfg.TrimFraction); g.nLive > target {
		ms := g.scratch[:0]
		for id := range g.kg {
			if g.live[id] {
				ms = append(ms, g.mass(NodeID(id)))
			}
		}
		g.scratch = ms
		threshold := KthLargest(ms, target)
		keepTies := 0
		for id := range g.kg {
			if g.live[id] && g.mass(NodeID(id)) > threshold {
				keepTies++
			}
		}
		keepTies = target - keepTies
		for id := range g.kg {
			if !g.live[id] {
				continue
			}
			m := g.mass(NodeID(id))
			if m > threshold {
				continue
			}
			if m == threshold && keepTies > 0 {
				keepTies--
				continue
			}
			g.live[id] = false
			evicted = append(evicted, NodeID(id))
		}
		g.stats.EvictedNodes += uint64(len(evicted))
	}

	// Merge pending updates, decay edges, forget light ones and those of
	// evicted key groups, trim to the edge caps.
	g.merge(lam, g.cfg.FastLambda, eps, evicted)
	g.trimPerNode()

	// Remove evicted key groups, and every PruneEvery ticks the forgotten
	// ones (below Epsilon, no edge left).
	for _, id := range evicted {
		g.removeNode(id)
	}
	if g.tick%uint64(g.cfg.PruneEvery) == 0 {
		g.ensureDeg()
		for id := range g.kg {
			if g.deg[id] == 0 && g.live[id] && g.mass(NodeID(id)) < eps {
				g.removeNode(NodeID(id))
				g.stats.PrunedNodes++
			}
		}
	}
	g.csrOK = false
}

// ensureDeg recounts the key groups' degrees if edges changed since.
func (g *Graph) ensureDeg() {
	if g.degOK {
		return
	}
	clear(g.deg)
	for _, e := range g.base {
		g.deg[e.Key>>32]++
		g.deg[uint32(e.Key)]++
	}
	g.degOK = true
}

// mass is W + R + fallback of a key group, in actual units.
func (g *Graph) mass(id NodeID) float64 { return (g.w[id] + g.r[id] + g.fb[id]) * g.nodeScale }

// IDGeneration counts key group removals: while it is unchanged, every
// cached (NodeID, key group) pair is still valid, so callers may skip
// re-checking them with KG.
func (g *Graph) IDGeneration() uint64 { return g.removals }

func (g *Graph) removeNode(id NodeID) {
	g.removals++
	if g.live[id] {
		g.live[id] = false
	}
	if cur, ok := g.ids.get(g.kg[id]); ok && cur == id {
		g.ids.del(g.kg[id])
		g.nLive--
	}
	g.w[id], g.r[id], g.fb[id], g.deg[id], g.other[id] = 0, 0, 0, 0, 0
	g.thr[id], g.rej[id], g.drift[id] = math.Inf(-1), 0, false
	hs := g.homes[int(id)*g.cfg.MaxHomes : (int(id)+1)*g.cfg.MaxHomes]
	for j := range hs {
		hs[j] = homeEntry{node: control.Unowned}
	}
	g.free = append(g.free, id)
}

// ---------------------------------------------------------------------------
// Accessors by key group

// Has reports whether kg is in the graph.
func (g *Graph) Has(kg control.KeyGroup) bool { _, ok := g.ids.get(kg); return ok }

// W returns kg's decayed write weight W(v) (0 if absent).
func (g *Graph) W(kg control.KeyGroup) float64 {
	if id, ok := g.ids.get(kg); ok {
		return g.w[id] * g.nodeScale
	}
	return 0
}

// R returns kg's decayed read weight (0 if absent).
func (g *Graph) R(kg control.KeyGroup) float64 {
	if id, ok := g.ids.get(kg); ok {
		return g.r[id] * g.nodeScale
	}
	return 0
}

// FallbackCAS returns kg's decayed count of locks taken by MN CAS.
func (g *Graph) FallbackCAS(kg control.KeyGroup) float64 {
	if id, ok := g.ids.get(kg); ok {
		return g.fb[id] * g.nodeScale
	}
	return 0
}

// EdgeWeight returns the combined edge weight w(a,b) = ww + AlphaWR·wr
// (0 if there is no edge).
func (g *Graph) EdgeWeight(a, b control.KeyGroup) float64 {
	ww, wr, _ := g.TypedEdge(a, b)
	return ww + g.cfg.AlphaWR*wr
}

// TypedEdge returns the edge's write–write and write–read weights.
func (g *Graph) TypedEdge(a, b control.KeyGroup) (ww, wr float64, ok bool) {
	u, ok1 := g.ids.get(a)
	v, ok2 := g.ids.get(b)
	if !ok1 || !ok2 || u == v {
		return 0, 0, false
	}
	e := g.findEdge(u, v)
	if e < 0 {
		return 0, 0, false
	}
	return g.base[e].WW, g.base[e].WR, true
}

// Neighbors appends kg's neighbours with combined edge weights to dst, in
// a deterministic order.
func (g *Graph) Neighbors(kg control.KeyGroup, dst []Neighbor) []Neighbor {
	id, ok := g.ids.get(kg)
	if !ok {
		return dst
	}
	nb, ws := g.NeighborsOf(id)
	for i, v := range nb {
		dst = append(dst, Neighbor{KG: g.kg[v], Weight: ws[i]})
	}
	return dst
}

// HomeDist appends kg's home distribution P(home(v)=i) to dst, sorted by
// CN index. The probabilities of the CNs kept sum to at most 1 (the rest is
// the mass of CNs beyond MaxHomes). An unknown key group yields nothing.
func (g *Graph) HomeDist(kg control.KeyGroup, dst []Home) []Home {
	id, ok := g.ids.get(kg)
	if !ok {
		return dst
	}
	start := len(dst)
	dst = g.HomesOf(id, dst)
	slices.SortFunc(dst[start:], func(a, b Home) int { return a.Node - b.Node })
	return dst
}

// HomesOf appends the home distribution of a live id to dst like
// HomeDist, but in storage order rather than by CN index: for hot loops
// that accumulate per CN (and so need no order) and already hold the id.
func (g *Graph) HomesOf(id NodeID, dst []Home) []Home {
	hs := g.homes[int(id)*g.cfg.MaxHomes : (int(id)+1)*g.cfg.MaxHomes]
	total := float64(g.other[id])
	for _, h := range hs {
		if h.node != control.Unowned {
			total += float64(h.w)
		}
	}
	if total <= 0 {
		return dst
	}
	for _, h := range hs {
		if h.node != control.Unowned && h.w > 0 {
			dst = append(dst, Home{Node: int(h.node), Weight: float64(h.w) * g.homeScale, P: float64(h.w) / total})
		}
	}
	return dst
}

// HomeProb returns P(home(kg)=node), 0 when unknown.
func (g *Graph) HomeProb(kg control.KeyGroup, node int) float64 {
	var buf [16]Home
	for _, h := range g.HomeDist(kg, buf[:0]) {
		if h.Node == node {
			return h.P
		}
	}
	return 0
}

// NodeLoad returns the decayed load of CN index node (zero Load when out of
// range or never seen).
func (g *Graph) NodeLoad(node int) Load {
	if node < 0 || node >= control.MaxNodes {
		return Load{}
	}
	return g.cn[node]
}

// CNs returns the CN indices any applied summary came from, ascending.
func (g *Graph) CNs() []int {
	var out []int
	for i := range g.cn {
		if g.cn[i].Seen {
			out = append(out, i)
		}
	}
	return out
}

// KeyGroups appends every key group in the graph to dst, ascending.
func (g *Graph) KeyGroups(dst []control.KeyGroup) []control.KeyGroup {
	start := len(dst)
	for id, kg := range g.kg {
		if g.live[id] {
			dst = append(dst, kg)
		}
	}
	slices.Sort(dst[start:])
	return dst
}

// ForEachEdge calls fn for every edge (a < b not guaranteed; each edge
// once), in a deterministic order.
func (g *Graph) ForEachEdge(fn func(a, b control.KeyGroup, ww, wr float64)) {
	g.flush()
	for _, e := range g.base {
		fn(g.kg[e.Key>>32], g.kg[uint32(e.Key)], e.WW, e.WR)
	}
}

// TotalWriteWeight returns Σ W(v).
func (g *Graph) TotalWriteWeight() float64 {
	t := 0.0
	for id := range g.kg {
		if g.live[id] {
			t += g.w[id] * g.nodeScale
		}
	}
	return t
}

// ---------------------------------------------------------------------------
// Accessors by NodeID (for hot loops)

// NumIDs returns one more than the largest NodeID in use: arrays indexed by
// NodeID need this length. Some ids below it may be free (KG reports them).
func (g *Graph) NumIDs() int { return len(g.kg) }

// ID returns kg's NodeID.
func (g *Graph) ID(kg control.KeyGroup) (NodeID, bool) {
	id, ok := g.ids.get(kg)
	return id, ok
}

// KG returns the key group of id, and false if id is free or out of range.
func (g *Graph) KG(id NodeID) (control.KeyGroup, bool) {
	if id < 0 || int(id) >= len(g.kg) || !g.live[id] {
		return 0, false
	}
	return g.kg[id], true
}

// WOf and ROf return the write and read weights of a live id.
func (g *Graph) WOf(id NodeID) float64 { return g.w[id] * g.nodeScale }

// ROf returns the read weight of a live id.
func (g *Graph) ROf(id NodeID) float64 { return g.r[id] * g.nodeScale }

// FallbackCASOf returns the decayed fallback CAS count of a live id.
func (g *Graph) FallbackCASOf(id NodeID) float64 { return g.fb[id] * g.nodeScale }

// NeighborsOf returns id's neighbours and combined edge weights (parallel
// slices, owned by the graph, valid until the next Apply or Tick). The
// first call after a change builds the adjacency index in O(ids + edges).
func (g *Graph) NeighborsOf(id NodeID) ([]NodeID, []float64) {
	if !g.csrOK {
		g.buildCSR()
	}
	lo, hi := g.off[id], g.off[id+1]
	return g.nbr[lo:hi], g.nw[lo:hi]
}

// EdgeList returns every edge, sorted by Key, in a slice owned by the
// graph and valid until the next Apply or Tick. Iterating it is the
// cheapest way to visit all edges (sequential memory, no adjacency index).
func (g *Graph) EdgeList() []Edge {
	g.flush()
	return g.base
}

// FastScale converts an Edge's Fast weight into the units of its decayed
// weights: in steady state (x per window, read after Tick) the decayed
// weight is λx/(1−λ) and the fast one λf·x/(1−λf).
func (g *Graph) FastScale() float64 {
	l, f := g.cfg.Lambda, g.cfg.FastLambda
	if l >= 1 {
		return 1 // undecayed graph: no steady state to compare with
	}
	return l * (1 - f) / ((1 - l) * f)
}

// EdgeEnds decodes an EdgeList key.
func EdgeEnds(key uint64) (u, v NodeID) { return NodeID(key >> 32), NodeID(uint32(key)) }

func (g *Graph) buildCSR() {
	g.flush()
	n := len(g.kg)
	if cap(g.off) < n+1 {
		g.off = make([]int32, n+1)
	}
	g.off = g.off[:n+1]
	off := g.off
	clear(off)
	for _, e := range g.base {
		off[e.Key>>32+1]++
		off[uint32(e.Key)+1]++
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	m := 2 * len(g.base)
	if cap(g.nbr) < m {
		g.nbr = make([]NodeID, m)
		g.nw = make([]float64, m)
	}
	g.nbr, g.nw = g.nbr[:m], g.nw[:m]
	if cap(g.pos) < n {
		g.pos = make([]int32, n)
	}
	pos := g.pos[:n]
	copy(pos, off[:n])
	nbr, nw := g.nbr, g.nw
	alpha := g.cfg.AlphaWR
	for _, e := range g.base {
		u, v := NodeID(e.Key>>32), NodeID(uint32(e.Key))
		c := e.WW + alpha*e.WR
		nbr[pos[u]], nw[pos[u]] = v, c
		pos[u]++
		nbr[pos[v]], nw[pos[v]] = u, c
		pos[v]++
	}
	g.csrOK = true
}

// kgIndex maps key groups to NodeIDs: open addressing with linear probing
// (backward-shift deletion), at most half full. A look-up touches one
// 16-byte slot where it hits, in one cache line, where Go's map reads a
// control word and then a slot: Apply, the planner's per-cohort statistics
// and the accessors by key group do one per key group.
type kgIndex struct {
	slots []kgSlot
	n     int
	shift uint
}

type kgSlot struct {
	kg control.KeyGroup
	id NodeID // id + 1; 0 = empty
}

func (t *kgIndex) home(kg control.KeyGroup) uint64 { return (uint64(kg) * golden) >> t.shift }

func (t *kgIndex) get(kg control.KeyGroup) (NodeID, bool) {
	if t.n == 0 {
		return NoNode, false
	}
	mask := uint64(len(t.slots) - 1)
	for h := t.home(kg); ; h = (h + 1) & mask {
		s := &t.slots[h]
		if s.id == 0 {
			return NoNode, false
		}
		if s.kg == kg {
			return s.id - 1, true
		}
	}
}

// put adds or replaces kg's id.
func (t *kgIndex) put(kg control.KeyGroup, id NodeID) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	h := t.home(kg)
	for ; t.slots[h].id != 0; h = (h + 1) & mask {
		if t.slots[h].kg == kg {
			t.slots[h].id = id + 1
			return
		}
	}
	t.slots[h] = kgSlot{kg, id + 1}
	t.n++
}

func (t *kgIndex) del(kg control.KeyGroup) {
	if t.n == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	i := t.home(kg)
	for ; ; i = (i + 1) & mask {
		if t.slots[i].id == 0 {
			return
		}
		if t.slots[i].kg == kg {
			break
		}
	}
	// Backward shift: move later entries of the probe run into the hole
	// unless their home lies cyclically in (hole, their slot].
	for j := (i + 1) & mask; t.slots[j].id != 0; j = (j + 1) & mask {
		k := t.home(t.slots[j].kg)
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = kgSlot{}
	t.n--
}

func (t *kgIndex) grow() {
	size := max(2*len(t.slots), 1024)
	old := t.slots
	t.slots = make([]kgSlot, size)
	t.shift = uint(64 - log2(size))
	t.n = 0
	for _, s := range old {
		if s.id != 0 {
			t.put(s.kg, s.id-1)
		}
	}
}
