package tcp

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// ClientConfig configures a Device. Zero fields take the defaults below; for
// RequestTimeout a negative value disables it.
type ClientConfig struct {
	// DialTimeout bounds one connection attempt, handshake included. Default 5s.
	DialTimeout time.Duration
	// RequestTimeout: when requests are outstanding and no response arrives
	// for this long, the connection is declared lost (its outstanding work
	// requests complete with StatusTransportError). It also bounds one socket
	// write. Default 10s: a healthy memory node answers in microseconds, so
	// this only catches a hung node or a black-holed network.
	RequestTimeout time.Duration
	// RedialAttempts is how many connection attempts Dial, and each Post or
	// control call that finds the connection lost, makes before failing.
	// Default 5.
	RedialAttempts int
	// RedialBaseDelay is the wait after the first failed attempt; it doubles
	// after each further one (with ±25% jitter) up to RedialMaxDelay. Defaults
	// 20ms and 1s: a restarting memory node is back within a second or two,
	// and five attempts give up after about 1.5s plus dial time.
	RedialBaseDelay time.Duration
	RedialMaxDelay  time.Duration
	// CloseTimeout bounds how long Device.Close waits for sent work requests
	// to complete before it closes the connection. Default 2s.
	CloseTimeout time.Duration
	// MaxInFlight caps request frames outstanding on the connection; Post waits
	// for a slot when it is reached. Default (and upper bound): the server's
	// announced MaxInFlight.
	MaxInFlight int
	// Logger receives connection events. Default slog.Default().
	Logger *slog.Logger
	// Token is sent in every Hello, for a memory node that requires one
	// (ServerConfig.Token); at most wire.MaxTokenLen bytes. Default none.
	Token []byte
}

// Client defaults; see ClientConfig.
const (
	DefaultDialTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultRedialAttempts  = 5
	DefaultRedialBaseDelay = 20 * time.Millisecond
	DefaultRedialMaxDelay  = time.Second
	DefaultCloseTimeout    = 2 * time.Second
)

