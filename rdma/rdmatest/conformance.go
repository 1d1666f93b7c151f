package rdmatest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
)

// ConformanceCapacity is the memory-node capacity, in bytes, that
// RunConformance needs per device (its largest region is a little over
// rdma.MaxTransferBytes).
const ConformanceCapacity = 4 << 20

// RunConformance runs the behaviour every rdma.Device must have against the
// devices newDevice returns, as subtests of t. It is the test to call from any
// backend's package (MemDevice, rdma/tcp, rdma/faulty, a future libibverbs one).
//
// newDevice must return a fresh, empty device (no regions registered, no queue
// pairs open) on a memory node with at least ConformanceCapacity bytes free;
// it is called once per subtest, and may use t.Cleanup for backend resources
// (a server, a listener). RunConformance closes every device it gets, and some
// subtests close a device themselves first, so Close must tolerate being
// called twice (the second call's error is ignored).
//
// What is checked:
//   - regions: registration is idempotent by name, a different length is an
//     error, rkeys are distinct and non-zero, regions do not overlap, new
//     memory reads as zero, Regions lists them;
//   - verbs: READ/WRITE round trips at unaligned offsets and lengths up to
//     rdma.MaxTransferBytes; a WRITE never changes bytes outside its range,
//     even while atomics hit the neighbouring word; CAS success and failure;
//     FAA returns the prior value and wraps; a doorbell batch runs in order;
//   - validation: unknown rkey, out-of-bounds and overflowing ranges, ranges
//     past the end of a region whose length is not a multiple of 8,
//     misaligned atomics, each with its Status and errors.Is sentinel, and
//     the queue pair staying usable afterwards; zero-length and oversized
//     transfers, oversized batches and unknown opcodes rejected by Post
//     without running any work request of the batch;
//   - queue pairs: completions in posting order, Wait with a minimum, Wait
//     honouring its context, the send-queue depth (rdma.ErrSendQueueFull until
//     completions are polled), an abandoned Exec leaving the queue pair
//     usable, Post after Close (rdma.ErrQPClosed, also after the device is
//     closed), Close waking a waiter;
//   - counters: QueuePair.Stats per verb, failed CAS, bytes, doorbells and
//     errors, and, when the device has a Stats() rdma.Stats method, that it
//     sums its queue pairs;
//   - linearizability of concurrent READ/WRITE/CAS/FAA on shared words from
//     several queue pairs (RunLinearizability).
func RunConformance(t *testing.T, newDevice func(t *testing.T) rdma.Device) {
	open := func(t *testing.T) rdma.Device {
		t.Helper()
		dev := newDevice(t)
		t.Cleanup(func() { _ = dev.Close() })
		return dev
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, dev rdma.Device)
	}{
		{"Regions", testRegions},
		{"ReadWriteRoundTrip", testReadWriteRoundTrip},
		{"MaxTransfer", testMaxTransfer},
		{"WriteKeepsNeighbours", testWriteKeepsNeighbours},
		{"WriteKeepsConcurrentAtomics", testWriteKeepsConcurrentAtomics},
		{"CompareAndSwap", testCompareAndSwap},
		{"FetchAndAdd", testFetchAndAdd},
		{"BatchRunsInOrder", testBatchInOrder},
		{"FailedWorkRequestFlushesRestOfDoorbell", testFailureFlushesRest},
		{"Counters", testCounters},
		{"RemoteValidation", testRemoteValidation},
		{"PostValidation", testPostValidation},
		{"CompletionOrder", testCompletionOrder},
		{"WaitMin", testWaitMin},
		{"WaitHonoursContext", testWaitContext},
		{"SendQueueFull", testSendQueueFull},
		{"AbandonedExecKeepsQPUsable", testAbandonedExec},
		{"PostAfterClose", testPostAfterClose},
		{"CloseWakesWaiter", testCloseWakesWaiter},
		{"Linearizability", func(t *testing.T, dev rdma.Device) {
			RunLinearizability(t, dev, LinearizabilityConfig{})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func testRegions(t *testing.T, dev rdma.Device) {
	ctx := bg(t)
	a := Register(t, dev, "a", 100)
	b := Register(t, dev, "b", 4096)
	c := Register(t, dev, "c", 1)
	again, err := dev.RegisterRegion(ctx, "a", 100)
	if err != nil || again != a {
		t.Fatalf("re-registering %q with the same length = %+v, %v; want %+v, nil", "a", again, err, a)
	}
	if _, err := dev.RegisterRegion(ctx, "a", 200); err == nil {
		t.Fatalf("re-registering %q with another length succeeded", "a")
	}
	if _, err := dev.RegisterRegion(ctx, "zero", 0); err == nil {
		t.Fatalf("registering a zero-length region succeeded")
	}
	regions := []rdma.Region{a, b, c}
	for i, r := range regions {
		if r.RKey == 0 {
			t.Errorf("region %q has rkey 0", r.Name)
		}
		if r.Addr == 0 {
			t.Errorf("region %q has address 0", r.Name)
		}
		for _, o := range regions[i+1:] {
			if r.RKey == o.RKey {
				t.Errorf("regions %q and %q share rkey %#x", r.Name, o.Name, r.RKey)
			}
			if r.Addr < o.Addr+o.Length && o.Addr < r.Addr+r.Length {
				t.Errorf("regions %q [%#x,+%d) and %q [%#x,+%d) overlap", r.Name, r.Addr, r.Length, o.Name, o.Addr, o.Length)
			}
		}
	}
	listed, err := dev.Regions(ctx)
	if err != nil {
		t.Fatalf("Regions: %v", err)
	}
	byName := map[string]rdma.Region{}
	for _, r := range listed {
		byName[r.Name] = r
	}
	for _, r := range regions {
		if byName[r.Name] != r {
			t.Errorf("Regions lists %q as %+v, want %+v", r.Name, byName[r.Name], r)
		}
	}
	qp := NewQP(t, dev, rdma.QPConfig{})
	if got := Read(t, qp, b, b.Addr, int(b.Length)); !bytes.Equal(got, make([]byte, b.Length)) {
		t.Errorf("new region does not read as zero")
	}
}

func testReadWriteRoundTrip(t *testing.T, dev rdma.Device) {
	const size = 8192
	r := Register(t, dev, "rw", size)
	qp := NewQP(t, dev, rdma.QPConfig{})
	rng := rand.New(rand.NewPCG(1, 2))
	model := make([]byte, size)
	for i := range model {
		model[i] = byte(i*7 + 3)
	}
	Write(t, qp, r, r.Addr, model)
	offsets := []uint64{0, 1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 23, 1000, 4093}
	lengths := []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100, 1001, 3000}
	for _, off := range offsets {
		for _, n := range lengths {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			Write(t, qp, r, r.Addr+off, data)
			copy(model[off:], data)
			if got := Read(t, qp, r, r.Addr+off, n); !bytes.Equal(got, data) {
				t.Fatalf("READ after WRITE of %d bytes at offset %d returned different bytes", n, off)
			}
			// The bytes around the write (up to 16 on each side) are the model's.
			lo, hi := max(int(off)-16, 0), min(int(off)+n+16, size)
			if got := Read(t, qp, r, r.Addr+uint64(lo), hi-lo); !bytes.Equal(got, model[lo:hi]) {
				t.Fatalf("WRITE of %d bytes at offset %d changed bytes around it: got %x, want %x", n, off, got, model[lo:hi])
			}
		}
	}
	if got := Read(t, qp, r, r.Addr, size); !bytes.Equal(got, model) {
		t.Fatalf("region content differs from the model after all writes")
	}
}

func testMaxTransfer(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "big", rdma.MaxTransferBytes+16)
	qp := NewQP(t, dev, rdma.QPConfig{})
	data := make([]byte, rdma.MaxTransferBytes)
	for i := range data {
		data[i] = byte(i*31 + i>>8)
	}
	Write(t, qp, r, r.Addr+3, data)
	if got := Read(t, qp, r, r.Addr+3, rdma.MaxTransferBytes); !bytes.Equal(got, data) {
		t.Fatalf("READ of MaxTransferBytes at offset 3 differs from what was written")
	}
	edges := Read(t, qp, r, r.Addr, 3)
	tail := Read(t, qp, r, r.Addr+3+rdma.MaxTransferBytes, 13)
	if !bytes.Equal(edges, make([]byte, 3)) || !bytes.Equal(tail, make([]byte, 13)) {
		t.Fatalf("a MaxTransferBytes WRITE changed bytes outside its range: head %x tail %x", edges, tail)
	}
}

func testWriteKeepsNeighbours(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "neighbours", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	words := []uint64{0x1111111111111111, 0x2222222222222222, 0x3333333333333333, 0x4444444444444444}
	for i, w := range words {
		WriteWord(t, qp, r, r.Addr+uint64(i)*8, w)
	}
	cases := []struct{ off, n int }{{10, 3}, {8, 1}, {15, 1}, {6, 4}, {13, 6}, {9, 14}, {8, 8}, {7, 10}}
	for _, tc := range cases {
		for i, w := range words {
			WriteWord(t, qp, r, r.Addr+uint64(i)*8, w)
		}
		want := Read(t, qp, r, r.Addr, 32)
		data := bytes.Repeat([]byte{0xEE}, tc.n)
		Write(t, qp, r, r.Addr+uint64(tc.off), data)
		copy(want[tc.off:], data)
		if got := Read(t, qp, r, r.Addr, 32); !bytes.Equal(got, want) {
			t.Errorf("WRITE of %d bytes at offset %d: words are %x, want %x", tc.n, tc.off, got, want)
		}
	}
}

// testWriteKeepsConcurrentAtomics: a record's payload WRITE that partly covers
// the word next to a lock word must not lose concurrent atomics on that word.
func testWriteKeepsConcurrentAtomics(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "lockword", 64)
	writer := NewQP(t, dev, rdma.QPConfig{})
	adder := NewQP(t, dev, rdma.QPConfig{})
	const faas = 2000
	ctx := bg(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range faas {
			cs, err := rdma.Exec(ctx, adder, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
			if err == nil {
				err = rdma.FirstError(cs)
			}
			if err != nil {
				t.Errorf("FAA: %v", err)
				return
			}
		}
	}()
	// Bytes 3..12 cover the top five bytes of word 0 and three bytes of word 1.
	data := bytes.Repeat([]byte{0}, 10)
	for i := 0; i < faas; i++ {
		cs, err := rdma.Exec(ctx, writer, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 3, Local: data})
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			t.Errorf("WRITE: %v", err)
			break
		}
	}
	wg.Wait()
	if got := ReadWord(t, writer, r, r.Addr) & 0xFFFFFF; got != faas {
		t.Fatalf("low bytes of the word after %d FAA(1) and overlapping WRITEs of its high bytes = %d, want %d", faas, got, faas)
	}
}

