// Package transfer is the planner's TransferController: the driver of the
// migration protocol of SPEC §6 (freeze → drain → handoff → publish) as a
// pure state machine, in the style of etcd-io/raft. No goroutines, clock or
// I/O: time enters as microseconds on every call, incoming acknowledgements
// through Step, the passing of time through Tick, membership through
// NodeGone, and every call returns the messages to send (Send). The
// planner actor (package actors/planner) delivers them and feeds the
// replies back.
//
// # A round
//
// The planner plans the next OwnerMap (epoch E+1) from the published one
// (E). Every cohort placed on a live node A at E that A will not hold at
// E+1 departs A: it moves to another live node B (the same cohort id placed
// on B) or is evicted (not placed, or placed on a node that is gone). Start
// begins one migration per departure, all in parallel; the planner
// publishes E+1 only once the round is Settled, and calls Published once
// every node has acknowledged it. Per migration:
//
//  1. Freeze → A. A's activation stops granting (requests get RETRY, never
//     a silent drop or an unbounded buffer) and answers FreezeAck.
//  2. Drain → A. A waits until the locks granted before the freeze are
//     released; past the drain deadline it fences the remaining holders
//     (they abort at validation) and answers DrainAck.
//  3. Handoff → B (moves only). B installs the cohort at E+1 and grants only
//     at that epoch; HandoffAck.
//  4. Publish → A and B, once every node acknowledged E+1. A retires its
//     frozen activation behind a tombstone; PublishAck.
//
// Every message is keyed by (migration id, cohort, old epoch) and resent
// every Config.ResendMicros until answered; replies are idempotent on both
// sides (a late or repeated acknowledgement of a phase already passed
// changes nothing, one for another migration id is ignored).
//
// # Deadlines and the watchdog
//
//   - Freeze and drain must both be acknowledged within
//     Config.FreezeTimeoutMicros of the start. Otherwise (A does not answer,
//     or refuses with ERROR or STALE_EPOCH) the migration rolls back:
//     MigrationAbort(restore_owner A, restore_epoch = old epoch) is sent to
//     A (which thaws the cohort if it froze it) and the cohort stays on A
//     in E+1 (Placement reports Kept). Resent until acknowledged, for at
//     most Config.AbortTimeoutMicros; past that the abort is abandoned and
//     counted as stuck (the cohort stays placed on A; a frozen activation
//     there answers RETRY until a later map retires it).
//   - The handoff rolls forward: once A is drained, placing the cohort on B
//     in E+1 is safe whether or not B has acknowledged (B installs the
//     cohort from the map as it would from the Handoff). So a handoff
//     without an acknowledgement within Config.HandoffTimeoutMicros is
//     counted as stuck and the round settles anyway.
//   - Publish acknowledgements are awaited for at most
//     Config.PublishTimeoutMicros (A also retires the cohort once it
//     installs a map that records the move, so a lost PublishAck delays
//     nothing).
//   - NodeGone(A) before A is drained: A's activation died with it (a crash
//     or a completed leave); the migration goes straight to the handoff, at
//     the new epoch (locks A's transactions held stay held on the memory
//     node, and those transactions abort at validation). NodeGone(B): the
//     cohort is evicted instead (Placement reports Evicted).
//
// # Invariants
//
//   - I1 (single authority). The controller sends Handoff only after A
//     acknowledged the drain (A granted nothing since the freeze and holds
//     nothing), or after A left the membership. Rollback re-activates A
//     only when no Handoff was sent. So at no time are two activations of
//     a cohort active.
//   - Epochs only grow: Start refuses a move whose new epoch is not above
//     the old one, and every message carries both.
//   - Bounded: at most Config.MaxMigrations migrations per round, one
//     outstanding message per participant and migration, and every phase
//     has a deadline, so a round always ends (Settled within
//     FreezeTimeout + HandoffTimeout + AbortTimeout of Start; Done within
//     PublishTimeout of Published).
package transfer
