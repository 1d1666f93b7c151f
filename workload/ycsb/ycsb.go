package ycsb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/kvrec"
	"github.com/aura-runtime/aura/workload/zipf"
)

// Name is the workload's name.
const Name = "ycsb"

// Table is the id of "usertable".
const Table txn.TableID = 1

// Key distributions.
const (
	Zipfian        = "zipfian"
	ZipfianOrdered = "zipfian_ordered"
	Uniform        = "uniform"
)

// Limits of the configuration.
const (
	MaxRecords   = 1 << 26
	MaxOpsPerTxn = 64
	MaxKeysPerKG = 1 << 20
)

// Config configures the YCSB workload.
type Config struct {
	// RecordCount is the number of records, 1..MaxRecords. Default 100,000.
	RecordCount uint64
	// ValueSize is a record's size in bytes, kvrec.MinValueSize (32) ..
	// txn.MaxValueSize. Default 100.
	ValueSize int
	// Distribution of keys: "zipfian" (scrambled, the default),
	// "zipfian_ordered" or "uniform".
	Distribution string
	// Theta is the Zipfian skew, 0 < θ < 1. Default 0.99.
	Theta float64
	// OpsPerTxn is the number of distinct keys a transaction touches,
	// 1..MaxOpsPerTxn and ≤ RecordCount. Default 4.
	OpsPerTxn int
	// ReadProportion is the probability that an operation is a read (else a
	// read-modify-write), in [0, 1]. Default 0.5.
	ReadProportion float64
	// KeysPerKG is the range rule's key-group size, 1..MaxKeysPerKG. Default 64.
	KeysPerKG uint64
	// KeyGroupsPerPartition groups consecutive key groups into one partition
	// value, ≥ 1. Default 1.
	KeyGroupsPerPartition uint64
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		RecordCount:           100_000,
		ValueSize:             100,
		Distribution:          Zipfian,
		Theta:                 zipf.YCSBZipfianConstant,
		OpsPerTxn:             4,
		ReadProportion:        0.5,
		KeysPerKG:             64,
		KeyGroupsPerPartition: 1,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.RecordCount < 1 || c.RecordCount > MaxRecords {
		errs = append(errs, fmt.Errorf("ycsb: record count %d, want 1..%d", c.RecordCount, MaxRecords))
	}
	if c.ValueSize < kvrec.MinValueSize || c.ValueSize > txn.MaxValueSize {
		errs = append(errs, fmt.Errorf("ycsb: value size %d, want %d..%d", c.ValueSize, kvrec.MinValueSize, txn.MaxValueSize))
	}
	switch c.Distribution {
	case Zipfian, ZipfianOrdered:
		if !(c.Theta > 0 && c.Theta < 1) {
			errs = append(errs, fmt.Errorf("ycsb: theta %v, want 0 < θ < 1", c.Theta))
		}
	case Uniform:
	default:
		errs = append(errs, fmt.Errorf("ycsb: distribution %q, want %q, %q or %q", c.Distribution, Zipfian, ZipfianOrdered, Uniform))
	}
	if c.OpsPerTxn < 1 || c.OpsPerTxn > MaxOpsPerTxn {
		errs = append(errs, fmt.Errorf("ycsb: ops per transaction %d, want 1..%d", c.OpsPerTxn, MaxOpsPerTxn))
	} else if uint64(c.OpsPerTxn) > c.RecordCount {
		errs = append(errs, fmt.Errorf("ycsb: ops per transaction %d > record count %d (keys are distinct)", c.OpsPerTxn, c.RecordCount))
	}
	if !(c.ReadProportion >= 0 && c.ReadProportion <= 1) {
		errs = append(errs, fmt.Errorf("ycsb: read proportion %v, want 0..1", c.ReadProportion))
	}
	if c.KeysPerKG < 1 || c.KeysPerKG > MaxKeysPerKG {
		errs = append(errs, fmt.Errorf("ycsb: keys per key group %d, want 1..%d", c.KeysPerKG, MaxKeysPerKG))
	}
	if c.KeyGroupsPerPartition < 1 {
		errs = append(errs, errors.New("ycsb: key groups per partition must be ≥ 1"))
	}
	return errors.Join(errs...)
}

// Workload is the YCSB workload. It is safe for concurrent use.
type Workload struct {
	cfg  Config
	keys func(*rand.Rand) uint64
	spec *kvrec.Spec
	rule rule
}

var _ workload.Workload = (*Workload)(nil)

