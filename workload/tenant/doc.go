// Package tenant is the multi-tenant workload: tenants whose data sits in
// scattered key groups, so that no static rule captures which key groups
// are written together — the case where learned cohorts beat critical-field
// ownership (SPEC §9).
//
// # Data and layout
//
// One table, "tenant_data" (table id 1). The key space is KGSpace key groups
// of KeysPerKG keys (key group = key / KeysPerKG). Tenants × KGsPerTenant
// distinct key groups are drawn pseudo-randomly from that space with a PCG
// seeded by LayoutSeed — neither contiguous nor aligned with any key prefix
// — and every key of a drawn key group is loaded (a kvrec value). The set of
// loaded key groups never changes; the layout assigns them to tenants,
// KGsPerTenant each. The layout is a function of (LayoutSeed, epoch) only,
// so every process that builds the workload with the same Config agrees on
// it.
//
// # Transactions
//
// A transaction picks a tenant (uniformly, or by a Zipfian over tenant
// ranks when TenantDistribution is "zipfian") and touches OpsPerTxn
// distinct records of that tenant's key groups: each a uniform key of a
// uniform one of its key groups, written (read-modify-write, see package
// kvrec) with probability WriteFraction, else read. With probability
// CrossTenantFraction the last record is instead taken from another tenant,
// drawn uniformly. Generators are deterministic for (seed, client) and draw
// the same random numbers whatever the epoch: a drift changes where the
// draws land, not the draws.
//
// # Drift
//
// The workload has a layout epoch, 0 after New. Drift(e) switches every
// generator (on its next Next) to the layout of epoch e; Advance() is
// Drift(Epoch()+1). The simulator calls it at a virtual time, the bench on
// a timer. Two kinds, by DriftMode:
//
//   - "remap" (default): going from epoch e−1 to e, a DriftFraction share of
//     the tenants (all of them by default, at least two) is chosen with a
//     PCG seeded by (LayoutSeed, e); their key groups are pooled, shuffled
//     and dealt back, KGsPerTenant each. Co-access groups change; the data
//     does not move.
//   - "hot": the layout stays; the permutation from Zipfian rank to tenant
//     is redrawn from (LayoutSeed, e), so different tenants are hot (needs
//     TenantDistribution "zipfian"). Epoch 0 is the identity: tenant 0 is
//     the hottest.
//
// Layouts are computed incrementally and cached, so Drift to the next epoch
// costs O(Tenants × KGsPerTenant); epochs are bounded by MaxEpoch.
//
// # Ground truth for oracles and tests
//
// TenantOf(kg) names the tenant owning a key group at the current epoch;
// Oracle() returns the key groups of every tenant (the ideal co-access
// grouping: one cohort per tenant), OracleAt(e) the same at any epoch, and
// TenantWeights() the probability with which each tenant is picked at the
// current epoch (for load-aware oracle placement). Cross-tenant
// transactions (CrossTenantFraction) are the noise no grouping removes.
//
// # Rule "tenant_range"
//
// Key group = key / KeysPerKG; partition = a static 64-bit hash of the key
// group (splitmix64). There is deliberately no tenant-aware static rule:
// static partitioning scatters every tenant over the CNs.
//
// # Checks
//
//   - "tenant.records": every loaded record present and well formed.
//   - "tenant.conservation": the kvrec balances sum to zero (no lost update,
//     no partially applied transaction).
package tenant