func testCompareAndSwap(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "cas", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	addr := r.Addr + 16
	WriteWord(t, qp, r, addr, 5)
	if c := CAS(t, qp, r, addr, 5, 9); c.Value != 5 {
		t.Fatalf("successful CAS(5→9) returned %d, want the prior value 5", c.Value)
	}
	if got := ReadWord(t, qp, r, addr); got != 9 {
		t.Fatalf("word after successful CAS = %d, want 9", got)
	}
	if c := CAS(t, qp, r, addr, 5, 11); c.Value != 9 {
		t.Fatalf("failed CAS(5→11) returned %d, want the current value 9", c.Value)
	}
	if got := ReadWord(t, qp, r, addr); got != 9 {
		t.Fatalf("word after failed CAS = %d, want 9 (unchanged)", got)
	}
	if c := CAS(t, qp, r, addr, 9, math.MaxUint64); c.Value != 9 {
		t.Fatalf("CAS(9→max) returned %d", c.Value)
	}
	if got := ReadWord(t, qp, r, addr); got != math.MaxUint64 {
		t.Fatalf("word after CAS to MaxUint64 = %#x", got)
	}
	if got := ReadWord(t, qp, r, addr-8) | ReadWord(t, qp, r, addr+8); got != 0 {
		t.Fatalf("CAS changed a neighbouring word")
	}
	s := qp.Stats()
	if s.CAS != 3 || s.CASFailed != 1 {
		t.Fatalf("Stats CAS=%d CASFailed=%d, want 3 and 1", s.CAS, s.CASFailed)
	}
}

