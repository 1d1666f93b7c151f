package faulty

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/aura-runtime/aura/rdma"
)

// errBroken is returned (wrapped around rdma.ErrConnectionLost) while the
// connection is broken.
var errBroken = fmt.Errorf("faulty: connection broken (heal with Device.Heal): %w", rdma.ErrConnectionLost)

// errInjectedPost is returned by a Post that an injector failed.
var errInjectedPost = fmt.Errorf("faulty: injected post failure: %w", rdma.ErrConnectionLost)

// Counts reports the faults a Device injected. Work-request faults are
// counted when decided, at Post.
type Counts struct {
	Delayed         uint64 // completions delayed
	Dropped         uint64 // completions dropped
	FailedUnapplied uint64 // work requests failed without being applied
	FailedApplied   uint64 // work requests failed after being applied
	FailedPosts     uint64 // Posts failed by FailPost or Break
	Breaks          uint64 // connection breaks, injected or by Device.Break
	BrokenWRs       uint64 // outstanding work requests failed by a break
	Flushed         uint64 // work requests not applied because an earlier one of their doorbell failed
}

// Total is the number of faults injected (breaks count once; BrokenWRs and
// Flushed are consequences, not counted).
func (c Counts) Total() uint64 {
	return c.Delayed + c.Dropped + c.FailedUnapplied + c.FailedApplied + c.FailedPosts + c.Breaks
}

// Device is an rdma.Device that forwards to a wrapped device and injects
// faults. It is safe for concurrent use.
type Device struct {
	inner rdma.Device
	inj   Injector

	qpSeq, postSeq, wrSeq atomic.Uint64
	counts                struct {
		delayed, dropped, failedUnapplied, failedApplied, failedPosts, breaks, brokenWRs, flushed atomic.Uint64
	}

	mu     sync.Mutex
	qps    map[*queuePair]struct{}
	broken bool
	closed bool
}

var _ rdma.Device = (*Device)(nil)

// Wrap returns dev with faults from inj (nil means NoFaults). Closing the
// returned Device closes dev.
func Wrap(dev rdma.Device, inj Injector) *Device {
	if inj == nil {
		inj = NoFaults
	}
	return &Device{inner: dev, inj: inj, qps: make(map[*queuePair]struct{})}
}

// Inner returns the wrapped device.
func (d *Device) Inner() rdma.Device { return d.inner }

// Faults returns the counts of injected faults.
func (d *Device) Faults() Counts {
	c := &d.counts
	return Counts{
		Delayed: c.delayed.Load(), Dropped: c.dropped.Load(), FailedUnapplied: c.failedUnapplied.Load(),
		FailedApplied: c.failedApplied.Load(), FailedPosts: c.failedPosts.Load(), Breaks: c.breaks.Load(),
		BrokenWRs: c.brokenWRs.Load(), Flushed: c.flushed.Load(),
	}
}

// Break breaks the connection: every outstanding work request of every queue
// pair whose completion has not been handed to its completion queue yet
// completes now with StatusTransportError (it may or may not have been
// applied), and every Post, CreateQP, RegisterRegion and Regions call fails
// with an error matching rdma.ErrConnectionLost until Heal. Completions
// already handed over (a delayed one not yet visible, a dropped one) are
// left as they are. Queue pairs stay open and work again after Heal.
func (d *Device) Break() {
	d.mu.Lock()
	d.broken = true
	qps := make([]*queuePair, 0, len(d.qps))
	for q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	d.counts.breaks.Add(1)
	for _, q := range qps {
		q.failPending()
	}
}

// Heal restores a broken connection.
func (d *Device) Heal() {
	d.mu.Lock()
	d.broken = false
	d.mu.Unlock()
}

// Broken reports whether the connection is broken.
func (d *Device) Broken() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}

func (d *Device) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return rdma.ErrQPClosed
	}
	if d.broken {
		return errBroken
	}
	return nil
}

// RegisterRegion implements rdma.Device.
func (d *Device) RegisterRegion(ctx context.Context, name string, length uint64) (rdma.Region, error) {
	if err := d.check(); err != nil {
		return rdma.Region{}, err
	}
	return d.inner.RegisterRegion(ctx, name, length)
}

// Regions implements rdma.Device.
func (d *Device) Regions(ctx context.Context) ([]rdma.Region, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.inner.Regions(ctx)
}

