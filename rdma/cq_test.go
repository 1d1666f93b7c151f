package rdma_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

func comp(id uint64) rdma.Completion { return rdma.Completion{ID: id, Op: rdma.OpFetchAndAdd} }

func ids(cs []rdma.Completion) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// A completion that becomes ready later holds back the ones posted after it,
// as on a reliable-connected queue pair.
func TestCQKeepsPostingOrderAcrossReadyTimes(t *testing.T) {
	q := rdma.NewCompletionQueue(8)
	if err := q.Reserve(3); err != nil {
		t.Fatal(err)
	}
	start := rdma.Now()
	const late = 30 * time.Millisecond
	q.Deliver(comp(1), start+int64(late))
	q.Deliver(comp(2), 0)
	q.Deliver(comp(3), 0)
	dst := make([]rdma.Completion, 3)
	if n := q.Poll(dst); n != 0 {
		t.Fatalf("Poll returned %v before the head completion was ready", ids(dst[:n]))
	}
	n, err := q.Wait(context.Background(), dst, 3)
	if err != nil || n != 3 {
		t.Fatalf("Wait = %d, %v", n, err)
	}
	if got := ids(dst); got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("completions in order %v, want [1 2 3]", got)
	}
	if el := time.Duration(rdma.Now() - start); el < late {
		t.Fatalf("completions visible after %v, before the head's ready time %v", el, late)
	}
	if q.Outstanding() != 0 {
		t.Fatalf("Outstanding = %d", q.Outstanding())
	}
}

// Wait must give up when its context ends even while the head completion is
// due far in the future (it used to sleep until the head was due).
func TestCQWaitHonoursContextWhileHeadIsLate(t *testing.T) {
	q := rdma.NewCompletionQueue(8)
	if err := q.Reserve(1); err != nil {
		t.Fatal(err)
	}
	q.Deliver(comp(1), rdma.Now()+int64(3*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n, err := q.Wait(ctx, make([]rdma.Completion, 1), 1)
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %d, %v; want 0, deadline exceeded", n, err)
	}
	q.Discard(1)
	if q.Outstanding() != 0 {
		t.Fatalf("Outstanding after Discard = %d", q.Outstanding())
	}
}

func TestCQDiscard(t *testing.T) {
	q := rdma.NewCompletionQueue(4)
	dst := make([]rdma.Completion, 4)
	// Discarded before they arrive: dropped on delivery.
	if err := q.Reserve(3); err != nil {
		t.Fatal(err)
	}
	q.Discard(3)
	for id := range uint64(3) {
		q.Deliver(comp(id), 0)
	}
	if n := q.Poll(dst); n != 0 || q.Outstanding() != 0 {
		t.Fatalf("after discarding 3 not yet delivered: Poll %d, Outstanding %d", n, q.Outstanding())
	}
	// Partly delivered: the queued one and the late ones are dropped.
	if err := q.Reserve(3); err != nil {
		t.Fatal(err)
	}
	q.Deliver(comp(10), 0)
	q.Discard(3)
	q.Deliver(comp(11), 0)
	if err := q.Reserve(1); err != nil {
		t.Fatal(err)
	}
	q.Deliver(comp(12), 0) // still one of the discarded batch
	q.Deliver(comp(20), 0) // the new work request's
	n, err := q.Wait(context.Background(), dst, 1)
	if err != nil || n != 1 || dst[0].ID != 20 {
		t.Fatalf("after discarding: Wait = %d %v %v, want only completion 20", n, err, ids(dst[:n]))
	}
	if q.Outstanding() != 0 {
		t.Fatalf("Outstanding = %d", q.Outstanding())
	}
	// The full depth is available again.
	if err := q.Reserve(4); err != nil {
		t.Fatalf("Reserve(4) after everything was discarded or polled: %v", err)
	}
}

func TestCQReserve(t *testing.T) {
	q := rdma.NewCompletionQueue(0)
	if err := q.Reserve(rdma.DefaultSendQueueDepth); err != nil {
		t.Fatalf("default depth: %v", err)
	}
	if err := q.Reserve(1); !errors.Is(err, rdma.ErrSendQueueFull) {
		t.Fatalf("Reserve past the default depth = %v", err)
	}
	q.Close(rdma.ErrQPClosed)
	if err := q.Reserve(0); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Reserve after Close = %v", err)
	}
}

// Close wakes a blocked Wait, which returns what was queued and then the
// close error.
func TestCQCloseWakesWaiterAndDrains(t *testing.T) {
	q := rdma.NewCompletionQueue(4)
	if err := q.Reserve(1); err != nil {
		t.Fatal(err)
	}
	errClosed := errors.New("test: closed")
	done := make(chan error, 1)
	got := make([]rdma.Completion, 2)
	go func() {
		n, err := q.Wait(context.Background(), got, 2)
		if n != 1 {
			err = errors.Join(err, errors.New("waiter did not get the one completion"))
		}
		done <- err
	}()
	q.Deliver(comp(1), 0)
	time.Sleep(10 * time.Millisecond)
	q.Close(errClosed)
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Fatalf("waiter returned %v, want the close error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
	if err := q.Reserve(1); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Reserve after Close = %v, want ErrQPClosed", err)
	}
}

// Exec on a MemDevice whose completions are late: when its context ends, the
// late completions are discarded and the queue pair stays usable.
func TestExecDiscardsLateCompletions(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.ReadLatency = 500 * time.Millisecond // far beyond Exec's 5 ms deadline
	m.AtomicLatency = time.Microsecond
	dev := newMemDevice(t, 1<<20, &m)
	r := rdmatest.Register(t, dev, "late", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 4})
	for round := range 6 { // more rounds than slots
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		read := rdma.WorkRequest{ID: uint64(round), Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}
		faa := rdma.WorkRequest{ID: 100 + uint64(round), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
		cs, err := rdma.Exec(ctx, qp, read, faa)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || len(cs) != 0 {
			t.Fatalf("Exec of a late READ = %v, %v; want no completions and deadline exceeded", ids(cs), err)
		}
		if n := qp.CQ().Outstanding(); n != 0 {
			t.Fatalf("abandoned Exec left %d send-queue slots taken", n)
		}
	}
	// The abandoned FAAs ran (Post succeeded); the next Exec sees its own completion.
	cs := rdmatest.MustExec(t, qp, rdma.WorkRequest{ID: 7, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if cs[0].ID != 7 || cs[0].Value != 6 {
		t.Fatalf("Exec after abandoned ones = (id %d, value %d), want (7, 6)", cs[0].ID, cs[0].Value)
	}
}
