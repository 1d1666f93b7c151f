package tcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// rawConn is a test client that speaks the protocol by hand.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func rawDial(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

func (r *rawConn) sendReq(req wire.Request) {
	r.t.Helper()
	b, err := wire.AppendRequest(nil, &req)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(b)
}

func (r *rawConn) recv() (*wire.Response, error) {
	frame, err := wire.ReadFrame(r.br, nil, 0)
	if err != nil {
		return nil, err
	}
	var resp wire.Response
	if err := wire.DecodeResponse(frame, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (r *rawConn) hello() {
	r.t.Helper()
	r.sendReq(wire.Request{Kind: wire.KindHello, Magic: wire.Magic, Version: wire.Version})
	resp, err := r.recv()
	if err != nil || resp.Kind != wire.KindHelloOK {
		r.t.Fatalf("hello: %+v %v", resp, err)
	}
}

// expectClosedWith reads an Error frame with code (and id), then EOF.
func (r *rawConn) expectClosedWith(code wire.Code, id uint64) {
	r.t.Helper()
	resp, err := r.recv()
	if err != nil || resp.Kind != wire.KindError || resp.Err.Code != code || resp.ID != id {
		r.t.Fatalf("want error %v (id %d), got %+v %v", code, id, resp, err)
	}
	if _, err := r.recv(); err == nil {
		r.t.Fatalf("connection still open after %v", code)
	}
}

func le32(v uint32) []byte { return le.AppendUint32(nil, v) }

// TestGarbage sends malformed, oversized and truncated frames on raw sockets
// while a well-behaved device keeps working against the same server.
func TestGarbage(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{ReadTimeout: 200 * time.Millisecond, HandshakeTimeout: 200 * time.Millisecond})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	qp := mustQP(t, d, 0)
	var good sync.WaitGroup
	stop := make(chan struct{})
	good.Add(1)
	var goodErr error
	var goodOps int
	go func() {
		defer good.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
			if err == nil {
				err = rdma.FirstError(cs)
			}
			if err != nil {
				goodErr = err
				return
			}
			goodOps++
		}
	}()

	t.Run("no hello", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.sendReq(wire.Request{Kind: wire.KindListRegions, ID: 5})
		c.expectClosedWith(wire.CodeMalformed, 5)
	})
	t.Run("random bytes", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.send(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 100))
		c.expectClosedWith(wire.CodeMalformed, 0)
	})
	t.Run("bad magic", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.sendReq(wire.Request{Kind: wire.KindHello, Magic: 0x12345678, Version: wire.Version})
		c.expectClosedWith(wire.CodeVersion, 0)
	})
	t.Run("bad version", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.sendReq(wire.Request{Kind: wire.KindHello, Magic: wire.Magic, Version: 99})
		c.expectClosedWith(wire.CodeVersion, 0)
	})
	t.Run("oversized frame", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		c.send(le32(wire.MaxFrameSize)) // one byte over: length excludes the prefix
		c.expectClosedWith(wire.CodeMalformed, 0)
	})
	t.Run("huge length", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		c.send(le32(0xFFFFFFFF))
		c.expectClosedWith(wire.CodeMalformed, 0)
	})
	t.Run("unknown opcode", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		body := []byte{byte(wire.KindBatch)}
		body = le.AppendUint64(body, 42)
		body = le.AppendUint16(body, 1)
		body = append(body, 9)
		body = append(body, make([]byte, 20)...)
		c.send(append(le32(uint32(len(body))), body...))
		c.expectClosedWith(wire.CodeMalformed, 42)
	})
	t.Run("read over limit", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		body := []byte{byte(wire.KindBatch)}
		body = le.AppendUint64(body, 43)
		body = le.AppendUint16(body, 1)
		body = append(body, byte(rdma.OpRead))
		body = le.AppendUint32(body, r.RKey)
		body = le.AppendUint64(body, r.Addr)
		body = le.AppendUint32(body, rdma.MaxTransferBytes+1)
		c.send(append(le32(uint32(len(body))), body...))
		c.expectClosedWith(wire.CodeMalformed, 43)
	})
	t.Run("response kind", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		resp := wire.Response{Kind: wire.KindHelloOK, ID: 7}
		b, _ := wire.AppendResponse(nil, &resp)
		c.send(b)
		c.expectClosedWith(wire.CodeMalformed, 7)
	})
	t.Run("second hello", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		c.sendReq(wire.Request{Kind: wire.KindHello, ID: 8, Magic: wire.Magic, Version: wire.Version})
		c.expectClosedWith(wire.CodeMalformed, 8)
	})
	t.Run("truncated frame times out", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		c.send(append(le32(1000), 1, 2, 3))
		if _, err := c.recv(); err == nil {
			t.Fatal("server kept a half-sent frame open")
		}
	})
	t.Run("silent client times out", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		if _, err := c.recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("want EOF after the handshake timeout, got %v", err)
		}
	})
	t.Run("bad requests are typed, connection stays", func(t *testing.T) {
		c := rawDial(t, ts.addr)
		c.hello()
		c.sendReq(wire.Request{Kind: wire.KindRegister, ID: 1, Name: "", Length: 8})
		c.sendReq(wire.Request{Kind: wire.KindRegister, ID: 2, Name: "r", Length: 128})
		c.sendReq(wire.Request{Kind: wire.KindBatch, ID: 3, WRs: []wire.WorkRequest{
			{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, ReadLen: 0},
			{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 1000, Data: []byte("x")},
			{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 3},
		}})
		c.sendReq(wire.Request{Kind: wire.KindListRegions, ID: 4})
		c.sendReq(wire.Request{Kind: wire.KindBatch, ID: 5, WRs: []wire.WorkRequest{
			{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 1000, Data: []byte("x")},
		}})
		c.sendReq(wire.Request{Kind: wire.KindBatch, ID: 6, WRs: []wire.WorkRequest{
			{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 3},
		}})
		for id := uint64(1); id <= 6; id++ {
			resp, err := c.recv()
			if err != nil || resp.ID != id {
				t.Fatalf("response %d: %+v %v", id, resp, err)
			}
			switch id {
			case 1, 2:
				if resp.Kind != wire.KindError || resp.Err.Code != wire.CodeInvalidArgument {
					t.Fatalf("register %d: %+v", id, resp)
				}
			case 3:
				want := []rdma.Status{rdma.StatusLocalLengthError, rdma.StatusFlushed, rdma.StatusFlushed}
				for i, res := range resp.Results {
					if res.Status != want[i] {
						t.Fatalf("result %d: %v, want %v", i, res.Status, want[i])
					}
				}
			case 4:
				if resp.Kind != wire.KindRegions {
					t.Fatalf("list: %+v", resp)
				}
			case 5:
				if resp.Results[0].Status != rdma.StatusRemoteAccessError {
					t.Fatalf("write out of bounds: %+v", resp.Results)
				}
			case 6:
				if resp.Results[0].Status != rdma.StatusRemoteInvalidRequest {
					t.Fatalf("misaligned CAS: %+v", resp.Results)
				}
			}
		}
	})
	close(stop)
	good.Wait()
	if goodErr != nil || goodOps == 0 {
		t.Fatalf("well-behaved client: %d ops, err %v", goodOps, goodErr)
	}
	// The server still accepts and serves new devices.
	d2 := dial(t, ts.addr, ClientConfig{})
	qp2 := mustQP(t, d2, 0)
	if c := exec1(t, qp2, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}); c.Err() != nil || c.Value != uint64(goodOps) {
		t.Fatalf("new device: %+v %v (good ops %d)", c, c.Err(), goodOps)
	}
}

