package rdma_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

func newNIC(t *testing.T, m rdma.CostModel) *rdma.NIC {
	t.Helper()
	nic, err := rdma.NewNIC(m)
	if err != nil {
		t.Fatalf("NewNIC: %v", err)
	}
	return nic
}

// findAddr returns the first 8-byte aligned address after addr whose atomic
// slot is addr's (same) or another one (!same).
func findAddr(m rdma.CostModel, addr uint64, same bool) uint64 {
	for a := addr + 8; ; a += 8 {
		if (m.AtomicSlot(a) == m.AtomicSlot(addr)) == same {
			return a
		}
	}
}

func TestNICSerialisesAtomicsOnOneSlot(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.AtomicEngineOccupancy = 0 // the per-slot rule alone (the engine: TestNICAtomicEngineLimit)
	nic := newNIC(t, m)
	const t0 = int64(1_000_000)
	addr := uint64(1 << 20)
	occ, lat := int64(m.AtomicSlotOccupancy), int64(m.AtomicLatency)
	d1 := nic.Schedule(t0, rdma.OpCompareAndSwap, addr, 0)
	d2 := nic.Schedule(t0, rdma.OpCompareAndSwap, addr, 0)
	d3 := nic.Schedule(t0, rdma.OpFetchAndAdd, addr, 0)
	if d1 != t0+lat {
		t.Fatalf("first CAS completes at +%d ns, want +%d (AtomicLatency)", d1-t0, lat)
	}
	if d2-d1 != occ || d3-d2 != occ {
		t.Fatalf("atomics on one word issued together complete %d and %d ns apart, want AtomicSlotOccupancy = %d", d2-d1, d3-d2, occ)
	}
	// A different address that hashes to the same slot queues too.
	twin := findAddr(m, addr, true)
	if d4 := nic.Schedule(t0, rdma.OpCompareAndSwap, twin, 0); d4-d3 != occ {
		t.Fatalf("CAS on %#x (same slot as %#x) completes %d ns after the previous one, want %d", twin, addr, d4-d3, occ)
	}
	// Another slot does not.
	other := findAddr(m, addr, false)
	if d := nic.Schedule(t0, rdma.OpCompareAndSwap, other, 0); d != t0+lat {
		t.Fatalf("CAS on another slot completes at +%d ns, want +%d (no queueing)", d-t0, lat)
	}
	// READ and WRITE never queue behind atomics.
	if d := nic.Schedule(t0, rdma.OpRead, addr, 12000); d != t0+int64(m.ReadLatency)+1000 {
		t.Fatalf("12000-byte READ completes at +%d ns, want ReadLatency + 1 µs of wire time", d-t0)
	}
	if d := nic.Schedule(t0, rdma.OpWrite, addr, 8); d != t0+int64(m.WriteLatency) {
		t.Fatalf("8-byte WRITE completes at +%d ns, want +%d", d-t0, int64(m.WriteLatency))
	}
	// Once the slot is free again, an atomic does not wait.
	later := d3 + 10*lat
	if d := nic.Schedule(later, rdma.OpCompareAndSwap, addr, 0); d != later+lat {
		t.Fatalf("CAS on an idle slot completes at +%d ns, want +%d", d-later, lat)
	}
}

func TestNICScheduleBatch(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.AtomicEngineOccupancy = 0
	nic := newNIC(t, m)
	const t0 = int64(5_000_000)
	wrs := []rdma.WorkRequest{
		{Op: rdma.OpRead, RemoteAddr: 1 << 20, Local: make([]byte, 8)},
		{Op: rdma.OpRead, RemoteAddr: 1 << 20, Local: make([]byte, 8)},
		{Op: rdma.OpCompareAndSwap, RemoteAddr: 1 << 20},
		{Op: rdma.OpCompareAndSwap, RemoteAddr: 1 << 20},
	}
	done := make([]int64, len(wrs))
	nic.ScheduleBatch(t0, wrs, done)
	issue, occ := int64(m.IssueCost), int64(m.AtomicSlotOccupancy)
	if done[0] != t0+int64(m.ReadLatency) || done[1] != done[0]+issue {
		t.Fatalf("READs of a batch complete at +%d and +%d ns, want one IssueCost apart", done[0]-t0, done[1]-t0)
	}
	if want := t0 + 2*issue + int64(m.AtomicLatency); done[2] != want {
		t.Fatalf("first CAS of the batch at +%d, want +%d", done[2]-t0, want-t0)
	}
	if done[3]-done[2] != occ {
		t.Fatalf("second CAS on the same word %d ns after the first, want %d", done[3]-done[2], occ)
	}
}

