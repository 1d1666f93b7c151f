package ownership

import (
	"errors"
	"fmt"
	"math"
)

// Config holds the OwnershipPlanner's parameters. Every weight-valued
// parameter (thresholds θ_w, θ_cold, θ_b and the costs C_freeze, C_drain,
// C_handoff, C_install, C_load_unit) is expressed in units of u, the mean
// cohort write weight of the tick (see the package documentation): the
// planner is thereby independent of the profiler's sampling rate, of the
// decay's normalisation and of the number of cohorts. C_RPC, θ_f and the
// slacks are dimensionless.
//
// The zero Config is not valid; start from DefaultConfig or NaiveConfig.
type Config struct {
	// CRPC is C_RPC: the net cost of serving one write of a cohort by owner
	// RPC from another CN, in units of one MN atomic saved (the quantity
	// S_atomic counts). Default 0.1. Why: an owner RPC does not touch the
	// NIC's atomic unit (the bottleneck the Benefit model targets) but costs a
	// CN-to-CN round trip (5–10 µs in the tutorial, ch. 6 §2.2); it is charged
	// a tenth of a saved atomic, which puts the break-even locality at
	// P = C_RPC/(1+C_RPC) ≈ 9%: ownership still bootstraps when up to ~10 CNs
	// issue a cohort's writes evenly (routing then follows ownership and the
	// locality rises), and a cohort no CN issues is never owned.
	CRPC float64
	// CFreeze is C_freeze, the freeze phase's share of C_move, in units of u.
	// Default 0.03. Why: C_move is calibrated so that one move costs about a
	// third of an average cohort's weight (an average cohort moves only when
	// its locality at the target beats the current owner's by ~0.3), split in
	// proportion to the tutorial's phase times (ch. 6 §2.3, SPEC §6): freeze
	// < 1 ms, drain ≈ 10 ms, handoff ≈ 10 µs, i.e. 0.03 u per ms.
	// C_freeze, C_drain, C_handoff and C_install are charged in units of
	// min(u, W(c)): what a move disrupts is the cohort's own traffic during
	// the freeze and the drain, so a cohort lighter than the average pays in
	// proportion to its weight and moves, like an average one, when its
	// locality at the target beats the current owner's by ~0.3. (In units of
	// u alone a singleton left on the wrong CN, e.g. after the cohort
	// generator detached it from a cohort placed for other key groups, could
	// never pay for its move.)
	CFreeze float64
	// CDrain is C_drain, the drain phase's share of C_move, in units of u.
	// Default 0.3 (≈ 10 ms at 0.03 u per ms; see CFreeze).
	CDrain float64
	// CHandoff is C_handoff, the handoff phase's share of C_move, in units of
	// u. Default 0.0003 (≈ 10 µs at 0.03 u per ms; see CFreeze).
	CHandoff float64
	// CInstall is C_move for a cohort nobody owns (an install from the
	// fallback path), in units of u. Default 0.0003 (= CHandoff). Why: the
	// fallback path has no activation to freeze or drain, only the new
	// activation to set up. Set it to CFreeze+CDrain+CHandoff for the literal
	// reading of SPEC §5's C_move, which charges every owner(c) ≠ i.
	CInstall float64
	// CLoadUnit is C_load_unit: C_load(i) = max(0, load(i) − capacity(i))² ·
	// CLoadUnit / u, so a node one average cohort (u) over its capacity
	// costs CLoadUnit·u, ten over costs 100·CLoadUnit·u. Default 0.01. Why:
	// overshooting capacity by ten average cohorts (≈ 4% of a CN's share at
	// 1,024 cohorts on 4 CNs) costs one average cohort's whole benefit, so the
	// penalty steers placement between capacity and the hard budget without
	// overriding locality for small excursions.
	CLoadUnit float64
	// Slack sets capacity(i) = T · share(i) · (1 + Slack), where T is the
	// tick's total weight and share(i) node i's fraction of the live
	// capacity (SPEC §5: "capacity = total / N_CN (with slack)"). C_load is
	// zero up to capacity. Default 0.05: a node may carry 5% more than its
	// fair share before being penalised.
	Slack float64
	// BudgetSlack sets the hard budget B_i = capacity(i) · (1 + BudgetSlack):
	// the planner places a cohort on node i only if load(i) + W(c) ≤ B_i
	// (Table 4, step 5). Default 0.20, so B_i = 1.26 × the fair share. Why:
	// SPEC §11 requires no CN above 1.5 × the mean load; 1.26 leaves room for
	// transactions routed by the static fallback while keeping the greedy's
	// bin packing feasible for cohorts up to a fifth of a fair share.
	BudgetSlack float64

	// ThetaW is θ_w: a cohort with W(c) > ThetaW·u is hot (a candidate for
	// ownership). Default 0.5. Why: a cohort carrying less than half the
	// average cohort's weight is not worth a slot of the MaxPublished cap.
	ThetaW float64
	// ThetaF is θ_f: a cohort whose share of the cluster's MN CAS traffic
	// (CohortStats.FallbackCASShare) exceeds ThetaF is a candidate whatever
	// its W. Default 0.01. Why: the NIC serialises atomics through 512
	// lock-table slots (SPEC §1), so a uniform slot carries ~0.2% of the
	// atomics; a cohort drawing 1% (5× a slot's share, typically through CAS
	// retries on hot words) is an atomic hotspot.
	ThetaF float64
	// ThetaB is θ_b: a cohort is placed on its argmax CN only if the Benefit
	// there exceeds ThetaB·u. Default 0: own whenever the model predicts a
	// gain (θ_w already filters small cohorts).
	ThetaB float64
	// ThetaCold is θ_cold: an owned cohort whose W(c) < ThetaCold·u for
	// ColdTicks consecutive ticks is evicted to the fallback path (Table 4,
	// step 7). Default 0.1. Why: a hysteresis band [θ_cold, θ_w] = [0.1, 0.5]
	// u keeps cohorts that cool briefly from flapping between owned and
	// fallback.
	ThetaCold float64
	// ColdTicks is how long a cohort must stay below θ_cold before it is
	// evicted ("长期 < θ_cold"). Default 10 (1 s at the default 100 ms tick):
	// the access graph's EWMA (λ = 0.95) has a half-life of ~13.5 ticks, so a
	// genuinely idle cohort stays cold, while a pause of a few ticks does not
	// cost a reinstall.
	ColdTicks uint64
	// CooldownTicks is the minimum number of ticks between two ownership
	// changes (move, install or eviction) of a cohort, tracked per key group
	// so that a cohort re-formed by the cohort generator inherits the
	// cooldown of its key groups. Must be ≥ 1 (SPEC §5: cooldown ≥ 100 ms).
	// Default 5 (500 ms at 100 ms ticks). Why: a cohort changes owner at most
	// twice a second (each change freezes it for ~11 ms), and the SPEC's
	// drift target (back within 20 ticks) keeps 15 ticks after a cooldown.
	CooldownTicks uint64
	// MoveBudget caps the moves (owner → other owner) started per tick.
	// Default 64. Why: 1/16 of MaxPublished, so the whole published set can
	// be reshuffled in 16 ticks (1.6 s), inside the 20-tick drift target,
	// while no more than 6% of cohorts freeze in any tick.
	MoveBudget int
	// MaxInFlight caps moves in flight (Input.InFlight plus this tick's new
	// moves). Default 128 (two ticks' budget): if the TransferController
	// falls behind, the planner stops adding work instead of piling it up.
	MaxInFlight int
	// InstallBudget caps installs (fallback → owner) per tick. Default 256:
	// a cold start installs the full 1,024-cohort set in four ticks; installs
	// freeze nothing, so the bound only smooths the manifest's growth.
	InstallBudget int
	// EvictBudget caps the evictions per tick for coldness, unprofitability
	// or load. Default 256. Evictions the planner cannot defer (a cohort that
	// vanished from the input, the MaxPublished cap, an owner that left or
	// died) are not counted against it.
	EvictBudget int
	// MaxPublished caps the cohorts in the assignment (published OwnerMap).
	// Default 1024: the tutorial's kMaxPublishedCohorts (ch. 6 §3.4, ch. 8
	// §4.2), which keeps the v2 manifest under ~200 KB.
	MaxPublished int
	// FixedUnit, if positive, replaces u (the mean cohort weight) by this
	// absolute weight, for callers that want absolute thresholds. Default 0.
	FixedUnit float64

	// Naive selects the tutorial's v25 behaviour (SPEC §5 "Lever B"), used by
	// the simulator's --lever-b naive to reproduce the collapse: no C_load
	// term (reported as 0), no capacity guard (no budget check, no eviction
	// for load), and no churn budget (MoveBudget, MaxInFlight, InstallBudget
	// and EvictBudget are ignored). Cooldown, thresholds, C_move, C_RPC and
	// MaxPublished still apply (NaiveConfig also zeroes C_freeze and C_drain
	// and sets the cooldown to one tick). Default false.
	Naive bool
}

