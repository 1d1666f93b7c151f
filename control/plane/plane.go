// Package plane is the planner's control loop as one pure state machine: it
// applies the compute nodes' ACCESS_SUMMARY heartbeats to the decayed global
// access graph and, once per tick, runs the cohort generator and the Benefit
// ownership planner and derives the next OwnerMap and the key groups whose
// owner changes. No goroutines, clock or I/O: the planner actor calls Apply
// for each heartbeat and Tick on its timer. The simulator runs the same
// generator and planner in virtual time (see the end of this comment).
//
// Promises:
//   - Tick returns a new OwnerMap only when the assignment changed (with
//     HoldRecuts: when some key group's owner changed), with
//     epoch = previous epoch + 1 (epochs are never reused or skipped).
//   - Every returned map passes control.OwnerMap.Validate: owners in
//     [0, Nodes), unique cohort ids, no key group in two cohorts.
//   - A re-formed cohort (the generator's merges, splits and refinements give
//     new ids) is judged by its key groups: its current owner is the node
//     owning the plurality of its key groups' write weight, so regrouping
//     alone never evicts and reinstalls locks that stay where they are.
//   - With GuardRecutMoves, a key group changes owner between two nodes only
//     by the planner's decision on its cohort (a move or an install, within
//     the planner's cooldown and budgets) or, when a re-cut puts it in a
//     cohort another node owns, outside its cooldown and toward the node
//     that runs more of its transactions; otherwise it stays with its owner
//     in a remnant of its previous cohort (or, when that cohort's id moved
//     to another node in the same tick, leaves the map until the planner
//     places it again).
//   - With KeepCuts, a key group whose owner does not change stays in the
//     cohort the current map has it in (unless next gives that id to
//     another node), so a published map re-cuts only the key groups that
//     are installed, evicted or moved; past Cohorts.MaxCohorts the most
//     split of the generator's cohorts take their own cuts again. The
//     map's cohorts then refine the generator's, and their ids may be
//     older than the generator's (the planner's decisions name the
//     generator's cohorts).
//   - The same heartbeats and ticks give the same maps (determinism).
//
// The simulator runs the same generator and planner with its own
// publishing (it models migrations itself); HoldRecuts and GuardRecutMoves
// are this loop's.
package plane

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/control/cohortgen"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/messages"
)

// Config configures a Loop. Start from DefaultConfig.
type Config struct {
	// Nodes is the number of compute nodes (owner indices 0..Nodes−1), at
	// most control.MaxNodes. Required.
	Nodes int
	// Fallback is the OwnerMap's static fallback table (TPC-C: the node of
	// each warehouse), copied into every map. May be empty.
	Fallback []uint8
	// Graph, Cohorts and Ownership configure the access graph, the cohort
	// generator and the planner (their packages document each field).
	Graph     accessgraph.GraphConfig
	Cohorts   cohortgen.Config
	Ownership ownership.Config
	// EvictBeforeMove splits a tick whose plan moves owned key groups from
	// one node to another into two epochs: the first takes the moving key
	// groups to the fallback path (the old owner stops granting), the next
	// Tick publishes the planned map (the new owner installs), and plans
	// nothing new. Without a live-migration protocol this is how a move
	// avoids two owners granting at once (SPEC §6; the caller advances to the
	// second epoch only after every node acknowledged the first). Default
	// false (the simulator models migrations itself).
	EvictBeforeMove bool
	// HoldRecuts publishes a new map only when some key group changes owner
	// (installed, evicted or moved to another node); cohorts re-cut among
	// the key groups one node already owns wait for the next such map. Why:
	// a re-cut changes nothing for routing or locality, but every published
	// re-cut makes the owner re-install cohorts and re-mark their lock
	// words (one CAS per slot touched under the new cohort; see package
	// actors/owner), and at steady state the generator re-cuts a few cohorts
	// on most ticks. With KeepCuts a map that only re-cuts already equals
	// the current one, so this matters only with KeepCuts off. Default
	// true.
	HoldRecuts bool
	// GuardRecutMoves keeps a key group with its owner when a re-cut puts
	// it in a cohort another node owns (the re-formed cohort inherits the
	// owner of most of its weight, InheritOwners) unless its cooldown has
	// passed and the new owner runs more of its transactions than the old
	// (graph home probabilities); kept key groups are published in a
	// remnant of their previous cohort. Why: without it, key groups shared
	// by regions on two nodes (TPC-C's remote Payment customers and remote
	// stock) change owner with every re-cut, outside the planner's cooldown
	// and migration budget — most of a steady cluster's epochs. Default
	// true.
	GuardRecutMoves bool
	// KeepCuts publishes a key group in the cohort the current map has it
	// in for as long as its owner does not change, however the generator
	// re-cuts it: a published map differs from the current one only in the
	// key groups that are installed, evicted or moved, which take their
	// new cohort's id. Why: HoldRecuts only delays re-cuts until the next
	// map that changes some owner, and at steady state most ticks change
	// some (a cold cohort evicted, a hot one installed); each published
	// re-cut costs its owner a give-back and a claim of the key group's
	// fence word (two CASes) and CAS grants in between, since a fence
	// names one activation (see "Key-group fences" in package
	// actors/owner). Published cohorts then refine the generator's: a
	// cohort the planner moves may leave its node as several activations.
	// When keeping the cuts would publish more than Cohorts.MaxCohorts
	// cohorts, the generator's cohorts split over the most fragments take
	// their own cuts again, one at a time, until the map is back under the
	// cap. Default true.
	KeepCuts bool
}

