package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"

	"github.com/aura-runtime/aura/internal/crashdir"
)

func openStore(t *testing.T, dir string) *durable.Store {
	t.Helper()
	s, err := durable.Open(durable.Options{Dir: dir, Capacity: 64 << 20, Logger: quiet(), SnapshotEveryBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDurableServerSurvivesCrash: everything a client saw acknowledged by a
// journaled server — registrations, WRITEs, CAS, FAA from concurrent
// connections — is in the memory a store rebuilds from a copy of the
// directory taken right after, with the same rkeys and addresses.
func TestDurableServerSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	defer store.Close()
	ts := startServer(t, store.Memory(), ServerConfig{Journal: store})
	const clients, rounds = 4, 150
	var wg sync.WaitGroup
	regions := make([]rdma.Region, clients)
	for c := range clients {
		d := dial(t, ts.addr, ClientConfig{})
		regions[c] = mustRegion(t, d, "r"+string(rune('0'+c)), 4096)
		qp := mustQP(t, d, 64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := regions[c]
			for i := range rounds {
				rec := bytes.Repeat([]byte{byte(i)}, 24)
				cs, err := rdma.Exec(ctxT(t), qp,
					rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 64, Local: rec},
					rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1},
					rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 8, Compare: uint64(i), Swap: uint64(i + 1)},
					rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + 16, Compare: 12345, Swap: 1}, // fails: not logged
				)
				if err == nil {
					err = rdma.FirstError(cs)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// A snapshot while the clients write: recovery then starts from it and
	// replays the log after it. (Not an automatic one: the copy below is
	// file by file and must not race a snapshot's clean-up.)
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(20 * time.Millisecond)
		if err := store.Snapshot(); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	if store.Stats().Snapshots != 1 {
		t.Fatalf("snapshots: %d", store.Stats().Snapshots)
	}
	crashed := crashdir.Copy(t, dir)
	ts.stop()
	st := store.Stats()
	if st.Fsyncs == 0 || st.LogRecords < clients*rounds {
		t.Fatalf("journal stats %+v", st)
	}
	t.Logf("%d records in %d fsyncs (mean %.1f)", st.LogRecords, st.Fsyncs, float64(st.LogRecords)/float64(st.Fsyncs))

	re := openStore(t, crashed)
	defer re.Close()
	ts2 := startServer(t, re.Memory(), ServerConfig{Journal: re})
	d := dial(t, ts2.addr, ClientConfig{})
	qp := mustQP(t, d, 16)
	got, err := d.Regions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != clients {
		t.Fatalf("regions %+v", got)
	}
	for _, r := range regions {
		buf := make([]byte, 24+64)
		if _, err := rdma.Exec(ctxT(t), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: buf}); err != nil {
			t.Fatal(err)
		}
		faa, cas, untouched := le.Uint64(buf[0:]), le.Uint64(buf[8:]), le.Uint64(buf[16:])
		if faa != rounds || cas != rounds || untouched != 0 || !bytes.Equal(buf[64:], bytes.Repeat([]byte{rounds - 1}, 24)) {
			t.Errorf("region %q after recovery: faa %d cas %d untouched %d record %v", r.Name, faa, cas, untouched, buf[64:])
		}
	}
}

// gateJournal is a journal whose records become durable only when the test
// says so, or that fails on demand.
type gateJournal struct {
	mu       sync.Mutex
	appended uint64
	durable  atomic.Uint64
	changed  chan struct{}
	fail     atomic.Bool
	// failWait makes waits for durability fail as a failed fsync does.
	failWait atomic.Bool
}

func newGate() *gateJournal { return &gateJournal{changed: make(chan struct{})} }

func (g *gateJournal) append() (uint64, error) {
	if g.fail.Load() {
		return 0, errors.New("injected journal failure")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.appended++
	return g.appended, nil
}

func (g *gateJournal) AppendRegion(rdma.Region) (uint64, error)     { return g.append() }
func (g *gateJournal) AppendWrites([]durable.Write) (uint64, error) { return g.append() }
func (g *gateJournal) Appended() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.appended
}
func (g *gateJournal) Durable() uint64 { return g.durable.Load() }

// release makes everything appended durable.
func (g *gateJournal) release() {
	g.mu.Lock()
	g.durable.Store(g.appended)
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateJournal) WaitDurable(seq uint64, cancel <-chan struct{}) error {
	for {
		g.mu.Lock()
		ch := g.changed
		g.mu.Unlock()
		if g.durable.Load() >= seq {
			return nil
		}
		if g.failWait.Load() {
			return fmt.Errorf("%w: injected fsync failure", durable.ErrLogFailed)
		}
		select {
		case <-ch:
		case <-cancel:
			return durable.ErrClosed
		}
	}
}

// TestDurableServerHoldsRepliesUntilDurable: neither the WRITE's own reply
// nor another client's READ that sees the written value leaves the server
// before the journal holds the write.
func TestDurableServerHoldsRepliesUntilDurable(t *testing.T) {
	g := newGate()
	ts := startServer(t, nil, ServerConfig{Journal: g})
	d1, d2 := dial(t, ts.addr, ClientConfig{}), dial(t, ts.addr, ClientConfig{})
	done := make(chan struct{})
	var r rdma.Region
	go func() { defer close(done); r = mustRegion(t, d1, "r", 64) }()
	select {
	case <-done:
		t.Fatal("registration acknowledged before it was durable")
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	<-done
	qp1, qp2 := mustQP(t, d1, 4), mustQP(t, d2, 4)
	wrote := make(chan error, 1)
	go func() {
		_, err := rdma.Exec(ctxT(t), qp1, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: []byte("durable?")})
		wrote <- err
	}()
	// Wait until the WRITE has executed (its record is appended).
	for deadline := time.Now().Add(5 * time.Second); g.Appended() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the WRITE never reached the journal")
		}
		time.Sleep(time.Millisecond)
	}
	read := make(chan []byte, 1)
	go func() {
		b := make([]byte, 8)
		if _, err := rdma.Exec(ctxT(t), qp2, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: b}); err != nil {
			t.Error(err)
		}
		read <- b
	}()
	select {
	case <-wrote:
		t.Fatal("WRITE acknowledged before it was durable")
	case b := <-read:
		t.Fatalf("READ of a value not yet durable answered: %q", b)
	case <-time.After(100 * time.Millisecond):
	}
	g.release()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if b := <-read; string(b) != "durable?" {
		t.Fatalf("READ %q", b)
	}
	// Nothing pending: a READ is answered at once.
	b := make([]byte, 8)
	if _, err := rdma.Exec(ctxT(t), qp2, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: b}); err != nil {
		t.Fatal(err)
	}
}