// DefaultConfig returns the guarded planner's defaults (each field's comment
// gives the value and the reason).
func DefaultConfig() Config {
	return Config{
		CRPC:          0.1,
		CFreeze:       0.03,
		CDrain:        0.3,
		CHandoff:      0.0003,
		CInstall:      0.0003,
		CLoadUnit:     0.01,
		Slack:         0.05,
		BudgetSlack:   0.20,
		ThetaW:        0.5,
		ThetaF:        0.01,
		ThetaB:        0,
		ThetaCold:     0.1,
		ColdTicks:     10,
		CooldownTicks: 5,
		MoveBudget:    64,
		MaxInFlight:   128,
		InstallBudget: 256,
		EvictBudget:   256,
		MaxPublished:  1024,
	}
}

// OwnAllConfig is DefaultConfig with θ_w = 0.001·u and θ_cold = 0.0005·u:
// own every cohort that carries writes, heaviest first under MaxPublished.
// The simulator's guarded mode uses it; the planner actor keeps
// DefaultConfig (docs/sim.md §5: in the embedded bench these thresholds
// turned its cold evictions into as many unprofitable ones). Why: the cohort
// generator leaves the key groups that do not fit their group's full cohorts
// as small cohorts (on reshaped TPC-C, the name-index and customer buckets
// left over by a warehouse's hub cohorts, each ≈ 0.3% of an average
// cohort), and a key group left to the fallback pays an MN CAS on every
// write — on TPC-C as much as the whole gap to the oracle; θ_w = 0.5·u left
// about 100 of them unowned (0.02 atomics/txn). MaxPublished, applied
// heaviest first, is what bounds the manifest. DefaultConfig keeps the
// SPEC's 0.5/0.1 band, which its datadriven scenarios document.
func OwnAllConfig() Config {
	c := DefaultConfig()
	c.ThetaW, c.ThetaCold = 0.001, 0.0005
	return c
}

