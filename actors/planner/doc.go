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
//     before buffering and checked by CRC-32C before decoding.
//   - The planner's state is soft: a planner started elsewhere rebuilds the
//     graph from heartbeats within a few ticks (the cluster runtime decides
//     where it runs).
//
// Moving a live cohort between owners with its locks held (freeze, drain,
// handoff) is the migration protocol's job; until it exists a planned move
// of an owned cohort must be carried out by the nodes as evict → install,
// never with two owners granting at once.
package planner
