package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

func TestVerbs(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "records", 4096)
	qp := mustQP(t, d, 0)

	// WRITE then READ back, including an unaligned span.
	msg := []byte("hello, disaggregated memory!")
	if c := exec1(t, qp, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 3, Local: msg}); c.Err() != nil || c.ID != 1 || c.Op != rdma.OpWrite {
		t.Fatalf("write: %+v %v", c, c.Err())
	}
	got := make([]byte, len(msg))
	if c := exec1(t, qp, rdma.WorkRequest{ID: 2, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 3, Local: got}); c.Err() != nil || c.ID != 2 {
		t.Fatalf("read: %+v %v", c, c.Err())
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read %q, want %q", got, msg)
	}
	// The server's memory holds the bytes too.
	check := make([]byte, len(msg))
	ts.mem.Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 3, Local: check})
	if !bytes.Equal(check, msg) {
		t.Fatalf("memory holds %q", check)
	}

	lock := r.Addr + 1024
	// CAS success: returns the prior value equal to Compare.
	c := exec1(t, qp, rdma.WorkRequest{ID: 3, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: lock, Compare: 0, Swap: 42})
	if c.Err() != nil || c.Value != 0 {
		t.Fatalf("cas success: %+v", c)
	}
	// CAS failure: returns the current value, leaves memory alone.
	c = exec1(t, qp, rdma.WorkRequest{ID: 4, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: lock, Compare: 7, Swap: 99})
	if c.Err() != nil || c.Value != 42 {
		t.Fatalf("cas failure: %+v", c)
	}
	// FAA returns prior values and wraps.
	c = exec1(t, qp, rdma.WorkRequest{ID: 5, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: lock, Add: 8})
	if c.Err() != nil || c.Value != 42 {
		t.Fatalf("faa: %+v", c)
	}
	c = exec1(t, qp, rdma.WorkRequest{ID: 6, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: lock, Add: ^uint64(0)})
	if c.Err() != nil || c.Value != 50 {
		t.Fatalf("faa 2: %+v", c)
	}
	word := make([]byte, 8)
	exec1(t, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: lock, Local: word})
	if v := binary.LittleEndian.Uint64(word); v != 49 {
		t.Fatalf("lock word = %d, want 49", v)
	}

	want := rdma.Stats{Reads: 2, Writes: 1, CAS: 2, CASFailed: 1, FAA: 2, BytesRead: uint64(len(msg)) + 8,
		BytesWritten: uint64(len(msg)), Doorbells: 7}
	if s := qp.Stats(); s != want {
		t.Fatalf("qp stats %+v, want %+v", s, want)
	}
	if s := d.Stats(); s != want {
		t.Fatalf("device stats %+v, want %+v", s, want)
	}
	if s := ts.server().Stats(); s.Verbs() != want.Verbs() || s.CASFailed != 1 {
		t.Fatalf("server stats %+v", s)
	}
}

func TestDoorbellBatch(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 1<<16)
	qp := mustQP(t, d, 0)
	before := ts.server().Stats()

	var wrs []rdma.WorkRequest
	bufs := make([][]byte, 16)
	for i := range 16 {
		wrs = append(wrs, rdma.WorkRequest{ID: uint64(100 + i), Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + uint64(64*i), Local: bytes.Repeat([]byte{byte(i + 1)}, 64)})
	}
	for i := range 16 {
		bufs[i] = make([]byte, 64)
		wrs = append(wrs, rdma.WorkRequest{ID: uint64(200 + i), Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + uint64(64*i), Local: bufs[i]})
	}
	wrs = append(wrs,
		rdma.WorkRequest{ID: 300, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 8192, Add: 1},
		rdma.WorkRequest{ID: 301, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 8192, Add: 1},
		rdma.WorkRequest{ID: 302, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 8192, Compare: 2, Swap: 10},
	)
	cs := exec(t, qp, wrs...)
	for i, c := range cs {
		if c.ID != wrs[i].ID || c.Op != wrs[i].Op || c.Err() != nil {
			t.Fatalf("completion %d: %+v (%v)", i, c, c.Err())
		}
	}
	for i := range 16 {
		if !bytes.Equal(bufs[i], bytes.Repeat([]byte{byte(i + 1)}, 64)) {
			t.Fatalf("read %d: %v", i, bufs[i][:4])
		}
	}
	if cs[32].Value != 0 || cs[33].Value != 1 || cs[34].Value != 2 {
		t.Fatalf("atomics in batch: %+v", cs[32:])
	}
	// One doorbell on the client, one batch frame on the server.
	if s := qp.Stats(); s.Doorbells != 1 || s.Verbs() != uint64(len(wrs)) {
		t.Fatalf("qp stats %+v", s)
	}
	if s := ts.server().Stats().Sub(before); s.Doorbells != 1 {
		t.Fatalf("server saw %d batches, want 1", s.Doorbells)
	}
	// The largest legal batch travels too.
	big := make([]rdma.WorkRequest, rdma.MaxBatch)
	for i := range big {
		big[i] = rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 256)}
	}
	if err := rdma.FirstError(exec(t, qp, big...)); err != nil {
		t.Fatal(err)
	}
	// An empty batch is a doorbell with nothing in it.
	if err := qp.Post(); err != nil {
		t.Fatal(err)
	}
}

