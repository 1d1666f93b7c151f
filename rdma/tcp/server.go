package tcp

import (
	"bufio"
	"container/heap"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// ServerConfig configures a memory-node server. Zero fields take the defaults
// below; for the timeouts a negative value disables the timeout.
type ServerConfig struct {
	// MaxConns caps concurrent client connections; one more is answered with a
	// CodeBusy error and closed. Default 1024: a connection is one compute
	// node device (a few per CN), and each costs two goroutines and up to
	// MaxQueuedBytes + 2 frame buffers, so the cap bounds the node's memory.
	MaxConns int
	// MaxInFlight caps the request frames of one connection that have been
	// read but whose responses have not been written yet; the reader stops
	// reading when it is reached, so TCP flow control slows the client. It is
	// announced in the Hello reply and clients cap their outstanding requests
	// to it. Default 1024, the default send-queue depth of one QP: a client
	// rarely waits on it, while the queue stays bounded. (With Cost set,
	// responses the writer holds back until their modelled completion time
	// are bounded by MaxQueuedBytes.)
	MaxInFlight int
	// MaxQueuedBytes caps the bytes of responses one connection has waiting to
	// be written (a response always passes when the queue is empty, so a full
	// MaxBatchBytes READ batch is never refused). Default 32 MiB: four full
	// doorbell batches, far above what a healthy client keeps unread, and
	// small enough that MaxConns slow readers cannot exhaust the node.
	MaxQueuedBytes int
	// HandshakeTimeout bounds the wait for a new connection's Hello. Default
	// 10s: generous for a client across a data centre, short enough that
	// half-open connections do not hold MaxConns slots.
	HandshakeTimeout time.Duration
	// ReadTimeout bounds reading the rest of a frame once its first byte has
	// arrived, so a peer trickling bytes cannot hold a buffer forever. Default
	// 30s: a full 8 MiB frame needs well under a second on any working link.
	ReadTimeout time.Duration
	// WriteTimeout bounds one write of queued responses; a client that stops
	// reading its responses for that long is disconnected. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that sent no request for that long.
	// Clients redial transparently, so this only reclaims slots held by
	// forgotten or dead peers (TCP keep-alive catches the latter too).
	// Default 15m.
	IdleTimeout time.Duration
	// Cost, when non-nil, applies a NIC cost model on the server: atomics are
	// serialised per NIC slot and each batch's response is held back until its
	// modelled completion time. Default nil (off): verbs complete as fast as
	// the software runs.
	Cost *rdma.CostModel
	// Logger receives connection events and protocol errors. Default slog.Default().
	Logger *slog.Logger
	// Token, when set, is required in every client's Hello (compared in
	// constant time); a client without it, or with another, gets
	// CodeUnauthorized and is disconnected, logged and counted
	// (Server.Refused). 1..wire.MaxTokenLen bytes. Default none: any client
	// that reaches the port is served (loopback tests, a trusted LAN).
	Token []byte
}

// Server defaults; see ServerConfig.
const (
	DefaultMaxConns         = 1024
	DefaultMaxInFlight      = 1024
	DefaultMaxQueuedBytes   = 32 << 20
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultReadTimeout      = 30 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
	DefaultIdleTimeout      = 15 * time.Minute
)

func dur(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// WithDefaults returns the config with zero fields replaced by defaults and
// negative timeouts replaced by 0 (disabled).
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxQueuedBytes <= 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	c.HandshakeTimeout = dur(c.HandshakeTimeout, DefaultHandshakeTimeout)
	c.ReadTimeout = dur(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = dur(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = dur(c.IdleTimeout, DefaultIdleTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = errors.New("tcp: server closed")

// Server serves an *rdma.Memory to compute nodes over TCP.
type Server struct {
	mem    *rdma.Memory
	cfg    ServerConfig
	log    *slog.Logger
	limits wire.Limits
	stats  *rdma.Counters
	// refused counts Hellos refused for their token.
	refused atomic.Uint64

	nicMu sync.Mutex
	nic   *rdma.NIC

	regMu sync.Mutex // serialises registrations so that the region cap holds

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// NewServer returns a server for mem. It fails if cfg.Cost is invalid.
func NewServer(mem *rdma.Memory, cfg ServerConfig) (*Server, error) {
	if mem == nil {
		return nil, errors.New("tcp: NewServer: nil memory")
	}
	if len(cfg.Token) > wire.MaxTokenLen {
		return nil, fmt.Errorf("tcp: NewServer: token of %d bytes (max %d)", len(cfg.Token), wire.MaxTokenLen)
	}
	cfg = cfg.WithDefaults()
	s := &Server{
		mem: mem, cfg: cfg, log: cfg.Logger, stats: rdma.NewCounters(nil),
		listeners: make(map[net.Listener]struct{}), conns: make(map[*serverConn]struct{}),
		limits: wire.Limits{
			Version: wire.Version, MaxFrameSize: wire.MaxFrameSize, MaxInFlight: uint32(cfg.MaxInFlight),
			MaxBatch: rdma.MaxBatch, MaxBatchBytes: rdma.MaxBatchBytes, MaxTransferBytes: rdma.MaxTransferBytes,
			Capacity: mem.Capacity(), MaxRegions: wire.MaxRegions,
		},
	}
	if cfg.Cost != nil {
		nic, err := rdma.NewNIC(*cfg.Cost)
		if err != nil {
			return nil, err
		}
		s.nic = nic
	}
	return s, nil
}

// Stats counts the verbs the server has executed, over all connections
// (Doorbells counts batches).
func (s *Server) Stats() rdma.Stats { return s.stats.Snapshot() }

// Refused counts the clients refused for their token (ServerConfig.Token).
func (s *Server) Refused() uint64 { return s.refused.Load() }

// Limits returns what the server announces to clients.
func (s *Server) Limits() wire.Limits { return s.limits }

// Serve accepts connections on l until Close or Shutdown, and then returns
// ErrServerClosed; it returns other errors of l.Accept as they are. It closes l.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("mn: accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.startConn(nc)
	}
}

// isTemporary reports accept errors worth retrying (out of file descriptors…).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) startConn(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxConns {
		s.wg.Add(1)
		s.mu.Unlock()
		s.log.Warn("mn: refusing connection: at MaxConns", "remote", nc.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
		go func() {
			defer s.wg.Done()
			refuse(nc, wire.NewError(wire.CodeBusy, fmt.Sprintf("memory node at its limit of %d connections", s.cfg.MaxConns)))
		}()
		return
	}
	c := newServerConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	s.log.Debug("mn: connection opened", "remote", c.remote)
	go c.readLoop()
	go c.writeLoop()
}

// refuse sends a connection-level error (request id 0) and closes nc.
func refuse(nc net.Conn, e wire.Error) {
	resp := wire.Response{Kind: wire.KindError, Err: e}
	if b, err := wire.AppendResponse(nil, &resp); err == nil {
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write(b)
	}
	nc.Close()
}

// Close stops accepting, closes every connection at once and waits for the
// server's goroutines. Outstanding requests are lost (clients see
// StatusTransportError).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var errs []error
	for l := range s.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range s.conns {
		c.abort()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

// Shutdown stops accepting and lets every connection finish the requests it
// has already read: each reader stops reading, queued responses are written,
// a CodeShuttingDown error (request id 0) tells the client, and the connection
// closes. If ctx ends first, Shutdown closes what remains (as Close does) and
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.drain()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

func (s *Server) removeConn(c *serverConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// outFrame is an encoded response waiting for the writer.
type outFrame struct {
	buf    []byte
	sendAt int64 // rdma.Now() before which it must not be sent; 0 = at once
	seq    uint64
	close  bool // close the connection after writing it
}

// serverConn is one client connection: a reader and a writer goroutine.
type serverConn struct {
	s      *Server
	nc     net.Conn
	remote string
	log    *slog.Logger
	out    chan outFrame // bounded by MaxInFlight; closed by the reader when it exits

	quit chan struct{} // closed by abort
	// wmu is held while bytes go to the socket: by the writer for a burst
	// and its flush (so its buffer is empty whenever wmu is free), or by the
	// reader for a direct write.
	wmu       sync.Mutex
	abortOnce sync.Once

	mu       sync.Mutex
	cond     *sync.Cond // signalled when queued bytes drop or the writer dies
	queued   int        // bytes in out and in the writer's hands
	dead     bool       // the writer failed: discard
	draining bool       // Shutdown: stop reading new frames

	// reader scratch, reused frame to frame
	buf     []byte
	req     wire.Request
	wrs     []rdma.WorkRequest
	results []wire.Result
	readBuf []byte
	done    []int64
	seq     uint64
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	c := &serverConn{
		s: s, nc: nc, remote: nc.RemoteAddr().String(),
		out: make(chan outFrame, s.cfg.MaxInFlight), quit: make(chan struct{}),
	}
	c.log = s.log.With("remote", c.remote)
	c.cond = sync.NewCond(&c.mu)
	return c
}

// abort closes the socket and tells the writer to drop delayed responses:
// both goroutines exit promptly.
func (c *serverConn) abort() {
	c.abortOnce.Do(func() { close(c.quit) })
	c.nc.Close()
}

// drain makes the reader stop after the frame it is reading, if any.
func (c *serverConn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	c.nc.SetReadDeadline(time.Now())
}

func (c *serverConn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

// push hands a response to the writer, waiting for room in the byte budget.
func (c *serverConn) push(f outFrame) {
	n := len(f.buf)
	c.mu.Lock()
	for c.queued > 0 && c.queued+n > c.s.cfg.MaxQueuedBytes && !c.dead {
		c.cond.Wait()
	}
	c.queued += n
	c.mu.Unlock()
	c.out <- f // the writer drains out until it is closed, even after a failure
}

// setDeadline sets the read deadline d from now (none if d is 0), unless the
// connection is draining, whose deadline (now) must stay; it locks c.mu so
// that it cannot undo a concurrent drain.
func (c *serverConn) setDeadline(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.draining:
	case d > 0:
		c.nc.SetReadDeadline(time.Now().Add(d))
	default:
		c.nc.SetReadDeadline(time.Time{})
	}
}

// handshakeMax caps the first frame: a Hello is HeaderSize+6 bytes, plus
// 1+wire.MaxTokenLen with a token.
const handshakeMax = 512

func (c *serverConn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.out)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	if !c.handshake(br) {
		return
	}
	cfg := &c.s.cfg
	for {
		if br.Buffered() == 0 {
			c.setDeadline(cfg.IdleTimeout)
			if _, err := br.Peek(1); err != nil {
				c.readFailed(err, true)
				return
			}
		}
		c.setDeadline(cfg.ReadTimeout)
		frame, err := wire.ReadFrame(br, c.buf, wire.MaxFrameSize)
		if err != nil {
			c.readFailed(err, false)
			return
		}
		c.buf = frame
		if err := wire.DecodeRequest(frame, &c.req); err != nil {
			c.malformed(c.req.ID, err)
			return
		}
		if !c.handle(&c.req) {
			return
		}
		if cap(c.buf) > 1<<20 {
			c.buf = nil // do not keep a large frame's buffer for an idle connection
		}
	}
}

func (c *serverConn) handshake(br *bufio.Reader) bool {
	c.setDeadline(c.s.cfg.HandshakeTimeout)
	frame, err := wire.ReadFrame(br, nil, handshakeMax)
	if err != nil {
		c.readFailed(err, false)
		return false
	}
	var req wire.Request
	if err := wire.DecodeRequest(frame, &req); err != nil {
		c.malformed(req.ID, err)
		return false
	}
	if req.Kind != wire.KindHello {
		c.malformed(req.ID, fmt.Errorf("first frame is %s, not hello", req.Kind))
		return false
	}
	if req.Magic != wire.Magic || req.Version != wire.Version {
		c.log.Warn("mn: refusing client: protocol mismatch", "magic", fmt.Sprintf("0x%08x", req.Magic), "version", req.Version)
		c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: wire.NewError(wire.CodeVersion,
			fmt.Sprintf("memory node speaks protocol %d (magic 0x%08x), client sent %d (magic 0x%08x)", wire.Version, wire.Magic, req.Version, req.Magic))}, 0, true)
		return false
	}
	if tok := c.s.cfg.Token; len(tok) > 0 && subtle.ConstantTimeCompare(req.Token, tok) != 1 {
		c.s.refused.Add(1)
		c.log.Warn("mn: refusing client: bad or missing token", "refused", c.s.refused.Load())
		c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: wire.NewError(wire.CodeUnauthorized,
			"memory node requires a token")}, 0, true)
		return false
	}
	c.reply(&wire.Response{Kind: wire.KindHelloOK, ID: req.ID, Hello: c.s.limits}, 0, false)
	return true
}

