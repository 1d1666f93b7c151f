// Package workload defines what every workload provides to the benchmark, the
// simulator and the tests: a schema, a loader, deterministic transaction
// generators, the programs that execute generated transactions, the rule that
// maps records to key groups and partitions, and consistency checks.
//
// Workloads live in subpackages: tpcc, ycsb, bank, tenant, trace.
package workload

import (
	"context"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
)

// Workload is one benchmark workload, configured (scale, skew, profile) when
// constructed. Implementations are safe for concurrent use; generators are not.
type Workload interface {
	// Name is the workload's name as flags spell it ("tpcc", "ycsb", …).
	Name() string
	// Schema is the workload's tables, with capacities large enough for the
	// configured run.
	Schema() txn.Schema
	// Load populates empty tables through ins.
	Load(ctx context.Context, ins Inserter) error
	// NewGenerator returns client's deterministic transaction generator: the
	// same seed and client give the same sequence.
	NewGenerator(seed uint64, client int) Generator
	// Program returns the program executing msg. When the program commits,
	// it may have filled res's output (a bank audit's total, a KV read's values).
	Program(msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error)
	// Rule maps records to key groups and partitions.
	Rule() Rule
	// Footprint predicts, from its parameters alone, the records a
	// transaction will lock (writes) and read; routers use it before execution.
	// A prediction may miss records decided during execution.
	Footprint(msg *messages.TxnSubmit) Footprint
	// Check runs the workload's consistency checks on a quiesced store.
	Check(ctx context.Context, r Reader) []CheckResult
}

// Generator produces transactions.
type Generator interface {
	// Next returns the next transaction; its TxnID is left 0 for the caller.
	Next() *messages.TxnSubmit
}

// Inserter stores records during loading (store.Loader, memtx.Store).
type Inserter interface {
	Insert(ctx context.Context, r txn.Ref, value []byte) error
}

// Reader reads records outside transactions, for consistency checks on a
// quiesced store.
type Reader interface {
	// Get returns a record's value; ok is false when it does not exist.
	Get(ctx context.Context, r txn.Ref) (value []byte, ok bool, err error)
}

// Rule maps records to key groups (the unit of learning and ownership) and
// to partition values (the unit of static routing, e.g. a TPC-C warehouse).
type Rule interface {
	// Name is the rule's name.
	Name() string
	// KeyGroup returns a record's key group.
	KeyGroup(r txn.Ref) uint64
	// Partition returns a record's partition value.
	Partition(r txn.Ref) uint64
	// Home returns the partition value a transaction is routed by under static
	// partitioning (TPC-C: its home warehouse).
	Home(msg *messages.TxnSubmit) uint64
}

// KeyGroupIndexer is implemented by rules whose key groups have a dense
// index: each of the rule's key groups maps to its own integer below the
// workload schema's KeyGroupFences, the key group's fence word on the
// memory node (package actors/owner, "Key-group fences"). A rule without
// it has no fence words, and owners pay one CAS per record they first
// grant.
type KeyGroupIndexer interface {
	// KeyGroupIndex returns kg's index; ok is false for a value that is
	// not one of the rule's key groups (no fence word guards it).
	KeyGroupIndex(kg uint64) (index uint64, ok bool)
}

// Footprint is a transaction's predicted write and read set.
type Footprint struct {
	Writes []txn.Ref
	Reads  []txn.Ref
}

// CheckResult is the outcome of one consistency check.
type CheckResult struct {
	// Name identifies the check ("tpcc.c1", "bank.total", …).
	Name string
	// Err is nil when the check passed.
	Err error
}

// Drifter is the optional capability of a workload whose access pattern can
// drift (SPEC §9): Drift(epoch) switches it to the pattern of that epoch —
// which records are hot and which are accessed together — while the data,
// the schema, the rule and the programs stay the same, so a drift never
// invalidates loaded tables or consistency checks; only where generated
// transactions land changes, and with it the co-access graph a planner
// learns. Epoch 0 is the pattern right after construction; each epoch's
// pattern is a function of the workload's configuration and the epoch alone
// (not of the epochs visited before), so every process agrees on it.
//
// Drift must be safe for concurrent use with generators (Next picks the
// new pattern up from its next transaction on) and with other Drift calls.
// Epochs are bounded: a workload refuses epochs above its own maximum (e.g.
// bank.MaxDriftEpoch, tenant.MaxEpoch) and negative epochs with an error,
// as well as any drift its configuration cannot express.
type Drifter interface {
	Drift(epoch int) error
}
