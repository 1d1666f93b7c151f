package faulty_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wrap returns a faulty Device over a fresh MemDevice (with an optional cost
// model), closed at cleanup.
func wrap(t testing.TB, inj faulty.Injector, cost *rdma.CostModel) *faulty.Device {
	t.Helper()
	mem, err := rdma.NewMemDevice(rdma.NewMemory(rdmatest.ConformanceCapacity), rdma.MemConfig{Cost: cost})
	if err != nil {
		t.Fatal(err)
	}
	dev := faulty.Wrap(mem, inj)
	t.Cleanup(func() { dev.Close() })
	return dev
}

// Without faults the wrapper is transparent: it passes the whole suite.
func TestConformanceNoFaults(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device { return wrap(t, nil, nil) })
}

// Delays change when completions arrive, never what they say or their order.
func TestConformanceRandomDelays(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
		return wrap(t, faulty.Random(42, faulty.Probabilities{Delay: 0.3, MaxDelay: 200 * time.Microsecond}), nil)
	})
}

func execCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func faa(r rdma.Region, id uint64) rdma.WorkRequest {
	return rdma.WorkRequest{ID: id, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
}

// peek reads a word through a fresh queue pair of the wrapped device, so
// that no fault applies.
func peek(t *testing.T, dev *faulty.Device, r rdma.Region, addr uint64) uint64 {
	t.Helper()
	qp := rdmatest.NewQP(t, dev.Inner(), rdma.QPConfig{})
	return rdmatest.ReadWord(t, qp, r, addr)
}

func TestDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	dev := wrap(t, faulty.Nth(1, faulty.Fault{Kind: faulty.Delay, Delay: delay}), nil)
	r := rdmatest.Register(t, dev, "d", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	start := rdma.Now()
	// The first work request is delayed; the second, posted with it, is held
	// back behind it (completions stay in posting order).
	cs := rdmatest.MustExec(t, qp, faa(r, 1), faa(r, 2))
	if el := time.Duration(rdma.Now() - start); el < delay {
		t.Fatalf("delayed completion arrived after %v, want ≥ %v", el, delay)
	}
	if cs[0].Value != 0 || cs[1].Value != 1 {
		t.Fatalf("values %d, %d; want 0, 1", cs[0].Value, cs[1].Value)
	}
	if f := dev.Faults(); f.Delayed != 1 || f.Total() != 1 {
		t.Fatalf("Faults = %+v, want one delay", f)
	}
}

func TestDropKeepsQPUsable(t *testing.T) {
	// Every FAA with an even ID loses its completion.
	dropEven := faulty.When(func(ev faulty.Event) bool { return ev.Op == rdma.OpFetchAndAdd && ev.Seq%2 == 1 },
		faulty.Fault{Kind: faulty.Drop})
	dev := wrap(t, dropEven, nil)
	r := rdmatest.Register(t, dev, "drop", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 4})
	const rounds = 10 // more than the send-queue depth: dropped ones must free their slots
	for i := range uint64(rounds) {
		// Odd work requests (Seq 1, 3, …) are dropped; each round posts one.
		cs, err := rdma.Exec(execCtx(t, 20*time.Millisecond), qp, faa(r, i))
		if i%2 == 0 {
			if !errors.Is(err, context.DeadlineExceeded) || len(cs) != 0 {
				t.Fatalf("round %d: Exec with a dropped completion = %v, %v; want deadline exceeded", i, cs, err)
			}
		} else if err != nil || cs[0].ID != i || cs[0].Value != i {
			t.Fatalf("round %d: Exec = %+v, %v; want its own completion with value %d", i, cs, err, i)
		}
		if n := qp.CQ().Outstanding(); n != 0 {
			t.Fatalf("round %d: %d send-queue slots still taken", i, n)
		}
	}
	// Dropped completions are of applied work requests.
	if got := peek(t, dev, r, r.Addr); got != rounds {
		t.Fatalf("word = %d after %d FAAs (half of them dropped), want %d", got, rounds, rounds)
	}
	if f := dev.Faults(); f.Dropped != rounds/2 {
		t.Fatalf("Faults = %+v, want %d drops", f, rounds/2)
	}
}

