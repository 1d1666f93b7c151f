package occ

import (
	"context"
	"errors"
	"fmt"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
)

// CASLocker is the memory-node lock path: for every request it posts, in one
// doorbell, a CAS(0 → tag) on the slot's lock word followed by a READ of the
// slot, so a granted lock and the record it protects arrive in one round trip
// (as in FORD). It owns one queue pair and is used by one goroutine at a time;
// the atomic actor serialises its callers.
//
// It expects 0 only: a CAS that meets an owner sentinel is reported as
// LockRedirect with the word found (LockResult.LockWord). It has no
// OwnerMap, so it cannot tell a free sentinel of an evicted cohort from
// one of a live owner; the ownership Locker that wraps it (package
// actors/owner) decides, and takes free sentinels of retired activations
// over by one CAS from the sentinel.
type CASLocker struct {
	qp  rdma.QueuePair
	wrs []rdma.WorkRequest
}

// NewCASLocker returns a locker posting on qp.
func NewCASLocker(qp rdma.QueuePair) *CASLocker { return &CASLocker{qp: qp} }

// maxLocksPerDoorbell keeps a doorbell (two work requests a lock) within rdma.MaxBatch.
const maxLocksPerDoorbell = rdma.MaxBatch / 2

// Acquire implements Locker.
func (l *CASLocker) Acquire(ctx context.Context, reqs []LockRequest, res []LockResult) error {
	if len(res) != len(reqs) {
		return fmt.Errorf("occ: %d results for %d lock requests", len(res), len(reqs))
	}
	for start := 0; start < len(reqs); start += maxLocksPerDoorbell {
		end := min(start+maxLocksPerDoorbell, len(reqs))
		if err := l.acquire(ctx, reqs[start:end], res[start:end]); err != nil {
			// The requests of earlier chunks were attempted; report this chunk's
			// as unknown so that the caller cleans them up by tag.
			for i := start; i < len(reqs); i++ {
				res[i] = LockResult{Status: LockUnknown, Path: PathMNCAS}
			}
			if start == 0 && errors.Is(err, rdma.ErrQPClosed) {
				return err
			}
			return nil
		}
	}
	return nil
}

func (l *CASLocker) acquire(ctx context.Context, reqs []LockRequest, res []LockResult) error {
	l.wrs = l.wrs[:0]
	for i := range reqs {
		r := &reqs[i]
		buf := make([]byte, r.Table.SlotSize)
		l.wrs = append(l.wrs,
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: r.Table.Region.RKey,
				RemoteAddr: r.SlotAddr + store.LockOffset, Compare: 0, Swap: r.Tag},
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: r.Table.Region.RKey,
				RemoteAddr: r.SlotAddr, Local: buf})
	}
	cs, err := rdma.Exec(ctx, l.qp, l.wrs...)
	if err != nil && len(cs) == 0 {
		return err
	}
	for i := range reqs {
		out := LockResult{Path: PathMNCAS, CAS: 1}
		if 2*i >= len(cs) {
			out.Status = LockUnknown
			res[i] = out
			continue
		}
		cas := cs[2*i]
		switch {
		case cas.Status != rdma.StatusSuccess:
			out.Status = LockUnknown
			if cas.Status == rdma.StatusFlushed || cas.Status == rdma.StatusRemoteAccessError ||
				cas.Status == rdma.StatusRemoteInvalidRequest {
				out.Status = LockConflict // not applied
				out.CAS = 0
			}
		case cas.Value != 0:
			out.CASFailed = 1
			out.LockWord = cas.Value
			out.Status = LockConflict
			if store.IsOwnerSentinel(cas.Value) {
				out.Status = LockRedirect
			}
		case 2*i+1 >= len(cs) || cs[2*i+1].Status != rdma.StatusSuccess:
			// Locked, but the read failed: keep the lock so the abort releases it.
			out.Status = LockGranted
			out.Release = 0
		default:
			out.Status = LockGranted
			out.Slot = l.wrs[2*i+1].Local
			out.Release = 0
		}
		res[i] = out
	}
	return nil
}

// Released implements Locker; the memory-node path keeps no bookkeeping.
func (l *CASLocker) Released([]LockRequest, []LockResult) {}
