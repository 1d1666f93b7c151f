package bank

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
)

// branchConfig is a small bank with branch locality: 2,000 accounts in 32
// key groups of 64 (the last holds 16), branches of 4 key groups.
func branchConfig() Config {
	cfg := DefaultConfig()
	cfg.Accounts = 2000
	cfg.BranchKGs = 4
	return cfg
}

func mustNew(t *testing.T, cfg Config) *Workload {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// layoutOf is every branch's key groups at w's current epoch.
func layoutOf(w *Workload) [][]uint64 {
	out := make([][]uint64, w.Config().Branches())
	for b := range out {
		out[b] = w.BranchKeyGroups(uint64(b))
	}
	return out
}

// TestDriftDeterministic: an epoch's layout depends on the configuration and
// the epoch alone (not on the epochs visited before, nor on the instance),
// generators of the same seed and client agree at every epoch, and
// different epochs have different layouts.
func TestDriftDeterministic(t *testing.T) {
	cfg := branchConfig()
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	for e := 1; e <= 5; e++ {
		if err := a.Drift(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Drift(5); err != nil {
		t.Fatal(err)
	}
	if a.Epoch() != 5 || b.Epoch() != 5 {
		t.Fatalf("epochs %d and %d, want 5", a.Epoch(), b.Epoch())
	}
	at5 := layoutOf(a)
	if !reflect.DeepEqual(at5, layoutOf(b)) {
		t.Fatal("epoch 5 reached step by step and directly differ")
	}
	ga, gb := a.NewGenerator(9, 2), b.NewGenerator(9, 2)
	for range 2000 {
		if x, y := ga.Next(), gb.Next(); !reflect.DeepEqual(x.GetBody(), y.GetBody()) {
			t.Fatalf("same seed, client and epoch, different transactions: %v and %v", x, y)
		}
	}
	// Back to epoch 0 (the identity) and forward again.
	if err := a.Drift(0); err != nil {
		t.Fatal(err)
	}
	for br, kgs := range layoutOf(a) {
		lo := uint64(br) * cfg.BranchKGs
		for i, kg := range kgs {
			if kg != lo+uint64(i) {
				t.Fatalf("epoch 0: branch %d holds key groups %v, want consecutive from %d", br, kgs, lo)
			}
		}
	}
	if err := a.Drift(5); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(at5, layoutOf(a)) {
		t.Fatal("epoch 5 after going back to 0 differs")
	}
	// Each epoch is a partition of every key group into branches; the
	// layouts of epochs 1..5 differ from each other and from epoch 0's.
	seen := map[string]int{}
	for e := range 6 {
		if err := b.Drift(e); err != nil {
			t.Fatal(err)
		}
		l := layoutOf(b)
		var all []uint64
		for _, kgs := range l {
			all = append(all, kgs...)
		}
		slices.Sort(all)
		for i, kg := range all {
			if kg != uint64(i) {
				t.Fatalf("epoch %d: branches do not partition the %d key groups: %v", e, cfg.KeyGroups(), all)
			}
		}
		key := fmt.Sprint(l)
		if prev, ok := seen[key]; ok {
			t.Errorf("epochs %d and %d have the same layout", prev, e)
		}
		seen[key] = e
	}
	// Another layout seed, another epoch 1.
	other := cfg
	other.LayoutSeed = 2
	c := mustNew(t, other)
	if err := c.Drift(1); err != nil {
		t.Fatal(err)
	}
	if err := b.Drift(1); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(layoutOf(b), layoutOf(c)) {
		t.Error("layout seeds 1 and 2 agree on epoch 1")
	}
}

// pairShares counts, over n transfers of g, the share within one branch of
// w's current layout, and which key-group pairs were written together.
func pairShares(w *Workload, g interface{ Next() *messages.TxnSubmit }, n int) (local float64, pairs map[[2]uint64]int, hot map[uint64]int) {
	pairs, hot = map[[2]uint64]int{}, map[uint64]int{}
	transfers, in := 0, 0
	per := w.Config().AccountsPerKG
	for range n {
		tr := g.Next().GetBankTransfer()
		if tr == nil {
			continue
		}
		transfers++
		bf, _ := w.BranchOf(tr.FromAccount)
		bt, _ := w.BranchOf(tr.ToAccount)
		if bf == bt {
			in++
		}
		kf, kt := tr.FromAccount/per, tr.ToAccount/per
		pairs[[2]uint64{min(kf, kt), max(kf, kt)}]++
		hot[bf]++
	}
	return float64(in) / float64(transfers), pairs, hot
}

// TestDriftMovesCoAccess: transfers stay mostly inside the current epoch's
// branches, and a drift changes which key groups are written together and
// which are hot.
func TestDriftMovesCoAccess(t *testing.T) {
	cfg := branchConfig()
	w := mustNew(t, cfg)
	g := w.NewGenerator(3, 0)
	local0, pairs0, _ := pairShares(w, g, 20_000)
	hot0 := w.BranchKeyGroups(0)
	if err := w.Drift(1); err != nil {
		t.Fatal(err)
	}
	local1, pairs1, _ := pairShares(w, g, 20_000)
	hot1 := w.BranchKeyGroups(0)
	// LocalFraction 0.9 plus the uniform others that land in the branch.
	for e, l := range []float64{local0, local1} {
		if l < 0.88 {
			t.Errorf("epoch %d: %.3f of transfers within a branch, want ≥ 0.88", e, l)
		}
	}
	// The frequent key-group pairs of epoch 0 (within branches of
	// consecutive key groups) are mostly rare at epoch 1.
	kept, frequent := 0, 0
	for p, n := range pairs0 {
		if p[0] != p[1] && n >= 100 {
			frequent++
			if pairs1[p] >= 100 {
				kept++
			}
		}
	}
	if frequent == 0 || kept*2 > frequent {
		t.Errorf("%d of the %d frequent key-group pairs of epoch 0 stay frequent after the drift", kept, frequent)
	}
	if reflect.DeepEqual(hot0, hot1) {
		t.Errorf("the hottest branch holds key groups %v before and after the drift", hot0)
	}
}

// TestDriftConservesMoney runs transfers and audits from several generators
// while another goroutine drifts through epochs, and checks that money is
// conserved and every account is well formed afterwards.
func TestDriftConservesMoney(t *testing.T) {
	cfg := branchConfig()
	cfg.InitialCents = 5_000
	cfg.MaxTransferCents = 3_000 // rollbacks happen
	cfg.AuditAccounts = 100
	w, s := setup(t, cfg)
	const clients, perClient = 4, 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	var failures sync.Map
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := w.NewGenerator(11, c)
			for range perClient {
				msg := g.Next()
				prog, err := w.Program(msg, &messages.TxnResult{})
				if err != nil {
					failures.Store(msg.String(), err)
					return
				}
				if err := s.Run(prog); err != nil && !errors.Is(err, txn.ErrRollback) {
					failures.Store(msg.String(), err)
					return
				}
			}
		}()
	}
	drifts := make(chan int)
	go func() {
		e := 0
		defer func() { drifts <- e }()
		for {
			select {
			case <-done:
				return
			default:
			}
			// Epochs wrap at MaxDriftEpoch: on a loaded machine this loop
			// can outrun the clients by more than that many drifts.
			if err := w.Drift(e%MaxDriftEpoch + 1); err != nil {
				failures.Store("drift", err)
				return
			}
			e++
		}
	}()
	wg.Wait()
	close(done)
	if n := <-drifts; n == 0 {
		t.Error("no drift happened while the clients ran")
	}
	failures.Range(func(k, v any) bool {
		t.Errorf("%v: %v", k, v)
		return true
	})
	for name, err := range checks(t, w, s) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDriftRefusals(t *testing.T) {
	plain := mustNew(t, DefaultConfig())
	for _, e := range []int{0, 1} {
		if err := plain.Drift(e); !errors.Is(err, ErrNoBranches) {
			t.Errorf("drift to epoch %d without branches: %v, want ErrNoBranches", e, err)
		}
	}
	w := mustNew(t, branchConfig())
	for _, e := range []int{-1, MaxDriftEpoch + 1} {
		if err := w.Drift(e); err == nil {
			t.Errorf("drift to epoch %d accepted", e)
		}
	}
	if err := w.Drift(MaxDriftEpoch); err != nil || w.Epoch() != MaxDriftEpoch {
		t.Errorf("drift to MaxDriftEpoch: %v (epoch %d)", err, w.Epoch())
	}
	if _, ok := plain.BranchOf(1); ok {
		t.Error("BranchOf without branches")
	}
	if _, ok := w.BranchOf(2000); ok {
		t.Error("BranchOf past the last account")
	}
}

func TestValidateBranches(t *testing.T) {
	bad := branchConfig()
	bad.HotTheta, bad.LocalFraction, bad.BranchTheta, bad.BranchKGs = 0.5, 1.5, 1, 32
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"hot theta 0.5 with branches", "local fraction", "branch theta", "branch key groups 32, want 1..31"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	tiny := DefaultConfig()
	tiny.Accounts, tiny.AccountsPerKG, tiny.BranchKGs = 3, 1, 1
	if err := tiny.Validate(); err == nil || !strings.Contains(err.Error(), "cannot hold a transfer") {
		t.Errorf("one-account branches: %v", err)
	}
	one := DefaultConfig()
	one.Accounts, one.BranchKGs = 64, 1
	if err := one.Validate(); err == nil || !strings.Contains(err.Error(), "at least two key groups") {
		t.Errorf("a single key group: %v", err)
	}
	if err := branchConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if c := branchConfig(); c.KeyGroups() != 32 || c.Branches() != 8 {
		t.Fatalf("key groups %d, branches %d", c.KeyGroups(), c.Branches())
	}
}
