package tcp

import (
	"bufio"
	"container/heap"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"
	"github.com/aura-runtime/aura/rdma/wire"
)

// Journal makes the memory's mutations durable before they are
// acknowledged; *durable.Store implements it. With a journal the server
// logs every mutation a request made (region registrations, and the
// post-images of successful WRITEs, CASes and FAAs) in the order it applied
// them, and sends no response — of any kind, reads included — before the
// journal is durable up to the request's own record and every record that
// wrote what the request read: a client never sees, and so never builds
// on, memory that a crash could take back.
type Journal interface {
	// AppendRegion logs a new region and returns its sequence number.
	AppendRegion(r rdma.Region) (uint64, error)
	// AppendWrites logs one request's post-images (copying the data) and
	// returns the record's sequence number.
	AppendWrites(ws []durable.Write) (uint64, error)
	// Appended is the last sequence number appended.
	Appended() uint64
	// Durable is the last sequence number on disk.
	Durable() uint64
	// WaitDurable waits until Durable() >= seq, the journal fails, or
	// cancel is closed.
	WaitDurable(seq uint64, cancel <-chan struct{}) error
}

// BarrierJournal is a Journal that snapshots memory while requests run
// (durable.Store): the server gives it a barrier that returns once every
// mutation already executed has appended its record, since a request
// changes memory before it logs its post-images.
type BarrierJournal interface {
	Journal
	SetMutationBarrier(barrier func())
}

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
	// Journal, when non-nil, makes every mutation durable before its reply
	// (see Journal). A journal error stops the server: Serve returns it and
	// no response is sent after it (fail-stop; a restart recovers what was
	// durable). Default nil: memory only, and the verb path pays nothing.
	Journal Journal
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

	// With a journal, requests that mutate hold durMu exclusively while
	// they execute, append and mark lastWrite, and the others hold it
	// shared while they execute and look up lastWrite: so the log's order
	// is the order in which mutations took effect, and a request's wait
	// covers every mutation it could have observed.
	durMu      sync.RWMutex
	journalErr atomic.Pointer[error]
	// lastWrite holds, per hash slot of 64-byte lines of memory, the
	// sequence number of the last record that wrote the line (with a
	// journal only). A request that logs nothing waits only for the
	// records that wrote what it read, not for every pending record:
	// most reads of a busy node touch nothing in flight and are answered
	// at once. Collisions only make a wait longer, never shorter.
	lastWrite []atomic.Uint64

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
	if cfg.Journal != nil {
		s.lastWrite = make([]atomic.Uint64, lastWriteSlots)
		if b, ok := cfg.Journal.(BarrierJournal); ok {
			// A mutation holds durMu exclusively from executing to
			// appending: taking it once waits for those in flight.
			b.SetMutationBarrier(func() { s.durMu.Lock(); s.durMu.Unlock() })
		}
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
				if jerr := s.JournalErr(); jerr != nil {
					return jerr
				}
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

// JournalErr returns the journal error that stopped the server, if any.
func (s *Server) JournalErr() error {
	if p := s.journalErr.Load(); p != nil {
		return *p
	}
	return nil
}

// journalFailed records the first journal error and stops the server: it
// can no longer promise that what it acknowledges survives a crash. Called
// with durMu held exclusively, so no request executes after the flag is set
// without seeing it.
func (s *Server) journalFailed(err error) {
	err = fmt.Errorf("tcp: memory node journal failed; stopping: %w", err)
	if s.journalErr.CompareAndSwap(nil, &err) {
		s.log.Error("mn: journal failed: stopping the memory node", "err", err)
		go s.Close()
	}
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
	// durable is the journal sequence number that must be on disk before
	// the frame is sent (0: none).
	durable uint64
	close   bool // close the connection after writing it
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
	posts   []durable.Write // post-images of a batch, for the journal
	words   []byte          // 8-byte post-images of a batch's atomics
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
	c.replyAfter(r, sendAt, closeAfter, 0)
}

// replyAfter is reply for a response that may leave only once the journal
// is durable up to seq (0: at once).
func (c *serverConn) replyAfter(r *wire.Response, sendAt int64, closeAfter bool, seq uint64) {
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
	if seq > 0 && seq <= c.s.cfg.Journal.Durable() {
		seq = 0 // durable already: nothing to wait for
	}
	// With a journal the writer may be waiting for the log with frames
	// queued; a response that needs nothing from the log goes past them.
	if sendAt == 0 && seq == 0 && !closeAfter && (len(c.out) == 0 || c.s.cfg.Journal != nil) && c.wmu.TryLock() {
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
	c.push(outFrame{buf: b, sendAt: sendAt, seq: c.seq, close: closeAfter, durable: seq})
}

// handle serves one decoded request; false means stop reading.
func (c *serverConn) handle(req *wire.Request) bool {
	switch req.Kind {
	case wire.KindBatch:
		c.batch(req)
	case wire.KindRegister:
		r, seq, err := c.register(req.Name, req.Length)
		if err != nil {
			c.replyAfter(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: *err}, 0, false, seq)
		} else {
			c.replyAfter(&wire.Response{Kind: wire.KindRegion, ID: req.ID, Region: r}, 0, false, seq)
		}
	case wire.KindListRegions:
		var seq uint64
		j := c.s.cfg.Journal
		if j != nil {
			c.s.durMu.RLock()
		}
		regions := c.s.mem.Regions()
		if j != nil {
			seq = j.Appended()
			c.s.durMu.RUnlock()
			if c.s.JournalErr() != nil {
				return false
			}
		}
		if len(regions) > wire.MaxRegions {
			c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: wire.NewError(wire.CodeInternal,
				fmt.Sprintf("memory node holds %d regions, more than a reply lists (%d)", len(regions), wire.MaxRegions))}, 0, false)
		} else {
			c.replyAfter(&wire.Response{Kind: wire.KindRegions, ID: req.ID, Regions: regions}, 0, false, seq)
		}
	default:
		c.malformed(req.ID, fmt.Errorf("unexpected %s request", req.Kind))
		return false
	}
	return true
}

