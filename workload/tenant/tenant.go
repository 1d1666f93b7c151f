package tenant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/kvrec"
	"github.com/aura-runtime/aura/workload/zipf"
)

// Name is the workload's name.
const Name = "tenant"

// Table is the id of "tenant_data".
const Table txn.TableID = 1

// Tenant distributions and drift modes.
const (
	Uniform    = "uniform"
	Zipfian    = "zipfian"
	DriftRemap = "remap"
	DriftHot   = "hot"
)

// Limits of the configuration.
const (
	MaxTenants      = 1 << 16
	MaxKGsPerTenant = 1 << 12
	MaxKeyGroups    = 1 << 20 // Tenants × KGsPerTenant
	MaxKeysPerKG    = 1 << 12
	MaxRecords      = 1 << 24 // Tenants × KGsPerTenant × KeysPerKG
	MaxKGSpace      = 1 << 40
	MaxOpsPerTxn    = 64
	// MaxEpoch bounds Drift's epoch.
	MaxEpoch = 1 << 16
)

// Config configures the tenant workload.
type Config struct {
	// Tenants is the number of tenants, 1..MaxTenants. Default 64.
	Tenants int
	// KGsPerTenant is how many key groups each tenant owns, 1..MaxKGsPerTenant;
	// Tenants × KGsPerTenant ≤ MaxKeyGroups. Default 16.
	KGsPerTenant int
	// KGSpace is the key-group space the tenants' key groups are drawn from,
	// ≥ 2 × Tenants × KGsPerTenant and ≤ MaxKGSpace; KGSpace × KeysPerKG
	// must fit in 63 bits. Default 2^20.
	KGSpace uint64
	// KeysPerKG is the number of keys (all loaded) in a key group,
	// 1..MaxKeysPerKG; the loaded records, Tenants × KGsPerTenant ×
	// KeysPerKG, are at most MaxRecords. Default 64.
	KeysPerKG uint64
	// ValueSize is a record's size, kvrec.MinValueSize..txn.MaxValueSize.
	// Default 64.
	ValueSize int
	// OpsPerTxn is how many distinct records a transaction touches,
	// 1..MaxOpsPerTxn and ≤ KGsPerTenant × KeysPerKG. Default 4.
	OpsPerTxn int
	// WriteFraction is the probability that an operation is a write, 0..1.
	// Default 0.8.
	WriteFraction float64
	// CrossTenantFraction is the probability that a transaction's last record
	// belongs to another tenant, 0..1 (0 when there is one tenant).
	// Default 0.05.
	CrossTenantFraction float64
	// TenantDistribution is how a transaction picks its tenant: "uniform"
	// (default) or "zipfian".
	TenantDistribution string
	// TenantTheta is the Zipfian skew over tenant ranks, 0 < θ < 1.
	// Default 0.99.
	TenantTheta float64
	// DriftMode is what Drift changes: "remap" (default: the tenant → key
	// group mapping) or "hot" (which tenants are hot; needs "zipfian").
	DriftMode string
	// DriftFraction is the share of tenants a remap drift reshuffles, in
	// (0, 1] (at least two tenants). Default 1.
	DriftFraction float64
	// LayoutSeed seeds the key groups' placement and every drift. It is part
	// of the workload's definition, not of a client: every process must use
	// the same. Default 1.
	LayoutSeed uint64
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		Tenants:             64,
		KGsPerTenant:        16,
		KGSpace:             1 << 20,
		KeysPerKG:           64,
		ValueSize:           64,
		OpsPerTxn:           4,
		WriteFraction:       0.8,
		CrossTenantFraction: 0.05,
		TenantDistribution:  Uniform,
		TenantTheta:         0.99,
		DriftMode:           DriftRemap,
		DriftFraction:       1,
		LayoutSeed:          1,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("tenant: "+format, args...)) }
	if c.Tenants < 1 || c.Tenants > MaxTenants {
		add("tenants %d, want 1..%d", c.Tenants, MaxTenants)
	}
	if c.KGsPerTenant < 1 || c.KGsPerTenant > MaxKGsPerTenant {
		add("key groups per tenant %d, want 1..%d", c.KGsPerTenant, MaxKGsPerTenant)
	}
	if c.KeysPerKG < 1 || c.KeysPerKG > MaxKeysPerKG {
		add("keys per key group %d, want 1..%d", c.KeysPerKG, MaxKeysPerKG)
	}
	kgs := uint64(max(c.Tenants, 0)) * uint64(max(c.KGsPerTenant, 0))
	if kgs > MaxKeyGroups {
		add("tenants × key groups per tenant = %d, want ≤ %d", kgs, MaxKeyGroups)
	} else if kgs*c.KeysPerKG > MaxRecords {
		add("%d records (tenants × key groups per tenant × keys per key group), want ≤ %d", kgs*c.KeysPerKG, MaxRecords)
	}
	if c.KGSpace > MaxKGSpace || c.KGSpace < 2*kgs || c.KGSpace == 0 {
		add("key-group space %d, want %d..%d (at least twice the tenants' key groups)", c.KGSpace, max(2*kgs, 1), uint64(MaxKGSpace))
	} else if c.KeysPerKG > 0 && c.KeysPerKG <= MaxKeysPerKG && c.KGSpace > math.MaxInt64/c.KeysPerKG {
		add("key-group space %d × keys per key group %d overflows 63 bits", c.KGSpace, c.KeysPerKG)
	}
	if c.ValueSize < kvrec.MinValueSize || c.ValueSize > txn.MaxValueSize {
		add("value size %d, want %d..%d", c.ValueSize, kvrec.MinValueSize, txn.MaxValueSize)
	}
	if c.OpsPerTxn < 1 || c.OpsPerTxn > MaxOpsPerTxn {
		add("ops per transaction %d, want 1..%d", c.OpsPerTxn, MaxOpsPerTxn)
	} else if c.KGsPerTenant > 0 && uint64(c.OpsPerTxn) > uint64(c.KGsPerTenant)*c.KeysPerKG {
		add("ops per transaction %d > a tenant's %d records (records are distinct)", c.OpsPerTxn, uint64(c.KGsPerTenant)*c.KeysPerKG)
	}
	if !(c.WriteFraction >= 0 && c.WriteFraction <= 1) {
		add("write fraction %v, want 0..1", c.WriteFraction)
	}
	if !(c.CrossTenantFraction >= 0 && c.CrossTenantFraction <= 1) {
		add("cross-tenant fraction %v, want 0..1", c.CrossTenantFraction)
	} else if c.Tenants == 1 && c.CrossTenantFraction > 0 {
		add("cross-tenant fraction %v with a single tenant, want 0", c.CrossTenantFraction)
	}
	switch c.TenantDistribution {
	case Uniform:
	case Zipfian:
		if !(c.TenantTheta > 0 && c.TenantTheta < 1) {
			add("tenant theta %v, want 0 < θ < 1", c.TenantTheta)
		}
	default:
		add("tenant distribution %q, want %q or %q", c.TenantDistribution, Uniform, Zipfian)
	}
	switch c.DriftMode {
	case DriftRemap:
		if !(c.DriftFraction > 0 && c.DriftFraction <= 1) {
			add("drift fraction %v, want 0 < f ≤ 1", c.DriftFraction)
		}
	case DriftHot:
		if c.TenantDistribution != Zipfian {
			add("drift mode %q needs tenant distribution %q", DriftHot, Zipfian)
		}
	default:
		add("drift mode %q, want %q or %q", c.DriftMode, DriftRemap, DriftHot)
	}
	return errors.Join(errs...)
}

