package cohortgen

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
)

// Merge records cohorts merged in one Step.
type Merge struct {
	// Into is the merged cohort's id (one of From when an id was kept).
	Into control.CohortID
	// From are the merged cohorts, ascending.
	From []control.CohortID
}

// Split records a cohort cut in two in one Step.
type Split struct {
	// From is the cohort that was split (its id may live on in Into).
	From control.CohortID
	// Into are the two parts, ascending.
	Into []control.CohortID
	// Separation is true when the cut was the seam of an earlier merge
	// (the merge undone below ThetaMergeLow) rather than a cut found by
	// the heuristic.
	Separation bool
}

// Detach records members detached from a cohort in one Step: each had no
// significant edge (Config.Significance) inside it for PersistWindows
// windows and became a singleton cohort.
type Detach struct {
	From control.CohortID
	// Into are the singletons' ids, ascending.
	Into []control.CohortID
}

// Refined records one adopted refinement: the region's old and new
// cohorts (ids kept by the Jaccard rule appear in both).
type Refined struct {
	Old, New []control.CohortID
	// Gain is the adopted gain in weight kept inside cohorts, as a fraction
	// of the region's edge weight.
	Gain float64
}

// Stats describe the generator's state after a Step.
type Stats struct {
	// Cohorts and TrackedKGs count all cohorts and their key groups;
	// Published and PublishedKGs those published.
	Cohorts, TrackedKGs, Published, PublishedKGs int
	// Singletons counts cohorts of one key group.
	Singletons int
	// MinSize, MaxSize and MeanSize describe the published cohorts' sizes.
	MinSize, MaxSize int
	MeanSize         float64
	// MergeCandidates counts cohort pairs above ThetaMergeHigh this window;
	// SplitChecks the cohorts whose cut was computed.
	MergeCandidates, SplitChecks int
	// Merges, Splits (heuristic cuts), Separations (merges undone) and
	// Refinements count this Step's structural changes; Born and Dropped the
	// key groups that joined (as singletons) and left (cold).
	Merges, Splits, Separations, Refinements, Born, Dropped int
	// Detached counts members detached this Step (see Detach).
	Detached int
	// Moved counts, among Detached, the members detached because their
	// recent co-access left their cohort (see coAccessMoved).
	Moved int
	// Misplaced counts, among Detached, the members detached because their
	// recent co-access went to another cohort (see isMisplaced).
	Misplaced int
}

// Output is what one Step decided.
type Output struct {
	// Tick is the generator's tick (Step count).
	Tick uint64
	// Cohorts is the published cohort set, ascending by id, each with sorted
	// key groups. The slices are immutable snapshots: they may be shared
	// with earlier and later Outputs and must not be modified.
	Cohorts []control.Cohort
	// New, Retired and Changed compare Cohorts with the previous Output's:
	// ids published now and not before, published before and not now, and
	// published in both with different key groups. Ascending.
	New, Retired, Changed []control.CohortID
	// Merged, Split and Refined are this Step's structural changes among
	// all cohorts (published or not).
	Merged   []Merge
	Split    []Split
	Refined  []Refined
	Detached []Detach
	// Sticky reports that the Step would have published no cohort and the
	// previous set was published again (New, Retired and Changed are empty).
	Sticky bool
	// RefineDue reports that a refinement is due this tick and was not run
	// inline (RefineInline false): the caller may PrepareRefine now.
	RefineDue bool
	// Stats describe the state after the Step.
	Stats Stats
}

// String renders the output compactly (for tests and logs).
func (o *Output) String() string {
	return fmt.Sprintf("tick %d: %d cohorts, +%v -%v ~%v merged=%v split=%v sticky=%v",
		o.Tick, len(o.Cohorts), o.New, o.Retired, o.Changed, o.Merged, o.Split, o.Sticky)
}

type cohort struct {
	id      control.CohortID
	kgs     []control.KeyGroup // sorted
	gids    []accessgraph.NodeID
	mw      []float64 // member W(v), refreshed each Step
	side    []uint8   // seam side per member, when seam
	stray   []uint8   // per member: consecutive windows without a significant internal edge (nil: all 0)
	seam    bool
	version uint64
	dead    bool

	sepStreak, splitStreak int
	refinedAt              uint64 // tick of the last refinement of its region
	statsTick              uint64 // tick of the edge pass that filled w/intra/ext

	snap    []control.KeyGroup // immutable copy published for snapVer
	snapVer uint64

	// Step scratch.
	w, intra, ext      float64
	sideW, sideIntra   [2]float64
	seamCut            float64
	check, touched     bool
	parents            []control.CohortID // ids merged into this cohort at mergedAt
	mergedAt, resetAt  uint64             // ticks of its last merge, of its last split/refinement
	movedAt            uint64             // tick a member of it was detached for moved co-access (0: never; see refineHold)
	movedOut           int                // members detached for moved co-access since its co-access collapsed (see dissolveShare)
	merged             bool               // created by a merge this Step
	into               *cohort            // the cohort this one merged into this Step
	edges              []ledge
	homeTick, homeVer  uint64
	home               int
	publishedLastTick  bool
	publishedVersion   uint64
	wasPublishedBefore bool
}

func (c *cohort) snapshot() []control.KeyGroup {
	if c.snap == nil || c.snapVer != c.version {
		c.snap = slices.Clone(c.kgs)
		c.snapVer = c.version
	}
	return c.snap
}

type idPair struct{ a, b control.CohortID }

func mkPair(a, b control.CohortID) idPair {
	if a > b {
		a, b = b, a
	}
	return idPair{a, b}
}