// WithDefaults returns the config with zero fields replaced by defaults.
func (c ClientConfig) WithDefaults() ClientConfig {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	c.RequestTimeout = dur(c.RequestTimeout, DefaultRequestTimeout)
	if c.RedialAttempts <= 0 {
		c.RedialAttempts = DefaultRedialAttempts
	}
	if c.RedialBaseDelay <= 0 {
		c.RedialBaseDelay = DefaultRedialBaseDelay
	}
	if c.RedialMaxDelay <= 0 {
		c.RedialMaxDelay = DefaultRedialMaxDelay
	}
	c.RedialMaxDelay = max(c.RedialMaxDelay, c.RedialBaseDelay)
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// errDeviceClosed is returned by calls on a closed device.
var errDeviceClosed = fmt.Errorf("tcp: device closed: %w", rdma.ErrQPClosed)

// Device is a connection to a memory node; it implements rdma.Device.
type Device struct {
	addr     string
	cfg      ClientConfig
	log      *slog.Logger
	counters *rdma.Counters
	ctx      context.Context // ends when the device closes; aborts redials
	cancel   context.CancelFunc

	dialMu sync.Mutex // one (re)dial at a time

	live atomic.Pointer[conn] // the current connection while the device is open

	mu     sync.Mutex
	cur    *conn
	qps    map[*queuePair]struct{}
	closed bool
	wg     sync.WaitGroup // connection goroutines
}

var _ rdma.Device = (*Device)(nil)

// Dial connects to the memory node at addr (host:port), retrying with backoff
// as ClientConfig says, and returns a device on it.
func Dial(ctx context.Context, addr string, cfg ClientConfig) (*Device, error) {
	cfg = cfg.WithDefaults()
	d := &Device{addr: addr, cfg: cfg, log: cfg.Logger.With("mn", addr), counters: rdma.NewCounters(nil), qps: make(map[*queuePair]struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if _, err := d.conn(ctx); err != nil {
		d.cancel()
		return nil, err
	}
	return d, nil
}

// Addr returns the memory node's address.
func (d *Device) Addr() string { return d.addr }

// Stats returns the verb counters summed over every queue pair of the device.
func (d *Device) Stats() rdma.Stats { return d.counters.Snapshot() }

// Limits returns what the memory node announced on the current connection
// (zero if there is none).
func (d *Device) Limits() wire.Limits {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return wire.Limits{}
	}
	return d.cur.limits
}

func (d *Device) current() *conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

// conn returns a live connection, redialing if the current one is lost.
func (d *Device) conn(ctx context.Context) (*conn, error) {
	if c := d.live.Load(); c != nil && c.alive() {
		return c, nil // fast path: no device lock on every Post
	}
	d.mu.Lock()
	c, closed := d.cur, d.closed
	d.mu.Unlock()
	if closed {
		return nil, errDeviceClosed
	}
	if c != nil && c.alive() {
		return c, nil
	}
	d.dialMu.Lock()
	defer d.dialMu.Unlock()
	if c = d.current(); c != nil && c.alive() {
		return c, nil // another caller redialed meanwhile
	}
	// Dial on a context that also ends when the device closes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.ctx, cancel)
	defer stop()
	nc, limits, err := d.dialBackoff(ctx)
	if err != nil {
		if d.ctx.Err() != nil {
			return nil, errDeviceClosed
		}
		return nil, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		nc.Close()
		return nil, errDeviceClosed
	}
	redial := d.cur != nil
	c = newConn(d, nc, limits)
	d.cur = c
	d.live.Store(c)
	d.wg.Add(2)
	d.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
	if redial {
		d.log.Info("rdma/tcp: reconnected to memory node")
	}
	return c, nil
}

// dialBackoff makes up to RedialAttempts connection attempts.
func (d *Device) dialBackoff(ctx context.Context) (net.Conn, wire.Limits, error) {
	delay := d.cfg.RedialBaseDelay
	var last error
	attempts := 0
	for attempt := 1; ; attempt++ {
		attempts = attempt
		nc, limits, err := d.dialOnce(ctx)
		if err == nil {
			return nc, limits, nil
		}
		last = err
		var we *wire.Error
		if errors.As(err, &we) && (we.Code == wire.CodeVersion || we.Code == wire.CodeUnauthorized) {
			break // retrying cannot help
		}
		if attempt >= d.cfg.RedialAttempts || ctx.Err() != nil {
			break
		}
		jittered := time.Duration(float64(delay) * (0.75 + 0.5*rand.Float64()))
		t := time.NewTimer(jittered)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(2*delay, d.cfg.RedialMaxDelay)
	}
	if err := ctx.Err(); err != nil && !errors.Is(last, err) {
		last = fmt.Errorf("%w: %w", err, last)
	}
	return nil, wire.Limits{}, fmt.Errorf("tcp: cannot connect to memory node %s (%d attempt(s)): %w: %w", d.addr, attempts, rdma.ErrConnectionLost, last)
}

// dialOnce connects and exchanges Hello.
func (d *Device) dialOnce(ctx context.Context) (net.Conn, wire.Limits, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout)
	defer cancel()
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, wire.Limits{}, err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	limits, err := handshake(nc, d.cfg.Token)
	if !stop() && err == nil {
		err = ctx.Err() // the deadline fired after the handshake finished
	}
	if err != nil {
		nc.Close()
		if ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("handshake: %w", ctx.Err())
		}
		return nil, wire.Limits{}, err
	}
	nc.SetDeadline(time.Time{})
	return nc, limits, nil
}

func handshake(nc net.Conn, token []byte) (wire.Limits, error) {
	hello := wire.Request{Kind: wire.KindHello, Magic: wire.Magic, Version: wire.Version, Token: token}
	b, err := wire.AppendRequest(nil, &hello)
	if err != nil {
		return wire.Limits{}, err
	}
	if _, err := nc.Write(b); err != nil {
		return wire.Limits{}, fmt.Errorf("handshake: %w", err)
	}
	frame, err := wire.ReadFrame(nc, nil, 64<<10)
	if err != nil {
		return wire.Limits{}, fmt.Errorf("handshake: %w", err)
	}
	var resp wire.Response
	if err := wire.DecodeResponse(frame, &resp); err != nil {
		return wire.Limits{}, fmt.Errorf("handshake: %w", err)
	}
	switch resp.Kind {
	case wire.KindHelloOK:
	case wire.KindError:
		e := resp.Err
		return wire.Limits{}, &e
	default:
		return wire.Limits{}, fmt.Errorf("handshake: %w: got %s", wire.ErrProtocol, resp.Kind)
	}
	l := resp.Hello
	if l.Version != wire.Version || l.MaxInFlight == 0 {
		return wire.Limits{}, fmt.Errorf("handshake: %w: server announced version %d, max in flight %d", wire.ErrProtocol, l.Version, l.MaxInFlight)
	}
	if l.MaxBatch < rdma.MaxBatch || l.MaxBatchBytes < rdma.MaxBatchBytes || l.MaxTransferBytes < rdma.MaxTransferBytes {
		return wire.Limits{}, fmt.Errorf("handshake: %w: server limits (batch %d, %d bytes, transfer %d) below the verbs API's", wire.ErrProtocol, l.MaxBatch, l.MaxBatchBytes, l.MaxTransferBytes)
	}
	return l, nil
}