// fakeServer accepts one connection, answers Hello, then runs behave.
func fakeServer(t *testing.T, behave func(nc net.Conn, br *bufio.Reader)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		if _, err := wire.ReadFrame(br, nil, 0); err != nil {
			return
		}
		limits := wire.Limits{Version: wire.Version, MaxFrameSize: wire.MaxFrameSize, MaxInFlight: 1024, MaxBatch: rdma.MaxBatch,
			MaxBatchBytes: rdma.MaxBatchBytes, MaxTransferBytes: rdma.MaxTransferBytes, Capacity: 1 << 20, MaxRegions: wire.MaxRegions}
		b, _ := wire.AppendResponse(nil, &wire.Response{Kind: wire.KindHelloOK, Hello: limits})
		nc.Write(b)
		behave(nc, br)
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// TestRequestTimeout: a memory node that never answers makes outstanding work
// requests complete with StatusTransportError after RequestTimeout.
func TestRequestTimeout(t *testing.T) {
	done := make(chan struct{})
	addr := fakeServer(t, func(nc net.Conn, br *bufio.Reader) {
		io.Copy(io.Discard, br) // read everything, answer nothing
		close(done)
	})
	d := dial(t, addr, ClientConfig{RequestTimeout: 100 * time.Millisecond, RedialAttempts: 1})
	qp := mustQP(t, d, 0)
	start := time.Now()
	cs, err := rdma.Exec(ctxT(t), qp, rdma.WorkRequest{ID: 5, Op: rdma.OpFetchAndAdd, RKey: 1, RemoteAddr: 4096, Add: 1})
	if err != nil || cs[0].Status != rdma.StatusTransportError || cs[0].ID != 5 {
		t.Fatalf("exec: %+v %v", cs, err)
	}
	if el := time.Since(start); el < 100*time.Millisecond || el > 5*time.Second {
		t.Fatalf("timed out after %v", el)
	}
	<-done
}

// TestBadResponse: a response that does not match its batch is a protocol
// error: the batch completes with StatusTransportError, the connection drops.
func TestBadResponse(t *testing.T) {
	addr := fakeServer(t, func(nc net.Conn, br *bufio.Reader) {
		frame, err := wire.ReadFrame(br, nil, 0)
		if err != nil {
			return
		}
		var req wire.Request
		if wire.DecodeRequest(frame, &req) != nil {
			return
		}
		// Answer a READ of 8 bytes with 4 bytes of data.
		resp := wire.Response{Kind: wire.KindBatchResult, ID: req.ID, Results: []wire.Result{{Op: rdma.OpRead, Data: []byte{1, 2, 3, 4}}}}
		b, _ := wire.AppendResponse(nil, &resp)
		nc.Write(b)
		io.Copy(io.Discard, br)
	})
	d := dial(t, addr, ClientConfig{RedialAttempts: 1})
	qp := mustQP(t, d, 0)
	buf := make([]byte, 8)
	cs, err := rdma.Exec(ctxT(t), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: 1, RemoteAddr: 4096, Local: buf})
	if err != nil || cs[0].Status != rdma.StatusTransportError || !bytes.Equal(buf, make([]byte, 8)) {
		t.Fatalf("exec: %+v %v, buf %v", cs, err, buf)
	}
	if err := d.current().lostErr(); !errors.Is(err, wire.ErrProtocol) || !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("loss cause %v", err)
	}
}