// Workload is the tenant workload. It is safe for concurrent use; Drift may
// be called while generators run.
type Workload struct {
	cfg       Config
	spec      *kvrec.Spec
	populated []uint64 // the loaded key groups, ascending
	zipf      *zipf.Zipfian
	weights   []float64 // by rank

	cur  atomic.Pointer[layout]
	mu   sync.Mutex // serialises Drift and the layout cache
	base *layout    // epoch 0
}

var (
	_ workload.Workload = (*Workload)(nil)
	_ workload.Drifter  = (*Workload)(nil)
)

// New returns a tenant workload for a valid configuration.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg}
	T := cfg.Tenants
	drawn := populate(cfg.LayoutSeed, cfg.KGSpace, T*cfg.KGsPerTenant)
	w.populated = slices.Sorted(slices.Values(drawn))
	w.weights = make([]float64, T)
	if cfg.TenantDistribution == Zipfian {
		z, err := zipf.NewZipfian(0, uint64(T-1), cfg.TenantTheta)
		if err != nil {
			return nil, err
		}
		w.zipf = z
		for r := range T {
			w.weights[r] = z.Prob(uint64(r + 1))
		}
	} else {
		for r := range T {
			w.weights[r] = 1 / float64(T)
		}
	}
	w.base = w.initialLayout(drawn)
	w.cur.Store(w.base)
	w.spec = &kvrec.Spec{
		Name:      Name,
		ValueSize: func(t txn.TableID) (int, bool) { return cfg.ValueSize, t == Table },
		Valid: func(r txn.Ref) error {
			if w.index(r.Key/cfg.KeysPerKG) < 0 {
				return fmt.Errorf("key %d is in key group %d, which no tenant owns", r.Key, r.Key/cfg.KeysPerKG)
			}
			return nil
		},
	}
	return w, nil
}

