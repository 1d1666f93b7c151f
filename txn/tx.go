package txn

import (
	"errors"
	"fmt"
)

// TableID names a table of a workload's schema.
type TableID uint32

// Ref names one record: its table and its 64-bit key within the table.
type Ref struct {
	Table TableID
	Key   uint64
}

func (r Ref) String() string { return fmt.Sprintf("%d/%d", r.Table, r.Key) }

// Tx is what a transaction program sees: reads, locked reads for update,
// writes, inserts and deletes of fixed-size records. Every method may fail
// with an error wrapping ErrConflict, which means the transaction was (or will
// be) aborted and should be retried as a whole; a program returns such errors
// unchanged. A Tx is used by one goroutine.
type Tx interface {
	// Get reads a record without locking it; the read is validated at commit.
	// It returns an error wrapping ErrNotFound when the record does not exist.
	Get(r Ref) ([]byte, error)
	// GetMany is Get for several records in one round trip; a missing record
	// yields a nil value (not an error).
	GetMany(rs []Ref) ([][]byte, error)
	// GetForUpdate locks a record (exclusively, until the transaction ends) and
	// reads it. It returns an error wrapping ErrNotFound when it does not exist.
	GetForUpdate(r Ref) ([]byte, error)
	// GetForUpdateMany is GetForUpdate for several records in one round trip; a
	// missing record yields a nil value and holds no lock.
	GetForUpdateMany(rs []Ref) ([][]byte, error)
	// Put replaces the value of a record this transaction locked with
	// GetForUpdate or inserted. The value must have the table's record size.
	Put(r Ref, value []byte) error
	// Insert creates a record, locked until the transaction ends. It returns an
	// error wrapping ErrExists when the key is present.
	Insert(r Ref, value []byte) error
	// Delete removes a record this transaction locked with GetForUpdate.
	Delete(r Ref) error
}

// Program is a transaction's logic. Returning nil asks to commit; returning
// ErrRollback (or an error wrapping it) asks for a user-requested rollback (a
// TPC-C NewOrder with an invalid item); any other error aborts.
type Program func(tx Tx) error

// Sentinel errors of transactions.
var (
	// ErrConflict: a lock was held by another transaction or a read was
	// invalidated; the transaction aborts and may be retried.
	ErrConflict = errors.New("txn: conflict")
	// ErrRollback: the program asked to roll back; not retried.
	ErrRollback = errors.New("txn: rolled back by the program")
	// ErrNotFound: no record under that key.
	ErrNotFound = errors.New("txn: record not found")
	// ErrExists: Insert of a key that is present.
	ErrExists = errors.New("txn: record exists")
	// ErrNotLocked: Put or Delete of a record this transaction did not lock.
	ErrNotLocked = errors.New("txn: record not locked by this transaction")
	// ErrNoSuchTable: a Ref names a table the schema does not have.
	ErrNoSuchTable = errors.New("txn: no such table")
	// ErrValueSize: a value whose length is not the table's record size.
	ErrValueSize = errors.New("txn: value size does not match the table's record size")
	// ErrTableFull: an insert found no free slot in the record's hash bucket.
	ErrTableFull = errors.New("txn: table full")
)

// Table describes one table of a schema.
type Table struct {
	// ID is the table's identifier, unique in its schema.
	ID TableID
	// Name is the table's name, as rules and reports spell it.
	Name string
	// ValueSize is the fixed size of every record's value, in bytes.
	ValueSize int
	// Capacity is the number of records the table must be able to hold at
	// once; the store sizes the table's hash index from it.
	Capacity uint64
	// Partitions, when positive, splits the table's hash index into that
	// many equal ranges of buckets, and Partition picks a key's range
	// (its result is taken modulo Partitions). Every key of one partition
	// must belong to one key group of the workload's rule: then every
	// record that can ever occupy a slot is of that key group, and an
	// owner holding the key group's fence may claim an empty slot for an
	// insert without an atomic (package actors/owner, "Key-group fences").
	// Capacity is spread evenly over the partitions, so they should be
	// about equally full. 0, the default: one range for the whole table. At
	// most MaxPartitions.
	Partitions uint64
	Partition  func(key uint64) uint64
}

// MaxPartitions caps Table.Partitions.
const MaxPartitions = 1 << 24

// Schema is a workload's set of tables.
type Schema struct {
	Tables []Table
	// KeyGroupFences is the number of key-group fence words the memory node
	// holds beside the tables: one per dense key-group index of the
	// workload's rule (package workload, KeyGroupIndexer), so that an owner
	// can claim a whole key group with one atomic instead of one per record
	// (package actors/owner, "Key-group fences"). 0, the default: none, and
	// every owner's first grant of a record costs a CAS. At most
	// MaxKeyGroupFences.
	KeyGroupFences uint64
}

// MaxKeyGroupFences caps Schema.KeyGroupFences: 2^24 words are 128 MiB of
// memory-node memory, more than any rule here has key groups.
const MaxKeyGroupFences = 1 << 24

// Table returns the table with the given ID.
func (s *Schema) Table(id TableID) (Table, bool) {
	for _, t := range s.Tables {
		if t.ID == id {
			return t, true
		}
	}
	return Table{}, false
}

// Validate reports every problem with the schema at once.
func (s *Schema) Validate() error {
	var errs []error
	seenID := map[TableID]bool{}
	seenName := map[string]bool{}
	for _, t := range s.Tables {
		if seenID[t.ID] {
			errs = append(errs, fmt.Errorf("schema: duplicate table id %d", t.ID))
		}
		if seenName[t.Name] || t.Name == "" {
			errs = append(errs, fmt.Errorf("schema: table %d: empty or duplicate name %q", t.ID, t.Name))
		}
		seenID[t.ID], seenName[t.Name] = true, true
		if t.ValueSize <= 0 || t.ValueSize > MaxValueSize {
			errs = append(errs, fmt.Errorf("schema: table %q: value size %d, want 1..%d", t.Name, t.ValueSize, MaxValueSize))
		}
		if t.Capacity == 0 {
			errs = append(errs, fmt.Errorf("schema: table %q: capacity must be positive", t.Name))
		}
		if t.Partitions > MaxPartitions || (t.Partitions > 0) != (t.Partition != nil) {
			errs = append(errs, fmt.Errorf("schema: table %q: %d partitions (at most %d, with a Partition function iff positive)",
				t.Name, t.Partitions, MaxPartitions))
		}
	}
	if s.KeyGroupFences > MaxKeyGroupFences {
		errs = append(errs, fmt.Errorf("schema: %d key-group fences, at most %d", s.KeyGroupFences, MaxKeyGroupFences))
	}
	return errors.Join(errs...)
}

// MaxValueSize caps a record's value, so that a bucket read stays one
// bounded READ.
const MaxValueSize = 4096
