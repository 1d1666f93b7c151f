package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/bench"
)

// runBenchBinary runs `aura bench` with args and returns its JSON result.
func runBenchBinary(t *testing.T, args ...string) *bench.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(buildAura(t), append([]string{"bench", "--quiet", "--json", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("aura bench %v: %v\n%s", args, err, b)
	}
	return readBenchJSON(t, out)
}

// readBenchJSON reads the result aura bench --json wrote for one mode.
func readBenchJSON(t *testing.T, path string) *bench.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestBenchAgainstSeparateMemoryNode runs TPC-C with the memory node as its
// own process and in-process, and checks that both pass the consistency
// checks and agree on the counted metrics: locks and atomics per transaction
// of each type do not depend on where the memory node runs.
func TestBenchAgainstSeparateMemoryNode(t *testing.T) {
	small := []string{"--workload", "tpcc", "--warehouses", "4", "--items", "2000", "--customers", "100",
		"--expected-new-orders", "50000", "--cns", "2", "--clients", "4", "--duration", "2s", "--warmup", "500ms"}
	mn := startMN(t, "--listen", "127.0.0.1:0", "--size", "2GiB")
	remote := runBenchBinary(t, append([]string{"--mn", mn.addr}, small...)...)
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	local := runBenchBinary(t, append([]string{"--cpu-profile", cpu, "--exec-trace", tr}, small...)...)
	// The profiles of the run: a CPU profile (gzip) and an execution trace.
	for path, magic := range map[string]string{cpu: "\x1f\x8b", tr: "go 1."} {
		if b, err := os.ReadFile(path); err != nil || len(b) < 1024 || !strings.HasPrefix(string(b), magic) {
			t.Errorf("%s: %d bytes starting %q, err %v; want more than 1 KiB starting %q", path, len(b), b[:min(len(b), 8)], err, magic)
		}
	}
	for name, r := range map[string]*bench.Result{"separate": remote, "embedded": local} {
		if r.Checks["tpcc_consistency"] != "pass" || r.Committed == 0 || r.Failed != 0 {
			t.Fatalf("%s memory node: committed %d, failed %d, checks %v", name, r.Committed, r.Failed, r.Checks)
		}
	}
	if remote.Params.MN != mn.addr || local.Params.MN != "embedded" {
		t.Fatalf("params.mn = %q and %q", remote.Params.MN, local.Params.MN)
	}
	for _, typ := range []string{"new_order", "payment"} {
		a, b := remote.ByType[typ], local.ByType[typ]
		if a == nil || b == nil {
			t.Fatalf("%s missing: %+v %+v", typ, a, b)
		}
		// What a committed transaction locks does not depend on timing (the
		// order lines of a NewOrder vary, so allow a little sampling noise);
		// retries under contention do, and are not compared.
		if math.Abs(a.LocksPerCommit-b.LocksPerCommit) > 0.05*b.LocksPerCommit {
			t.Errorf("%s locks per commit: separate %.2f, embedded %.2f", typ, a.LocksPerCommit, b.LocksPerCommit)
		}
	}
	if remote.RDMA.CAS == 0 || local.RDMA.CAS == 0 {
		t.Errorf("rdma counts missing: %+v %+v", remote.RDMA, local.RDMA)
	}
}
