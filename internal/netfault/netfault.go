// Package netfault is a loopback proxy that injects network faults between
// processes under test: a Proxy listens on one address (TCP, and UDP on the
// same port when asked) and forwards to a target, passing, blackholing,
// delaying or resetting the traffic as its mode says. Point a client at
// the proxy (or make a server advertise the proxy's address) and switch
// modes while the test runs.
//
// Modes:
//   - Pass forwards everything.
//   - Drop blackholes: nothing is forwarded in either direction. TCP bytes
//     already accepted are held (the proxy stops reading once its bounded
//     queues are full, so the senders' windows close, as on a cut cable)
//     and flow again when the mode changes, unless the connection was reset
//     or its peer gave up meanwhile; UDP datagrams are discarded.
//   - Delay(d) forwards every chunk (TCP) or datagram (UDP) d after the
//     proxy received it, in order.
//   - Reset resets (RST) every open TCP connection when set, and every new
//     one at once while it stays set; UDP passes.
//
// Everything is bounded: connections, UDP peers, queued chunks and buffer
// sizes are the constants below.
package netfault

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits.
const (
	// MaxConns is the number of TCP connections a proxy holds at once;
	// more are closed on accept (and counted in Stats.Refused).
	MaxConns = 256
	// ChunkBytes is the size of one TCP read buffer: 32 KiB.
	ChunkBytes = 32 << 10
	// QueueChunks is the number of chunks queued per direction of a TCP
	// connection (delayed or held by Drop): at most (QueueChunks+1) ×
	// ChunkBytes = 1 MiB + 32 KiB buffered per direction.
	QueueChunks = 32
	// MaxUDPPeers is the number of UDP sources a proxy forwards for at
	// once; datagrams from more are dropped (Stats.Refused).
	MaxUDPPeers = 64
	// DatagramBytes is the largest UDP datagram forwarded: 64 KiB.
	DatagramBytes = 64 << 10
	// QueueDatagrams is the number of UDP datagrams a proxy delays at
	// once; more are dropped (UDP is lossy).
	QueueDatagrams = 1024
	// MaxDelay is the longest Delay accepted: 10 s.
	MaxDelay = 10 * time.Second
	// DialTimeout bounds the proxy's connect to its target: 2 s.
	DialTimeout = 2 * time.Second
)

// Mode is what a proxy does with traffic.
type Mode int

const (
	// Pass forwards everything.
	Pass Mode = iota
	// Drop blackholes everything.
	Drop
	// Delay forwards everything after the proxy's delay.
	Delay
	// Reset resets TCP connections.
	Reset
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Delay:
		return "delay"
	case Reset:
		return "reset"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Stats counts a proxy's work.
type Stats struct {
	// Accepted TCP connections (refused ones not included).
	Accepted uint64
	// Refused TCP connections (over MaxConns) and UDP datagrams (over
	// MaxUDPPeers or QueueDatagrams).
	Refused uint64
	// Resets of TCP connections.
	Resets uint64
	// Bytes forwarded over TCP, both directions.
	Bytes uint64
	// Datagrams forwarded over UDP, both directions.
	Datagrams uint64
	// Dropped UDP datagrams (Drop mode).
	Dropped uint64
}

// Config configures a proxy.
type Config struct {
	// Listen is the proxy's address, HOST:PORT (port 0: a free port; with
	// UDP, one free for both).
	Listen string
	// Target is the address forwarded to, HOST:PORT. It need not be
	// listening yet: the proxy connects per accepted connection.
	Target string
	// UDP forwards UDP datagrams on the same port too.
	UDP bool
	// SourceOf, if set, names the sender of a TCP connection (at accept)
	// or a UDP datagram, for SetFrom: for example the process that owns
	// the connecting socket. "" is no particular source.
	SourceOf func(remote net.Addr) string
}

// state is a mode with its delay and a channel closed when it changes.
type state struct {
	mode    Mode
	delay   time.Duration
	changed chan struct{}
}

// Proxy is a fault-injecting proxy. Its methods are safe for concurrent
// use.
type Proxy struct {
	target string
	ln     net.Listener
	pc     *net.UDPConn
	done   chan struct{}
	wg     sync.WaitGroup

	sourceOf func(net.Addr) string

	mu     sync.Mutex
	st     state
	from   map[string]state // per-source modes (SetFrom)
	conns  map[*tcpConn]struct{}
	peers  map[string]*udpPeer
	closed bool

	accepted, refused, resets, bytes, datagrams, dropped atomic.Uint64
	delayQ                                               chan datagram
}

// New starts a proxy in Pass mode.
func New(cfg Config) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(cfg.Target); err != nil {
		return nil, fmt.Errorf("netfault: target: %w", err)
	}
	p := &Proxy{target: cfg.Target, done: make(chan struct{}), conns: map[*tcpConn]struct{}{}, sourceOf: cfg.SourceOf,
		peers: map[string]*udpPeer{}, st: state{mode: Pass, changed: make(chan struct{})}, from: map[string]state{}}
	var err error
	for try := 0; ; try++ {
		p.ln, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("netfault: %w", err)
		}
		if !cfg.UDP {
			break
		}
		var ua *net.UDPAddr
		if ua, err = net.ResolveUDPAddr("udp", p.ln.Addr().String()); err == nil {
			if p.pc, err = net.ListenUDP("udp", ua); err == nil {
				break
			}
		}
		p.ln.Close()
		if try == 9 || !portZero(cfg.Listen) {
			return nil, fmt.Errorf("netfault: udp: %w", err)
		}
	}
	p.wg.Add(1)
	go p.acceptLoop()
	if p.pc != nil {
		p.delayQ = make(chan datagram, QueueDatagrams)
		p.wg.Add(2)
		go p.udpLoop()
		go p.udpDelayLoop()
	}
	return p, nil
}

func portZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && (port == "0" || port == "")
}

// Addr is the proxy's address, HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Resets: p.resets.Load(),
		Bytes: p.bytes.Load(), Datagrams: p.datagrams.Load(), Dropped: p.dropped.Load()}
}

// Mode returns the current mode and delay.
func (p *Proxy) Mode() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.mode, p.st.delay
}

// ErrBadDelay is returned by Set for a delay outside 0..MaxDelay.
var ErrBadDelay = errors.New("netfault: delay outside 0..MaxDelay")

// delayOf is the delay mode m takes: d for Delay (within 0..MaxDelay),
// none for the others.
func delayOf(m Mode, d time.Duration) (time.Duration, error) {
	if m != Delay {
		return 0, nil
	}
	if d < 0 || d > MaxDelay {
		return 0, ErrBadDelay
	}
	return d, nil
}

// Set switches the mode; d is the delay of Delay (ignored otherwise).
// Setting Reset resets every open TCP connection.
func (p *Proxy) Set(m Mode, d time.Duration) error {
	d, err := delayOf(m, d)
	if err != nil {
		return err
	}
	p.mu.Lock()
	close(p.st.changed)
	p.st = state{mode: m, delay: d, changed: make(chan struct{})}
	var victims []*tcpConn
	if m == Reset {
		for c := range p.conns {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.reset()
	}
	return nil
}

// SetFrom switches the mode of one source's traffic (as Config.SourceOf
// names it: both directions of its TCP connections, its UDP datagrams and
// the replies to them), overriding Set's for it; clear removes the
// override instead. Setting Reset resets that source's open TCP
// connections.
func (p *Proxy) SetFrom(source string, m Mode, d time.Duration, clear bool) error {
	d, err := delayOf(m, d)
	if err != nil {
		return err
	}
	p.mu.Lock()
	close(p.st.changed)
	p.st.changed = make(chan struct{})
	if clear {
		delete(p.from, source)
	} else {
		p.from[source] = state{mode: m, delay: d}
	}
	var victims []*tcpConn
	if m == Reset && !clear {
		for c := range p.conns {
			if c.source == source {
				victims = append(victims, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.reset()
	}
	return nil
}

// ResetAll resets every open TCP connection and leaves the mode as it is.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	var victims []*tcpConn
	for c := range p.conns {
		victims = append(victims, c)
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.reset()
	}
}

// stateOf is the mode that applies to a source's traffic, with a channel
// closed at the next change of any mode.
func (p *Proxy) stateOf(source string) state {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.from[source]; ok && source != "" {
		f.changed = p.st.changed
		return f
	}
	return p.st
}

// Close stops the proxy: it resets every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	var victims []*tcpConn
	for c := range p.conns {
		victims = append(victims, c)
	}
	for _, u := range p.peers {
		u.up.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	if p.pc != nil {
		p.pc.Close()
	}
	for _, c := range victims {
		c.reset()
	}
	p.wg.Wait()
	return err
}

// ---- TCP ----

type tcpConn struct {
	p          *Proxy
	source     string
	down       net.Conn // the client's connection to the proxy
	up         net.Conn // the proxy's connection to the target (nil until dialled)
	mu         sync.Mutex
	isReset    bool
	closedOnce sync.Once
	gone       chan struct{}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		src := ""
		if p.sourceOf != nil {
			src = p.sourceOf(c.RemoteAddr())
		}
		p.mu.Lock()
		if p.closed || len(p.conns) >= MaxConns {
			p.mu.Unlock()
			p.refused.Add(1)
			c.Close()
			continue
		}
		tc := &tcpConn{p: p, source: src, down: c, gone: make(chan struct{})}
		p.conns[tc] = struct{}{}
		p.mu.Unlock()
		mode := p.stateOf(src).mode
		p.accepted.Add(1)
		if mode == Reset {
			tc.reset()
			p.forget(tc)
			continue
		}
		p.wg.Add(1)
		go tc.run()
	}
}

func (p *Proxy) forget(c *tcpConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// reset closes both sides with an RST (linger 0).
func (c *tcpConn) reset() {
	c.mu.Lock()
	if c.isReset {
		c.mu.Unlock()
		return
	}
	c.isReset = true
	up := c.up
	c.mu.Unlock()
	c.p.resets.Add(1)
	for _, x := range []net.Conn{c.down, up} {
		if tc, ok := x.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		if x != nil {
			x.Close()
		}
	}
	c.close()
}

func (c *tcpConn) close() {
	c.closedOnce.Do(func() {
		close(c.gone)
		c.down.Close()
		c.mu.Lock()
		if c.up != nil {
			c.up.Close()
		}
		c.mu.Unlock()
	})
}

func (c *tcpConn) run() {
	defer c.p.wg.Done()
	defer c.p.forget(c)
	defer c.close()
	// Hold the connection while blackholed: connect only once traffic may
	// pass.
	if !c.waitPassable() {
		return
	}
	up, err := net.DialTimeout("tcp", c.p.target, DialTimeout)
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.isReset {
		c.mu.Unlock()
		up.Close()
		return
	}
	c.up = up
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.pipe(c.down, up) }()
	go func() { defer wg.Done(); c.pipe(up, c.down) }()
	wg.Wait()
}

// waitPassable waits while the mode is Drop; false if the connection or
// the proxy closed meanwhile.
func (c *tcpConn) waitPassable() bool {
	for {
		s := c.p.stateOf(c.source)
		if s.mode != Drop {
			return true
		}
		select {
		case <-s.changed:
		case <-c.gone:
			return false
		case <-c.p.done:
			return false
		}
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through a bounded queue: a reader fills it, a
// writer empties it as the mode allows. When either side ends, the
// connection is closed.
func (c *tcpConn) pipe(src, dst net.Conn) {
	q := make(chan chunk, QueueChunks)
	go func() {
		defer close(q)
		for {
			b := make([]byte, ChunkBytes)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case q <- chunk{b: b[:n], at: time.Now()}:
				case <-c.gone:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if !c.release(ch.at) {
			break
		}
		if _, err := dst.Write(ch.b); err != nil {
			break
		}
		c.p.bytes.Add(uint64(len(ch.b)))
	}
	// Let the reader end: the connection is closed, so its Read fails.
	c.close()
	for range q {
	}
}

// release waits until a chunk read at at may be written: not while Drop,
// and d after at under Delay(d). False if the connection closed.
func (c *tcpConn) release(at time.Time) bool {
	for {
		s := c.p.stateOf(c.source)
		var t *time.Timer
		var wait <-chan time.Time
		switch s.mode {
		case Pass, Reset:
			return true
		case Delay:
			left := time.Until(at.Add(s.delay))
			if left <= 0 {
				return true
			}
			t = time.NewTimer(left)
			wait = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop() // not deferred: this loop runs once per mode change
			}
		}
		select {
		case <-wait:
			return true
		case <-s.changed:
			stop()
		case <-c.gone:
			stop()
			return false
		}
	}
}

// ---- UDP ----

type udpPeer struct {
	source string
	from   *net.UDPAddr // the client
	up     *net.UDPConn // connected to the target
}

type datagram struct {
	source string
	b      []byte
	at     time.Time
	out    func([]byte) // sends it on
}

func (p *Proxy) udpLoop() {
	defer p.wg.Done()
	buf := make([]byte, DatagramBytes)
	for {
		n, from, err := p.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		peer, ok := p.peer(from)
		if !ok {
			p.refused.Add(1)
			continue
		}
		b := append([]byte(nil), buf[:n]...)
		p.forwardUDP(peer.source, b, func(b []byte) { _, _ = peer.up.Write(b) })
	}
}

// peer returns (creating it) the upstream socket for a client.
func (p *Proxy) peer(from *net.UDPAddr) (*udpPeer, bool) {
	p.mu.Lock()
	u, ok := p.peers[from.String()]
	p.mu.Unlock()
	if ok {
		return u, true
	}
	src := ""
	if p.sourceOf != nil {
		src = p.sourceOf(from)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.peers[from.String()]; ok {
		return u, true
	}
	if p.closed || len(p.peers) >= MaxUDPPeers {
		return nil, false
	}
	ta, err := net.ResolveUDPAddr("udp", p.target)
	if err != nil {
		return nil, false
	}
	up, err := net.DialUDP("udp", nil, ta)
	if err != nil {
		return nil, false
	}
	u = &udpPeer{from: from, source: src, up: up}
	p.peers[from.String()] = u
	p.wg.Add(1)
	go p.udpReplies(u)
	return u, true
}

// udpReplies forwards the target's datagrams on a peer's socket back to
// the peer.
func (p *Proxy) udpReplies(u *udpPeer) {
	defer p.wg.Done()
	buf := make([]byte, DatagramBytes)
	for {
		n, err := u.up.Read(buf)
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// ICMP port unreachable while the target restarts: keep going.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b := append([]byte(nil), buf[:n]...)
		p.forwardUDP(u.source, b, func(b []byte) { _, _ = p.pc.WriteToUDP(b, u.from) })
	}
}

func (p *Proxy) forwardUDP(source string, b []byte, out func([]byte)) {
	s := p.stateOf(source)
	switch s.mode {
	case Drop:
		p.dropped.Add(1)
	case Delay:
		select {
		case p.delayQ <- datagram{source: source, b: b, at: time.Now(), out: out}:
		default:
			p.refused.Add(1)
		}
	default:
		// Counted before it is sent, so that a reader who has seen the
		// datagram arrive sees it counted.
		p.datagrams.Add(1)
		out(b)
	}
}

// udpDelayLoop sends delayed datagrams in order, each its delay after it
// arrived (the delay current when it is sent).
func (p *Proxy) udpDelayLoop() {
	defer p.wg.Done()
	for {
		var d datagram
		select {
		case d = <-p.delayQ:
		case <-p.done:
			return
		}
		for {
			s := p.stateOf(d.source)
			if s.mode == Drop {
				p.dropped.Add(1)
				break
			}
			left := time.Duration(0)
			if s.mode == Delay {
				left = time.Until(d.at.Add(s.delay))
			}
			if left <= 0 {
				p.datagrams.Add(1) // before it is sent, as in forwardUDP
				d.out(d.b)
				break
			}
			t := time.NewTimer(left)
			select {
			case <-t.C:
			case <-s.changed:
			case <-p.done:
				t.Stop()
				return
			}
			t.Stop()
		}
	}
}