// The NIC-wide atomic engine caps the atomic rate whatever the slots: N
// atomics on N distinct slots issued together take at least N × occupancy,
// and READ/WRITE neither wait for it nor delay it.
func TestNICAtomicEngineLimit(t *testing.T) {
	m := rdma.DefaultCostModel()
	if m.AtomicEngineOccupancy <= 0 {
		t.Fatalf("default AtomicEngineOccupancy = %v, want a NIC-wide limit", m.AtomicEngineOccupancy)
	}
	// 1 / occupancy must stay near the tutorial's measured ≈ 1.81 M atomics/s.
	if rate := float64(time.Second) / float64(m.AtomicEngineOccupancy); rate < 1.8e6 || rate > 2.5e6 {
		t.Errorf("default engine rate %.2g atomics/s, want 1.8–2.5 M/s", rate)
	}
	nic := newNIC(t, m)
	occ, lat := int64(m.AtomicEngineOccupancy), int64(m.AtomicLatency)
	const t0 = int64(1_000_000)
	const n = 64
	addrs := []uint64{1 << 20}
	slots := map[int]bool{m.AtomicSlot(addrs[0]): true}
	for a := addrs[0] + 8; len(addrs) < n; a += 8 {
		if !slots[m.AtomicSlot(a)] {
			slots[m.AtomicSlot(a)] = true
			addrs = append(addrs, a)
		}
	}
	first, last := int64(-1), int64(0)
	for i, a := range addrs {
		op := rdma.OpCompareAndSwap
		if i%2 == 1 {
			op = rdma.OpFetchAndAdd
		}
		d := nic.Schedule(t0, op, a, 8)
		if first < 0 {
			first = d
		}
		if want := t0 + int64(i)*occ + lat; d != want {
			t.Fatalf("atomic %d (distinct slot) completes at +%d ns, want +%d (engine FIFO)", i, d-t0, want-t0)
		}
		last = max(last, d)
	}
	if span := last - t0; span < n*occ {
		t.Fatalf("%d atomics on distinct slots completed within %d ns, want ≥ %d (N × engine occupancy)", n, span, n*occ)
	}
	if rate := float64(n-1) / float64(last-first) * 1e9; rate > float64(time.Second)/float64(occ)*1.0001 {
		t.Fatalf("atomic completion rate %.3g/s exceeds the engine's %.3g/s", rate, float64(time.Second)/float64(occ))
	}
	// READ and WRITE issued while the engine is backlogged are not delayed...
	if d := nic.Schedule(t0, rdma.OpRead, addrs[3], 8); d != t0+int64(m.ReadLatency) {
		t.Fatalf("READ behind %d queued atomics completes at +%d ns, want +%d", n, d-t0, int64(m.ReadLatency))
	}
	if d := nic.Schedule(t0, rdma.OpWrite, addrs[5], 12000); d != t0+int64(m.WriteLatency)+1000 {
		t.Fatalf("WRITE behind %d queued atomics completes at +%d ns, want WriteLatency + 1 µs wire", n, d-t0)
	}
	// ... and do not occupy the engine: the next atomic follows the last one.
	if d := nic.Schedule(t0, rdma.OpCompareAndSwap, addrs[0]+1<<30, 8); d != last+occ {
		t.Fatalf("atomic after READ/WRITE completes %d ns after the previous atomic, want %d", d-last, occ)
	}
	// A slot wait does not hold the engine: an atomic stuck behind a busy
	// slot lets an atomic on another slot through at the engine's pace.
	m2 := m
	m2.AtomicSlotOccupancy = 10 * time.Microsecond
	nic2 := newNIC(t, m2)
	a := uint64(1 << 20)
	nic2.Schedule(t0, rdma.OpCompareAndSwap, a, 8)
	if d := nic2.Schedule(t0, rdma.OpCompareAndSwap, a, 8); d != t0+int64(m2.AtomicSlotOccupancy)+lat {
		t.Fatalf("second atomic on a slot busy 10 µs completes at +%d, want +%d", d-t0, int64(m2.AtomicSlotOccupancy)+lat)
	}
	other := findAddr(m2, a, false)
	if d := nic2.Schedule(t0, rdma.OpCompareAndSwap, other, 8); d != t0+2*occ+lat {
		t.Fatalf("atomic on a free slot behind a slot wait completes at +%d, want +%d (engine only)", d-t0, 2*occ+lat)
	}
	// Once idle, the engine does not delay an atomic.
	later := last + 1_000_000
	if d := nic.Schedule(later, rdma.OpFetchAndAdd, addrs[7], 8); d != later+lat {
		t.Fatalf("atomic on an idle NIC completes at +%d, want +%d", d-later, lat)
	}
}

