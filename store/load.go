package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

// Loader populates empty tables with one-sided WRITEs, batched into doorbells.
// It places records itself from an occupancy count per bucket kept in this
// process, so it must be the only writer while it runs: load before starting
// transactions. It is safe for concurrent use by several goroutines.
type Loader struct {
	layout *Layout
	dev    rdma.Device

	mu        sync.Mutex
	occupancy map[txn.TableID][]uint8
	qp        rdma.QueuePair
	batch     []rdma.WorkRequest
	bytes     int
	loaded    uint64
}

// NewLoader returns a loader for freshly registered (all-zero) tables.
func NewLoader(layout *Layout, dev rdma.Device) (*Loader, error) {
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, err
	}
	return &Loader{layout: layout, dev: dev, qp: qp, occupancy: make(map[txn.TableID][]uint8)}, nil
}

// Insert queues a record; it reaches the memory node at the next flush.
func (l *Loader) Insert(ctx context.Context, r txn.Ref, value []byte) error {
	t, err := l.layout.Table(r.Table)
	if err != nil {
		return err
	}
	if len(value) != t.Table.ValueSize {
		return fmt.Errorf("%w: table %s wants %d bytes, got %d", txn.ErrValueSize, t.Table.Name, t.Table.ValueSize, len(value))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	occ := l.occupancy[r.Table]
	if occ == nil {
		occ = make([]uint8, t.Buckets)
		l.occupancy[r.Table] = occ
	}
	b1, b2 := t.CandidateBuckets(r.Key)
	b := b1
	if occ[b2] < occ[b1] {
		b = b2
	}
	if occ[b] >= SlotsPerBucket {
		return fmt.Errorf("%w: table %s, key %d", txn.ErrTableFull, t.Table.Name, r.Key)
	}
	s := int(occ[b])
	occ[b]++
	buf := make([]byte, t.SlotSize)
	binary.LittleEndian.PutUint64(buf[MetaOffset:], uint64(Meta(0).NextMeta(true)))
	binary.LittleEndian.PutUint64(buf[KeyOffset:], r.Key)
	copy(buf[ValueOffset:], value)
	if len(l.batch) == rdma.MaxBatch || l.bytes+len(buf) > rdma.MaxBatchBytes {
		if err := l.flushLocked(ctx); err != nil {
			return err
		}
	}
	l.batch = append(l.batch, rdma.WorkRequest{Op: rdma.OpWrite, RKey: t.Region.RKey, RemoteAddr: t.SlotAddr(b, s), Local: buf})
	l.bytes += len(buf)
	l.loaded++
	return nil
}

// Flush writes queued records and waits for them.
func (l *Loader) Flush(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked(ctx)
}

func (l *Loader) flushLocked(ctx context.Context) error {
	if len(l.batch) == 0 {
		return nil
	}
	cs, err := rdma.Exec(ctx, l.qp, l.batch...)
	l.batch, l.bytes = l.batch[:0], 0
	if err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	if err := rdma.FirstError(cs); err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	return nil
}

// Loaded returns the number of records inserted so far.
func (l *Loader) Loaded() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded
}

// Close flushes and releases the loader's queue pair.
func (l *Loader) Close(ctx context.Context) error {
	err := l.Flush(ctx)
	if cerr := l.qp.Close(); err == nil {
		err = cerr
	}
	return err
}
