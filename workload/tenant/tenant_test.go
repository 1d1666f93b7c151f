package tenant

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload/kvrec"
)

func small() Config {
	c := DefaultConfig()
	c.Tenants = 16
	c.KGsPerTenant = 8
	c.KGSpace = 1 << 16
	c.KeysPerKG = 16
	return c
}

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
	if _, ok := out["tenant.records"]; !ok || len(out) != 2 {
		t.Fatalf("checks %v", out)
	}
	return out
}

func refsOf(msg *messages.TxnSubmit) []txn.Ref {
	var out []txn.Ref
	for _, r := range msg.GetKv().GetReads() {
		out = append(out, txn.Ref{Table: txn.TableID(r.Table), Key: r.Key})
	}
	for _, w := range msg.GetKv().GetWrites() {
		out = append(out, txn.Ref{Table: txn.TableID(w.Record.Table), Key: w.Record.Key})
	}
	return out
}

func TestLayoutIsScattered(t *testing.T) {
	w, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	kgs := w.KeyGroups()
	if len(kgs) != 64*16 {
		t.Fatalf("%d key groups", len(kgs))
	}
	// Not contiguous: few neighbours in the sorted set.
	adjacent := 0
	for i := 1; i < len(kgs); i++ {
		if kgs[i] == kgs[i-1]+1 {
			adjacent++
		}
	}
	if adjacent > 10 {
		t.Errorf("%d adjacent key groups", adjacent)
	}
	// Not aligned with a key prefix: a tenant's key groups span the space.
	for tn := range 64 {
		g := w.KeyGroupsOf(tn)
		if g[len(g)-1]-g[0] < w.cfg.KGSpace/4 {
			t.Errorf("tenant %d spans only [%d, %d]", tn, g[0], g[len(g)-1])
		}
		for _, kg := range g {
			if owner, ok := w.TenantOf(kg); !ok || owner != tn {
				t.Fatalf("TenantOf(%d) = %d, %v; want %d", kg, owner, ok, tn)
			}
		}
	}
	if _, ok := w.TenantOf(w.cfg.KGSpace + 5); ok {
		t.Error("unowned key group has a tenant")
	}
	// The same config gives the same layout.
	w2, _ := New(DefaultConfig())
	if !reflect.DeepEqual(w.Oracle(), w2.Oracle()) {
		t.Error("layout not deterministic")
	}
	c := DefaultConfig()
	c.LayoutSeed = 2
	w3, _ := New(c)
	if reflect.DeepEqual(w.Oracle(), w3.Oracle()) {
		t.Error("layout seed ignored")
	}
}