// TestPipelining keeps many batches outstanding on several QPs at once and
// checks that every FAA got a distinct prior value and every QP saw its
// completions in posting order.
func TestPipelining(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "counters", 4096)
	const qps, batches, per, window = 6, 200, 4, 32
	var mu sync.Mutex
	seen := make(map[uint64]bool)
	maxOutstanding := 0
	var wg sync.WaitGroup
	errc := make(chan error, qps)
	for q := range qps {
		qp := mustQP(t, d, window*per)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxT(t)
			next := uint64(0) // next expected completion ID
			posted := 0
			comps := make([]rdma.Completion, 64)
			var values []uint64
			for posted < batches || next < uint64(batches*per) {
				for posted < batches && qp.CQ().Outstanding()+per <= window*per {
					wrs := make([]rdma.WorkRequest, per)
					for i := range wrs {
						wrs[i] = rdma.WorkRequest{ID: uint64(posted*per + i), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + uint64(8*(i%2)), Add: 1}
					}
					if err := qp.Post(wrs...); err != nil {
						errc <- fmt.Errorf("qp %d post: %w", q, err)
						return
					}
					posted++
				}
				mu.Lock()
				maxOutstanding = max(maxOutstanding, qp.CQ().Outstanding())
				mu.Unlock()
				n, err := qp.CQ().Wait(ctx, comps, 1)
				if err != nil {
					errc <- fmt.Errorf("qp %d wait: %w", q, err)
					return
				}
				for _, c := range comps[:n] {
					if c.ID != next || c.Err() != nil {
						errc <- fmt.Errorf("qp %d: completion %+v, want id %d (%v)", q, c, next, c.Err())
						return
					}
					next++
					values = append(values, c.Value<<1|c.ID%2)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range values {
				if seen[v] {
					errc <- fmt.Errorf("prior value %d (word %d) returned twice", v>>1, v&1)
					return
				}
				seen[v] = true
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	total := uint64(qps * batches * per)
	if uint64(len(seen)) != total {
		t.Fatalf("%d distinct prior values, want %d", len(seen), total)
	}
	if maxOutstanding <= per {
		t.Fatalf("never more than %d work requests outstanding: no pipelining", maxOutstanding)
	}
	if s := d.Stats(); s.FAA != total || s.Doorbells != uint64(qps*batches) {
		t.Fatalf("device stats %+v", s)
	}
	t.Logf("max outstanding work requests on one QP: %d", maxOutstanding)
}

func TestRemoteErrors(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 0)
	buf := make([]byte, 8)
	cases := []struct {
		name string
		wr   rdma.WorkRequest
		st   rdma.Status
		err  error
	}{
		{"bad rkey", rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey + 1, RemoteAddr: r.Addr, Local: buf}, rdma.StatusRemoteAccessError, rdma.ErrRemoteAccess},
		{"past end", rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 60, Local: buf}, rdma.StatusRemoteAccessError, rdma.ErrRemoteAccess},
		{"before start", rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr - 8, Local: buf}, rdma.StatusRemoteAccessError, rdma.ErrRemoteAccess},
		{"address wrap", rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: ^uint64(0) - 3, Local: buf}, rdma.StatusRemoteAccessError, rdma.ErrRemoteAccess},
		{"cas misaligned", rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 4}, rdma.StatusRemoteInvalidRequest, rdma.ErrInvalidRequest},
		{"faa misaligned", rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 1, Add: 1}, rdma.StatusRemoteInvalidRequest, rdma.ErrInvalidRequest},
		{"faa out of bounds", rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 64, Add: 1}, rdma.StatusRemoteAccessError, rdma.ErrRemoteAccess},
	}
	for i, tc := range cases {
		tc.wr.ID = uint64(i)
		c := exec1(t, qp, tc.wr)
		var ce *rdma.CompletionError
		if c.Status != tc.st || !errors.Is(c.Err(), tc.err) || !errors.As(c.Err(), &ce) || ce.ID != uint64(i) {
			t.Errorf("%s: completion %+v, err %v; want %v", tc.name, c, c.Err(), tc.st)
		}
	}
	// A failed work request ends its doorbell: the rest are flushed, not
	// applied; the queue pair stays usable.
	cs := exec(t, qp,
		rdma.WorkRequest{ID: 1, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 5},
		rdma.WorkRequest{ID: 2, Op: rdma.OpFetchAndAdd, RKey: 0, RemoteAddr: r.Addr, Add: 5},
		rdma.WorkRequest{ID: 3, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 5},
	)
	if cs[0].Err() != nil || cs[1].Status != rdma.StatusRemoteAccessError || cs[2].Status != rdma.StatusFlushed || !errors.Is(cs[2].Err(), rdma.ErrFlushed) {
		t.Fatalf("mixed batch: %+v", cs)
	}
	if c := exec1(t, qp, rdma.WorkRequest{ID: 4, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr}); c.Err() != nil || c.Value != 5 {
		t.Fatalf("after the failed doorbell: %+v (the flushed FAA must not have run)", c)
	}
	if s := qp.Stats(); s.Errors != uint64(len(cases))+2 {
		t.Fatalf("errors counted %d, want %d", s.Errors, len(cases)+2)
	}
}

