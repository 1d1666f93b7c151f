package bench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
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
		t.Fatalf("committed %d, failed %d (last: %s)", res.Committed, res.Failed, res.LastError)
	}
	if res.Checks["bank_total"] != "pass" || res.Checks["invariants"] != "pass" {
		t.Fatalf("checks %v", res.Checks)
	}
	// The publication is the freeze window's last part: never longer than
	// the window.
	if mg := res.Migrations; mg.Count > 0 && (mg.FreezeP99Us == 0 || mg.PublishP99Us == 0 || mg.PublishP99Us > mg.FreezeP99Us) {
		t.Errorf("migrations %+v: want a freeze p99 and a publication p99 within it", mg)
	}
	t.Logf("%d drifts, %d committed, local hit %.1f%%, cohorts %d, migrations %+v",
		wl.Epoch(), res.Committed, 100*res.LocalHit, res.Cohorts.Final, res.Migrations)
}

// TestBankMigratesUnderRDMAFaults runs the drifting bank in aura mode with
// every compute node's memory-node connection wrapped by the fault injector
// (delayed completions, verbs failing applied or unapplied, failed
// doorbells): migrations go on, money is conserved, I1 and I4 hold, and no
// transaction fails for it (their attempts abort and are retried).
func TestBankMigratesUnderRDMAFaults(t *testing.T) {
	cfg := bank.DefaultConfig()
	cfg.Accounts, cfg.BranchKGs, cfg.AuditAccounts = 8000, 4, 64
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem := embedded(t)
	var dials atomic.Int64
	var devs []*faulty.Device
	var mu sync.Mutex
	dial := func(ctx context.Context) (rdma.Device, error) {
		d, err := mem(ctx)
		if err != nil || dials.Add(1) == 1 {
			return d, err // the loader's connection: no faults
		}
		fd := faulty.Wrap(d, faulty.Random(uint64(dials.Load()), faulty.Probabilities{Delay: 0.01,
			MinDelay: 50 * time.Microsecond, MaxDelay: 2 * time.Millisecond, FailUnapplied: 0.001, FailApplied: 0.001,
			FailPost: 0.001}))
		mu.Lock()
		devs = append(devs, fd)
		mu.Unlock()
		return fd, nil
	}
	res, err := Run(context.Background(), Config{Mode: "aura", Workload: wl, Dial: dial, CNs: 3, Clients: 6,
		Duration: 3 * time.Second, Warmup: 300 * time.Millisecond, Seed: 9, DriftEvery: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var injected uint64
	mu.Lock()
	for _, d := range devs {
		f := d.Faults()
		injected += f.Delayed + f.FailedUnapplied + f.FailedApplied + f.FailedPosts
	}
	mu.Unlock()
	if injected == 0 {
		t.Fatal("no fault was injected")
	}
	if res.Committed == 0 || res.Failed != 0 {
		t.Fatalf("committed %d, failed %d (last: %s)", res.Committed, res.Failed, res.LastError)
	}
	if res.Checks["bank_total"] != "pass" || res.Checks["invariants"] != "pass" {
		t.Fatalf("checks %v", res.Checks)
	}
	if res.Migrations.Count == 0 {
		t.Error("no cohort migrated")
	}
	t.Logf("%d faults injected; %d committed, %d aborted attempts; migrations %+v", injected, res.Committed, res.Aborted, res.Migrations)
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
