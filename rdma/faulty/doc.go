// Package faulty wraps any rdma.Device and injects the faults a real RDMA
// fabric or a memory-node connection produces, so that code above the verbs
// (the OCC engine, the atomic actors) can be tested against them. It is in
// the spirit of pebble's errorfs: an Injector decides, for each doorbell
// (Post) and each work request, whether to inject a fault.
//
// Faults, per work request:
//   - Delay: the completion arrives Fault.Delay later. Completions stay in
//     posting order, so the ones posted after it are held back too.
//   - Drop: the work request is applied but its completion never arrives (a
//     lost acknowledgement). Because completions are delivered in posting
//     order, later completions of that queue pair are held back behind it until
//     the caller discards them; a caller's Wait ends through its context. Exec
//     does exactly that (it discards what it did not receive), so a queue pair
//     used through rdma.Exec stays usable after a drop by construction; a caller
//     that polls by hand must CompletionQueue.Discard what it gives up on.
//   - FailUnapplied: the work request completes with StatusTransportError and
//     was not applied (it never reached the memory node).
//   - FailApplied: the work request was applied, then completes with
//     StatusTransportError (the outcome is unknown to the caller).
//
// Per doorbell:
//   - FailPost: Post fails with an error matching rdma.ErrConnectionLost and
//     nothing of the batch runs.
//   - Break: as FailPost, and the connection breaks (see Device.Break): every
//     work request whose completion has not yet been handed to its completion
//     queue completes with StatusTransportError, and every Post, CreateQP and
//     control call fails with rdma.ErrConnectionLost until Device.Heal.
//
// Injectors: Random (seeded math/rand/v2, per-fault probabilities,
// reproducible for a given sequence of events), Nth (the nth work request or
// doorbell of the device), When (a predicate on the event: opcode, rkey,
// address, queue pair), Chain (the first injector that injects wins), and
// InjectorFunc for anything else. Device.Faults counts what was injected.
//
// The wrapper runs one goroutine per queue pair that moves completions from
// the wrapped queue pair to the wrapper's, applying the faults; it stops when
// the queue pair or the device is closed. It therefore needs a backend whose
// completion queue may be waited on by one goroutine while another posts,
// which holds for every backend built on rdma.CompletionQueue.
package faulty
