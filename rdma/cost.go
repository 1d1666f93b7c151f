package rdma

import (
	"errors"
	"fmt"
	"time"
)

// CostModel describes how long verbs take on an RDMA NIC and how the NIC
// serialises atomics. It is off unless a backend is given one. The same model
// drives the in-process emulation (on the wall clock) and the simulator (on a
// virtual clock), through NIC.
//
// Where the default values come from:
//   - READ/WRITE round trip ≈ 2 µs for small messages on ConnectX-5/6 class NICs
//     (Kalia et al., "Design Guidelines for High Performance RDMA Systems",
//     USENIX ATC 2016; FaRM and FORD report the same order), plus a wire cost per
//     byte at ≈ 12 GB/s (100 Gb/s links).
//   - Atomics round trip ≈ 2.5 µs, a little above READ because the responder
//     NIC does a PCIe read-modify-write.
//   - Atomics to the same slot of the NIC's atomic lock table are serialised:
//     ConnectX NICs hash the target address into a table of 512 slots (the figure
//     the AURA tutorial and the CREST/Motor line of work use), so even different
//     addresses contend when they collide. A slot is busy ≈ 0.4 µs per atomic,
//     which caps one slot near 2.5 M atomics/s — the same-address atomic rate
//     Kalia et al. measured.
//   - Besides the per-slot serialisation, every atomic passes through the
//     NIC's atomic engine (the responder's PCIe read-modify-write pipeline),
//     which has a NIC-wide throughput: each atomic occupies it for
//     AtomicEngineOccupancy = 500 ns, a ceiling of 2 M atomics/s whatever the
//     addresses. The figure is the AURA tutorial's measurement (its R7/v14
//     baseline, 4 CNs on CloudLab with remote atomics as the bottleneck):
//     134 K txn/s × 13.51 atomics/txn ≈ 1.81 M atomics/s sustained, i.e. the
//     engine ≈ 90% busy. Without this limit the model lets a NIC absorb any
//     number of atomics on distinct slots, and MN-CAS locking would cost
//     nothing but latency. With this default a single hot slot (2.5 M/s) is
//     no longer the binding limit on its own: skew still adds queueing
//     latency on the slot, but the engine caps the aggregate first.
//   - A doorbell batch pays one round trip; each further work request in it adds
//     an issue cost of ≈ 0.1 µs (the NIC's per-WR processing).
type CostModel struct {
	// ReadLatency is the round trip of a small READ. Default 2 µs.
	ReadLatency time.Duration
	// WriteLatency is the round trip of a small WRITE. Default 2 µs.
	WriteLatency time.Duration
	// AtomicLatency is the round trip of a CAS or FAA, excluding time spent
	// waiting for its slot. Default 2.5 µs.
	AtomicLatency time.Duration
	// AtomicSlotOccupancy is how long an atomic holds its lock-table slot.
	// Default 400 ns.
	AtomicSlotOccupancy time.Duration
	// AtomicSlots is the size of the NIC's atomic lock table. Default 512.
	AtomicSlots int
	// AtomicEngineOccupancy is how long an atomic occupies the NIC-wide
	// atomic engine: the NIC executes at most 1/AtomicEngineOccupancy atomics
	// per second over all slots. Zero means no NIC-wide limit. Default 500 ns
	// (2 M atomics/s).
	AtomicEngineOccupancy time.Duration
	// BytesPerMicro is the wire bandwidth for READ/WRITE payloads, in bytes per
	// microsecond. Default 12,000 (≈ 100 Gb/s).
	BytesPerMicro int
	// IssueCost is the NIC time each work request after the first adds to a
	// doorbell batch. Default 100 ns.
	IssueCost time.Duration
}

// DefaultCostModel returns the model with the defaults documented on CostModel.
func DefaultCostModel() CostModel {
	return CostModel{
		ReadLatency:         2 * time.Microsecond,
		WriteLatency:        2 * time.Microsecond,
		AtomicLatency:       2500 * time.Nanosecond,
		AtomicSlotOccupancy: 400 * time.Nanosecond,
		AtomicSlots:         512,
		BytesPerMicro:       12000,
		IssueCost:           100 * time.Nanosecond,

		AtomicEngineOccupancy: 500 * time.Nanosecond,
	}
}

