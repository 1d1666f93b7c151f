// Package sim is AURA's deterministic discrete-event simulator: N compute
// nodes, one memory node, closed-loop (or paced) clients and the planner, all
// in virtual time, running the real control-plane packages (profiler, access
// graph, cohort generator, ownership planner, affinity router, manifest).
//
// # Determinism
//
// One event queue ordered by (virtual time in ns, sequence number); no
// goroutines, no wall clock; every random stream is seeded from Config.Seed;
// maps are iterated in sorted order. The same Config gives byte-identical
// results.
//
// # Data-plane model
//
// A transaction's access set is the workload's Footprint of the generated
// message (for TPC-C Delivery the simulator adds what execution decides: about
// ten ORDER_LINEs and one CUSTOMER per district, so that the spec mix costs ≈ 18
// locks per transaction as in the real engine). Records map to key groups with
// the workload's Rule. An attempt:
//
//  1. is routed to a home CN (mode-dependent) and queues for that CN's CPU
//     (a single server: TxnCPU + OpCPU per record);
//  2. locks every write record, in footprint order, by one of three paths:
//     LOCAL (the home CN owns the record's cohort: LocalLock ns), OWNER RPC
//     (another CN owns it: one request per distinct owner, OwnerRPC ns plus
//     RPCCPU ns on the owner's CPU queue) or MN CAS (rdma.NIC in virtual time,
//     with the 512-slot atomic serialisation); reads are READs issued in the
//     same doorbell batch;
//  3. commits with a WRITE per write record (plus a lock-release WRITE per MN
//     lock), then releases its locks.
//
// Lock conflicts use a per-record lock table (no-wait): a lock held by another
// transaction aborts the attempt, which releases what it took and is retried
// after a jittered exponential backoff (20 µs doubling to 2 ms). Rows a
// transaction inserts (TPC-C's placeholder ORDER/NEW_ORDER/ORDER_LINE/HISTORY
// refs) count as locks but never conflict: the DISTRICT or DELIVERY_CURSOR lock
// serialises their writers, as in the engine.
//
// # Migrations
//
// A cohort whose owner changes (or that is evicted) is frozen for
// Freeze + drain + Handoff, where drain is the longest remaining hold of a lock
// already granted on the cohort's key groups (the transactions are not
// aborted). During that window the cohort's locks fall back to MN CAS (the
// choice this simulator makes instead of making them briefly unavailable:
// the cost shows in atomic_per_txn, never as a stall). Newly owned cohorts
// (from the fallback path) are installed without a freeze.
//
// # Modes
//
//   - mn-only: every lock by MN CAS; routing by the rule's static fallback.
//   - static: every record's lock owned by its partition's node (TPC-C:
//     warehouse % N; otherwise rendezvous hashing of the partition value);
//     routing by the same rule.
//   - hash: every key group its own cohort, placed by rendezvous hashing of the
//     key group; no planner; routing by the static rule.
//   - aura: learned cohorts, Benefit planner, affinity routing (Lever B),
//     migrations.
//   - oracle: an offline assignment from knowledge of the whole workload:
//     TPC-C warehouse-aligned ownership (= static); tenant: the workload's
//     ground-truth tenant groups balanced over nodes (following drifts);
//     other workloads: static. Routing by the owner of most of the write set.
//
// # The aura loop
//
// Each CN has an accessgraph.Profiler that records every committed
// transaction it was home to (write and read key groups; it samples) and its
// lock paths (exact, with the key groups locked by MN CAS). At every planner
// tick (virtual) each profiler's AccessSummary (v2) is applied to the
// planner's accessgraph.Graph; the cohortgen.Generator turns the graph into
// cohorts; their CohortStats (W, HomeWeight from the graph's home
// distributions, fallback-CAS share) go to ownership.Planner.Plan (NaiveConfig
// under --lever-b naive); the planned OwnerMap is published at epoch + 1 to
// the router (one router stands for every client: publication is immediate)
// when it differs from the last one, and the graph decays (Tick). The router
// decides lock ownership too (OwnerOfKeyGroup): a key group in no published
// cohort is locked by MN CAS. Routing: guarded uses router.Route with
// Queue(i) = node i's CPU backlog / 50 µs; naive uses router.RouteNaive; off
// routes by the static fallback.
//
// The ticks run in this order: summaries applied, graph decayed (Tick),
// cohortgen.Generator.Step on the graph, CohortStats read from the graph,
// Plan, publish.
//
// Drift (Config.DriftEvery) is supported for the tenant workload only (it
// calls tenant.Workload.Advance); other workloads have no hot set the
// simulator can move and refuse the option.
package sim