// TestUnsentFlushed: with a memory node that stops reading, the device's
// socket fills; batches still queued in the device are never sent, so
// closing their QP completes them with StatusFlushed; the ones already handed
// to the socket complete with StatusTransportError when the device closes.
func TestUnsentFlushed(t *testing.T) {
	release := make(chan struct{})
	addr := fakeServer(t, func(nc net.Conn, br *bufio.Reader) { <-release })
	defer close(release)
	d := dial(t, addr, ClientConfig{CloseTimeout: 50 * time.Millisecond})
	qp := mustQP(t, d, 4096)
	other := mustQP(t, d, 0)
	payload := make([]byte, rdma.MaxTransferBytes)
	posted := 0
	// Post 1 MiB WRITEs until some stay queued behind a blocked socket write.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := qp.Post(rdma.WorkRequest{ID: uint64(posted), Op: rdma.OpWrite, RKey: 1, RemoteAddr: 4096, Local: payload}); err != nil {
			t.Fatal(err)
		}
		posted++
		time.Sleep(time.Millisecond)
		c := d.current()
		c.mu.Lock()
		queued := len(c.queue)
		c.mu.Unlock()
		if queued >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket never filled after %d posts", posted)
		}
	}
	if err := other.Post(rdma.WorkRequest{ID: 777, Op: rdma.OpFetchAndAdd, RKey: 1, RemoteAddr: 4096, Add: 1}); err != nil {
		t.Fatal(err)
	}
	qp.Close()
	cs := make([]rdma.Completion, posted)
	// Flushed ones are delivered at once only after every earlier (sent) one;
	// close the device to finish the sent ones.
	d.Close()
	n, err := qp.CQ().Wait(ctxT(t), cs, posted)
	if n != posted || err != nil && !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("wait: %d of %d, %v", n, posted, err)
	}
	sent, flushed := 0, 0
	for i, c := range cs {
		if c.ID != uint64(i) {
			t.Fatalf("completion %d has id %d: out of order", i, c.ID)
		}
		switch c.Status {
		case rdma.StatusTransportError:
			if flushed > 0 {
				t.Fatalf("transport error after a flushed completion: sent after unsent?")
			}
			sent++
		case rdma.StatusFlushed:
			if !errors.Is(c.Err(), rdma.ErrFlushed) {
				t.Fatal(c.Err())
			}
			flushed++
		default:
			t.Fatalf("completion %d: %v", i, c.Status)
		}
	}
	if flushed < 2 || sent < 1 {
		t.Fatalf("%d sent, %d flushed", sent, flushed)
	}
	oc := make([]rdma.Completion, 1)
	if n, _ := other.CQ().Wait(ctxT(t), oc, 1); n != 1 || oc[0].ID != 777 {
		t.Fatalf("other QP: %d %+v", n, oc[0])
	}
	if oc[0].Status != rdma.StatusFlushed && oc[0].Status != rdma.StatusTransportError {
		t.Fatalf("other QP: %v", oc[0].Status)
	}
	t.Logf("%d sent (transport error), %d never sent (flushed)", sent, flushed)
}