func testFetchAndAdd(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "faa", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	addr := r.Addr + 8
	if c := FAA(t, qp, r, addr, 3); c.Value != 0 {
		t.Fatalf("first FAA(3) returned %d, want 0", c.Value)
	}
	if c := FAA(t, qp, r, addr, 4); c.Value != 3 {
		t.Fatalf("second FAA(4) returned %d, want 3", c.Value)
	}
	if c := FAA(t, qp, r, addr, 0); c.Value != 7 {
		t.Fatalf("FAA(0) returned %d, want 7", c.Value)
	}
	WriteWord(t, qp, r, addr, math.MaxUint64-1)
	if c := FAA(t, qp, r, addr, 3); c.Value != math.MaxUint64-1 {
		t.Fatalf("FAA(3) on MaxUint64-1 returned %#x", c.Value)
	}
	if got := ReadWord(t, qp, r, addr); got != 1 {
		t.Fatalf("FAA did not wrap: word = %#x, want 1", got)
	}
	// Adding 2^64-1 is subtracting one.
	if c := FAA(t, qp, r, addr, math.MaxUint64); c.Value != 1 {
		t.Fatalf("FAA(-1) returned %d, want 1", c.Value)
	}
	if got := ReadWord(t, qp, r, addr); got != 0 {
		t.Fatalf("word after FAA(-1) = %d, want 0", got)
	}
	if got := ReadWord(t, qp, r, addr-8) | ReadWord(t, qp, r, addr+8); got != 0 {
		t.Fatalf("FAA changed a neighbouring word")
	}
}