// readFailed handles a failed read: a clean close, a drain, or an error.
func (c *serverConn) readFailed(err error, betweenFrames bool) {
	switch {
	case c.isDraining():
		c.reply(&wire.Response{Kind: wire.KindError, Err: wire.NewError(wire.CodeShuttingDown, "memory node shutting down")}, 0, true)
	case errors.Is(err, wire.ErrMalformed):
		c.malformed(0, err)
	case betweenFrames && errors.Is(err, io.EOF):
		c.log.Debug("mn: connection closed by client")
	case errors.Is(err, os.ErrDeadlineExceeded):
		if betweenFrames {
			c.log.Info("mn: closing idle connection", "idle_timeout", c.s.cfg.IdleTimeout)
		} else {
			c.log.Warn("mn: closing connection: frame not received in time", "err", err)
		}
	case errors.Is(err, net.ErrClosed):
	default:
		c.log.Warn("mn: connection read failed", "err", err)
	}
}

// malformed answers a frame that could not be decoded and closes the connection.
func (c *serverConn) malformed(id uint64, err error) {
	c.log.Warn("mn: malformed frame; closing connection", "err", err)
	c.reply(&wire.Response{Kind: wire.KindError, ID: id, Err: wire.NewError(wire.CodeMalformed, err.Error())}, 0, true)
}

