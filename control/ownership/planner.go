package ownership

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// Planner is the OwnershipPlanner. It is a deterministic state machine: its
// state is when each cohort and key group last changed owner (for the
// cooldown) and since when each cohort has been cold; Plan advances it. It
// is not safe for concurrent use (the planner actor owns it).
type Planner struct {
	cfg      Config
	started  bool
	lastTick uint64
	// changedID and changedKG hold the tick of the last ownership change
	// (move, install, eviction) of a cohort and of each of its key groups,
	// pruned once the cooldown has passed.
	changedID map[control.CohortID]uint64
	changedKG map[control.KeyGroup]uint64
	// coldSince holds, for each cohort below θ_cold·u, the first tick of its
	// current cold run.
	coldSince map[control.CohortID]uint64

	// scratch, reused across ticks
	idx   map[control.CohortID]int32
	ent   []entry
	order []ordKey
}

// ordKey orders cohorts by descending priority, then ascending ID.
type ordKey struct {
	prio float64
	id   control.CohortID
	k    int32
}

// New returns a planner, or the configuration's errors.
func New(cfg Config) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Planner{
		cfg:       cfg,
		changedID: map[control.CohortID]uint64{},
		changedKG: map[control.KeyGroup]uint64{},
		coldSince: map[control.CohortID]uint64{},
		idx:       map[control.CohortID]int32{},
	}, nil
}

// Clone returns an independent copy of the planner and its state, for
// what-if plans (a dashboard's preview, a dry run) that must not advance the
// real planner.
func (p *Planner) Clone() *Planner {
	q := &Planner{
		cfg:       p.cfg,
		started:   p.started,
		lastTick:  p.lastTick,
		changedID: maps.Clone(p.changedID),
		changedKG: maps.Clone(p.changedKG),
		coldSince: maps.Clone(p.coldSince),
		idx:       map[control.CohortID]int32{},
	}
	return q
}

// Config returns the planner's configuration.
func (p *Planner) Config() Config { return p.cfg }

type entryState uint8

const (
	stFree entryState = iota
	stInFlight
	stPinned
	stDone
)

type entry struct {
	owner int // current owner, −1 for none
	prio  float64
	hot   bool
	cold  bool // cold for ColdTicks ticks
	state entryState
}

// tickCtx is the load model of one tick.
type tickCtx struct {
	cfg      *Config
	n        int
	unit     float64
	total    float64
	state    []NodeState
	capacity []float64
	budget   []float64
	load     []float64
	// placed counts the cohorts placed on each node so far (held ones
	// included): a node with none may take one cohort larger than its
	// budget (bin packing's oversize item: it fits nowhere else).
	placed []int
	home   []float64 // rescue's scratch
}

func (x *tickCtx) live(i int) bool { return x.state[i] == NodeUp }

// fits reports whether node i can take weight w under its budget.
func (x *tickCtx) fits(i int, w float64) bool {
	if x.cfg.Naive {
		return true
	}
	b := x.budget[i]
	if x.load[i]+w <= b+1e-9*max(1, b) {
		return true
	}
	return w > b && x.placed[i] == 0
}

// best returns the live node with the highest Benefit(c, i) > θ_b·u among
// those that fit c, or −1. Ties prefer the current owner, then the lower
// load, then the lower index.
func (x *tickCtx) best(c *CohortStats, owner int) (int, Terms) {
	return x.bestAbove(c, owner, x.cfg.ThetaB*x.unit)
}

// bestForced is best for a cohort that must leave its owner (no room there,
// or the owner is leaving): the alternative is an eviction, which pays the
// freeze and the drain too, so a destination only has to beat
// θ_b·u − (C_freeze + C_drain)·min(u, W(c)) (C_move's unit, see
// BenefitTerms).
func (x *tickCtx) bestForced(c *CohortStats, owner int) (int, Terms) {
	return x.bestAbove(c, owner, x.forcedThreshold(c))
}

// forcedThreshold is bestForced's threshold for c.
func (x *tickCtx) forcedThreshold(c *CohortStats) float64 {
	return x.cfg.ThetaB*x.unit - (x.cfg.CFreeze+x.cfg.CDrain)*min(x.unit, c.W)
}

