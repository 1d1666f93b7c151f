package ownership

import (
	"errors"
	"fmt"
	"math"

	"github.com/aura-runtime/aura/control"
)

// NodeState is a compute node's membership state as the planner sees it.
type NodeState uint8

const (
	// NodeUp is a live member: it may receive cohorts.
	NodeUp NodeState = iota
	// NodeLeaving is leaving gracefully: it receives nothing and every cohort
	// it owns is handed off (moved, within MoveBudget but regardless of
	// cooldown, or evicted if no CN can take it).
	NodeLeaving
	// NodeDown has crashed and its lease has expired: its cohorts are
	// reassigned at once (moves outside every budget and cooldown, priced as
	// installs since nothing can be frozen or drained) or evicted.
	NodeDown
)

func (s NodeState) String() string {
	switch s {
	case NodeUp:
		return "up"
	case NodeLeaving:
		return "leaving"
	case NodeDown:
		return "down"
	}
	return fmt.Sprintf("NodeState(%d)", uint8(s))
}

// CohortStats is one cohort as the planner needs it: its identity and the
// access-graph aggregates over its key groups for the current tick. The
// caller (the planner actor, the simulator) builds it from the decayed access
// graph.
type CohortStats struct {
	ID control.CohortID
	// KeyGroups are the cohort's key groups. The planner uses them only to
	// carry cooldowns across cohorts that the cohort generator re-forms; they
	// may be nil.
	KeyGroups []control.KeyGroup
	// W is W(c) = Σ_{v∈c} W(v), the cohort's decayed write weight: its lock
	// acquisitions per tick, in the caller's units. It is also the load the
	// cohort brings to its owner. Finite, ≥ 0.
	W float64
	// HomeWeight[i] = Σ_{v∈c} W(v)·P(home(v)=i), the part of W issued by
	// transactions whose home is CN i; len Nodes, or nil (no information: the
	// cohort saves nothing anywhere). Entries are ≥ 0; their sum should not
	// exceed W (the planner clamps each entry to W).
	HomeWeight []float64
	// FallbackCASShare is the cohort's share of the cluster's MN CAS traffic
	// in the window (in [0, 1]); above θ_f the cohort is a candidate whatever
	// its W.
	FallbackCASShare float64
	// AtomicCost is the relative cost of one of the cohort's MN atomics
	// (e.g. CAS attempts per acquisition, retries included); the greedy
	// visits candidates in descending W(c)·AtomicCost. Values ≤ 0 mean 1.
	AtomicCost float64
}

// Transfer is a move the TransferController has started and not finished.
type Transfer struct {
	Cohort   control.CohortID
	From, To int
}

// Input is everything the planner reads at one tick. The planner neither
// keeps nor mutates it.
type Input struct {
	// Tick is the planner tick number; it must not decrease between calls.
	Tick uint64
	// Nodes is the number of compute nodes, indices [0, Nodes), at most
	// control.MaxNodes−1 (one value is control.Unowned).
	Nodes int
	// Capacity holds each node's relative capacity (len Nodes, entries ≥ 0;
	// nil means all equal). Only live nodes (NodeUp) share the total.
	Capacity []float64
	// State holds each node's membership state (len Nodes; nil means all
	// NodeUp).
	State []NodeState
	// BaseLoad holds load already on each node that no cohort in Cohorts
	// accounts for (len Nodes; nil means zero), in the units of W. It counts
	// in the load model and in the total T.
	BaseLoad []float64
	// Unsettled is set while membership is changing: the planner then keeps
	// every owner as it is (SPEC §6: the planner acts only on settled
	// membership); only the forced evictions (cohorts gone from Cohorts, the
	// MaxPublished cap) still happen.
	Unsettled bool
	// Cohorts are the cohort generator's cohorts, with this tick's stats. IDs
	// are distinct.
	Cohorts []CohortStats
	// Owners maps each currently owned cohort to its owner node. Owned
	// cohorts missing from Cohorts are evicted (reason gone).
	Owners map[control.CohortID]int
	// InFlight are moves started earlier and not finished. Their cohorts are
	// not re-planned; their load counts at the destination. The caller
	// removes transfers it finished (updating Owners) or rolled back (e.g.
	// to a node that died); in-flight cohorts missing from Cohorts are
	// ignored.
	InFlight []Transfer
}

