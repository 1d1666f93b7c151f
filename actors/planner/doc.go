// Package planner holds the planner singleton actor and the OwnerMap
// distribution it drives.
//
// Actor applies the nodes' ACCESS_SUMMARY heartbeats to the control loop
// (control/plane: decayed access graph, cohort generator, Benefit planner)
// and, every Tick, plans; a changed assignment becomes the next OwnerMap
// epoch, pushed to every live node as OwnerMapPush messages (a version-3
// delta when smaller than the full version-2 manifest, split into chunks of
// ChunkBytes so no message approaches gRPC's 4 MiB limit) through a Pusher.
// Nodes reassemble pushes with an Assembler and acknowledge.
//
// Promises:
//   - An epoch advances only once every live node acknowledged the previous
//     one (installed_epoch ≥ epoch) or left the membership (Nodes message);
//     until then each tick resends the pending epoch to the nodes that have
//     not answered and plans nothing new (SPEC §6 publish).
//   - A node that cannot apply a delta (it lacks the base epoch, e.g. after a
//     restart) answers need_full and gets the full manifest next.
//   - Late acknowledgements of older pushes are ignored; pushes are
//     idempotent on the node side (an epoch not newer than the installed one
//     is acknowledged and ignored).
//   - Bounded: heartbeats per tick (MaxHeartbeatsPerTick, extra ones dropped
//     and counted), the actor's mailbox, one push in flight per node and
//     tick, one manifest buffered per Assembler, manifests capped in size
//     before buffering and checked by CRC-32C before decoding; the
//     operator's history of decisions (with their Benefit terms) and of
//     finished migrations (GetDecisions; MaxDecisions, MaxMigrationRecords).
//   - A tick never runs Louvain: the cohort generator's periodic
//     refinement (every RefineEvery ticks, one region of adjacent cohorts)
//     runs on a goroutine of its own, at most one at a time, on a snapshot
//     that shares no memory with the loop; the next tick adopts the result
//     if its region is unchanged (Status.Refines, MaxTickMicros).
//   - Owner leases (lease.go): every heartbeat sent as a request is
//     answered with a LeaseGrant; a departed node's cohorts move only once
//     every lease it was granted ran out, leases go only to nodes holding
//     the map current when they (re)appeared, and a planner that sees no
//     majority of the known compute nodes publishes nothing and grants no
//     lease.
//   - The planner lease (singleton.go, package control/plannerlease): with
//     Config.LeaseWord (every `aura node`) the planner grants, pushes,
//     migrates and publishes only while it holds a valid lease on the
//     memory node's word, so two planners never act at once, even when
//     each sees a majority (an asymmetric partition). One that took the
//     word over counts a departed node's lease from its acquisition; one
//     deposed forgets its state. Without a valid lease it answers
//     heartbeats with ReasonNoPlannerLease, and the node tries the next
//     planner candidate of its view (cluster.HeartbeatRoute).
//   - The planner's state is soft: a planner started elsewhere rebuilds the
//     graph from heartbeats within a few ticks (the cluster runtime decides
//     where it runs; see "Taking over").
//
// # Roster
//
// Owner indexes in an OwnerMap (owner_cn of the manifest, SPEC §7) name
// roster slots, and the planner owns the roster: every live node of the
// latest Nodes message gets a slot (a never-used index while fewer than
// Config.Loop.Nodes exist, else the lowest freed one; a node with no free
// slot owns nothing and is logged), and each push carries the roster of its
// epoch (OwnerMapPush.roster), which nodes install with the map. Slots are
// stable: a node keeps its index while it is live, and a departed node's
// index stays reserved while the current map still names it (its cohorts
// are reassigned as the node is down, then the slot is freed at the epoch
// that no longer names it and the published roster drops the name). So an
// index means the same node in every map that uses it, across joins,
// leaves and restarts under the same name. Heartbeats are numbered by the
// planner: the summary's node_index is replaced with the sender's slot (a
// node learns its slot only from its next map), and summaries from nodes
// without a slot are dropped. A node that joins gets the current map at once
// (in full), and the next epoch waits for its acknowledgement too; a live
// node whose heartbeat reports no installed map (it restarted) gets it again.
//
// # Taking over
//
// A planner that starts while the nodes already hold maps of another
// (failed or moved) planner does not know that planner's assignment, and
// its own epochs would start at 1 and be ignored as stale. So before its
// first publication it waits (Config.StartupTicks) for a heartbeat from
// every live node, whose ownermap_epoch says what each installed; if any
// holds a map, it first publishes a map without cohorts two above the
// highest epoch e (the old planner published e+1 only once every live node
// had e, so it published nothing above e+1) — every cohort back to the MN
// fallback path — and offsets its own epochs above that. The new owners
// then install only after every node acknowledged that the old ones stopped
// granting, as in an evict-then-install move. An acknowledgement reporting
// an installed epoch above the one pushed, or the same epoch installed from
// another planner (OwnerMapAck.installed_planner: a node it did not hear
// from, or a second planner during a placement change), triggers the same
// reset above it. The cost is that learned ownership starts over after a
// failover.
//
// # Migrations
//
// With a Pusher that is also a Migrator (every node transport in AURA), a
// planned map that takes cohorts off live nodes is not published at once:
// the TransferController (package control/transfer) first freezes and
// drains each departing cohort on its old owner and hands moved ones to
// their new owner; the map, with the round's outcomes applied (a rolled
// back cohort stays put, one whose target left or refused is evicted), is
// published once the round settled, and Publish retires the old
// activations once every node acknowledged it. Planning waits while a
// round runs. Nodes leaving gracefully (Nodes.Leaving) are NodeLeaving to
// the planner: their cohorts leave through the same rounds. A joining or
// restarted node gets no map while a round is staged (the published one may
// place on it a cohort the round handed elsewhere), and after a takeover the
// planner waits one drain deadline before installing any cohort. Without a
// Migrator, a move goes through the fallback path in two epochs (plane's
// EvictBeforeMove). docs/migration.md has the whole protocol.
package planner