// reply encodes r and queues it.
func (c *serverConn) reply(r *wire.Response, sendAt int64, closeAfter bool) {
	b, err := wire.AppendResponse(getBuf(wire.ResponseSize(r)), r)
	if err != nil {
		// Only a server bug gets here; answer with an internal error instead.
		c.log.Error("mn: cannot encode response", "kind", r.Kind, "err", err)
		e := wire.Response{Kind: wire.KindError, ID: r.ID, Err: wire.NewError(wire.CodeInternal, err.Error())}
		b, _ = wire.AppendResponse(b[:0], &e)
	}
	// Fast path: nothing is queued or being written, so write it from here and
	// save the hand-off to the writer. Responses may then overtake one the
	// writer has just taken; clients match responses by id and restore
	// posting order per queue pair, so the order on the wire does not matter.
	if sendAt == 0 && !closeAfter && len(c.out) == 0 && c.wmu.TryLock() {
		c.mu.Lock()
		dead := c.dead
		c.mu.Unlock()
		if !dead {
			if d := c.s.cfg.WriteTimeout; d > 0 {
				c.nc.SetWriteDeadline(time.Now().Add(d))
			}
			if _, err := c.nc.Write(b); err != nil {
				c.writeFailed(err)
			}
		}
		c.wmu.Unlock()
		putBuf(b)
		return
	}
	c.seq++
	c.push(outFrame{buf: b, sendAt: sendAt, seq: c.seq, close: closeAfter})
}