// A dropped completion holds back the completions posted after it.
func TestDropHoldsBackLaterCompletions(t *testing.T) {
	dev := wrap(t, faulty.Nth(1, faulty.Fault{Kind: faulty.Drop}), nil)
	r := rdmatest.Register(t, dev, "hold", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	if err := qp.Post(faa(r, 1), faa(r, 2)); err != nil {
		t.Fatal(err)
	}
	dst := make([]rdma.Completion, 2)
	n, err := qp.CQ().Wait(execCtx(t, 20*time.Millisecond), dst, 1)
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %d, %v; the completion after a dropped one must not overtake it", n, err)
	}
	qp.CQ().Discard(2)
	if got := rdmatest.FAA(t, qp, r, r.Addr, 1); got.Value != 2 {
		t.Fatalf("FAA after discarding returned %d, want 2", got.Value)
	}
}

func TestFailUnapplied(t *testing.T) {
	dev := wrap(t, faulty.Nth(1, faulty.Fault{Kind: faulty.FailUnapplied}), nil)
	r := rdmatest.Register(t, dev, "fu", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	write := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 8, Local: []byte{1, 2, 3}}
	cs := rdmatest.Exec(t, qp, write, faa(r, 2))
	if cs[0].Status != rdma.StatusTransportError || !errors.Is(cs[0].Err(), rdma.ErrConnectionLost) {
		t.Fatalf("failed WRITE completed with %s (%v), want transport error", cs[0].Status, cs[0].Err())
	}
	if cs[1].Status != rdma.StatusFlushed || !errors.Is(cs[1].Err(), rdma.ErrFlushed) {
		t.Fatalf("FAA after it = %+v, want flushed: a failed work request ends its doorbell", cs[1])
	}
	if got := peek(t, dev, r, r.Addr); got != 0 {
		t.Fatalf("the flushed FAA changed memory: %#x", got)
	}
	if got := peek(t, dev, r, r.Addr+8); got != 0 {
		t.Fatalf("an unapplied WRITE changed memory: %#x", got)
	}
	if s := qp.Stats(); s.Writes != 0 || s.FAA != 0 {
		t.Fatalf("Stats = %+v: neither the unapplied WRITE nor the flushed FAA reached the memory node", s)
	}
	if f := dev.Faults(); f.FailedUnapplied != 1 || f.Flushed != 1 || f.Total() != 1 {
		t.Fatalf("Faults = %+v", f)
	}
	// A batch made only of unapplied work requests completes too.
	dev2 := wrap(t, faulty.When(func(faulty.Event) bool { return true }, faulty.Fault{Kind: faulty.FailUnapplied}), nil)
	r2 := rdmatest.Register(t, dev2, "fu", 64)
	qp2 := rdmatest.NewQP(t, dev2, rdma.QPConfig{})
	for i, c := range rdmatest.Exec(t, qp2, faa(r2, 1), faa(r2, 2), faa(r2, 3)) {
		want := rdma.StatusFlushed
		if i == 0 {
			want = rdma.StatusTransportError
		}
		if c.Status != want {
			t.Fatalf("completion %+v, want %s", c, want)
		}
	}
	if got := peek(t, dev2, r2, r2.Addr); got != 0 {
		t.Fatalf("unapplied FAAs changed the word to %d", got)
	}
}