// Validate reports every problem with the model at once.
func (m CostModel) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReadLatency", m.ReadLatency}, {"WriteLatency", m.WriteLatency}, {"AtomicLatency", m.AtomicLatency},
		{"AtomicSlotOccupancy", m.AtomicSlotOccupancy}, {"AtomicEngineOccupancy", m.AtomicEngineOccupancy},
		{"IssueCost", m.IssueCost}} {
		if d.v < 0 || d.v > time.Second {
			errs = append(errs, fmt.Errorf("cost model: %s = %v, want 0..1s", d.name, d.v))
		}
	}
	if m.AtomicSlots < 1 || m.AtomicSlots > 1<<20 {
		errs = append(errs, fmt.Errorf("cost model: AtomicSlots = %d, want 1..1048576", m.AtomicSlots))
	}
	if m.BytesPerMicro < 1 {
		errs = append(errs, fmt.Errorf("cost model: BytesPerMicro = %d, want ≥ 1", m.BytesPerMicro))
	}
	return errors.Join(errs...)
}

// AtomicSlot returns the lock-table slot of an 8-byte address: a multiplicative
// hash of the word index, so that neighbouring words spread over the table while
// unrelated hot words may still collide, as on the NIC.
func (m CostModel) AtomicSlot(addr uint64) int {
	h := (addr / AtomicSize) * 0x9E3779B97F4A7C15
	return int((h >> 32) % uint64(m.AtomicSlots))
}

// NIC applies a CostModel to a stream of work requests: it keeps, per atomic
// slot, the time at which the slot becomes free, and the time at which the
// NIC-wide atomic engine becomes free. It is a pure state machine over
// caller-supplied times (nanoseconds on any clock) and is not safe for
// concurrent use.
type NIC struct {
	model      CostModel
	slotFree   []int64
	engineFree int64
}

// NewNIC returns a NIC for a validated model.
func NewNIC(model CostModel) (*NIC, error) {
	if err := model.Validate(); err != nil {
		return nil, err
	}
	return &NIC{model: model, slotFree: make([]int64, model.AtomicSlots)}, nil
}

// Model returns the NIC's cost model.
func (n *NIC) Model() CostModel { return n.model }

// Schedule returns the time at which a work request issued at nowNanos
// completes. An atomic first takes its turn on the NIC-wide atomic engine
// (in the order Schedule is called, FIFO), then queues behind earlier atomics
// on its slot; a wait for a busy slot does not hold the engine up for atomics
// on other slots. READ and WRITE use neither.
func (n *NIC) Schedule(nowNanos int64, op Opcode, addr uint64, length int) int64 {
	m := &n.model
	switch op {
	case OpRead, OpWrite:
		lat := m.ReadLatency
		if op == OpWrite {
			lat = m.WriteLatency
		}
		wire := int64(length) * 1000 / int64(m.BytesPerMicro)
		return nowNanos + int64(lat) + wire
	case OpCompareAndSwap, OpFetchAndAdd:
		s := m.AtomicSlot(addr)
		start := nowNanos
		if m.AtomicEngineOccupancy > 0 {
			start = max(start, n.engineFree)
			n.engineFree = start + int64(m.AtomicEngineOccupancy)
		}
		start = max(start, n.slotFree[s])
		n.slotFree[s] = start + int64(m.AtomicSlotOccupancy)
		return start + int64(m.AtomicLatency)
	}
	return nowNanos
}

// ScheduleBatch schedules a doorbell batch issued at nowNanos and returns each
// work request's completion time; work request i is issued i×IssueCost later.
func (n *NIC) ScheduleBatch(nowNanos int64, wrs []WorkRequest, done []int64) {
	for i := range wrs {
		t := nowNanos + int64(i)*int64(n.model.IssueCost)
		done[i] = n.Schedule(t, wrs[i].Op, wrs[i].RemoteAddr, len(wrs[i].Local))
	}
}