// Generator is the LockCohortGenerator. It keeps a partition of the hot
// key groups into cohorts and changes it, one Step per planner tick, by
// merges, splits, separations and refinements with hysteresis. It is not
// safe for concurrent use.
type Generator struct {
	cfg    Config
	tick   uint64
	nextID control.CohortID

	cohorts []*cohort // live, ascending by id
	byID    map[control.CohortID]*cohort

	streaks  map[idPair]int  // merge streaks (consecutive windows ≥ high)
	siblings map[idPair]bool // halves of a heuristic split
	pub      []control.Cohort
	pubIDs   map[control.CohortID]uint64 // published id → version
	sticky   int

	splitCursor control.CohortID
	offered     *RefineResult
	sorted      int // length of the id-sorted prefix of cohorts during a Step
	lastGraph   *accessgraph.Graph
	lastGen     uint64

	// scratch, per graph NodeID. The edge pass visits every edge and
	// reads its endpoints' state: a record per id (rather than an array per
	// field) costs at most two cache misses per endpoint (maxM, node) where
	// eight arrays cost eight at a million key groups. Each holds at most
	// NumIDs ≤ accessgraph's MaxNodes entries (node: 48 bytes, maxM: 16).
	tracked  []uint64     // bitset of graph NodeIDs in a cohort
	node     []nodeStat   // per graph NodeID, valid where tracked
	maxM     [][2]float64 // per graph NodeID: M (heaviest edge, see Config.Significance); [maxCur] for the next Step
	maxCur   int          // index in maxM of the M the next Step uses
	maxUse   int          // index in maxM of the M this Step uses (significant)
	maxLen   int          // NumIDs when the Ms were last computed
	maxGen   uint64       // graph IDGeneration()+1 for which the Ms are valid (0: none)
	maxGraph *accessgraph.Graph
	sigIn    []uint64  // bitset of graph NodeIDs with a significant edge inside their cohort
	fIntra   []float64 // per cohort position: fast edge weight inside (this Step)
	fastK    float64   // graph's FastScale this Step
	movedAt  uint64    // last tick a member was detached for moved co-access (0: never)
	pairs    pairTable
	lg       localGraph
	inA      []bool
	self     []float64
	sIntra   []float64
	sExt     []float64
	sSize    []int32
	sSlow    []uint8
	sSeam    []seamStat
	admitBuf []admitCand
	ranked   []*cohort
	best     []float64
	homeAcc  []float64
	homeBuf  []accessgraph.Home
	scores   []float64
	newStr   map[idPair]int
	cands    []mergeCand
	ev       events

	// Misplaced members (misplaced.go).
	massMovedAt uint64               // last tick a Step detached ≥ massMove of the tracked key groups for moved co-access (0: never)
	mis         misplaced            // members flagged for, and their weights summed in, the edge pass
	misNow      []accessgraph.NodeID // members judged misplaced this Step
}

type mergeCand struct {
	a, b int32
	m    float64
}

type events struct {
	merged   []Merge
	split    []Split
	refined  []Refined
	detached []Detach
	stats    Stats
}

// New returns a generator, or the configuration's validation error.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Generator{
		cfg:      cfg,
		nextID:   1,
		byID:     make(map[control.CohortID]*cohort),
		streaks:  make(map[idPair]int),
		siblings: make(map[idPair]bool),
		pubIDs:   make(map[control.CohortID]uint64),
		newStr:   make(map[idPair]int),
	}, nil
}

// Config returns the generator's configuration.
func (gen *Generator) Config() Config { return gen.cfg }

// Tick returns the number of Steps taken.
func (gen *Generator) Tick() uint64 { return gen.tick }

// Cohorts returns all cohorts (published or not), ascending by id, as
// snapshots.
func (gen *Generator) Cohorts() []control.Cohort {
	out := make([]control.Cohort, 0, len(gen.cohorts))
	for _, c := range gen.cohorts {
		out = append(out, control.Cohort{ID: c.id, KeyGroups: c.snapshot()})
	}
	return out
}

func (gen *Generator) newID() control.CohortID {
	id := gen.nextID
	gen.nextID++
	return id
}

// Step runs one generator window on the graph (after the planner applied
// the window's heartbeats and ticked the graph) and returns the cohorts to
// publish. Its cost is O(graph edges + key groups) plus the bounded split
// checks and, every RefineEvery ticks when inline, one refinement.
func (gen *Generator) Step(g *accessgraph.Graph) Output {
	gen.tick++
	cfg := &gen.cfg
	gen.ev = events{}
	ev := &gen.ev
	out := Output{Tick: gen.tick}

	gen.refresh(g) // and index
	gen.admit(g)
	gen.sorted = len(gen.cohorts)
	gen.schedule()
	gen.edgePass(g)
	gen.detach()
	gen.evalMerges(g)

	// Refinement first: an offered result, or one computed inline.
	due := cfg.RefineEvery > 0 && gen.tick%uint64(cfg.RefineEvery) == 0 &&
		(gen.movedAt == 0 || gen.tick-gen.movedAt >= refineHold)
	if gen.offered != nil {
		gen.applyRefinement(gen.offered)
		gen.offered = nil
	}
	if due {
		if cfg.RefineInline {
			if req := gen.prepare(g); req != nil {
				gen.applyRefinement(Refine(req))
			}
		} else {
			out.RefineDue = true
		}
	}

	// Separations and splits.
	k := cfg.SelfWeight
	for _, c := range gen.cohorts {
		if c.dead || c.touched {
			continue
		}
		if c.seam {
			ia, ib := c.sideIntra[0]+k*c.sideW[0], c.sideIntra[1]+k*c.sideW[1]
			if m := c.seamCut / math.Min(ia, ib); m < cfg.ThetaMergeLow {
				c.sepStreak++
			} else {
				c.sepStreak = 0
			}
			if c.sepStreak >= cfg.PersistWindows {
				side := make([]bool, len(c.kgs))
				for i, s := range c.side {
					side[i] = s == 0
				}
				gen.split(c, side, true)
				continue
			}
		}
		if c.check {
			ev.stats.SplitChecks++
			gen.self = resizeF(gen.self, len(c.kgs))
			for i, w := range c.mw {
				gen.self[i] = k * w
			}
			gen.lg.build(len(c.kgs), gen.self, c.edges)
			gen.inA = resizeB(gen.inA, len(c.kgs))
			r := gen.lg.bestCut(cfg.MinCohortSize, gen.inA)
			total := c.intra + k*c.w
			if r.ok && total > 0 && r.cut/total <= cfg.ThetaSplitLow && r.phi < cfg.ThetaMergeLow {
				c.splitStreak++
			} else {
				c.splitStreak = 0
			}
			if c.splitStreak >= cfg.PersistWindows {
				gen.split(c, slices.Clone(r.inA), false)
			}
		}
	}

	// Merges: greedy by ratio. A cohort merged this Step may merge again
	// with another partner whose pair condition held (merges chain within
	// a Step, so a group whose pairs all qualify forms at once), never past
	// MaxCohortSize; cohorts split, separated or refined this Step do not
	// merge.
	slices.SortFunc(gen.cands, func(x, y mergeCand) int {
		if x.m != y.m {
			return cmp.Compare(y.m, x.m)
		}
		if c := cmp.Compare(gen.cohorts[x.a].id, gen.cohorts[y.a].id); c != 0 {
			return c
		}
		return cmp.Compare(gen.cohorts[x.b].id, gen.cohorts[y.b].id)
	})
	find := func(c *cohort) *cohort {
		for c.into != nil {
			c = c.into
		}
		return c
	}
	for _, mc := range gen.cands {
		a, b := find(gen.cohorts[mc.a]), find(gen.cohorts[mc.b])
		if a == b || a.dead || b.dead || (a.touched && !a.merged) || (b.touched && !b.merged) || len(a.kgs)+len(b.kgs) > cfg.MaxCohortSize {
			continue
		}
		gen.merge(a, b)
	}
	gen.finish()
	gen.publish(&out)
	return out
}