// RegisterRegion implements rdma.Device.
func (d *Device) RegisterRegion(ctx context.Context, name string, length uint64) (rdma.Region, error) {
	if name == "" || len(name) > rdma.MaxRegionNameLen {
		return rdma.Region{}, fmt.Errorf("tcp: region name must be 1..%d bytes, got %d: %w", rdma.MaxRegionNameLen, len(name), wire.ErrInvalidArgument)
	}
	resp, err := d.control(ctx, &wire.Request{Kind: wire.KindRegister, Name: name, Length: length})
	if err != nil {
		return rdma.Region{}, err
	}
	if resp.Kind != wire.KindRegion {
		return rdma.Region{}, fmt.Errorf("tcp: %w: register answered with %s", wire.ErrProtocol, resp.Kind)
	}
	return resp.Region, nil
}

// Regions implements rdma.Device.
func (d *Device) Regions(ctx context.Context) ([]rdma.Region, error) {
	resp, err := d.control(ctx, &wire.Request{Kind: wire.KindListRegions})
	if err != nil {
		return nil, err
	}
	if resp.Kind != wire.KindRegions {
		return nil, fmt.Errorf("tcp: %w: list-regions answered with %s", wire.ErrProtocol, resp.Kind)
	}
	return resp.Regions, nil
}

// control runs an idempotent control request, retrying once on a fresh
// connection if the connection is lost.
func (d *Device) control(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := d.conn(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req)
		if err != nil && errors.Is(err, rdma.ErrConnectionLost) && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return resp, err
	}
}

// CreateQP implements rdma.Device.
func (d *Device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	cfg = cfg.WithDefaults()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errDeviceClosed
	}
	q := &queuePair{dev: d, cq: rdma.NewCompletionQueue(cfg.SendQueueDepth), counters: rdma.NewCounters(d.counters)}
	d.qps[q] = struct{}{}
	return q, nil
}

func (d *Device) removeQP(q *queuePair) {
	d.mu.Lock()
	delete(d.qps, q)
	d.mu.Unlock()
}

// Close implements rdma.Device: it stops every queue pair (flushing what was
// never sent), waits up to CloseTimeout for sent work requests to complete,
// closes the connection (what is still outstanding completes with
// StatusTransportError), closes the completion queues and waits for the
// connection's goroutines.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.live.Store(nil)
	qps := make([]*queuePair, 0, len(d.qps))
	for q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	d.cancel()
	var started []*queuePair
	for _, q := range qps {
		if q.beginClose() {
			started = append(started, q)
		}
	}
	// A redial in progress finishes (or aborts) before the connection is read.
	d.dialMu.Lock()
	c := d.current()
	d.dialMu.Unlock()
	if c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.CloseTimeout)
		c.waitIdle(ctx)
		cancel()
		c.fail(fmt.Errorf("%w: device closed", rdma.ErrConnectionLost))
	}
	for _, q := range started {
		q.awaitDrained(context.Background()) // short: the connection has failed
		q.endClose()
	}
	// Queue pairs closed concurrently by their owners finish on their own.
	d.wg.Wait()
	return nil
}

// call is one request on a connection, from registration to response.
type call struct {
	id    uint64
	frame []byte
	off   int         // bytes of frame already written
	sent  bool        // (partly) written or taken by the writer: the server may have it
	b     *batch      // a Batch request, or
	qp    *queuePair  // (its queue pair)
	resp  chan result // a control request (buffered, 1)
}

type result struct {
	resp *wire.Response
	err  error
}

// conn is one TCP connection of a device: a reader and a writer goroutine.
type conn struct {
	d      *Device
	nc     net.Conn
	limits wire.Limits
	slots  chan struct{} // in-flight semaphore: one token per outstanding request

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	queue   []*call // registered, not yet taken by the writer
	spare   []*call
	err     error         // non-nil once lost
	dead    chan struct{} // closed when lost
	idle    chan struct{} // closed when pending empties (created by waitIdle)
	wake    chan struct{} // writer wake-up, buffered 1

	wmu sync.Mutex // held while frames go to the socket (writer or a direct Post)
}