func TestFailApplied(t *testing.T) {
	dev := wrap(t, faulty.When(func(ev faulty.Event) bool { return ev.Op == rdma.OpCompareAndSwap },
		faulty.Fault{Kind: faulty.FailApplied}), nil)
	r := rdmatest.Register(t, dev, "fa", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	cas := rdma.WorkRequest{ID: 5, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr, Compare: 0, Swap: 77}
	c := rdmatest.Exec(t, qp, cas)[0]
	if c.Status != rdma.StatusTransportError || c.ID != 5 || c.Op != rdma.OpCompareAndSwap {
		t.Fatalf("completion %+v, want transport error for CAS 5", c)
	}
	if got := peek(t, dev, r, r.Addr); got != 77 {
		t.Fatalf("word = %d: the CAS must have been applied", got)
	}
	if f := dev.Faults(); f.FailedApplied != 1 {
		t.Fatalf("Faults = %+v", f)
	}
}

func TestFailPost(t *testing.T) {
	dev := wrap(t, faulty.Nth(2, faulty.Fault{Kind: faulty.FailPost}), nil)
	r := rdmatest.Register(t, dev, "fp", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	rdmatest.MustExec(t, qp, faa(r, 1))
	if err := qp.Post(faa(r, 2), faa(r, 3)); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("second Post = %v, want ErrConnectionLost", err)
	}
	if n := qp.CQ().Outstanding(); n != 0 {
		t.Fatalf("a failed Post took %d slots", n)
	}
	if c := rdmatest.FAA(t, qp, r, r.Addr, 1); c.Value != 1 {
		t.Fatalf("FAA after a failed Post returned %d, want 1 (the failed batch must not run)", c.Value)
	}
	if f := dev.Faults(); f.FailedPosts != 1 || f.Total() != 1 {
		t.Fatalf("Faults = %+v", f)
	}
	if s := qp.Stats(); s.Doorbells != 2 {
		t.Fatalf("Doorbells = %d, want 2", s.Doorbells)
	}
}

// Break fails every outstanding work request at once, refuses new work until
// Heal, and the queue pairs work again afterwards.
func TestBreakAndHeal(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.ReadLatency = 200 * time.Millisecond // READs stay outstanding for a while
	dev := wrap(t, nil, &m)
	r := rdmatest.Register(t, dev, "br", 64)
	qp1 := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	qp2 := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	read := func(id uint64) rdma.WorkRequest {
		return rdma.WorkRequest{ID: id, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}
	}
	if err := qp1.Post(read(1), read(2)); err != nil {
		t.Fatal(err)
	}
	if err := qp2.Post(read(3)); err != nil {
		t.Fatal(err)
	}
	dev.Break()
	if !dev.Broken() {
		t.Fatal("Broken() is false after Break")
	}
	for _, tc := range []struct {
		qp  rdma.QueuePair
		ids []uint64
	}{{qp1, []uint64{1, 2}}, {qp2, []uint64{3}}} {
		dst := make([]rdma.Completion, len(tc.ids))
		if n, err := tc.qp.CQ().Wait(execCtx(t, 30*time.Second), dst, len(dst)); err != nil || n != len(dst) {
			t.Fatalf("Wait after Break = %d, %v", n, err)
		}
		for i, c := range dst {
			if c.ID != tc.ids[i] || c.Status != rdma.StatusTransportError {
				t.Fatalf("completion %+v after Break, want transport error for %d", c, tc.ids[i])
			}
		}
	}
	ctx := execCtx(t, 30*time.Second)
	if err := qp1.Post(faa(r, 9)); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("Post on a broken connection = %v", err)
	}
	if _, err := dev.CreateQP(rdma.QPConfig{}); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("CreateQP on a broken connection = %v", err)
	}
	if _, err := dev.RegisterRegion(ctx, "x", 8); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("RegisterRegion on a broken connection = %v", err)
	}
	if _, err := dev.Regions(ctx); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("Regions on a broken connection = %v", err)
	}
	dev.Heal()
	// The READs' real completions still arrive from the memory node (after
	// 200 ms); they must be swallowed, not handed to the next work request.
	for _, qp := range []rdma.QueuePair{qp1, qp2} {
		cs := rdmatest.MustExec(t, qp, faa(r, 10))
		if cs[0].ID != 10 {
			t.Fatalf("first completion after Heal is for %d, want 10", cs[0].ID)
		}
	}
	if c := rdmatest.FAA(t, qp1, r, r.Addr, 1); c.Value != 2 {
		t.Fatalf("FAA after Heal returned %d, want 2", c.Value)
	}
	if f := dev.Faults(); f.Breaks != 1 || f.BrokenWRs != 3 {
		t.Fatalf("Faults = %+v, want 1 break failing 3 work requests", f)
	}
}

func TestInjectedBreak(t *testing.T) {
	dev := wrap(t, faulty.Nth(3, faulty.Fault{Kind: faulty.Break}), nil)
	r := rdmatest.Register(t, dev, "ib", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	rdmatest.MustExec(t, qp, faa(r, 1))
	rdmatest.MustExec(t, qp, faa(r, 2))
	if err := qp.Post(faa(r, 3)); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("third Post = %v, want ErrConnectionLost", err)
	}
	if !dev.Broken() {
		t.Fatal("an injected Break did not break the connection")
	}
	if err := qp.Post(faa(r, 4)); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("Post while broken = %v", err)
	}
	dev.Heal()
	if c := rdmatest.FAA(t, qp, r, r.Addr, 1); c.Value != 2 {
		t.Fatalf("FAA after Heal returned %d, want 2", c.Value)
	}
	if f := dev.Faults(); f.Breaks != 1 || f.FailedPosts != 1 {
		t.Fatalf("Faults = %+v", f)
	}
}

