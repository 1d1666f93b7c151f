// Package owner is the per-node owner of AURA (SPEC §3, §4, §6): the lock
// table of the cohorts this compute node owns, the owner lock RPC service
// other nodes call, and the occ.Locker that sends each lock down its path —
// LOCAL (this node's table), OWNER RPC (a remote owner's table) or MN CAS
// (the fallback for unowned key groups) — with mutual exclusion against the
// MN CAS path (invariant I2).
//
//   - Table: a pure state machine (no goroutines, clock or I/O; time comes
//     in as microseconds) holding, per installed cohort, its key groups, its
//     install epoch, its phase (active or frozen), its holders and its marks
//     (slots whose lock word is known to carry its sentinel). A slot has at
//     most one holder and at most one marking cohort in the whole table,
//     across its cohorts. Install, Reconfigure (new key groups, same
//     activation), Acquire (OK | Conflict | Moved | StaleEpoch | Retry |
//     NotOwner), Mark, Release, Freeze, Thaw, Drain, Fence, Retire (with a
//     tombstone).
//     Everything is bounded (Config) and an exceeded bound is a typed
//     *LimitError that changes nothing.
//   - Service: a Table behind a mutex with a clock, and the handlers of the
//     owner RPC (messages.LockRequest / UnlockRequest).
//   - Node and Locker: the occ.Locker of one coordinator, given a Resolver
//     (key group → owner at the node's OwnerMap), a Transport (owner RPCs)
//     and a fallback occ.Locker (MN CAS). MapResolver is a Resolver over
//     control.OwnerMap values.
//
// Elsewhere: the cohort activations serving a Service to other nodes are
// package actors/cohort's, the Transport over protoactor remote and the
// OwnerMap subscription and the migration participant that call Install /
// Reconfigure / Freeze / Fence / Thaw / Retire are package actors'; the
// migration driver is control/transfer's TransferController, run by the
// planner (it is what makes assumption A1 below hold), with the owner
// leases of package actors/planner. Lock words left held by gone holders
// are ended by the engine's redo log (package occ, "Crash recovery"): this
// package says which held sentinels belong to retired activations
// (Locker.heldRetired, occ.LockResult.Retired), and package actors expires
// table grants older than any transaction (Table.StaleLocks).
//
// # Lock words: mark once, then grant locally
//
// Owner tables are keyed by slot (table id, slot address), not by record:
// lock words are per slot, and two records can meet in one slot (a delete
// then an insert, or a stale cached address), so a table must serialise its
// grantees per slot for its knowledge of a word to be trusted.
//
// A slot's memory-node lock word is in one of these states (store reserves
// bit 63 for owner sentinels and bit 62 for "held"; sentinel.go lays out
// the rest: install epoch mod 2^30 and cohort id mod 2^32):
//
//	0       free, unmarked
//	T       held through the MN CAS path: the attempt's CAS tag (store.CASTag)
//	S(c,e)  free, marked by cohort c's activation installed at epoch e
//	H(c,e)  held through that activation: one of its grantees holds it
//
// occ treats 0 and S as unlocked (validation passes them, inserts may claim
// their empty slots) and T and H as locked (readers abort, validation
// fails), so a lock held through an owner is as visible to OCC readers as
// an MN CAS lock, and write skew stays impossible (TestLockerPaths,
// TestOwnerGrantsAtomicFree and the skew transactions of the porcupine
// test check it).
//
// Transitions, and who makes them (a "grantee of (c,e) for slot A" holds
// the table grant of A in the table of activation (c,e)):
//
//	0 → T         CAS, by an MN CAS locker
//	T → 0         only T's holder (the commit's header WRITE, or cleanup CAS)
//	x → H(c,e)    CAS(x → H(c,e)) by a grantee of (c,e) for A, where x is 0,
//	              S(c,e), or a free sentinel of a retired activation (the
//	              first grant of A at epoch e; remote grants; grants whose
//	              mark or WRITE lease is missing)
//	S(c,e) → H(c,e)  a plain WRITE by a grantee of (c,e) for A whose table
//	              has A marked (local grants only): no atomic
//	H(c,e) → S(c,e)  only H's holder: the commit's (or abort's) header WRITE
//	              stores occ.LockResult.Release = S(c,e)
//	S(c',e') → H(c,e)  CAS by a grantee of (c,e) at owner N, c' ≠ c, when
//	              (c',e') is installed in N's table (any phase), within the
//	              WRITE lease of the grant (see "Re-cut cohorts")
//	H(c,e) → 0    only H's holder, when it leaves the slot without its
//	              record (a delete, an insert that did not commit, a stale
//	              address that found another record: ClearWhenEmpty), if it
//	              is a local grantee — it unmarks A in the same table step
//	              that releases its grant — or a remote one whose CAS replaced
//	              a word other than S(c,e) (then A is not marked)
//	S(c',e') → T  CAS by an MN CAS locker, only if (c',e') is retired by its
//	              map (Locker.retired): c' not placed in the map and e' not
//	              newer than the map
//	x → H(c,e)    a plain WRITE by a grantee of (c,e) for A whose table
//	              trusts the key group's fence, where x was seen 0 or a free
//	              sentinel it may replace (F4 of "Key-group fences"); a
//	              remote one releases H(c,e) → 0 (A is not marked)
//	T, H → 0      the CAS by which a locker that took a free word gives it
//	              back because another node's activation holds the key
//	              group's fence (F2); the lock was never used
//
// A table marks A (Table.Mark) after its grantee's CAS to H(c,e) succeeds
// locally; grants report marks (AcquireReply.Marked) and the Locker WRITEs
// for marked grants. A remote grantee's reply carries no marks (the owner
// RPC has no field for them), so remote grants pay one CAS each, expecting
// S(c,e) (the word the coordinator saw when it located the slot, or the
// node's hint), and never clear a word they found S(c,e) to 0 (they cannot
// unmark) — unless the reply gives the record a fence age (F4 of
// "Key-group fences"): then a record the owner has not marked, seen free,
// is set held by a plain WRITE and released to 0.
//
// Who may take over a free sentinel S(c',e') (Locker.retired,
// Locker.takeable): a grantee of the same cohort at a newer epoch e > e';
// any locker whose map (epoch m) does not place c' when e' ≤ m; a grantee
// of another cohort c of the owner N whose table has (c',e') installed
// (see "Re-cut cohorts"). Nobody else: in particular a free sentinel of a
// cohort the map places on another node is left to that cohort's grantees
// (the map carries no install epochs, so the locker cannot tell an older
// activation from the current one) — the lock is asked of that cohort's
// owner instead (Locker.follow) — and one newer than the locker's map means
// the map is stale (it refreshes and the transaction retries).
//
// # Invariants and proof sketch
//
// Assumptions. (A1) A cohort activation (c,e) is installed at the epoch e of
// the first OwnerMap that places c on its owner, and a map that no longer
// places it (or places it elsewhere) is published only after (c,e) was
// frozen and drained or fenced (the migration protocol, SPEC §6) — or, when
// its owner stopped answering, only after every owner lease that owner was
// granted ran out, and the owner installs a newer map before it is granted
// another (see "Owner leases": the lemma below then holds for the grants
// made under a lease, the only ones that use marks). (A2) OwnerMaps with
// the same epoch are equal. (A3) A plain WRITE posted by a grantee reaches
// the memory node within 3/4 of the owner's drain deadline (see "Fencing
// and the WRITE lease").
//
// Lemma (marks are true). While (c,e) is active in owner N's table and has
// slot A marked, the word of A is changed only by grantees of N's table
// holding A. Proof: MN CAS lockers CAS from 0 or from a retired sentinel
// only: a locker whose map places c does not take S(c,e); a map of epoch
// m ≥ e that does not place c exists only once (c,e) was frozen and
// drained or fenced (A1, A2), so (c,e) is no longer active; a locker whose
// map is older than e sees e > m and refuses. Grantees of activations at
// other nodes take S(c,e) only if (c,e) is retired (older epoch of the same
// cohort, or cohort not placed) or, for a remote grantee of a cohort of N
// (takeable), only while holding A in N's table. Grantees of other cohorts
// c3 of N take S(c,e) only by CAS while holding A in N's table, and the
// table drops c's mark of A in the step that grants A to c3 (the mark
// moves: AcquireReply.Taken); c marks A again only after one of its own
// grantees CASed the word to H(c,e). Hence, in the table of (c,e), a
// marked slot's word is S(c,e) whenever no grantee holds the slot (each
// holder's release stores S(c,e), or 0 after unmarking it in the same
// table step that frees the grant), and the single grantee holding it may
// WRITE H(c,e). Fence clears the marks (fenced holders may keep H, or
// still have a WRITE in flight), so grants after a Thaw CAS again.
//
// I2 (mutual exclusion, whichever path). Every transition into a held state
// is either a CAS from a value that denotes "free for this locker" or a
// WRITE over S(c,e) by the only grantee of that slot at (c,e) (the
// lemma, and the table's one holder per slot across its cohorts). Every transition out of a
// held state is made by its holder. So the lock word admits one holder at
// a time, whatever path each used and however stale their maps are (a node
// whose map says "unowned" for an owned cohort uses MN CAS and meets a
// sentinel or CASes from 0 against the owner's CAS). A held sentinel is
// never taken by anyone. (The bank test loses money when the Locker ignores
// a failed lock-word CAS.)
//
// I1 (single authority). A Table grants a cohort's locks only while the
// cohort is installed and active, only to requests whose epoch is not older
// than its install epoch, and stamps every grant with the install epoch (the
// epoch of the sentinel written). Freeze stops grants (Retry, never a
// buffered request); Retire needs a frozen, drained (or fenced) cohort and
// leaves a tombstone: late requests at an older epoch get Moved(owner,
// epoch) and never a grant, and the cohort can only be installed again at a
// newer epoch. Across nodes, at most one active activation per cohort is the
// migration protocol's job (A1); the table provides the local half. Within
// a table, one (cohort, slot) has at most one holder (checked after every
// step of the randomized test against a reference model). I1 is what makes
// the WRITE safe: only the table of (c,e) grants slots whose word is
// S(c,e).
//
// I3 (no lost lock state). A transaction holding a slot under the old
// owner (epoch e) keeps H(c,e) on the lock word until it releases it (to
// S(c,e)). The new owner's grantees at e2 > e CAS (their table has no marks
// yet), from 0 or from S(c,e) — never from H(c,e) — so they are refused
// until the old holder has released, even after the old table fenced
// (forgot) that holder. Drain and Fence are therefore about liveness
// (bounding the handoff; Fence reports the holders so the runtime can abort
// them), not safety; Retire refuses a cohort that still has holders.
//
// I4 (epoch fencing). Requests older than the cohort's install epoch get
// StaleEpoch; requests for a retired cohort get Moved; for a cohort the
// table does not know, NotOwner (or Retry if the requester knows a newer
// map than the table). Releases must name the epoch of the grant. The
// Locker refreshes its Resolver on Moved / StaleEpoch (following the Moved
// hint when the Resolver has not caught up) and retries at most
// NodeConfig.MaxRedirects times, then answers occ.LockRedirect (the
// transaction aborts and its client retries). On the memory node, the
// epoch in a sentinel fences MN CAS lockers with stale maps: a sentinel
// newer than the locker's map is never taken.
//
// Idempotency. A table holder is the transaction attempt's CAS tag, unique
// per attempt cluster-wide: a retried Acquire of a lock the same attempt
// holds is granted again (AcquireReply.Already), two attempts sharing a
// transaction id exclude each other, and a duplicate Release is a no-op.
// A request repeating a remembered (requester, request id) gets the
// remembered reply and changes nothing (bounded FIFO cache). The owner RPC
// carries the holder in LockRequest.txn_id (the proto has no attempt field).
//
// # Re-cut cohorts
//
// The cohort generator re-cuts cohorts often: a key group moves from cohort
// c1 to cohort c2, usually on the same owner N. The planner publishes such a
// re-cut only rarely (package control/plane, KeepCuts: a key group keeps its
// published cohort while its owner does not change), but a map may still
// carry one. Its records still carry S(c1,e1). Three rules keep that cheap
// and safe:
//
//   - One holder per slot per table. N's table grants a slot to at most one
//     holder across all its cohorts (a request through c2 for a slot held
//     through c1 is a Conflict), and a slot is marked by at most one cohort.
//     When it grants A to c2 and c1 has A marked, it drops c1's mark in the
//     same step (AcquireReply.Taken: the word is expected to be S(c1,e1)).
//   - Takeover. A grantee of c2 at N may CAS S(c1,e1) → H(c2,e2) when
//     (c1,e1) is installed in N's table (asked of the table by a local
//     grantee; for a remote grantee: its map places c1 on N too and
//     e1 ≤ its map's epoch — an activation of c1 elsewhere at an epoch ≤
//     that map's was frozen and drained before the map was published, A1),
//     within the WRITE lease of its grant. While it holds A, no other
//     grantee of N holds A and c1 has no mark of A, so no WRITE competes:
//     only CASes (c1's later grantees of A CAS, since the mark is gone; MN
//     CAS lockers only once (c1,e1) is retired). The lease bounds a delayed
//     CAS as it bounds a delayed WRITE: it lands before the grant can be
//     fenced and A granted (and re-marked) through c1 again. A held
//     sentinel is never taken. Then c2 marks A and later grants WRITE: one
//     atomic per record per re-cut instead of an abort per attempt.
//   - Reconfigure. A cohort that stays on N with other key groups is
//     reconfigured in place: same install epoch (the epoch of its
//     sentinels, so its marks stay valid: marks are per slot, key groups
//     only route requests), same holders. Key groups leaving it keep their
//     marks until another cohort of N is granted the slot (the mark moves)
//     or until c1 is retired; key groups joining it start unmarked. Only
//     cohorts leaving N are frozen, drained and retired; the key groups of
//     a frozen cohort may be installed in another cohort of N at once (the
//     table's per-slot exclusion spans both), and it cannot thaw over them.
//     I1 is unchanged: (c1,e1) is still granted by N alone; I4: requests
//     older than the install epoch are still refused (a request of a stale
//     map for a key group that left c1 is granted through c1, and the lock
//     word arbitrates, as for any two cohorts).
//
// When the new cohort is on another node (or the key group became
// unowned), S(c1,e1) is not taken over (N's table cannot exclude the new
// owner's grantees): the lock follows the sentinel (Locker.follow) and is
// asked of c1's owner — an ordinary grant of (c1,e1), one owner RPC and one
// CAS, released to S(c1,e1) — until c1 is evicted or moves.
//
// # Key-group fences
//
// Marks make a record's later grants free of atomics, but its first grant
// at an epoch still costs a CAS, and so does every insert (an empty slot's
// word is 0, free for every path). Over a run, first grants are most of
// the atomics left (TPC-C's Delivery alone paid 130 a transaction). A
// fence removes them: the memory node holds one more word per key group
// (store.Layout.FenceAddr, indexed by the rule's workload.KeyGroupIndexer),
// 0 or the free sentinel S(c,e) of the activation that fenced it, and an
// owner that holds its key group's fence grants a record whose word is 0
// by plain WRITE. The rules:
//
//   - F1, claim. A local grantee of (c,e), for a key group its table holds
//     in the active (c,e), CASes the fence from 0, from S(c,e), or from a
//     retired activation's sentinel (retired: it was drained, so no WRITE
//     of its is on its way) to S(c,e), at most once per key group and
//     doorbell; the table records the time after the CAS completed
//     (Table.Fenced). Never from another live activation, not even one of
//     the same table (fenceExpect).
//   - F2, every CAS that takes a free word reads the fence. A locker that
//     takes a lock word by CAS from 0 or from a free sentinel other than
//     its own activation's — the MN CAS path (occ.CASLocker, and the
//     takeover of retired sentinels, Locker.reclaim) or an owner grantee —
//     reads the record's fence in the same doorbell, after the CAS
//     (occ.LockResult.FenceWord). It keeps the word if the fence is 0, its
//     own activation's, or retired for it; if the fence is another
//     activation of its owner's table, it keeps the word but releases it
//     to 0 and does not mark it (F3). Otherwise it gives the word back by
//     CAS (a WRITE could erase an owner's H) and the lock follows the
//     fence's cohort (Locker.follow), as for a free sentinel.
//   - F3, zero release: see F2. So, under a fence S(c,e), a free word
//     can only become a free sentinel of a live activation other than
//     (c,e) through a grant of (c,e) itself.
//   - F4, fenced WRITE. A local grantee of (c,e) sets a word held by plain
//     WRITE, without a mark, when its table trusts the fence (the key group
//     is in the active (c,e), and the fence was recorded at f: FenceSince),
//     and the coordinator's READ of the slot (occ.LockRequest.Seen, SeenAt,
//     SeenKG) was posted after f, found the word 0, the free sentinel of
//     an activation retired for the grantee (an older activation of its
//     cohort after a migration, or one its map no longer places) or that
//     of another activation of its table (a re-cut), and the slot holding
//     the requested record — or empty, in a table whose buckets are
//     partitioned by key group (txn.Table.Partitions), so that only this
//     key group's records can ever occupy it — and was posted less than
//     NodeConfig.FencedReadAge (1 s) before the table was asked; the
//     grant's WRITE lease and owner lease apply as for a marked WRITE.
//     A grant whose claim (F1) goes out in its doorbell posts no word verb
//     there, only a READ of its slot after the claim's CAS: the memory
//     node executes a queue pair's verbs in order, so that READ sees the
//     slot after the fence was set, as a READ posted after f would. If
//     the claim succeeded and the table trusts the fence when the
//     completions are back, the READ stands for the coordinator's in the
//     rule above and the next doorbell WRITEs the word; otherwise the
//     grant CASes, expecting the word read if it is free for it.
//     A remote grantee (an owner RPC) WRITEs by the same rule, with the
//     owner's word for the fence: the reply gives each granted record the
//     age of its key group's fence (messages.LockReply.fence_age_micros;
//     Service.fenceAges), checked after the grant, and 0 unless the table
//     trusts the fence, the owner's lease is valid, and the slot is neither
//     marked nor taken from another cohort's mark (the coordinator may
//     have seen the word before a mark made it S(c,e)). The requester puts
//     f at the reply's arrival minus that age plus a millisecond (clock
//     rates differ by parts per million; no clocks are compared) and
//     counts its WRITE lease from sending the request, before the owner's
//     check. It releases the word to 0, not S(c,e): the owner cannot learn
//     a mark over the RPC, and 0 is what it replaced or free for every
//     grantee under the fence. The table marks the
//     slot after the WRITE completes.
//   - F5, give-back. Once the table no longer trusts a fence (its key group
//     left the activation, or the activation was frozen or retired), the
//     node CASes it back to 0 a drain deadline after it first saw that
//     (Table.DueUnfences, Node.Unfence) — unless the activation was
//     evicted to the fallback path: its map places the cohort nowhere, so
//     every locker takes the fence as retired, and the fence stays until
//     the key group's next owner claims it. Fence (the table op) makes the
//     activation's fences untrusted until they are seen set again.
//
// Lemma (a fenced WRITE takes a free word). Let G be F4's grantee, r its
// READ (after f, word 0 or a retired activation's free sentinel), w the
// moment its WRITE lands. At r nobody holds the word (a holder's word is a
// tag or a held sentinel until its release), and no marked WRITE can come
// (a retired activation was drained, A1, A3).
// From f to w the fence is S(c,e): it is given back only a drain deadline
// after the table stopped trusting it (F5), and G's trust was checked less
// than a WRITE lease after G asked, so G's WRITE lands first (A3); others
// take it only from a retired activation (F1, and retired by A1 means
// frozen and drained or fenced, while G's activation is active when asked
// and its WRITE lands before a fence of it, A3). Between r and w the word
// changes only by a CAS that takes a free word (the free sentinels it can
// hold are retired ones, or those of activations of (c,e)'s table, whose
// takers are grantees of that table or, once retired, read the fence), and each such CAS reads the
// fence after f (F2): the locker gives the word back (it may find G's H
// instead and then does nothing), or it is a grantee of (c,e)'s own table, which grants the
// slot to one holder at a time: it held and released the slot before G was
// granted it (its release stored before the table released it), or waits
// until G's release. So at w the word is 0, S(c,e), or a word a locker is
// giving back, and G is its only holder; each holder's release is its
// own. The READ's age bound keeps the repair sweep out of that window:
// the sweep ends only a word held unchanged for RepairAfter (30 s by
// default; package actors caps FencedReadAge at a quarter of it), and a
// word free at r is taken after r, so none is ended before
// r + RepairAfter, long after w (w comes less than FencedReadAge plus a
// drain deadline after r). I2 follows as before: every transition
// into a held state is a CAS from a value free for its locker, a WRITE
// over S(c,e) by the slot's one grantee (the lemma of marks), or a fenced
// WRITE (this lemma), and a word given back was never used.
//
// Cost: one CAS per key group and activation (the claim; the grants that
// made it pay a round trip more, not an atomic), one READ per
// CAS that takes a free word (in the doorbell it is in: no round trip), a CAS per refusal
// (two atomics wasted, then the lock follows the fence's owner), and one
// CAS per give-back. TestKeyGroupFences counts these verbs;
// TestTableFences checks the table's half; the bank, porcupine, re-cut and
// connection-loss tests run on both layouts (bothLayouts).
//
// # Fencing and the WRITE lease
//
// A WRITE cannot be fenced at the memory node (it has no CPU and a WRITE
// has no comparison). The one grantee that could WRITE after its
// activation was retired is a fenced one: granted before the freeze,
// forgotten by Fence, its WRITE still on its way when another locker takes
// the word over. So a grantee WRITEs only within NodeConfig.WriteLease
// (default: a quarter of the table's drain deadline) of asking its table,
// and CASes from S(c,e) after that; since the grant precedes the freeze and
// Fence comes a full drain deadline after the freeze, a WRITE that reaches
// the memory node within the remaining 3/4 of the deadline (A3) lands before
// any takeover.
//
// # Owner leases
//
// A node nobody can reach cannot be frozen: cut off from the planner (a
// network partition, or a pause), it still believes it owns its cohorts,
// while the planner, seeing it gone, gives them to others. Its grants by
// CAS stay safe — the lock word arbitrates them against the new owner's —
// but a grant by plain WRITE over a slot its table marked would overwrite
// whatever the new owner set. So a node WRITEs only under an owner lease
// (NodeConfig.Lease), and the planner (package actors/planner, lease.go)
// moves a silent node's cohorts only after that lease ran out:
//
//   - A node's heartbeats are requests (up to actors.MaxHeartbeatsInFlight
//     awaiting an answer; past that one goes without asking); the planner
//     answers each with a lease of Config.Lease (1 s) counted, on the
//     node, from when the heartbeat was sent, or with a refusal. Grant and
//     Locker read the node's clock.
//   - A grant WRITEs only if the lease was valid when its table was asked
//     (Locker.ask records it), within the WRITE lease of the asking; so the
//     node's last WRITE is posted before its lease's end plus the WRITE
//     lease, and lands within A3's bound.
//   - The planner records when it granted each node, and publishes no map
//     while a departed node that may hold cohorts was granted a lease less
//     than Lease + Lease/4 + one drain deadline ago (since the planner
//     started, for leases another planner may have granted). A node holds
//     none once it acknowledged a map of this planner's placing none on it
//     (installing a map freezes the cohorts it no longer places), with no
//     later map placing one and no handoff to it since; a graceful leave
//     ends that way. The node's lease started before the planner's grant (it
//     counts from the heartbeat's sending), so it ended first unless the
//     two clocks' rates differ by more than a quarter.
//   - The planner grants leases only while the live compute nodes are a
//     strict majority of the known ones (live, its roster, the roster
//     installed on its node, and the rosters the live nodes' heartbeats
//     report), and publishes nothing otherwise: a planner cut off with a
//     minority cannot renew leases or give out cohorts and epochs the
//     majority's planner also gives out (A2).
//   - A node that comes back gets no lease until it has installed the map
//     that was current when it did (or the staged round's, if one runs;
//     the planner compares the heartbeat's ownermap_epoch): that map froze
//     the cohorts moved while it was away, so its stale marks are never
//     used again. A planner taking over grants nothing before its first
//     publication decision, and then only to nodes that installed its
//     empty map.
//
// Without a lease a node keeps serving its cohorts (every grant CASes: one
// atomic per lock, as on the MN CAS path) until its map moves them.
// Two planners: membership views may disagree on which node hosts the
// planner (cluster.PlannerNode; an asymmetric partition gives two planners
// that each see a majority). Only the holder of the planner lease — one
// word on the memory node, renewed by CAS (package control/plannerlease)
// — grants or publishes, and no two planners' leases are valid at once;
// a planner that took the word over counts a departed node's lease from
// its acquisition, by which time every grant of the previous holder
// (stopped with its lease's validity) has run out too. Residual
// assumption: the known nodes are only as complete as the rosters the
// planner's side holds: a minority whose every node restarted during the
// cut (no map, no roster) cannot tell itself from a new cluster; the
// planner lease keeps it from acting only while the majority's planner
// renews the word.
//
// A node with no planner (a fixed map: NodeConfig.Lease
// nil) has no lease and is never moved without its acknowledgement.
// TestOwnerLeaseGatesWrites, TestPlannerLeases, TestPlannerNeedsAMajority,
// TestPlannerLeaseLetsOnePlannerAct and the partition and two-planners
// fault scenarios check this.
//
// # Cost
//
// Per lock, in the steady state (a record already marked at its cohort's
// epoch): LOCAL grant — a WRITE of the lock word and a READ of the slot in
// one doorbell, no atomic; release — part of the commit's header WRITE.
// The first local grant of a slot at an epoch costs one CAS (expecting the
// word the coordinator saw: 0, or an older epoch's free sentinel after a
// migration). Owner RPC grants cost the RPC and one CAS (expecting S(c,e),
// no failed CAS); MN CAS locks cost one CAS, and one CAS from the sentinel
// for the first lock of a record of an evicted cohort. TestOwnerGrantsAtomicFree
// and TestEvictionAndMoveSentinels count these verbs. With key-group fences
// ("Key-group fences") the first local grant of a record whose word is 0,
// and a local insert into a partitioned table, is a WRITE too once the key
// group is fenced; a CAS from 0 reads the fence in its doorbell.
//
// # Limits
//
//   - If the memory node is unreachable when an owner-path CAS or WRITE is
//     posted, the Locker re-reads the word until NodeConfig.ResolveTimeout
//     (5 s, longer than a reconnect; H(c,e) found while it holds the table
//     grant means its verb applied);
//     past it the lock is reported occ.LockUnknown and the table grant is
//     kept until it is older than any transaction can live; then the
//     node's repair sweep ends its word and drops it. A word left H by a
//     crashed holder is ended by that sweep (package occ, "Crash
//     recovery"): on contact once its activation is retired, or by the
//     owner when its grant is stale, or by the holder node's next
//     incarnation if its transaction committed.
//   - occ calls Released even when a commit's write-back gave up after its
//     CleanupTimeout, so the table forgets a holder whose word may still be
//     H(c,e); the slot stays marked, and the next grantee WRITEs H(c,e)
//     over it and owns the word. If the abandoned release lands later it
//     frees the word under that grantee: two memory-node failures on one
//     record, as with the lost-CAS case.
//   - A free sentinel of a cohort the map places on another node is only
//     taken by that cohort's grantees: when the cohort generator moves a
//     key group to a cohort of another node (or evicts it) while the old
//     cohort stays placed, its records marked by the old cohort are locked
//     through the old cohort's owner (Locker.follow: an owner RPC and a
//     CAS per lock) until the old cohort is evicted or moves. Install
//     epochs in the OwnerMap would lift this.
//   - A re-cut within one owner costs one CAS per record touched after it
//     (the mark moves with a CAS, not a WRITE): a WRITE over S(c1,e1) by a
//     grantee of c2 would also need c1's drain to wait for that grantee
//     (c1 may be frozen and retired while the WRITE is in flight, and MN
//     CAS lockers then take S(c1,e1)). Inserts claim empty slots (word 0)
//     by CAS unless the owner holds the key group's fence and the table's
//     buckets are partitioned by key group (F4).
//   - A fence held by a cohort on another node (a key group re-cut to a
//     cohort elsewhere, before the old owner's give-back) sends the key
//     group's locks of unmarked records to that cohort's owner (an owner
//     RPC, and the two CASes of the refused attempt) until the old owner
//     gives it back, a drain deadline after it installed the re-cut (its
//     heartbeat tick runs the give-back); a node that died holding fences
//     keeps them until its cohorts are retired by the map. A node claims a
//     fence one grant after it learns it was given back (its hint of the
//     word is refreshed by the READ of F2).
//   - Sentinels carry cohort ids mod 2^32: the takeover and follow rules
//     assume the planner's cohort ids stay below 2^32.
//   - Inserts skip slots with a free sentinel they may not take (occ tries
//     up to 4 free slots); a remote grantee's delete of a record whose word
//     was S(c,e) leaves S(c,e) on the empty slot, which only cohort c's
//     inserts reuse until c is retired.
//   - An owner RPC with no answer after NodeConfig.RPCAttempts is refused
//     (occ.LockConflict) and its records are unlocked best effort; an unlock
//     that cannot be delivered leaves the holder in the remote table until
//     the cohort is fenced or the grant is older than any transaction can
//     live, whichever is first (counted in NodeStats.UnlockFailures; the
//     stale grant's word is ended as its transaction ended).
//   - A request above Config.MaxKeysPerRequest or Config.MaxLocks is refused
//     as a conflict by the Locker (it splits requests at 256 keys). Marks
//     are bounded by Config.MaxMarks; unmarked slots cost a CAS per grant.
package owner
