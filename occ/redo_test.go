package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

const redoNode = 5

func testRedoConfig(slots int) RedoConfig {
	return RedoConfig{Node: redoNode, Slots: slots, RecordBytes: 4096, RepairAfter: time.Second}
}

// crashOpts vary a crashNode: its number, and its lock path.
type crashOpts struct {
	node        uint32                         // default redoNode
	locker      func(qp rdma.QueuePair) Locker // default memory-node CAS
	exactlyOnce bool                           // Config.ExactlyOnce
}

// crashNode is one incarnation of a compute node on a shared memory node:
// its device stops delivering anything (as if the process died) once
// crash() is called or its work-request count reaches crashAt.
type crashNode struct {
	dev     *faulty.Device
	engine  *Engine
	log     *RedoLog
	crashed atomic.Bool
	crashAt atomic.Uint64
}

func newCrashNode(t *testing.T, mem *rdma.MemDevice, layout *store.Layout, slots int, crashAt uint64) (*crashNode, Recovery) {
	t.Helper()
	return newCrashNodeWith(t, mem, layout, slots, crashAt, crashOpts{})
}

func newCrashNodeWith(t *testing.T, mem *rdma.MemDevice, layout *store.Layout, slots int, crashAt uint64, o crashOpts) (*crashNode, Recovery) {
	t.Helper()
	if o.node == 0 {
		o.node = redoNode
	}
	if o.locker == nil {
		o.locker = func(qp rdma.QueuePair) Locker { return NewCASLocker(qp) }
	}
	n := &crashNode{}
	n.crashAt.Store(crashAt)
	n.dev = faulty.Wrap(mem, faulty.InjectorFunc(func(ev faulty.Event) faulty.Fault {
		if ev.Level != faulty.LevelWorkRequest {
			return faulty.Fault{}
		}
		if at := n.crashAt.Load(); at > 0 && ev.Seq >= at {
			n.crashed.Store(true)
		}
		if n.crashed.Load() {
			return faulty.Fault{Kind: faulty.FailUnapplied}
		}
		return faulty.Fault{}
	}))
	t.Cleanup(func() { n.dev.Close() })
	cfg := DefaultConfig()
	cfg.Node, cfg.ExactlyOnce = o.node, o.exactlyOnce
	cfg.CleanupTimeout, cfg.CleanupBackoff = 20*time.Millisecond, time.Millisecond
	e, err := NewEngine(layout, func() Locker {
		qp, err := n.dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return o.locker(qp)
	}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rec Recovery
	rc := testRedoConfig(slots)
	rc.Node = o.node
	n.log, rec, err = OpenRedoLog(context.Background(), mem, layout, rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.UseRedoLog(n.log); err != nil {
		t.Fatal(err)
	}
	n.engine = e
	return n, rec
}

func (n *crashNode) coordinator(t *testing.T) *Coordinator {
	qp, err := n.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := n.engine.NewCoordinator(qp)
	t.Cleanup(func() { c.Close() })
	return c
}

func transfer(from, to uint64, amount int64) txn.Program {
	return func(tx txn.Tx) error {
		vs, err := tx.GetForUpdateMany([]txn.Ref{ref(from), ref(to)})
		if err != nil {
			return err
		}
		if err := tx.Put(ref(from), u64(binary.LittleEndian.Uint64(vs[0])-uint64(amount))); err != nil {
			return err
		}
		return tx.Put(ref(to), u64(binary.LittleEndian.Uint64(vs[1])+uint64(amount)))
	}
}

// bankOnMN reads every account straight from the memory node: the total,
// and the slots whose lock word is still held.
func bankOnMN(t *testing.T, mem *rdma.MemDevice, layout *store.Layout) (total int64, held int) {
	b, held := balancesOnMN(t, mem, layout)
	for _, v := range b {
		total += v
	}
	return total, held
}

// accountsOnMN reads the whole accounts table from the memory node.
func accountsOnMN(t *testing.T, mem *rdma.MemDevice, layout *store.Layout) (*store.TableLayout, []byte) {
	t.Helper()
	tl, _ := layout.Table(accounts)
	qp, err := mem.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	buf := make([]byte, tl.Buckets*tl.BucketSize)
	if err := execOne(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.Region.Addr, Local: buf}); err != nil {
		t.Fatal(err)
	}
	return tl, buf
}

// balancesOnMN reads every account's balance and counts the lock words
// still held, straight from the memory node.
func balancesOnMN(t *testing.T, mem *rdma.MemDevice, layout *store.Layout) (balances []int64, held int) {
	t.Helper()
	balances = make([]int64, nAccounts)
	tl, buf := accountsOnMN(t, mem, layout)
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		s := tl.DecodeSlot(buf[off:])
		if IsLocked(s.Lock) {
			held++
		}
		if s.Meta.Present() {
			balances[s.Key] = int64(binary.LittleEndian.Uint64(s.Value))
		}
	}
	return balances, held
}