// refresh re-reads members' weights, drops cold members and retires empty
// cohorts; and, in the same pass over the cohorts, does what index does.
func (gen *Generator) refresh(g *accessgraph.Graph) {
	drop := gen.cfg.DropFactor * gen.cfg.MinWeight
	// Cached graph ids stay valid while the graph removed no key group.
	verify := g != gen.lastGraph || g.IDGeneration() != gen.lastGen
	gen.lastGraph, gen.lastGen = g, g.IDGeneration()
	gen.resizeIndex(g)
	node, tracked := gen.node, gen.tracked
	live := int32(0) // position of c once compact removed the dead
	for _, c := range gen.cohorts {
		wasDead := c.dead // none between Steps; such a cohort is not indexed
		c.touched, c.check, c.merged, c.into = false, false, false, nil
		c.w = 0
		c.sideW = [2]float64{}
		c.mw = resizeF(c.mw, len(c.kgs))
		k := 0
		for j, kg := range c.kgs {
			gid := c.gids[j]
			if cur, ok := g.KG(gid); verify && (!ok || cur != kg) {
				if id, ok := g.ID(kg); ok {
					gid = id
				} else {
					gid = accessgraph.NoNode
				}
			}
			w := 0.0
			if gid >= 0 {
				w = g.WOf(gid)
			}
			if w < drop {
				gen.ev.stats.Dropped++
				continue
			}
			c.kgs[k], c.gids[k], c.mw[k] = kg, gid, w
			side := uint8(0)
			if c.stray != nil {
				c.stray[k] = c.stray[j]
			}
			if c.seam {
				c.side[k] = c.side[j]
				c.sideW[c.side[k]] += w
				side = c.side[k]
			}
			if gid >= 0 && !wasDead {
				node[gid].track(live, int32(k), side)
				tracked[gid>>6] |= 1 << (gid & 63)
			}
			c.w += w
			k++
		}
		if k > 0 && !wasDead {
			live++
		}
		if k != len(c.kgs) {
			c.kgs, c.gids, c.mw = c.kgs[:k], c.gids[:k], c.mw[:k]
			if c.stray != nil {
				c.stray = c.stray[:k]
			}
			c.version++
			if c.seam {
				c.side = c.side[:k]
				if c.sideW[0] == 0 || c.sideW[1] == 0 {
					c.seam, c.side = false, nil
				}
			}
			if k == 0 {
				c.dead = true
			}
		}
		if k < 2 {
			// A cohort of one has no strays (detach skips it without
			// reading it; see detach).
			c.stray = nil
		}
	}
	gen.compact()
}

// compact removes dead cohorts from the list.
func (gen *Generator) compact() {
	live := gen.cohorts[:0]
	for _, c := range gen.cohorts {
		if c.dead {
			delete(gen.byID, c.id)
			continue
		}
		live = append(live, c)
	}
	clear(gen.cohorts[len(live):])
	gen.cohorts = live
}

// index maps graph ids to cohort positions and member indices: a bitset
// of tracked ids (small enough to stay in cache at a million key groups)
// guards node, which is written for members only (refresh does the same
// within its pass; PrepareRefine calls index).
func (gen *Generator) index(g *accessgraph.Graph) {
	gen.resizeIndex(g)
	for i, c := range gen.cohorts {
		for j, gid := range c.gids {
			if gid >= 0 {
				side := uint8(0)
				if c.seam {
					side = c.side[j]
				}
				gen.node[gid].track(int32(i), int32(j), side)
				gen.tracked[gid>>6] |= 1 << (gid & 63)
			}
		}
	}
}

// resizeIndex sizes node and tracked for g's ids and clears tracked.
func (gen *Generator) resizeIndex(g *accessgraph.Graph) {
	n := g.NumIDs()
	if cap(gen.node) < n {
		gen.node = make([]nodeStat, n, n+n/4)
	}
	gen.node = gen.node[:n]
	words := (n + 63) / 64
	if cap(gen.tracked) < words {
		gen.tracked = make([]uint64, words)
	}
	gen.tracked = gen.tracked[:words]
	clear(gen.tracked)
}

// slotOf returns the position in cohorts of the cohort holding graph id
// gid, or −1.
func (gen *Generator) slotOf(gid accessgraph.NodeID) int32 {
	if gen.tracked[gid>>6]&(1<<(gid&63)) == 0 {
		return -1
	}
	return gen.node[gid].slot
}

// nodeStat is a tracked key group's state in a Step: its cohort and
// member index (set with track, which zeroes the sums), and its edge
// weights summed by the edge pass. 48 bytes.
type nodeStat struct {
	fIn, fTot float64 // fast edge weight inside its cohort, in total
	sIn, sTot float64 // decayed edge weight inside its cohort, in total
	slot      int32   // position in cohorts
	local     int32   // member index
	side      uint8   // seam side (cohort.side), when its cohort is a seam
}

// track records a tracked key group's place and zeroes its sums.
func (n *nodeStat) track(slot, local int32, side uint8) {
	n.fIn, n.fTot, n.sIn, n.sTot = 0, 0, 0, 0
	n.slot, n.local, n.side = slot, local, side
}

// seamStat is a seam cohort's edge weights, summed by the edge pass.
type seamStat struct {
	cut  float64
	side [2]float64
}

// Flags of a cohort the edge pass handles beyond the common case.
const (
	slowSeam  = 1 << iota // a seam: sum its seamStat
	slowCheck             // its cut is computed: collect its internal edges
)

// admit turns hot key groups that are in no cohort into singleton cohorts,
// hottest first, up to MaxTrackedKGs. It expects index to be current and
// keeps it current.
func (gen *Generator) admit(g *accessgraph.Graph) {
	tracked := 0
	for _, c := range gen.cohorts {
		tracked += len(c.kgs)
	}
	room := gen.cfg.MaxTrackedKGs - tracked
	if room <= 0 {
		return
	}
	// Near the cap, scanning every key group for the few free places costs
	// more than it is worth every tick: scan every admitEveryNearCap ticks.
	if 10*tracked >= 9*gen.cfg.MaxTrackedKGs && gen.tick%admitEveryNearCap != 0 {
		return
	}
	cands := gen.admitBuf[:0]
	for id := range g.NumIDs() {
		gid := accessgraph.NodeID(id)
		if gen.slotOf(gid) >= 0 {
			continue
		}
		if w := g.WOf(gid); w >= gen.cfg.MinWeight {
			if kg, ok := g.KG(gid); ok {
				cands = append(cands, admitCand{gid, kg, w})
			}
		}
	}
	if len(cands) > room {
		// Keep the room hottest (ties: smaller key group), in O(n).
		ws := resizeF(gen.self, len(cands))
		for i, c := range cands {
			ws[i] = c.w
		}
		threshold := accessgraph.KthLargest(ws, room)
		gen.self = ws
		above := 0
		for _, c := range cands {
			if c.w > threshold {
				above++
			}
		}
		ties := room - above
		j := 0
		for _, c := range cands { // cands are in id order; ties go by id
			if c.w > threshold || (c.w == threshold && ties > 0) {
				if c.w == threshold {
					ties--
				}
				cands[j] = c
				j++
			}
		}
		cands = cands[:j]
	}
	slices.SortFunc(cands, func(x, y admitCand) int { return cmp.Compare(x.kg, y.kg) })
	for _, cd := range cands {
		c := &cohort{id: gen.newID(), kgs: []control.KeyGroup{cd.kg}, gids: []accessgraph.NodeID{cd.gid},
			mw: []float64{cd.w}, w: cd.w, version: 1}
		gen.node[cd.gid].track(int32(len(gen.cohorts)), 0, 0)
		gen.tracked[cd.gid>>6] |= 1 << (cd.gid & 63)
		gen.cohorts = append(gen.cohorts, c)
		gen.byID[c.id] = c
		gen.ev.stats.Born++
	}
	gen.admitBuf = cands[:0]
}