func testBatchInOrder(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "batch", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	wrs := make([]rdma.WorkRequest, rdma.MaxBatch)
	for i := range wrs {
		wrs[i] = rdma.WorkRequest{ID: uint64(1000 + i), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	}
	for i, c := range MustExec(t, qp, wrs...) {
		if c.Value != uint64(i) {
			t.Fatalf("FAA %d of a batch returned %d, want %d (batch not run in order)", i, c.Value, i)
		}
	}
	// WRITE then READ then CAS then READ in one doorbell.
	got1, got2 := make([]byte, 8), make([]byte, 8)
	cs := MustExec(t, qp,
		rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 8, Local: putWord(make([]byte, 8), 42)},
		rdma.WorkRequest{ID: 2, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 8, Local: got1},
		rdma.WorkRequest{ID: 3, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 8, Compare: 42, Swap: 43},
		rdma.WorkRequest{ID: 4, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 8, Local: got2},
	)
	if getWord(got1) != 42 || cs[2].Value != 42 || getWord(got2) != 43 {
		t.Fatalf("batch WRITE 42, READ, CAS 42→43, READ saw %d, %d, %d; want 42, 42, 43", getWord(got1), cs[2].Value, getWord(got2))
	}
}

// testFailureFlushesRest: a work request that fails ends its doorbell, as on
// a reliable-connected QP entering the error state; the rest complete with
// StatusFlushed and are not applied, and the queue pair stays usable.
func testFailureFlushesRest(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "flush", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	faa := func(id uint64) rdma.WorkRequest {
		return rdma.WorkRequest{ID: id, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	}
	bad := rdma.WorkRequest{ID: 2, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 4, Add: 1} // misaligned
	cs, err := rdma.Exec(bg(t), qp, faa(1), bad, faa(3), faa(4))
	if err != nil {
		t.Fatal(err)
	}
	want := []rdma.Status{rdma.StatusSuccess, rdma.StatusRemoteInvalidRequest, rdma.StatusFlushed, rdma.StatusFlushed}
	for i, c := range cs {
		if c.Status != want[i] || c.ID != uint64(i+1) {
			t.Fatalf("completion %d = %+v, want status %s", i, c, want[i])
		}
	}
	if got := MustExec(t, qp, faa(5))[0].Value; got != 1 {
		t.Fatalf("word = %d after the doorbell, want 1: flushed work requests must not be applied", got)
	}
}

func testCounters(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "counters", 256)
	qp1 := NewQP(t, dev, rdma.QPConfig{})
	qp2 := NewQP(t, dev, rdma.QPConfig{})
	if s := qp1.Stats(); s != (rdma.Stats{}) {
		t.Fatalf("a new queue pair's Stats = %+v, want zero", s)
	}
	// qp1: one doorbell of 2 READs (10 and 20 bytes) and a WRITE (7 bytes),
	// then CAS ok, CAS failed, FAA, and a READ with a bad rkey (4 bytes).
	MustExec(t, qp1,
		rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 10)},
		rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 1, Local: make([]byte, 20)},
		rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 100, Local: make([]byte, 7)},
	)
	CAS(t, qp1, r, r.Addr+8, 0, 1)
	CAS(t, qp1, r, r.Addr+8, 0, 2)
	FAA(t, qp1, r, r.Addr+16, 1)
	bad := Exec(t, qp1, rdma.WorkRequest{Op: rdma.OpRead, RKey: unusedRKey(t, dev), RemoteAddr: r.Addr, Local: make([]byte, 4)})
	if bad[0].Status != rdma.StatusRemoteAccessError {
		t.Fatalf("READ with an unknown rkey: status %s", bad[0].Status)
	}
	want1 := rdma.Stats{Reads: 3, Writes: 1, CAS: 2, CASFailed: 1, FAA: 1, BytesRead: 30, BytesWritten: 7, Doorbells: 5, Errors: 1}
	if s := qp1.Stats(); s != want1 {
		t.Errorf("qp1 Stats = %+v\nwant           %+v", s, want1)
	}
	// Post-time rejections are not counted.
	if err := qp1.Post(rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr}); err == nil {
		t.Fatalf("zero-length READ was accepted")
	}
	if s := qp1.Stats(); s != want1 {
		t.Errorf("qp1 Stats after a rejected Post = %+v, want unchanged %+v", s, want1)
	}
	FAA(t, qp2, r, r.Addr+16, 1)
	Write(t, qp2, r, r.Addr+200, make([]byte, 16))
	want2 := rdma.Stats{Writes: 1, FAA: 1, BytesWritten: 16, Doorbells: 2}
	if s := qp2.Stats(); s != want2 {
		t.Errorf("qp2 Stats = %+v\nwant           %+v", s, want2)
	}
	if total, ok := DeviceStats(dev); ok {
		if want := want1.Add(want2); total != want {
			t.Errorf("device Stats = %+v\nwant              %+v (sum of its queue pairs)", total, want)
		}
	}
	if got := want1.Atomics(); got != 3 {
		t.Errorf("Atomics() = %d, want 3", got)
	}
}