func (in *Input) validate() error {
	var errs []error
	if in.Nodes < 1 || in.Nodes >= control.MaxNodes {
		return fmt.Errorf("ownership: Nodes = %d: must be in [1, %d)", in.Nodes, control.MaxNodes)
	}
	if in.Capacity != nil {
		if len(in.Capacity) != in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: len(Capacity) = %d, want Nodes = %d", len(in.Capacity), in.Nodes))
		} else {
			for i, v := range in.Capacity {
				if !finiteNonneg(v) {
					errs = append(errs, fmt.Errorf("ownership: Capacity[%d] = %v: must be finite and ≥ 0", i, v))
				}
			}
		}
	}
	if in.State != nil {
		if len(in.State) != in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: len(State) = %d, want Nodes = %d", len(in.State), in.Nodes))
		} else {
			for i, s := range in.State {
				if s > NodeDown {
					errs = append(errs, fmt.Errorf("ownership: State[%d] = %d: unknown", i, s))
				}
			}
		}
	}
	if in.BaseLoad != nil {
		if len(in.BaseLoad) != in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: len(BaseLoad) = %d, want Nodes = %d", len(in.BaseLoad), in.Nodes))
		} else {
			for i, v := range in.BaseLoad {
				if !finiteNonneg(v) {
					errs = append(errs, fmt.Errorf("ownership: BaseLoad[%d] = %v: must be finite and ≥ 0", i, v))
				}
			}
		}
	}
	for k := range in.Cohorts {
		c := &in.Cohorts[k]
		if !finiteNonneg(c.W) {
			errs = append(errs, fmt.Errorf("ownership: cohort %d: W = %v: must be finite and ≥ 0", c.ID, c.W))
		}
		if c.HomeWeight != nil && len(c.HomeWeight) != in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: cohort %d: len(HomeWeight) = %d, want Nodes = %d", c.ID, len(c.HomeWeight), in.Nodes))
		} else {
			for i, v := range c.HomeWeight {
				if !finiteNonneg(v) {
					errs = append(errs, fmt.Errorf("ownership: cohort %d: HomeWeight[%d] = %v: must be finite and ≥ 0", c.ID, i, v))
				}
			}
		}
		if math.IsNaN(c.FallbackCASShare) || c.FallbackCASShare < 0 || c.FallbackCASShare > 1 {
			errs = append(errs, fmt.Errorf("ownership: cohort %d: FallbackCASShare = %v: must be in [0, 1]", c.ID, c.FallbackCASShare))
		}
		if math.IsNaN(c.AtomicCost) || math.IsInf(c.AtomicCost, 0) {
			errs = append(errs, fmt.Errorf("ownership: cohort %d: AtomicCost = %v: must be finite", c.ID, c.AtomicCost))
		}
		if len(errs) > 16 {
			errs = append(errs, errors.New("ownership: too many errors"))
			return errors.Join(errs...)
		}
	}
	for id, o := range in.Owners {
		if o < 0 || o >= in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: cohort %d: owner %d out of range [0, %d)", id, o, in.Nodes))
		}
	}
	var flying map[control.CohortID]bool
	if len(in.InFlight) > 0 {
		flying = make(map[control.CohortID]bool, len(in.InFlight))
	}
	for _, t := range in.InFlight {
		if t.From < 0 || t.From >= in.Nodes || t.To < 0 || t.To >= in.Nodes {
			errs = append(errs, fmt.Errorf("ownership: in-flight cohort %d: %d → %d out of range [0, %d)", t.Cohort, t.From, t.To, in.Nodes))
		}
		if flying[t.Cohort] {
			errs = append(errs, fmt.Errorf("ownership: cohort %d in flight twice", t.Cohort))
		}
		flying[t.Cohort] = true
	}
	return errors.Join(errs...)
}

// finiteNonneg reports 0 ≤ v < +Inf (NaN fails both comparisons).
func finiteNonneg(v float64) bool { return v >= 0 && v <= math.MaxFloat64 }