func TestTransactionsStayInTenant(t *testing.T) {
	cfg := small()
	cfg.CrossTenantFraction = 0.2
	w, s := setup(t, cfg)
	g := w.NewGenerator(3, 0)
	cross, writes, ops := 0, 0, 0
	const n = 4000
	for range n {
		msg := g.Next()
		refs := refsOf(msg)
		if len(refs) != cfg.OpsPerTxn {
			t.Fatalf("%d ops", len(refs))
		}
		writes += len(msg.GetKv().GetWrites())
		ops += len(refs)
		tenants := map[int]int{}
		for _, r := range refs {
			tn, ok := w.TenantOf(w.Rule().KeyGroup(r))
			if !ok {
				t.Fatalf("record %v outside every tenant", r)
			}
			tenants[tn]++
		}
		switch len(tenants) {
		case 1:
		case 2:
			cross++
		default:
			t.Fatalf("transaction touches tenants %v", tenants)
		}
		prog, err := w.Program(msg, &messages.TxnResult{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(prog); err != nil {
			t.Fatal(err)
		}
	}
	if f := float64(cross) / n; math.Abs(f-0.2) > 0.03 {
		t.Errorf("cross-tenant fraction %.3f, want 0.2", f)
	}
	if f := float64(writes) / float64(ops); math.Abs(f-0.8) > 0.03 {
		t.Errorf("write fraction %.3f, want 0.8", f)
	}
	for name, err := range checks(t, w, s) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDriftRemap(t *testing.T) {
	w, s := setup(t, small())
	before := w.Oracle()
	g := w.NewGenerator(1, 1)
	if err := w.Drift(1); err != nil {
		t.Fatal(err)
	}
	after := w.Oracle()
	if reflect.DeepEqual(before, after) {
		t.Fatal("drift changed nothing")
	}
	// Same loaded key groups, K per tenant, every one owned once.
	var all []uint64
	for tn, kgs := range after {
		if len(kgs) != w.cfg.KGsPerTenant {
			t.Fatalf("tenant %d has %d key groups", tn, len(kgs))
		}
		all = append(all, kgs...)
		for _, kg := range kgs {
			if o, _ := w.TenantOf(kg); o != tn {
				t.Fatalf("TenantOf disagrees with Oracle")
			}
		}
	}
	slices.Sort(all)
	if !slices.Equal(all, w.KeyGroups()) {
		t.Fatal("drift changed the set of key groups")
	}
	// Generators follow the new layout, with the same draws.
	msg := g.Next()
	if g.(*Generator).Epoch() != 1 {
		t.Fatal("generator did not see the drift")
	}
	tn := map[int]bool{}
	for _, r := range refsOf(msg) {
		o, _ := w.TenantOf(w.Rule().KeyGroup(r))
		tn[o] = true
	}
	if len(tn) > 2 {
		t.Fatalf("post-drift transaction spans tenants %v", tn)
	}
	// Epochs are a pure function of the config; going back recomputes.
	at1, _ := w.OracleAt(1)
	at0, _ := w.OracleAt(0)
	if !reflect.DeepEqual(at1, after) || !reflect.DeepEqual(at0, before) {
		t.Fatal("OracleAt disagrees")
	}
	w2, _ := New(small())
	if err := w2.Drift(3); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Advance()
	if e, _ := w.Advance(); e != 3 || !reflect.DeepEqual(w.Oracle(), w2.Oracle()) {
		t.Fatal("incremental and direct drift disagree")
	}
	if err := w.Drift(0); err != nil || !reflect.DeepEqual(w.Oracle(), before) {
		t.Fatal("drift back to 0")
	}
	for _, bad := range []int{-1, MaxEpoch + 1} {
		if err := w.Drift(bad); err == nil {
			t.Errorf("Drift(%d) accepted", bad)
		}
	}
	// Data is untouched by drifts; transactions keep it consistent.
	for name, err := range checks(t, w, s) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDriftFraction(t *testing.T) {
	cfg := small()
	cfg.DriftFraction = 0.25 // 4 of 16 tenants
	w, _ := New(cfg)
	before := w.Oracle()
	_ = w.Drift(1)
	after := w.Oracle()
	changed := 0
	for tn := range before {
		if !slices.Equal(before[tn], after[tn]) {
			changed++
		}
	}
	if changed == 0 || changed > 4 {
		t.Fatalf("%d tenants changed, want 1..4", changed)
	}
}

func TestDriftHot(t *testing.T) {
	cfg := small()
	cfg.TenantDistribution = Zipfian
	cfg.DriftMode = DriftHot
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hottest := func() int {
		ws := w.TenantWeights()
		return slices.Index(ws, slices.Max(ws))
	}
	if hottest() != 0 {
		t.Fatal("tenant 0 not hottest at epoch 0")
	}
	before := w.Oracle()
	counts := func() []int {
		g := w.NewGenerator(8, 0)
		c := make([]int, cfg.Tenants)
		for range 20000 {
			msg := g.Next()
			o, _ := w.TenantOf(w.Rule().KeyGroup(refsOf(msg)[0]))
			c[o]++
		}
		return c
	}
	c0 := counts()
	if slices.Index(c0, slices.Max(c0)) != 0 {
		t.Fatalf("counts %v", c0)
	}
	var e int
	for e = 1; e < 10; e++ {
		_ = w.Drift(e)
		if hottest() != 0 {
			break
		}
	}
	if hottest() == 0 {
		t.Fatal("hot tenant never moved")
	}
	if !reflect.DeepEqual(before, w.Oracle()) {
		t.Fatal("hot drift changed the layout")
	}
	c1 := counts()
	if h := hottest(); slices.Index(c1, slices.Max(c1)) != h {
		t.Fatalf("after drift the hottest is %d, counts %v", h, c1)
	}
	sum := 0.0
	for _, p := range w.TenantWeights() {
		sum += p
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("weights sum to %v", sum)
	}
}

func TestConcurrentDriftAndGenerate(t *testing.T) {
	w, _ := New(small())
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			g := w.NewGenerator(1, c)
			for range 2000 {
				for _, r := range refsOf(g.Next()) {
					if _, ok := w.TenantOf(w.Rule().KeyGroup(r)); !ok {
						t.Error("record outside every tenant")
						return
					}
				}
			}
		})
	}
	for e := range 20 {
		_ = w.Drift(e)
	}
	wg.Wait()
}

func TestGeneratorDeterministic(t *testing.T) {
	w, _ := New(DefaultConfig())
	a, b := w.NewGenerator(4, 9), w.NewGenerator(4, 9)
	c := w.NewGenerator(4, 10)
	diff := 0
	for range 500 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(refsOf(x), refsOf(y)) || len(x.GetKv().GetWrites()) != len(y.GetKv().GetWrites()) {
			t.Fatal("same seed and client, different transactions")
		}
		if !reflect.DeepEqual(refsOf(x), refsOf(z)) {
			diff++
		}
	}
	if diff < 450 {
		t.Errorf("clients differ on %d of 500", diff)
	}
}

