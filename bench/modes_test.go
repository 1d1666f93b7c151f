package bench

import (
	"context"
	"testing"
	"time"
)

// runTPCC runs mode on a fresh embedded memory node with small TPC-C (4
// warehouses, 2 CNs, 8 clients) and checks what every mode promises: it
// commits, nothing fails, and the consistency conditions hold afterwards.
func runTPCC(t *testing.T, mode string, warmup, duration time.Duration) *Result {
	t.Helper()
	return runTPCCWith(t, Config{Mode: mode, Duration: duration, Warmup: warmup})
}

// runTPCCWith is runTPCC with cfg's other fields (PlannerTick) kept.
func runTPCCWith(t *testing.T, cfg Config) *Result {
	t.Helper()
	mode := cfg.Mode
	cfg.Workload, cfg.Dial, cfg.CNs, cfg.Clients, cfg.Seed = smallTPCC(t, 4), embedded(t), 2, 8, 7
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	if res.Committed == 0 || res.Failed != 0 {
		t.Fatalf("%s: committed %d, failed %d (last: %s)", mode, res.Committed, res.Failed, res.LastError)
	}
	if res.Checks["tpcc_consistency"] != "pass" {
		t.Fatalf("%s: consistency: %v", mode, res.Checks)
	}
	t.Logf("%s: %d committed, %.0f tps, %.2f atomics/txn, local hit %.1f%%, %.3f owner RPC/txn, abort rate %.2f%%, cohorts %d, epoch %d, %d manifest bytes, %d migrations",
		mode, res.Committed, res.ThroughputTPS, res.AtomicPerTxn, 100*res.LocalHit, res.OwnerRPCPer, 100*res.AbortRate,
		res.Cohorts.Final, res.Manifest.Epoch, res.Manifest.Bytes, res.Migrations.Count)
	return res
}

// TestStaticMode: with every warehouse's key groups owned by its node and
// transactions routed to their home warehouse's node, nearly every lock is
// granted locally (only remote supply warehouses and remote Payment
// customers go to another owner), and each transaction needs fewer memory-
// node atomics than under mn-only on the same workload and seed. The local
// hit follows from the fixed placement and is checked under the race
// detector too; the atomics saved depend on how many records the run
// touched (see below), so they are compared in the plain pass only.
func TestStaticMode(t *testing.T) {
	res := runTPCC(t, "static", 300*time.Millisecond, 1500*time.Millisecond)
	// Measured 99.5%: the 1% remote order lines and 15% remote Payment
	// customers are the only owner RPCs.
	if res.LocalHit < 0.9 || res.Locks.MNCAS != 0 {
		t.Errorf("static local hit %.1f%%, locks %+v: want ≥ 90%% local and no MN CAS lock", 100*res.LocalHit, res.Locks)
	}
	// One cohort per partition value: the four warehouses and ITEM's
	// warehouse 0; one fixed map, published once.
	if res.Cohorts.Final != 5 || res.Cohorts.Max != 5 || res.Manifest.Epoch != 1 || res.Manifest.Bytes == 0 || res.Migrations.Count != 0 {
		t.Errorf("static: cohorts %+v, manifest %+v, migrations %+v", res.Cohorts, res.Manifest, res.Migrations)
	}
	for _, s := range res.Timeline {
		if s.Cohorts != 5 {
			t.Errorf("timeline at %.1fs: %d cohorts, want 5", s.TS, s.Cohorts)
		}
	}
	if raceEnabled {
		return
	}
	base := runTPCC(t, "mn-only", 300*time.Millisecond, 1500*time.Millisecond)
	if base.LocalHit != 0 {
		t.Errorf("mn-only local hit %.3f, want 0", base.LocalHit)
	}
	// Owned records still pay a CAS the first time their owner grants them
	// (the sentinel mark) and every insert claims its slot by CAS, so the
	// saving grows with the run; measured 0.5–0.6 of mn-only's here. Both
	// weighted by the spec mix (see specMixAtomics).
	a, okA := specMixAtomics(res)
	b, okB := specMixAtomics(base)
	if !okA || !okB || a >= 0.85*b {
		t.Errorf("static %.2f atomics/txn (sampled mix %.2f), want < 0.85 × mn-only's %.2f (sampled %.2f)", a, res.AtomicPerTxn, b, base.AtomicPerTxn)
	}
}

