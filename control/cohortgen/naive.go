package cohortgen

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
)

// NaiveMaxCohortSize is the cohort size cap of the naive generator: the
// design value of seed 002 §3.2 (max_cohort_size ~500 key groups), at which
// the tutorial's sweep saw the cohorts merge into one super-cohort (seed 001
// §4.2: 64 was chosen because 128 and 512 collapsed).
const NaiveMaxCohortSize = 512

// NaiveThetaMerge is the naive generator's single merge threshold θ_merge
// (seed 002 §3.2: 0.6; the hysteresis band 0.55/0.65 of §3.5 is a later fix).
const NaiveThetaMerge = 0.6

// NaiveConfig returns the configuration of the naive generator (NewNaive):
// DefaultConfig with MaxCohortSize = NaiveMaxCohortSize and a single merge
// threshold ThetaMergeLow = ThetaMergeHigh = NaiveThetaMerge. The naive
// generator reads only SelfWeight, ThetaMergeHigh, PersistWindows,
// MaxCohortSize, MinWeight, DropFactor, MaxCohorts and StickyMaxTicks.
func NaiveConfig() Config {
	c := DefaultConfig()
	c.MaxCohortSize = NaiveMaxCohortSize
	c.ThetaMergeLow, c.ThetaMergeHigh = NaiveThetaMerge, NaiveThetaMerge
	return c
}

// Naive is the cohort generator as the tutorial's v25 router ran it (SPEC §5
// "Lever B and collapse"; seed 002 §3.2, seed 001 §4.2–4.3): the simulator's
// --lever-b naive uses it, with the naive planner (ownership.NaiveConfig) and
// primary-key-group routing (router.RouteNaive), to reproduce the collapse
// on demand. It is kept apart from Generator on purpose: the guards
// Generator gains against the collapse must not leak into the model of the
// system that collapsed.
//
// Each Step:
//
//   - key groups with W(v) ≥ MinWeight join as singleton cohorts (members
//     below DropFactor·MinWeight leave; an emptied cohort retires);
//   - two cohorts A, B merge when cross(A,B) ≥ θ_merge · min(intra(A),
//     intra(B)) has held for PersistWindows consecutive windows and
//     |A| + |B| ≤ MaxCohortSize, with intra(C) = Σ edge weights inside C +
//     SelfWeight · Σ_{v∈C} W(v) and edge weight ww + AlphaWR·wr, as in
//     Generator (without the self term a singleton would merge with
//     anything it ever co-occurred with, at any routing); every qualifying
//     pair of a Step merges (v25 emitted all merge deltas at once), so
//     chains merge transitively, in descending ratio, within the cap;
//   - the heaviest MaxCohorts cohorts (by W(c) = Σ W(v)) are published; a
//     Step that would publish nothing publishes the last set again for up
//     to StickyMaxTicks ticks (the sticky cache).
//
// What it lacks, compared with Generator, is what the collapse taught: the
// size cap of 64, the merge hysteresis band, splits (v25 split only a cohort
// whose owner's hit rate fell below 0.7, which a cohort whose transactions
// are routed to its owner never does), periodic Louvain refinement, the
// publish bias and any test of whether an edge is evidence or chance. Merges
// of chance co-access — strongest while the EWMA has seen few windows, and
// whenever few transactions are sampled — then build cohorts of hundreds of
// key groups that no sparse cut separates. Nothing here decides an outcome.
type Naive struct {
	cfg     Config
	tick    uint64
	nextID  control.CohortID
	of      map[control.KeyGroup]*naiveCohort
	cohorts []*naiveCohort
	streak  map[[2]control.CohortID]int
	last    []control.Cohort
	sticky  int
	kgs     []control.KeyGroup
}

type naiveCohort struct {
	id    control.CohortID
	kgs   []control.KeyGroup
	w     float64 // Σ W(v)
	intra float64
	dead  bool
	into  *naiveCohort // the cohort it merged into this Step
}

// NewNaive returns a naive generator for a validated Config (start from
// NaiveConfig).
func NewNaive(cfg Config) (*Naive, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Naive{cfg: cfg, nextID: 1, of: map[control.KeyGroup]*naiveCohort{},
		streak: map[[2]control.CohortID]int{}}, nil
}

