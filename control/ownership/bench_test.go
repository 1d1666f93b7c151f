package ownership

import (
	"math/rand/v2"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// benchInput builds the tutorial's planner-tick shape: cohorts × kgsPer key
// groups on nodes CNs (1,024 × 9 = 9,216 key groups on 8 CNs), weights with
// an exponential spread, each cohort homed mostly (70–95%) on one CN, shifted
// by shift CNs (a drift).
func benchInput(cohorts, kgsPer, nodes, shift int) Input {
	r := rand.New(rand.NewPCG(1, 2))
	in := Input{Nodes: nodes, Owners: map[control.CohortID]int{}}
	for c := range cohorts {
		cs := CohortStats{ID: control.CohortID(c + 1), W: 1 + r.ExpFloat64()*100, HomeWeight: make([]float64, nodes)}
		for k := range kgsPer {
			cs.KeyGroups = append(cs.KeyGroups, control.KeyGroup(c*kgsPer+k))
		}
		home := (c + shift) % nodes
		local := 0.7 + 0.25*r.Float64()
		cs.HomeWeight[home] = cs.W * local
		for i := range nodes {
			if i != home {
				cs.HomeWeight[i] = cs.W * (1 - local) / float64(nodes-1)
			}
		}
		if c%50 == 0 {
			cs.FallbackCASShare = 0.02
		}
		in.Cohorts = append(in.Cohorts, cs)
	}
	return in
}

func benchPlan(b *testing.B, cohorts, kgsPer, nodes int) {
	cfg := DefaultConfig()
	b.Run("steady", func(b *testing.B) {
		// Warm up until the plan no longer changes anything.
		in := benchInput(cohorts, kgsPer, nodes, 0)
		p, _ := New(cfg)
		tick := uint64(1)
		for ; tick < 100; tick++ {
			in.Tick = tick
			plan, err := p.Plan(in)
			if err != nil {
				b.Fatal(err)
			}
			clear(in.Owners)
			for _, a := range plan.Assignment {
				in.Owners[a.Cohort] = a.Owner
			}
			if len(plan.Moves)+len(plan.Installs)+len(plan.Evictions) == 0 && tick > cfg.CooldownTicks {
				break
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			in.Tick = tick
			tick++
			if _, err := p.Plan(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("coldstart", func(b *testing.B) {
		in := benchInput(cohorts, kgsPer, nodes, 0)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			p, _ := New(cfg)
			if _, err := p.Plan(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("drift", func(b *testing.B) {
		// Every tick the homes shift by one CN: every hot cohort wants to
		// move, the move budget and cooldowns bind.
		ins := []Input{benchInput(cohorts, kgsPer, nodes, 0), benchInput(cohorts, kgsPer, nodes, 1)}
		p, _ := New(cfg)
		owners := map[control.CohortID]int{}
		tick := uint64(1)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			in := ins[tick%2]
			in.Tick = tick
			in.Owners = owners
			tick++
			plan, err := p.Plan(in)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			owners = make(map[control.CohortID]int, len(plan.Assignment))
			for _, a := range plan.Assignment {
				owners[a.Cohort] = a.Owner
			}
			b.StartTimer()
		}
	})
}

// BenchmarkPlan is the SPEC §11 planner budget: 1,024 cohorts × 9 key groups
// (9,216) on 8 CNs, ≤ 5 ms per tick.
func BenchmarkPlan(b *testing.B) { benchPlan(b, 1024, 9, 8) }

// BenchmarkPlanScale is the simulator's scale point: 1,000,000 key groups in
// 15,625 cohorts of 64 on 64 CNs (tick ≤ 100 ms).
func BenchmarkPlanScale(b *testing.B) { benchPlan(b, 15625, 64, 64) }

// BenchmarkOracle: 9,216 key groups in 1,024 communities on 8 CNs.
func BenchmarkOracle(b *testing.B) {
	in := benchInput(1024, 9, 8, 0)
	var oin OracleInput
	oin.Nodes = 8
	for _, c := range in.Cohorts {
		var com []control.KeyGroup
		for _, kg := range c.KeyGroups {
			home := make([]float64, 8)
			for i := range home {
				home[i] = c.HomeWeight[i] / 9
			}
			oin.KeyGroups = append(oin.KeyGroups, OracleKeyGroup{KG: kg, W: c.W / 9, Home: home})
			com = append(com, kg)
		}
		oin.Communities = append(oin.Communities, com)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Oracle(oin); err != nil {
			b.Fatal(err)
		}
	}
}
