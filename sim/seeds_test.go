package sim

import (
	"os"
	"testing"
	"time"

	"github.com/aura-runtime/aura/workload/tpcc"
)

// needSeeds skips a seed sweep unless AURA_DRIFT_SEEDS is set: each takes
// minutes, too long for every run of the suite.
func needSeeds(t *testing.T) {
	t.Helper()
	if os.Getenv("AURA_DRIFT_SEEDS") == "" {
		t.Skip("a seed sweep of a few minutes: AURA_DRIFT_SEEDS=1 runs it")
	}
}

// TestDriftSeeds: the tenant drift recovery over six seeds and three drifts
// each, not only TestAuraTenantDriftRecovery's seed: each drift is back
// within 1.2× the oracle's remote lock operations (LOCAL misses, per
// tick) in 20 ticks, every one of the eighteen (the slowest takes 15).
// Before the planner's rescue (package ownership) four missed it: with one
// CN left owning nothing after a drift, re-formed tenants no full CN could
// take stayed unowned. About two minutes, so it runs with
// AURA_DRIFT_SEEDS=1.
func TestDriftSeeds(t *testing.T) {
	needSeeds(t)
	missed, drifts := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := Config{Workload: smallTenant(t), CNs: 4, Duration: 7 * time.Second, Warmup: time.Second, DriftEvery: 2 * time.Second, Seed: seed}
		res := driftRecovery(t, cfg)
		for _, back := range res {
			drifts++
			if back < 0 {
				missed++
			}
		}
		t.Logf("seed %d: ticks back within 1.2× the oracle after each drift (-1: not in 20): %v", seed, res)
	}
	if drifts != 18 || missed > 0 {
		t.Errorf("%d of %d drifts not back within 1.2× the oracle in 20 ticks, want none of 18", missed, drifts)
	}
}

// TestTPCCSeeds: TestAuraReshapedTPCC's remote-lock target (≤ 1.1× the
// oracle's) over four seeds, so that a change tuned on one seed does not
// pass by luck. About a minute and a half, so it runs with
// AURA_DRIFT_SEEDS=1.
func TestTPCCSeeds(t *testing.T) {
	needSeeds(t)
	wl := smallTPCC(t, 16, tpcc.EncodingReshaped)
	for _, seed := range []uint64{7, 8, 9, 10} {
		cfg := Config{Workload: wl, CNs: 4, Clients: 16, Duration: time.Second, Warmup: 4 * time.Second, Seed: seed}
		cfg.Mode = "oracle"
		or := run(t, cfg).Result
		cfg.Mode = "aura"
		a := run(t, cfg).Result
		ratio := a.RemoteLockOps / or.RemoteLockOps
		t.Logf("seed %d: remote locks/txn %.4f (%.3f× the oracle's), local hit %.4f, atomics/txn %.4f, cohorts %d", seed, a.RemoteLockOps, ratio, a.LocalHit, a.AtomicPerTxn, a.Cohorts.Final)
		if ratio > 1.1 {
			t.Errorf("seed %d: aura remote locks/txn %.4f > 1.1 × oracle %.4f", seed, a.RemoteLockOps, or.RemoteLockOps)
		}
	}
}