func (x *tickCtx) bestAbove(c *CohortStats, owner int, thr float64) (int, Terms) {
	bi, bb := -1, math.Inf(-1)
	var bt Terms
	for i := 0; i < x.n; i++ {
		if !x.live(i) || !x.fits(i, c.W) {
			continue
		}
		t := x.cfg.BenefitTerms(c, i, owner, x.load[i], x.capacity[i], x.unit)
		b := t.Benefit()
		if b <= thr {
			continue
		}
		if b > bb || (b == bb && (i == owner || (bi != owner && x.load[i] < x.load[bi]))) {
			bi, bb, bt = i, b, t
		}
	}
	return bi, bt
}

// rescue places a cohort that Benefit would place but that no node where
// its transactions run now has room for (the greedy's best found no node
// above thr among those that fit, while one that does not fit is above
// it): it goes to the live node with the most room relative to its
// capacity that fits it, other than owner, if Benefit there exceeds thr
// with the home distribution routing will give it. The AffinityRouter sends
// a transaction to the owner of its write set's cohorts, so once i owns c
// the writes now issued from c's busiest node are issued from i:
// S_atomic(c, i) is taken as max_k HomeWeight[k] (c's transactions issued
// from other nodes are assumed to stay where they are). Without it, after a
// drift that leaves one CN owning nothing (routing follows ownership, so
// that CN then runs nothing and has no locality to offer), the re-formed
// cohorts no full CN can take stay unowned or are evicted, and the empty
// CN stays empty. Not in naive mode (it has no budgets).
func (x *tickCtx) rescue(c *CohortStats, owner int, thr float64) (int, Terms) {
	if x.cfg.Naive || c.HomeWeight == nil || !(c.W > 0) {
		return -1, Terms{}
	}
	wanted := false
	for i := 0; i < x.n && !wanted; i++ {
		if x.live(i) && !x.fits(i, c.W) {
			wanted = x.cfg.BenefitTerms(c, i, owner, x.load[i], x.capacity[i], x.unit).Benefit() > thr
		}
	}
	if !wanted {
		return -1, Terms{}
	}
	to := -1
	for i := 0; i < x.n; i++ {
		if i == owner || !x.live(i) || !(x.capacity[i] > 0) || !x.fits(i, c.W) {
			continue
		}
		if to < 0 || x.load[i]/x.capacity[i] < x.load[to]/x.capacity[to] {
			to = i
		}
	}
	if to < 0 {
		return -1, Terms{}
	}
	routed := slices.Max(c.HomeWeight)
	x.home = append(x.home[:0], c.HomeWeight...)
	x.home[to] = max(x.home[to], routed)
	proj := *c
	proj.HomeWeight = x.home
	t := x.cfg.BenefitTerms(&proj, to, owner, x.load[to], x.capacity[to], x.unit)
	if t.Benefit() <= thr {
		return -1, Terms{}
	}
	return to, t
}

// newCtx computes u, T, capacity(i), B_i and the base load, and indexes the
// cohorts into idx (checking IDs are distinct).
func newCtx(cfg *Config, in *Input, idx map[control.CohortID]int32) (*tickCtx, error) {
	n := in.Nodes
	x := &tickCtx{
		cfg:      cfg,
		n:        n,
		state:    make([]NodeState, n),
		capacity: make([]float64, n),
		budget:   make([]float64, n),
		load:     make([]float64, n),
		placed:   make([]int, n),
	}
	if in.State != nil {
		copy(x.state, in.State)
	}
	clear(idx)
	sum := 0.0
	for k := range in.Cohorts {
		id := in.Cohorts[k].ID
		if _, dup := idx[id]; dup {
			return nil, fmt.Errorf("ownership: cohort %d appears twice in Input.Cohorts", id)
		}
		idx[id] = int32(k)
		sum += in.Cohorts[k].W
	}
	switch {
	case cfg.FixedUnit > 0:
		x.unit = cfg.FixedUnit
	case sum > 0:
		x.unit = sum / float64(len(in.Cohorts))
	default:
		x.unit = 1
	}
	x.total = sum
	if in.BaseLoad != nil {
		copy(x.load, in.BaseLoad)
		for _, b := range in.BaseLoad {
			x.total += b
		}
	}
	capSum := 0.0
	for i := 0; i < n; i++ {
		if x.live(i) {
			capSum += nodeCap(in, i)
		}
	}
	for i := 0; i < n; i++ {
		if capSum > 0 && x.live(i) {
			x.capacity[i] = x.total * nodeCap(in, i) / capSum * (1 + cfg.Slack)
			x.budget[i] = x.capacity[i] * (1 + cfg.BudgetSlack)
		}
	}
	return x, nil
}