func newConn(d *Device, nc net.Conn, limits wire.Limits) *conn {
	n := int(limits.MaxInFlight)
	if d.cfg.MaxInFlight > 0 {
		n = min(n, d.cfg.MaxInFlight)
	}
	return &conn{
		d: d, nc: nc, limits: limits, slots: make(chan struct{}, n),
		nextID: 1, pending: make(map[uint64]*call), dead: make(chan struct{}), wake: make(chan struct{}, 1),
	}
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// lostErr is the error of a lost connection.
func (c *conn) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// acquire takes an in-flight slot; it fails when the connection is lost (or
// ctx ends, for control calls).
func (c *conn) acquire(ctx context.Context) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-c.dead:
		return c.lostErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) release() { <-c.slots }

// enqueue registers cl, stamps its request id into its frame and writes it
// or hands it to the writer. It refuses cl (and releases its slot) if the
// connection is already lost. If writing fails, cl stays registered and
// enqueue returns the loss for the caller to pass to fail — after releasing
// any queue-pair lock, since fail completes batches under their QP's lock.
func (c *conn) enqueue(cl *call) (refused, lost error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		c.release()
		return err, nil
	}
	cl.id = c.nextID
	c.nextID++
	le.PutUint64(cl.frame[wire.LengthSize+1:], cl.id)
	c.pending[cl.id] = cl
	if len(c.pending) == 1 {
		c.armLocked()
	}
	// Fast path: nothing queued and nobody writing, so write from here and
	// save the hand-off to the writer goroutine. Under load the queue is
	// rarely empty and frames go through the writer, which coalesces them.
	direct := len(c.queue) == 0 && c.wmu.TryLock()
	if direct {
		cl.sent = true
	} else {
		c.queue = append(c.queue, cl)
	}
	c.mu.Unlock()
	if direct {
		// A non-blocking write: Post never waits for the network. What the
		// socket does not take goes to the writer, ahead of anything queued
		// meanwhile (we hold wmu, so nothing else was written).
		n, err := tryWrite(c.nc, cl.frame)
		if err != nil {
			c.wmu.Unlock()
			// cl counts as sent (perhaps in part); fail will complete it.
			return nil, fmt.Errorf("%w: write: %w", rdma.ErrConnectionLost, err)
		}
		c.mu.Lock()
		if n < len(cl.frame) {
			cl.off = n
			c.queue = slices.Insert(c.queue, 0, cl)
		} else {
			putBuf(cl.frame)
			cl.frame = nil
		}
		more := len(c.queue) > 0
		c.mu.Unlock()
		c.wmu.Unlock()
		if !more {
			return nil, nil
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil, nil
}

// writeFrames writes frames to the socket; the caller holds wmu.
func (c *conn) writeFrames(bufs net.Buffers) error {
	if t := c.d.cfg.RequestTimeout; t > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(t))
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return fmt.Errorf("%w: write: %w", rdma.ErrConnectionLost, err)
	}
	return nil
}