// NaiveConfig returns the v25 planner as the tutorial ran it (SPEC §5,
// Lever B): DefaultConfig with Naive set (no C_load, no capacity guard, no
// churn budgets), the cooldown at its floor of one tick, and C_freeze =
// C_drain = 0, so that C_move (C_handoff alone) no longer holds a cohort at
// its owner — the tutorial's loop re-placed ~1,000 cohorts within five
// ticks, which a C_move of a third of a cohort's weight would have damped.
// Fed by routing-follows-ownership it piles cohorts and transactions onto
// one CN within a few ticks (TestLeverBLoop).
func NaiveConfig() Config {
	c := DefaultConfig()
	c.Naive = true
	c.CooldownTicks = 1
	c.CFreeze, c.CDrain = 0, 0
	return c
}

// Validate reports every invalid field (errors.Join).
func (c Config) Validate() error {
	var errs []error
	nonneg := func(name string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, fmt.Errorf("ownership: %s = %v: must be finite and ≥ 0", name, v))
		}
	}
	nonneg("CRPC", c.CRPC)
	nonneg("CFreeze", c.CFreeze)
	nonneg("CDrain", c.CDrain)
	nonneg("CHandoff", c.CHandoff)
	nonneg("CInstall", c.CInstall)
	nonneg("CLoadUnit", c.CLoadUnit)
	nonneg("Slack", c.Slack)
	nonneg("BudgetSlack", c.BudgetSlack)
	nonneg("ThetaW", c.ThetaW)
	nonneg("ThetaF", c.ThetaF)
	nonneg("ThetaCold", c.ThetaCold)
	nonneg("FixedUnit", c.FixedUnit)
	if math.IsNaN(c.ThetaB) || math.IsInf(c.ThetaB, 0) {
		errs = append(errs, fmt.Errorf("ownership: ThetaB = %v: must be finite", c.ThetaB))
	}
	if c.ThetaF > 1 {
		errs = append(errs, fmt.Errorf("ownership: ThetaF = %v: a share, must be ≤ 1", c.ThetaF))
	}
	if c.ThetaCold > c.ThetaW {
		errs = append(errs, fmt.Errorf("ownership: ThetaCold = %v above ThetaW = %v: the cold band must lie below the hot threshold", c.ThetaCold, c.ThetaW))
	}
	if c.CooldownTicks < 1 {
		errs = append(errs, errors.New("ownership: CooldownTicks must be ≥ 1 (SPEC §5: cooldown ≥ 100 ms)"))
	}
	pos := func(name string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("ownership: %s = %d: must be ≥ 1", name, v))
		}
	}
	pos("MoveBudget", c.MoveBudget)
	pos("MaxInFlight", c.MaxInFlight)
	pos("InstallBudget", c.InstallBudget)
	pos("EvictBudget", c.EvictBudget)
	pos("MaxPublished", c.MaxPublished)
	return errors.Join(errs...)
}

// moveCost is C_freeze + C_drain + C_handoff in units of u.
func (c Config) moveCost() float64 { return c.CFreeze + c.CDrain + c.CHandoff }