func nodeCap(in *Input, i int) float64 {
	if in.Capacity == nil {
		return 1
	}
	return in.Capacity[i]
}

// Plan runs one tick of the greedy planner (SPEC §5, the tutorial's Table
// 4) and advances the planner's state: the changes it returns are assumed to
// be started this tick (their cohorts enter their cooldown).
func (p *Planner) Plan(in Input) (Plan, error) {
	if err := in.validate(); err != nil {
		return Plan{}, err
	}
	if p.started && in.Tick < p.lastTick {
		return Plan{}, fmt.Errorf("ownership: tick %d before the previous tick %d", in.Tick, p.lastTick)
	}
	cfg := &p.cfg
	x, err := newCtx(cfg, &in, p.idx)
	if err != nil {
		return Plan{}, err
	}
	tick := in.Tick
	out := Plan{Tick: tick, Unit: x.unit, Total: x.total}
	out.Stats.Cohorts = len(in.Cohorts)

	// Classify.
	p.ent = slices.Grow(p.ent[:0], len(in.Cohorts))[:len(in.Cohorts)]
	thW, thCold := cfg.ThetaW*x.unit, cfg.ThetaCold*x.unit
	for k := range in.Cohorts {
		c := &in.Cohorts[k]
		e := &p.ent[k]
		*e = entry{owner: -1}
		if o, ok := in.Owners[c.ID]; ok {
			e.owner = o
		}
		cost := c.AtomicCost
		if cost <= 0 {
			cost = 1
		}
		e.prio = c.W * cost
		e.hot = c.W > thW || c.FallbackCASShare > cfg.ThetaF
		if e.hot {
			out.Stats.Candidates++
		}
		if c.W < thCold {
			since, ok := p.coldSince[c.ID]
			if !ok {
				since = tick
				p.coldSince[c.ID] = tick
			}
			e.cold = tick-since >= cfg.ColdTicks
		} else if len(p.coldSince) > 0 {
			delete(p.coldSince, c.ID)
		}
	}

	published := 0
	var assign []Assignment
	keep := func(k int, node int) {
		x.load[node] += in.Cohorts[k].W
		x.placed[node]++
		published++
		assign = append(assign, Assignment{Cohort: in.Cohorts[k].ID, Owner: node})
	}
	hold := func(k int, node int, r Reason) {
		keep(k, node)
		out.Held = append(out.Held, Held{Cohort: in.Cohorts[k].ID, Node: node, Reason: r, W: in.Cohorts[k].W})
	}

	// In-flight moves: fixed at their destination.
	var inflight []control.CohortID
	if len(in.InFlight) > 0 {
		fl := slices.Clone(in.InFlight)
		slices.SortFunc(fl, func(a, b Transfer) int { return cmp.Compare(a.Cohort, b.Cohort) })
		for _, t := range fl {
			inflight = append(inflight, t.Cohort)
			k, ok := p.idx[t.Cohort]
			if !ok {
				continue
			}
			p.ent[k].state = stInFlight
			hold(int(k), t.To, ReasonInFlight)
		}
	}

	// Owned cohorts that vanished from the input.
	var gone []control.CohortID
	for id := range in.Owners {
		if _, ok := p.idx[id]; !ok {
			if _, fly := slices.BinarySearch(inflight, id); !fly {
				gone = append(gone, id)
			}
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		out.Evictions = append(out.Evictions, Eviction{Cohort: id, From: in.Owners[id], Reason: ReasonGone, Forced: true})
	}

	// Pinned: owned cohorts in cooldown on a live owner, or every owned
	// cohort while membership is unsettled. Their load is counted before
	// anything is placed.
	order := p.order[:0]
	for k := range p.ent {
		e := &p.ent[k]
		if e.state != stFree || e.owner < 0 {
			continue
		}
		if in.Unsettled || (x.live(e.owner) && p.inCooldown(&in.Cohorts[k], tick)) {
			e.state = stPinned
			order = append(order, ordKey{e.prio, in.Cohorts[k].ID, int32(k)})
		}
	}
	sortByPriority(order)
	for _, ok := range order {
		k := ok.k
		e := &p.ent[k]
		if published >= cfg.MaxPublished {
			out.Evictions = append(out.Evictions, Eviction{Cohort: in.Cohorts[k].ID, From: e.owner, Reason: ReasonMaxPublished, Forced: true})
			continue
		}
		r := ReasonCooldown
		if in.Unsettled {
			r = ReasonUnsettled
		}
		hold(int(k), e.owner, r)
	}

	// The greedy: owned or hot cohorts in descending W(c)·atomic_cost.
	moves, budgetMoves, installs, evicts := 0, 0, 0, 0
	if !in.Unsettled {
		order = order[:0]
		for k := range p.ent {
			e := &p.ent[k]
			if e.state == stFree && (e.owner >= 0 || e.hot) {
				order = append(order, ordKey{e.prio, in.Cohorts[k].ID, int32(k)})
			}
		}
		sortByPriority(order)
		canMove := func() bool {
			return cfg.Naive || (budgetMoves < cfg.MoveBudget && len(in.InFlight)+moves < cfg.MaxInFlight)
		}
		canEvict := func() bool { return cfg.Naive || evicts < cfg.EvictBudget }
		evict := func(k int, from int, r Reason, forced bool) {
			out.Evictions = append(out.Evictions, Eviction{Cohort: in.Cohorts[k].ID, From: from, Reason: r, Forced: forced})
			if !forced {
				evicts++
			}
		}
		move := func(k int, from, to int, r Reason, forced bool, t Terms) {
			c := &in.Cohorts[k]
			var stay Terms
			if x.live(from) {
				stay = cfg.BenefitTerms(c, from, from, x.load[from], x.capacity[from], x.unit)
			}
			out.Moves = append(out.Moves, Move{Cohort: c.ID, From: from, To: to, Reason: r, Forced: forced, Terms: t, Stay: stay})
			moves++
			if !forced {
				budgetMoves++
			}
			keep(k, to)
		}
		for _, ok := range order {
			k := int(ok.k)
			e := &p.ent[k]
			c := &in.Cohorts[k]
			o := e.owner
			e.state = stDone
			if published >= cfg.MaxPublished {
				if o >= 0 {
					evict(k, o, ReasonMaxPublished, true)
				} else {
					out.Stats.CapSkipped++
				}
				continue
			}
			switch {
			case o < 0: // hot, unowned: install?
				if !cfg.Naive && installs >= cfg.InstallBudget {
					out.Stats.InstallBudgetSkipped++
					continue
				}
				if p.inCooldown(c, tick) {
					out.Stats.CooldownSkipped++
					continue
				}
				to, t := x.best(c, -1)
				if to < 0 {
					if to, t = x.rescue(c, -1, cfg.ThetaB*x.unit); to >= 0 {
						out.Stats.Rescued++
					}
				}
				if to < 0 {
					out.Stats.Unplaced++
					continue
				}
				installs++
				out.Installs = append(out.Installs, Install{Cohort: c.ID, To: to, Terms: t})
				keep(k, to)

			case x.state[o] == NodeDown:
				to, t := -1, Terms{}
				if e.hot {
					to, t = x.best(c, -1)
				}
				if to < 0 {
					evict(k, o, ReasonOwnerDown, true)
					continue
				}
				move(k, o, to, ReasonOwnerDown, true, t)

			case x.state[o] == NodeLeaving:
				to, t := -1, Terms{}
				if e.hot {
					to, t = x.bestForced(c, o)
				}
				switch {
				case to < 0:
					evict(k, o, ReasonOwnerLeaving, true)
				case canMove():
					move(k, o, to, ReasonOwnerLeaving, false, t)
				default:
					hold(k, o, ReasonMoveBudget)
				}

			case !e.hot: // owned, live owner, not a candidate
				switch {
				case e.cold && canEvict():
					evict(k, o, ReasonCold, false)
				case e.cold:
					hold(k, o, ReasonEvictBudget)
				case x.fits(o, c.W):
					keep(k, o)
				case canEvict():
					evict(k, o, ReasonOverBudget, false)
				default:
					hold(k, o, ReasonEvictBudget)
				}

			default: // owned, live owner, hot
				to, t := x.best(c, o)
				rescued := false
				if to < 0 && !x.fits(o, c.W) {
					to, t = x.bestForced(c, o)
					if to < 0 {
						to, t = x.rescue(c, o, x.forcedThreshold(c))
						rescued = to >= 0
					}
				}
				switch {
				case to == o:
					keep(k, o)
				case to >= 0 && canMove():
					r := ReasonBenefit
					if !x.fits(o, c.W) {
						r = ReasonOverBudget
					}
					if rescued {
						out.Stats.Rescued++
					}
					move(k, o, to, r, false, t)
				case to >= 0:
					hold(k, o, ReasonMoveBudget)
				case !canEvict():
					hold(k, o, ReasonEvictBudget)
				case !x.fits(o, c.W):
					evict(k, o, ReasonOverBudget, false)
				default:
					evict(k, o, ReasonUnprofitable, false)
				}
			}
		}
	}
	p.order = order

	slices.SortFunc(assign, func(a, b Assignment) int { return cmp.Compare(a.Cohort, b.Cohort) })
	out.Assignment = assign
	out.Load, out.Capacity, out.Budget = x.load, x.capacity, x.budget
	out.Stats.Published = len(assign)

	// Advance the state.
	for _, m := range out.Moves {
		p.recordChange(m.Cohort, in.Cohorts[p.idx[m.Cohort]].KeyGroups, tick)
	}
	for _, s := range out.Installs {
		p.recordChange(s.Cohort, in.Cohorts[p.idx[s.Cohort]].KeyGroups, tick)
	}
	for _, ev := range out.Evictions {
		var kgs []control.KeyGroup
		if k, ok := p.idx[ev.Cohort]; ok {
			kgs = in.Cohorts[k].KeyGroups
		}
		p.recordChange(ev.Cohort, kgs, tick)
	}
	for id, t := range p.changedID {
		if tick-t >= cfg.CooldownTicks {
			delete(p.changedID, id)
		}
	}
	for kg, t := range p.changedKG {
		if tick-t >= cfg.CooldownTicks {
			delete(p.changedKG, kg)
		}
	}
	for id := range p.coldSince {
		if _, ok := p.idx[id]; !ok {
			delete(p.coldSince, id)
		}
	}
	p.started, p.lastTick = true, tick
	return out, nil
}

func (p *Planner) recordChange(id control.CohortID, kgs []control.KeyGroup, tick uint64) {
	p.changedID[id] = tick
	for _, kg := range kgs {
		p.changedKG[kg] = tick
	}
}

// KeyGroupInCooldown reports whether kg changed owner less than
// CooldownTicks before tick.
func (p *Planner) KeyGroupInCooldown(kg control.KeyGroup, tick uint64) bool {
	t, ok := p.changedKG[kg]
	return ok && tick-t < p.cfg.CooldownTicks
}

// RecordKeyGroupChanges starts the cooldown of key groups that changed
// owner at tick outside Plan's decisions (a caller that lets a re-cut move
// them; see package plane).
func (p *Planner) RecordKeyGroupChanges(kgs []control.KeyGroup, tick uint64) {
	for _, kg := range kgs {
		p.changedKG[kg] = tick
	}
}

// inCooldown reports whether c, or one of its key groups, changed owner less
// than CooldownTicks ago.
func (p *Planner) inCooldown(c *CohortStats, tick uint64) bool {
	cd := p.cfg.CooldownTicks
	if t, ok := p.changedID[c.ID]; ok && tick-t < cd {
		return true
	}
	if len(p.changedKG) == 0 {
		return false
	}
	for _, kg := range c.KeyGroups {
		if t, ok := p.changedKG[kg]; ok && tick-t < cd {
			return true
		}
	}
	return false
}

// sortByPriority orders cohorts by descending W(c)·atomic_cost, then
// ascending ID (priorities are finite: W and AtomicCost are validated).
func sortByPriority(order []ordKey) {
	slices.SortFunc(order, func(a, b ordKey) int {
		switch {
		case a.prio > b.prio:
			return -1
		case a.prio < b.prio:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
}

// NodeTerms is one node's row of an Explanation.
type NodeTerms struct {
	Node     int       `json:"node"`
	State    NodeState `json:"state"`
	Load     float64   `json:"load"`
	Capacity float64   `json:"capacity"`
	Budget   float64   `json:"budget"`
	// Fits reports load + W(c) ≤ B_i (always true in naive mode).
	Fits  bool  `json:"fits"`
	Terms Terms `json:"terms"`
}

// Explanation shows why a cohort is where it is: Benefit(c, i) at every node
// under the current assignment's loads (the cohort itself excluded).
type Explanation struct {
	Cohort control.CohortID `json:"cohort"`
	Owner  int              `json:"owner"` // −1 for none
	W      float64          `json:"w"`
	Unit   float64          `json:"unit"`
	Hot    bool             `json:"hot"`
	Nodes  []NodeTerms      `json:"nodes"`
	// Best is the argmax live node that fits with Benefit > θ_b·u, or −1.
	Best int `json:"best"`
}

// Explain evaluates the Benefit terms of one cohort at every node, for the
// dashboard. Loads are those of the current assignment (Input.Owners, with
// in-flight cohorts at their destinations), the cohort's own weight excluded.
// It reads no planner state.
func Explain(cfg Config, in Input, id control.CohortID) (Explanation, error) {
	if err := cfg.Validate(); err != nil {
		return Explanation{}, err
	}
	if err := in.validate(); err != nil {
		return Explanation{}, err
	}
	idx := map[control.CohortID]int32{}
	x, err := newCtx(&cfg, &in, idx)
	if err != nil {
		return Explanation{}, err
	}
	k, ok := idx[id]
	if !ok {
		return Explanation{}, fmt.Errorf("ownership: cohort %d not in the input", id)
	}
	where := make(map[control.CohortID]int, len(in.Owners))
	for cid, o := range in.Owners {
		where[cid] = o
	}
	for _, t := range in.InFlight {
		where[t.Cohort] = t.To
	}
	for cid, o := range where {
		if j, ok := idx[cid]; ok && cid != id {
			x.load[o] += in.Cohorts[j].W
			x.placed[o]++
		}
	}
	c := &in.Cohorts[k]
	owner := -1
	if o, ok := in.Owners[id]; ok {
		owner = o
	}
	priced := owner
	if owner >= 0 && x.state[owner] == NodeDown {
		priced = -1
	}
	ex := Explanation{Cohort: id, Owner: owner, W: c.W, Unit: x.unit,
		Hot: c.W > cfg.ThetaW*x.unit || c.FallbackCASShare > cfg.ThetaF}
	for i := 0; i < in.Nodes; i++ {
		ex.Nodes = append(ex.Nodes, NodeTerms{
			Node: i, State: x.state[i], Load: x.load[i], Capacity: x.capacity[i], Budget: x.budget[i],
			Fits:  x.fits(i, c.W),
			Terms: cfg.BenefitTerms(c, i, priced, x.load[i], x.capacity[i], x.unit),
		})
	}
	ex.Best, _ = x.best(c, priced)
	return ex, nil
}
