package cohortgen

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{ThetaMergeLow: 0.7, ThetaMergeHigh: 0.6, ThetaSplitLow: 0.3, ThetaSplitHigh: 0.2,
		DropFactor: 2, PublishBias: -1, SplitChecksPerTick: -1, RefineEvery: -1, StickyMaxTicks: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, f := range []string{"SelfWeight", "ThetaMergeLow", "ThetaSplitLow", "PersistWindows", "MaxCohortSize",
		"MinCohortSize", "MinWeight", "DropFactor", "MaxCohorts", "PublishBias", "MaxTrackedKGs",
		"SplitChecksPerTick", "RefineEvery", "RefineMaxKGs", "RefineMaxEdges", "RefineResolution", "StickyMaxTicks", "JaccardKeep"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not mention %s", f)
		}
	}
	if _, err := New(bad); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

// scenario drives a harness through a fixed workload with refinement on.
func scenario(t testing.TB, cfg Config, offer func(h *harness, out Output)) []string {
	h := newHarness(t, cfg)
	h.loads["a"] = load{w: kgRange(1, 40), ns: []int{30}, pick: 8}
	h.loads["b"] = load{w: kgRange(101, 140), ns: []int{30}, pick: 8}
	h.loads["c"] = load{w: []control.KeyGroup{5, 105}, ns: []int{3}}
	h.order = []string{"a", "b", "c"}
	var trace []string
	for range 40 {
		out := h.step()
		trace = append(trace, fmtOutput(&out, true))
		if offer != nil {
			offer(h, out)
		}
	}
	return trace
}

func kgRange(lo, hi control.KeyGroup) []control.KeyGroup {
	var out []control.KeyGroup
	for k := lo; k <= hi; k++ {
		out = append(out, k)
	}
	return out
}

// TestDeterministic: the same calls give the same outputs, Louvain
// refinement included.
func TestDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RefineEvery = 3
	a := scenario(t, cfg, nil)
	b := scenario(t, cfg, nil)
	if !reflect.DeepEqual(a, b) {
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("runs differ at step %d:\n%s\nvs\n%s", i+1, a[i], b[i])
			}
		}
	}
}

// TestAsyncRefinement: with RefineInline false, Step reports RefineDue; a
// result prepared right after that Step and offered is adopted by the next
// Step exactly as the inline mode would have adopted it one tick earlier;
// a stale result is discarded.
func TestAsyncRefinement(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RefineEvery = 4
	cfg.RefineInline = false
	cfg.ThetaMergeHigh, cfg.ThetaMergeLow = 100, 99 // only refinement groups
	dues, adopted := 0, 0
	scenario(t, cfg, func(h *harness, out Output) {
		adopted += len(out.Refined)
		if !out.RefineDue {
			return
		}
		dues++
		if req := h.gen.PrepareRefine(h.g); req != nil {
			res := Refine(req) // could run on any goroutine
			h.gen.OfferRefinement(res)
		}
	})
	if dues != 10 {
		t.Fatalf("RefineDue %d times in 40 ticks, want 10", dues)
	}
	if adopted == 0 {
		t.Fatal("no offered refinement was adopted")
	}

	// Stale: the region changes between PrepareRefine and the next Step.
	h := newHarness(t, DefaultConfig())
	h.loads["a"] = load{w: kgRange(1, 8), ns: []int{50}}
	h.loads["b"] = load{w: kgRange(21, 28), ns: []int{50}}
	h.order = []string{"a", "b"}
	cfg2 := DefaultConfig()
	cfg2.ThetaMergeHigh, cfg2.ThetaMergeLow = 100, 99 // only refinement groups
	cfg2.RefineEvery = 0
	h.gen, _ = New(cfg2)
	h.step()
	req := h.gen.PrepareRefine(h.g)
	if req == nil {
		t.Fatal("nothing to refine")
	}
	res := Refine(req)
	if !res.Adopt {
		t.Fatalf("refinement not adoptable: %+v", res)
	}
	// Make one region cohort change: its key group goes cold.
	delete(h.loads, "a")
	h.order = []string{"b"}
	h.loads["a2"] = load{w: kgRange(2, 8), ns: []int{50}}
	h.order = append(h.order, "a2")
	for range 120 {
		h.step()
	}
	h.gen.OfferRefinement(res)
	out := h.step()
	if len(out.Refined) != 0 {
		t.Fatalf("stale refinement adopted: %v", out.Refined)
	}
}