func TestLocalValidation(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 4)
	if err := qp.Post(rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr}); !errors.Is(err, rdma.ErrLength) {
		t.Errorf("empty read: %v", err)
	}
	if err := qp.Post(rdma.WorkRequest{Op: 77}); !errors.Is(err, rdma.ErrBadOpcode) {
		t.Errorf("bad opcode: %v", err)
	}
	if err := qp.Post(make([]rdma.WorkRequest, rdma.MaxBatch+1)...); !errors.Is(err, rdma.ErrBatchTooLarge) {
		t.Errorf("big batch: %v", err)
	}
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	if err := qp.Post(faa, faa, faa, faa, faa); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Errorf("over depth: %v", err)
	}
	if err := qp.Post(faa, faa, faa, faa); err != nil {
		t.Fatal(err)
	}
	if err := qp.Post(faa); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Errorf("full queue: %v", err)
	}
	cs := make([]rdma.Completion, 4)
	if n, err := qp.CQ().Wait(ctxT(t), cs, 4); n != 4 || err != nil {
		t.Fatalf("wait: %d %v", n, err)
	}
	if s := qp.Stats(); s.Doorbells != 1 || s.FAA != 4 {
		t.Fatalf("stats %+v: rejected posts must not count", s)
	}
}

func TestRegions(t *testing.T) {
	ts := startServer(t, rdma.NewMemory(1<<20), ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	ctx := ctxT(t)
	a := mustRegion(t, d, "a", 1000)
	again, err := d.RegisterRegion(ctx, "a", 1000)
	if err != nil || again != a {
		t.Fatalf("idempotent register: %+v %v", again, err)
	}
	if _, err := d.RegisterRegion(ctx, "a", 2000); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("conflicting length: %v", err)
	}
	var we *wire.Error
	if _, err := d.RegisterRegion(ctx, "huge", 1<<30); !errors.Is(err, rdma.ErrOutOfMemory) || !errors.As(err, &we) || we.Code != wire.CodeOutOfMemory {
		t.Fatalf("out of memory: %v", err)
	}
	if _, err := d.RegisterRegion(ctx, "zero", 0); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("zero length: %v", err)
	}
	if _, err := d.RegisterRegion(ctx, "", 8); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}
	b := mustRegion(t, d, "b", 8)
	rs, err := d.Regions(ctx)
	if err != nil || len(rs) != 2 || rs[0] != a || rs[1] != b {
		t.Fatalf("regions: %+v %v", rs, err)
	}
	if a.RKey == b.RKey || a.Addr == 0 {
		t.Fatalf("regions %+v %+v", a, b)
	}
	// A cancelled control call returns promptly and leaves the device usable.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Regions(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := d.Regions(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMaxConns(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{MaxConns: 1})
	dial(t, ts.addr, ClientConfig{})
	_, err := Dial(ctxT(t), ts.addr, ClientConfig{RedialAttempts: 2, RedialBaseDelay: time.Millisecond, Logger: quiet()})
	if !errors.Is(err, wire.ErrBusy) || !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("second device: %v, want ErrBusy", err)
	}
}