// index is kg's position in w.populated, or -1.
func (w *Workload) index(kg uint64) int {
	i, ok := slices.BinarySearch(w.populated, kg)
	if !ok {
		return -1
	}
	return i
}

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// Schema implements workload.Workload.
func (w *Workload) Schema() txn.Schema {
	return txn.Schema{Tables: []txn.Table{{
		ID: Table, Name: "tenant_data", ValueSize: w.cfg.ValueSize,
		Capacity: uint64(len(w.populated)) * w.cfg.KeysPerKG,
	}}, KeyGroupFences: uint64(len(w.populated))}
}

// Ref is the record of a key.
func Ref(key uint64) txn.Ref { return txn.Ref{Table: Table, Key: key} }

// KeyGroups returns the loaded key groups in ascending order (a copy).
func (w *Workload) KeyGroups() []uint64 { return slices.Clone(w.populated) }

func (w *Workload) records() func(func(txn.Ref) bool) {
	return func(yield func(txn.Ref) bool) {
		for _, kg := range w.populated {
			for off := range w.cfg.KeysPerKG {
				if !yield(Ref(kg*w.cfg.KeysPerKG + off)) {
					return
				}
			}
		}
	}
}

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, ins workload.Inserter) error {
	n := 0
	for r := range w.records() {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		n++
		if err := ins.Insert(ctx, r, kvrec.New(w.cfg.ValueSize, kvrec.Record{Ref: r})); err != nil {
			return fmt.Errorf("tenant: load %v: %w", r, err)
		}
	}
	return nil
}

// Epoch is the current layout epoch.
func (w *Workload) Epoch() int { return w.cur.Load().epoch }

// Drift switches the layout to epoch (0..MaxEpoch); generators use it from
// their next transaction on. Drifting forward from the current epoch costs
// O((epoch − current) × Tenants × KGsPerTenant); going back recomputes from
// epoch 0.
func (w *Workload) Drift(epoch int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, err := w.layoutAtLocked(epoch)
	if err != nil {
		return err
	}
	w.cur.Store(l)
	return nil
}

// Advance is Drift(Epoch()+1); it returns the new epoch.
func (w *Workload) Advance() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, err := w.layoutAtLocked(w.cur.Load().epoch + 1)
	if err != nil {
		return 0, err
	}
	w.cur.Store(l)
	return l.epoch, nil
}

func (w *Workload) layoutAt(epoch int) (*layout, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.layoutAtLocked(epoch)
}

func (w *Workload) layoutAtLocked(epoch int) (*layout, error) {
	if epoch < 0 || epoch > MaxEpoch {
		return nil, fmt.Errorf("tenant: drift epoch %d, want 0..%d", epoch, MaxEpoch)
	}
	l := w.cur.Load()
	if l.epoch > epoch {
		l = w.base
	}
	for l.epoch < epoch {
		l = w.next(l)
	}
	return l, nil
}

// TenantOf returns the tenant owning key group kg at the current epoch; ok
// is false when kg holds no tenant's data.
func (w *Workload) TenantOf(kg uint64) (tenant int, ok bool) {
	i := w.index(kg)
	if i < 0 {
		return 0, false
	}
	return int(w.cur.Load().owner[i]), true
}

// KeyGroupsOf returns tenant's key groups at the current epoch, ascending.
func (w *Workload) KeyGroupsOf(tenant int) []uint64 {
	if tenant < 0 || tenant >= w.cfg.Tenants {
		return nil
	}
	K := w.cfg.KGsPerTenant
	return slices.Sorted(slices.Values(w.cur.Load().byTenant[tenant*K : (tenant+1)*K]))
}

// Oracle is the ground-truth co-access grouping at the current epoch: for
// each tenant (index), its key groups in ascending order.
func (w *Workload) Oracle() [][]uint64 { return oracle(w.cfg, w.cur.Load()) }

// OracleAt is Oracle at any epoch 0..MaxEpoch (it does not drift).
func (w *Workload) OracleAt(epoch int) ([][]uint64, error) {
	l, err := w.layoutAt(epoch)
	if err != nil {
		return nil, err
	}
	return oracle(w.cfg, l), nil
}