// CreateQP implements rdma.Device.
func (d *Device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	// The wrapped queue pair gets twice the depth: after a break, its
	// completions of failed work requests still hold slots there until they
	// arrive and are swallowed, while the caller may already post again.
	inner, err := d.inner.CreateQP(rdma.QPConfig{SendQueueDepth: 2 * cfg.SendQueueDepth})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &queuePair{
		dev: d, id: d.qpSeq.Add(1), inner: inner, depth: cfg.SendQueueDepth,
		cq: rdma.NewCompletionQueue(cfg.SendQueueDepth), cancel: cancel, done: make(chan struct{}),
	}
	go q.pump(ctx)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		q.Close()
		return nil, rdma.ErrQPClosed
	}
	d.qps[q] = struct{}{}
	d.mu.Unlock()
	return q, nil
}

// Close closes every queue pair and the wrapped device.
func (d *Device) Close() error {
	d.mu.Lock()
	d.closed = true
	qps := make([]*queuePair, 0, len(d.qps))
	for q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	var errs []error
	for _, q := range qps {
		errs = append(errs, q.Close())
	}
	errs = append(errs, d.inner.Close())
	return errors.Join(errs...)
}

func (d *Device) inject(ev Event) Fault {
	f := d.inj.Inject(ev)
	if f.Kind.Level() != ev.Level {
		return Fault{}
	}
	return f
}

// slot is a posted work request whose completion has not yet been handed to
// the wrapper's completion queue.
type slot struct {
	id    uint64
	op    rdma.Opcode
	inner bool // its completion comes from the wrapped queue pair
	fault Fault
	// flushed: an earlier work request of the same doorbell failed, so this
	// one was never applied and completes with StatusFlushed, as on a
	// reliable-connected QP, which enters the error state at its first failed
	// work request.
	flushed bool
}

// queuePair wraps a queue pair of the inner device. Completions reach the
// caller through cq: synthetic ones (FailUnapplied, breaks) are delivered by
// Post and Break, the wrapped queue pair's by the pump goroutine, all under mu
// and in posting order.
type queuePair struct {
	dev   *Device
	id    uint64
	inner rdma.QueuePair
	cq    *rdma.CompletionQueue
	depth int

	mu      sync.Mutex
	pending []slot // posted, completion not yet handed to cq, in posting order
	swallow int    // completions of the wrapped QP to drop (failed by a break)
	closed  bool

	cancel context.CancelFunc
	done   chan struct{} // closed when the pump has exited
}

func (q *queuePair) CQ() *rdma.CompletionQueue { return q.cq }

// Stats returns the wrapped queue pair's counters: work requests failed
// without being applied never reached it and are not counted.
func (q *queuePair) Stats() rdma.Stats { return q.inner.Stats() }

func (q *queuePair) Post(wrs ...rdma.WorkRequest) error {
	if err := rdma.ValidateBatch(wrs); err != nil {
		return err
	}
	d := q.dev
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return rdma.ErrQPClosed
	}
	if err := d.check(); err != nil {
		q.mu.Unlock()
		return err
	}
	if q.cq.Outstanding()+len(wrs) > q.depth {
		q.mu.Unlock()
		return rdma.ErrSendQueueFull
	}
	switch f := d.inject(Event{Level: LevelPost, QP: q.id, Seq: d.postSeq.Add(1), Batch: len(wrs)}); f.Kind {
	case FailPost:
		q.mu.Unlock()
		d.counts.failedPosts.Add(1)
		return errInjectedPost
	case Break:
		q.mu.Unlock()
		d.counts.failedPosts.Add(1)
		d.Break()
		return errBroken
	}
	slots := make([]slot, len(wrs))
	innerWRs := make([]rdma.WorkRequest, 0, len(wrs))
	failed := false
	for i := range wrs {
		wr := &wrs[i]
		if failed {
			slots[i] = slot{id: wr.ID, op: wr.Op, flushed: true}
			d.counts.flushed.Add(1)
			continue
		}
		f := d.inject(Event{Level: LevelWorkRequest, QP: q.id, Seq: d.wrSeq.Add(1), Batch: len(wrs),
			Op: wr.Op, RKey: wr.RKey, Addr: wr.RemoteAddr, Len: len(wr.Local)})
		slots[i] = slot{id: wr.ID, op: wr.Op, inner: f.Kind != FailUnapplied, fault: f}
		failed = f.Kind == FailUnapplied || f.Kind == FailApplied
		if slots[i].inner {
			innerWRs = append(innerWRs, *wr)
		}
	}
	if len(innerWRs) > 0 {
		if err := q.inner.Post(innerWRs...); err != nil {
			q.mu.Unlock()
			return err
		}
	}
	if err := q.cq.Reserve(len(wrs)); err != nil {
		// Not reached: room was checked under mu and only polling (which
		// frees slots) runs concurrently. Drop the wrapped completions.
		q.swallow += len(innerWRs)
		q.mu.Unlock()
		return err
	}
	for _, s := range slots {
		switch s.fault.Kind {
		case Delay:
			d.counts.delayed.Add(1)
		case Drop:
			d.counts.dropped.Add(1)
		case FailUnapplied:
			d.counts.failedUnapplied.Add(1)
		case FailApplied:
			d.counts.failedApplied.Add(1)
		}
	}
	q.pending = append(q.pending, slots...)
	q.deliverSyntheticLocked()
	q.mu.Unlock()
	return nil
}

