// Package accessgraph is AURA's access graph (SPEC §5, seed 002 §1–2): the
// per-CN AccessGraphProfiler that samples committed transactions into
// ACCESS_SUMMARY heartbeats, and the planner's Graph that aggregates them
// into a decayed global graph of key groups.
//
// The package is pure in the etcd-raft sense: no goroutines, clocks or I/O.
// Transactions enter as Profiler.Record calls, heartbeats as Graph.Apply
// calls, and time as explicit Profiler.Summary / Graph.Tick calls, so the
// planner actor, the deterministic simulator and the tests run the same
// code and get the same results for the same calls.
//
// # Model
//
// Vertices are key groups. A key group's write weight W(v) counts committed
// transactions that wrote it, its read weight counts those that only read
// it. Edges are typed: ww(u,v) counts transactions that wrote both, wr(u,v)
// those that wrote one and only read the other; the planner's edge weight is
// w(u,v) = ww + alpha_wr·wr with alpha_wr = 0.3. Read–read pairs take no
// lock and are not tracked. Each key group also carries a home distribution
// P(home(v)=i) (the CNs that executed the transactions touching it) and a
// count of the locks on it taken by MN CAS (fallback); each CN index carries
// its transaction count, lock counts by path, queue depth and CPU load.
//
// # Profiler (one per CN)
//
//   - Record decides with a countdown whether to sample (one transaction in
//     SampleEvery, random gaps of that mean); an unsampled call costs a
//     decrement and a sampled one a copy of its key groups into a buffer.
//     Resolving, deduplicating and pairing happen when the buffer is
//     aggregated (at Summary, or when it fills): pairs are radix-sorted and
//     counted, so the hot path does no hashing and no random memory access.
//   - Summary scales every count by total/sampled (unbiased estimates of
//     the full counts) and emits the window as AccessSummary v1 (untyped
//     edges carrying ww + alpha_wr·wr) or v2 (typed edges); it then starts
//     a new window whose sampling interval is raised, if needed, to keep
//     at most MaxSamplesPerWindow samples per window.
//   - One transaction contributes edges among at most MaxPairKGs (32)
//     distinct key groups, writes first: ≤ 496 pairs.
//   - Bounded memory per window: MaxNodes key groups (later newcomers
//     dropped, counted), MaxEdges edges (the lightest dropped, counted),
//     MaxBufferedKGs buffered ids; a summary carries at most
//     MaxSummaryEdges edges, the heaviest.
//
// # Graph (the planner's aggregate)
//
//   - Apply validates a summary as a whole and rejects it with a typed
//     *SummaryError (ErrVersion, ErrTooLarge, ErrInvalid, ErrTooManySenders)
//     without side effects; it ignores a (node, membership epoch, tick) that
//     is not newer than the last one applied from that node. Node weights
//     are updated in place; edge updates join a pending batch, merged
//     (radix sort + one sequential pass) into the key-sorted edge array
//     once it reaches a quarter of it, at Tick, or when read.
//   - Apply adds at full weight and Tick multiplies every weight by λ
//     (0.95), so a weight is the decayed sum Σ λ^k·x of everything applied,
//     k being the number of Ticks since it was applied; after k Ticks
//     without input a weight is exactly λ^k of itself. Tick then forgets
//     edges and edge-less key groups below Epsilon, keeps each key group's
//     MaxEdgesPerNode heaviest edges by projected weight (the weight the
//     edge would have ProjectTicks on, were its recent co-access to hold)
//     when the graph holds over 1.25 times that many per key group (and
//     filters edges against those thresholds until the next trim: new
//     ones by decayed weight, or by projected weight at a key group whose
//     partners changed — a drift), and trims tables above MaxNodes /
//     MaxEdges to TrimFraction of the cap, lightest first.
//   - Accessors: W, R, FallbackCAS, EdgeWeight, TypedEdge, Neighbors,
//     HomeDist / HomeProb, NodeLoad, CNs, KeyGroups; and for array-based
//     hot loops NodeID-indexed ones (ID, KG, WOf, NeighborsOf, NumIDs) and
//     EdgeList (every edge, sorted, sequential).
//
// # Invariants
//
//   - Every weight is finite and ≥ 0 (Apply rejects anything else).
//   - An edge's endpoints are both in the graph; no self edges; each
//     unordered pair at most once.
//   - Key groups ≤ MaxNodes at all times; edges ≤ MaxEdges after every
//     merge and pending updates ≤ MaxEdges; after Tick, at most
//     TrimFraction of each cap, and (ties aside) at most
//     1.25·MaxEdgesPerNode·(key groups) edges.
//   - A rejected or duplicate summary leaves the graph unchanged.
//   - Same calls, same state: no map iteration order, randomness or time
//     leaks into results.
//
// Sizes: about 100 bytes per key group and 60 per edge.
package accessgraph
