package ownership

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// OracleKeyGroup is one key group's totals over a whole workload.
type OracleKeyGroup struct {
	KG control.KeyGroup
	// W is the key group's total write weight.
	W float64
	// Home[i] is the part of W issued by transactions whose home is CN i
	// (len Nodes, or nil for none).
	Home []float64
}

// OracleInput is the offline problem.
type OracleInput struct {
	Nodes int
	// Capacity holds relative CN capacities (nil: equal).
	Capacity []float64
	// Slack bounds each CN's load by T·share(i)·(1+Slack); default (0) is
	// DefaultOracleSlack. Negative means no bound.
	Slack float64
	// KeyGroups are the workload's key groups, distinct.
	KeyGroups []OracleKeyGroup
	// Communities group key groups that move together; key groups in no
	// community are their own group. A key group may be in one community at
	// most; unknown key groups in a community are an error.
	Communities [][]control.KeyGroup
	// MaxGroups, if positive, places only the heaviest MaxGroups groups; the
	// rest stay on the fallback path (as the planner's MaxPublished would).
	MaxGroups int
	// Passes bounds the local-improvement passes (0: 16).
	Passes int
}

// DefaultOracleSlack is the oracle's default per-CN slack over the fair share,
// the guarded planner's B_i (1.05 × 1.20 ≈ 1.26).
const DefaultOracleSlack = 0.26

// OracleGroup is one placed (or unplaced) group.
type OracleGroup struct {
	KeyGroups []control.KeyGroup `json:"key_groups"`
	W         float64            `json:"w"`
	// Owner is the CN the group is assigned to, −1 if unplaced.
	Owner int `json:"owner"`
	// Local is Home[Owner]: the group's locally granted weight.
	Local float64 `json:"local"`
}

// OracleResult is the oracle's assignment.
type OracleResult struct {
	// Groups in descending weight (ties by first key group).
	Groups []OracleGroup `json:"groups"`
	// Owner maps each placed key group to its CN.
	Owner map[control.KeyGroup]int `json:"-"`
	// Load and Budget per CN.
	Load   []float64 `json:"load"`
	Budget []float64 `json:"budget"`
	// Local = Σ placed groups' Home[owner]; Total = Σ W. Local/Total is the
	// best achievable local-hit fraction under this grouping and budget.
	Local float64 `json:"local"`
	Total float64 `json:"total"`
	// OverBudget counts groups too heavy for any CN's remaining budget,
	// placed where they overshoot least; Unplaced counts groups beyond
	// MaxGroups.
	OverBudget int `json:"over_budget"`
	Unplaced   int `json:"unplaced"`
}

type ogroup struct {
	kgs   []control.KeyGroup
	w     float64
	home  []float64
	owner int
	pos   int // index in the owner's member list
}

