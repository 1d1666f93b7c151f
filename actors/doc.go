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
// The access-graph profiler and the affinity router arrive with the
// control-plane work.
package actors
