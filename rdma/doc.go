// Package rdma is AURA's one-sided verbs layer: the only way a compute node
// touches memory-node memory.
//
// The API is shaped like libibverbs so that a real RDMA backend can sit behind
// it unchanged: a memory node registers memory regions (an address range and an
// rkey); a compute node opens a Device to the memory node and queue pairs on it;
// it posts work requests — READ, WRITE, CAS and FAA — singly or as a doorbell
// batch (one Post), and polls (or waits on) the queue pair's completion queue.
// Completions carry ibverbs-like statuses (success, remote access error, remote
// invalid request, local length error, transport error, flushed) and, for
// atomics, the word's prior value.
//
// Backends:
//   - MemDevice (this package): the memory node lives in this process.
//   - rdma/tcp: a memory-node server (`aura mn`) and a client Device speaking a
//     pipelined binary protocol over TCP, one round trip per doorbell batch.
//   - rdma/faulty: a wrapper that injects delays, dropped completions and
//     connection failures into any Device, for tests.
//
// No machine this project runs on has an RDMA NIC, so every backend is an
// emulation. What is faithful: the verbs, their validation (rkey, bounds,
// 8-byte alignment of atomics), per-word atomicity, completion ordering per
// queue pair, bounded send queues, and — with a CostModel — verb latency and the
// NIC's serialisation of atomics per slot of a 512-slot lock table hashed on the
// address. What is not: real NIC throughput, PCIe effects, and the memory node's
// CPU, which here does run (the emulated NIC is software).
//
// Promises:
//   - A memory node never reads or writes outside a registered region, whatever
//     a client sends; bad requests complete with a typed error status.
//   - CAS and FAA are linearizable per 8-byte word (tested with porcupine).
//     READ and WRITE are atomic per aligned 8-byte word only.
//   - Completions of one queue pair are delivered in posting order, and a
//     doorbell runs in order: a work request that fails ends its doorbell, and
//     the ones after it complete with StatusFlushed without being applied (a
//     reliable-connected QP enters the error state at its first failed work
//     request). A prefix of a doorbell is therefore applied, never a subset
//     with holes — the transaction engine's write-back relies on it.
//   - Every queue, batch and transfer is bounded: MaxBatch work requests and
//     MaxBatchBytes per doorbell, MaxTransferBytes per work request, and the
//     send queue depth per queue pair.
//   - Every verb is counted (Stats per queue pair and per device), failed CAS
//     separately: atomics per transaction is AURA's headline figure.
package rdma
