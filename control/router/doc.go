// Package router is AURA's AffinityRouter (SPEC §5; seed 000 §4–5): it picks
// the compute node a transaction runs on (its home CN) from the key groups
// the transaction will write and read, so that the locks it takes are
// granted by that node's own owner table (LOCAL hits) instead of an owner RPC
// or an MN CAS.
//
// # Two layers
//
// The cohort overlay: for every node i,
//
//	Score(T, i) = Σ_{c∈C_W(T)} 1[owner(c)=i]·A(c) + β·Σ_{c∈C_R(T)} 1[owner(c)=i]·R(c) − Queue(i)
//
// where C_W(T) and C_R(T) are the cohorts of the key groups T writes and
// reads, owner(c) comes from the installed OwnerMap, A(c) and R(c) are
// per-cohort weights (SetWeights; default 1) counted once per key group
// entry the caller passes — so by default a cohort scores the number of the
// transaction's key groups it holds — and Queue(i) is the caller's measure of
// node i's backlog in score units. β defaults to 0: OCC reads take no locks
// (seed 000 §4.3), and reads are not even looked up then. The transaction
// goes to the node of highest score.
//
// The static fallback: when none of the transaction's key groups (writes, or
// reads when β > 0) is owned, the overlay has nothing to say and the
// transaction goes by its partition value ("home": for TPC-C its home
// warehouse) — first through the installed map's fallback table
// (Fallback[home % len], when the table is non-empty and the entry names a
// node), else through Config.Fallback: ModuloFallback (home % N, the
// tutorial's RouteByWarehouse) by default, or RendezvousFallback (rendezvous
// hashing) for partition values that are not small dense integers.
//
// The router never blocks and never fails to route: before any OwnerMap is
// installed, or with an empty one, everything goes by the fallback.
//
// # Ties
//
// Scores are compared exactly. Among the nodes of the highest score the
// fallback node wins if it is one of them (so a transaction the overlay is
// indifferent about keeps its static affinity), else the lowest index. The
// result is a pure function of the installed map, the weights and the
// arguments.
//
// # Naive Lever B
//
// RouteNaive is the tutorial's v25 client dispatch (seed 000 §5.1): the owner
// of the transaction's primary (first) write key group if it is owned, else
// the fallback, with no score and no queue penalty. It exists to reproduce
// the collapse of SPEC §5 (--lever-b naive), not for production use.
//
// # Promises
//
//   - Pure: no goroutines, clocks or I/O.
//   - Install is atomic: a map is fully validated and indexed before it
//     replaces the installed one; a refused map (ErrInvalidMap) or an older
//     epoch (ErrStaleEpoch, typed *StaleEpochError) leaves the router as it
//     was, and an equal epoch is a no-op (an epoch names one assignment).
//   - Fast: an open-addressing hash index (linear probing, at most half
//     full, 16-byte slots holding key group, cohort and owner) answers
//     OwnerOfKeyGroup in one probe sequence, usually one cache line. Route
//     looks a transaction's key groups up in batches whose home slots are
//     loaded first, without data-dependent branches, so that their cache
//     misses overlap. Cached lookups (the tutorial's 9,216 key groups, or
//     the hot key groups of a large map) take well under SPEC §11's 50 ns
//     per key group; a cold one in a 1,000,000-key-group map costs a memory
//     access, which on this machine is slower than that (see the
//     benchmarks). Route does not allocate, except for a transaction that
//     touches more than 16 distinct owners in a cluster of more than 16
//     nodes.
//   - Concurrency: a Router is not safe for concurrent use, but its reading
//     methods (Route, RouteNaive, Scores, OwnerOfKeyGroup, FallbackNode and
//     the accessors) do not modify it, so any number of them may run at
//     once between Install and SetWeights calls (a gateway guards those
//     with a write lock, or swaps routers).
//   - The router keeps no reference to the maps it installs.
package router