// unusedRKey returns an rkey that names no region of dev.
func unusedRKey(t testing.TB, dev rdma.Device) uint32 {
	t.Helper()
	regions, err := dev.Regions(bg(t))
	if err != nil {
		t.Fatalf("Regions: %v", err)
	}
	used := map[uint32]bool{0: true}
	for _, r := range regions {
		used[r.RKey] = true
	}
	for k := uint32(0x5eed); ; k = k*2654435761 + 1 {
		if !used[k] {
			return k
		}
	}
}

func testRemoteValidation(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "val", 64)
	odd := Register(t, dev, "odd", 12) // length not a multiple of 8
	qp := NewQP(t, dev, rdma.QPConfig{})
	for i := range 8 {
		WriteWord(t, qp, r, r.Addr+uint64(i)*8, uint64(0xA0+i))
	}
	before := Read(t, qp, r, r.Addr, 64)
	badKey := unusedRKey(t, dev)
	rd := func(key uint32, addr uint64, n int) rdma.WorkRequest {
		return rdma.WorkRequest{Op: rdma.OpRead, RKey: key, RemoteAddr: addr, Local: make([]byte, n)}
	}
	wr := func(key uint32, addr uint64, n int) rdma.WorkRequest {
		return rdma.WorkRequest{Op: rdma.OpWrite, RKey: key, RemoteAddr: addr, Local: bytes.Repeat([]byte{0xFF}, n)}
	}
	cas := func(key uint32, addr uint64) rdma.WorkRequest {
		return rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: key, RemoteAddr: addr, Compare: 0xA0, Swap: 1}
	}
	faa := func(key uint32, addr uint64) rdma.WorkRequest {
		return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: key, RemoteAddr: addr, Add: 1}
	}
	const top = math.MaxUint64
	cases := []struct {
		name string
		wr   rdma.WorkRequest
		want rdma.Status
	}{
		{"read unknown rkey", rd(badKey, r.Addr, 8), rdma.StatusRemoteAccessError},
		{"read rkey zero", rd(0, r.Addr, 8), rdma.StatusRemoteAccessError},
		{"write unknown rkey", wr(badKey, r.Addr, 8), rdma.StatusRemoteAccessError},
		{"cas unknown rkey", cas(badKey, r.Addr), rdma.StatusRemoteAccessError},
		{"faa unknown rkey", faa(badKey, r.Addr), rdma.StatusRemoteAccessError},
		{"read other region's rkey", rd(odd.RKey, r.Addr, 8), rdma.StatusRemoteAccessError},
		{"read starts before region", rd(r.RKey, r.Addr-1, 8), rdma.StatusRemoteAccessError},
		{"read starts at end", rd(r.RKey, r.Addr+64, 1), rdma.StatusRemoteAccessError},
		{"read starts beyond end", rd(r.RKey, r.Addr+4096, 8), rdma.StatusRemoteAccessError},
		{"read ends beyond end", rd(r.RKey, r.Addr+60, 8), rdma.StatusRemoteAccessError},
		{"write ends beyond end", wr(r.RKey, r.Addr+57, 8), rdma.StatusRemoteAccessError},
		{"write starts before region", wr(r.RKey, r.Addr-4, 8), rdma.StatusRemoteAccessError},
		{"read addr+len overflows", rd(r.RKey, top-3, 8), rdma.StatusRemoteAccessError},
		{"write addr+len overflows", wr(r.RKey, top-7, 16), rdma.StatusRemoteAccessError},
		{"read at 2^64-1", rd(r.RKey, top, 1), rdma.StatusRemoteAccessError},
		{"cas at end", cas(r.RKey, r.Addr+64), rdma.StatusRemoteAccessError},
		{"faa before region", faa(r.RKey, r.Addr-8), rdma.StatusRemoteAccessError},
		{"cas near 2^64", cas(r.RKey, top-7), rdma.StatusRemoteAccessError},
		{"faa near 2^64", faa(r.RKey, top&^7), rdma.StatusRemoteAccessError},
		{"cas misaligned", cas(r.RKey, r.Addr+4), rdma.StatusRemoteInvalidRequest},
		{"faa misaligned", faa(r.RKey, r.Addr+1), rdma.StatusRemoteInvalidRequest},
		{"cas misaligned by 7", cas(r.RKey, r.Addr+15), rdma.StatusRemoteInvalidRequest},
		{"odd region read past length", rd(odd.RKey, odd.Addr+8, 8), rdma.StatusRemoteAccessError},
		{"odd region atomic past length", faa(odd.RKey, odd.Addr+8), rdma.StatusRemoteAccessError},
	}
	sentinel := map[rdma.Status]error{
		rdma.StatusRemoteAccessError:    rdma.ErrRemoteAccess,
		rdma.StatusRemoteInvalidRequest: rdma.ErrInvalidRequest,
	}
	errsBefore := qp.Stats().Errors
	for i, tc := range cases {
		tc.wr.ID = uint64(100 + i)
		c := Exec(t, qp, tc.wr)[0]
		if c.Status != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, c.Status, tc.want)
			continue
		}
		err := c.Err()
		if !errors.Is(err, sentinel[tc.want]) {
			t.Errorf("%s: error %v does not match %v", tc.name, err, sentinel[tc.want])
		}
		var ce *rdma.CompletionError
		if !errors.As(err, &ce) || ce.ID != tc.wr.ID || ce.Op != tc.wr.Op || ce.Status != tc.want {
			t.Errorf("%s: error %#v is not the CompletionError of the work request", tc.name, err)
		}
	}
	if got := qp.Stats().Errors - errsBefore; got != uint64(len(cases)) {
		t.Errorf("Stats.Errors grew by %d, want %d", got, len(cases))
	}
	if after := Read(t, qp, r, r.Addr, 64); !bytes.Equal(after, before) {
		t.Errorf("failed work requests changed memory:\n got %x\nwant %x", after, before)
	}
	// Valid accesses at the edges still work, and the queue pair is usable.
	if got := Read(t, qp, odd, odd.Addr+8, 4); !bytes.Equal(got, make([]byte, 4)) {
		t.Errorf("odd region's last 4 bytes = %x", got)
	}
	if c := FAA(t, qp, r, r.Addr+56, 1); c.Value != 0xA7 {
		t.Errorf("FAA on the last word returned %#x, want 0xa7", c.Value)
	}
	Write(t, qp, r, r.Addr+63, []byte{1})
}