// handle serves one decoded request; false means stop reading.
func (c *serverConn) handle(req *wire.Request) bool {
	switch req.Kind {
	case wire.KindBatch:
		c.batch(req)
	case wire.KindRegister:
		r, err := c.register(req.Name, req.Length)
		if err != nil {
			c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: *err}, 0, false)
		} else {
			c.reply(&wire.Response{Kind: wire.KindRegion, ID: req.ID, Region: r}, 0, false)
		}
	case wire.KindListRegions:
		regions := c.s.mem.Regions()
		if len(regions) > wire.MaxRegions {
			c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: wire.NewError(wire.CodeInternal,
				fmt.Sprintf("memory node holds %d regions, more than a reply lists (%d)", len(regions), wire.MaxRegions))}, 0, false)
		} else {
			c.reply(&wire.Response{Kind: wire.KindRegions, ID: req.ID, Regions: regions}, 0, false)
		}
	default:
		c.malformed(req.ID, fmt.Errorf("unexpected %s request", req.Kind))
		return false
	}
	return true
}

func (c *serverConn) register(name string, length uint64) (rdma.Region, *wire.Error) {
	s := c.s
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if _, exists := s.mem.Lookup(name); !exists && len(s.mem.Regions()) >= wire.MaxRegions {
		e := wire.NewError(wire.CodeOutOfMemory, fmt.Sprintf("region %q: memory node already holds %d regions (max %d)", name, wire.MaxRegions, wire.MaxRegions))
		return rdma.Region{}, &e
	}
	r, err := s.mem.Register(name, length)
	if err != nil {
		code := wire.CodeInvalidArgument
		if errors.Is(err, rdma.ErrOutOfMemory) {
			code = wire.CodeOutOfMemory
		}
		e := wire.NewError(code, err.Error())
		return rdma.Region{}, &e
	}
	c.log.Debug("mn: region registered", "name", r.Name, "length", r.Length)
	return r, nil
}