func TestCostModel(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.ReadLatency = 3 * time.Millisecond
	m.AtomicLatency = 2 * time.Millisecond
	m.AtomicSlotOccupancy = 2 * time.Millisecond
	ts := startServer(t, nil, ServerConfig{Cost: &m})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 4096)
	qp := mustQP(t, d, 0)
	start := time.Now()
	exec1(t, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)})
	if el := time.Since(start); el < m.ReadLatency {
		t.Fatalf("READ took %v, model says ≥ %v", el, m.ReadLatency)
	}
	// Four atomics on one word serialise on its slot: ≥ latency + 3 × occupancy.
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	start = time.Now()
	cs := exec(t, qp, faa, faa, faa, faa)
	if el := time.Since(start); el < m.AtomicLatency+3*m.AtomicSlotOccupancy {
		t.Fatalf("4 same-slot atomics took %v", el)
	}
	for i, c := range cs {
		if c.Value != uint64(i) {
			t.Fatalf("faa %d: %+v", i, c)
		}
	}
	// A slow batch does not hold up a fast one on another QP: responses of
	// one connection leave in completion order.
	slow, fast := mustQP(t, d, 0), mustQP(t, d, 0)
	if err := slow.Post(faa, faa, faa, faa, faa, faa, faa, faa); err != nil { // ≥ 16ms
		t.Fatal(err)
	}
	exec1(t, fast, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 512, Local: make([]byte, 8)})
	// The fast READ is answered while the slow batch (modelled ≥ 16 ms) is
	// still outstanding: no completion of it may be ready yet.
	ready := slow.CQ().Poll(make([]rdma.Completion, 8))
	if ready == 8 {
		t.Errorf("the slow batch completed before the fast READ: responses wait for each other")
	}
	got := make([]rdma.Completion, 8)
	if n, err := slow.CQ().Wait(ctxT(t), got, 8-ready); n != 8-ready || err != nil {
		t.Fatal(n, err)
	}
}

// TestCloseSemantics covers QP and device close: posts fail afterwards, the
// completion queue drains then reports ErrQPClosed, Close is idempotent.
func TestCloseSemantics(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qp, _ := d.CreateQP(rdma.QPConfig{})
	faa := rdma.WorkRequest{ID: 9, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	if err := qp.Post(faa); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "completion", func() bool { return ts.server().Stats().FAA == 1 })
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Post(faa); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("post after close: %v", err)
	}
	cs := make([]rdma.Completion, 2)
	n, err := qp.CQ().Wait(ctxT(t), cs, 2)
	if n != 1 || cs[0].ID != 9 || !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("drain after close: n=%d %+v err=%v", n, cs[0], err)
	}

	qp2, _ := d.CreateQP(rdma.QPConfig{})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp2.Post(faa); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("post after device close: %v", err)
	}
	if _, err := d.CreateQP(rdma.QPConfig{}); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("create after close: %v", err)
	}
	if _, err := d.Regions(ctxT(t)); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("regions after close: %v", err)
	}
}

