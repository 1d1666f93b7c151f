// Package rdmatest holds test helpers for rdma backends: a conformance suite
// that every rdma.Device must pass, and a linearizability checker (a porcupine
// model of 8-byte words under READ, WRITE, CAS and FAA).
//
// A backend's tests call the suite with a factory for fresh devices:
//
//	func TestConformance(t *testing.T) {
//		rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
//			srv := startServer(t) // backend-specific; clean up with t.Cleanup
//			return dial(t, srv)
//		})
//	}
//
// The suite checks what callers of rdma rely on whatever the backend: verb
// semantics (READ/WRITE round trips at any offset and length, WRITE never
// touching bytes outside its range, CAS and FAA results), validation (typed
// statuses and errors.Is sentinels for bad rkeys, bounds, alignment, lengths
// and batch sizes), completion-queue behaviour (posting order, send-queue
// depth, Wait and cancellation, Close), per-queue-pair counters, and
// linearizability of concurrent verbs from several queue pairs.
//
// It is used by rdma's own tests (MemDevice, with and without a cost model),
// by rdma/faulty's (a wrapper with no faults or delays only must be
// transparent), and is meant for rdma/tcp and any later backend.
package rdmatest
