package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

// Slot layout, in bytes from the slot's address. The meta word comes first and
// the lock word second so that a writer's release — one 16-byte WRITE of
// [meta, lock] — stores the new version before it clears the lock: a word-wise
// ascending write can never expose "unlocked" next to a stale version.
const (
	MetaOffset  = 0  // version<<1 | present
	LockOffset  = 8  // 0 = free; see LockWord
	KeyOffset   = 16 // the record's key (meaningful when present or claimed)
	ValueOffset = 24 // the value, ValueSize bytes padded to 8
	HeaderSize  = ValueOffset
)

// SlotsPerBucket is the associativity of a hash bucket; each key has two
// candidate buckets (two-choice hashing), read in one doorbell.
const SlotsPerBucket = 8

// LoadFactor is the fraction of slots a table's Capacity may fill. With two
// choices the fullest bucket holds about the mean plus ln ln n / ln 2, so the
// margin must be measured, not assumed: inserting 8 M keys at this load into
// 8-slot buckets filled no bucket beyond 6 slots (646 of 2.5 M buckets held
// 6), while 4-slot buckets at load 0.5 overflowed 108 times. An insert that
// finds both candidate buckets full fails with txn.ErrTableFull.
const LoadFactor = 0.4

// Meta packs a slot's version and presence bit.
type Meta uint64

// Version is the number of committed writes to the slot.
func (m Meta) Version() uint64 { return uint64(m) >> 1 }

// Present reports whether the slot holds a live record.
func (m Meta) Present() bool { return m&1 == 1 }

// NextMeta is the meta a commit writes: version + 1 and the given presence.
func (m Meta) NextMeta(present bool) Meta {
	n := Meta((m.Version() + 1) << 1)
	if present {
		n |= 1
	}
	return n
}

// Slot is a decoded slot.
type Slot struct {
	Meta  Meta
	Lock  uint64
	Key   uint64
	Value []byte // aliases the buffer it was decoded from
}

// TableLayout places one table in memory-node memory.
type TableLayout struct {
	Table      txn.Table
	Region     rdma.Region
	Buckets    uint64
	SlotSize   uint64
	BucketSize uint64
	// PartBuckets is the number of buckets of one partition
	// (txn.Table.Partitions); Buckets when the table has none.
	PartBuckets uint64
}

// KeyGroupAligned reports whether every slot of the table only ever holds
// records of one key group (txn.Table.Partitions).
func (l *TableLayout) KeyGroupAligned() bool { return l.Table.Partitions > 0 }

// DecodeSlot decodes the slot at the start of b (len ≥ SlotSize).
func (l *TableLayout) DecodeSlot(b []byte) Slot {
	return Slot{
		Meta:  Meta(binary.LittleEndian.Uint64(b[MetaOffset:])),
		Lock:  binary.LittleEndian.Uint64(b[LockOffset:]),
		Key:   binary.LittleEndian.Uint64(b[KeyOffset:]),
		Value: b[ValueOffset : ValueOffset+l.Table.ValueSize],
	}
}

// CandidateBuckets returns the key's two candidate buckets (distinct when the
// table has more than one bucket).
//
// In a partitioned table both lie in the key's partition's range.
func (l *TableLayout) CandidateBuckets(key uint64) (uint64, uint64) {
	h := mix(key ^ uint64(l.Table.ID)*0x9E3779B97F4A7C15)
	n, base := l.Buckets, uint64(0)
	if l.Table.Partitions > 0 {
		n = l.PartBuckets
		base = l.Table.Partition(key) % l.Table.Partitions * n
	}
	b1 := h % n
	b2 := mix(h^0xD6E8FEB86659FD93) % n
	if b2 == b1 && n > 1 {
		b2 = (b1 + 1) % n
	}
	return base + b1, base + b2
}

// BucketAddr is the remote address of bucket b.
func (l *TableLayout) BucketAddr(b uint64) uint64 { return l.Region.Addr + b*l.BucketSize }

