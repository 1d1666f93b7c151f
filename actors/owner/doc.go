// Package owner is the per-node owner of AURA (SPEC §3, §4, §6): the lock
// table of the cohorts this compute node owns, the owner lock RPC service
// other nodes call, and the occ.Locker that sends each lock down its path —
// LOCAL (this node's table), OWNER RPC (a remote owner's table) or MN CAS
// (the fallback for unowned key groups) — with mutual exclusion against the
// MN CAS path (invariant I2).
//
//   - Table: a pure state machine (no goroutines, clock or I/O; time comes
//     in as microseconds) holding, per installed cohort, its key groups, its
//     install epoch, its phase (active or frozen) and its holders. Install,
//     Acquire (OK | Conflict | Moved | StaleEpoch | Retry | NotOwner),
//     Release, Freeze, Thaw, Drain, Fence, Retire (with a tombstone).
//     Everything is bounded (Config) and an exceeded bound is a typed
//     *LimitError that changes nothing.
//   - Service: a Table behind a mutex with a clock, and the handlers of the
//     owner RPC (messages.LockRequest / UnlockRequest).
//   - Node and Locker: the occ.Locker of one coordinator, given a Resolver
//     (key group → owner at the node's OwnerMap), a Transport (owner RPCs)
//     and a fallback occ.Locker (MN CAS). MapResolver is a Resolver over
//     control.OwnerMap values.
//
// Elsewhere: the actor serving a Service to other nodes and a Transport over
// protoactor remote belong to package actors; the OwnerMap subscription and
// the migration driver that call Install / Freeze / Fence / Retire belong to
// the cluster runtime. Not written yet: a repair sweep for lock words left
// held by crashed holders, and a lease on holders of active cohorts (see
// "Limits" below).
//
// # Lock words: how owner locks and MN CAS locks exclude each other
//
// A record's memory-node lock word is in one of three states (store
// reserves bit 63 for owner sentinels and bit 62 for "held"; sentinel.go
// lays out the rest: install epoch mod 2^30 and cohort id mod 2^32, which
// say who holds it):
//
//	0      free
//	T      held through the MN CAS path: the attempt's CAS tag (store.CASTag)
//	H(c,e) held through an owner: the held sentinel of cohort c at install epoch e
//
// Transitions, and who makes them:
//
//	0 → T       CAS(0 → tag), by an MN CAS locker (occ.CASLocker)
//	0 → H(c,e)  CAS(0 → H(c,e)), by the Locker of a transaction that holds the
//	            table grant of cohort c at epoch e, right after the grant, in one
//	            doorbell with the READ of the slot
//	T → 0       only T's holder (the commit's header WRITE, or cleanup CAS)
//	H → 0       only H's holder (the commit's header WRITE: occ.LockResult.Release
//	            is 0), after which the Locker releases the table grant
//
// An MN CAS locker that meets H fails its CAS and is refused
// (occ.LockRedirect); an owner-path grantee that meets T or another H is
// refused (occ.LockConflict) and its table grant is dropped again. A free
// owner sentinel (never written here) guards nothing and is taken over by
// either path.
//
// Why not mark the word once per epoch and grant locally afterwards (the
// design SPEC §4 sketches)? Because OCC read validation decides on lock
// words (occ.IsLocked): a lock that lives only in an owner's table is
// invisible to readers, and two crossed read-one-write-the-other
// transactions would both validate and commit (write skew; TestLockerPaths
// checks that a plain read sees an owner-held lock, and the skew
// transactions of the porcupine test exercise it). So the held state has to
// reach the memory node on every grant, and doing it by CAS from 0 keeps the
// lock word the one arbiter between paths. Released owner locks go back to
// 0 rather than to a free sentinel because occ's inserts only claim empty
// slots whose lock word is 0 (a sentinel left by a delete would leak the
// slot), and because I2 below does not need a persistent marker.
//
// # Invariants and proof sketch
//
// I2 (mutual exclusion, whichever path). Every transition into a held state
// (T or H) is a CAS from 0, and every transition out of a held state is made
// by its holder only. So the lock word admits one holder at a time, exactly
// as the plain MN CAS path does, and two transactions can never both hold
// one record, whatever path each used and however stale their OwnerMaps
// are (a node whose map says "unowned" for an owned cohort just uses MN
// CAS, and the word arbitrates). The owner tables never weaken this: a
// table grant is only the right to attempt the CAS. I2 therefore does not
// depend on I1. (The bank test loses money when the Locker ignores a failed
// lock-word CAS.)
//
// What the table adds on top of the lock word is authority and locality:
//
// I1 (single authority). A Table grants a cohort's locks only while the
// cohort is installed and active, only to requests whose epoch is not older
// than its install epoch, and stamps every grant with the install epoch (the
// epoch of the sentinel written). Freeze stops grants (Retry, never a
// buffered request); Retire needs a frozen, drained (or fenced) cohort and
// leaves a tombstone: late requests at an older epoch get Moved(owner,
// epoch) and never a grant, and the cohort can only be installed again at a
// newer epoch. Across nodes, at most one active activation per cohort is the
// migration protocol's job (freeze the old owner before the new one is
// installed and the new epoch published, SPEC §6); the table provides the
// local half. Within a table, one (cohort, record) has at most one holder
// (checked after every step of the randomized test against a reference
// model), so owner-path transactions of one cohort meet their conflicts in
// memory, before any atomic, and the CAS that follows a grant almost never
// fails.
//
// I3 (no lost lock state). A transaction holding a record under the old
// owner (epoch e) keeps H(c,e) on the lock word until it releases it. The
// new owner's grantees CAS from 0, so they are refused until the old holder
// has released — even after the old table fenced (forgot) that holder. Drain
// and Fence are therefore about liveness (bounding the handoff; Fence
// reports the holders so the runtime can abort them), not safety; Retire
// refuses a cohort that still has holders.
//
// I4 (epoch fencing). Requests older than the cohort's install epoch get
// StaleEpoch; requests for a retired cohort get Moved; for a cohort the
// table does not know, NotOwner (or Retry if the requester knows a newer
// map than the table). Releases must name the epoch of the grant. The
// Locker refreshes its Resolver on Moved / StaleEpoch (following the Moved
// hint when the Resolver has not caught up) and retries at most
// NodeConfig.MaxRedirects times, then answers occ.LockRedirect (the
// transaction aborts and its client retries).
//
// Idempotency. A table holder is the transaction attempt's CAS tag, unique
// per attempt cluster-wide: a retried Acquire of a lock the same attempt
// holds is granted again (AcquireReply.Already), two attempts sharing a
// transaction id exclude each other, and a duplicate Release is a no-op.
// A request repeating a remembered (requester, request id) gets the
// remembered reply and changes nothing (bounded FIFO cache). The owner RPC
// carries the holder in LockRequest.txn_id (the proto has no attempt field).
//
// # Cost
//
// An owner-path grant costs one lock-word CAS and a READ of the slot in one
// doorbell (the same verbs as an MN CAS lock, so the saving of the owner
// path is in conflicts: they are found in the owner's memory, before any
// atomic, so owner-path CASes almost never fail and never retry), plus the
// owner RPC for remote owners; the release is part of the commit's header
// WRITE, as on the MN path. Saving the atomic itself would need a different
// validation rule (for example, readers asking the owner), which occ does
// not have.
//
// # Limits
//
//   - If the memory node is unreachable when an owner-path CAS is posted,
//     the Locker re-reads the word until NodeConfig.ResolveTimeout (H(c,e)
//     found while it holds the table grant means its CAS applied); past it
//     the lock is reported occ.LockUnknown and the table grant is kept until
//     the cohort is fenced. A record whose word is left H by such a lock, or
//     by a crashed holder, stays locked until a repair sweep clears it — not
//     written yet (the MN CAS path has the same property for T; the
//     sentinel's cohort and epoch fields are there for that sweep).
//   - occ calls Released even when a commit's write-back gave up after its
//     CleanupTimeout, so the table forgets a holder whose word may still be
//     H(c,e). A later grantee's CAS then fails (safe), but if that CAS's
//     outcome is lost too, the re-read would take the leftover H(c,e) for
//     its own: two memory-node failures on one record.
//   - An owner RPC with no answer after NodeConfig.RPCAttempts is refused
//     (occ.LockConflict) and its records are unlocked best effort; an unlock
//     that cannot be delivered leaves the holder in the remote table until
//     the cohort is fenced (counted in NodeStats.UnlockFailures). A lease on
//     table holders of active cohorts would bound that; safe by the I3
//     argument, not written yet.
//   - A request above Config.MaxKeysPerRequest or Config.MaxLocks is refused
//     as a conflict by the Locker (it splits requests at 256 keys).
package owner