// TestDurableServerStopsOnJournalFailure: a journal error is never
// acknowledged; the server stops and Serve returns the error.
func TestDurableServerStopsOnJournalFailure(t *testing.T) {
	g := newGate()
	g.release()
	srv, served, qp, r := gatedServer(t, g)
	g.fail.Store(true)
	cs, err := rdma.Exec(ctxT(t), qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err == nil {
		t.Fatal("a mutation the journal refused was acknowledged")
	}
	awaitJournalStop(t, srv, served, "a journal failure")
}

// gatedServer serves a 1 MiB memory through the gate journal g and
// returns the server, Serve's result, a queue pair of a client and a
// 64-byte region it registered (the gate released for it).
func gatedServer(t *testing.T, g *gateJournal) (*Server, <-chan error, rdma.QueuePair, rdma.Region) {
	t.Helper()
	srv, err := NewServer(rdma.NewMemory(1<<20), ServerConfig{Journal: g, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	d := dial(t, l.Addr().String(), ClientConfig{RedialAttempts: 1})
	done := make(chan struct{})
	var r rdma.Region
	go func() { defer close(done); r = mustRegion(t, d, "r", 64) }()
	time.Sleep(20 * time.Millisecond)
	g.release()
	<-done
	return srv, served, mustQP(t, d, 4), r
}

// awaitJournalStop fails t unless Serve returns the journal's error within
// 5 s of what happened.
func awaitJournalStop(t *testing.T, srv *Server, served <-chan error, what string) {
	t.Helper()
	select {
	case err := <-served:
		if err == nil || errors.Is(err, ErrServerClosed) || srv.JournalErr() == nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("server still serving after %s", what)
	}
}

// TestDurableServerStopsOnFsyncFailure: a log that fails after appending
// (its write or fsync) stops the server too, not only the connection whose
// reply waited for it.
func TestDurableServerStopsOnFsyncFailure(t *testing.T) {
	g := newGate()
	srv, served, qp, r := gatedServer(t, g)
	acked := make(chan error, 1)
	go func() {
		cs, err := rdma.Exec(ctxT(t), qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
		if err == nil {
			err = rdma.FirstError(cs)
		}
		acked <- err
	}()
	for g.Appended() < 2 { // the FAA is logged, its reply waits for the disk
		time.Sleep(time.Millisecond)
	}
	g.failWait.Store(true)
	g.mu.Lock()
	close(g.changed) // wake the waiter without making anything durable
	g.changed = make(chan struct{})
	g.mu.Unlock()
	if err := <-acked; err == nil {
		t.Fatal("a mutation whose record never reached the disk was acknowledged")
	}
	awaitJournalStop(t, srv, served, "the log failed")
}

// BenchmarkDurableFAA: unbatched FAAs from many QPs (one device, each QP
// one request at a time, as a transaction posts) against a journaled server
// on a real directory, and the same in memory; reports ops/s and, with the
// journal, the mean group commit. Run with -benchtime=2000x or so: each op
// waits for an fsync.
func BenchmarkDurableFAA(b *testing.B) {
	for _, journaled := range []bool{false, true} {
		for _, qps := range []int{1, 16, 64} {
			name := fmt.Sprintf("memory/qps%d", qps)
			if journaled {
				name = fmt.Sprintf("journal/qps%d", qps)
			}
			b.Run(name, func(b *testing.B) {
				mem := rdma.NewMemory(64 << 20)
				cfg := ServerConfig{}
				var store *durable.Store
				if journaled {
					var err error
					store, err = durable.Open(durable.Options{Dir: b.TempDir(), Capacity: 64 << 20, Logger: quiet()})
					if err != nil {
						b.Fatal(err)
					}
					defer store.Close()
					mem, cfg.Journal = store.Memory(), store
				}
				ts := startServer(b, mem, cfg)
				defer ts.stop()
				d := dial(b, ts.addr, ClientConfig{})
				r := mustRegion(b, d, "bench", 1<<20)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for q := range qps {
					qp := mustQP(b, d, 4)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := int(next.Add(1)); i <= b.N; i = int(next.Add(1)) {
							wr := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + uint64(q*4096+(i%64)*8), Add: 1}
							if _, err := rdma.Exec(context.Background(), qp, wr); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				if store != nil {
					st := store.Stats()
					b.ReportMetric(float64(st.LogRecords)/float64(max(st.Fsyncs, 1)), "records/fsync")
				}
			})
		}
	}
}

// The memory node's journal takes the server's barrier: without it a
// snapshot could be published before the records of mutations it holds.
var _ BarrierJournal = (*durable.Store)(nil)
