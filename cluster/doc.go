// Package cluster will own what protoactor-go's cluster package does not do
// soundly at the pinned version: membership (hashicorp/memberlist: seeds,
// graceful leave, failure detection), placement of cohort virtual actors by
// the OwnerMap (rendezvous hashing for identities the map lacks), OwnerMap
// distribution by acknowledged push, the cross-node call wrapper (per-attempt
// timeouts, jittered backoff, idempotency keys, MOVED handling), the HTTP
// management API and the client's topology cache.
//
// Status: filled by the cluster-runtime and routing issues; no code yet.
package cluster
