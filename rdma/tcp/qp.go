package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

var le = binary.LittleEndian

// batch is one posted doorbell batch, kept until its completions are delivered.
type batch struct {
	wrs   []rdma.WorkRequest // copies of the posted work requests (Local shared)
	comps []rdma.Completion
	done  bool
}

// queuePair implements rdma.QueuePair on a Device.
type queuePair struct {
	dev      *Device
	cq       *rdma.CompletionQueue
	counters *rdma.Counters
	scratch  []wire.WorkRequest // encoding scratch; Post has one goroutine

	mu      sync.Mutex
	fifo    []*batch // posted, completions not delivered yet, in posting order
	free    []*batch
	closed  bool
	drained chan struct{} // made by beginClose, closed when fifo empties
}

func (q *queuePair) CQ() *rdma.CompletionQueue { return q.cq }
func (q *queuePair) Stats() rdma.Stats         { return q.counters.Snapshot() }

// Post implements rdma.QueuePair: one Batch frame per call.
func (q *queuePair) Post(wrs ...rdma.WorkRequest) error {
	if err := rdma.ValidateBatch(wrs); err != nil {
		return err
	}
	if len(wrs) == 0 {
		if err := q.cq.Reserve(0); err != nil {
			return err
		}
		q.counters.Doorbell()
		return nil
	}
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return rdma.ErrQPClosed
	}
	// Find a live connection and an in-flight slot on it; everything that
	// can fail happens before Reserve, which cannot be undone.
	var c *conn
	for attempt := 0; ; attempt++ {
		var err error
		if c, err = q.dev.conn(q.dev.ctx); err != nil {
			return err
		}
		err = c.acquire(q.dev.ctx)
		if err == nil {
			break
		}
		if attempt > 0 {
			if q.dev.ctx.Err() != nil {
				return errDeviceClosed
			}
			return fmt.Errorf("tcp: post: %w", err)
		}
	}
	if err := q.cq.Reserve(len(wrs)); err != nil {
		c.release()
		return err
	}
	q.counters.Doorbell()

	// Encode the batch (cannot fail: ValidateBatch checked the limits).
	sc := q.scratch[:0]
	for i := range wrs {
		sc = append(sc, wire.FromRDMA(&wrs[i]))
	}
	req := wire.Request{Kind: wire.KindBatch, WRs: sc}
	frame, err := wire.AppendRequest(getBuf(wire.RequestSize(&req)), &req)
	clear(sc)
	q.scratch = sc[:0]

	q.mu.Lock()
	b := q.newBatchLocked(wrs)
	q.fifo = append(q.fifo, b)
	var lost error
	switch {
	case err != nil: // a bug; fail the batch rather than lose it
		c.release()
		q.finishLocked(b, rdma.StatusRemoteInvalidRequest)
	case q.closed:
		c.release()
		putBuf(frame)
		q.finishLocked(b, rdma.StatusFlushed)
	default:
		var refused error
		refused, lost = c.enqueue(&call{frame: frame, b: b, qp: q})
		if refused != nil {
			// The connection was lost between acquire and now: nothing was sent.
			putBuf(frame)
			q.finishLocked(b, rdma.StatusFlushed)
		}
	}
	q.mu.Unlock()
	if lost != nil {
		c.fail(lost) // completes b (and everything else outstanding): not under q.mu
	}
	return nil
}

func (q *queuePair) newBatchLocked(wrs []rdma.WorkRequest) *batch {
	var b *batch
	if n := len(q.free); n > 0 {
		b, q.free = q.free[n-1], q.free[:n-1]
	} else {
		b = &batch{}
	}
	b.wrs = append(b.wrs[:0], wrs...)
	b.comps = slices.Grow(b.comps[:0], len(wrs))[:len(wrs)]
	for i := range wrs {
		b.comps[i] = rdma.Completion{ID: wrs[i].ID, Op: wrs[i].Op}
	}
	b.done = false
	return b
}