func testPostValidation(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "post", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	okFAA := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	many := make([]rdma.WorkRequest, rdma.MaxBatch+1)
	for i := range many {
		many[i] = okFAA
	}
	mib := make([]byte, rdma.MaxTransferBytes)
	heavy := make([]rdma.WorkRequest, rdma.MaxBatchBytes/rdma.MaxTransferBytes+1)
	for i := range heavy {
		heavy[i] = rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: mib}
	}
	cases := []struct {
		name  string
		batch []rdma.WorkRequest
		want  error
	}{
		{"zero-length read", []rdma.WorkRequest{{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr}}, rdma.ErrLength},
		{"zero-length write", []rdma.WorkRequest{{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: []byte{}}}, rdma.ErrLength},
		{"read above MaxTransferBytes", []rdma.WorkRequest{{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, rdma.MaxTransferBytes+1)}}, rdma.ErrLength},
		{"unknown opcode", []rdma.WorkRequest{{Op: 99, RKey: r.RKey, RemoteAddr: r.Addr}}, rdma.ErrBadOpcode},
		{"opcode zero", []rdma.WorkRequest{{RKey: r.RKey, RemoteAddr: r.Addr}}, rdma.ErrBadOpcode},
		{"batch above MaxBatch", many, rdma.ErrBatchTooLarge},
		{"batch above MaxBatchBytes", heavy, rdma.ErrBatchTooLarge},
		{"valid FAA then zero-length read", []rdma.WorkRequest{okFAA, {Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr}}, rdma.ErrLength},
	}
	for _, tc := range cases {
		err := qp.Post(tc.batch...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Post = %v, want %v", tc.name, err, tc.want)
		}
		if err := rdma.ValidateBatch(tc.batch); !errors.Is(err, tc.want) {
			t.Errorf("%s: ValidateBatch = %v, want %v", tc.name, err, tc.want)
		}
		if n := qp.CQ().Outstanding(); n != 0 {
			t.Fatalf("%s: rejected Post left %d work requests outstanding", tc.name, n)
		}
	}
	if s := qp.Stats(); s != (rdma.Stats{}) {
		t.Errorf("rejected Posts were counted: %+v", s)
	}
	if got := ReadWord(t, qp, r, r.Addr); got != 0 {
		t.Errorf("a rejected batch ran: word = %d, want 0", got)
	}
	if got := ReadWord(t, qp, r, r.Addr+8); got != 0 {
		t.Errorf("a rejected batch ran: word = %d, want 0", got)
	}
	// The limits themselves are accepted.
	MustExec(t, qp, many[:rdma.MaxBatch]...)
	MustExec(t, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 1)})
}

