package sim

import (
	"testing"
	"time"

	"github.com/aura-runtime/aura/workload/tpcc"
)

// Lever B on the legacy encoding (SPEC §5 "Lever B and collapse", §11): the
// tutorial's negative result reproduced on demand, and the guarded design's
// stability on the same workload. Small sizes: 8 warehouses, 4 CNs, 32
// clients, 1 s of warm-up and 2 s measured (30 planner ticks).

func leverRun(t *testing.T, mode, lever string, d time.Duration) *Outcome {
	t.Helper()
	wl := smallTPCC(t, 8, tpcc.EncodingLegacy)
	return run(t, Config{Mode: mode, LeverB: lever, Workload: wl, CNs: 4, Clients: 32,
		Duration: d, Warmup: time.Second, Seed: 7})
}

// maxOverMean returns max(xs)/mean(xs) (0 for an idle cluster).
func maxOverMean[T float64 | uint64](xs []T) float64 {
	var sum, mx float64
	for _, x := range xs {
		sum += float64(x)
		mx = max(mx, float64(x))
	}
	if sum == 0 {
		return 0
	}
	return mx / (sum / float64(len(xs)))
}

// TestLeverBLegacyNoGain: under the legacy encoding every key group mixes
// all warehouses, so cohort ownership carries no information beyond
// warehouse routing (seed 001 §7). Aura learns far less locality than on
// the reshaped encoding and does not beat static partitioning; with
// routing left static (--lever-b off, the tutorial's "cohort planner on,
// Lever B off") its locality is the chance level of the tutorial's 17%.
// mn-only pays ≈ 18 atomics per transaction here (inserts are locked by
// CAS too), against the tutorial's 13.51.
func TestLeverBLegacyNoGain(t *testing.T) {
	const d = 500 * time.Millisecond
	mn := leverRun(t, "mn-only", LeverGuarded, d).Result
	st := leverRun(t, "static", LeverGuarded, d).Result
	au := leverRun(t, "aura", LeverGuarded, d).Result
	off := leverRun(t, "aura", LeverOff, d).Result
	for _, r := range []struct {
		name string
		res  float64
		loc  float64
		at   float64
		rem  float64
	}{{"mn-only", mn.ThroughputTPS, mn.LocalHit, mn.AtomicPerTxn, mn.RemoteLockOps},
		{"static", st.ThroughputTPS, st.LocalHit, st.AtomicPerTxn, st.RemoteLockOps},
		{"aura guarded", au.ThroughputTPS, au.LocalHit, au.AtomicPerTxn, au.RemoteLockOps},
		{"aura lever-b off", off.ThroughputTPS, off.LocalHit, off.AtomicPerTxn, off.RemoteLockOps}} {
		t.Logf("legacy %-16s tps %8.0f  local %.3f  atomics/txn %5.2f  remote locks/txn %5.2f", r.name, r.res, r.loc, r.at, r.rem)
	}
	if mn.AtomicPerTxn < 15 {
		t.Errorf("mn-only: %.2f atomics/txn, want ≈ 18 (every lock and insert by MN CAS)", mn.AtomicPerTxn)
	}
	if au.LocalHit > 0.8 {
		t.Errorf("aura (guarded) on legacy: local hit %.3f, want well below the reshaped encoding's ≥ 0.95", au.LocalHit)
	}
	if au.ThroughputTPS > st.ThroughputTPS {
		t.Errorf("aura (guarded) on legacy: %.0f txn/s beats static's %.0f: legacy key groups should carry no gain", au.ThroughputTPS, st.ThroughputTPS)
	}
	if au.RemoteLockOps < 10*st.RemoteLockOps {
		t.Errorf("aura (guarded) on legacy: %.2f remote locks/txn, want ≫ static's %.2f", au.RemoteLockOps, st.RemoteLockOps)
	}
	if off.LocalHit < 0.1 || off.LocalHit > 0.4 {
		t.Errorf("aura with static routing on legacy: local hit %.3f, want the chance level near 1/4 (tutorial: 17%%)", off.LocalHit)
	}
}