// batch executes a doorbell batch and queues its results.
func (c *serverConn) batch(req *wire.Request) {
	n := len(req.WRs)
	if cap(c.wrs) < n {
		c.wrs = make([]rdma.WorkRequest, n)
		c.results = make([]wire.Result, n)
		c.done = make([]int64, n)
	}
	wrs, results := c.wrs[:n], c.results[:n]
	readBytes := 0
	for i := range req.WRs {
		if req.WRs[i].Op == rdma.OpRead {
			readBytes += int(req.WRs[i].ReadLen)
		}
	}
	if cap(c.readBuf) < readBytes {
		c.readBuf = make([]byte, readBytes)
	}
	scratch := c.readBuf[:readBytes]
	for i := range req.WRs {
		w := &req.WRs[i]
		wrs[i] = rdma.WorkRequest{Op: w.Op, RKey: w.RKey, RemoteAddr: w.RemoteAddr, Compare: w.Compare, Swap: w.Swap, Add: w.Add}
		switch w.Op {
		case rdma.OpRead:
			wrs[i].Local, scratch = scratch[:w.ReadLen:w.ReadLen], scratch[w.ReadLen:]
		case rdma.OpWrite:
			wrs[i].Local = w.Data
		}
	}
	var sendAt int64
	s := c.s
	if s.nic != nil {
		done := c.done[:n]
		// Scheduling and execution happen under one lock so that atomics take
		// effect in the order in which they hold their NIC slots.
		s.nicMu.Lock()
		s.nic.ScheduleBatch(rdma.Now(), wrs, done)
		c.execute(wrs, results)
		s.nicMu.Unlock()
		for _, t := range done {
			sendAt = max(sendAt, t)
		}
	} else {
		c.execute(wrs, results)
	}
	s.stats.Doorbell()
	for i := range wrs {
		if results[i].Status == rdma.StatusSuccess && wrs[i].Op == rdma.OpRead {
			results[i].Data = wrs[i].Local
		}
		s.stats.Record(&wrs[i], rdma.Completion{Op: results[i].Op, Status: results[i].Status, Value: results[i].Value})
	}
	c.reply(&wire.Response{Kind: wire.KindBatchResult, ID: req.ID, Results: results}, sendAt, false)
	for i := range wrs {
		wrs[i].Local = nil
		results[i].Data = nil
	}
	if cap(c.readBuf) > 1<<20 {
		c.readBuf = nil
	}
}

// execute runs a doorbell in order. As on a reliable-connected QP, which
// enters the error state at its first failed work request, a failure ends
// the doorbell: the work requests after it are not applied and complete with
// StatusFlushed. A prefix of a doorbell is applied, never a subset with holes.
func (c *serverConn) execute(wrs []rdma.WorkRequest, results []wire.Result) {
	failed := false
	for i := range wrs {
		if failed {
			results[i] = wire.Result{Op: wrs[i].Op, Status: rdma.StatusFlushed}
			continue
		}
		comp := c.s.mem.Execute(&wrs[i])
		results[i] = wire.Result{Op: comp.Op, Status: comp.Status, Value: comp.Value}
		failed = comp.Status != rdma.StatusSuccess
	}
}

