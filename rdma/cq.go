package rdma

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// clockStart anchors Now; completion times are nanoseconds since it.
var clockStart = time.Now()

// Now is the monotonic clock, in nanoseconds, on which completion ready times
// are expressed.
func Now() int64 { return int64(time.Since(clockStart)) }

// spinBelow is how close to a completion's ready time Wait stops sleeping and
// starts spinning: Go timers overshoot by tens of microseconds, while modelled
// verb latencies are single microseconds.
const spinBelow = 60 * time.Microsecond

type cqEntry struct {
	c       Completion
	readyAt int64 // Now() at which the completion becomes visible
}

// CompletionQueue holds the completions of one queue pair, in posting order,
// and owns the queue pair's send-queue accounting: a slot is taken when a work
// request is posted and freed when its completion is polled (or discarded), so
// neither the queue nor the memory node's buffers grow past the send queue depth.
// Backends deliver into it; callers poll it.
type CompletionQueue struct {
	mu          sync.Mutex
	entries     []cqEntry
	outstanding int // posted and not yet polled or discarded
	depth       int
	discard     int // completions still to drop as they arrive (abandoned Exec)
	closedErr   error
	notify      chan struct{}
}

// NewCompletionQueue returns a queue for a send queue of the given depth.
func NewCompletionQueue(depth int) *CompletionQueue {
	if depth <= 0 {
		depth = DefaultSendQueueDepth
	}
	return &CompletionQueue{depth: depth, notify: make(chan struct{}, 1), entries: make([]cqEntry, 0, 16)}
}

// Reserve takes n send-queue slots, or fails with ErrSendQueueFull or, once
// the queue is closed, ErrQPClosed. Backends call it in Post.
func (q *CompletionQueue) Reserve(n int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closedErr != nil {
		return ErrQPClosed
	}
	if q.outstanding+n > q.depth {
		return ErrSendQueueFull
	}
	q.outstanding += n
	return nil
}

// Deliver appends a completion that becomes visible at readyAt (a Now() value;
// 0 means at once). Completions must be delivered in posting order.
func (q *CompletionQueue) Deliver(c Completion, readyAt int64) {
	q.mu.Lock()
	if q.discard > 0 {
		q.discard--
		q.outstanding--
		q.mu.Unlock()
		return
	}
	if n := len(q.entries); n > 0 && q.entries[n-1].readyAt > readyAt {
		readyAt = q.entries[n-1].readyAt // in-order delivery, as on an RC QP
	}
	q.entries = append(q.entries, cqEntry{c: c, readyAt: readyAt})
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Poll copies ready completions into dst without blocking and returns how many.
func (q *CompletionQueue) Poll(dst []Completion) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, _ := q.takeLocked(dst, Now())
	return n
}

// takeLocked moves ready entries into dst; it returns the count and, when the
// head entry exists but is not ready yet, its ready time.
func (q *CompletionQueue) takeLocked(dst []Completion, now int64) (int, int64) {
	n := 0
	for n < len(dst) && n < len(q.entries) {
		e := q.entries[n]
		if e.readyAt > now {
			break
		}
		dst[n] = e.c
		n++
	}
	if n > 0 {
		rest := copy(q.entries, q.entries[n:])
		q.entries = q.entries[:rest]
		q.outstanding -= n
	}
	var next int64
	if n < len(dst) && len(q.entries) > 0 {
		next = q.entries[0].readyAt
	}
	return n, next
}

// Wait blocks until at least min completions (at most len(dst)) are copied into
// dst, ctx ends, or the queue is closed and drained. It returns how many it copied.
func (q *CompletionQueue) Wait(ctx context.Context, dst []Completion, min int) (int, error) {
	if min > len(dst) {
		min = len(dst)
	}
	got := 0
	for {
		q.mu.Lock()
		n, next := q.takeLocked(dst[got:], Now())
		got += n
		closedErr := q.closedErr
		pending := len(q.entries)
		q.mu.Unlock()
		if got >= min {
			return got, nil
		}
		if closedErr != nil && pending == 0 {
			return got, closedErr
		}
		if err := ctx.Err(); err != nil {
			return got, err
		}
		if next > 0 {
			q.waitUntil(ctx, next)
			continue
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
		}
	}
}

// waitUntil sleeps until shortly before the Now() value t, then spins,
// yielding. It returns early when ctx ends or the queue is signalled (a
// delivery or Close), so that Wait honours cancellation and Close even while
// the head completion is far in the future; Wait then re-examines the queue.
func (q *CompletionQueue) waitUntil(ctx context.Context, t int64) {
	for {
		d := time.Duration(t - Now())
		if d <= 0 || ctx.Err() != nil {
			return
		}
		if d > spinBelow {
			timer := time.NewTimer(d - spinBelow)
			select {
			case <-timer.C:
			case <-ctx.Done():
			case <-q.notify:
				timer.Stop()
				return
			}
			timer.Stop()
			continue
		}
		runtime.Gosched()
	}
}

// Discard drops the next n completions, queued or still to come, freeing their
// send-queue slots. Exec uses it when its caller gives up waiting.
func (q *CompletionQueue) Discard(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	drop := min(n, len(q.entries))
	if drop > 0 {
		rest := copy(q.entries, q.entries[drop:])
		q.entries = q.entries[:rest]
		q.outstanding -= drop
	}
	q.discard += n - drop
}

// Outstanding returns the number of posted work requests not yet polled.
func (q *CompletionQueue) Outstanding() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.outstanding
}

// Close makes Reserve fail and Wait return err once the queue is drained.
// Backends flush outstanding work requests (deliver StatusFlushed or
// StatusTransportError completions) before or after closing.
func (q *CompletionQueue) Close(err error) {
	q.mu.Lock()
	if q.closedErr == nil {
		q.closedErr = err
	}
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}
