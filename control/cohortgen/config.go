package cohortgen

import (
	"errors"
	"fmt"
	"math"
)

// Config configures a Generator. Start from DefaultConfig. Weights are in
// the accessgraph.Graph's units: decayed sums of estimated transaction
// counts (a key group written x times per planner tick settles at
// W ≈ x/(1−λ) = 20x with λ = 0.95).
type Config struct {
	// SelfWeight κ defines a cohort's intra weight: intra(C) = Σ edge
	// weights inside C + κ·Σ_{v∈C} W(v). Without the self term a singleton
	// has intra 0 and would merge with anything it ever co-occurred with;
	// with it, two singletons merge when the co-access probability
	// P(v|u) = w(u,v)/W(u) reaches ThetaMergeHigh·κ. κ must sit below the
	// co-access probability of key groups that belong together — about
	// (k−1)/(s−1) for transactions touching k of a group of s key groups
	// (TPC-C: 12 of a warehouse's 576 → 0.02, more within a district) —
	// and above chance co-access (TPC-C's remote warehouses: ~1e-4).
	// Default 0.02.
	SelfWeight float64
	// ThetaMergeLow and ThetaMergeHigh are the merge hysteresis band on the
	// merge ratio m(A,B) = cross(A,B) / min(intra(A), intra(B)). Two cohorts
	// merge only after m ≥ ThetaMergeHigh for PersistWindows consecutive
	// windows; a cohort born of a merge separates back into its two sides
	// only after the ratio across that seam stays below ThetaMergeLow for
	// PersistWindows windows, and a split is refused when the two halves
	// would have m ≥ ThetaMergeLow. Between the two nothing happens, so noise
	// inside the band cannot make a pair flap. Defaults 0.55 / 0.65 (seed
	// 002 §3.5: a band of ~2σ of the per-window noise).
	ThetaMergeLow, ThetaMergeHigh float64
	// ThetaSplitLow and ThetaSplitHigh are the split hysteresis band on the
	// split ratio s = cut(A,B) / intra(A∪B) of the best cut the heuristic
	// finds. A cohort splits only after s ≤ ThetaSplitLow for PersistWindows
	// consecutive windows; the two halves of a split rejoin only when their
	// ratio across the old cut rises to s ≥ ThetaSplitHigh (and the merge
	// rule holds). Defaults 0.15 / 0.25 (seed 002 §3.5).
	ThetaSplitLow, ThetaSplitHigh float64
	// PersistWindows is N: how many consecutive windows (Step calls) a merge
	// or split condition must hold. Default 2 (seed 002 §3.2).
	PersistWindows int
	// MaxCohortSize caps a cohort's key groups: merges that would exceed it
	// are not made, refinement splits larger communities. Default 64
	// (seed 001 §4.2: at 128 or 512 the cohorts collapsed into one
	// super-cohort; 64 was the sweet spot).
	MaxCohortSize int
	// MinCohortSize is the smallest side a split may leave. Default 5
	// (seed 002 §3.3).
	MinCohortSize int
	// MinWeight is the write weight W(v) from which a key group joins the
	// cohorts (as a singleton cohort of its own until it merges). Colder key
	// groups stay on the MN CAS fallback path. Default 1.0 (a key group
	// written about once per 20 ticks).
	MinWeight float64
	// DropFactor: a member leaves its cohort when its W(v) falls below
	// DropFactor·MinWeight (hysteresis against flapping at MinWeight). A
	// cohort left empty retires. Default 0.5.
	DropFactor float64
	// MaxCohorts caps the published cohorts (Output.Cohorts): the heaviest
	// by W(c) = Σ W(v), with PublishBias favouring those published last
	// tick. Default 1024 (seed 001 §4.2: manifest < 200 KB).
	MaxCohorts int
	// PublishBias multiplies the weight of a cohort published last tick by
	// 1 + PublishBias when ranking for MaxCohorts, so cohorts near the cut
	// do not enter and leave the published set every tick. Default 0.2 (the
	// sticky bias ε of seed 002 §4.1).
	PublishBias float64
	// MaxTrackedKGs caps the key groups the generator tracks in cohorts
	// (published or not): when more are hot, only the hottest join. At
	// most MaxCohorts·MaxCohortSize key groups can be published, so the
	// rest would only cost time. Members are not evicted for hotter
	// newcomers: places free up as members cool (DropFactor). Within 10% of
	// the cap, admission scans the graph every 4th tick only. Default
	// 131,072 (twice 1024·64).
	MaxTrackedKGs int
	// SplitChecksPerTick bounds the cohorts whose best cut is computed per
	// Step (about 10 µs each at 64 key groups): cohorts whose split
	// condition held last window are always checked, the others
	// round-robin. Every cohort is checked at least every
	// ⌈cohorts/SplitChecksPerTick⌉ ticks. Default 32 (~0.6 ms; 9,216 key
	// groups in ~150–200 cohorts are all checked every ~6 ticks).
	SplitChecksPerTick int
	// RefineEvery is the refinement period in ticks: every RefineEvery-th
	// Step, one region of adjacent cohorts (RefineMaxKGs key groups) is
	// re-clustered with Louvain and the result adopted if it keeps more
	// weight inside cohorts. 0 disables refinement. Default 10.
	RefineEvery int
	// RefineInline makes Step run a due refinement itself. Set it to false
	// to keep Step within its budget and run Refine on another goroutine
	// (PrepareRefine → Refine → OfferRefinement); Output.RefineDue says when.
	// Default true (deterministic, what the simulator and tests use).
	RefineInline bool
	// RefineMaxKGs bounds a refinement region's key groups. gonum's Louvain
	// costs ~10–15 µs per edge on this machine, so the region is small.
	// Default 256.
	RefineMaxKGs int
	// RefineMaxEdges bounds the region's edges handed to Louvain (the
	// heaviest are kept). Default 2,048 (~20–30 ms of Louvain).
	RefineMaxEdges int
	// RefineMinGain is the minimum gain, as a fraction of the region's edge
	// weight, in weight kept inside cohorts for a refinement to be adopted.
	// Default 0.02.
	RefineMinGain float64
	// RefineResolution is Louvain's resolution γ (1 = classic modularity).
	// Default 1.
	RefineResolution float64
	// Seed seeds Louvain's random order (with the tick), keeping refinement
	// deterministic. Default 1.
	Seed uint64
	// StickyMaxTicks: when a Step would publish no cohort at all while the
	// last published set was not empty (the graph went cold or empty, e.g.
	// heartbeats stopped), the last set is published again for up to
	// StickyMaxTicks consecutive ticks (seed 001 §4.3's sticky cache).
	// Default 50 (5 s at 100 ms ticks).
	StickyMaxTicks int
	// Significance σ decides which edges count as co-access evidence: an
	// edge (u, v) is significant when w(u, v) ≥ σ · min(M(u), M(v)), M(x)
	// being x's heaviest edge. Merges count only
	// significant cross edges, refinement clusters over significant edges
	// only and cuts its communities into their connected components, and a
	// member with no significant edge inside its cohort for PersistWindows
	// windows is detached into a singleton. So no cohort ties together key
	// groups that only chance or a rare transaction (TPC-C's remote
	// warehouses) co-accesses: such a cohort lives on one CN and every other
	// CN writing its stray members pays an owner RPC for them. Default 0.05.
	// Why: within a TPC-C warehouse every key group's edges are within a
	// factor 10 of its heaviest (a STOCK bucket: ~0.016–0.022 of the
	// warehouse's NewOrders to each other bucket, district and order key
	// group), while edges that cross warehouses weigh ≤ 0.012 of the
	// lighter endpoint's heaviest (15% remote Payments spread over 15
	// warehouses; 1% remote order lines: ~0.005) — σ = 0.05 sits a factor
	// ~3–4 from either side.
	Significance float64
	// JaccardKeep is the overlap |A∩B|/|A∪B| from which a cohort produced
	// by a merge, split or refinement takes the id of an old cohort (the
	// heaviest overlap first). Default 0.5: a merge keeps the id of its
	// larger parent, a split gives it to its larger part.
	JaccardKeep float64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		SelfWeight:         0.02,
		ThetaMergeLow:      0.55,
		ThetaMergeHigh:     0.65,
		ThetaSplitLow:      0.15,
		ThetaSplitHigh:     0.25,
		PersistWindows:     2,
		MaxCohortSize:      64,
		MinCohortSize:      5,
		MinWeight:          1.0,
		DropFactor:         0.5,
		MaxCohorts:         1024,
		PublishBias:        0.2,
		MaxTrackedKGs:      1 << 17,
		SplitChecksPerTick: 32,
		RefineEvery:        10,
		RefineInline:       true,
		RefineMaxKGs:       256,
		RefineMaxEdges:     2048,
		RefineMinGain:      0.02,
		RefineResolution:   1,
		Seed:               1,
		StickyMaxTicks:     50,
		JaccardKeep:        0.5,
		Significance:       0.05,
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !(c.SelfWeight > 0) || !finite(c.SelfWeight) {
		bad("SelfWeight %v must be finite and > 0", c.SelfWeight)
	}
	if !(c.ThetaMergeLow > 0 && c.ThetaMergeLow <= c.ThetaMergeHigh && finite(c.ThetaMergeHigh)) {
		bad("ThetaMergeLow %v / ThetaMergeHigh %v must satisfy 0 < low ≤ high < ∞", c.ThetaMergeLow, c.ThetaMergeHigh)
	}
	if !(c.ThetaSplitLow >= 0 && c.ThetaSplitLow <= c.ThetaSplitHigh && c.ThetaSplitHigh <= 1) {
		bad("ThetaSplitLow %v / ThetaSplitHigh %v must satisfy 0 ≤ low ≤ high ≤ 1", c.ThetaSplitLow, c.ThetaSplitHigh)
	}
	if c.PersistWindows < 1 {
		bad("PersistWindows %d must be ≥ 1", c.PersistWindows)
	}
	if c.MaxCohortSize < 1 || c.MaxCohortSize > 65535 {
		bad("MaxCohortSize %d must be in [1, 65535] (the manifest stores num_kgs in 2 bytes)", c.MaxCohortSize)
	}
	if c.MinCohortSize < 1 {
		bad("MinCohortSize %d must be ≥ 1", c.MinCohortSize)
	}
	if !(c.MinWeight > 0) || !finite(c.MinWeight) {
		bad("MinWeight %v must be finite and > 0", c.MinWeight)
	}
	if !(c.DropFactor > 0 && c.DropFactor <= 1) {
		bad("DropFactor %v must be in (0, 1]", c.DropFactor)
	}
	if c.MaxCohorts < 1 {
		bad("MaxCohorts %d must be ≥ 1", c.MaxCohorts)
	}
	if !(c.PublishBias >= 0) || !finite(c.PublishBias) {
		bad("PublishBias %v must be finite and ≥ 0", c.PublishBias)
	}
	if c.MaxTrackedKGs < 1 || c.MaxTrackedKGs > 1<<24 {
		bad("MaxTrackedKGs %d must be in [1, 2^24]", c.MaxTrackedKGs)
	}
	if c.SplitChecksPerTick < 0 {
		bad("SplitChecksPerTick %d must not be negative", c.SplitChecksPerTick)
	}
	if c.RefineEvery < 0 {
		bad("RefineEvery %d must not be negative", c.RefineEvery)
	}
	if c.RefineMaxKGs < 2 {
		bad("RefineMaxKGs %d must be ≥ 2", c.RefineMaxKGs)
	}
	if c.RefineMaxEdges < 1 {
		bad("RefineMaxEdges %d must be ≥ 1", c.RefineMaxEdges)
	}
	if !(c.RefineMinGain >= 0) || !finite(c.RefineMinGain) {
		bad("RefineMinGain %v must be finite and ≥ 0", c.RefineMinGain)
	}
	if !(c.RefineResolution > 0) || !finite(c.RefineResolution) {
		bad("RefineResolution %v must be finite and > 0", c.RefineResolution)
	}
	if c.StickyMaxTicks < 0 {
		bad("StickyMaxTicks %d must not be negative", c.StickyMaxTicks)
	}
	if !(c.Significance >= 0 && c.Significance < 1) {
		bad("Significance %v must be in [0, 1)", c.Significance)
	}
	if !(c.JaccardKeep > 0 && c.JaccardKeep <= 1) {
		bad("JaccardKeep %v must be in (0, 1]", c.JaccardKeep)
	}
	if len(errs) > 0 {
		return fmt.Errorf("cohortgen: invalid config: %w", errors.Join(errs...))
	}
	return nil
}