// register registers a region; with a journal it also returns the
// sequence number the reply must wait for (the registration's, or the last
// appended if the region existed: it may not be durable yet).
func (c *serverConn) register(name string, length uint64) (rdma.Region, uint64, *wire.Error) {
	s := c.s
	s.regMu.Lock()
	defer s.regMu.Unlock()
	j := s.cfg.Journal
	if j != nil {
		s.durMu.Lock()
		defer s.durMu.Unlock()
		if s.JournalErr() != nil {
			e := wire.NewError(wire.CodeInternal, "memory node journal failed")
			return rdma.Region{}, 0, &e
		}
	}
	_, exists := s.mem.Lookup(name)
	if !exists && len(s.mem.Regions()) >= wire.MaxRegions {
		e := wire.NewError(wire.CodeOutOfMemory, fmt.Sprintf("region %q: memory node already holds %d regions (max %d)", name, wire.MaxRegions, wire.MaxRegions))
		return rdma.Region{}, 0, &e
	}
	r, err := s.mem.Register(name, length)
	var seq uint64
	if j != nil {
		seq = j.Appended()
	}
	if err != nil {
		code := wire.CodeInvalidArgument
		if errors.Is(err, rdma.ErrOutOfMemory) {
			code = wire.CodeOutOfMemory
		}
		e := wire.NewError(code, err.Error())
		return rdma.Region{}, seq, &e
	}
	if j != nil && !exists {
		if seq, err = j.AppendRegion(r); err != nil {
			s.journalFailed(err)
			e := wire.NewError(wire.CodeInternal, "memory node journal failed")
			return rdma.Region{}, 0, &e
		}
	}
	c.log.Debug("mn: region registered", "name", r.Name, "length", r.Length)
	return r, seq, nil
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
	var seq uint64
	s := c.s
	if j := s.cfg.Journal; j != nil {
		var ok bool
		if sendAt, seq, ok = c.runJournaled(j, wrs, results); !ok {
			e := wire.NewError(wire.CodeInternal, "memory node journal failed")
			c.reply(&wire.Response{Kind: wire.KindError, ID: req.ID, Err: e}, 0, true)
			for i := range wrs {
				wrs[i].Local = nil
			}
			return
		}
	} else {
		sendAt = c.run(wrs, results)
	}
	s.stats.Doorbell()
	for i := range wrs {
		if results[i].Status == rdma.StatusSuccess && wrs[i].Op == rdma.OpRead {
			results[i].Data = wrs[i].Local
		}
		s.stats.Record(&wrs[i], rdma.Completion{Op: results[i].Op, Status: results[i].Status, Value: results[i].Value})
	}
	c.replyAfter(&wire.Response{Kind: wire.KindBatchResult, ID: req.ID, Results: results}, sendAt, false, seq)
	for i := range wrs {
		wrs[i].Local = nil
		results[i].Data = nil
	}
	if cap(c.readBuf) > 1<<20 {
		c.readBuf = nil
	}
}