// admitEveryNearCap: with the tracked key groups at 90% of MaxTrackedKGs
// or more, admission runs every this many ticks.
const admitEveryNearCap = 4

type admitCand struct {
	gid accessgraph.NodeID
	kg  control.KeyGroup
	w   float64
}

// schedule picks the cohorts whose best cut is computed this Step: those
// whose split condition held last window, then round-robin by id.
func (gen *Generator) schedule() {
	minN := 2 * gen.cfg.MinCohortSize
	budget := gen.cfg.SplitChecksPerTick
	for _, c := range gen.cohorts {
		if c.splitStreak > 0 && len(c.kgs) >= minN {
			c.check = true
			budget--
		}
	}
	if budget <= 0 || len(gen.cohorts) == 0 {
		return
	}
	start, _ := slices.BinarySearchFunc(gen.cohorts, gen.splitCursor+1, func(c *cohort, id control.CohortID) int { return cmp.Compare(c.id, id) })
	n := len(gen.cohorts)
	for k := 0; k < n && budget > 0; k++ {
		c := gen.cohorts[(start+k)%n]
		if c.check || len(c.kgs) < minN {
			continue
		}
		c.check = true
		budget--
		gen.splitCursor = c.id
	}
}

// edgePass visits every edge once: intra and external weight per cohort,
// seam statistics, internal edges of the cohorts to check, and cross
// weights of cohort pairs small enough to merge.
func (gen *Generator) edgePass(g *accessgraph.Graph) {
	n := len(gen.cohorts)
	// Hot per-cohort fields in flat arrays (no pointer chasing per edge).
	intra := resizeF(gen.sIntra, n)
	ext := resizeF(gen.sExt, n)
	size := resizeI(gen.sSize, n)
	slow := resizeU8(gen.sSlow, n) // slowSeam, slowCheck
	seam := gen.sSeam[:0]
	if cap(seam) < n {
		seam = make([]seamStat, 0, n)
	}
	seam = seam[:n]
	clear(intra)
	clear(ext)
	fIntra := resizeF(gen.fIntra, n)
	clear(fIntra)
	small := int32(gen.cfg.MinCohortSize)
	for i, c := range gen.cohorts {
		c.seamCut = 0
		c.sideIntra = [2]float64{}
		c.edges = c.edges[:0]
		c.statsTick = gen.tick
		size[i] = int32(len(c.kgs))
		slow[i] = 0
		if c.seam {
			slow[i] |= slowSeam
			seam[i] = seamStat{}
		}
		if c.check {
			slow[i] |= slowCheck
		}
	}
	gen.pairs.reset()
	maxSize := int32(gen.cfg.MaxCohortSize)
	node, cohorts, tracked := gen.node, gen.cohorts, gen.tracked
	alpha := g.Config().AlphaWR
	edges := g.EdgeList()
	// M(x), each key group's heaviest edge, is the previous Step's (the
	// graph's weights change by a few percent per tick; one edge pass
	// instead of two), recomputed first when graph ids were reassigned or
	// on the first Step. This pass computes the next Step's.
	nIDs := g.NumIDs()
	stale := gen.maxGen != g.IDGeneration()+1 || gen.maxGraph != g || gen.maxLen != nIDs
	if cap(gen.maxM) < nIDs {
		gen.maxM = make([][2]float64, nIDs, nIDs+nIDs/4)
	}
	mm := gen.maxM[:nIDs]
	cur := gen.maxCur
	if stale {
		cur = 0
		for i := range mm {
			mm[i][0] = 0
		}
		for _, e := range edges {
			u, v := accessgraph.EdgeEnds(e.Key)
			w := e.WW + alpha*e.WR
			mm[u][0] = max(mm[u][0], w)
			mm[v][0] = max(mm[v][0], w)
		}
	}
	// The next Step's M is this pass's maximum over the same edges: when
	// stale, that is what was just computed (same weights, and a maximum
	// does not depend on order), so the pass below need not recompute it.
	nx := 1 - cur
	if stale {
		nx = cur
	} else {
		for i := range mm {
			mm[i][nx] = 0
		}
	}
	sigIn := resizeU(gen.sigIn, len(tracked))
	clear(sigIn)
	gen.mis.begin(g, nIDs)
	mis := &gen.mis
	gen.fastK = g.FastScale()
	sigma := gen.cfg.Significance
	for _, e := range edges {
		u, v := accessgraph.EdgeEnds(e.Key)
		w := e.WW + alpha*e.WR
		mu, mv := &mm[u], &mm[v]
		if !stale {
			mu[nx] = max(mu[nx], w)
			mv[nx] = max(mv[nx], w)
		}
		if tracked[u>>6]&(1<<(u&63)) == 0 || tracked[v>>6]&(1<<(v&63)) == 0 {
			continue
		}
		nu, nv := &node[u], &node[v]
		cu, cv := nu.slot, nv.slot
		lighter := min(mu[cur], mv[cur])
		sig := w >= sigma*lighter
		f := e.Fast
		nu.fTot += f
		nv.fTot += f
		nu.sTot += w
		nv.sTot += w
		if cu == cv {
			intra[cu] += w
			fIntra[cu] += f
			nu.fIn += f
			nv.fIn += f
			nu.sIn += w
			nv.sIn += w
			// Hysteresis: a member stays while it keeps an edge of half
			// the weight that lets a pair merge.
			if w >= keepSignificance*sigma*lighter {
				sigIn[u>>6] |= 1 << (u & 63)
				sigIn[v>>6] |= 1 << (v & 63)
			}
			fl := slow[cu]
			if fl == 0 {
				continue
			}
			if fl&slowSeam != 0 {
				if su, sv := nu.side, nv.side; su != sv {
					seam[cu].cut += w
				} else {
					seam[cu].side[su&1] += w
				}
			}
			if fl&slowCheck != 0 {
				c := cohorts[cu]
				c.edges = append(c.edges, ledge{nu.local, nv.local, w})
			}
			continue
		}
		ext[cu] += w
		ext[cv] += w
		if mis.n > 0 {
			if mis.flagged(u) {
				mis.add(u, cv, f, w)
			}
			if mis.flagged(v) {
				mis.add(v, cu, f, w)
			}
		}
		// Pairs that may merge, and every significant pair of a small
		// cohort (its best partner may be too large to merge with).
		if sig && (size[cu]+size[cv] <= maxSize || size[cu] <= small || size[cv] <= small) {
			gen.pairs.add(cu, cv, w, f)
		}
	}
	for i, c := range gen.cohorts {
		c.intra, c.ext = intra[i], ext[i]
		if slow[i]&slowSeam != 0 {
			c.seamCut, c.sideIntra = seam[i].cut, seam[i].side
		}
	}
	gen.sIntra, gen.sExt, gen.sSize, gen.sSlow, gen.sSeam = intra, ext, size, slow, seam
	// m[cur] stays this Step's M (significant, prepare); m[nx] becomes
	// the next Step's.
	gen.maxM, gen.maxUse, gen.maxCur, gen.maxLen, gen.sigIn = mm, cur, nx, nIDs, sigIn
	gen.fIntra = fIntra
	gen.maxGen, gen.maxGraph = g.IDGeneration()+1, g
}

