package occ

import (
	"context"
	"time"

	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// Path is the way a lock was granted.
type Path uint8

const (
	// PathNone: not granted.
	PathNone Path = iota
	// PathLocal: granted by this node's owner table, with no network.
	PathLocal
	// PathOwnerRPC: granted by a remote owner node over an actor request.
	PathOwnerRPC
	// PathMNCAS: taken by an RDMA CAS on the memory node's lock word.
	PathMNCAS
)

func (p Path) String() string {
	switch p {
	case PathLocal:
		return "local"
	case PathOwnerRPC:
		return "owner_rpc"
	case PathMNCAS:
		return "mn_cas"
	}
	return "none"
}

// LockStatus is the outcome of one lock request.
type LockStatus uint8

const (
	// LockGranted: the lock is held; LockResult.Slot holds the slot as read
	// after the lock was taken.
	LockGranted LockStatus = iota + 1
	// LockConflict: another transaction holds the lock; nothing is held.
	LockConflict
	// LockUnknown: the request's fate is unknown (the memory node connection
	// dropped while it was outstanding); the lock may be held and the
	// coordinator must release it by CAS(Tag → 0) when it aborts.
	LockUnknown
	// LockRedirect: the record is owned through an ownership path this locker
	// cannot take (an owner sentinel met by the fallback CAS); nothing is held.
	// The caller aborts and retries after refreshing its routing.
	LockRedirect
)

// LockRequest asks for the exclusive lock of one record slot.
type LockRequest struct {
	// Ref is the record.
	Ref txn.Ref
	// KeyGroup is the record's key group under the workload's rule; ownership
	// paths decide by it.
	KeyGroup uint64
	// Table is the record's table layout.
	Table *store.TableLayout
	// SlotAddr is the remote address of the slot to lock.
	SlotAddr uint64
	// Tag is the transaction's CAS tag (store.CASTag).
	Tag uint64
	// TxnID identifies the transaction (for owner tables and fencing).
	TxnID uint64
	// Seen is the lock word the coordinator read when it located the slot:
	// a hint (possibly stale) for the expected value of a lock path's CAS,
	// never a basis for a decision without one.
	Seen uint64
	// SeenAt is when the READ that gave Seen was posted (this node's clock).
	SeenAt time.Time
	// SeenKG says that the slot, when that READ found Seen, held the
	// requested record, so that until its word changes only lockers of
	// KeyGroup's records may claim it (an empty slot may be claimed by an
	// insert of any key group whose buckets hold it). With Seen free (0, or
	// a free sentinel the owner may replace), SeenAt after the key group's
	// fence was set and SeenKG, an owner may grant the record by plain
	// WRITE (package actors/owner, "Key-group fences").
	SeenKG bool
	// Fence is the remote address of KeyGroup's fence word in the layout's
	// fence region (store.Layout.FenceAddr), 0 when it has none. A lock
	// path that takes a free word by CAS (0, or a free owner sentinel other
	// than its own) reads the fence in the same doorbell
	// (LockResult.FenceWord) and gives the word back when an owner other
	// than its own holds the fence.
	Fence uint64
	// FenceRKey is the fence region's remote key (with Fence).
	FenceRKey uint32
}

// LockResult is the answer to one LockRequest.
type LockResult struct {
	Status LockStatus
	Path   Path
	// Slot is the slot's bytes read after the lock was taken (Granted only).
	Slot []byte
	// Release is the lock word the coordinator stores to release the lock:
	// 0 for the memory-node path, the cohort's free owner sentinel for the
	// ownership paths (so that later grants by the same owner at the same
	// epoch can set it held with a plain WRITE instead of a CAS).
	Release uint64
	// ClearWhenEmpty asks the coordinator to store 0 instead of Release when
	// it leaves the slot without the requested record (a committed delete,
	// an insert that did not commit, or a slot found holding another record),
	// so that any path may claim the slot and the other record is not left
	// with this path's mark. When Released is called, Release holds the
	// word actually stored.
	ClearWhenEmpty bool
	// LockWord is the lock word found when the lock was refused.
	LockWord uint64
	// Retired says, of a refusal by a held owner sentinel, that the
	// sentinel's activation is retired (the locker's map proves that it
	// grants no more): the word may be a dead holder's, and the engine
	// watches it (RedoLog.Suspect).
	Retired bool
	// FenceWord is the fence word of the request's key group, read right
	// after a CAS that took the lock word (LockRequest.Fence set), when the
	// path reports it: 0 when no owner fenced the key group.
	FenceWord uint64
	// CAS and CASFailed count the memory-node atomics this request issued.
	CAS, CASFailed uint8
}

// Locker takes record locks on a transaction's behalf. Implementations are the
// memory-node CAS path (CASLocker, and the atomic actor that wraps it) and the
// ownership paths, which a composite locker chooses between by key group. The
// transaction engine depends on this interface only.
type Locker interface {
	// Acquire tries to lock every request and fills res (len(res) ==
	// len(reqs)). It never waits for a held lock: a held lock is a conflict.
	// An error means no request was attempted.
	Acquire(ctx context.Context, reqs []LockRequest, res []LockResult) error
	// Released tells the locker that the coordinator has stored the Release
	// word of each granted request (at commit or abort), so path bookkeeping
	// such as an owner table can drop the holders. res[i].Release is the
	// word stored (0 where ClearWhenEmpty applied).
	Released(reqs []LockRequest, res []LockResult)
}

// IsLocked reports whether a lock word denotes a held lock: a CAS tag, or an
// owner sentinel with its held bit. 0 and free owner sentinels are unlocked
// (validation passes them; inserts may claim their empty slots).
func IsLocked(w uint64) bool {
	if w == 0 {
		return false
	}
	if store.IsOwnerSentinel(w) {
		return store.SentinelHeld(w)
	}
	return true
}