// TestChaos posts from several QPs while the network is cut again and again.
// Every Post either fails with a typed error or yields exactly its
// completions; a success is applied, a flushed work request is not, and a
// transport error may or may not be: the final counter value must lie between
// the successes and the successes plus the transport errors.
func TestChaos(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	p := startProxy(t, ts.addr)
	d := dial(t, p.addr(), ClientConfig{RedialBaseDelay: time.Millisecond, RedialMaxDelay: 5 * time.Millisecond, RedialAttempts: 50})
	r := mustRegion(t, d, "chaos", 64)
	var ok, lost, flushed, postErr atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		qp := mustQP(t, d, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				batch := 1 + (i+w)%3
				wrs := make([]rdma.WorkRequest, batch)
				for j := range wrs {
					wrs[j] = rdma.WorkRequest{ID: uint64(i*10 + j), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
				}
				cs, err := rdma.Exec(context.Background(), qp, wrs...)
				if err != nil {
					if !errors.Is(err, rdma.ErrConnectionLost) {
						t.Errorf("post: untyped error %v", err)
						return
					}
					postErr.Add(1)
					continue
				}
				for j, c := range cs {
					if c.ID != wrs[j].ID {
						t.Errorf("completion %+v out of order", c)
						return
					}
					switch c.Status {
					case rdma.StatusSuccess:
						ok.Add(1)
					case rdma.StatusTransportError:
						lost.Add(1)
					case rdma.StatusFlushed:
						flushed.Add(1)
					default:
						t.Errorf("unexpected status %v", c.Status)
						return
					}
				}
			}
		}()
	}
	for range 20 {
		time.Sleep(15 * time.Millisecond)
		p.cut()
	}
	close(stop)
	wg.Wait()
	word := make([]byte, 8)
	ts.mem.Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: word})
	v := int64(le.Uint64(word))
	t.Logf("ok %d, transport errors %d, flushed %d, failed posts %d; counter %d", ok.Load(), lost.Load(), flushed.Load(), postErr.Load(), v)
	if v < ok.Load() || v > ok.Load()+lost.Load() {
		t.Fatalf("counter %d outside [%d, %d]", v, ok.Load(), ok.Load()+lost.Load())
	}
	if ok.Load() == 0 || lost.Load()+flushed.Load() == 0 {
		t.Fatalf("chaos did not exercise both paths")
	}
	if s := d.Stats(); int64(s.FAA) != ok.Load()+lost.Load()+flushed.Load() {
		t.Fatalf("device counted %d FAA, completions %d", s.FAA, ok.Load()+lost.Load()+flushed.Load())
	}
}

// TestCloseWhilePosting closes the device while goroutines post: every call
// returns (no hang), with a result or a typed error.
func TestCloseWhilePosting(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{})
	d := dial(t, ts.addr, ClientConfig{})
	r := mustRegion(t, d, "r", 64)
	var wg sync.WaitGroup
	for range 4 {
		qp, err := d.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
				if err != nil {
					if !errors.Is(err, rdma.ErrQPClosed) && !errors.Is(err, rdma.ErrConnectionLost) {
						t.Errorf("exec: %v", err)
					}
					return
				}
				if st := cs[0].Status; st != rdma.StatusSuccess && st != rdma.StatusFlushed && st != rdma.StatusTransportError {
					t.Errorf("status %v", st)
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Device.Close hung")
	}
	wg.Wait()
}
