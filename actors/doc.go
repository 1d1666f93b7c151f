// Package actors holds the per-node actors of AURA's data plane, built on
// protoactor-go's actor package (its cluster package is not used; see
// package cluster).
//
// Node runs, per compute node, coordinator actors — each receives a
// transaction as a messages.TxnSubmit, runs one attempt of it on the OCC
// engine (package occ) and answers a messages.TxnResult with the outcome and
// its counters — and atomic actors, which own queue pairs and take
// memory-node locks for the coordinators (CAS + READ per lock in one
// doorbell). Coordinators reach the lock path only through occ.Locker, so the
// ownership paths plug in beside the atomic actors without touching them.
//
// Promises: every mailbox is bounded (NodeConfig.MailboxSize); a transaction
// id whose final outcome is recorded is answered from the record and never
// runs twice (bounded by NodeConfig.ResultCacheSize); Close processes every
// accepted message before stopping an actor (protoactor drops a stopped
// actor's queued messages silently, so actors are poisoned, not stopped).
//
// With NodeConfig.Ownership set, a node also takes locks through the owner
// path (package actors/owner): its coordinators' lockers grant locks of the
// cohorts the node owns from its owner table, ask other owners by RPC, and
// fall back to the atomic actors for unowned key groups. The node then
// serves its cohort activator (package actors/cohort: owner RPCs from other
// nodes, each cohort served by its own activation actor, started only on
// the cohort's owner) and OwnerMapActorName (OwnerMap pushes from the
// planner: cohorts leaving the node are frozen and retired once drained,
// cohorts re-cut in place are reconfigured, new ones installed; the
// activator is told to Sync after each change), and its access profiler
// sends a summary every HeartbeatEvery to the planner.
//
// A node's migration participant (MigrationActorName) serves the planner's
// migration protocol (package control/transfer): Freeze, Drain (answered
// once the cohort's pre-freeze locks are released or fenced), Handoff,
// Publish and MigrationAbort, each idempotent, each reporting activations
// and grants to OwnershipConfig.Observer (package invariants).
//
// Cross-node requests go through Call: a per-attempt timeout, jittered
// exponential backoff and a bounded number of attempts, each caller with its
// own CallConfig (never protoactor's process-global request settings).
// StartRemote starts a node's protoactor remote endpoint with bounded queues;
// one per process (protoactor's Remote.Start writes grpc's process-global
// logger, which races with another remote's server goroutines), with one
// connection attempt per endpoint (the pinned version orphans the gRPC
// connection of every failed attempt but the last; endpointConnectAttempts)
// and a guard that turns a panic on a malformed batch into the end of that
// one stream (recoverStream).
package actors
