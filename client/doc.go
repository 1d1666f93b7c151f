// Package client submits transactions to a running AURA cluster (compute
// nodes started with `aura node`), routing each to the node that owns most
// of its write set.
//
// A Client is made from a connection string (ParseURL):
//
//	aura://HOST:PORT/DB?http_addr=HOST:PORT[&token=TOKEN]
//
// HOST:PORT is one node's protoactor remote address; http_addr is a node's
// management API (`aura node --http`); token, when the API requires one
// (`aura node --auth-token`), is sent as an "Authorization: Bearer" header
// on every API request. URL.String and every error redact it; only
// URL.StringWithToken shows it. The client reads two documents from that
// API (SPEC §8):
//
//   - GET /management/topology: the live workers (compute nodes) with their
//     owner index, name, remote address and owned cohorts, and the node's
//     installed OwnerMap epoch;
//   - GET /management/ownermap: the installed OwnerMap as a version-2
//     manifest (an AURA extension of the topology API: the cohort → key
//     group overlay, which the topology's partition ids alone do not give).
//
// What it promises:
//
//   - Routing: each messages.TxnSubmit goes, as an actor message to the
//     node's "txn" actor (TxnActorName), to the node an AffinityRouter
//     (control/router) chooses over the client's copy of the newest OwnerMap
//     it has seen; transactions the map says nothing about, and every
//     transaction while no map is known, go by the workload's static
//     fallback over the known workers (TPC-C: home warehouse % N; other
//     workloads: rendezvous hashing of the partition value), as in the
//     embedded `aura bench`. Routing affects locality only, never
//     correctness: any node runs any transaction.
//   - Freshness: the topology and map are re-read every Config.RefreshEvery
//     (1 s), and at once (at most every Config.MinRefreshGap) when a node is
//     unreachable, answers MOVED, REJECTED or ERROR, or reports a newer
//     OwnerMap epoch than the client's. Epochs only grow: a map older than
//     the client's (from a lagging node) is not installed.
//   - Degradation: while the API is unreachable the client keeps routing
//     by its last view; if the API has never answered, the URL's HOST:PORT
//     is the only worker.
//   - Bounds: response sizes (Config.MaxResponseBytes, and the manifest's
//     own cap), workers (Config.MaxWorkers), HTTP time
//     (Config.HTTPTimeout), submit attempts per call (Config.MaxAttempts,
//     each bounded by Config.Call) are all limited.
//
// API (FetchTopology, API.Topology, API.PartitionRoute, and the same on a
// Client) calls the management API directly: the topology, and where a
// key tuple goes under a named partition rule (package rules), with the
// API's {code, message} errors as *APIError (IsCode tests a code). The
// aura topology and aura route commands use it.
//
// What it does not do: it does not retry aborted transactions (the caller
// resubmits them with the same transaction id and a higher attempt number;
// nodes answer a finished transaction id from their result cache instead of
// running it twice), and it does not start an actor system: the caller
// passes one with a remote endpoint (actors.StartRemote; one per process),
// whose address the nodes answer to.
package client
