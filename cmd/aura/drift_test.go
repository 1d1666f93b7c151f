package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
)

// buildWorkload parses args as workload flags and builds the workload for
// a run of 2 CNs, drifting or not.
func buildWorkload(t *testing.T, drifting bool, args ...string) (workload.Workload, error) {
	t.Helper()
	f := &workloadFlags{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	f.drifting = drifting
	seed := uint64(1)
	wl, _, err := f.forRun(2, 0, &seed, 10*time.Second)
	return wl, err
}

// TestDriftWorkloadsListed: the workloads --drift-every names as able to
// drift are exactly those that implement workload.Drifter.
func TestDriftWorkloadsListed(t *testing.T) {
	for _, name := range workloadNames {
		if name == "trace" { // needs a file; replays, never drifts
			if slices.Contains(driftWorkloads, name) {
				t.Errorf("trace listed as drifting")
			}
			continue
		}
		wl, err := buildWorkload(t, false, "--workload", name, "--items", "1000", "--customers", "30")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, ok := wl.(workload.Drifter)
		if ok != slices.Contains(driftWorkloads, name) {
			t.Errorf("%s: implements Drifter %v, listed %v", name, ok, driftWorkloads)
		}
	}
}

// TestBankBranchesWhenDrifting: drifting turns the bank's branches on
// unless --branch-kgs says otherwise, and the branch flags reach the config.
func TestBankBranchesWhenDrifting(t *testing.T) {
	branches := func(wl workload.Workload) uint64 { return wl.(*bank.Workload).Config().BranchKGs }
	wl, err := buildWorkload(t, true, "--workload", "bank")
	if err != nil {
		t.Fatal(err)
	}
	if n := branches(wl); n != driftBranchKGs {
		t.Errorf("drifting bank: %d key groups per branch, want %d", n, driftBranchKGs)
	}
	if wl, err = buildWorkload(t, false, "--workload", "bank"); err != nil {
		t.Fatal(err)
	}
	if n := branches(wl); n != 0 {
		t.Errorf("bank without drift: %d key groups per branch, want 0 (no branches)", n)
	}
	wl, err = buildWorkload(t, true, "--workload", "bank", "--branch-kgs", "8", "--branch-local", "0.5", "--branch-theta", "0")
	if err != nil {
		t.Fatal(err)
	}
	if c := wl.(*bank.Workload).Config(); c.BranchKGs != 8 || c.LocalFraction != 0.5 || c.BranchTheta != 0 {
		t.Errorf("branch flags: %+v", c)
	}
	if _, err := buildWorkload(t, true, "--workload", "bank", "--branch-kgs", "0"); err == nil || !strings.Contains(err.Error(), "needs branches") {
		t.Errorf("drifting bank without branches: %v", err)
	}
	if _, err := buildWorkload(t, true, "--workload", "bank", "--hot-theta", "0.5"); err == nil || !strings.Contains(err.Error(), "--hot-theta") {
		t.Errorf("drifting bank with --hot-theta: %v", err)
	}
}

// TestBenchDriftFlagErrors: bad --drift-every uses are refused before
// anything runs, with an error saying why.
func TestBenchDriftFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "ycsb", "--drift-every", "1s"}, `workload "ycsb" cannot drift (workloads that can: bank, tenant)`},
		{[]string{"--workload", "bank", "--drift-every", "-1s"}, "want ≥ 0"},
		{[]string{"--workload", "bank", "--drift-every", "1us"}, "want ≥ 1ms"},
		{[]string{"--workload", "bank", "--drift-every", "1ms", "--duration", "100s"}, "drifts in"},
		{[]string{"--workload", "bank", "--drift-every", "1s", "--branch-kgs", "0"}, "needs branches"},
		{[]string{"--connect", "aura://127.0.0.1:1/bank?http_addr=127.0.0.1:2", "--mn", "127.0.0.1:3", "--workload", "bank", "--drift-every", "1s"}, "--drift-every applies to the embedded cluster only"},
	} {
		cmd := newBenchCmd()
		cmd.SetArgs(append([]string{"--quiet"}, c.args...))
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("aura bench %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

func TestBenchHelpExplainsDrift(t *testing.T) {
	cmd := newBenchCmd()
	cmd.SetArgs([]string{"--help"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--drift-every", "--branch-kgs", "--branch-local", "--branch-theta", "Workloads that can drift: bank, tenant"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %q", want)
		}
	}
}

// TestBenchSaysWhenTheMemoryNodeIsTooSmall: tables that do not fit the
// embedded memory node fail the run with rdma's out-of-memory error and the
// flags that help.
func TestBenchSaysWhenTheMemoryNodeIsTooSmall(t *testing.T) {
	cmd := newBenchCmd()
	cmd.SetArgs([]string{"--quiet", "--workload", "bank", "--accounts", "100000", "--cns", "1", "--mode", "mn-only",
		"--duration", "100ms", "--warmup", "0s", "--mn-size", "1MiB"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if !errors.Is(err, rdma.ErrOutOfMemory) || !strings.Contains(err.Error(), "raise --mn-size (now 1MiB)") || !strings.Contains(err.Error(), "shorten --duration") {
		t.Fatalf("aura bench on a 1 MiB memory node: %v, want rdma.ErrOutOfMemory naming --mn-size and --duration", err)
	}
}