// armLocked sets the read deadline: RequestTimeout from now while requests
// are outstanding, none otherwise.
func (c *conn) armLocked() {
	if t := c.d.cfg.RequestTimeout; t > 0 && len(c.pending) > 0 {
		c.nc.SetReadDeadline(time.Now().Add(t))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// take removes and returns the call with this id.
func (c *conn) take(id uint64) *call {
	c.mu.Lock()
	cl := c.pending[id]
	if cl != nil {
		delete(c.pending, id)
		if len(c.pending) == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
	}
	c.mu.Unlock()
	if cl != nil {
		c.release()
	}
	return cl
}

// removeUnsent takes the calls of q that the writer has not taken yet.
func (c *conn) removeUnsent(q *queuePair) []*call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*call
	keep := c.queue[:0]
	for _, cl := range c.queue {
		if cl.qp == q && !cl.sent { // a partly written frame must be finished
			out = append(out, cl)
			delete(c.pending, cl.id)
		} else {
			keep = append(keep, cl)
		}
	}
	clear(c.queue[len(keep):])
	c.queue = keep
	if len(c.pending) == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	for range out {
		c.release()
	}
	return out
}

// waitIdle waits until no request is outstanding, the connection is lost or
// ctx ends.
func (c *conn) waitIdle(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 || c.err != nil {
		c.mu.Unlock()
		return
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
	case <-c.dead:
	case <-ctx.Done():
	}
}

// fail marks the connection lost, closes the socket, and completes every
// outstanding request: sent work requests with StatusTransportError, unsent
// ones with StatusFlushed, control calls with err.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	calls := make([]*call, 0, len(c.pending))
	for _, cl := range c.pending {
		calls = append(calls, cl)
	}
	clear(c.pending)
	c.queue = nil
	close(c.dead)
	if c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
	c.nc.Close()
	if len(calls) > 0 {
		c.d.log.Warn("rdma/tcp: connection to memory node lost", "err", err, "outstanding", len(calls))
	} else {
		c.d.log.Debug("rdma/tcp: connection to memory node closed", "err", err)
	}
	// Complete in request-id order, so each QP sees its batches in order.
	slices.SortFunc(calls, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	for _, cl := range calls {
		if cl.b != nil {
			st := rdma.StatusFlushed
			if cl.sent {
				st = rdma.StatusTransportError
			}
			cl.qp.finish(cl.b, st)
		} else {
			cl.resp <- result{err: err}
		}
	}
}

// roundTrip sends a control request and waits for its response.
func (c *conn) roundTrip(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	frame, err := wire.AppendRequest(getBuf(wire.RequestSize(req)), req)
	if err != nil {
		c.release()
		return nil, err
	}
	cl := &call{frame: frame, resp: make(chan result, 1)}
	refused, lost := c.enqueue(cl)
	if refused != nil {
		return nil, refused
	}
	if lost != nil {
		c.fail(lost) // answers cl.resp
	}
	select {
	case r := <-cl.resp:
		return r.resp, r.err
	case <-ctx.Done():
		// The call stays registered: its response (or the connection's loss)
		// will release its slot.
		return nil, ctx.Err()
	}
}

func (c *conn) writeLoop() {
	defer c.d.wg.Done()
	var bufs net.Buffers
	var batch []*call
	for {
		select {
		case <-c.wake:
		case <-c.dead:
			return
		}
		c.wmu.Lock()
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.mu.Unlock()
			c.wmu.Unlock()
			continue
		}
		// Swap the queue for the spare slice; spare is nil while batch is in
		// use, so the two never share storage.
		batch, c.queue, c.spare = c.queue, c.spare[:0], nil
		for _, cl := range batch {
			cl.sent = true
		}
		c.mu.Unlock()
		bufs = bufs[:0]
		for _, cl := range batch {
			bufs = append(bufs, cl.frame[cl.off:])
		}
		err := c.writeFrames(bufs[:len(bufs):len(bufs)]) // WriteTo consumes its receiver
		c.wmu.Unlock()
		for i, cl := range batch {
			putBuf(cl.frame)
			cl.frame = nil
			batch[i] = nil
			bufs[i] = nil
		}
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
		if err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *conn) readLoop() {
	defer c.d.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var buf []byte
	var resp wire.Response
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		c.armLocked()
		c.mu.Unlock()
		frame, err := wire.ReadFrame(br, buf, int(c.limits.MaxFrameSize))
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("no response from memory node within %v", c.d.cfg.RequestTimeout)
			}
			c.fail(fmt.Errorf("%w: read: %w", rdma.ErrConnectionLost, err))
			return
		}
		buf = frame
		if err := wire.DecodeResponse(frame, &resp); err != nil {
			c.fail(fmt.Errorf("%w: %w: %w", rdma.ErrConnectionLost, wire.ErrProtocol, err))
			return
		}
		if err := c.dispatch(&resp); err != nil {
			c.fail(err)
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// dispatch hands a response to its call.
func (c *conn) dispatch(resp *wire.Response) error {
	if resp.ID == 0 {
		if resp.Kind == wire.KindError {
			e := resp.Err
			return fmt.Errorf("%w: memory node closed the connection: %w", rdma.ErrConnectionLost, &e)
		}
		return fmt.Errorf("%w: %w: unsolicited %s", rdma.ErrConnectionLost, wire.ErrProtocol, resp.Kind)
	}
	cl := c.take(resp.ID)
	if cl == nil {
		return fmt.Errorf("%w: %w: response to unknown request %d", rdma.ErrConnectionLost, wire.ErrProtocol, resp.ID)
	}
	if cl.b != nil {
		if err := cl.qp.complete(cl.b, resp); err != nil {
			err = fmt.Errorf("%w: %w: %w", rdma.ErrConnectionLost, wire.ErrProtocol, err)
			c.fail(err) // first, so that the loss is visible with the completion
			cl.qp.finish(cl.b, rdma.StatusTransportError)
			return err
		}
		return nil
	}
	r := result{}
	switch resp.Kind {
	case wire.KindError:
		e := resp.Err
		r.err = &e
	case wire.KindRegion:
		r.resp = &wire.Response{Kind: resp.Kind, ID: resp.ID, Region: resp.Region}
	case wire.KindRegions:
		r.resp = &wire.Response{Kind: resp.Kind, ID: resp.ID, Regions: append([]rdma.Region{}, resp.Regions...)}
	default:
		r.err = fmt.Errorf("tcp: %w: unexpected %s response", wire.ErrProtocol, resp.Kind)
	}
	cl.resp <- r
	return nil
}