// New returns a YCSB workload for a valid configuration.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, rule: rule{perKG: cfg.KeysPerKG, kgPerPart: cfg.KeyGroupsPerPartition,
		kgs: (cfg.RecordCount + cfg.KeysPerKG - 1) / cfg.KeysPerKG}}
	switch cfg.Distribution {
	case Zipfian:
		z, err := zipf.NewScrambled(0, cfg.RecordCount-1, cfg.Theta)
		if err != nil {
			return nil, err
		}
		w.keys = func(r *rand.Rand) uint64 { return z.Next(r) }
	case ZipfianOrdered:
		z, err := zipf.NewZipfian(0, cfg.RecordCount-1, cfg.Theta)
		if err != nil {
			return nil, err
		}
		w.keys = func(r *rand.Rand) uint64 { return z.Next(r) }
	default:
		n := cfg.RecordCount
		w.keys = func(r *rand.Rand) uint64 { return r.Uint64N(n) }
	}
	w.spec = &kvrec.Spec{
		Name: Name,
		ValueSize: func(t txn.TableID) (int, bool) {
			return cfg.ValueSize, t == Table
		},
		Valid: func(r txn.Ref) error {
			if r.Key >= cfg.RecordCount {
				return fmt.Errorf("key %d ≥ record count %d", r.Key, cfg.RecordCount)
			}
			return nil
		},
	}
	return w, nil
}

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// Schema implements workload.Workload.
func (w *Workload) Schema() txn.Schema {
	return txn.Schema{Tables: []txn.Table{{ID: Table, Name: "usertable", ValueSize: w.cfg.ValueSize, Capacity: w.cfg.RecordCount}},
		KeyGroupFences: w.rule.kgs}
}

// Ref is the record of a key.
func Ref(key uint64) txn.Ref { return txn.Ref{Table: Table, Key: key} }

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, ins workload.Inserter) error {
	for k := range w.cfg.RecordCount {
		if k%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := ins.Insert(ctx, Ref(k), kvrec.New(w.cfg.ValueSize, kvrec.Record{Ref: Ref(k)})); err != nil {
			return fmt.Errorf("ycsb: load key %d: %w", k, err)
		}
	}
	return nil
}

// Generator is a client's deterministic transaction generator.
type Generator struct {
	w    *Workload
	rng  *rand.Rand
	seen []uint64
}

// NewGenerator implements workload.Workload.
func (w *Workload) NewGenerator(seed uint64, client int) workload.Generator {
	return &Generator{w: w, rng: rand.New(rand.NewPCG(seed, kvrec.Mix64(uint64(client)^0x7c5b)))}
}

func (g *Generator) fresh(k uint64) bool {
	for _, s := range g.seen {
		if s == k {
			return false
		}
	}
	return true
}

// Next implements workload.Generator.
func (g *Generator) Next() *messages.TxnSubmit {
	cfg := &g.w.cfg
	kv := &messages.KVTxn{}
	g.seen = g.seen[:0]
	for range cfg.OpsPerTxn {
		k := g.w.keys(g.rng)
		for try := 0; !g.fresh(k); try++ {
			if try < 64 {
				k = g.w.keys(g.rng)
			} else { // very skewed and few keys: probe linearly
				k = (k + 1) % cfg.RecordCount
			}
		}
		g.seen = append(g.seen, k)
		ref := &messages.RecordRef{Table: uint32(Table), Key: k}
		if g.rng.Float64() < cfg.ReadProportion {
			kv.Reads = append(kv.Reads, ref)
		} else {
			kv.Writes = append(kv.Writes, &messages.KVWrite{Record: ref})
		}
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: kv}}
}

// Program implements workload.Workload (see package kvrec).
func (w *Workload) Program(msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error) {
	return kvrec.Program(w.spec, msg, res)
}

// Footprint implements workload.Workload: exactly the message's keys.
func (w *Workload) Footprint(msg *messages.TxnSubmit) workload.Footprint {
	return kvrec.Footprint(msg)
}

// Rule implements workload.Workload.
func (w *Workload) Rule() workload.Rule { return w.rule }

type rule struct {
	perKG, kgPerPart uint64
	kgs              uint64 // key groups: ⌈records / perKG⌉
}

func (r rule) Name() string                { return "ycsb_range" }
func (r rule) KeyGroup(ref txn.Ref) uint64 { return ref.Key / r.perKG }

// KeyGroupIndex implements workload.KeyGroupIndexer: key groups are dense
// already (key / keys per key group).
func (r rule) KeyGroupIndex(kg uint64) (uint64, bool) { return kg, kg < r.kgs }

func (r rule) Partition(ref txn.Ref) uint64 { return ref.Key / r.perKG / r.kgPerPart }
func (r rule) Home(msg *messages.TxnSubmit) uint64 {
	return kvrec.Home(msg, r.Partition)
}

// Check implements workload.Workload: "ycsb.records" and "ycsb.conservation".
func (w *Workload) Check(ctx context.Context, r workload.Reader) []workload.CheckResult {
	return kvrec.CheckRecords(ctx, w.spec, r, func(yield func(txn.Ref) bool) {
		for k := range w.cfg.RecordCount {
			if !yield(Ref(k)) {
				return
			}
		}
	})
}