func testCompletionOrder(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "order", 64)
	qp := NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 256})
	const n = 200
	bufs := make([][]byte, n)
	for i := range n {
		wr := rdma.WorkRequest{ID: uint64(i + 1), RKey: r.RKey, RemoteAddr: r.Addr + uint64(i%8)*8}
		switch i % 4 {
		case 0:
			wr.Op, wr.Add = rdma.OpFetchAndAdd, 1
		case 1:
			bufs[i] = make([]byte, 8)
			wr.Op, wr.Local = rdma.OpRead, bufs[i]
		case 2:
			wr.Op, wr.Local = rdma.OpWrite, putWord(make([]byte, 8), uint64(i))
		case 3:
			wr.Op, wr.Compare, wr.Swap = rdma.OpCompareAndSwap, uint64(i-1), uint64(i)
		}
		if i%3 == 0 {
			wr.RKey = 0 // an error completion must keep its place too
		}
		if err := qp.Post(wr); err != nil {
			t.Fatalf("Post %d: %v", i, err)
		}
	}
	if got := qp.CQ().Outstanding(); got != n {
		t.Fatalf("Outstanding = %d, want %d", got, n)
	}
	dst := make([]rdma.Completion, 64)
	next := uint64(1)
	for next <= n {
		k, err := qp.CQ().Wait(bg(t), dst, 1)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		for _, c := range dst[:k] {
			if c.ID != next {
				t.Fatalf("completion for work request %d arrived where %d was due", c.ID, next)
			}
			next++
		}
	}
	if got := qp.CQ().Outstanding(); got != 0 {
		t.Fatalf("Outstanding after polling everything = %d", got)
	}
	if k := qp.CQ().Poll(dst); k != 0 {
		t.Fatalf("Poll on an empty queue returned %d completions", k)
	}
}

func testWaitMin(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "waitmin", 64)
	qp := NewQP(t, dev, rdma.QPConfig{})
	for i := range 10 {
		if err := qp.Post(rdma.WorkRequest{ID: uint64(i), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]rdma.Completion, 16)
	n, err := qp.CQ().Wait(bg(t), dst[:4], 3)
	if err != nil || n < 3 || n > 4 {
		t.Fatalf("Wait(dst[:4], min 3) = %d, %v; want 3..4 completions", n, err)
	}
	got := n
	// A min above len(dst) is capped at len(dst).
	n, err = qp.CQ().Wait(bg(t), dst[got:got+2], 5)
	if err != nil || n != 2 {
		t.Fatalf("Wait(dst[:2], min 5) = %d, %v; want 2", n, err)
	}
	got += n
	n, err = qp.CQ().Wait(bg(t), dst[got:], 10-got)
	if err != nil || got+n != 10 {
		t.Fatalf("Wait for the rest = %d, %v; want %d", n, err, 10-got)
	}
	for i, c := range dst[:10] {
		if c.ID != uint64(i) || c.Value != uint64(i) {
			t.Fatalf("completion %d = (id %d, value %d)", i, c.ID, c.Value)
		}
	}
}

func testWaitContext(t *testing.T, dev rdma.Device) {
	qp := NewQP(t, dev, rdma.QPConfig{})
	dst := make([]rdma.Completion, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	n, err := qp.CQ().Wait(ctx, dst, 1)
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty queue = %d, %v; want 0, deadline exceeded", n, err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("Wait returned %v before its deadline", deadline.Sub(now))
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if n, err := qp.CQ().Wait(cctx, dst, 1); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %d, %v", n, err)
	}
	// min 0 never blocks.
	if n, err := qp.CQ().Wait(context.Background(), dst, 0); n != 0 || err != nil {
		t.Fatalf("Wait(min 0) = %d, %v", n, err)
	}
}

