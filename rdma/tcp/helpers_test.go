package tcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/rdma"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is a logger for tests; set AURA_TEST_LOG=1 to see the logs.
func quiet() *slog.Logger {
	if os.Getenv("AURA_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testServer is a server on 127.0.0.1:0 that a test can stop and restart on
// the same address.
type testServer struct {
	t    testing.TB
	mem  *rdma.Memory
	cfg  ServerConfig
	addr string

	mu    sync.Mutex
	srv   *Server
	serve chan error
}

func startServer(t testing.TB, mem *rdma.Memory, cfg ServerConfig) *testServer {
	t.Helper()
	if mem == nil {
		mem = rdma.NewMemory(64 << 20)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	ts := &testServer{t: t, mem: mem, cfg: cfg}
	ts.start("127.0.0.1:0")
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) start(addr string) {
	ts.t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		ts.t.Fatalf("listen %s: %v", addr, err)
	}
	srv, err := NewServer(ts.mem, ts.cfg)
	if err != nil {
		ts.t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- srv.Serve(l) }()
	ts.mu.Lock()
	ts.srv, ts.serve, ts.addr = srv, ch, l.Addr().String()
	ts.mu.Unlock()
}

// restart starts a fresh server (same memory) on the same address.
func (ts *testServer) restart() { ts.start(ts.addr) }

func (ts *testServer) server() *Server {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.srv
}

// stop closes the server and checks that Serve returned ErrServerClosed.
func (ts *testServer) stop() {
	ts.mu.Lock()
	srv, ch := ts.srv, ts.serve
	ts.srv, ts.serve = nil, nil
	ts.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	select {
	case err := <-ch:
		if !errors.Is(err, ErrServerClosed) {
			ts.t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	case <-time.After(5 * time.Second):
		ts.t.Errorf("Serve did not return after Close")
	}
}

func dial(t testing.TB, addr string, cfg ClientConfig) *Device {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := Dial(ctx, addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustQP(t testing.TB, d *Device, depth int) rdma.QueuePair {
	t.Helper()
	qp, err := d.CreateQP(rdma.QPConfig{SendQueueDepth: depth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

func mustRegion(t testing.TB, d *Device, name string, n uint64) rdma.Region {
	t.Helper()
	r, err := d.RegisterRegion(ctxT(t), name, n)
	if err != nil {
		t.Fatalf("register %q: %v", name, err)
	}
	return r
}

func exec(t testing.TB, qp rdma.QueuePair, wrs ...rdma.WorkRequest) []rdma.Completion {
	t.Helper()
	cs, err := rdma.Exec(ctxT(t), qp, wrs...)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return cs
}

func exec1(t testing.TB, qp rdma.QueuePair, wr rdma.WorkRequest) rdma.Completion {
	t.Helper()
	return exec(t, qp, wr)[0]
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// proxy forwards TCP connections to a target and can cut them all at once.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t testing.TB, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
	}
}

// cut closes every proxied connection; new ones are still accepted.
func (p *proxy) cut() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.l.Close()
	p.cut()
	p.wg.Wait()
}
