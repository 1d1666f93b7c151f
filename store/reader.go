package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

// Reader reads committed records outside transactions, for consistency checks
// and tools on a quiesced store: it neither locks nor validates, so a record
// being written concurrently may read torn. It is safe for concurrent use
// (calls are serialised on one queue pair).
type Reader struct {
	layout *Layout
	mu     sync.Mutex
	qp     rdma.QueuePair
}

// NewReader returns a reader with its own queue pair on dev.
func NewReader(layout *Layout, dev rdma.Device) (*Reader, error) {
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, err
	}
	return &Reader{layout: layout, qp: qp}, nil
}

// Get returns a record's value; ok is false when no present slot holds it.
func (r *Reader) Get(ctx context.Context, ref txn.Ref) ([]byte, bool, error) {
	t, err := r.layout.Table(ref.Table)
	if err != nil {
		return nil, false, err
	}
	b1, b2 := t.CandidateBuckets(ref.Key)
	wrs := []rdma.WorkRequest{
		{Op: rdma.OpRead, RKey: t.Region.RKey, RemoteAddr: t.BucketAddr(b1), Local: make([]byte, t.BucketSize)},
		{Op: rdma.OpRead, RKey: t.Region.RKey, RemoteAddr: t.BucketAddr(b2), Local: make([]byte, t.BucketSize)},
	}
	r.mu.Lock()
	cs, err := rdma.Exec(ctx, r.qp, wrs...)
	r.mu.Unlock()
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read %v: %w", ref, err)
	}
	for _, w := range wrs {
		for s := 0; s < SlotsPerBucket; s++ {
			slot := t.DecodeSlot(w.Local[uint64(s)*t.SlotSize:])
			if slot.Meta.Present() && slot.Key == ref.Key {
				return append([]byte(nil), slot.Value...), true, nil
			}
		}
	}
	return nil, false, nil
}

// Close releases the reader's queue pair.
func (r *Reader) Close() error { return r.qp.Close() }