// Oracle computes a balanced, locality-maximising assignment of groups to
// CNs from full knowledge of the workload: a greedy in descending weight
// (each group to the CN with the most home weight that has room, ties to the
// least loaded), then passes of local improvement — move a group to a CN
// with more of its home weight and room for it, or swap it with a group
// there when both fit and the local weight grows — until no pass improves.
// It is deterministic.
func Oracle(in OracleInput) (OracleResult, error) {
	n := in.Nodes
	if n < 1 || n >= control.MaxNodes {
		return OracleResult{}, fmt.Errorf("ownership: oracle: Nodes = %d: must be in [1, %d)", n, control.MaxNodes)
	}
	if in.Capacity != nil && len(in.Capacity) != n {
		return OracleResult{}, fmt.Errorf("ownership: oracle: len(Capacity) = %d, want %d", len(in.Capacity), n)
	}
	kgIdx := make(map[control.KeyGroup]int, len(in.KeyGroups))
	var errs []error
	for i, k := range in.KeyGroups {
		if _, dup := kgIdx[k.KG]; dup {
			errs = append(errs, fmt.Errorf("ownership: oracle: key group %d twice", k.KG))
		}
		kgIdx[k.KG] = i
		if !finiteNonneg(k.W) {
			errs = append(errs, fmt.Errorf("ownership: oracle: key group %d: W = %v", k.KG, k.W))
		}
		if k.Home != nil && len(k.Home) != n {
			errs = append(errs, fmt.Errorf("ownership: oracle: key group %d: len(Home) = %d, want %d", k.KG, len(k.Home), n))
		}
		for _, h := range k.Home {
			if !finiteNonneg(h) {
				errs = append(errs, fmt.Errorf("ownership: oracle: key group %d: Home entry %v", k.KG, h))
				break
			}
		}
		if len(errs) > 16 {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return OracleResult{}, err
	}

	// Build the groups.
	grouped := make([]bool, len(in.KeyGroups))
	var gs []*ogroup
	add := func(members []int) {
		g := &ogroup{home: make([]float64, n), owner: -1}
		for _, m := range members {
			k := &in.KeyGroups[m]
			g.kgs = append(g.kgs, k.KG)
			g.w += k.W
			for i, h := range k.Home {
				g.home[i] += min(h, k.W)
			}
		}
		slices.Sort(g.kgs)
		gs = append(gs, g)
	}
	for ci, com := range in.Communities {
		members := make([]int, 0, len(com))
		for _, kg := range com {
			m, ok := kgIdx[kg]
			if !ok {
				return OracleResult{}, fmt.Errorf("ownership: oracle: community %d: unknown key group %d", ci, kg)
			}
			if grouped[m] {
				return OracleResult{}, fmt.Errorf("ownership: oracle: key group %d in two communities (or twice)", kg)
			}
			grouped[m] = true
			members = append(members, m)
		}
		if len(members) > 0 {
			add(members)
		}
	}
	for m := range in.KeyGroups {
		if !grouped[m] {
			add([]int{m})
		}
	}
	slices.SortFunc(gs, func(a, b *ogroup) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.kgs[0], b.kgs[0])
	})

	res := OracleResult{Load: make([]float64, n), Budget: make([]float64, n)}
	for _, g := range gs {
		res.Total += g.w
	}
	capSum := 0.0
	for i := 0; i < n; i++ {
		capSum += oracleCap(in.Capacity, i)
	}
	for i := 0; i < n; i++ {
		switch {
		case in.Slack < 0:
			res.Budget[i] = math.Inf(1)
		case capSum > 0:
			s := in.Slack
			if s == 0 {
				s = DefaultOracleSlack
			}
			res.Budget[i] = res.Total * oracleCap(in.Capacity, i) / capSum * (1 + s)
		}
	}
	load := res.Load
	fits := func(i int, w float64) bool {
		b := res.Budget[i]
		return load[i]+w <= b+1e-9*max(1, b)
	}
	members := make([][]*ogroup, n)
	place := func(g *ogroup, i int) {
		g.owner = i
		g.pos = len(members[i])
		members[i] = append(members[i], g)
		load[i] += g.w
	}
	unplace := func(g *ogroup) {
		i := g.owner
		last := members[i][len(members[i])-1]
		members[i][g.pos] = last
		last.pos = g.pos
		members[i] = members[i][:len(members[i])-1]
		load[i] -= g.w
		g.owner = -1
	}

	// Greedy.
	placed := gs
	if in.MaxGroups > 0 && len(gs) > in.MaxGroups {
		placed = gs[:in.MaxGroups]
		res.Unplaced = len(gs) - in.MaxGroups
	}
	for _, g := range placed {
		bi := -1
		for i := 0; i < n; i++ {
			if !fits(i, g.w) {
				continue
			}
			if bi < 0 || g.home[i] > g.home[bi] || (g.home[i] == g.home[bi] && load[i] < load[bi]) {
				bi = i
			}
		}
		if bi < 0 { // too heavy anywhere: least relative overshoot
			res.OverBudget++
			best := math.Inf(1)
			for i := 0; i < n; i++ {
				r := (load[i] + g.w) / max(res.Budget[i], 1e-300)
				if bi < 0 || r < best || (r == best && g.home[i] > g.home[bi]) {
					bi, best = i, r
				}
			}
		}
		place(g, bi)
	}

	// Local improvement.
	passes := in.Passes
	if passes <= 0 {
		passes = 16
	}
	const eps = 1e-12
	const maxScan = 64
	for pass := 0; pass < passes; pass++ {
		improved := false
		for _, g := range placed {
			a := g.owner
			// Best relocation.
			bi, bg := -1, eps*max(1, g.w)
			for i := 0; i < n; i++ {
				if i != a && g.home[i]-g.home[a] > bg && fits(i, g.w) {
					bi, bg = i, g.home[i]-g.home[a]
				}
			}
			if bi >= 0 {
				unplace(g)
				place(g, bi)
				improved = true
				continue
			}
			// Swap with a group on the CN g prefers most.
			b := -1
			for i := 0; i < n; i++ {
				if i != a && g.home[i] > g.home[a] && (b < 0 || g.home[i] > g.home[b]) {
					b = i
				}
			}
			if b < 0 {
				continue
			}
			var swap *ogroup
			bestGain := eps * max(1, g.w)
			for j, h := range members[b] {
				if j >= maxScan {
					break
				}
				gain := g.home[b] - g.home[a] + h.home[a] - h.home[b]
				if gain <= bestGain {
					continue
				}
				if load[b]-h.w+g.w > res.Budget[b]+1e-9*max(1, res.Budget[b]) ||
					load[a]-g.w+h.w > res.Budget[a]+1e-9*max(1, res.Budget[a]) {
					continue
				}
				swap, bestGain = h, gain
			}
			if swap != nil {
				unplace(g)
				unplace(swap)
				place(g, b)
				place(swap, a)
				improved = true
			}
		}
		if !improved {
			break
		}
	}

	res.Owner = make(map[control.KeyGroup]int, len(in.KeyGroups))
	res.Groups = make([]OracleGroup, len(gs))
	for j, g := range gs {
		og := OracleGroup{KeyGroups: g.kgs, W: g.w, Owner: g.owner}
		if g.owner >= 0 {
			og.Local = g.home[g.owner]
			res.Local += og.Local
			for _, kg := range g.kgs {
				res.Owner[kg] = g.owner
			}
		}
		res.Groups[j] = og
	}
	return res, nil
}

func oracleCap(c []float64, i int) float64 {
	if c == nil {
		return 1
	}
	return max(c[i], 0)
}