func testSendQueueFull(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "sq", 64)
	qp := NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 4})
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	if err := qp.Post(faa, faa, faa); err != nil {
		t.Fatal(err)
	}
	if err := qp.Post(faa, faa); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Fatalf("posting 2 with 3 of 4 slots taken = %v, want ErrSendQueueFull", err)
	}
	if err := qp.Post(faa); err != nil {
		t.Fatalf("posting into the last slot: %v", err)
	}
	if err := qp.Post(faa); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Fatalf("posting with every slot taken = %v, want ErrSendQueueFull", err)
	}
	// Completions that have arrived but are not polled still hold their slots.
	time.Sleep(10 * time.Millisecond)
	if err := qp.Post(faa); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Fatalf("posting before polling = %v, want ErrSendQueueFull", err)
	}
	dst := make([]rdma.Completion, 4)
	if n, err := qp.CQ().Wait(bg(t), dst, 2); err != nil || n < 2 {
		t.Fatalf("Wait: %d, %v", n, err)
	}
	rest := 4 - qp.CQ().Outstanding()
	if rest < 2 {
		t.Fatalf("polling did not free slots: %d outstanding", qp.CQ().Outstanding())
	}
	batch := make([]rdma.WorkRequest, rest)
	for i := range batch {
		batch[i] = faa
	}
	if err := qp.Post(batch...); err != nil {
		t.Fatalf("posting %d after polling: %v", rest, err)
	}
	for qp.CQ().Outstanding() > 0 {
		if _, err := qp.CQ().Wait(bg(t), dst, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := ReadWord(t, qp, r, r.Addr); got != uint64(4+rest) {
		t.Fatalf("word = %d, want %d: rejected posts must not run", got, 4+rest)
	}
}

func testAbandonedExec(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "abandon", 64)
	qp := NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 8})
	faa := func(id uint64) rdma.WorkRequest {
		return rdma.WorkRequest{ID: id, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// More rounds than slots: the slots of abandoned work requests are freed
	// when their late completions arrive (at once on MemDevice, after a round
	// trip on a remote backend), so a Post may briefly find the queue full.
	posted := uint64(0)
	deadline := time.Now().Add(opTimeout)
	for round := 0; round < 20; {
		cs, err := rdma.Exec(ctx, qp, faa(uint64(2*round)), faa(uint64(2*round+1)))
		if errors.Is(err, rdma.ErrSendQueueFull) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Exec with a cancelled context: %v", err)
		}
		if err == nil && len(cs) != 2 {
			t.Fatalf("Exec returned %d completions and no error", len(cs))
		}
		posted += 2
		round++
	}
	for qp.CQ().Outstanding() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d send-queue slots of abandoned work requests were never freed", qp.CQ().Outstanding())
		}
		time.Sleep(100 * time.Microsecond)
	}
	// Every abandoned batch was posted, so it runs; the next Exec sees only its
	// own completion.
	c := FAA(t, qp, r, r.Addr, 1)
	if c.Value != posted {
		t.Fatalf("FAA after %d abandoned FAAs returned %d, want %d", posted, c.Value, posted)
	}
	for range 5 {
		cs := MustExec(t, qp, faa(7777), faa(8888))
		if cs[0].ID != 7777 || cs[1].ID != 8888 {
			t.Fatalf("Exec after abandoned ones got completions %d, %d", cs[0].ID, cs[1].ID)
		}
	}
	if n := qp.CQ().Outstanding(); n != 0 {
		t.Fatalf("Outstanding = %d after everything completed", n)
	}
}

func testPostAfterClose(t *testing.T, dev rdma.Device) {
	r := Register(t, dev, "closed", 64)
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	MustExec(t, qp, faa)
	if err := qp.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := qp.Post(faa); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Post after Close = %v, want ErrQPClosed", err)
	}
	if _, err := rdma.Exec(bg(t), qp, faa); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Exec after Close = %v, want ErrQPClosed", err)
	}
	// Other queue pairs are unaffected.
	other := NewQP(t, dev, rdma.QPConfig{})
	if c := FAA(t, other, r, r.Addr, 1); c.Value != 1 {
		t.Fatalf("FAA on another queue pair returned %d, want 1", c.Value)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("device Close: %v", err)
	}
	if err := other.Post(faa); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Post after the device was closed = %v, want ErrQPClosed", err)
	}
	if qp, err := dev.CreateQP(rdma.QPConfig{}); err == nil {
		qp.Close()
		t.Fatalf("CreateQP on a closed device succeeded")
	}
	if _, err := dev.RegisterRegion(bg(t), "after-close", 8); err == nil {
		t.Fatalf("RegisterRegion on a closed device succeeded")
	}
}

func testCloseWakesWaiter(t *testing.T, dev rdma.Device) {
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := qp.CQ().Wait(context.Background(), make([]rdma.Completion, 1), 1)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	qp.Close()
	select {
	case err := <-done:
		if !errors.Is(err, rdma.ErrQPClosed) {
			t.Fatalf("Wait woken by Close returned %v, want ErrQPClosed", err)
		}
	case <-time.After(opTimeout):
		t.Fatalf("Close did not wake a goroutine blocked in Wait")
	}
}
