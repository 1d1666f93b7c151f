// Package ownership is AURA's OwnershipPlanner: it decides, every planner
// tick, which compute node (CN) owns each hot cohort, so that the cohort's
// locks are granted in that CN's memory instead of by MN CAS (SPEC §5; the
// tutorial's ch. 6 §§1–3, Table 4, and ch. 8 §§5–7 for Lever B).
//
// The package is pure in the manner of etcd/raft: no goroutines, clocks or
// I/O. Time enters as Input.Tick. The caller (the planner actor, the
// simulator) adapts the decayed access graph into plain per-tick structs
// (Input, CohortStats), calls Planner.Plan, and hands the returned moves,
// installs and evictions to the TransferController.
//
// # Benefit
//
// For cohort c and CN i (SPEC §5, exactly):
//
//	Benefit(c,i) = S_atomic(c,i) − C_rpc(c,i) − C_move(c,i) − C_load(i)
//	S_atomic(c,i) = Σ_{v∈c} W(v)·P(home(v)=i)                 (CohortStats.HomeWeight[i])
//	C_rpc(c,i)    = Σ_{v∈c} W(v)·(1−P(home(v)=i))·C_RPC       ((W(c) − HomeWeight[i])·CRPC)
//	C_move(c,i)   = owner(c) ≠ i ? C_freeze + C_drain + C_handoff : 0
//	C_load(i)     = max(0, load(i) − capacity(i))² · C_load_unit
//	capacity(i)   = T · share(i) · (1 + Slack)       (share(i) = 1/N_CN for equal CNs)
//
// with two readings the formula leaves open made explicit: a cohort nobody
// owns pays C_install (default C_handoff) rather than the full C_move, since
// the fallback path has no activation to freeze or drain; and load(i) is the
// load already placed on i this tick (Input.BaseLoad, in-flight moves, and
// the cohorts placed before c), the cohort itself excluded.
//
// Units. W(v) is the access graph's decayed write weight, in any unit the
// caller likes. T = Σ_c W(c) + Σ_i BaseLoad[i] is the tick's total, and u =
// T_cohorts / |cohorts| the mean cohort weight (or Config.FixedUnit). The
// benefit terms are reported in the units of W; the configuration's
// thresholds and costs are multiples of u (C_load_unit is divided by u so
// that C_load is a weight too). The planner's behaviour is therefore the
// same whatever the profiler's sampling rate, the decay's normalisation or
// the number of cohorts. C_RPC is the cost of an owner RPC in saved atomics.
// BenefitTerms evaluates the four terms; Explain tabulates them at every CN
// for the dashboard; every Move and Install carries them.
//
// # The greedy (Table 4)
//
// Plan, at each tick:
//
//  1. computes u, T, capacity(i) and the hard budget B_i = capacity(i) ·
//     (1 + BudgetSlack) over the live CNs (Input.State; Input.Capacity
//     weighs heterogeneous CNs);
//  2. fixes cohorts with a move in flight at their destination (their load
//     counts there), evicts owned cohorts that left the input, and pins
//     owned cohorts in cooldown at their owner (all owned cohorts if
//     Input.Unsettled), in descending priority, evicting any beyond
//     MaxPublished;
//  3. visits the remaining owned cohorts and the candidates — W(c) > θ_w·u or
//     fallback-CAS share > θ_f — in descending W(c)·atomic_cost (ties by
//     cohort ID), and for each computes the argmax CN of Benefit among the
//     live CNs with load(i) + W(c) ≤ B_i (or, for a cohort heavier than B_i,
//     a CN with no cohort yet) and Benefit > θ_b·u, then decides as listed
//     below;
//  4. records the changes for the cooldown (per cohort and per key group, so
//     that a re-formed cohort inherits its key groups' cooldown).
//
// The decisions of step 3:
//
//   - unowned: install at the argmax (InstallBudget; not within its
//     cooldown), or else at the rescue's node (below);
//   - owned, the argmax is the owner: keep;
//   - owned, the argmax is elsewhere: move (MoveBudget, MaxInFlight), else
//     hold;
//   - owned, no argmax, the owner has no room: the cohort must leave anyway
//     and an eviction would pay the freeze and the drain too, so the argmax
//     is taken again against θ_b·u − (C_freeze + C_drain)·u: move there
//     (reason over-budget), or else to the rescue's node, or else evict
//     (over-budget);
//   - owned, no argmax, the owner has room: evict (unprofitable);
//   - owned but not a candidate: keep if it fits, evict if it has been below
//     θ_cold·u for ColdTicks ticks (cold) or does not fit (over-budget);
//   - owner leaving: move to the argmax against the lowered threshold
//     (MoveBudget), or evict;
//   - owner down: move to the argmax (priced as an install) or evict, outside
//     every budget and cooldown;
//   - once MaxPublished cohorts are placed: owned cohorts are evicted
//     (max-published), unowned ones stay on the fallback path.
//
// The rescue. Benefit prices locality where a cohort's transactions run
// now; with routing following ownership, a CN that owns nothing runs
// nothing and never shows any, so once the CNs a cohort's transactions
// run on are at their budgets the cohort would stay unowned (or be
// evicted) while that CN stays idle. After a drift that re-forms every
// cohort this left one CN of four nearly empty and tenants unowned for
// tens of ticks. So a cohort that some CN without room would take (Benefit
// above the threshold there) goes to the live CN with the most room
// relative to its capacity, priced with the locality routing will give it
// there: the router sends a transaction to the owner of its write set's
// cohorts, so S_atomic is taken as c's largest HomeWeight (the writes of
// its busiest CN follow it; the rest are assumed to stay). Plan counts
// these placements in Stats.Rescued; Explain prices Benefit as observed.
//
// Evictions other than the forced ones (gone, max-published, owner leaving
// or down) are bounded by EvictBudget; beyond it the cohort is held.
//
// Cost: O(|cohorts|·log|cohorts| + |candidates|·N_CN) per tick; 1,024
// cohorts on 8 CNs plan in well under the 5 ms tick budget (BenchmarkPlan).
//
// # Promises
//
// For every valid Config and Input (checked by the property tests; in naive
// mode the churn budgets and the capacity promise are off by design):
//
//   - Cap: len(Plan.Assignment) ≤ MaxPublished (unless cohorts already in
//     flight exceed it, which only a lowered cap can cause).
//   - Churn: non-forced moves ≤ MoveBudget and, with the in-flight ones, ≤
//     MaxInFlight; installs ≤ InstallBudget; non-forced evictions ≤
//     EvictBudget (forced ones: gone, max-published, owner leaving or down).
//   - Cooldown: no cohort changes owner (move, install, eviction) within
//     CooldownTicks ticks of its previous change or of a change of one of its
//     key groups, except forced changes (gone, max-published, owner leaving
//     or down) and moves off a leaving owner.
//   - Capacity: load(i) ≤ max(B_i, BaseLoad[i]) + Σ W of the cohorts
//     Plan.Held reports on i (in flight, in cooldown, membership unsettled,
//     or a budget spent) — every placement the planner chooses fits its
//     budget — with one exception, bin packing's oversize item: a cohort
//     heavier than B_i may be placed on a node that has no other cohort, and
//     is then its only chosen cohort (load(i) ≤ BaseLoad[i] + W(c) + held).
//     A cohort that fits nowhere profitably stays on (or returns to) the
//     fallback path.
//   - Determinism: the same Config, sequence of Inputs and hence planner
//     state give the same Plans, byte for byte (no map order leaks).
//   - Membership: with Input.Unsettled nothing moves, installs or is evicted
//     except for the forced evictions (gone from the input, MaxPublished).
//   - Errors: an invalid Input (or a tick before the previous one) returns
//     an error and leaves the planner's state untouched.
//
// # Lever B: naive and guarded modes
//
// The tutorial's Lever B negative result (ch. 8 §6): with routing following
// ownership, the v25 planner fed a loop — cohorts given to the CN that issued
// most of their writes drew more transactions there, which made that CN the
// argmax of more cohorts — that collapsed ~1,024 cohorts to ~20 within five
// ticks with one CN at 100%. Config.Naive (NaiveConfig, the simulator's
// --lever-b naive) reproduces that planner; the default (guarded) planner is
// stable in the same loop (TestLeverBLoop). The knobs that differ:
//
//	knob                         guarded (DefaultConfig)        naive (NaiveConfig)
//	C_load                       (load−capacity)²·0.01/u         0
//	capacity guard (B_i)         load + W(c) ≤ 1.26 × fair      none
//	eviction for load            over-budget                    never
//	MoveBudget / MaxInFlight     64 / 128 per tick              unlimited
//	InstallBudget / EvictBudget  256 / 256 per tick             unlimited
//	CooldownTicks                5                              1 (the SPEC's floor)
//	C_freeze + C_drain           0.33 u (a move's hysteresis)   0 (C_move = C_handoff)
//
// The rest — thresholds, C_RPC, C_handoff, C_install, cold eviction,
// MaxPublished — is shared. In TestLeverBLoop (4 CNs, 256 cohorts, eight
// uniformly drawn cohorts written per transaction, plurality routing to
// owners) the naive planner puts every transaction on one CN within six
// ticks (max/mean load 4.0), while the guarded one stays at 1.2–1.35.
//
// # Oracle
//
// Oracle computes, from knowledge of a whole workload (each key group's
// total write weight and its per-CN home weights, and a grouping of key
// groups into communities), a capacity-respecting assignment that maximises
// Σ_g HomeWeight_g[owner(g)] — the locks granted locally — by a greedy in
// descending weight followed by local improvement (relocations, then
// pairwise swaps). The simulator's oracle mode uses it as the reference for
// the best achievable locality.
package ownership