// deliverSyntheticLocked hands over the completions at the head of pending
// that do not wait for the wrapped queue pair.
func (q *queuePair) deliverSyntheticLocked() {
	n := 0
	for n < len(q.pending) && !q.pending[n].inner {
		s := q.pending[n]
		st := rdma.StatusTransportError
		if s.flushed {
			st = rdma.StatusFlushed
		}
		q.cq.Deliver(rdma.Completion{ID: s.id, Op: s.op, Status: st}, 0)
		n++
	}
	q.popLocked(n)
}

func (q *queuePair) popLocked(n int) {
	if n == 0 {
		return
	}
	rest := copy(q.pending, q.pending[n:])
	clear(q.pending[rest:])
	q.pending = q.pending[:rest]
}

// pump moves the wrapped queue pair's completions to cq, applying faults.
func (q *queuePair) pump(ctx context.Context) {
	defer close(q.done)
	buf := make([]rdma.Completion, 64)
	for {
		n, err := q.inner.CQ().Wait(ctx, buf, 1)
		q.mu.Lock()
		for _, c := range buf[:n] {
			q.handleLocked(c)
		}
		if err != nil {
			if ctx.Err() == nil {
				// The wrapped queue pair was closed under us (its device closed
				// or its connection failed): what it never completed, we fail.
				q.failPendingLocked()
				q.closed = true
				q.cq.Close(rdma.ErrQPClosed)
			}
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
	}
}

func (q *queuePair) handleLocked(c rdma.Completion) {
	if q.swallow > 0 {
		q.swallow--
		return
	}
	q.deliverSyntheticLocked()
	if len(q.pending) == 0 {
		return // a completion nobody posted through us; nothing to pair it with
	}
	s := q.pending[0]
	q.popLocked(1)
	switch s.fault.Kind {
	case Delay:
		q.cq.Deliver(c, rdma.Now()+int64(s.fault.Delay))
	case Drop:
		// Never visible: it holds back later completions until discarded.
		q.cq.Deliver(c, math.MaxInt64)
	case FailApplied:
		q.cq.Deliver(rdma.Completion{ID: c.ID, Op: c.Op, Status: rdma.StatusTransportError}, 0)
	default:
		q.cq.Deliver(c, 0)
	}
	q.deliverSyntheticLocked()
}

func (q *queuePair) failPending() {
	q.mu.Lock()
	q.failPendingLocked()
	q.mu.Unlock()
}

// failPendingLocked completes every pending work request with
// StatusTransportError; the wrapped queue pair's completions for them are
// swallowed when they arrive.
func (q *queuePair) failPendingLocked() {
	for _, s := range q.pending {
		q.cq.Deliver(rdma.Completion{ID: s.id, Op: s.op, Status: rdma.StatusTransportError}, 0)
		if s.inner {
			q.swallow++
		}
	}
	q.dev.counts.brokenWRs.Add(uint64(len(q.pending)))
	q.popLocked(len(q.pending))
}

// Close closes the queue pair: outstanding work requests are abandoned (their
// completions, queued or not, are discarded) and a blocked Wait returns
// rdma.ErrQPClosed.
func (q *queuePair) Close() error {
	q.mu.Lock()
	if q.closed && q.cancel == nil {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	cancel := q.cancel
	q.cancel = nil
	q.mu.Unlock()
	cancel()
	<-q.done
	err := q.inner.Close()
	q.mu.Lock()
	q.popLocked(len(q.pending))
	q.cq.Discard(q.cq.Outstanding())
	q.cq.Close(rdma.ErrQPClosed)
	q.mu.Unlock()
	q.dev.mu.Lock()
	delete(q.dev.qps, q)
	q.dev.mu.Unlock()
	return err
}