// significant reports whether an edge of weight w between graph ids u and
// v is significant under this Step's M (see Config.Significance).
func (gen *Generator) significant(u, v accessgraph.NodeID, w float64) bool {
	use := gen.maxUse
	return w >= gen.cfg.Significance*min(gen.maxM[u][use], gen.maxM[v][use])
}

// detach counts, for every member of a cohort of two or more, the
// consecutive windows in which it has no significant edge (see
// Config.Significance) inside its cohort, and detaches the members at
// PersistWindows into singletons. A cohort that loses members is touched:
// it neither merges nor splits this Step.
func (gen *Generator) detach() {
	persist := gen.cfg.PersistWindows
	n := len(gen.cohorts)
	size := gen.sSize // the edge pass's len(kgs) per position
	gen.misNow = gen.misNow[:0]
	movedBefore, tracked := gen.ev.stats.Moved, 0
	for ci := 0; ci < n; ci++ {
		tracked += int(size[ci])
		// No cohort is dead or touched before detach (refresh cleared
		// touched and compacted the dead; admit and schedule do neither),
		// and refresh left a cohort of one without strays: skip those
		// without reading them (most cohorts are singletons).
		if size[ci] < 2 {
			continue
		}
		c := gen.cohorts[ci]
		if c.dead || c.touched || len(c.kgs) < 2 {
			c.stray = nil
			continue
		}
		out := 0
		// Members are judged on moved co-access only in a cohort whose
		// internal co-access collapsed as a whole (see movedCohort).
		collapsed := gen.fIntra[ci]*gen.fastK < movedCohort*c.intra
		if !collapsed {
			c.movedOut = 0
		}
		for j, gid := range c.gids {
			if gid >= 0 && gen.sigIn[gid>>6]&(1<<(gid&63)) != 0 {
				v := stayed
				if collapsed {
					v = gen.coAccessMoved(gid)
				}
				if v == stayed && gen.isMisplaced(ci, gid) {
					v = moved
					gen.misNow = append(gen.misNow, gid)
				}
				switch v {
				case stayed:
					if c.stray != nil {
						c.stray[j] = 0
					}
					continue
				case unsure:
					continue // inside the band: the streak neither grows nor resets
				}
			}
			if c.stray == nil {
				c.stray = make([]uint8, len(c.kgs))
			}
			if int(c.stray[j]) < persist {
				c.stray[j]++
			}
			if int(c.stray[j]) >= persist {
				out++
			}
		}
		if out == 0 {
			continue
		}
		// Members on their way out (one window of moved co-access) count
		// too: a cohort's members see the move in the same window or the
		// next.
		leaving := 0
		for j := range c.kgs {
			if c.stray[j] > 0 {
				leaving++
			}
		}
		if float64(leaving+c.movedOut) >= dissolveShare*float64(len(c.kgs)+c.movedOut) && out < len(c.kgs) {
			for j, gid := range c.gids {
				if int(c.stray[j]) < persist && gid >= 0 && collapsed && (gen.coAccessMoved(gid) != stayed || gen.insideFaded(gid)) {
					c.stray[j] = uint8(persist)
					out++
				}
			}
		}
		if out == len(c.kgs) {
			// Nothing in it is connected: keep the heaviest member.
			best := 0
			for j := range c.kgs {
				if c.mw[j] > c.mw[best] {
					best = j
				}
			}
			c.stray[best] = 0
		}
		ev := Detach{From: c.id}
		k := 0
		c.sideW = [2]float64{}
		c.w = 0
		for j, kg := range c.kgs {
			if int(c.stray[j]) < persist {
				c.kgs[k], c.gids[k], c.mw[k], c.stray[k] = kg, c.gids[j], c.mw[j], c.stray[j]
				if c.seam {
					c.side[k] = c.side[j]
					c.sideW[c.side[k]] += c.mw[k]
				}
				c.w += c.mw[k]
				k++
				continue
			}
			s := &cohort{id: gen.newID(), kgs: []control.KeyGroup{kg}, gids: []accessgraph.NodeID{c.gids[j]},
				mw: []float64{c.mw[j]}, w: c.mw[j], version: 1, touched: true, resetAt: gen.tick}
			switch gid := c.gids[j]; {
			case gid >= 0 && slices.Contains(gen.misNow, gid):
				// Neither refinement nor its merges are held back (see
				// Misplaced members).
				gen.ev.stats.Misplaced++
			case gid >= 0 && gen.sigIn[gid>>6]&(1<<(gid&63)) != 0:
				gen.ev.stats.Moved++
				c.movedOut++
				gen.movedAt, s.movedAt = gen.tick, gen.tick
			}
			gen.adopt(s)
			ev.Into = append(ev.Into, s.id)
			gen.ev.stats.Detached++
		}
		c.kgs, c.gids, c.mw, c.stray = c.kgs[:k], c.gids[:k], c.mw[:k], c.stray[:k]
		if c.seam {
			c.side = c.side[:k]
			if c.sideW[0] == 0 || c.sideW[1] == 0 {
				c.seam, c.side = false, nil
			}
		}
		c.version++
		c.touched = true
		c.resetAt = gen.tick
		gen.ev.detached = append(gen.ev.detached, ev)
	}
	if moved := gen.ev.stats.Moved - movedBefore; moved > 0 && float64(moved) >= massMove*float64(tracked) {
		gen.massMovedAt = gen.tick
	}
}