// TestPublishCap: at most MaxCohorts are published, the heaviest, and the
// published set does not churn when weights are equal-ish (PublishBias).
func TestPublishCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxCohorts = 3
	cfg.RefineEvery = 0
	h := newHarness(t, cfg)
	for i := range 6 {
		name := fmt.Sprint(i)
		base := control.KeyGroup(10 * i)
		h.loads[name] = load{w: kgRange(base+1, base+5), ns: []int{10 + 10*i}}
		h.order = append(h.order, name)
	}
	var out Output
	for range 10 {
		out = h.step()
	}
	if len(out.Cohorts) != 3 {
		t.Fatalf("published %d", len(out.Cohorts))
	}
	for _, c := range out.Cohorts {
		if c.KeyGroups[0] < 31 {
			t.Fatalf("a light cohort was published: %v", out.Cohorts)
		}
	}
	if out.Stats.Cohorts != 6 {
		t.Fatalf("tracked cohorts %d", out.Stats.Cohorts)
	}
	// Cohort 3 (kgs 31-35) gets 10% heavier than cohort 4 (41-45): within
	// the bias, nothing changes.
	h.loads["2"] = load{w: kgRange(21, 25), ns: []int{33}}
	h.loads["3"] = load{w: kgRange(31, 35), ns: []int{36}}
	h.loads["4"] = load{w: kgRange(41, 45), ns: []int{34}}
	for range 60 {
		out = h.step()
		if len(out.New)+len(out.Retired) > 0 {
			t.Fatalf("tick %d: published set churned: +%v -%v", out.Tick, out.New, out.Retired)
		}
	}
}

// TestMaxTracked: only the hottest MaxTrackedKGs key groups join.
func TestMaxTracked(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTrackedKGs = 10
	cfg.RefineEvery = 0
	h := newHarness(t, cfg)
	for i := range 20 {
		name := fmt.Sprint(i)
		h.loads[name] = load{w: []control.KeyGroup{control.KeyGroup(i + 1)}, ns: []int{i + 1}}
		h.order = append(h.order, name)
	}
	out := h.step()
	if out.Stats.TrackedKGs != 10 {
		t.Fatalf("tracked %d", out.Stats.TrackedKGs)
	}
	for _, c := range out.Cohorts {
		if c.KeyGroups[0] <= 10 {
			t.Fatalf("a cold key group joined: %v", out.Cohorts)
		}
	}
}

// TestRandomWorkloads drives the generator through drifting random
// workloads (groups that appear, grow, split and vanish) and checks the
// Output invariants after every Step: cohorts disjoint, sorted, unique ids,
// sizes within MaxCohortSize, at most MaxCohorts published.
func TestRandomWorkloads(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := DefaultConfig()
		cfg.MaxCohortSize = 16
		cfg.MinCohortSize = 3
		cfg.MaxCohorts = 20
		cfg.RefineEvery = 5
		cfg.RefineInline = seed%2 == 0
		h := newHarness(t, cfg)
		h.rng = rand.New(rand.NewPCG(seed, 99))
		rng := rand.New(rand.NewPCG(seed, 7))
		for tick := range 200 {
			if tick%20 == 0 {
				h.loads, h.order = map[string]load{}, nil
				for g := range 2 + rng.IntN(6) {
					lo := control.KeyGroup(rng.IntN(300))
					n := 3 + rng.IntN(40)
					name := fmt.Sprint(g)
					h.loads[name] = load{w: kgRange(lo, lo+control.KeyGroup(n)), ns: []int{5 + rng.IntN(60)}, pick: 2 + rng.IntN(8)}
					h.order = append(h.order, name)
				}
			}
			out := h.step() // checks the invariants
			if out.RefineDue {
				if req := h.gen.PrepareRefine(h.g); req != nil {
					h.gen.OfferRefinement(Refine(req))
				}
			}
		}
	}
}
