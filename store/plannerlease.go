package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/rdma"
)

// PlannerLeaseRegion is the region of the planner lease's word (package
// control/plannerlease): one 8-byte word, zero on a fresh memory node.
const PlannerLeaseRegion = "aura/planner-lease"

// LeaseWord is the planner lease's word on a memory node, read with a
// fetch-and-add of zero and swapped with the memory node's atomic CAS. It
// implements actors/planner.LeaseWord and is safe for concurrent use
// (operations take turns on one queue pair).
type LeaseWord struct {
	mu     sync.Mutex
	qp     rdma.QueuePair
	region rdma.Region
}

// NewLeaseWord registers the word's region on the memory node behind dev
// (idempotent: every node registers the same one) and opens its queue pair.
func NewLeaseWord(ctx context.Context, dev rdma.Device) (*LeaseWord, error) {
	r, err := dev.RegisterRegion(ctx, PlannerLeaseRegion, 8)
	if err != nil {
		return nil, fmt.Errorf("store: planner lease region: %w", err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, fmt.Errorf("store: planner lease queue pair: %w", err)
	}
	return &LeaseWord{qp: qp, region: r}, nil
}

func (w *LeaseWord) exec(ctx context.Context, wr rdma.WorkRequest) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wr.RKey, wr.RemoteAddr = w.region.RKey, w.region.Addr
	cs, err := rdma.Exec(ctx, w.qp, wr)
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err != nil {
		return 0, fmt.Errorf("store: planner lease word: %w", err)
	}
	return cs[0].Value, nil
}

// Load returns the word.
func (w *LeaseWord) Load(ctx context.Context) (uint64, error) {
	return w.exec(ctx, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Add: 0})
}

// CompareAndSwap stores swap if the word equals compare and returns the
// word's previous value.
func (w *LeaseWord) CompareAndSwap(ctx context.Context, compare, swap uint64) (uint64, error) {
	return w.exec(ctx, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Compare: compare, Swap: swap})
}

// Close releases the queue pair.
func (w *LeaseWord) Close() error { return w.qp.Close() }