// SlotAddr is the remote address of slot s of bucket b.
func (l *TableLayout) SlotAddr(b uint64, s int) uint64 {
	return l.BucketAddr(b) + uint64(s)*l.SlotSize
}

// mix is SplitMix64's finaliser: a fast, well-spread 64-bit hash.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// Layout is the placement of a schema's tables on one memory node.
type Layout struct {
	Schema txn.Schema
	tables map[txn.TableID]*TableLayout
	// Ledger is the commit ledger's region (see LedgerAddr).
	Ledger rdma.Region
	// Fences holds Schema.KeyGroupFences key-group fence words, 8 bytes
	// each, 0 when free (zero-length when the schema has none); see
	// FenceAddr.
	Fences rdma.Region
}

// FencesRegionName is the memory-node region of the key-group fence words.
const FencesRegionName = "txn/fences"

// FenceAddr returns the remote address of the fence word of the key group
// with dense index i, and false when the layout has no such word.
func (l *Layout) FenceAddr(i uint64) (uint64, bool) {
	if i >= l.Schema.KeyGroupFences || l.Fences.Length < 8*(i+1) {
		return 0, false
	}
	return l.Fences.Addr + 8*i, true
}

// Table returns the layout of table id.
func (l *Layout) Table(id txn.TableID) (*TableLayout, error) {
	t, ok := l.tables[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", txn.ErrNoSuchTable, id)
	}
	return t, nil
}

// RegionName is the memory-node region that holds a table.
func RegionName(t txn.Table) string { return "table/" + t.Name }

// RegionSize is the number of bytes a table's region needs. A partitioned
// table gets each partition its share of the capacity at LoadFactor, plus
// a bucket of margin (at least two buckets a partition, so that a key
// still has two choices).
func RegionSize(t txn.Table) (buckets, slotSize, bytes uint64) {
	buckets, slotSize, _, bytes = regionSize(t)
	return buckets, slotSize, bytes
}

func regionSize(t txn.Table) (buckets, slotSize, partBuckets, bytes uint64) {
	slotSize = HeaderSize + (uint64(t.ValueSize)+7)&^7
	parts, capacity := uint64(1), t.Capacity
	if t.Partitions > 0 {
		parts, capacity = t.Partitions, (t.Capacity+t.Partitions-1)/t.Partitions
	}
	slots := uint64(float64(capacity)/LoadFactor) + SlotsPerBucket
	partBuckets = (slots + SlotsPerBucket - 1) / SlotsPerBucket
	if t.Partitions > 0 {
		partBuckets = max(partBuckets, 2)
	}
	buckets = partBuckets * parts
	return buckets, slotSize, partBuckets, buckets * SlotsPerBucket * slotSize
}

// Create registers (or finds, if already registered with the same size) every
// table's region on the memory node behind dev and returns the layout. A
// compute node that joins later calls it too: registration is idempotent.
func Create(ctx context.Context, dev rdma.Device, schema txn.Schema) (*Layout, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	l := &Layout{Schema: schema, tables: make(map[txn.TableID]*TableLayout, len(schema.Tables))}
	var errs []error
	for _, t := range schema.Tables {
		buckets, slotSize, partBuckets, size := regionSize(t)
		r, err := dev.RegisterRegion(ctx, RegionName(t), size)
		if err != nil {
			errs = append(errs, fmt.Errorf("store: table %s: %w", t.Name, err))
			continue
		}
		l.tables[t.ID] = &TableLayout{Table: t, Region: r, Buckets: buckets, SlotSize: slotSize, BucketSize: slotSize * SlotsPerBucket,
			PartBuckets: partBuckets}
	}
	r, err := dev.RegisterRegion(ctx, LedgerRegionName, LedgerBytes)
	if err != nil {
		errs = append(errs, fmt.Errorf("store: commit ledger: %w", err))
	}
	l.Ledger = r
	if schema.KeyGroupFences > 0 {
		f, err := dev.RegisterRegion(ctx, FencesRegionName, 8*schema.KeyGroupFences)
		if err != nil {
			errs = append(errs, fmt.Errorf("store: key-group fences: %w", err))
		}
		l.Fences = f
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}