// Moved co-access. The decayed graph keeps a drifted workload's old
// co-access for ~15 ticks (λ = 0.95) and its significance for ~60, so a
// member whose co-access moved elsewhere would stay in its old cohort that
// long. The graph's fast edge weights (accessgraph.Edge.Fast, λf = 0.5,
// scaled by FastScale to the decayed units) show the move within 2–3
// ticks: a member has moved when its fast edge weight inside its cohort
// fell below movedLow of its decayed one and its share of fast edge
// weight inside the cohort below movedHigh of its decayed share (its
// co-access left the cohort, not just cooled), while its fast edge weight
// in total is still at least movedActive of its decayed one (it is still
// co-accessed) and its fast edge weight outside the cohort at least
// movedGrow times its decayed one (the co-access went elsewhere). Members
// whose decayed edge weight is below movedMinWeight·MinWeight (a few
// sampled transactions' worth) are not judged: a few windows of their
// samples are noise. Members are judged so only in a cohort whose fast
// internal weight fell below movedCohort of its decayed one (the cohort's
// co-access collapsed as a whole, as after a remap; a cohort's aggregate
// is steady under sampling noise, a light member's few edges are not).
// It then counts as stray (detached after
// PersistWindows such windows). It stays (the streak resets) when the
// inside rate is at least movedHigh or the share at least movedShareKeep
// of the decayed ones; in between its streak is held — a band against
// sampling noise (TPC-C's members keep their rates within a few tens of
// percent from one window to the next).
const (
	movedLow       = 0.3
	movedHigh      = 0.5
	movedShareKeep = 0.7
	movedActive    = 0.25
	movedGrow      = 1.5
	movedMinWeight = 64
	movedCohort    = 0.5
)

// insideFaded reports that member gid's fast edge weight inside its
// cohort fell below movedHigh of its decayed one: it is not clearly still
// co-accessed there, whether or not its new co-access has reached the
// graph yet.
func (gen *Generator) insideFaded(gid accessgraph.NodeID) bool {
	n := &gen.node[gid]
	return n.sIn > 0 && n.fIn*gen.fastK < movedHigh*n.sIn
}

// massMove: a Step that detaches at least this share of the tracked key
// groups for moved co-access is a drift of the workload's layout (see
// Misplaced members).
const massMove = 0.05

// dissolveShare: when at least this share of a collapsed cohort's members
// is on its way out for moved co-access — detached since the collapse
// began (cohort.movedOut) or stray this Step — the members whose co-access
// has not clearly stayed leave with them: those judged moved or unsure,
// and those whose fast weight inside fell below movedHigh of the decayed
// one (insideFaded), whether or not their new co-access has reached the
// graph. After a remap the members left behind — of different new groups,
// held together by the decayed graph — would otherwise merge as one block
// into one of their new groups, and the misplaced-member rule then takes
// them out one by one over tens of ticks. Counting the members that left
// in earlier Steps matters: a cohort often loses its members over three
// or four Steps (a few each), not half in one, and by then the
// decayed weight outside has caught up with the fast one, so the members
// still inside are no longer judged moved (in the full-size tenant drift
// of docs/sim.md §3 one such cohort kept strays of four tenants for
// fifteen ticks).
const dissolveShare = 0.5

// mergeCurrent: a merge of a cohort holding key groups detached for moved
// co-access (justMoved) needs the pair's fast cross weight (in the decayed
// weights' units) to be at least this share of its decayed cross weight —
// the co-access it merges on still happens. After a drift the old partners
// of a detached member fail it within ~2 ticks, so they do not merge back
// while the decayed graph still remembers them.
const mergeCurrent = 0.5

// refineHold: refinement reads the decayed graph, which lags a drift; it
// waits this many ticks after a member was detached for moved co-access
// (the decayed graph then weighs the new co-access ~4 times the old), so
// that Louvain does not re-form the old cohorts.
const refineHold = 30

// justMoved reports whether c holds a key group detached for moved
// co-access in the last refineHold ticks.
func (gen *Generator) justMoved(c *cohort) bool {
	return c.movedAt != 0 && gen.tick-c.movedAt < refineHold
}

type moveVerdict uint8

const (
	stayed moveVerdict = iota
	unsure
	moved
)

// coAccessMoved judges member gid's recent co-access (see movedLow).
func (gen *Generator) coAccessMoved(gid accessgraph.NodeID) moveVerdict {
	n := &gen.node[gid]
	sIn, sTot, fIn, fTot := n.sIn, n.sTot, n.fIn, n.fTot
	fIn, fTot = fIn*gen.fastK, fTot*gen.fastK
	if !(sIn > 0) || !(fTot >= movedActive*sTot) || sTot < movedMinWeight*gen.cfg.MinWeight {
		return stayed
	}
	// The co-access must have arrived elsewhere: the fast weight outside
	// the cohort well above the decayed one (it grows after a move; in a
	// steady workload both agree up to sampling noise).
	if fTot-fIn < movedGrow*(sTot-sIn) {
		return stayed
	}
	// rate: fIn/sIn; share: (fIn/fTot)/(sIn/sTot).
	rate, share := fIn, fIn*sTot
	switch {
	case rate < movedLow*sIn && share < movedHigh*sIn*fTot:
		return moved
	case rate < movedHigh*sIn && share < movedShareKeep*sIn*fTot:
		return unsure
	}
	return stayed
}

// evalMerges updates the merge streaks and collects the pairs whose merge
// condition held for PersistWindows windows.
func (gen *Generator) evalMerges(g *accessgraph.Graph) {
	cfg := &gen.cfg
	clear(gen.newStr)
	gen.cands = gen.cands[:0]
	// best[i]: cohort i's heaviest significant connection to one other
	// cohort (complete for small cohorts, whose every pair is tabled).
	small := cfg.MinCohortSize
	best := resizeF(gen.best, len(gen.cohorts))
	clear(best)
	fk := gen.fastK
	stale := func(a, b int32, cross, fast float64) bool {
		return fast*fk < mergeCurrent*cross && (gen.justMoved(gen.cohorts[a]) || gen.justMoved(gen.cohorts[b]))
	}
	gen.pairs.each(func(a, b int32, cross, fast float64) {
		if stale(a, b, cross, fast) {
			return
		}
		best[a] = max(best[a], cross)
		best[b] = max(best[b], cross)
	})
	gen.best = best
	gen.pairs.each(func(a, b int32, cross, fast float64) {
		ca, cb := gen.cohorts[a], gen.cohorts[b]
		if len(ca.kgs)+len(cb.kgs) > cfg.MaxCohortSize || stale(a, b, cross, fast) {
			return
		}
		ia, ib := ca.intra+cfg.SelfWeight*ca.w, cb.intra+cfg.SelfWeight*cb.w
		m := cross / math.Min(ia, ib)
		if !(m >= cfg.ThetaMergeHigh) {
			return
		}
		// A small cohort joins only a partner it is about as attached to
		// as to its best one: a key group whose own group is full stays
		// apart rather than join a cohort it only shares stray
		// transactions with, unless both run on the same CN.
		// Not for key groups whose co-access just moved: their homes are
		// those of their old cohorts, and when a remap frees hundreds of
		// them at once, same-home pairs joined only by a few sampled
		// cross-tenant transactions chained whole new groups into one.
		if (len(ca.kgs) <= small && cross < bestPartnerShare*best[a]) || (len(cb.kgs) <= small && cross < bestPartnerShare*best[b]) {
			if gen.justMoved(ca) || gen.justMoved(cb) || !gen.sameHome(g, ca, cb) {
				return
			}
		}
		gen.ev.stats.MergeCandidates++
		key := mkPair(ca.id, cb.id)
		s := gen.prevStreak(ca, cb) + 1
		gen.newStr[key] = s
		if s < cfg.PersistWindows {
			return
		}
		if gen.siblings[key] && cross/(ia+ib+cross) < cfg.ThetaSplitHigh {
			return
		}
		gen.cands = append(gen.cands, mergeCand{a, b, m})
	})
	gen.streaks, gen.newStr = gen.newStr, gen.streaks
}

