package ownership

import "fmt"

// Terms are the four terms of Benefit(c, i), in the units of W (the caller's
// weights), for explanation: Benefit = SAtomic − CRPC − CMove − CLoad.
type Terms struct {
	// SAtomic = Σ_{v∈c} W(v)·P(home(v)=i): MN atomics saved because the
	// transactions issuing them run on i, the owner.
	SAtomic float64 `json:"s_atomic"`
	// CRPC = Σ_{v∈c} W(v)·(1−P(home(v)=i))·C_RPC: the owner RPCs other CNs
	// would pay.
	CRPC float64 `json:"c_rpc"`
	// CMove = (owner(c) ≠ i) ? C_freeze + C_drain + C_handoff : 0 (C_install
	// if nobody owns c), in units of min(u, W(c)): a cohort lighter than the
	// average pays in proportion to its weight (see Config.CFreeze).
	CMove float64 `json:"c_move"`
	// CLoad = max(0, load(i) − capacity(i))² · C_load_unit: the penalty for a
	// node already over capacity (0 in naive mode).
	CLoad float64 `json:"c_load"`
}

// Benefit is SAtomic − CRPC − CMove − CLoad.
func (t Terms) Benefit() float64 { return t.SAtomic - t.CRPC - t.CMove - t.CLoad }

func (t Terms) String() string {
	return fmt.Sprintf("%s [S=%s rpc=%s move=%s load=%s]", num(t.Benefit()), num(t.SAtomic), num(t.CRPC), num(t.CMove), num(t.CLoad))
}

// BenefitTerms evaluates SPEC §5's Benefit(c, i) for cohort c on node i:
//
//	S_atomic(c,i) = Σ_{v∈c} W(v)·P(home(v)=i)                = c.HomeWeight[i]
//	C_rpc(c,i)    = Σ_{v∈c} W(v)·(1−P(home(v)=i))·C_RPC      = (c.W − c.HomeWeight[i])·CRPC
//	C_move(c,i)   = owner(c) ≠ i ? C_freeze+C_drain+C_handoff : 0   (C_install if owner < 0),
//	                in units of min(u, W(c))
//	C_load(i)     = max(0, load − capacity)² · C_load_unit
//
// owner is c's current owner (−1 for none), load and capacity are node i's
// current load and capacity(i), and unit is u, the weight unit the cost
// parameters are expressed in (Plan.Unit); C_move's unit is min(u, W(c)).
// In naive mode C_load is 0.
func (cfg *Config) BenefitTerms(c *CohortStats, i, owner int, load, capacity, unit float64) Terms {
	var t Terms
	s := 0.0
	if c.HomeWeight != nil {
		s = min(max(c.HomeWeight[i], 0), c.W)
	}
	t.SAtomic = s
	t.CRPC = (c.W - s) * cfg.CRPC
	// A move freezes and drains the cohort's own traffic: a cohort lighter
	// than u pays in proportion to its weight (see Config.CFreeze).
	scale := unit
	if c.W < unit {
		scale = c.W
	}
	switch {
	case owner < 0:
		t.CMove = cfg.CInstall * scale
	case owner != i:
		t.CMove = cfg.moveCost() * scale
	}
	if !cfg.Naive && load > capacity && unit > 0 {
		over := load - capacity
		t.CLoad = over * over * cfg.CLoadUnit / unit
	}
	return t
}