func oracle(cfg Config, l *layout) [][]uint64 {
	K := cfg.KGsPerTenant
	out := make([][]uint64, cfg.Tenants)
	for t := range out {
		out[t] = slices.Sorted(slices.Values(l.byTenant[t*K : (t+1)*K]))
	}
	return out
}

// TenantWeights is, for each tenant, the probability that a transaction
// picks it at the current epoch (the Zipf law for "zipfian"; Gray's
// generator approximates it).
func (w *Workload) TenantWeights() []float64 {
	l := w.cur.Load()
	out := make([]float64, w.cfg.Tenants)
	for r, p := range w.weights {
		out[l.tenantOfRank(r)] = p
	}
	return out
}

// Generator is a client's deterministic transaction generator.
type Generator struct {
	w     *Workload
	rng   *rand.Rand
	epoch int
	seen  []uint64
}

// NewGenerator implements workload.Workload.
func (w *Workload) NewGenerator(seed uint64, client int) workload.Generator {
	return &Generator{w: w, rng: rand.New(rand.NewPCG(seed, kvrec.Mix64(uint64(client)^0x7e4a)))}
}

// Epoch is the layout epoch of the last transaction generated.
func (g *Generator) Epoch() int { return g.epoch }

func (g *Generator) fresh(k uint64) bool {
	return !slices.Contains(g.seen, k)
}

// record draws a record of tenant t.
func (g *Generator) record(l *layout, t int) uint64 {
	cfg := &g.w.cfg
	kg := l.byTenant[t*cfg.KGsPerTenant+g.rng.IntN(cfg.KGsPerTenant)]
	return kg*cfg.KeysPerKG + g.rng.Uint64N(cfg.KeysPerKG)
}

// Next implements workload.Generator.
func (g *Generator) Next() *messages.TxnSubmit {
	cfg := &g.w.cfg
	l := g.w.cur.Load()
	g.epoch = l.epoch
	var rank int
	if g.w.zipf != nil {
		rank = int(g.w.zipf.Next(g.rng))
	} else {
		rank = g.rng.IntN(cfg.Tenants)
	}
	t := l.tenantOfRank(rank)
	cross := cfg.CrossTenantFraction > 0 && g.rng.Float64() < cfg.CrossTenantFraction
	other := -1
	if cross {
		other = g.rng.IntN(cfg.Tenants - 1)
		if other >= t {
			other++
		}
	}
	kv := &messages.KVTxn{}
	g.seen = g.seen[:0]
	for i := range cfg.OpsPerTxn {
		owner := t
		if i == cfg.OpsPerTxn-1 && cross {
			owner = other
		}
		k := g.record(l, owner)
		for !g.fresh(k) { // terminates: OpsPerTxn ≤ a tenant's records
			k = g.record(l, owner)
		}
		g.seen = append(g.seen, k)
		ref := &messages.RecordRef{Table: uint32(Table), Key: k}
		if g.rng.Float64() < cfg.WriteFraction {
			kv.Writes = append(kv.Writes, &messages.KVWrite{Record: ref})
		} else {
			kv.Reads = append(kv.Reads, ref)
		}
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: kv}}
}

// Program implements workload.Workload (see package kvrec).
func (w *Workload) Program(msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error) {
	return kvrec.Program(w.spec, msg, res)
}

// Footprint implements workload.Workload: exactly the message's records.
func (w *Workload) Footprint(msg *messages.TxnSubmit) workload.Footprint {
	return kvrec.Footprint(msg)
}

// Rule implements workload.Workload.
func (w *Workload) Rule() workload.Rule { return rule{perKG: w.cfg.KeysPerKG, populated: w.populated} }

type rule struct {
	perKG     uint64
	populated []uint64 // the workload's, ascending; never modified
}

// KeyGroupIndex implements workload.KeyGroupIndexer: a key group's position
// among the loaded ones.
func (r rule) KeyGroupIndex(kg uint64) (uint64, bool) {
	i, ok := slices.BinarySearch(r.populated, kg)
	return uint64(i), ok
}

func (r rule) Name() string                 { return "tenant_range" }
func (r rule) KeyGroup(ref txn.Ref) uint64  { return ref.Key / r.perKG }
func (r rule) Partition(ref txn.Ref) uint64 { return kvrec.Mix64(ref.Key / r.perKG) }
func (r rule) Home(msg *messages.TxnSubmit) uint64 {
	return kvrec.Home(msg, r.Partition)
}

// Check implements workload.Workload: "tenant.records" and
// "tenant.conservation".
func (w *Workload) Check(ctx context.Context, r workload.Reader) []workload.CheckResult {
	return kvrec.CheckRecords(ctx, w.spec, r, w.records())
}
