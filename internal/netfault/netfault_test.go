package netfault

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes TCP and UDP on one loopback port until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Skipf("udp port taken: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], a)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		pc.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string, udp bool) *Proxy {
	t.Helper()
	p, err := New(Config{Listen: "127.0.0.1:0", Target: target, UDP: udp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// roundTrip writes msg and reads it back within d.
func roundTrip(c net.Conn, msg []byte, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo mismatch")
	}
	return nil
}

func TestPassAndDelay(t *testing.T) {
	p := newProxy(t, echoServer(t), false)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, []byte("hello"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	const d = 100 * time.Millisecond
	if err := p.Set(Delay, d); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := roundTrip(c, []byte("slow"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Delayed both ways: at least 2d for a round trip.
	if rt := time.Since(start); rt < 2*d {
		t.Fatalf("round trip %v under Delay(%v), want ≥ %v", rt, d, 2*d)
	}
	if err := p.Set(Pass, 0); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, bytes.Repeat([]byte("x"), 3*ChunkBytes), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Accepted != 1 || s.Bytes < 6*ChunkBytes {
		t.Fatalf("stats %+v", s)
	}
	if err := p.Set(Delay, MaxDelay+1); !errors.Is(err, ErrBadDelay) {
		t.Fatalf("delay over MaxDelay: %v", err)
	}
}

// TestDropHoldsThenHeals: under Drop nothing passes, and held bytes and
// held connections go through once the mode is Pass again.
func TestDropHoldsThenHeals(t *testing.T) {
	p := newProxy(t, echoServer(t), false)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Drop, 0)
	if err := roundTrip(c, []byte("during"), 200*time.Millisecond); err == nil {
		t.Fatal("a round trip passed a blackhole")
	}
	// A connection made during the partition is accepted and held.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	p.Set(Pass, 0)
	// The first connection's "during" was held, not lost: it comes back.
	got := make([]byte, len("during"))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "during" {
		t.Fatalf("held bytes after heal: %q %v", got, err)
	}
	got = make([]byte, 4)
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c2, got); err != nil || string(got) != "held" {
		t.Fatalf("held connection after heal: %q %v", got, err)
	}
}

// TestReset: Reset breaks open connections at once and refuses new ones
// while set; Pass lets new ones through again.
func TestReset(t *testing.T) {
	p := newProxy(t, echoServer(t), false)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, []byte("a"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Reset, 0)
	if err := roundTrip(c, []byte("b"), 5*time.Second); err == nil {
		t.Fatal("a reset connection still echoes")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if err := roundTrip(c2, []byte("c"), 5*time.Second); err == nil {
			t.Fatal("a connection made under Reset echoes")
		}
		c2.Close()
	}
	p.Set(Pass, 0)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3, []byte("d"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// ResetAll breaks it and leaves the mode Pass.
	p.ResetAll()
	if err := roundTrip(c3, []byte("e"), 5*time.Second); err == nil {
		t.Fatal("echo after ResetAll")
	}
	if m, _ := p.Mode(); m != Pass {
		t.Fatalf("mode %v after ResetAll", m)
	}
	if s := p.Stats(); s.Resets < 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestMaxConns: connections over MaxConns are closed on accept.
func TestMaxConns(t *testing.T) {
	p := newProxy(t, echoServer(t), false)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range MaxConns {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if err := roundTrip(conns[MaxConns-1], []byte("ok"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	extra, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := roundTrip(extra, []byte("no"), 5*time.Second); err == nil {
		t.Fatal("connection over MaxConns echoes")
	}
	if s := p.Stats(); s.Refused != 1 || s.Accepted != MaxConns {
		t.Fatalf("stats %+v", s)
	}
}

func udpRoundTrip(c net.Conn, msg string, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != msg {
		return errors.New("udp echo mismatch")
	}
	return nil
}

func TestUDP(t *testing.T) {
	p := newProxy(t, echoServer(t), true)
	c, err := net.Dial("udp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := udpRoundTrip(c, "ping", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Drop, 0)
	if err := udpRoundTrip(c, "lost", 200*time.Millisecond); err == nil {
		t.Fatal("a datagram passed a blackhole")
	}
	const d = 100 * time.Millisecond
	p.Set(Delay, d)
	start := time.Now()
	if err := udpRoundTrip(c, "slow", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rt := time.Since(start); rt < 2*d {
		t.Fatalf("udp round trip %v under Delay(%v)", rt, d)
	}
	p.Set(Pass, 0)
	if err := udpRoundTrip(c, "again", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Dropped == 0 || s.Datagrams < 6 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCloseEndsEverything: Close returns with connections open and held,
// and leaves no goroutine behind (TestMain checks).
func TestCloseEndsEverything(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", Target: echoServer(t), UDP: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Drop, 0)
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	u, _ := net.Dial("udp", p.Addr())
	defer u.Close()
	u.Write([]byte("x"))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	if _, err := New(Config{Listen: "127.0.0.1:0", Target: "nonsense"}); err == nil {
		t.Fatal("a target without a port was accepted")
	}
}

// TestSetFrom: a per-source mode applies to that source's connections and
// datagrams only, and clearing it restores the proxy's mode.
func TestSetFrom(t *testing.T) {
	target := echoServer(t)
	// Sources by the client's port: the test names its sockets.
	var mu sync.Mutex
	names := map[string]string{}
	p, err := New(Config{Listen: "127.0.0.1:0", Target: target, UDP: true, SourceOf: func(a net.Addr) string {
		if strings.HasPrefix(a.String(), "127.0.0.2:") {
			return "cut" // TCP: named by the source address
		}
		mu.Lock()
		defer mu.Unlock()
		return names[a.String()]
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func(network, name string) net.Conn {
		t.Helper()
		d := net.Dialer{}
		if network == "udp" {
			la, _ := net.ResolveUDPAddr("udp", "127.0.0.1:0")
			d.LocalAddr = la
		}
		// Reserve the local address first, so SourceOf can name it at accept.
		c, err := d.Dial(network, p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		names[c.LocalAddr().String()] = name
		mu.Unlock()
		return c
	}
	p.SetFrom("cut", Drop, 0, false)
	ok := dial("tcp", "ok")
	defer ok.Close()
	if err := roundTrip(ok, []byte("fine"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cut, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).Dial("tcp", p.Addr())
	if err != nil {
		t.Skipf("no 127.0.0.2: %v", err)
	}
	defer cut.Close()
	if err := roundTrip(cut, []byte("x"), 200*time.Millisecond); err == nil {
		t.Fatal("a connection of a dropped source echoes")
	}
	p.SetFrom("cut", Reset, 0, false)
	if err := roundTrip(cut, []byte("y"), 5*time.Second); err == nil {
		t.Fatal("a connection of a reset source echoes")
	}
	if err := roundTrip(ok, []byte("still"), 5*time.Second); err != nil {
		t.Fatalf("another source's connection after the reset: %v", err)
	}
	p.SetFrom("cut", Drop, 0, false)
	uok, ucut := dial("udp", "ok"), dial("udp", "cut")
	defer uok.Close()
	defer ucut.Close()
	if err := udpRoundTrip(uok, "a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := udpRoundTrip(ucut, "b", 200*time.Millisecond); err == nil {
		t.Fatal("a datagram of a dropped source passed")
	}
	p.SetFrom("cut", Pass, 0, true)
	if err := udpRoundTrip(ucut, "c", 5*time.Second); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	if err := p.SetFrom("x", Delay, -time.Second, false); !errors.Is(err, ErrBadDelay) {
		t.Fatalf("negative delay: %v", err)
	}
}
