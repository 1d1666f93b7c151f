package ownership

import (
	"math/rand/v2"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// leverBLoop is a toy of the tutorial's Lever B feedback loop (ch. 8 §6) on
// the legacy TPC-C encoding: every transaction writes a handful of cohorts
// drawn uniformly (key groups mixed across warehouses, so a cohort carries
// no warehouse information), and routing follows ownership: a transaction
// runs on the CN owning most of its write set, else on its warehouse's CN
// (home_wh % N). The planner sees the decayed write weights and homes and
// its plan is applied at once. It returns, per tick, the executed-load
// imbalance (max / mean over CNs) and the number of owned cohorts.
func leverBLoop(t testing.TB, cfg Config, ticks int) (imbalance []float64, owned []int) {
	const (
		nodes      = 4
		cohorts    = 256
		warehouses = 16
		txns       = 2000
		writes     = 8
		lambda     = 0.8
	)
	r := rand.New(rand.NewPCG(7, 11))
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float64, cohorts)
	home := make([][]float64, cohorts)
	for c := range home {
		home[c] = make([]float64, nodes)
	}
	owners := map[control.CohortID]int{}
	ws := make([]int, writes)
	for tick := 1; tick <= ticks; tick++ {
		cnt := make([][nodes]float64, cohorts)
		exec := make([]float64, nodes)
		for range txns {
			wh := r.IntN(warehouses)
			var votes [nodes]int
			for j := range ws {
				ws[j] = r.IntN(cohorts)
				if o, ok := owners[control.CohortID(ws[j]+1)]; ok {
					votes[o]++
				}
			}
			h := wh % nodes
			for i := range votes {
				if votes[i] > votes[h] {
					h = i
				}
			}
			exec[h]++
			for _, c := range ws {
				cnt[c][h]++
			}
		}
		in := Input{Tick: uint64(tick), Nodes: nodes, Owners: owners}
		for c := range w {
			w[c] *= lambda
			for i := range home[c] {
				home[c][i] = home[c][i]*lambda + cnt[c][i]
				w[c] += cnt[c][i]
			}
			hw := append([]float64(nil), home[c]...)
			in.Cohorts = append(in.Cohorts, CohortStats{ID: control.CohortID(c + 1), KeyGroups: []control.KeyGroup{uint64(c)}, W: w[c], HomeWeight: hw})
		}
		plan, err := p.Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		owners = map[control.CohortID]int{}
		for _, a := range plan.Assignment {
			owners[a.Cohort] = a.Owner
		}
		mx, sum := 0.0, 0.0
		for _, e := range exec {
			mx = max(mx, e)
			sum += e
		}
		imbalance = append(imbalance, mx/(sum/nodes))
		owned = append(owned, len(owners))
	}
	return imbalance, owned
}

// TestLeverBLoop: fed by routing-follows-ownership, the naive planner piles
// the cohorts and the transactions onto one CN (the collapse), while the
// guarded planner keeps every CN under 1.5 × the mean load (SPEC §11).
func TestLeverBLoop(t *testing.T) {
	const ticks = 40
	naive, naiveOwned := leverBLoop(t, NaiveConfig(), ticks)
	guarded, guardedOwned := leverBLoop(t, DefaultConfig(), ticks)
	t.Logf("naive   imbalance %.2f → %.2f, owned %d → %d", naive[0], naive[ticks-1], naiveOwned[0], naiveOwned[ticks-1])
	t.Logf("guarded imbalance %.2f → %.2f, owned %d → %d", guarded[0], guarded[ticks-1], guardedOwned[0], guardedOwned[ticks-1])
	for i := 9; i < ticks; i++ {
		if naive[i] < 3 {
			t.Errorf("naive: tick %d imbalance %.2f, want the collapse (≥ 3 of 4: one CN runs nearly everything)", i+1, naive[i])
		}
	}
	for i := 5; i < ticks; i++ { // after warm-up
		if guarded[i] > 1.5 {
			t.Errorf("guarded: tick %d imbalance %.2f > 1.5", i+1, guarded[i])
		}
	}
}
