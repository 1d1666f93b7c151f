// Package owner will hold the per-node owner: the local lock table of the
// cohorts this compute node owns (the LOCAL path, a compare-and-swap in node
// memory), the owner RPC service that grants those locks to other nodes'
// transactions, the OwnerMap subscription, and cohort install/evict, with the
// mutual exclusion against the memory-node CAS path that invariant I2 needs.
//
// Status: filled by the cluster-runtime issue; no code yet.
package owner
