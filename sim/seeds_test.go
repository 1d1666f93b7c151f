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
// tick) in 20 ticks, but for at most two drifts of the eighteen (the
// third drifts of seeds 1 and 4 miss it: the target is not met on every
// seed). About two minutes, so it runs with AURA_DRIFT_SEEDS=1.
func TestDriftSeeds(t *testing.T) {
	needSeeds(t)
	const every = 2 * time.Second
	tick := 100 * time.Millisecond
	missed, drifts := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := Config{Workload: smallTenant(t), CNs: 4, Duration: 7 * time.Second, Warmup: time.Second, DriftEvery: every, Seed: seed}
		cfg.Mode = "oracle"
		or := run(t, cfg).Result
		cfg.Mode = "aura"
		a := run(t, cfg).Result
		var res []int
		for d := every; d+20*tick <= cfg.Warmup+cfg.Duration; d += every {
			first := int(d / tick)
			back := -1
			for i := first; i < len(a.Timeline) && i < len(or.Timeline) && i < first+20; i++ {
				if 1-a.Timeline[i].LocalHit <= 1.2*(1-or.Timeline[i].LocalHit) {
					back = i - first + 1
					break
				}
			}
			drifts++
			if back < 0 {
				missed++
			}
			res = append(res, back)
		}
		t.Logf("seed %d: ticks back within 1.2× the oracle after each drift (-1: not in 20): %v", seed, res)
	}
	if drifts != 18 || missed > 2 {
		t.Errorf("%d of %d drifts not back within 1.2× the oracle in 20 ticks, want at most 2 of 18", missed, drifts)
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