// DefaultConfig returns a config for n nodes with each package's defaults.
func DefaultConfig(n int) Config {
	return Config{Nodes: n, Graph: accessgraph.DefaultGraphConfig(), Cohorts: cohortgen.DefaultConfig(),
		Ownership: ownership.DefaultConfig(), HoldRecuts: true, GuardRecutMoves: true, KeepCuts: true}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes < 1 || c.Nodes >= control.MaxNodes {
		errs = append(errs, fmt.Errorf("plane: Nodes %d, want 1..%d", c.Nodes, control.MaxNodes-1))
	}
	for i, f := range c.Fallback {
		if int(f) >= c.Nodes && f != control.Unowned {
			errs = append(errs, fmt.Errorf("plane: Fallback[%d] = %d, want < Nodes", i, f))
			break
		}
	}
	if err := c.Cohorts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Ownership.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TickInput is what the caller knows at a tick besides the heartbeats.
type TickInput struct {
	// Tick is the planner tick number (strictly increasing).
	Tick uint64
	// State is each node's membership state (nil: all live).
	State []ownership.NodeState
	// Unsettled: membership is changing; the planner holds every owned
	// cohort where it is (SPEC §6: act only on settled membership).
	Unsettled bool
	// InFlight are moves started earlier and not finished.
	InFlight []ownership.Transfer
	// Capacity is each node's relative capacity (nil: equal).
	Capacity []float64
}

// Move is a set of key groups whose owner changes at the new epoch. From or
// To is −1 for the fallback path (an install or an eviction).
type Move struct {
	Cohort    control.CohortID
	KeyGroups []control.KeyGroup
	From, To  int
}

// Decision is one tick's outcome.
type Decision struct {
	// Map is the new OwnerMap, or nil when the assignment did not change.
	Map *control.OwnerMap
	// Moves lists the key groups changing owner between the current map and
	// Map (empty when Map is nil). Key groups of a cohort that keep their
	// owner are not listed even if the cohort was re-formed.
	Moves []Move
	// Plan is the planner's full output (Benefit terms, reasons, stats).
	Plan ownership.Plan
	// Cohorts is the generator's output of the tick.
	Cohorts cohortgen.Output
}

// Loop is the control loop. It is not safe for concurrent use.
type Loop struct {
	cfg     Config
	graph   *accessgraph.Graph
	gen     *cohortgen.Generator
	planner *ownership.Planner
	cur     *control.OwnerMap
	owners  map[control.KeyGroup]int
	// cohortOf is each owned key group's cohort in cur.
	cohortOf map[control.KeyGroup]control.CohortID
	homes    []accessgraph.Home
	ws       []float64 // per key group of the tick's cohorts: W (scratch)
	// final is the planned map held back by EvictBeforeMove.
	final *control.OwnerMap
}

// New returns a loop with an empty graph and no published map (epoch 0).
func New(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g, err := accessgraph.NewGraph(cfg.Graph)
	if err != nil {
		return nil, err
	}
	gen, err := cohortgen.New(cfg.Cohorts)
	if err != nil {
		return nil, err
	}
	p, err := ownership.New(cfg.Ownership)
	if err != nil {
		return nil, err
	}
	return &Loop{cfg: cfg, graph: g, gen: gen, planner: p,
		cur: &control.OwnerMap{Fallback: slices.Clone(cfg.Fallback)}, owners: map[control.KeyGroup]int{},
		cohortOf: map[control.KeyGroup]control.CohortID{}}, nil
}

// Apply adds one node's heartbeat to the graph (rejected summaries leave the
// graph unchanged and return the graph's typed error).
func (l *Loop) Apply(s *messages.AccessSummary) error { return l.graph.Apply(s) }

// Graph returns the access graph (read-only for callers).
func (l *Loop) Graph() *accessgraph.Graph { return l.graph }

// Current returns the last published map (epoch 0 and no cohorts before the
// first). Callers must not modify it.
func (l *Loop) Current() *control.OwnerMap { return l.cur }

// OwnerOf returns the owner of kg in the current map, or −1.
func (l *Loop) OwnerOf(kg control.KeyGroup) int {
	if o, ok := l.owners[kg]; ok {
		return o
	}
	return -1
}

// PrepareRefine snapshots the generator's next refinement region (nil when
// there is nothing to refine). Call it right after a Tick whose
// Decision.Cohorts.RefineDue is set (Cohorts.RefineInline false), run
// cohortgen.Refine on the request on any goroutine — it shares no memory
// with the loop — and hand the result to OfferRefinement: a Tick spends no
// time on Louvain, which costs several milliseconds at thousands of key
// groups.
func (l *Loop) PrepareRefine() *cohortgen.RefineRequest { return l.gen.PrepareRefine(l.graph) }

// OfferRefinement hands a cohortgen.Refine result to the generator: the next
// Tick adopts it if every cohort of its region still exists unchanged (and
// it keeps enough more weight inside cohorts), and discards it otherwise.
func (l *Loop) OfferRefinement(r *cohortgen.RefineResult) { l.gen.OfferRefinement(r) }

// Tick decays the graph, re-forms cohorts, plans ownership and returns the
// decision.
func (l *Loop) Tick(in TickInput) (Decision, error) {
	if l.final != nil {
		// Second half of a split move: publish the planned map.
		next := l.final
		l.final = nil
		next.Epoch = l.cur.Epoch + 1
		return l.publish(Decision{}, next), nil
	}
	l.graph.Tick()
	out := l.gen.Step(l.graph)
	cohorts := out.Cohorts
	pin := ownership.Input{Tick: in.Tick, Nodes: l.cfg.Nodes, State: in.State, Unsettled: in.Unsettled,
		InFlight: in.InFlight, Capacity: in.Capacity}
	pin.Cohorts, l.homes, l.ws = plannerCohorts(l.graph, cohorts, l.cfg.Nodes, l.homes, l.ws[:0])
	pin.Owners = l.inheritOwners(cohorts, l.ws)
	plan, err := l.planner.Plan(pin)
	if err != nil {
		return Decision{}, fmt.Errorf("plane: %w", err)
	}
	d := Decision{Plan: plan, Cohorts: out}
	next := plan.OwnerMap(l.cur.Epoch+1, l.cfg.Fallback, pin.Cohorts)
	if l.cfg.GuardRecutMoves {
		next = l.guardRecutMoves(next, plan, in)
	}
	if l.cfg.KeepCuts {
		next = l.keepCuts(next)
	}
	if sameAssignment(l.cur, next) || l.cfg.HoldRecuts && l.sameOwners(next) {
		return d, nil
	}
	if err := next.Validate(); err != nil {
		return Decision{}, fmt.Errorf("plane: planned map: %w", err)
	}
	if l.cfg.EvictBeforeMove {
		if first := l.withoutMoves(next); first != nil {
			l.final = next
			return l.publish(d, first), nil
		}
	}
	return l.publish(d, next), nil
}

// publish makes next the current map and fills d's Map and Moves.
func (l *Loop) publish(d Decision, next *control.OwnerMap) Decision {
	d.Moves = l.diff(next)
	d.Map = next
	l.setCurrent(next)
	return d
}

// Adopt replaces the current map with m, a map of the same epoch that the
// caller published instead of the planned one (a migration rolled back or
// its target left: the cohort stayed put or went to the fallback path). The
// next Tick plans from what was published, so a move that did not happen
// is planned again rather than assumed done. m must be valid and of the
// current epoch.
func (l *Loop) Adopt(m *control.OwnerMap) error {
	if m.Epoch != l.cur.Epoch {
		return fmt.Errorf("plane: adopt epoch %d, current %d", m.Epoch, l.cur.Epoch)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("plane: adopt: %w", err)
	}
	l.setCurrent(m)
	return nil
}

// Bump makes the current assignment current again at the next epoch and
// returns it: for a caller that republishes the same assignment because
// something outside it changed (the planner actor's roster).
func (l *Loop) Bump() *control.OwnerMap {
	next := l.cur.Clone()
	next.Epoch = l.cur.Epoch + 1
	l.setCurrent(next)
	return next
}

func (l *Loop) setCurrent(next *control.OwnerMap) {
	l.cur = next
	clear(l.owners)
	clear(l.cohortOf)
	for _, p := range next.Cohorts {
		for _, kg := range p.KeyGroups {
			l.owners[kg] = p.Owner
			l.cohortOf[kg] = p.ID
		}
	}
}

// withoutMoves returns next with every key group that moves between two
// nodes left out (to the fallback path), or nil when nothing moves.
func (l *Loop) withoutMoves(next *control.OwnerMap) *control.OwnerMap {
	var first *control.OwnerMap
	for i, p := range next.Cohorts {
		var keep []control.KeyGroup
		moved := false
		for _, kg := range p.KeyGroups {
			if from := l.OwnerOf(kg); from >= 0 && from != p.Owner {
				moved = true
				continue
			}
			keep = append(keep, kg)
		}
		if !moved {
			continue
		}
		if first == nil {
			first = next.Clone()
		}
		first.Cohorts[i].KeyGroups = keep
	}
	if first == nil {
		return nil
	}
	kept := first.Cohorts[:0]
	for _, p := range first.Cohorts {
		if len(p.KeyGroups) > 0 {
			kept = append(kept, p)
		}
	}
	first.Cohorts = kept
	return first
}

// diff lists the key groups whose owner differs between the current map and
// next, grouped by (next cohort, from, to); evictions (key groups owned now
// and absent from next) are grouped by their old cohort.
func (l *Loop) diff(next *control.OwnerMap) []Move {
	var moves []Move
	inNext := make(map[control.KeyGroup]bool, len(l.owners))
	for _, p := range next.Cohorts {
		byFrom := map[int][]control.KeyGroup{}
		for _, kg := range p.KeyGroups {
			inNext[kg] = true
			from := l.OwnerOf(kg)
			if from != p.Owner {
				byFrom[from] = append(byFrom[from], kg)
			}
		}
		for _, from := range slices.Sorted(mapKeys(byFrom)) {
			moves = append(moves, Move{Cohort: p.ID, KeyGroups: byFrom[from], From: from, To: p.Owner})
		}
	}
	for _, p := range l.cur.Cohorts {
		var gone []control.KeyGroup
		for _, kg := range p.KeyGroups {
			if !inNext[kg] {
				gone = append(gone, kg)
			}
		}
		if len(gone) > 0 {
			moves = append(moves, Move{Cohort: p.ID, KeyGroups: gone, From: p.Owner, To: -1})
		}
	}
	return moves
}

// inheritOwners gives each cohort its current owner (see InheritOwners),
// with the key groups' write weights ws (PlannerCohorts's, in the order of
// the cohorts' key groups) instead of graph look-ups.
func (l *Loop) inheritOwners(cohorts []control.Cohort, ws []float64) map[control.CohortID]int {
	return inheritOwners(cohorts, l.cfg.Nodes, func(k int, _ control.KeyGroup) float64 { return ws[k] },
		func(kg control.KeyGroup) (int, bool) {
			o, ok := l.owners[kg]
			return o, ok
		})
}

// InheritOwners gives each cohort its current owner: the node owning the
// largest share of its key groups' write weight w, by ownerOf (the
// installed map). The generator re-forms cohorts under new ids; judging a
// re-formed cohort by its key groups rather than its id keeps the planner
// from evicting and reinstalling locks that stay where they are. Cohorts
// with no owned key group are left out (unowned).
func InheritOwners(cohorts []control.Cohort, nodes int, w func(control.KeyGroup) float64,
	ownerOf func(control.KeyGroup) (int, bool)) map[control.CohortID]int {
	return inheritOwners(cohorts, nodes, func(_ int, kg control.KeyGroup) float64 { return w(kg) }, ownerOf)
}

// inheritOwners is InheritOwners with w given the key group's index k in
// the concatenation of the cohorts' key groups.
func inheritOwners(cohorts []control.Cohort, nodes int, w func(k int, kg control.KeyGroup) float64,
	ownerOf func(control.KeyGroup) (int, bool)) map[control.CohortID]int {
	owners := make(map[control.CohortID]int, len(cohorts))
	share := make([]float64, nodes)
	k := 0
	for _, c := range cohorts {
		clear(share)
		found := false
		for _, kg := range c.KeyGroups {
			if o, ok := ownerOf(kg); ok && o >= 0 && o < len(share) {
				// The tiny constant lets a cohort of weightless key groups
				// still inherit their owner.
				share[o] += w(k, kg) + 1e-9
				found = true
			}
			k++
		}
		if !found {
			continue
		}
		best := 0
		for i := range share {
			if share[i] > share[best] {
				best = i
			}
		}
		owners[c.ID] = best
	}
	return owners
}

// PlannerCohorts builds the planner's view of cohorts from the graph: each
// cohort's write weight W, its writers' home distribution (HomeWeight) and
// its share of the cluster's fallback CAS traffic. homes is scratch space,
// returned for reuse.
func PlannerCohorts(g *accessgraph.Graph, cohorts []control.Cohort, nodes int, homes []accessgraph.Home) ([]ownership.CohortStats, []accessgraph.Home) {
	out, homes, _ := plannerCohorts(g, cohorts, nodes, homes, nil)
	return out, homes
}

// plannerCohorts is PlannerCohorts; it also appends each key group's write
// weight to ws (in the order of the cohorts' key groups) and returns it.
// One id look-up per key group instead of one per accessor; the home
// distribution is read in storage order (each CN's entry is added once per
// key group, so the order of the sums does not change).
func plannerCohorts(g *accessgraph.Graph, cohorts []control.Cohort, nodes int, homes []accessgraph.Home, ws []float64) ([]ownership.CohortStats, []accessgraph.Home, []float64) {
	out := make([]ownership.CohortStats, 0, len(cohorts))
	cas := make([]float64, len(cohorts))
	// One backing array for every cohort's HomeWeight.
	hw := make([]float64, nodes*len(cohorts))
	totalCAS := 0.0
	for ci, c := range cohorts {
		cs := ownership.CohortStats{ID: c.ID, KeyGroups: c.KeyGroups, HomeWeight: hw[ci*nodes : (ci+1)*nodes : (ci+1)*nodes]}
		for _, kg := range c.KeyGroups {
			id, ok := g.ID(kg)
			if !ok {
				// Unknown: W, homes and fallback CAS are all 0.
				cs.W += 0
				cas[ci] += 0
				ws = append(ws, 0)
				continue
			}
			w := g.WOf(id)
			ws = append(ws, w)
			cs.W += w
			homes = g.HomesOf(id, homes[:0])
			for _, h := range homes {
				if h.Node >= 0 && h.Node < nodes {
					cs.HomeWeight[h.Node] += w * h.P
				}
			}
			cas[ci] += g.FallbackCASOf(id)
		}
		totalCAS += cas[ci]
		out = append(out, cs)
	}
	if totalCAS > 0 {
		for i := range out {
			out[i].FallbackCASShare = cas[i] / totalCAS
		}
	}
	return out, homes, ws
}

// sameAssignment reports equal assignments (epochs aside).
// guardRecutMoves returns next with the key groups a re-cut would move
// between two nodes kept with their owners (see Config.GuardRecutMoves),
// and starts the cooldown of those it lets move.
func (l *Loop) guardRecutMoves(next *control.OwnerMap, plan ownership.Plan, in TickInput) *control.OwnerMap {
	tick := in.Tick
	up := func(node int) bool {
		return in.State == nil || node < len(in.State) && in.State[node] == ownership.NodeUp
	}
	decided := map[control.CohortID]bool{}
	for _, m := range plan.Moves {
		decided[m.Cohort] = true
	}
	for _, in := range plan.Installs {
		decided[in.Cohort] = true
	}
	type remnant struct {
		owner int
		kgs   []control.KeyGroup
	}
	var remnants map[control.CohortID]*remnant
	var moved []control.KeyGroup
	var out *control.OwnerMap
	inNext := make(map[control.KeyGroup]bool, len(l.owners))
	for i, p := range next.Cohorts {
		for _, kg := range p.KeyGroups {
			inNext[kg] = true
			if _, owned := l.owners[kg]; !owned {
				moved = append(moved, kg) // installed: its cooldown starts
			}
		}
		if decided[p.ID] {
			continue
		}
		var keep []control.KeyGroup
		for j, kg := range p.KeyGroups {
			from, owned := l.owners[kg]
			if !owned || from == p.Owner {
				if keep != nil {
					keep = append(keep, kg)
				}
				continue
			}
			if !up(from) || !l.planner.KeyGroupInCooldown(kg, tick) &&
				l.graph.HomeProb(kg, p.Owner) > l.graph.HomeProb(kg, from) {
				moved = append(moved, kg)
				if keep != nil {
					keep = append(keep, kg)
				}
				continue
			}
			if keep == nil {
				keep = append(make([]control.KeyGroup, 0, len(p.KeyGroups)), p.KeyGroups[:j]...)
			}
			if remnants == nil {
				remnants = map[control.CohortID]*remnant{}
			}
			prev := l.cohortOf[kg]
			r := remnants[prev]
			if r == nil {
				r = &remnant{owner: from}
				remnants[prev] = r
			}
			r.kgs = append(r.kgs, kg)
		}
		if keep == nil {
			continue
		}
		if out == nil {
			out = next.Clone()
		}
		out.Cohorts[i].KeyGroups = keep
	}
	for kg := range l.owners {
		if !inNext[kg] {
			moved = append(moved, kg) // evicted: its cooldown starts
		}
	}
	if out == nil {
		l.planner.RecordKeyGroupChanges(moved, tick)
		return next
	}
	// A remnant takes its previous cohort's id: as a new cohort when next
	// does not use that id, joined to it when next gives that id to the
	// same owner. When next gives the id to another node (rare: the id's
	// cohort moved this very tick) the remnant leaves the map: following
	// the id would move its key groups inside their cooldown, and there is
	// no other id to give it.
	at := make(map[control.CohortID]int, len(out.Cohorts))
	for i, p := range out.Cohorts {
		at[p.ID] = i
	}
	for _, id := range slices.Sorted(maps.Keys(remnants)) {
		r := remnants[id]
		i, used := at[id]
		switch {
		case !used:
			slices.Sort(r.kgs)
			out.Cohorts = append(out.Cohorts, control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: r.kgs}, Owner: r.owner})
		case out.Cohorts[i].Owner == r.owner:
			out.Cohorts[i].KeyGroups = append(out.Cohorts[i].KeyGroups, r.kgs...)
			slices.Sort(out.Cohorts[i].KeyGroups)
		default:
			// Evicted (to the fallback path) rather than moved with the
			// id outside their cooldown: the planner places them again.
			moved = append(moved, r.kgs...)
		}
	}
	slices.SortFunc(out.Cohorts, func(a, b control.Placement) int { return cmp.Compare(a.ID, b.ID) })
	l.planner.RecordKeyGroupChanges(moved, tick)
	return out
}

