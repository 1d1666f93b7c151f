package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

// Snapshot reads committed records for consistency checks on a quiesced
// store, like Reader, but fetches each table whole the first time it is asked
// about it (sequential READs of the table's region, MaxBatchBytes per
// doorbell) and answers from an index in this process afterwards. Checks that
// probe every possible key of a table — most of them absent — then cost one
// pass over the region instead of two bucket READs per probe. It holds the
// fetched tables in memory until dropped. It is safe for concurrent use.
type Snapshot struct {
	layout *Layout
	dev    rdma.Device

	mu     sync.Mutex
	tables map[txn.TableID]map[uint64][]byte
}

// NewSnapshot returns a snapshot reading through dev.
func NewSnapshot(layout *Layout, dev rdma.Device) *Snapshot {
	return &Snapshot{layout: layout, dev: dev, tables: make(map[txn.TableID]map[uint64][]byte)}
}

// Get returns a record's value; ok is false when no present slot holds it.
func (s *Snapshot) Get(ctx context.Context, ref txn.Ref) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, ok := s.tables[ref.Table]
	if !ok {
		var err error
		if recs, err = s.fetch(ctx, ref.Table); err != nil {
			return nil, false, err
		}
		s.tables[ref.Table] = recs
	}
	v, ok := recs[ref.Key]
	return v, ok, nil
}

func (s *Snapshot) fetch(ctx context.Context, id txn.TableID) (map[uint64][]byte, error) {
	t, err := s.layout.Table(id)
	if err != nil {
		return nil, err
	}
	qp, err := s.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, err
	}
	defer qp.Close()
	size := t.Buckets * t.BucketSize
	buf := make([]byte, size)
	for off := uint64(0); off < size; {
		var wrs []rdma.WorkRequest
		for batch := uint64(0); off < size && len(wrs) < rdma.MaxBatch && batch+rdma.MaxTransferBytes <= rdma.MaxBatchBytes; {
			n := min(uint64(rdma.MaxTransferBytes), size-off)
			wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpRead, RKey: t.Region.RKey, RemoteAddr: t.Region.Addr + off, Local: buf[off : off+n]})
			off += n
			batch += n
		}
		cs, err := rdma.Exec(ctx, qp, wrs...)
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			return nil, fmt.Errorf("store: snapshot of %s: %w", t.Table.Name, err)
		}
	}
	recs := make(map[uint64][]byte)
	for off := uint64(0); off < size; off += t.SlotSize {
		if slot := t.DecodeSlot(buf[off:]); slot.Meta.Present() {
			recs[slot.Key] = slot.Value
		}
	}
	return recs, nil
}