// run executes a doorbell, through the cost model if one is set, and
// returns when its response may be sent.
func (c *serverConn) run(wrs []rdma.WorkRequest, results []wire.Result) (sendAt int64) {
	s := c.s
	if s.nic == nil {
		c.execute(wrs, results)
		return 0
	}
	done := c.done[:len(wrs)]
	// Scheduling and execution happen under one lock so that atomics take
	// effect in the order in which they hold their NIC slots.
	s.nicMu.Lock()
	s.nic.ScheduleBatch(rdma.Now(), wrs, done)
	c.execute(wrs, results)
	s.nicMu.Unlock()
	for _, t := range done {
		sendAt = max(sendAt, t)
	}
	return sendAt
}

// lastWriteSlots is the size of Server.lastWrite: 64 Ki slots (512 KiB),
// so that the lines a few hundred concurrent transactions write rarely
// share a slot with the lines others read.
const lastWriteSlots = 1 << 16

// lineBits: lastWrite tracks memory in lines of 1<<lineBits bytes, about a
// record header (lock word and version) plus a small payload.
const lineBits = 6

func lineSlot(rkey uint32, line uint64) uint64 {
	return (uint64(rkey)*0x9e3779b97f4a7c15 ^ (line+1)*0xc2b2ae3d27d4eb4f) >> (64 - 16)
}

// markWritten records that seq wrote [addr, addr+n) of rkey's region.
// Called with durMu held exclusively, so values only grow.
func (s *Server) markWritten(rkey uint32, addr uint64, n int, seq uint64) {
	for l := addr >> lineBits; l <= (addr+uint64(n)-1)>>lineBits; l++ {
		s.lastWrite[lineSlot(rkey, l)].Store(seq)
	}
}

// lastWritten returns the last record that wrote into [addr, addr+n).
func (s *Server) lastWritten(rkey uint32, addr uint64, n int) uint64 {
	var seq uint64
	if n <= 0 || addr+uint64(n) < addr {
		return 0
	}
	for l := addr >> lineBits; l <= (addr+uint64(n)-1)>>lineBits; l++ {
		seq = max(seq, s.lastWrite[lineSlot(rkey, l)].Load())
	}
	return seq
}

// observed returns the last record that wrote anything the doorbell read
// or compared against.
func (s *Server) observed(wrs []rdma.WorkRequest) uint64 {
	var seq uint64
	for i := range wrs {
		n := len(wrs[i].Local)
		if wrs[i].Op.IsAtomic() {
			n = rdma.AtomicSize
		}
		seq = max(seq, s.lastWritten(wrs[i].RKey, wrs[i].RemoteAddr, n))
	}
	return seq
}