func TestCloseAbandonsOutstanding(t *testing.T) {
	dev := wrap(t, faulty.Nth(1, faulty.Fault{Kind: faulty.Drop}), nil)
	r := rdmatest.Register(t, dev, "c", 64)
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Post(faa(r, 1), faa(r, 2)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := qp.CQ().Wait(context.Background(), make([]rdma.Completion, 2), 2)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, rdma.ErrQPClosed) {
			t.Fatalf("Wait = %v, want ErrQPClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not wake a Wait blocked behind a dropped completion")
	}
	if err := qp.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// If the wrapped device goes away, outstanding work requests fail and the
// wrapper's queue pairs close.
func TestInnerDeviceClosed(t *testing.T) {
	m := rdma.DefaultCostModel()
	m.AtomicLatency = 100 * time.Millisecond
	dev := wrap(t, nil, &m)
	r := rdmatest.Register(t, dev, "ic", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
	if err := qp.Post(faa(r, 1)); err != nil {
		t.Fatal(err)
	}
	dev.Inner().Close()
	dst := make([]rdma.Completion, 1)
	n, err := qp.CQ().Wait(execCtx(t, 30*time.Second), dst, 1)
	if err != nil || n != 1 {
		t.Fatalf("Wait = %d, %v", n, err)
	}
	// The wrapped queue pair may hand over its last completion before it
	// reports being closed; otherwise the wrapper fails it.
	if dst[0].ID != 1 || (dst[0].Status != rdma.StatusSuccess && dst[0].Status != rdma.StatusTransportError) {
		t.Fatalf("completion %+v", dst[0])
	}
	if _, err := qp.CQ().Wait(execCtx(t, 30*time.Second), dst, 1); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Wait after the wrapped device closed = %v, want ErrQPClosed", err)
	}
	if err := qp.Post(faa(r, 2)); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Post after the wrapped device closed = %v", err)
	}
}

// Random faults of every kind under a workload: whatever happens, the queue
// pair stays usable and the word counts exactly the applied FAAs.
func TestRandomFaultsAccounting(t *testing.T) {
	p := faulty.Probabilities{Delay: 0.1, MaxDelay: time.Millisecond, Drop: 0.05, FailUnapplied: 0.05, FailApplied: 0.05, FailPost: 0.05}
	dev := wrap(t, faulty.Random(7, p), nil)
	r := rdmatest.Register(t, dev, "rnd", 64)
	qp := rdmatest.NewQP(t, dev, rdma.QPConfig{SendQueueDepth: 8})
	var accepted, ok, transport, timeouts uint64
	for i := range uint64(400) {
		batch := []rdma.WorkRequest{faa(r, 2*i), faa(r, 2*i+1)}
		cs, err := rdma.Exec(execCtx(t, 10*time.Millisecond), qp, batch...)
		switch {
		case errors.Is(err, rdma.ErrConnectionLost):
			continue // a failed Post: nothing ran
		case errors.Is(err, context.DeadlineExceeded):
			timeouts++
		case err != nil:
			t.Fatalf("Exec: %v", err)
		}
		accepted += 2
		for j, c := range cs {
			if c.ID != batch[j].ID {
				t.Fatalf("completion for %d where %d was due", c.ID, batch[j].ID)
			}
			switch c.Status {
			case rdma.StatusSuccess:
				ok++
			case rdma.StatusTransportError:
				transport++
			case rdma.StatusFlushed:
			default:
				t.Fatalf("unexpected status %s", c.Status)
			}
		}
		if n := qp.CQ().Outstanding(); n != 0 {
			t.Fatalf("%d slots taken after Exec returned", n)
		}
	}
	f := dev.Faults()
	if got, want := peek(t, dev, r, r.Addr), accepted-f.FailedUnapplied-f.Flushed; got != want {
		t.Fatalf("word = %d, want %d accepted FAAs − %d unapplied − %d flushed (faults %+v)", got, want, f.FailedUnapplied, f.Flushed, f)
	}
	if f.Dropped == 0 || f.FailedUnapplied == 0 || f.FailedApplied == 0 || f.FailedPosts == 0 || f.Delayed == 0 {
		t.Fatalf("some fault never fired: %+v", f)
	}
	if transport < f.FailedApplied/2 || timeouts == 0 || ok == 0 {
		t.Fatalf("ok %d, transport errors %d, timeouts %d; faults %+v", ok, transport, timeouts, f)
	}
	t.Logf("%d accepted FAAs: %d ok, %d transport errors, %d Exec timeouts; faults %+v", accepted, ok, transport, timeouts, f)
}
