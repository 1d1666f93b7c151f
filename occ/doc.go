// Package occ runs transaction programs (txn.Program) on the tables of a
// store.Layout with FORD-style optimistic concurrency control, on one-sided
// verbs only.
//
// # Protocol
//
// Execution. A read (Get) fetches the record's slot — one READ of the slot
// whose address is cached, or of both candidate buckets — and remembers its
// meta word (version and presence). A record found locked by another
// transaction aborts the reader at once. A record to be written is locked
// before it is read (GetForUpdate): the Locker takes the lock and returns the
// slot as read after the lock, in one round trip (for the memory-node path, a
// CAS(0 → tag) and a READ in one doorbell). Locks never wait: a held lock is
// a conflict and the transaction aborts (no deadlock is possible). Inserts
// claim a free slot by locking it; deletes and updates need the record locked.
//
// Lock words. 0 and free owner sentinels are unlocked; CAS tags and held
// owner sentinels are locked (IsLocked). A lock path returns the word that
// releases its lock (LockResult.Release: 0 for the memory-node path, the
// cohort's free sentinel for the ownership paths, which then take the next
// lock of that slot with a plain WRITE instead of a CAS; see package
// actors/owner) and may ask for 0 instead when the slot is left without a
// record (ClearWhenEmpty). The coordinator passes the word it read when it
// located a slot to the lock path as a hint for a CAS's expected value
// (LockRequest.Seen), with when that READ was posted and whether the slot
// could then only hold records of the request's key group (SeenAt, SeenKG:
// it held the requested record, or the table's buckets are partitioned by
// key group); an owner holding the key group's fence may then grant the
// lock by plain WRITE. With Config.KeyGroupIndex set, requests name their
// key group's fence word (LockRequest.Fence), and CASLocker reads it right
// after its CAS, in the same doorbell, for the ownership paths to decide
// (package actors/owner, "Key-group fences"). Inserts may claim an empty
// slot whose word is 0 or a free sentinel (0 first); a lock path may refuse
// a sentinel it may not take (LockRedirect), and the insert then tries the
// next free slot (up to 4).
//
// Validation (the commit point). With every lock held, the coordinator
// publishes the keys of its inserts into their claimed slots, then, in one
// doorbell, re-reads the meta and lock words of every record it read without
// locking, and both candidate buckets of every key it found absent or
// inserts. It aborts if a read record's meta changed or it is locked by
// another transaction, or if an absent key (or an inserted key, in a slot not
// its own) is now present or claimed.
//
// Write-back. All values are written first, then every record's header
// [meta with version + 1, release word], in doorbell order; locks taken but
// not written are released (their release word alone is written). Aborts release every lock taken (and CAS their
// own tag back to 0 where a lock's acquisition outcome was unknown).
//
// # Why it is serializable
//
// A committed transaction T is serialized at its validation. Every record T
// writes is locked from before T read it until after its new value is
// visible, so no other transaction writes it in between (invariant I2: at
// most one holder per lock word: the memory-node path locks by CAS on the
// word, and the ownership paths keep the same guarantee with their owner
// tables, see package actors/owner).
// Every record T read without locking had, at validation, the meta T saw and
// no lock held: no transaction that committed before T's validation wrote it
// after T read it, and none that locked it before T's validation can commit a
// write ordered before T — it still held the lock, which validation would
// have seen. Versions only grow, so an unchanged meta means an unchanged
// record (no ABA). Absent keys are validated the same way over both buckets,
// which closes phantoms for point reads, and an insert validates that no other
// slot holds or claims its key: two inserts of one key each publish the key
// before validating, so at least one sees the other. Hence the order of
// validation points is a serial order consistent with every read (strict
// serializability: validation lies inside the transaction's real-time
// interval). The bank tests check this with porcupine on concurrent
// histories, and show the check failing for a lock path that does not exclude.
//
// # Torn reads
//
// Verbs are atomic per 8-byte word only, so a READ racing a write-back may
// mix old and new words. A writer holds the lock while it writes values and
// stores the new meta before releasing, and a reader reads meta before the
// value; a torn value is therefore always seen with a changed meta or a held
// lock at validation, and aborts. (This relies on a READ and a doorbell's
// WRITEs proceeding in ascending word order, which the emulated backends
// guarantee; a real NIC backend would add per-cache-line versions as FaRM
// does.)
//
// # Memory-node connection loss
//
// An error before the commit point aborts the transaction; its locks are
// released, retrying across reconnects. After the commit point the write-back
// is retried until it completes (CleanupTimeout). Because a doorbell applies
// a prefix of its work requests (see package rdma), a retry first reads the
// lock words of its memory-node locks and redoes only those still holding its
// tag, releasing them by CAS: a blind rewrite could clobber a lock another
// transaction took after ours was released. Only when the memory node stays
// unreachable past CleanupTimeout is the outcome reported as Failed, with its
// locks possibly still held.
//
// # Crash recovery
//
// A transaction whose node dies (or whose write-back gives up) leaves its
// lock words held: memory-node CAS tags (store.CASTag(node, seq)) and held
// owner sentinels. It may also have written some of its records and not
// others; the held words are what keeps readers off that half-applied
// commit, so they cannot simply be cleared. A redo log (OpenRedoLog,
// Engine.UseRedoLog; compute nodes keep one) makes every lock endable as
// its transaction ended.
//
// Records. Every commit that writes first writes a record — its tag, its
// commit ledger word (with ExactlyOnce) and, for each record it writes, the
// slot, the new meta, the release word, the key and the value — into its
// coordinator's slot of the node's region
// ("txn/redo/<node>/<slots>x<bytes>", CRC-32C-checked), as the first work
// request of its write-back doorbell. The memory node runs a prefix of a
// doorbell, so if any of the write-back ran, the whole record is there; a
// record is written only after validation, so a record means a commit. It
// costs one WRITE per writing transaction, in a doorbell posted anyway: no
// round trip, no atomic. A coordinator whose commit gives up its
// write-back after posting the record leaves the record in place and moves
// to a spare slot (the region has as many spares as coordinators, and one
// repair slot; with no spare left it refuses to commit writes, ErrRedo),
// and its owner-path grants are not released: released, their slots could
// be locked again at the versions the record names, and two records would
// then name one slot version; the owner ends them once they are stale.
//
// Which record ends a held slot. For a CAS tag, the record with that tag
// naming the slot: tags are unique per attempt, across the node's
// incarnations too (with a log, attempts are numbered above a ceiling kept
// in the log's header, raised a block of 2^20 at a time before use, and
// read back by the next incarnation). For any held word, the
// record entry whose new meta is the slot's next version: its transaction
// locked the slot at the slot's current version and committed, and nobody
// can have locked the slot at that version since (it still holds it), so
// at most one such entry exists and it is the holder's. No entry: the
// holder never began its write-back and wrote nothing; the word is
// released untouched (to 0, or to the held sentinel's free version).
//
// Who ends them, and when (ending a live transaction's lock would break
// I2, so each case needs proof that the holder is gone):
//
//   - The node's next incarnation, at OpenRedoLog, before it runs anything
//     (same node number: the previous incarnation is gone). If the previous
//     one did not close its log cleanly, it scans every table for CAS tags
//     of its number and ends each, and ends the held owner sentinels its
//     records name at their next version; then it invalidates the old
//     records and marks its log running. The scan reads every slot (go
//     test ./occ -run XXX -bench RecoveryScan: the default TPC-C's 87 M
//     slots on the in-process memory node). Held sentinels of its
//     transactions that had not committed are left to the sweep below.
//   - Any node, on contact: a coordinator refused by a CAS tag, or by a held
//     owner sentinel whose activation its locker's map shows retired
//     (LockResult.Retired: it grants no more, so its holders got their
//     grants before the retirement), reports the word (RedoLog.Suspect);
//     Sweep ends it if it is still in place RepairAfter later — 2·(request
//     timeout + CleanupTimeout), longer than any attempt holds a lock, so
//     its holder is gone. A CAS tag is unique to one attempt, and a retired
//     activation's held sentinel can no longer be re-taken, so an
//     unchanged word is the same holder's.
//   - The owner of a lock table, for a grant older than RepairAfter (a
//     grantee that died before its unlock arrived, or a commit that gave
//     up): RedoLog.EndHeld, then the grant is dropped; the table pins the
//     key meanwhile (owner.Table.StaleLocks), so no other grantee can take
//     the slot and the held word can only be that grantee's.
//
// Ending with an entry takes the word first: the entry goes to the
// repairing node's repair slot under a fresh tag of that node and the
// word is CASed from the holder's to that tag in one doorbell; only
// then are the ledger word, the key and value, and the header (meta and
// release word, one WRITE) written. Two repairers (or a repairer and a
// recovery) therefore never both write a slot, and no write lands after a
// release. A repair whose writes fail is finished before any other (its
// entry is only in the repair slot); a repairer that dies in between
// leaves its tag and the entry in its repair slot, which its next
// incarnation finishes first.
//
// The ledger word matters with ExactlyOnce: the client of a transaction
// that a repair finishes resubmits it, and must find it committed, not
// apply it again.
//
// Limits. Safety assumes no node pauses (a stopped process, a frozen
// virtual machine) for longer than RepairAfter in the middle of a
// transaction: a holder that resumes after its lock was repaired would
// write over a slot someone else may hold. The watch list holds 1,024
// words (RepairStats.Dropped counts the others; every sweep forgets the
// words that changed). A repair rewrites the ledger word of the
// transaction it finishes; if that word already held a later transaction
// of the same client lane (LedgerRing later, which a client reaches only
// after giving up on this one), that one loses its ledger entry. The log
// must not be shared by two live nodes with one number: a
// node started under the number of one that still runs (a mistaken --id,
// or a partitioned process whose name a new one took) would take that
// node's locks for a dead incarnation's. cmd/aura numbers nodes by their
// place in --nodes or a hash of their name checked against the live
// members, which rules out the first case only. A CAS tag left by a
// write-back that gave up while its node lives on is repaired on contact
// like a crashed one's; a held owner sentinel left that way is not (the
// table forgot its holder; package actors/owner, "Limits"). A held word
// nobody locks stays held (the sweep is on contact, not a scan of the
// memory node; reads report only CAS tags, as a reader cannot tell a
// retired activation's sentinel). Close marks a log closed only when no
// transaction attempt runs and none gave up. Tests:
// TestRedoRecoversEveryCrashPoint
// (a crash at every work request; releasing without records loses money),
// TestRedoRecoversConcurrentCrash (balances are the reported commits plus a
// subset of those in doubt, each whole), TestRedoKeepsAbandonedRecord,
// TestRedoRecoversOwnerSentinels, TestRepairSweepDeadNode,
// TestEndHeldFinishesCommitted, TestRedoTagsUniqueAcrossIncarnations,
// TestRedoRecoveryWritesLedger, TestGivenUpCommitKeepsGrants,
// owner.TestHeldRetired and TestStaleLocksPin, and on compute nodes
// actors.TestNodeRestartRecoversLocks and TestNodeExpiresStaleGrants; the
// process fault scenarios (cmd/aura, docs/faults.md) check that no lock
// stays held after kill -9.
//
// # Exactly once
//
// A client that loses the reply to a transaction resubmits it under the
// same transaction id, perhaps to another compute node (the first one
// crashed, or the cohort moved). With Config.ExactlyOnce, a transaction
// that writes stores its id in its word of the memory node's commit ledger
// (store.LedgerAddr) as the first verb of its write-back, and reads that
// word in its validation doorbell: an attempt that finds its own id there
// ends as Committed with Result.Replayed and writes nothing. Costs: one
// READ and one WRITE per writing transaction, in doorbells it posts anyway
// (no round trip, no atomic).
//
// Why the read cannot miss a committed attempt: two attempts of one
// transaction lock at least one common record (a transaction's write set is
// fixed by its input, or includes a counter of its partition, in every
// AURA workload). The later attempt validates only while it holds that
// lock, which it got after the earlier attempt released it; the earlier
// attempt released it in its write-back's headers, after its ledger WRITE
// (in an earlier doorbell, or in the same one, which the memory node
// applies in order). So a committed earlier attempt's id is in the word
// when the later one reads it. Attempts that write disjoint records could
// both commit; a transaction whose program can do that must not rely on
// this. The word is shared with the client's transaction LedgerRing later
// (and, for ids not of the (client << 40) | sequence form, with whatever
// hashes there), so a retry must come before that one commits — a
// closed-loop client retries before it moves on. TestExactlyOnceAcrossNodes
// and TestExactlyOnceConcurrentAttempts check it, and fail without the
// ledger read.
package occ