// keepCuts returns next with every key group whose owner does not change
// published in its current cohort (Config.KeepCuts). An id keeps one owner:
// where next places the generator's cohort of that id on another node, the
// key groups that stayed take their next cohort's id instead, so the result
// places each id on the owner next gives it or, for an id next does not
// use, on its owner in the current map. Past Cohorts.MaxCohorts, the
// generator's cohorts split over the most kept cohorts take their own cuts
// again, one at a time, until the map is back under the cap (or all of next
// is). It returns next itself when nothing is kept.
func (l *Loop) keepCuts(next *control.OwnerMap) *control.OwnerMap {
	if len(l.owners) == 0 {
		return next
	}
	nextOwner := make(map[control.CohortID]int, len(next.Cohorts))
	for _, p := range next.Cohorts {
		nextOwner[p.ID] = p.Owner
	}
	// pub[i][j] is the id of next.Cohorts[i].KeyGroups[j]; size counts
	// each id's key groups.
	pub := make([][]control.CohortID, len(next.Cohorts))
	size := make(map[control.CohortID]int, len(next.Cohorts))
	kept := false
	for i, p := range next.Cohorts {
		pub[i] = make([]control.CohortID, len(p.KeyGroups))
		for j, kg := range p.KeyGroups {
			id := p.ID
			if o, ok := l.owners[kg]; ok && o == p.Owner {
				prev := l.cohortOf[kg]
				if at, used := nextOwner[prev]; !used || at == p.Owner {
					id = prev
				}
			}
			kept = kept || id != p.ID
			pub[i][j] = id
			size[id]++
		}
	}
	if !kept {
		return next
	}
	if len(size) > l.cfg.Cohorts.MaxCohorts {
		// Merge back the generator's cohorts spread over the most ids
		// first: each merge re-cuts its key groups once (a give-back and
		// a claim of their fences) and removes the ids left empty.
		pieces := make([]int, len(next.Cohorts))
		order := make([]int, len(next.Cohorts))
		for i := range next.Cohorts {
			order[i] = i
			ids := map[control.CohortID]bool{}
			for _, id := range pub[i] {
				ids[id] = true
			}
			pieces[i] = len(ids)
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(pieces[b], pieces[a]) })
		for _, i := range order {
			if len(size) <= l.cfg.Cohorts.MaxCohorts || pieces[i] <= 1 {
				break
			}
			to := next.Cohorts[i].ID
			for j, id := range pub[i] {
				if id == to {
					continue
				}
				if size[id]--; size[id] == 0 {
					delete(size, id)
				}
				size[to]++
				pub[i][j] = to
			}
		}
	}
	groups := make(map[control.CohortID]*control.Placement, len(size))
	for i, p := range next.Cohorts {
		for j, kg := range p.KeyGroups {
			id := pub[i][j]
			g := groups[id]
			if g == nil {
				g = &control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: make([]control.KeyGroup, 0, size[id])}, Owner: p.Owner}
				groups[id] = g
			}
			g.KeyGroups = append(g.KeyGroups, kg)
		}
	}
	out := &control.OwnerMap{Epoch: next.Epoch, Fallback: next.Fallback, Cohorts: make([]control.Placement, 0, len(groups))}
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		g := groups[id]
		slices.Sort(g.KeyGroups)
		out.Cohorts = append(out.Cohorts, *g)
	}
	return out
}

// sameOwners reports whether next gives every key group the owner the
// current map gives it (and owns no other key group).
func (l *Loop) sameOwners(next *control.OwnerMap) bool {
	n := 0
	for _, p := range next.Cohorts {
		for _, kg := range p.KeyGroups {
			if o, ok := l.owners[kg]; !ok || o != p.Owner {
				return false
			}
		}
		n += len(p.KeyGroups)
	}
	return n == len(l.owners)
}

func sameAssignment(a, b *control.OwnerMap) bool {
	if len(a.Cohorts) != len(b.Cohorts) {
		return false
	}
	for i := range a.Cohorts {
		x, y := a.Cohorts[i], b.Cohorts[i]
		if x.ID != y.ID || x.Owner != y.Owner || !slices.Equal(x.KeyGroups, y.KeyGroups) {
			return false
		}
	}
	return true
}

func mapKeys[V any](m map[int]V) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
