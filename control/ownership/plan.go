package ownership

import (
	"slices"
	"strconv"

	"github.com/aura-runtime/aura/control"
)

// Reason says why the planner changed, or did not change, a cohort.
type Reason string

const (
	// ReasonBenefit: the move's target has the highest Benefit.
	ReasonBenefit Reason = "benefit"
	// ReasonOwnerLeaving: the owner is leaving gracefully.
	ReasonOwnerLeaving Reason = "owner-leaving"
	// ReasonOwnerDown: the owner crashed and its lease expired.
	ReasonOwnerDown Reason = "owner-down"
	// ReasonCold: W(c) < θ_cold·u for ColdTicks ticks.
	ReasonCold Reason = "cold"
	// ReasonUnprofitable: no CN, the owner included, has Benefit > θ_b.
	ReasonUnprofitable Reason = "unprofitable"
	// ReasonOverBudget: the owner has no room left under its budget B_i, so
	// the cohort moves to the best CN that has room or, if none can take it
	// profitably, is evicted.
	ReasonOverBudget Reason = "over-budget"
	// ReasonMaxPublished: the published set is full (MaxPublished).
	ReasonMaxPublished Reason = "max-published"
	// ReasonGone: the cohort is owned but no longer among the input cohorts.
	ReasonGone Reason = "gone"
	// ReasonInFlight: held, a move is in flight.
	ReasonInFlight Reason = "in-flight"
	// ReasonCooldown: held, the cohort (or one of its key groups) changed
	// owner less than CooldownTicks ago.
	ReasonCooldown Reason = "cooldown"
	// ReasonMoveBudget: held, the cohort should move but this tick's move
	// budget (MoveBudget, MaxInFlight) is spent.
	ReasonMoveBudget Reason = "move-budget"
	// ReasonEvictBudget: held, the cohort should be evicted but this tick's
	// EvictBudget is spent.
	ReasonEvictBudget Reason = "evict-budget"
	// ReasonUnsettled: held, membership is not settled.
	ReasonUnsettled Reason = "unsettled"
)

// Assignment is one entry of the planned OwnerMap.
type Assignment struct {
	Cohort control.CohortID `json:"cohort"`
	Owner  int              `json:"owner"`
}

// Move is an ownership transfer to start (freeze → drain → handoff →
// publish).
type Move struct {
	Cohort   control.CohortID `json:"cohort"`
	From, To int
	Reason   Reason `json:"reason"`
	// Forced moves (owner down) bypass cooldown and budgets and do not count
	// against MoveBudget.
	Forced bool `json:"forced,omitempty"`
	// Terms is Benefit(c, To); Stay is Benefit(c, From) under the same loads
	// (zero if From is not live).
	Terms Terms `json:"terms"`
	Stay  Terms `json:"stay"`
}

// Install gives a cohort nobody owns (fallback path) an owner.
type Install struct {
	Cohort control.CohortID `json:"cohort"`
	To     int              `json:"to"`
	Terms  Terms            `json:"terms"`
}

// Eviction returns a cohort to the fallback (MN CAS) path.
type Eviction struct {
	Cohort control.CohortID `json:"cohort"`
	From   int              `json:"from"`
	Reason Reason           `json:"reason"`
	// Forced evictions (gone, max-published, owner leaving or down) bypass
	// cooldown and EvictBudget and do not count against it.
	Forced bool `json:"forced,omitempty"`
}

// Held is a cohort kept on Node although the planner did not choose it there
// this tick: in flight, in cooldown, membership unsettled, or a budget spent.
// Its load is "forced": the capacity invariant excludes it.
type Held struct {
	Cohort control.CohortID `json:"cohort"`
	Node   int              `json:"node"`
	Reason Reason           `json:"reason"`
	// W is the cohort's weight (its load on Node).
	W float64 `json:"w"`
}

// Stats counts what the planner saw and decided at one tick.
type Stats struct {
	// Cohorts is len(Input.Cohorts); Candidates those that were hot
	// (W > θ_w·u or fallback-CAS share > θ_f).
	Cohorts, Candidates int
	// Published is len(Assignment).
	Published int
	// Unplaced counts hot unowned cohorts no CN could take with Benefit > θ_b
	// under its budget (they stay on the fallback path).
	Unplaced int
	// Rescued counts cohorts placed by the rescue rule: wanted by a CN with
	// no room, given to the CN with the most room (see tickCtx.rescue).
	Rescued int
	// CooldownSkipped counts hot unowned cohorts not installed because they
	// changed owner less than CooldownTicks ago.
	CooldownSkipped int
	// InstallBudgetSkipped counts installs deferred by InstallBudget;
	// CapSkipped hot unowned cohorts not installed because MaxPublished was
	// reached.
	InstallBudgetSkipped, CapSkipped int
}

// Plan is the planner's output for one tick.
type Plan struct {
	Tick uint64 `json:"tick"`
	// Unit is u, the weight unit of the thresholds and costs this tick.
	Unit float64 `json:"unit"`
	// Total is T = Σ_c W(c) + Σ_i BaseLoad[i].
	Total float64 `json:"total"`
	// Assignment is the target OwnerMap, sorted by cohort: kept owners,
	// in-flight destinations, and this tick's moves and installs.
	Assignment []Assignment `json:"assignment"`
	// Moves, Installs and Evictions are the changes to start this tick, in
	// decision order (descending priority).
	Moves     []Move     `json:"moves,omitempty"`
	Installs  []Install  `json:"installs,omitempty"`
	Evictions []Eviction `json:"evictions,omitempty"`
	// Held lists cohorts kept in place without the planner choosing them.
	Held []Held `json:"held,omitempty"`
	// Load is each node's projected load after the plan (BaseLoad plus the
	// weights of the cohorts assigned to it). Capacity is capacity(i) (C_load
	// starts above it) and Budget is B_i (the hard guard).
	Load     []float64 `json:"load"`
	Capacity []float64 `json:"capacity"`
	Budget   []float64 `json:"budget"`
	Stats    Stats     `json:"stats"`
}

// Owner returns the planned owner of a cohort.
func (p *Plan) Owner(id control.CohortID) (int, bool) {
	i, ok := slices.BinarySearchFunc(p.Assignment, id, func(a Assignment, id control.CohortID) int {
		switch {
		case a.Cohort < id:
			return -1
		case a.Cohort > id:
			return 1
		}
		return 0
	})
	if !ok {
		return 0, false
	}
	return p.Assignment[i].Owner, true
}

// OwnerMap returns the planned OwnerMap at epoch with the given fallback
// table, taking key groups from cohorts (Input.Cohorts); assigned cohorts
// absent from cohorts are left out.
func (p *Plan) OwnerMap(epoch uint64, fallback []uint8, cohorts []CohortStats) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch, Fallback: slices.Clone(fallback)}
	kgs := make(map[control.CohortID][]control.KeyGroup, len(cohorts))
	for i := range cohorts {
		kgs[cohorts[i].ID] = cohorts[i].KeyGroups
	}
	m.Cohorts = make([]control.Placement, 0, len(p.Assignment))
	for _, a := range p.Assignment {
		k, ok := kgs[a.Cohort]
		if !ok {
			continue
		}
		m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: a.Cohort, KeyGroups: slices.Clone(k)}, Owner: a.Owner})
	}
	return m
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