// TestConnectionLossMidFlight: work requests outstanding when the server goes
// away complete with StatusTransportError; after the server comes back on the
// same address, the next Post redials and works.
func TestConnectionLossMidFlight(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.ReadLatency = 900 * time.Millisecond // responses held back: requests stay in flight
	mem := rdma.NewMemory(1 << 20)
	ts := startServer(t, mem, ServerConfig{Cost: &m})
	d := dial(t, ts.addr, ClientConfig{RedialBaseDelay: 5 * time.Millisecond})
	r := mustRegion(t, d, "r", 4096)
	qp := mustQP(t, d, 0)
	read := rdma.WorkRequest{ID: 1, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}
	read2 := read
	read2.ID = 2
	if err := qp.Post(read, read2); err != nil {
		t.Fatal(err)
	}
	read3 := read
	read3.ID = 3
	if err := qp.Post(read3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "server to execute", func() bool { return ts.server().Stats().Reads == 3 })
	ts.stop()
	cs := make([]rdma.Completion, 3)
	n, err := qp.CQ().Wait(ctxT(t), cs, 3)
	if err != nil || n != 3 {
		t.Fatalf("wait: %d %v", n, err)
	}
	for i, c := range cs {
		if c.ID != uint64(i+1) || c.Status != rdma.StatusTransportError || !errors.Is(c.Err(), rdma.ErrConnectionLost) {
			t.Fatalf("completion %d: %+v (%v)", i, c, c.Err())
		}
	}
	if s := qp.Stats(); s.Errors != 3 || s.Reads != 3 || s.BytesRead != 0 {
		t.Fatalf("stats %+v", s)
	}

	// Server back: Post redials.
	m.ReadLatency = 0
	ts.restart()
	c := exec1(t, qp, rdma.WorkRequest{ID: 4, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if c.Err() != nil || c.ID != 4 {
		t.Fatalf("after reconnect: %+v %v", c, c.Err())
	}
	if _, err := d.Regions(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestProxyCut cuts the network (a proxy) rather than stopping the server.
func TestProxyCut(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.AtomicLatency = 200 * time.Millisecond
	ts := startServer(t, nil, ServerConfig{Cost: &m})
	p := startProxy(t, ts.addr)
	d := dial(t, p.addr(), ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qps := []rdma.QueuePair{mustQP(t, d, 0), mustQP(t, d, 0)}
	for i, qp := range qps {
		if err := qp.Post(rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 8*uint64(i), Swap: 1}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "server to execute", func() bool { return ts.server().Stats().CAS == 2 })
	p.cut()
	for i, qp := range qps {
		cs := make([]rdma.Completion, 1)
		if _, err := qp.CQ().Wait(ctxT(t), cs, 1); err != nil {
			t.Fatal(err)
		}
		if cs[0].Status != rdma.StatusTransportError || cs[0].ID != uint64(i) {
			t.Fatalf("qp %d: %+v", i, cs[0])
		}
	}
	// The CAS did happen (effect unknown to the client, but it is there).
	cs := exec(t, qps[0], rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr, Compare: 1, Swap: 2})
	if cs[0].Err() != nil || cs[0].Value != 1 {
		t.Fatalf("after reconnect: %+v", cs[0])
	}
}

func TestRedialFails(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{RedialAttempts: 3, RedialBaseDelay: time.Millisecond, RedialMaxDelay: 4 * time.Millisecond, DialTimeout: time.Second})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 0)
	ts.stop()
	waitFor(t, "loss noticed", func() bool { c := d.current(); return c == nil || !c.alive() })
	start := time.Now()
	err := qp.Post(rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("post with server gone: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("redial took %v", time.Since(start))
	}
	if qp.CQ().Outstanding() != 0 || qp.Stats().Doorbells != 0 {
		t.Fatalf("a refused post left state behind: outstanding %d, %+v", qp.CQ().Outstanding(), qp.Stats())
	}
	if _, err := d.Regions(ctxT(t)); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("regions with server gone: %v", err)
	}
	if _, err := Dial(ctxT(t), ts.addr, ClientConfig{RedialAttempts: 2, RedialBaseDelay: time.Millisecond, Logger: quiet()}); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("dial with server gone: %v", err)
	}
	// Dial honours its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := Dial(ctx, ts.addr, ClientConfig{RedialAttempts: 1000, RedialBaseDelay: 10 * time.Millisecond, Logger: quiet()}); err == nil {
		t.Fatal("dial succeeded")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("dial ignored its context for %v", time.Since(start))
	}
}

func TestShutdownGraceful(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{RedialAttempts: 1})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 0)
	exec1(t, qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	srv := ts.server()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// The client learns the connection is gone (CodeShuttingDown, then EOF).
	waitFor(t, "client to notice", func() bool { c := d.current(); return !c.alive() })
	if err := d.current().lostErr(); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("loss error %v", err)
	}
	ts.stop() // Serve has returned ErrServerClosed
}

func TestIdleTimeoutIsTransparent(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{IdleTimeout: 50 * time.Millisecond})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 0)
	first := d.current()
	waitFor(t, "idle close", func() bool { return !first.alive() })
	c := exec1(t, qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}
