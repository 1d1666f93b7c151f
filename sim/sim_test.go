package sim

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/aura-runtime/aura/workload/tpcc"
)

func smallTPCC(t testing.TB, warehouses int, encoding string) *tpcc.Workload {
	t.Helper()
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses = warehouses
	cfg.KeyEncoding = encoding
	cfg.ItemCount = 1000
	cfg.CustomersPerDistrict = 100
	cfg.ExpectedNewOrders = 10_000
	wl, err := tpcc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

func run(t testing.TB, cfg Config) *Outcome {
	t.Helper()
	out, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeterministic: the same config gives byte-identical JSON (aura runs
// every control-plane package).
func TestDeterministic(t *testing.T) {
	wl := smallTPCC(t, 8, tpcc.EncodingReshaped)
	var docs [][]byte
	for range 2 {
		out := run(t, Config{Mode: "aura", Workload: wl, CNs: 2, Clients: 8, Duration: 300 * time.Millisecond,
			Warmup: 300 * time.Millisecond, Seed: 3})
		b, err := json.Marshal(out.Result)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	if !bytes.Equal(docs[0], docs[1]) {
		t.Fatalf("two runs differ:\n%s\n%s", docs[0], docs[1])
	}
}

// TestMNOnlyAtomicsPerTxn: every lock is an MN CAS, ≈ 18 per TPC-C spec-mix
// transaction (0.45×24 + 0.43×4 + 0.04×140).
func TestMNOnlyAtomicsPerTxn(t *testing.T) {
	wl := smallTPCC(t, 8, tpcc.EncodingReshaped)
	out := run(t, Config{Mode: "mn-only", Workload: wl, CNs: 2, Clients: 8, Duration: 500 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Seed: 5})
	r := out.Result
	if r.AtomicPerTxn < 16 || r.AtomicPerTxn > 21 {
		t.Errorf("atomics/txn %.2f, want ≈ 18", r.AtomicPerTxn)
	}
	if r.LocalHit != 0 || r.Locks.MNCAS != r.Locks.Total || r.Locks.Total == 0 {
		t.Errorf("locks %+v, local hit %.3f", r.Locks, r.LocalHit)
	}
	if no := r.ByType["new_order"]; no == nil || no.LocksPerCommit < 22 || no.LocksPerCommit > 26 {
		t.Errorf("new_order %+v, want ≈ 24 locks", no)
	}
	if d := r.ByType["delivery"]; d == nil || d.LocksPerCommit < 130 || d.LocksPerCommit > 141 {
		t.Errorf("delivery %+v, want ≈ 140 locks", d)
	}
}

// TestStaticLocalHit: on reshaped TPC-C, warehouse-aligned ownership grants
// almost every lock locally; mn-only none.
func TestStaticLocalHit(t *testing.T) {
	wl := smallTPCC(t, 8, tpcc.EncodingReshaped)
	cfg := Config{Workload: wl, CNs: 4, Clients: 16, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Seed: 9}
	cfg.Mode = "mn-only"
	mn := run(t, cfg).Result
	cfg.Mode = "static"
	st := run(t, cfg).Result
	if st.LocalHit < 0.9 || mn.LocalHit != 0 {
		t.Errorf("local hit: static %.3f, mn-only %.3f", st.LocalHit, mn.LocalHit)
	}
	if st.AtomicPerTxn != 0 || st.RemoteLockOps > 0.1*mn.RemoteLockOps {
		t.Errorf("static atomics/txn %.2f, remote locks/txn %.2f (mn-only %.2f)", st.AtomicPerTxn, st.RemoteLockOps, mn.RemoteLockOps)
	}
}

// TestAuraReshapedTPCC: learned ownership reaches SPEC §11's locality and
// atomics targets on reshaped TPC-C (4 CNs, 4 warehouses per CN).
func TestAuraReshapedTPCC(t *testing.T) {
	wl := smallTPCC(t, 16, tpcc.EncodingReshaped)
	cfg := Config{Workload: wl, CNs: 4, Clients: 16, Duration: 500 * time.Millisecond, Warmup: 3 * time.Second, Seed: 7}
	cfg.Mode = "oracle"
	or := run(t, cfg).Result
	cfg.Mode = "aura"
	out := run(t, cfg)
	a := out.Result
	t.Logf("aura: local %.4f atomics/txn %.3f remote locks/txn %.3f (oracle %.3f, ratio %.2f) cohorts %+v migrations %+v",
		a.LocalHit, a.AtomicPerTxn, a.RemoteLockOps, or.RemoteLockOps, a.RemoteLockOps/or.RemoteLockOps, a.Cohorts, a.Migrations)
	if a.LocalHit < 0.95 {
		t.Errorf("aura local hit %.4f, want ≥ 0.95", a.LocalHit)
	}
	if a.AtomicPerTxn > 0.5 {
		t.Errorf("aura atomics/txn %.3f, want ≤ 0.5", a.AtomicPerTxn)
	}
	if a.Cohorts.Final == 0 || a.Manifest.Epoch == 0 || a.Manifest.Bytes == 0 {
		t.Errorf("cohorts %+v manifest %+v", a.Cohorts, a.Manifest)
	}
}

// TestLegacyGuardedStable: with the legacy encoding and routing that follows
// ownership (guarded Lever B), the cohort count never drops below half its
// value at the end of the warm-up, and no CN carries more than 1.5× the mean
// load (CPU time) — SPEC §11's anti-collapse target.
func TestLegacyGuardedStable(t *testing.T) {
	wl := smallTPCC(t, 16, tpcc.EncodingLegacy)
	out := run(t, Config{Mode: "aura", LeverB: LeverGuarded, Workload: wl, CNs: 4, Clients: 16,
		Duration: time.Second, Warmup: time.Second, Seed: 7})
	warmTicks := 10
	warm := out.Cohorts[warmTicks-1]
	minAfter := warm
	for _, n := range out.Cohorts[warmTicks:] {
		minAfter = min(minAfter, n)
	}
	var sum, mx float64
	for _, b := range out.CNBusy {
		sum += b
		mx = max(mx, b)
	}
	mean := sum / float64(len(out.CNBusy))
	t.Logf("guarded: cohorts at warm-up end %d, min after %d; CN busy %v (max/mean %.2f); local %.3f",
		warm, minAfter, out.CNBusy, mx/mean, out.Result.LocalHit)
	if warm == 0 || 2*minAfter < warm {
		t.Errorf("cohorts fell from %d to %d", warm, minAfter)
	}
	if mx > 1.5*mean {
		t.Errorf("CN load max %.3f > 1.5 × mean %.3f", mx, mean)
	}
}
