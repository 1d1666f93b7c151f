package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
)

// CASLocker is the memory-node lock path: for every request it posts, in one
// doorbell, a CAS(0 → tag) on the slot's lock word followed by a READ of the
// slot, so a granted lock and the record it protects arrive in one round trip
// (as in FORD). A request that names its key group's fence word
// (LockRequest.Fence) also gets a READ of it after the CAS, in the same
// doorbell (LockResult.FenceWord): the locker that wraps this one gives the
// lock back when an owner holds the fence (package actors/owner,
// "Key-group fences"). A READ is not an atomic; the fence costs no round
// trip. It owns one queue pair and is used by one goroutine at a time;
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

// maxLocksPerDoorbell keeps a doorbell (up to three work requests a lock)
// within rdma.MaxBatch.
const maxLocksPerDoorbell = rdma.MaxBatch / 3

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
	first := make([]int, len(reqs)) // index of each request's CAS in l.wrs
	for i := range reqs {
		r := &reqs[i]
		buf := make([]byte, r.Table.SlotSize)
		first[i] = len(l.wrs)
		l.wrs = append(l.wrs,
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: r.Table.Region.RKey,
				RemoteAddr: r.SlotAddr + store.LockOffset, Compare: 0, Swap: r.Tag},
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: r.Table.Region.RKey,
				RemoteAddr: r.SlotAddr, Local: buf})
		if r.Fence != 0 {
			l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: r.FenceRKey,
				RemoteAddr: r.Fence, Local: make([]byte, 8)})
		}
	}
	cs, err := rdma.Exec(ctx, l.qp, l.wrs...)
	if err != nil && len(cs) == 0 {
		return err
	}
	for i := range reqs {
		out := LockResult{Path: PathMNCAS, CAS: 1}
		f := first[i]
		if f >= len(cs) {
			out.Status = LockUnknown
			res[i] = out
			continue
		}
		cas := cs[f]
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
		case reqs[i].Fence != 0 && (f+2 >= len(cs) || cs[f+2].Status != rdma.StatusSuccess):
			// Locked, but the fence was not read: nobody may use the lock
			// without it. Reported unknown, so that the abort releases it
			// by CAS(tag → 0) (a fence holder may have overwritten it).
			out.Status = LockUnknown
		case f+1 >= len(cs) || cs[f+1].Status != rdma.StatusSuccess:
			// Locked, but the read failed: keep the lock so the abort releases it.
			out.Status = LockGranted
			out.Release = 0
		default:
			out.Status = LockGranted
			out.Slot = l.wrs[f+1].Local
			out.Release = 0
			if reqs[i].Fence != 0 {
				out.FenceWord = binary.LittleEndian.Uint64(l.wrs[f+2].Local)
			}
		}
		res[i] = out
	}
	return nil
}

// Released implements Locker; the memory-node path keeps no bookkeeping.
func (l *CASLocker) Released([]LockRequest, []LockResult) {}
