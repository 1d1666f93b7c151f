package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/workload/bank"
)

// TestBankDriftsUnderAura runs the bank with branch locality in aura mode
// while its branches drift every 300 ms (warm-up included): drifts are
// applied during the run, transactions commit, none fails, and money is
// conserved across the drifts. TestMain's goleak check covers the drift
// goroutine stopping with the run.
func TestBankDriftsUnderAura(t *testing.T) {
	cfg := bank.DefaultConfig()
	cfg.Accounts, cfg.BranchKGs, cfg.AuditAccounts = 2000, 4, 64
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A drift left over from an earlier run is reset before this one.
	if err := wl.Drift(7); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	res, err := Run(context.Background(), Config{Mode: "aura", Workload: wl, Dial: embedded(t), CNs: 2, Clients: 4,
		Duration: 1500 * time.Millisecond, Warmup: 300 * time.Millisecond, Seed: 5, DriftEvery: 300 * time.Millisecond,
		Progress: &progress, ProgressEvery: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Each drift moves to the next epoch from 0, so the epoch counts them.
	if wl.Epoch() < 1 || wl.Epoch() >= 7 {
		t.Errorf("workload at epoch %d after the run: want the drifts of this run (1..6)", wl.Epoch())
	}
	if res.Params.DriftEveryS != 0.3 || res.Params.Drifts != uint64(wl.Epoch()) {
		t.Errorf("params: drift every %vs, %d drifts; want 0.3s and %d", res.Params.DriftEveryS, res.Params.Drifts, wl.Epoch())
	}
	if !strings.Contains(progress.String(), "drifts ") {
		t.Errorf("progress lines do not count drifts:\n%s", progress.String())
	}
	if res.Committed == 0 || res.Failed != 0 {
		t.Fatalf("committed %d, failed %d", res.Committed, res.Failed)
	}
	if res.Checks["bank_total"] != "pass" {
		t.Fatalf("checks %v", res.Checks)
	}
	t.Logf("%d drifts, %d committed, local hit %.1f%%, cohorts %d, migrations %d",
		wl.Epoch(), res.Committed, 100*res.LocalHit, res.Cohorts.Final, res.Migrations.Count)
}

// TestDriftRefusedBeforeLoading: a drift period the workload cannot follow
// fails the run before anything is loaded or started.
func TestDriftRefusedBeforeLoading(t *testing.T) {
	plain, err := bank.New(bank.DefaultConfig()) // no branches: cannot drift
	if err != nil {
		t.Fatal(err)
	}
	dialed := false
	cfg := Config{Mode: "aura", Workload: plain, DriftEvery: time.Second,
		Dial: func(context.Context) (rdma.Device, error) {
			dialed = true
			return nil, errors.New("not dialled in this test")
		}}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, bank.ErrNoBranches) {
		t.Errorf("bank without branches: %v, want ErrNoBranches", err)
	}
	if dialed {
		t.Error("the memory node was dialled before the drift was refused")
	}
	for _, every := range []time.Duration{-time.Second, time.Microsecond} {
		c := Config{Mode: "aura", Workload: plain, Dial: embedded(t), DriftEvery: every}
		c.defaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "drift every") {
			t.Errorf("drift every %v: %v", every, err)
		}
	}
	c := Config{Mode: "aura", Workload: smallTPCC(t, 1), Dial: embedded(t), DriftEvery: time.Second}
	c.defaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `workload "tpcc" cannot drift`) {
		t.Errorf("tpcc drift: %v", err)
	}
}