// TestHashMode: one cohort per loaded key group, placed by rendezvous
// hashing. The router sends each transaction to the node owning most of its
// write set, so part of the locks are local and the rest owner RPCs; the
// consistency conditions hold with the owner RPC path carrying a large share
// of the locks.
func TestHashMode(t *testing.T) {
	res := runTPCC(t, "hash", 300*time.Millisecond, 1500*time.Millisecond)
	if res.Params.KeyGroups == 0 || res.Cohorts.Final != res.Params.KeyGroups {
		t.Errorf("hash: %d cohorts for %d key groups, want one each", res.Cohorts.Final, res.Params.KeyGroups)
	}
	if res.Manifest.Epoch != 1 || res.Manifest.Bytes == 0 || res.Migrations.Count != 0 {
		t.Errorf("hash: manifest %+v, migrations %+v", res.Manifest, res.Migrations)
	}
	// With two nodes the chosen home owns at least half of the owned write
	// key groups, and random placement leaves the other node a share.
	if res.LocalHit < 0.4 || res.Locks.OwnerRPC == 0 {
		t.Errorf("hash: local hit %.1f%%, locks %+v: want ≥ 40%% local and some owner RPCs", 100*res.LocalHit, res.Locks)
	}
}

// TestAuraLearnsOwnership: the planner, fed only by the nodes' heartbeats,
// publishes OwnerMaps that the nodes install and the clients route by;
// after a few seconds most locks are granted locally and transactions need
// fewer memory-node atomics than under mn-only on the same seed. It asserts
// what is learned within wall-clock seconds, so it runs in the plain test
// pass only.
func TestAuraLearnsOwnership(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("learns for several seconds and asserts what it learned (plain test pass only)")
	}
	base := runTPCC(t, "mn-only", 300*time.Millisecond, time.Second)
	// A 50 ms tick (the cluster test's) learns within the warm-up even
	// when the machine starves the process of CPU for part of it.
	res := runTPCCWith(t, Config{Mode: "aura", Warmup: 3 * time.Second, Duration: 2 * time.Second, PlannerTick: 50 * time.Millisecond})
	// The summary leaves the 3 s warm-up out: this is the late part of the
	// run. Measured 98.5% on a loaded 2-core machine (85–93% when nodes
	// sampled one transaction in 8).
	if res.LocalHit < 0.7 {
		t.Errorf("aura: local hit %.1f%% after 3 s, want ≥ 70%%", 100*res.LocalHit)
	}
	a, okA := specMixAtomics(res)
	b, okB := specMixAtomics(base)
	if !okA || !okB || a >= b {
		t.Errorf("aura: %.2f atomics/txn at the spec mix (sampled %.2f), want fewer than mn-only's %.2f (sampled %.2f)", a, res.AtomicPerTxn, b, base.AtomicPerTxn)
	}
	if res.Cohorts.Final == 0 || res.Manifest.Epoch == 0 || res.Manifest.Bytes == 0 {
		t.Errorf("aura: cohorts %+v, manifest %+v", res.Cohorts, res.Manifest)
	}
	if p := res.Planner; p == nil || p.Heartbeats == 0 || p.Epoch < res.Manifest.Epoch {
		t.Errorf("aura: planner %+v, manifest %+v", p, res.Manifest)
	}
	// The timeline shows the learning: the run starts with no map (every
	// lock by MN CAS), and the last interval has cohorts and mostly local
	// grants.
	tl := res.Timeline
	if len(tl) < 5 {
		t.Fatalf("aura: %d timeline samples", len(tl))
	}
	if last := tl[len(tl)-1]; last.Cohorts == 0 || last.LocalHit < 0.5 {
		t.Errorf("aura: last sample %+v", last)
	}
	if first := tl[0]; first.LocalHit >= tl[len(tl)-1].LocalHit {
		t.Errorf("aura: local hit did not grow: first %+v, last %+v", first, tl[len(tl)-1])
	}
}