// keepSignificance: a member is detached only when it has no edge inside
// its cohort of keepSignificance·σ of the lighter endpoint's heaviest —
// half the significance a merge needs, so that sampling noise on a light
// key group's few edges does not merge and detach it in turn.
const keepSignificance = 0.5

// bestPartnerShare: a small cohort (≤ MinCohortSize key groups) merges
// only with a partner that carries at least this share of its heaviest
// connection to any cohort.
const bestPartnerShare = 0.5

// homeShare: a cohort whose transactions run on one CN at least this
// often has that CN as its clear home.
const homeShare = 0.5

// homeEvery: a cohort's clear home is recomputed when its membership
// changed or after this many ticks (home distributions move slowly: they
// are decayed like the graph).
const homeEvery = 8

// home returns c's clear home CN (see homeShare), or −1, from the graph's
// home distributions (cached, see homeEvery).
func (gen *Generator) home(g *accessgraph.Graph, c *cohort) int {
	if c.homeTick != 0 && c.homeVer == c.version && gen.tick-c.homeTick < homeEvery {
		return c.home
	}
	c.homeTick, c.homeVer, c.home = gen.tick, c.version, -1
	acc := gen.homeAcc[:0]
	total := 0.0
	for j, kg := range c.kgs {
		gen.homeBuf = g.HomeDist(kg, gen.homeBuf[:0])
		for _, h := range gen.homeBuf {
			for len(acc) <= h.Node {
				acc = append(acc, 0)
			}
			acc[h.Node] += c.mw[j] * h.P
		}
		total += c.mw[j]
	}
	best := -1
	for i, x := range acc {
		if best < 0 || x > acc[best] {
			best = i
		}
	}
	if best >= 0 && total > 0 && acc[best] >= homeShare*total {
		c.home = best
	}
	clear(acc)
	gen.homeAcc = acc
	return c.home
}

// sameHome reports that a and b have the same clear home CN: a small
// cohort may then merge with a partner other than its best one, since the
// merged cohort's writers still run on one CN.
func (gen *Generator) sameHome(g *accessgraph.Graph, a, b *cohort) bool {
	ha := gen.home(g, a)
	return ha >= 0 && ha == gen.home(g, b)
}

// strayShare: in a refinement, a key group whose proposed cohort holds
// less than this share of its heaviest connection to a cohort outside the
// region stays a singleton, unless it has the proposed cohort's clear home
// (RefineRequest.Out, RefineRequest.Home).
const strayShare = 0.25

// prevStreak is the streak of (a, b) up to the previous window. Streaks
// are keyed by the ids the cohorts had when evaluated; a cohort merged in
// the previous Step inherits the largest streak of its parents, and one
// produced by a split, separation or refinement starts from zero.
func (gen *Generator) prevStreak(a, b *cohort) int {
	last := gen.tick - 1
	if a.resetAt == last || b.resetAt == last {
		return 0
	}
	ids := func(c *cohort) []control.CohortID {
		if c.mergedAt == last && len(c.parents) > 0 {
			return c.parents
		}
		return []control.CohortID{c.id}
	}
	best := 0
	for _, x := range ids(a) {
		for _, y := range ids(b) {
			best = max(best, gen.streaks[mkPair(x, y)])
		}
	}
	return best
}

// merge replaces a and b by their union, whose seam records the two sides.
func (gen *Generator) merge(a, b *cohort) {
	n := len(a.kgs) + len(b.kgs)
	m := &cohort{kgs: make([]control.KeyGroup, 0, n), gids: make([]accessgraph.NodeID, 0, n),
		mw: make([]float64, 0, n), side: make([]uint8, 0, n), seam: true,
		w: a.w + b.w, sideW: [2]float64{a.w, b.w}, touched: true, merged: true, movedAt: max(a.movedAt, b.movedAt)}
	i, j := 0, 0
	for i < len(a.kgs) || j < len(b.kgs) {
		if j == len(b.kgs) || (i < len(a.kgs) && a.kgs[i] < b.kgs[j]) {
			m.kgs, m.gids, m.mw, m.side = append(m.kgs, a.kgs[i]), append(m.gids, a.gids[i]), append(m.mw, a.mw[i]), append(m.side, 0)
			i++
		} else {
			m.kgs, m.gids, m.mw, m.side = append(m.kgs, b.kgs[j]), append(m.gids, b.gids[j]), append(m.mw, b.mw[j]), append(m.side, 1)
			j++
		}
	}
	m.id, m.version, _ = gen.inheritID(m.kgs, []*cohort{a, b}, nil)
	a.dead, b.dead = true, true
	a.touched, b.touched = true, true
	a.into, b.into = m, m
	idsNow := func(c *cohort) []control.CohortID {
		if c.mergedAt == gen.tick {
			return c.parents
		}
		return []control.CohortID{c.id}
	}
	m.parents = append(slices.Clone(idsNow(a)), idsNow(b)...)
	m.mergedAt = gen.tick
	gen.ev.merged = append(gen.ev.merged, Merge{Into: m.id, From: sortedIDs(a.id, b.id)})
	gen.ev.stats.Merges++
	gen.adopt(m)
}

