package rdma

import (
	"context"
	"errors"
	"sync"
)

// MemConfig configures the in-process backend.
type MemConfig struct {
	// Cost, when non-nil, delays completions and serialises atomics per NIC slot
	// as the model says. Nil (the default) completes every verb at once: the
	// emulation then measures software cost only.
	Cost *CostModel
}

// MemDevice is the in-process backend: queue pairs whose verbs run directly on
// a Memory in this process. It models a CN and MN sharing a machine; the
// protocol semantics (validation, statuses, ordering, counters) are those of
// the TCP backend.
type MemDevice struct {
	mem      *Memory
	counters *Counters

	nicMu sync.Mutex // serialises scheduling and execution when a cost model is set
	nic   *NIC

	mu     sync.Mutex
	qps    map[*memQP]struct{}
	closed bool
}

// NewMemDevice returns a device on mem.
func NewMemDevice(mem *Memory, cfg MemConfig) (*MemDevice, error) {
	d := &MemDevice{mem: mem, counters: NewCounters(nil), qps: make(map[*memQP]struct{})}
	if cfg.Cost != nil {
		nic, err := NewNIC(*cfg.Cost)
		if err != nil {
			return nil, err
		}
		d.nic = nic
	}
	return d, nil
}

// Memory returns the memory node the device reaches.
func (d *MemDevice) Memory() *Memory { return d.mem }

// Stats returns the counters summed over every queue pair the device opened.
func (d *MemDevice) Stats() Stats { return d.counters.Snapshot() }

// RegisterRegion implements Device.
func (d *MemDevice) RegisterRegion(ctx context.Context, name string, length uint64) (Region, error) {
	if err := d.check(ctx); err != nil {
		return Region{}, err
	}
	return d.mem.Register(name, length)
}

// Regions implements Device.
func (d *MemDevice) Regions(ctx context.Context) ([]Region, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	return d.mem.Regions(), nil
}

func (d *MemDevice) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrQPClosed
	}
	return nil
}

// CreateQP implements Device.
func (d *MemDevice) CreateQP(cfg QPConfig) (QueuePair, error) {
	cfg = cfg.withDefaults()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrQPClosed
	}
	qp := &memQP{dev: d, cq: NewCompletionQueue(cfg.SendQueueDepth), counters: NewCounters(d.counters)}
	d.qps[qp] = struct{}{}
	return qp, nil
}

// Close implements Device.
func (d *MemDevice) Close() error {
	d.mu.Lock()
	qps := make([]*memQP, 0, len(d.qps))
	for qp := range d.qps {
		qps = append(qps, qp)
	}
	d.closed = true
	d.mu.Unlock()
	var errs []error
	for _, qp := range qps {
		errs = append(errs, qp.Close())
	}
	return errors.Join(errs...)
}

type memQP struct {
	dev      *MemDevice
	cq       *CompletionQueue
	counters *Counters
	done     []int64 // scratch for ScheduleBatch; the QP has one owner goroutine
}

func (q *memQP) CQ() *CompletionQueue { return q.cq }
func (q *memQP) Stats() Stats         { return q.counters.Snapshot() }

func (q *memQP) Post(wrs ...WorkRequest) error {
	if err := ValidateBatch(wrs); err != nil {
		return err
	}
	if err := q.cq.Reserve(len(wrs)); err != nil {
		return err
	}
	q.counters.Doorbell()
	d := q.dev
	if d.nic == nil {
		failed := false
		for i := range wrs {
			c := flushedCompletion(&wrs[i])
			if !failed {
				c = d.mem.Execute(&wrs[i])
				failed = c.Status != StatusSuccess
			}
			q.counters.Record(&wrs[i], c)
			q.cq.Deliver(c, 0)
		}
		return nil
	}
	if cap(q.done) < len(wrs) {
		q.done = make([]int64, len(wrs))
	}
	done := q.done[:len(wrs)]
	// Scheduling and execution happen under one lock so that the order in
	// which atomics take effect is the order in which they hold their slots.
	d.nicMu.Lock()
	d.nic.ScheduleBatch(Now(), wrs, done)
	comps := make([]Completion, len(wrs))
	failed := false
	for i := range wrs {
		comps[i] = flushedCompletion(&wrs[i])
		if !failed {
			comps[i] = d.mem.Execute(&wrs[i])
			failed = comps[i].Status != StatusSuccess
		}
	}
	d.nicMu.Unlock()
	for i := range wrs {
		q.counters.Record(&wrs[i], comps[i])
		q.cq.Deliver(comps[i], done[i])
	}
	return nil
}

func (q *memQP) Close() error {
	q.cq.Close(ErrQPClosed)
	q.dev.mu.Lock()
	delete(q.dev.qps, q)
	q.dev.mu.Unlock()
	return nil
}

// flushedCompletion is the completion of a work request that follows a failed
// one in its doorbell: like a reliable-connected QP entering the error state
// at its first failed work request, the rest of the doorbell is not applied.
func flushedCompletion(wr *WorkRequest) Completion {
	return Completion{ID: wr.ID, Op: wr.Op, Status: StatusFlushed}
}
