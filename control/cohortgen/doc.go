// Package cohortgen is AURA's LockCohortGenerator (SPEC §5, seed 002 §3
// and §5, seed 001 §4): once per planner tick it turns the decayed access
// graph (control/accessgraph) into cohorts — sets of key groups owned,
// moved and routed as one — and says what changed.
//
// The package is pure: no goroutines, clocks or I/O. Time is the Step
// call (one per planner tick, after the graph was fed the tick's
// heartbeats and ticked); the same calls on the same graph give the same
// outputs, Louvain refinement included.
//
// # Model
//
// The generator keeps a partition of the hot key groups (W(v) ≥ MinWeight,
// the hottest MaxTrackedKGs) into cohorts. A key group that becomes hot
// joins as a singleton cohort; one whose weight falls below
// DropFactor·MinWeight leaves (a cohort left empty retires). For a cohort
// C, intra(C) = Σ edge weights inside C + κ·Σ W(v) (κ = SelfWeight; the
// self term makes a singleton's intra non-zero, so two key groups merge on
// their co-access probability, not on a single co-occurrence).
//
//   - Significance: an edge (u, v) is co-access evidence only when
//     w(u,v) ≥ σ·min(M(u), M(v)), M(x) being x's heaviest edge
//     (σ = Significance). Chance or rare co-access — TPC-C's remote
//     warehouses — stays below it, so it never ties key groups with
//     different writers into one cohort, which one CN would own while the
//     others paid owner RPCs for it.
//   - Merge (seed 002 §3.2): cohorts A, B merge when
//     m = cross(A,B) / min(intra(A), intra(B)) ≥ ThetaMergeHigh for
//     PersistWindows consecutive windows and |A|+|B| ≤ MaxCohortSize;
//     cross counts significant edges only. A small cohort (≤ MinCohortSize
//     key groups) merges only with a partner that carries half of its
//     heaviest connection to any cohort (a key group whose own group is
//     full stays a singleton, which the planner places where its writers
//     run), or one with the same clear home CN (the graph's home
//     distribution: ≥ 50% of its weight issued there).
//     Candidates merge greedily by m; a cohort merged in a Step may merge
//     again with another qualifying partner in the same Step, so a group
//     whose pairs all qualify forms at once. A merged cohort inherits, for
//     each other cohort, the larger streak of its parents.
//   - Hysteresis of merges: a merged cohort remembers its seam (its two
//     sides). It separates back along the seam only when the ratio across
//     the seam stays below ThetaMergeLow for PersistWindows windows; inside
//     [ThetaMergeLow, ThetaMergeHigh) nothing happens in either direction.
//   - Split (seed 002 §3.3–3.4): a cohort splits when the best cut found has
//     s = cut / intra(C) ≤ ThetaSplitLow for PersistWindows windows, both
//     sides have ≥ MinCohortSize key groups, and the sides' own merge ratio
//     is below ThetaMergeLow (so a split never produces a pair that would
//     qualify to merge back). The two halves are split siblings: they
//     rejoin only when, besides the merge rule, their split ratio reaches
//     ThetaSplitHigh — the split band's upper edge.
//   - Detach: a member with no edge of σ/2 significance inside its cohort
//     (half what a merge needs: a band against sampling noise) for
//     PersistWindows windows leaves as a singleton. No split can take one
//     key group out (both sides need MinCohortSize); this is how a key
//     group whose co-access moved elsewhere gets free.
//   - Moved co-access (a drift): the decayed graph keeps the old
//     co-access heavier for ~14 ticks and significant for ~60, so after a
//     remap the old cohorts would hold that long. The graph's fast edge
//     weights (accessgraph.Edge.Fast, λf = 0.5) show the move within 2–3
//     ticks. In a cohort whose fast internal weight fell below half its
//     decayed one (its co-access collapsed as a whole; an aggregate is
//     steady under sampling noise), a member whose fast weight inside fell
//     below 0.3 of its decayed one, whose fast share inside fell below half
//     its decayed share, and whose fast weight outside grew to 1.5× its
//     decayed one counts as stray (a band up to 0.5/0.7 holds its streak);
//     when half a cohort is leaving, the members that did not clearly stay
//     leave with them. For refineHold (30) ticks such key groups merge only
//     on co-access that still happens (fast cross ≥ half the decayed
//     cross), without the same-home exception, and refinement (Louvain on
//     the decayed graph) waits, so the old cohorts are not re-formed.
//   - Misplaced members: for refineHold ticks after a mass move (a Step
//     detaching ≥ 5% of the tracked key groups for moved co-access), a
//     member whose recent and decayed co-access both go mostly to one other
//     cohort with room counts as stray too: a re-formed cohort can keep a
//     key group of another group by its old edges (misplaced.go).
//   - The cut heuristic: a max-adjacency (Prim-like) ordering of the
//     cohort's induced subgraph from its heaviest key group, and again from
//     the last key group of that order; every prefix is a candidate cut and
//     the one with the smallest cut/min(intra(A), intra(B)) wins (a
//     normalised cut, so tiny loosely attached fringes are not preferred
//     over a real bisection). O(n²) for a cohort of n key groups (~10 µs at
//     64); at most SplitChecksPerTick cohorts per Step, those whose split
//     condition held last window first, the rest round-robin.
//   - Refinement: every RefineEvery ticks, one region — the cohort with the
//     largest share of its weight on outgoing edges (not refined in the last
//     few periods), grown with the neighbouring cohorts it is most connected
//     to, up to RefineMaxKGs key groups — is re-clustered with gonum's
//     Louvain (community.Modularize) on its heaviest RefineMaxEdges edges.
//     Louvain sees significant edges only; communities larger than
//     MaxCohortSize are cut into balanced runs of their max-adjacency
//     order, every part is cut into its connected components, and a key
//     group whose part holds less than a quarter of its heaviest
//     connection to a cohort outside the region (the region lacks its
//     group) stays a singleton unless it has the part's clear home. The
//     result replaces the region's cohorts
//     only if it keeps at least RefineMinGain of the region's edge weight
//     more inside cohorts. gonum's Louvain costs ~10–15 µs per edge here,
//     so regions are small and refinement can run off the tick:
//     PrepareRefine snapshots a region, Refine is a pure function of the
//     snapshot (any goroutine), OfferRefinement hands the result back and
//     the next Step adopts it if the region is unchanged.
//   - Sticky cache (seed 001 §4.3): a Step that would publish no cohort while
//     the previous set was not empty publishes the previous set again, for
//     up to StickyMaxTicks ticks.
//   - Publication: at most MaxCohorts cohorts, the heaviest by
//     W(c) = Σ W(v), those published last tick weighted by 1 + PublishBias.
//
// # Cohort ids
//
// Ids come from a counter starting at 1 and are never reused. A cohort
// keeps its id while its membership changes by joins and leaves. When a
// Step replaces cohorts — a merge, a split or separation, an adopted
// refinement — each new cohort takes the id of the old cohort it overlaps
// most (highest Jaccard index |A∩B|/|A∪B|, then heavier, then smaller id)
// if that Jaccard index is at least JaccardKeep (0.5), each old id going to
// at most one new cohort; others get fresh ids. So a merge keeps the id of
// its larger parent, a split gives it to its larger (then heavier) part, a
// refinement that barely moves a cohort keeps it. Output reports the
// published set's New, Retired and Changed ids and the Step's Merged,
// Split and Refined lineage.
//
// # Invariants (checked after every Step by the tests)
//
//   - Cohorts are disjoint, non-empty, at most MaxCohortSize key groups,
//     with sorted key groups and unique ids; Output.Cohorts is ascending by
//     id and holds at most MaxCohorts cohorts.
//   - A merge happens only after its condition held PersistWindows
//     consecutive windows; a split likewise; a cohort takes part in at most
//     one kind of change per Step (a merge chain counts as one).
//   - Bounded memory: cohorts cover at most MaxTrackedKGs key groups; merge
//     streaks exist only for pairs above ThetaMergeHigh in the last window;
//     sibling records only for live cohorts.
//   - Step costs O(graph edges + graph key groups) plus at most
//     SplitChecksPerTick cuts, plus one bounded refinement when inline.
package cohortgen