// TestLeverBNaiveCollapse: routing by the owner of the primary write key
// group (router.RouteNaive) with the v25 planner (ownership.NaiveConfig: no
// load term, budget or churn bounds) and the v25 generator (cohortgen.Naive:
// no size cap of 64, no hysteresis, splits or refinement) collapses the
// published cohort set by more than 10× within ten ticks of its first full
// publication and funnels the transactions onto one CN (seed 001 §6: 1,024
// → 20 cohorts in five ticks, one CN at 100%). The loop: merges of chance
// co-access build cohorts spanning the primary key groups of several
// warehouses; the naive planner gives each to the CN issuing most of its
// writes, routing then sends all their transactions there, which makes that
// CN the argmax of the rest. With the guarded generator the same routing
// and planner stay balanced; with the naive generator and the guarded
// router and planner the cohorts still merge (more slowly) but no CN is
// funnelled.
func TestLeverBNaiveCollapse(t *testing.T) {
	out := leverRun(t, "aura", LeverNaive, 2*time.Second)
	c := out.Cohorts
	peak, at := 0, 0
	for i, n := range c[:5] {
		if n > peak {
			peak, at = n, i
		}
	}
	low := peak
	for _, n := range c[at:min(len(c), at+11)] {
		low = min(low, n)
	}
	t.Logf("naive: cohorts per tick %v", c)
	for i := range min(8, len(out.TickCNCommitted)) {
		t.Logf("naive: tick %d cohorts %d home commits %v", i+1, c[i], out.TickCNCommitted[i])
	}
	t.Logf("naive: peak %d at tick %d, min %d within 10 ticks (%.1f×); CN busy %v (max/mean %.2f); home commits %v (max/mean %.2f)",
		peak, at+1, low, float64(peak)/float64(max(low, 1)), out.CNBusy, maxOverMean(out.CNBusy), out.CNCommitted, maxOverMean(out.CNCommitted))
	if peak < 100 || low*10 >= peak {
		t.Errorf("naive: cohorts %d → %d within 10 ticks, want a fall of more than 10×", peak, low)
	}
	if r := maxOverMean(out.CNBusy); r < 2.5 {
		t.Errorf("naive: CN busy max/mean %.2f, want one CN overloaded (≥ 2.5 of 4)", r)
	}
	if r := maxOverMean(out.CNCommitted); r < 2.5 {
		t.Errorf("naive: committed max/mean %.2f, want one CN running most transactions (≥ 2.5 of 4)", r)
	}
	// The funnel forms within ten ticks and stays: from then on one CN is
	// home to at least 80% of every tick's commits.
	for i := 10; i < len(out.TickCNCommitted); i++ {
		if r := maxOverMean(out.TickCNCommitted[i]); r < 0.8*4 {
			t.Errorf("naive: tick %d home commits %v (max/mean %.2f), want one CN ≥ 80%%", i+1, out.TickCNCommitted[i], r)
			break
		}
	}
}

// TestLeverBGuardedStable: the guarded design (affinity router with queue
// penalty, planner with load term, budgets and churn bounds, generator with
// size cap and hysteresis) on the same legacy workload: after the warm-up
// the cohort count never falls below half its value at the end of the
// warm-up, and no CN carries more than 1.5 × the mean load.
func TestLeverBGuardedStable(t *testing.T) {
	out := leverRun(t, "aura", LeverGuarded, 2*time.Second)
	warmTicks := int(time.Second / (100 * time.Millisecond))
	warm := out.Cohorts[warmTicks-1]
	minAfter := out.Result.Cohorts.MinAfterWarmup
	t.Logf("guarded: cohorts per tick %v", out.Cohorts)
	t.Logf("guarded: cohorts at warm-up end %d, min after %d; CN busy %v (max/mean %.2f); home commits %v (max/mean %.2f)",
		warm, minAfter, out.CNBusy, maxOverMean(out.CNBusy), out.CNCommitted, maxOverMean(out.CNCommitted))
	if warm < 20 || 2*minAfter < warm {
		t.Errorf("guarded: cohorts fell from %d at the end of warm-up to %d", warm, minAfter)
	}
	if r := maxOverMean(out.CNBusy); r > 1.5 {
		t.Errorf("guarded: CN busy max/mean %.2f > 1.5", r)
	}
	if r := maxOverMean(out.CNCommitted); r > 1.5 {
		t.Errorf("guarded: committed max/mean %.2f > 1.5", r)
	}
	for i := warmTicks; i < len(out.TickCNCommitted); i++ {
		if r := maxOverMean(out.TickCNCommitted[i]); r > 1.5 {
			t.Errorf("guarded: tick %d home commits %v (max/mean %.2f > 1.5)", i+1, out.TickCNCommitted[i], r)
			break
		}
	}
}