// runJournaled executes a doorbell and logs what it changed (see Journal
// and Server.durMu); it returns the send time and the sequence number the
// response waits for. False: the journal failed (or had failed), the
// server is stopping, and nothing may be acknowledged.
func (c *serverConn) runJournaled(j Journal, wrs []rdma.WorkRequest, results []wire.Result) (int64, uint64, bool) {
	s := c.s
	mutates := false
	for i := range wrs {
		if wrs[i].Op != rdma.OpRead {
			mutates = true
			break
		}
	}
	if !mutates {
		s.durMu.RLock()
		if s.JournalErr() != nil {
			s.durMu.RUnlock()
			return 0, 0, false
		}
		sendAt := c.run(wrs, results)
		seq := s.observed(wrs)
		s.durMu.RUnlock()
		return sendAt, seq, true
	}
	s.durMu.Lock()
	defer s.durMu.Unlock()
	if s.JournalErr() != nil {
		return 0, 0, false
	}
	sendAt := c.run(wrs, results)
	// Post-images of what took effect: a successful CAS (prior value equal
	// to Compare) left Swap, an FAA left prior+Add, a WRITE its data.
	posts, words := c.posts[:0], c.words[:0]
	for i := range wrs {
		w := &wrs[i]
		if results[i].Status != rdma.StatusSuccess {
			continue
		}
		switch w.Op {
		case rdma.OpWrite:
			posts = append(posts, durable.Write{RKey: w.RKey, Addr: w.RemoteAddr, Data: w.Local})
		case rdma.OpCompareAndSwap:
			if results[i].Value == w.Compare {
				words = binary.LittleEndian.AppendUint64(words, w.Swap)
				posts = append(posts, durable.Write{RKey: w.RKey, Addr: w.RemoteAddr})
			}
		case rdma.OpFetchAndAdd:
			words = binary.LittleEndian.AppendUint64(words, results[i].Value+w.Add)
			posts = append(posts, durable.Write{RKey: w.RKey, Addr: w.RemoteAddr})
		}
	}
	// Atomics' data point into words, which may have moved while growing.
	k := 0
	for i := range posts {
		if posts[i].Data == nil {
			posts[i].Data = words[k : k+rdma.AtomicSize : k+rdma.AtomicSize]
			k += rdma.AtomicSize
		}
	}
	var seq uint64
	if len(posts) > 0 {
		var err error
		if seq, err = j.AppendWrites(posts); err != nil {
			s.journalFailed(err)
			return 0, 0, false
		}
		// Its own record follows every record it could have observed.
		for i := range posts {
			s.markWritten(posts[i].RKey, posts[i].Addr, len(posts[i].Data), seq)
		}
	} else {
		seq = s.observed(wrs) // only failed CASes: it saw values, changed none
	}
	clear(posts)
	c.posts, c.words = posts[:0], words[:0]
	return sendAt, seq, true
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
			if !closing && c.s.cfg.Journal != nil {
				var ok bool
				if ready, ok = c.durableOnly(ready, &pending); !ok {
					closing = true // the journal failed or the connection aborted: send nothing more
					c.nc.Close()
				}
			}
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

// durableOnly waits until the journal holds the mutations at least one of
// the frames' responses depends on, and returns the frames that may leave
// now; the others go back to pending for a later burst, so that one slow
// record does not hold back the responses that do not need it. False if
// the journal failed or the connection was aborted.
func (c *serverConn) durableOnly(ready []outFrame, pending *frameHeap) ([]outFrame, bool) {
	j := c.s.cfg.Journal
	low := uint64(math.MaxUint64)
	for i := range ready {
		if d := ready[i].durable; d > 0 && d < low {
			low = d
		}
	}
	if low == math.MaxUint64 {
		return ready, true
	}
	if j.Durable() < low {
		if err := j.WaitDurable(low, c.quit); err != nil {
			if errors.Is(err, durable.ErrLogFailed) {
				// Fail-stop, as when an append fails: the node cannot
				// promise durability any more.
				c.s.durMu.Lock()
				c.s.journalFailed(err)
				c.s.durMu.Unlock()
			} else if !errors.Is(err, durable.ErrClosed) {
				c.log.Warn("mn: responses dropped: journal not durable", "err", err)
			}
			return ready, false
		}
	}
	d := j.Durable()
	now := ready[:0]
	for _, f := range ready {
		if f.durable <= d {
			now = append(now, f)
		} else {
			heap.Push(pending, f)
		}
	}
	return now, true
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