func newBank(t *testing.T) (*rdma.MemDevice, *store.Layout) {
	t.Helper()
	mem, err := rdma.NewMemDevice(rdma.NewMemory(64<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	layout, err := store.Create(context.Background(), mem, bankSchema)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dev: mem, mem: mem}
	f.engine, err = NewEngine(layout, func() Locker {
		qp, err := mem.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return NewCASLocker(qp)
	}, nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := f.coordinator(t)
	defer c.Close()
	for k := range uint64(nAccounts) {
		mustCommit(t, c, func(tx txn.Tx) error { return tx.Insert(ref(k), u64(100)) })
	}
	return mem, layout
}

// TestRedoRecoversEveryCrashPoint: a node runs transfers one after another
// and dies at work request k, for every k across several transactions —
// inside the execution, between the redo record and the values, between
// the values and the headers, between two headers. Its next incarnation's
// OpenRedoLog leaves no lock held and the total conserved: a transfer that
// had begun its write-back is finished from its record, any other is
// released untouched. Recovering the same crashes without the log (locks
// released, nothing redone) loses money at some k, which shows the crash
// points reach into write-backs.
func TestRedoRecoversEveryCrashPoint(t *testing.T) {
	const transfers = 4
	redone, broken := 0, 0
	for crashAt := uint64(3); crashAt <= 40; crashAt++ {
		for _, useLog := range []bool{true, false} {
			mem, layout := newBank(t)
			n, _ := newCrashNode(t, mem, layout, 1, crashAt)
			c := n.coordinator(t)
			for i := range transfers {
				c.Run(context.Background(), uint64(i), transfer(uint64(i), uint64(i+1)%nAccounts, 10))
			}
			if !n.crashed.Load() {
				t.Fatalf("crash at work request %d never happened", crashAt)
			}
			// The next incarnation.
			var rec Recovery
			if useLog {
				var err error
				if _, rec, err = OpenRedoLog(context.Background(), mem, layout, testRedoConfig(1)); err != nil {
					t.Fatal(err)
				}
			} else {
				qp, err := mem.CreateQP(rdma.QPConfig{})
				if err != nil {
					t.Fatal(err)
				}
				rp := &repairer{qp: qp, node: redoNode}
				if rec, err = recoverLocks(context.Background(), qp, layout, rp, nil); err != nil {
					t.Fatal(err)
				}
				qp.Close()
			}
			if !rec.Scanned {
				t.Fatalf("crash at %d: a log left running was not scanned", crashAt)
			}
			total, held := bankOnMN(t, mem, layout)
			if held != 0 {
				t.Errorf("crash at %d (log %v): %d locks still held after recovery %+v", crashAt, useLog, held, rec)
			}
			switch {
			case useLog && total != 100*nAccounts:
				t.Errorf("crash at %d: total %d after recovery %+v, want %d", crashAt, total, rec, 100*nAccounts)
			case !useLog && total != 100*nAccounts:
				broken++
			}
			if useLog {
				redone += rec.Redone
			}
		}
	}
	if redone == 0 {
		t.Error("no crash point fell inside a write-back (nothing redone)")
	}
	if broken == 0 {
		t.Error("recovering without the log never broke the total: the test cannot tell the log's effect")
	}
	t.Logf("locks redone from the log: %d; crash points where releasing without the log lost money: %d", redone, broken)
}

// TestRedoRecoversConcurrentCrash: four coordinators transfer concurrently
// until the node dies at a random work request; after recovery no lock is
// held and the balances are exactly the initial ones plus every transfer
// reported committed plus some subset of the transfers in doubt (those cut
// off by the crash: each is applied whole or not at all), and the node's
// next incarnation runs transfers again.
func TestRedoRecoversConcurrentCrash(t *testing.T) {
	redone := 0
	for seed := range uint64(12) {
		mem, layout := newBank(t)
		rng := rand.New(rand.NewPCG(seed, 99))
		n, _ := newCrashNode(t, mem, layout, 4, uint64(100+rng.IntN(1500)))
		type move struct {
			from, to uint64
			amt      int64
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		want := make([]int64, nAccounts)
		for k := range want {
			want[k] = 100
		}
		var doubt []move
		for w := range 4 {
			c := n.coordinator(t)
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !n.crashed.Load() {
					m := move{from: uint64(r.IntN(nAccounts)), amt: 1 + r.Int64N(9)}
					m.to = (m.from + 1 + uint64(r.IntN(nAccounts-1))) % nAccounts
					res := c.Run(context.Background(), uint64(w), transfer(m.from, m.to, m.amt))
					mu.Lock()
					switch {
					case res.Outcome == Committed:
						want[m.from] -= m.amt
						want[m.to] += m.amt
					case n.crashed.Load():
						doubt = append(doubt, m)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		n2, rec := newCrashNode(t, mem, layout, 4, 0)
		redone += rec.Redone
		got, held := balancesOnMN(t, mem, layout)
		if held != 0 {
			t.Fatalf("seed %d: %d locks held after recovery %+v", seed, held, rec)
		}
		found := false
		for subset := 0; subset < 1<<len(doubt) && !found; subset++ {
			b := append([]int64(nil), want...)
			for i, m := range doubt {
				if subset&(1<<i) != 0 {
					b[m.from] -= m.amt
					b[m.to] += m.amt
				}
			}
			found = slices.Equal(b, got)
		}
		if !found {
			t.Fatalf("seed %d: balances %v after recovery %+v are not the reported commits %v plus a subset of the %d in doubt %v",
				seed, got, rec, want, len(doubt), doubt)
		}
		c := n2.coordinator(t)
		mustCommit(t, c, transfer(0, 1, 1))
	}
	t.Logf("locks redone from the log over all seeds: %d", redone)
}

// TestRedoKeepsAbandonedRecord: a write-back cut off at work request k
// gives up (the memory node unreachable past CleanupTimeout) with its locks
// held; the memory node comes back, the same coordinator commits another
// transfer, then the node dies. The next incarnation must still finish the
// first transfer from its record — the coordinator moved to a spare slot
// instead of overwriting it.
func TestRedoKeepsAbandonedRecord(t *testing.T) {
	redone := 0
	for crashAt := uint64(3); crashAt <= 14; crashAt++ {
		mem, layout := newBank(t)
		n, _ := newCrashNode(t, mem, layout, 1, crashAt)
		c := n.coordinator(t)
		if r := c.Run(context.Background(), 1, transfer(0, 1, 10)); r.Outcome == Committed {
			continue
		}
		n.crashAt.Store(0)
		n.crashed.Store(false)
		mustCommit(t, c, transfer(2, 3, 5))
		// A clean close after a given-up write-back must not promise the
		// next incarnation that nothing is left to recover; without one,
		// it does.
		gaveUp := n.log.abandoned.Load() > 0
		if err := n.log.Close(context.Background(), mem); err != nil {
			t.Fatal(err)
		}
		_, rec := newCrashNode(t, mem, layout, 1, 0)
		if rec.Scanned != gaveUp {
			t.Fatalf("crash at %d: gave up %v, next incarnation scanned %v", crashAt, gaveUp, rec.Scanned)
		}
		redone += rec.Redone
		b, held := balancesOnMN(t, mem, layout)
		if held != 0 || b[0]+b[1] != 200 || b[2] != 95 || b[3] != 105 {
			t.Errorf("crash at %d: balances %v, %d held after recovery %+v", crashAt, b, held, rec)
		}
	}
	if redone == 0 {
		t.Error("no abandoned write-back was finished from its record")
	}
}

// TestRedoLogCleanClose: a log closed cleanly is not scanned again, and a
// coordinator beyond the log's slots cannot commit a write under a
// memory-node lock (typed error) but can still read.
func TestRedoLogCleanClose(t *testing.T) {
	mem, layout := newBank(t)
	n, rec := newCrashNode(t, mem, layout, 1, 0)
	if rec.Scanned {
		t.Fatal("first incarnation scanned")
	}
	c := n.coordinator(t)
	mustCommit(t, c, transfer(1, 2, 5))
	extra := n.coordinator(t)
	r := extra.Run(context.Background(), 9, transfer(2, 3, 1))
	if !errors.Is(r.Err, ErrRedo) {
		t.Fatalf("coordinator without a slot: outcome %v, err %v; want ErrRedo", r.Outcome, r.Err)
	}
	mustCommit(t, extra, func(tx txn.Tx) error { _, err := tx.Get(ref(2)); return err })
	if err := n.log.Close(context.Background(), mem); err != nil {
		t.Fatal(err)
	}
	_, rec = newCrashNode(t, mem, layout, 1, 0)
	if rec.Scanned {
		t.Fatalf("a cleanly closed log was scanned: %+v", rec)
	}
	if total, held := bankOnMN(t, mem, layout); total != 100*nAccounts || held != 0 {
		t.Fatalf("total %d, %d held", total, held)
	}
	if err := (RedoConfig{Node: 1 << 22, Slots: 0, RecordBytes: 100}).Validate(); err == nil {
		t.Fatal("bad redo config accepted")
	}
}

// FuzzDecodeRedo: a record read back from the memory node never crashes
// the decoder, and whatever it accepts re-encodes to the same bytes.
func FuzzDecodeRedo(f *testing.F) {
	layout := mustLayout(f)
	good, err := encodeRedo(store.CASTag(3, 7), []redoEntry{
		{table: accounts, present: true, addr: 4096, meta: 3, key: 7, value: u64(100)},
		{table: accounts, addr: 8192, meta: 4, key: 8},
	}, 4096)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:20])
	f.Add(make([]byte, 64))
	short := append([]byte(nil), good[:len(good)-3]...)
	short[0] |= 1
	f.Add(short)
	// A flipped bit anywhere is refused.
	for i := range len(good) * 8 {
		bad := append([]byte(nil), good...)
		bad[i/8] ^= 1 << (i % 8)
		if _, _, ok := decodeRedo(bad, layout); ok {
			f.Fatalf("record with bit %d flipped accepted", i)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= redoRecordHeader && b[0]&1 == 1 {
			// Half the inputs get a valid length and checksum, so that
			// the entry parser, not the checksum, decides.
			b = finishRedo(b)
		}
		tag, entries, ok := decodeRedo(b, layout)
		if !ok {
			return
		}
		again, err := encodeRedo(tag, entries, len(b)+redoRecordHeader)
		if err != nil {
			t.Fatal(err)
		}
		n := redoRecordHeader + int(binary.LittleEndian.Uint32(b[8:]))
		if string(again) != string(b[:n]) {
			t.Fatalf("decode/encode changed the record")
		}
	})
}

func mustLayout(tb testing.TB) *store.Layout {
	mem, err := rdma.NewMemDevice(rdma.NewMemory(16<<20), rdma.MemConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mem.Close() })
	layout, err := store.Create(context.Background(), mem, bankSchema)
	if err != nil {
		tb.Fatal(err)
	}
	return layout
}