// split replaces c by its members with inA set and the others.
func (gen *Generator) split(c *cohort, inA []bool, separation bool) {
	parts := [2]*cohort{{touched: true, movedAt: c.movedAt}, {touched: true, movedAt: c.movedAt}}
	for i, kg := range c.kgs {
		p := parts[1]
		if inA[i] {
			p = parts[0]
		}
		p.kgs = append(p.kgs, kg)
		p.gids = append(p.gids, c.gids[i])
		p.mw = append(p.mw, c.mw[i])
		p.w += c.mw[i]
	}
	c.dead, c.touched = true, true
	used := map[*cohort]bool{}
	order := parts
	if len(parts[1].kgs) > len(parts[0].kgs) || (len(parts[1].kgs) == len(parts[0].kgs) && parts[1].w > parts[0].w) {
		order[0], order[1] = parts[1], parts[0]
	}
	for _, p := range order {
		p.id, p.version, _ = gen.inheritID(p.kgs, []*cohort{c}, used)
		p.resetAt = gen.tick
	}
	ids := sortedIDs(parts[0].id, parts[1].id)
	gen.ev.split = append(gen.ev.split, Split{From: c.id, Into: ids, Separation: separation})
	if separation {
		gen.ev.stats.Separations++
	} else {
		gen.ev.stats.Splits++
		gen.siblings[mkPair(ids[0], ids[1])] = true
	}
	gen.adopt(parts[0])
	gen.adopt(parts[1])
}

// inheritID returns the id for a new cohort with key groups kgs: the id of
// the parent (not in used) it overlaps most — highest Jaccard index, then
// heavier parent, then smaller id — when that Jaccard index reaches
// JaccardKeep, else a new id; and its version (the parent's + 1, or 1).
// The parent chosen is added to used (when used is not nil).
func (gen *Generator) inheritID(kgs []control.KeyGroup, parents []*cohort, used map[*cohort]bool) (control.CohortID, uint64, *cohort) {
	var best *cohort
	bestJ := -1.0
	for _, p := range parents {
		if used[p] {
			continue
		}
		inter := intersectCount(kgs, p.kgs)
		j := float64(inter) / float64(len(kgs)+len(p.kgs)-inter)
		if best == nil || j > bestJ || (j == bestJ && (p.w > best.w || (p.w == best.w && p.id < best.id))) {
			best, bestJ = p, j
		}
	}
	if best != nil && bestJ >= gen.cfg.JaccardKeep {
		if used != nil {
			used[best] = true
		}
		return best.id, best.version + 1, best
	}
	return gen.newID(), 1, nil
}

// adopt registers a new cohort object (replacing a dead one with its id).
func (gen *Generator) adopt(c *cohort) {
	gen.byID[c.id] = c
	gen.cohorts = append(gen.cohorts, c)
}

// finish drops dead cohorts, restores id order and forgets stale sibling
// pairs.
func (gen *Generator) finish() {
	// gen.cohorts[:gen.sorted] is ascending by id; objects created by this
	// Step's merges, splits and refinements were appended after it.
	var head, tail []*cohort
	for i, c := range gen.cohorts {
		if c.dead {
			if gen.byID[c.id] == c {
				delete(gen.byID, c.id)
			}
			continue
		}
		if i < gen.sorted {
			head = append(head, c)
		} else {
			tail = append(tail, c)
		}
	}
	byID := func(x, y *cohort) int { return cmp.Compare(x.id, y.id) }
	slices.SortFunc(tail, byID)
	out := gen.cohorts[:0]
	i, j := 0, 0
	for i < len(head) || j < len(tail) {
		if j == len(tail) || (i < len(head) && head[i].id < tail[j].id) {
			out = append(out, head[i])
			i++
		} else {
			out = append(out, tail[j])
			j++
		}
	}
	clear(gen.cohorts[len(out):cap(gen.cohorts)])
	gen.cohorts = out
	for k := range gen.siblings {
		if gen.byID[k.a] == nil || gen.byID[k.b] == nil {
			delete(gen.siblings, k)
		}
	}
}

// publish ranks the cohorts, fills out and applies the sticky cache.
func (gen *Generator) publish(out *Output) {
	cfg := &gen.cfg
	ev := &gen.ev
	chosen := gen.cohorts
	if len(chosen) > cfg.MaxCohorts {
		// The MaxCohorts heaviest by biased score (ties: smaller id), in O(n).
		score := resizeF(gen.scores, len(gen.cohorts))
		for i, c := range gen.cohorts {
			score[i] = c.w
			if _, ok := gen.pubIDs[c.id]; ok {
				score[i] *= 1 + cfg.PublishBias
			}
		}
		ws := append(gen.self[:0], score...)
		threshold := accessgraph.KthLargest(ws, cfg.MaxCohorts)
		gen.self = ws
		above := 0
		for _, x := range score {
			if x > threshold {
				above++
			}
		}
		ties := cfg.MaxCohorts - above
		chosen = gen.ranked[:0]
		for i, c := range gen.cohorts { // ascending id: ties go to smaller ids
			if score[i] > threshold || (score[i] == threshold && ties > 0) {
				if score[i] == threshold {
					ties--
				}
				chosen = append(chosen, c)
			}
		}
		gen.ranked, gen.scores = chosen, score
	}
	out.Merged, out.Split, out.Refined, out.Detached = ev.merged, ev.split, ev.refined, ev.detached
	st := ev.stats
	st.Cohorts = len(gen.cohorts)
	for _, c := range gen.cohorts {
		st.TrackedKGs += len(c.kgs)
		if len(c.kgs) == 1 {
			st.Singletons++
		}
	}
	if len(chosen) == 0 && len(gen.pub) > 0 && gen.sticky < cfg.StickyMaxTicks {
		gen.sticky++
		out.Sticky = true
		out.Cohorts = gen.pub
		gen.fillSizes(&st, gen.pub)
		out.Stats = st
		return
	}
	gen.sticky = 0
	pub := make([]control.Cohort, len(chosen))
	next := make(map[control.CohortID]uint64, len(chosen))
	for i, c := range chosen {
		pub[i] = control.Cohort{ID: c.id, KeyGroups: c.snapshot()}
		next[c.id] = c.version
		if v, ok := gen.pubIDs[c.id]; !ok {
			out.New = append(out.New, c.id)
		} else if v != c.version {
			out.Changed = append(out.Changed, c.id)
		}
	}
	for id := range gen.pubIDs {
		if _, ok := next[id]; !ok {
			out.Retired = append(out.Retired, id)
		}
	}
	slices.Sort(out.Retired)
	gen.pub, gen.pubIDs = pub, next
	out.Cohorts = pub
	gen.fillSizes(&st, pub)
	out.Stats = st
}

func (gen *Generator) fillSizes(st *Stats, pub []control.Cohort) {
	st.Published = len(pub)
	for i, c := range pub {
		n := len(c.KeyGroups)
		st.PublishedKGs += n
		if i == 0 || n < st.MinSize {
			st.MinSize = n
		}
		st.MaxSize = max(st.MaxSize, n)
	}
	if len(pub) > 0 {
		st.MeanSize = float64(st.PublishedKGs) / float64(len(pub))
	}
}

func sortedIDs(ids ...control.CohortID) []control.CohortID {
	slices.Sort(ids)
	return ids
}

func intersectCount(a, b []control.KeyGroup) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}
