package ycsb

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload/kvrec"
	"github.com/aura-runtime/aura/workload/zipf"
)

func setup(t *testing.T, cfg Config) (*Workload, *memtx.Store) {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := memtx.New(w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return w, s
}

func checks(t *testing.T, w *Workload, s *memtx.Store) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, c := range w.Check(context.Background(), s) {
		out[c.Name] = c.Err
	}
	if _, ok := out["ycsb.records"]; !ok || len(out) != 2 {
		t.Fatalf("checks %v", out)
	}
	return out
}

func TestSerialRunOnMemtx(t *testing.T) {
	for _, dist := range []string{Zipfian, ZipfianOrdered, Uniform} {
		cfg := DefaultConfig()
		cfg.RecordCount = 5000
		cfg.Distribution = dist
		w, s := setup(t, cfg)
		g := w.NewGenerator(9, 2)
		reads, writes := 0, 0
		for range 3000 {
			msg := g.Next()
			kv := msg.GetKv()
			if n := len(kv.GetReads()) + len(kv.GetWrites()); n != cfg.OpsPerTxn {
				t.Fatalf("%d ops", n)
			}
			seen := map[uint64]bool{}
			fp := w.Footprint(msg)
			for _, r := range append(fp.Reads, fp.Writes...) {
				if seen[r.Key] || r.Key >= cfg.RecordCount || r.Table != Table {
					t.Fatalf("bad or duplicate key in %v", kv)
				}
				seen[r.Key] = true
			}
			if len(fp.Reads) != len(kv.GetReads()) || len(fp.Writes) != len(kv.GetWrites()) {
				t.Fatalf("footprint %v of %v", fp, kv)
			}
			reads += len(kv.GetReads())
			writes += len(kv.GetWrites())
			res := &messages.TxnResult{}
			prog, err := w.Program(msg, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(prog); err != nil {
				t.Fatal(err)
			}
			if got := len(res.GetKv().GetReads()); got != len(kv.GetReads()) {
				t.Fatalf("%d read results for %d reads", got, len(kv.GetReads()))
			}
			for _, rr := range res.GetKv().GetReads() {
				if _, err := kvrec.Verify(Ref(rr.GetRecord().GetKey()), rr.GetValue()); err != nil || !rr.GetFound() {
					t.Fatalf("read result %v: %v", rr, err)
				}
			}
		}
		if frac := float64(reads) / float64(reads+writes); math.Abs(frac-0.5) > 0.03 {
			t.Errorf("%s: read fraction %.3f", dist, frac)
		}
		for name, err := range checks(t, w, s) {
			if err != nil {
				t.Errorf("%s %s: %v", dist, name, err)
			}
		}
		// Versions count the writes.
		var versions uint64
		for k := range cfg.RecordCount {
			v, _, _ := s.Get(context.Background(), Ref(k))
			rec, _ := kvrec.Verify(Ref(k), v)
			versions += rec.Version
		}
		if versions != uint64(writes) {
			t.Errorf("%s: versions sum to %d, %d writes committed", dist, versions, writes)
		}
	}
}

func TestZipfianKeySkew(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Distribution = ZipfianOrdered
	cfg.OpsPerTxn = 1
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := w.NewGenerator(1, 0)
	const n = 200_000
	hits := 0
	for range n {
		fp := w.Footprint(g.Next())
		if append(fp.Reads, fp.Writes...)[0].Key == 0 {
			hits++
		}
	}
	p := 1 / zipf.Zeta(cfg.RecordCount, cfg.Theta)
	if got := float64(hits) / n; math.Abs(got-p)/p > 0.05 {
		t.Errorf("key 0 frequency %.4f, theory %.4f", got, p)
	}
}

func TestChecksFailOnCorruption(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RecordCount = 300
	ctx := context.Background()

	w, s := setup(t, cfg)
	v, _, _ := s.Get(ctx, Ref(123))
	v[50] ^= 0xff
	_ = s.Load(Ref(123), v)
	if c := checks(t, w, s); c["ycsb.records"] == nil || !strings.Contains(c["ycsb.records"].Error(), "1/123") {
		t.Fatalf("corrupted value: %v", c)
	}

	w, s = setup(t, cfg)
	_ = s.Load(Ref(7), kvrec.New(cfg.ValueSize, kvrec.Record{Ref: Ref(8)}))
	if c := checks(t, w, s); c["ycsb.records"] == nil {
		t.Fatalf("misplaced value: %v", c)
	}

	w, s = setup(t, cfg)
	_ = s.Load(Ref(7), kvrec.New(cfg.ValueSize, kvrec.Record{Ref: Ref(7), Version: 1, Balance: 3}))
	if c := checks(t, w, s); c["ycsb.conservation"] == nil || c["ycsb.records"] != nil {
		t.Fatalf("lost update: %v", c)
	}

	w, _ = setup(t, cfg)
	empty, _ := memtx.New(w.Schema())
	if c := checks(t, w, empty); c["ycsb.records"] == nil {
		t.Fatalf("missing records: %v", c)
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	w, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := w.NewGenerator(5, 1), w.NewGenerator(5, 1), w.NewGenerator(6, 1)
	diff := 0
	for range 500 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(w.Footprint(x), w.Footprint(y)) {
			t.Fatal("same seed and client, different transactions")
		}
		if !reflect.DeepEqual(w.Footprint(x), w.Footprint(z)) {
			diff++
		}
	}
	if diff < 400 {
		t.Errorf("seeds 5 and 6 differ on only %d of 500 transactions", diff)
	}
}

func TestRule(t *testing.T) {
	w, _ := New(DefaultConfig())
	r := w.Rule()
	if r.Name() != "ycsb_range" || r.KeyGroup(Ref(127)) != 1 || r.Partition(Ref(128)) != 2 {
		t.Fatal("rule")
	}
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{
		Reads:  []*messages.RecordRef{{Table: 1, Key: 5}},
		Writes: []*messages.KVWrite{{Record: &messages.RecordRef{Table: 1, Key: 6400}}},
	}}}
	if r.Home(msg) != 100 {
		t.Fatalf("home %d", r.Home(msg))
	}
}

func TestProgramRejects(t *testing.T) {
	w, _ := New(DefaultConfig())
	for _, m := range []*messages.TxnSubmit{
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 1, Key: 100_000}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 2, Key: 1}}}}},
		{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{}}},
	} {
		if _, err := w.Program(m, nil); err == nil {
			t.Errorf("accepted %v", m)
		}
	}
	// A write to a missing record fails instead of inserting.
	cfg := DefaultConfig()
	cfg.RecordCount = 10
	w, _ = New(cfg)
	s, _ := memtx.New(w.Schema())
	prog, _ := w.Program(&messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{
		Writes: []*messages.KVWrite{{Record: &messages.RecordRef{Table: 1, Key: 3}}}}}}, nil)
	if err := s.Run(prog); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("write of a missing record: %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{Distribution: "latest", OpsPerTxn: 65, ReadProportion: -1}.Validate()
	for _, want := range []string{"record count", "value size", "distribution", "ops per transaction", "read proportion", "keys per key group", "key groups per partition"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	c := DefaultConfig()
	c.Theta = 1
	c.RecordCount = 3
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "theta") || !strings.Contains(err.Error(), "> record count") {
		t.Errorf("got %v", err)
	}
}
