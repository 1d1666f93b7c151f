// Package cohort holds the cohort virtual actors of AURA: a cohort (a set of
// key groups owned, moved and routed as one) is addressed by its cohort id
// and served by an activation — an actor — on its owner compute node.
//
//   - Placer: where a cohort belongs. The OwnerMap's owner for the cohorts
//     the map holds; rendezvous (highest-random-weight) hashing over the
//     live nodes' names for any other identity (the hash mode's placement),
//     so that a membership change moves only the identities of the node
//     that came or went.
//   - Activator: one actor per node, registered as ActivatorName. Requests
//     for a cohort (messages.LockRequest, messages.UnlockRequest) reach it
//     by cohort id; it forwards them to the cohort's activation, a child
//     named ActivationName(id), starting one only when its Authority (the
//     node's installed OwnerMap and owner table) says the node grants the
//     cohort now. A request for a cohort the node does not grant is
//     answered by the Server — the owner table — with its typed refusal
//     (MOVED with the new owner and epoch, RETRY, STALE_EPOCH, NOT_OWNER),
//     never by a new activation: that is the activator's fencing.
//   - Sync: after every change of the node's cohorts (a map installed, a
//     drained cohort retired, the node relinquishing before it leaves) the
//     activator stops the activations the table no longer holds — after the
//     requests already queued to them — and keeps a tombstone of each
//     (id, epoch), so that a late request cannot start a retired activation
//     again. An activation whose cohort is frozen but still draining stays:
//     releases must reach it.
//   - PIDCache: a caller's cache of activation PIDs per (node, cohort),
//     belonging to one OwnerMap epoch and emptied when a request of a newer
//     map goes out; an entry that answers with a dead letter or a refusal is
//     dropped, and the request goes to the node's activator.
//
// Promises: at most one activation per cohort per node, and only while the
// node grants the cohort's locks or still drains them (invariant I1 of the
// specification is the owner table's; the activation adds a mailbox and an
// address per cohort, not a second authority); every bound is in Config.
//
// The cross-node transport that uses the cache and the activators is
// actors.RemoteTransport; the in-process transport of the embedded
// benchmark calls the owner table directly, the same work an activation
// does, without the actor hop. Moving a live cohort between activations
// with its holders (freeze, drain, handoff, publish) is the migration
// issue's work; today a move is a freeze and retirement here and an
// installation there, at a later epoch.
package cohort