// Step runs one planner window over g and returns the published cohorts,
// ascending by id, each with sorted key groups.
func (n *Naive) Step(g *accessgraph.Graph) []control.Cohort {
	n.tick++
	cfg := &n.cfg
	// Membership.
	n.kgs = g.KeyGroups(n.kgs[:0])
	for _, kg := range n.kgs {
		w := g.W(kg)
		if c, ok := n.of[kg]; ok {
			if w < cfg.DropFactor*cfg.MinWeight {
				delete(n.of, kg)
				c.kgs = slices.DeleteFunc(c.kgs, func(x control.KeyGroup) bool { return x == kg })
			}
			continue
		}
		if w >= cfg.MinWeight {
			c := &naiveCohort{id: n.nextID, kgs: []control.KeyGroup{kg}}
			n.nextID++
			n.of[kg] = c
			n.cohorts = append(n.cohorts, c)
		}
	}
	// Members the graph no longer has leave too.
	for _, c := range n.cohorts {
		c.kgs = slices.DeleteFunc(c.kgs, func(kg control.KeyGroup) bool {
			if g.Has(kg) {
				return false
			}
			delete(n.of, kg)
			return true
		})
		c.dead = len(c.kgs) == 0
	}
	n.cohorts = slices.DeleteFunc(n.cohorts, func(c *naiveCohort) bool { return c.dead })
	// Weights.
	for _, c := range n.cohorts {
		c.w = 0
		for _, kg := range c.kgs {
			c.w += g.W(kg)
		}
		c.intra = cfg.SelfWeight * c.w
	}
	alpha := g.Config().AlphaWR
	cross := map[[2]control.CohortID]float64{}
	byID := make(map[control.CohortID]*naiveCohort, len(n.cohorts))
	for _, c := range n.cohorts {
		byID[c.id] = c
	}
	g.ForEachEdge(func(a, b control.KeyGroup, ww, wr float64) {
		ca, cb := n.of[a], n.of[b]
		if ca == nil || cb == nil {
			return
		}
		w := ww + alpha*wr
		if ca == cb {
			ca.intra += w
			return
		}
		k := [2]control.CohortID{min(ca.id, cb.id), max(ca.id, cb.id)}
		cross[k] += w
	})
	// Merge candidates and their streaks.
	type cand struct {
		k     [2]control.CohortID
		ratio float64
	}
	var cands []cand
	streak := make(map[[2]control.CohortID]int, len(n.streak))
	for k, x := range cross {
		a, b := byID[k[0]], byID[k[1]]
		lo := min(a.intra, b.intra)
		if lo <= 0 || x < cfg.ThetaMergeHigh*lo || len(a.kgs)+len(b.kgs) > cfg.MaxCohortSize {
			continue
		}
		s := n.streak[k] + 1
		streak[k] = s
		if s >= cfg.PersistWindows {
			cands = append(cands, cand{k, x / lo})
		}
	}
	n.streak = streak
	slices.SortFunc(cands, func(x, y cand) int {
		if c := cmp.Compare(y.ratio, x.ratio); c != 0 {
			return c
		}
		if c := cmp.Compare(x.k[0], y.k[0]); c != 0 {
			return c
		}
		return cmp.Compare(x.k[1], y.k[1])
	})
	// Every pair that qualifies merges (v25 emitted the merge deltas of all
	// qualifying pairs at once), so chains of pairs merge transitively in
	// one Step, in descending ratio, while the union stays within the cap.
	root := func(c *naiveCohort) *naiveCohort {
		for c.into != nil {
			c = c.into
		}
		return c
	}
	for _, m := range cands {
		a, b := root(byID[m.k[0]]), root(byID[m.k[1]])
		if a == b || len(a.kgs)+len(b.kgs) > cfg.MaxCohortSize {
			continue
		}
		if b.w > a.w || (b.w == a.w && b.id < a.id) {
			a, b = b, a // the heavier keeps its id
		}
		a.kgs = append(a.kgs, b.kgs...)
		for _, kg := range b.kgs {
			n.of[kg] = a
		}
		a.w += b.w
		b.dead, b.into, b.kgs = true, a, nil
		delete(n.streak, m.k)
	}
	for _, c := range n.cohorts {
		c.into = nil
	}
	n.cohorts = slices.DeleteFunc(n.cohorts, func(c *naiveCohort) bool { return c.dead })
	// Publish the heaviest MaxCohorts.
	pub := slices.Clone(n.cohorts)
	slices.SortFunc(pub, func(x, y *naiveCohort) int {
		if c := cmp.Compare(y.w, x.w); c != 0 {
			return c
		}
		return cmp.Compare(x.id, y.id)
	})
	pub = pub[:min(len(pub), cfg.MaxCohorts)]
	slices.SortFunc(pub, func(x, y *naiveCohort) int { return cmp.Compare(x.id, y.id) })
	out := make([]control.Cohort, 0, len(pub))
	for _, c := range pub {
		out = append(out, control.Cohort{ID: c.id, KeyGroups: slices.Sorted(slices.Values(c.kgs))})
	}
	if len(out) == 0 && len(n.last) > 0 && n.sticky < cfg.StickyMaxTicks {
		n.sticky++
		return n.last
	}
	n.sticky = 0
	n.last = out
	return out
}

// String describes the generator's state (for logs).
func (n *Naive) String() string {
	largest := 0
	for _, c := range n.cohorts {
		largest = max(largest, len(c.kgs))
	}
	return fmt.Sprintf("naive tick %d: %d cohorts, %d key groups, largest %d", n.tick, len(n.cohorts), len(n.of), largest)
}