func TestAtomicSlot(t *testing.T) {
	for _, slots := range []int{1, 7, 512, 1 << 20} {
		m := rdma.DefaultCostModel()
		m.AtomicSlots = slots
		for _, a := range []uint64{0, 8, 1 << 20, 1<<63 + 8, ^uint64(7)} {
			if s := m.AtomicSlot(a); s < 0 || s >= slots {
				t.Errorf("AtomicSlot(%#x) with %d slots = %d", a, slots, s)
			}
		}
	}
	m := rdma.DefaultCostModel()
	// Sequential words spread over the table: a dense array of lock words must
	// not collapse onto a few slots.
	for _, base := range []uint64{1 << 20, 1<<20 + 4096*7, 1 << 40} {
		seen := map[int]bool{}
		for i := range uint64(512) {
			seen[m.AtomicSlot(base+8*i)] = true
		}
		if len(seen) < 300 {
			t.Errorf("512 consecutive words from %#x hit only %d distinct slots, want ≥ 300", base, len(seen))
		}
	}
	// Bytes of one word share its slot.
	if m.AtomicSlot(1<<20) != m.AtomicSlot(1<<20+7) {
		t.Errorf("bytes of one word map to different slots")
	}
}

func TestCostModelValidate(t *testing.T) {
	if err := rdma.DefaultCostModel().Validate(); err != nil {
		t.Fatalf("default model: %v", err)
	}
	bad := rdma.DefaultCostModel()
	bad.ReadLatency = -time.Nanosecond
	bad.IssueCost = 2 * time.Second
	bad.AtomicSlots = 0
	bad.BytesPerMicro = 0
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid model validated")
	}
	for _, name := range []string{"ReadLatency", "IssueCost", "AtomicSlots", "BytesPerMicro"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Validate error does not mention %s: %v", name, err)
		}
	}
	if u, ok := err.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != 4 {
		t.Errorf("Validate should join one error per problem (4), got %v", err)
	}
	if _, err := rdma.NewNIC(bad); err == nil {
		t.Error("NewNIC accepted an invalid model")
	}
	if _, err := rdma.NewMemDevice(rdma.NewMemory(1<<20), rdma.MemConfig{Cost: &bad}); err == nil {
		t.Error("NewMemDevice accepted an invalid model")
	}
	if err := (rdma.CostModel{}).Validate(); err == nil {
		t.Error("the zero CostModel validated (it has no slots)")
	}
}

// With a cost model, a MemDevice's completions arrive no earlier than the
// model says. Only lower bounds are asserted: a loaded machine is slower.
func TestMemDeviceCostModelDelaysCompletions(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.ReadLatency = 2 * time.Millisecond
	m.WriteLatency = 3 * time.Millisecond
	m.AtomicLatency = 4 * time.Millisecond
	m.AtomicSlotOccupancy = 5 * time.Millisecond
	dev := newMemDevice(t, 1<<20, &m)
	r := rdmatest.Register(t, dev, "cost", 4096)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	measure := func(wrs ...rdma.WorkRequest) time.Duration {
		t.Helper()
		start := rdma.Now()
		rdmatest.MustExec(t, qp, wrs...)
		return time.Duration(rdma.Now() - start)
	}
	read := rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}
	write := rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}
	cas := rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr}
	if d := measure(read); d < m.ReadLatency {
		t.Errorf("READ completed after %v, want ≥ %v", d, m.ReadLatency)
	}
	if d := measure(write); d < m.WriteLatency {
		t.Errorf("WRITE completed after %v, want ≥ %v", d, m.WriteLatency)
	}
	if d := measure(cas); d < m.AtomicLatency {
		t.Errorf("CAS completed after %v, want ≥ %v", d, m.AtomicLatency)
	}
	// Two CAS on one word in one doorbell: the second waits for the slot.
	if d, want := measure(cas, cas), m.AtomicSlotOccupancy+m.AtomicLatency; d < want {
		t.Errorf("two CAS on one word completed after %v, want ≥ %v (slot occupancy + latency)", d, want)
	}
	// Atomics from two queue pairs on the same slot serialise too.
	qp2 := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	start := rdma.Now()
	if err := qp.Post(cas); err != nil {
		t.Fatal(err)
	}
	if err := qp2.Post(cas); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	buf := make([]rdma.Completion, 1)
	if _, err := qp2.CQ().Wait(ctx, buf, 1); err != nil {
		t.Fatal(err)
	}
	if d, want := time.Duration(rdma.Now()-start), m.AtomicSlotOccupancy+m.AtomicLatency; d < want {
		t.Errorf("CAS queued behind another QP's CAS on the same word completed after %v, want ≥ %v", d, want)
	}
	if _, err := qp.CQ().Wait(ctx, buf, 1); err != nil {
		t.Fatal(err)
	}
	if s := qp.Stats(); s.Errors != 0 || s.CAS != 4 {
		t.Errorf("Stats = %+v", s)
	}
}