// complete fills b's completions from its BatchResult (or Error) response and
// delivers whatever is now in order. It reports a response that does not
// match the batch and leaves b alone: the caller then fails the connection
// and completes b with StatusTransportError.
func (q *queuePair) complete(b *batch, resp *wire.Response) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var bad error
	switch resp.Kind {
	case wire.KindBatchResult:
		if len(resp.Results) != len(b.wrs) {
			bad = fmt.Errorf("batch of %d work requests answered with %d results", len(b.wrs), len(resp.Results))
			break
		}
		for i := range resp.Results {
			r, wr := &resp.Results[i], &b.wrs[i]
			if r.Op != wr.Op {
				bad = fmt.Errorf("result %d is a %s, work request a %s", i, r.Op, wr.Op)
				break
			}
			if r.Status == rdma.StatusSuccess && wr.Op == rdma.OpRead && len(r.Data) != len(wr.Local) {
				bad = fmt.Errorf("result %d: READ of %d bytes answered with %d", i, len(wr.Local), len(r.Data))
				break
			}
		}
		if bad != nil {
			break
		}
		for i := range resp.Results {
			r, wr := &resp.Results[i], &b.wrs[i]
			if r.Status == rdma.StatusSuccess && wr.Op == rdma.OpRead {
				copy(wr.Local, r.Data)
			}
			b.comps[i].Status, b.comps[i].Value = r.Status, r.Value
		}
		b.done = true
		q.deliverLocked()
		return nil
	case wire.KindError:
		// The server refused the whole batch (it validates what it can parse).
		q.finishLocked(b, rdma.StatusRemoteInvalidRequest)
		return nil
	default:
		bad = fmt.Errorf("batch answered with %s", resp.Kind)
	}
	return bad // the caller fails the connection, then finishes b
}

// finish completes every work request of b with st and delivers what is in order.
func (q *queuePair) finish(b *batch, st rdma.Status) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.finishLocked(b, st)
}

func (q *queuePair) finishLocked(b *batch, st rdma.Status) {
	for i := range b.comps {
		b.comps[i].Status, b.comps[i].Value = st, 0
	}
	b.done = true
	q.deliverLocked()
}

// deliverLocked delivers the completions of finished batches at the head of
// the FIFO, so the CQ sees them in posting order.
func (q *queuePair) deliverLocked() {
	n := 0
	for n < len(q.fifo) && q.fifo[n].done {
		b := q.fifo[n]
		for i := range b.wrs {
			q.counters.Record(&b.wrs[i], b.comps[i])
			q.cq.Deliver(b.comps[i], 0)
		}
		clear(b.wrs) // drop references to the caller's buffers
		if len(q.free) < 64 {
			q.free = append(q.free, b)
		}
		n++
	}
	if n > 0 {
		rest := copy(q.fifo, q.fifo[n:])
		clear(q.fifo[rest:])
		q.fifo = q.fifo[:rest]
		q.signalDrainedLocked()
	}
}

// Close implements rdma.QueuePair. Posting fails from then on; work requests
// never sent complete with StatusFlushed; Close then waits, up to
// ClientConfig.CloseTimeout, for the responses to those already sent. If they
// do not come in time the connection is declared lost (they complete with
// StatusTransportError). When Close returns, every work request ever posted
// on the queue pair has its completion in the completion queue.
func (q *queuePair) Close() error {
	if !q.beginClose() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.dev.cfg.CloseTimeout)
	drained := q.awaitDrained(ctx)
	cancel()
	if !drained {
		if c := q.dev.current(); c != nil {
			c.fail(fmt.Errorf("%w: queue pair close: sent work requests unanswered after %v", rdma.ErrConnectionLost, q.dev.cfg.CloseTimeout))
		}
		// Whatever was outstanding has been (or is being) completed by a
		// connection failure or by the reader: the wait is short.
		q.awaitDrained(context.Background())
	}
	q.endClose()
	return nil
}

// beginClose stops posting and flushes the work requests that were never
// sent; it reports false if the queue pair was already closing.
func (q *queuePair) beginClose() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	q.drained = make(chan struct{})
	if c := q.dev.current(); c != nil {
		for _, cl := range c.removeUnsent(q) {
			putBuf(cl.frame)
			cl.frame = nil
			q.finishLocked(cl.b, rdma.StatusFlushed)
		}
	}
	q.signalDrainedLocked()
	return true
}

func (q *queuePair) signalDrainedLocked() {
	if q.closed && len(q.fifo) == 0 && q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
}

// awaitDrained waits until every posted batch has been delivered or ctx ends.
func (q *queuePair) awaitDrained(ctx context.Context) bool {
	q.mu.Lock()
	ch := q.drained
	q.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// endClose closes the completion queue and forgets the queue pair.
func (q *queuePair) endClose() {
	q.cq.Close(rdma.ErrQPClosed)
	q.dev.removeQP(q)
}

var _ rdma.QueuePair = (*queuePair)(nil)