func TestRule(t *testing.T) {
	w, _ := New(small())
	r := w.Rule()
	if r.Name() != "tenant_range" || r.KeyGroup(Ref(33)) != 2 {
		t.Fatal("rule")
	}
	if r.Partition(Ref(32)) != r.Partition(Ref(47)) || r.Partition(Ref(32)) == r.Partition(Ref(48)) || r.Partition(Ref(32)) == 2 {
		t.Fatal("partition is not a hash of the key group")
	}
}

func TestChecksFailOnCorruption(t *testing.T) {
	ctx := context.Background()
	w, s := setup(t, small())
	key := w.KeyGroups()[5]*w.cfg.KeysPerKG + 3
	v, _, _ := s.Get(ctx, Ref(key))
	v[40] ^= 4
	_ = s.Load(Ref(key), v)
	if c := checks(t, w, s); c["tenant.records"] == nil {
		t.Fatalf("corrupted record: %v", c)
	}
	w, s = setup(t, small())
	_ = s.Load(Ref(key), kvrec.New(w.cfg.ValueSize, kvrec.Record{Ref: Ref(key), Version: 1, Balance: -1}))
	if c := checks(t, w, s); c["tenant.conservation"] == nil || c["tenant.records"] != nil {
		t.Fatalf("lost update: %v", c)
	}
	empty, _ := memtx.New(w.Schema())
	if c := checks(t, w, empty); c["tenant.records"] == nil {
		t.Fatalf("missing records: %v", c)
	}
	// A record outside every tenant is rejected.
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 1, Key: (w.cfg.KGSpace + 1) * w.cfg.KeysPerKG}}}}}
	if _, err := w.Program(msg, nil); err == nil {
		t.Fatal("foreign record accepted")
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{TenantDistribution: "pareto", DriftMode: "x", WriteFraction: 2, CrossTenantFraction: -1}.Validate()
	for _, want := range []string{"tenants 0", "key groups per tenant", "keys per key group", "key-group space", "value size", "ops per transaction", "write fraction", "cross-tenant", "tenant distribution", "drift mode"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	c := DefaultConfig()
	c.DriftMode = DriftHot
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs tenant distribution") {
		t.Errorf("hot drift with uniform tenants: %v", err)
	}
	c = DefaultConfig()
	c.Tenants = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "single tenant") {
		t.Errorf("cross-tenant with one tenant: %v", err)
	}
	c = DefaultConfig()
	c.Tenants, c.KGsPerTenant, c.KeysPerKG = 4096, 256, 64
	if err := c.Validate(); err == nil {
		t.Error("oversized layout accepted")
	}
}