// spinBelow: closer than this to a response's send time the writer spins
// instead of sleeping, because timers overshoot by tens of microseconds.
const spinBelow = 60 * time.Microsecond

// frameHeap orders delayed responses by send time, then by arrival.
type frameHeap []outFrame

func (h frameHeap) Len() int { return len(h) }
func (h frameHeap) Less(i, j int) bool {
	return h[i].sendAt < h[j].sendAt || h[i].sendAt == h[j].sendAt && h[i].seq < h[j].seq
}
func (h frameHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *frameHeap) Push(x any)   { *h = append(*h, x.(outFrame)) }
func (h *frameHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	*h = old[:len(old)-1]
	return f
}

// writeLoop writes queued responses. Everything passes through a heap
// ordered by send time (0 for "at once") and arrival; it takes what is due,
// writes it as one burst under wmu and flushes, so that responses queued
// together leave in one system call.
func (c *serverConn) writeLoop() {
	defer c.s.wg.Done()
	defer c.s.removeConn(c)
	defer c.nc.Close()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var pending frameHeap
	var ready []outFrame
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	out := c.out
	closing := false // a close frame was written, or the connection aborted: discard
	for {
		// Take what is queued, without blocking.
	drain:
		for out != nil && len(pending) < cap(c.out) {
			select {
			case f, ok := <-out:
				if !ok {
					out = nil
					break drain
				}
				heap.Push(&pending, f)
			default:
				break drain
			}
		}
		// Write what is due, as one burst.
		ready = ready[:0]
		now := rdma.Now()
		for len(pending) > 0 && (pending[0].sendAt <= now || closing) {
			ready = append(ready, heap.Pop(&pending).(outFrame))
		}
		if len(ready) > 0 {
			c.wmu.Lock()
			for _, f := range ready {
				c.write(bw, f, &closing)
			}
			c.flush(bw)
			c.wmu.Unlock()
			clear(ready)
			continue
		}
		if out == nil && len(pending) == 0 {
			return
		}
		// Nothing due: block for the next frame or the next send time.
		if len(pending) == 0 {
			if f, ok := <-out; ok {
				heap.Push(&pending, f)
			} else {
				out = nil
			}
			continue
		}
		wait := time.Duration(pending[0].sendAt - rdma.Now())
		if wait <= spinBelow {
			runtime.Gosched()
			continue
		}
		if timer == nil {
			timer = time.NewTimer(wait - spinBelow)
		} else {
			timer.Reset(wait - spinBelow)
		}
		select {
		case f, ok := <-out:
			if ok {
				heap.Push(&pending, f)
			} else {
				out = nil
			}
		case <-timer.C:
		case <-c.quit:
			closing = true // aborted: drop what is delayed
		}
		timer.Stop()
	}
}

// write writes one frame (or discards it once writing has failed or a close
// frame has gone out) and releases its share of the byte budget.
func (c *serverConn) write(bw *bufio.Writer, f outFrame, closing *bool) {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if !dead && !*closing {
		if d := c.s.cfg.WriteTimeout; d > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(d))
		}
		_, err := bw.Write(f.buf)
		if err == nil && f.close {
			err = bw.Flush()
			*closing = true
			c.nc.Close() // unblocks the reader if it is still reading
		}
		if err != nil {
			c.writeFailed(err)
		}
	}
	c.mu.Lock()
	c.queued -= len(f.buf)
	c.mu.Unlock()
	c.cond.Signal()
	putBuf(f.buf)
}

func (c *serverConn) flush(bw *bufio.Writer) {
	if bw.Buffered() == 0 {
		return
	}
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		bw.Reset(c.nc)
		return
	}
	if d := c.s.cfg.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}
	if err := bw.Flush(); err != nil {
		c.writeFailed(err)
		bw.Reset(c.nc)
	}
}

func (c *serverConn) writeFailed(err error) {
	c.mu.Lock()
	already := c.dead
	c.dead = true
	c.mu.Unlock()
	c.cond.Broadcast()
	c.nc.Close()
	if !already && !errors.Is(err, net.ErrClosed) {
		c.log.Warn("mn: connection write failed; closing", "err", err)
	}
}
