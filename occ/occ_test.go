package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const accounts txn.TableID = 1

var bankSchema = txn.Schema{Tables: []txn.Table{{ID: accounts, Name: "accounts", ValueSize: 8, Capacity: 1024}}}

type fixture struct {
	dev    rdma.Device
	mem    *rdma.MemDevice
	engine *Engine
}

func newFixture(t testing.TB, newLocker func(qp rdma.QueuePair) Locker) *fixture {
	return newFixtureOn(t, newLocker, func(d rdma.Device) rdma.Device { return d })
}

// newFixtureOn builds the fixture on a device wrapped by wrap (a fault injector).
func newFixtureOn(t testing.TB, newLocker func(qp rdma.QueuePair) Locker, wrap func(rdma.Device) rdma.Device) *fixture {
	t.Helper()
	mem, err := rdma.NewMemDevice(rdma.NewMemory(64<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dev := wrap(mem)
	t.Cleanup(func() { dev.Close(); mem.Close() })
	layout, err := store.Create(context.Background(), dev, bankSchema)
	if err != nil {
		t.Fatal(err)
	}
	if newLocker == nil {
		newLocker = func(qp rdma.QueuePair) Locker { return NewCASLocker(qp) }
	}
	e, err := NewEngine(layout, func() Locker {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return newLocker(qp)
	}, nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dev: dev, mem: mem, engine: e}
}

func (f *fixture) coordinator(t testing.TB) *Coordinator {
	qp, err := f.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return f.engine.NewCoordinator(qp)
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func ref(k uint64) txn.Ref { return txn.Ref{Table: accounts, Key: k} }

func mustCommit(t *testing.T, c *Coordinator, prog txn.Program) {
	t.Helper()
	if r := c.Run(context.Background(), 1, prog); r.Outcome != Committed {
		t.Fatalf("outcome %v: %v", r.Outcome, r.Err)
	}
}

func TestInsertGetUpdateDelete(t *testing.T) {
	f := newFixture(t, nil)
	c := f.coordinator(t)
	mustCommit(t, c, func(tx txn.Tx) error { return tx.Insert(ref(7), u64(100)) })
	mustCommit(t, c, func(tx txn.Tx) error {
		v, err := tx.Get(ref(7))
		if err != nil || binary.LittleEndian.Uint64(v) != 100 {
			t.Errorf("get = %v, %v", v, err)
		}
		if _, err := tx.Get(ref(8)); !errors.Is(err, txn.ErrNotFound) {
			t.Errorf("get missing: %v", err)
		}
		if err := tx.Insert(ref(7), u64(1)); !errors.Is(err, txn.ErrExists) {
			t.Errorf("insert existing: %v", err)
		}
		return nil
	})
	mustCommit(t, c, func(tx txn.Tx) error {
		if err := tx.Put(ref(7), u64(5)); !errors.Is(err, txn.ErrNotLocked) {
			t.Errorf("put unlocked: %v", err)
		}
		if _, err := tx.GetForUpdate(ref(7)); err != nil {
			return err
		}
		return tx.Put(ref(7), u64(101))
	})
	mustCommit(t, c, func(tx txn.Tx) error {
		v, err := tx.Get(ref(7))
		if err != nil || binary.LittleEndian.Uint64(v) != 101 {
			t.Errorf("after update get = %v, %v", v, err)
		}
		return nil
	})
	mustCommit(t, c, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(ref(7)); err != nil {
			return err
		}
		return tx.Delete(ref(7))
	})
	mustCommit(t, c, func(tx txn.Tx) error {
		if _, err := tx.Get(ref(7)); !errors.Is(err, txn.ErrNotFound) {
			t.Errorf("after delete: %v", err)
		}
		return tx.Insert(ref(7), u64(9))
	})
	r := c.Run(context.Background(), 2, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(ref(7)); err != nil {
			return err
		}
		if err := tx.Put(ref(7), u64(1000)); err != nil {
			return err
		}
		return txn.ErrRollback
	})
	if r.Outcome != RolledBack {
		t.Fatalf("rollback outcome %v", r.Outcome)
	}
	mustCommit(t, c, func(tx txn.Tx) error {
		v, err := tx.Get(ref(7))
		if err != nil || binary.LittleEndian.Uint64(v) != 9 {
			t.Errorf("rolled-back write visible: %v, %v", v, err)
		}
		return nil
	})
	if s := f.mem.Stats(); s.CAS == 0 {
		t.Fatalf("no CAS counted: %+v", s)
	}
}

func TestLockConflictAborts(t *testing.T) {
	f := newFixture(t, nil)
	c1, c2 := f.coordinator(t), f.coordinator(t)
	mustCommit(t, c1, func(tx txn.Tx) error { return tx.Insert(ref(1), u64(1)) })
	inner := Result{}
	r := c1.Run(context.Background(), 10, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(ref(1)); err != nil {
			return err
		}
		inner = c2.Run(context.Background(), 11, func(tx2 txn.Tx) error {
			_, err := tx2.GetForUpdate(ref(1))
			return err
		})
		return tx.Put(ref(1), u64(2))
	})
	if r.Outcome != Committed || inner.Outcome != Aborted || !errors.Is(inner.Err, txn.ErrConflict) {
		t.Fatalf("outer %v (%v), inner %v (%v)", r.Outcome, r.Err, inner.Outcome, inner.Err)
	}
	if inner.Counters.MNCASFailed != 1 {
		t.Fatalf("failed CAS not counted: %+v", inner.Counters)
	}
	// A read-only transaction that read the old value must fail validation
	// if a writer commits in between.
	r = c1.Run(context.Background(), 12, func(tx txn.Tx) error {
		if _, err := tx.Get(ref(1)); err != nil {
			return err
		}
		mustCommit(t, c2, func(tx2 txn.Tx) error {
			if _, err := tx2.GetForUpdate(ref(1)); err != nil {
				return err
			}
			return tx2.Put(ref(1), u64(3))
		})
		return nil
	})
	if r.Outcome != Aborted {
		t.Fatalf("stale read committed: %v", r.Outcome)
	}
}

func TestConcurrentInsertsOfOneKey(t *testing.T) {
	f := newFixture(t, nil)
	const workers, keys = 4, 64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.coordinator(t)
			defer c.Close()
			for k := range uint64(keys) {
				c.Run(context.Background(), uint64(w), func(tx txn.Tx) error { return tx.Insert(ref(k), u64(uint64(w))) })
			}
		}()
	}
	wg.Wait()
	// Every key exists exactly once: count present slots holding each key.
	layout, _ := f.engine.Layout().Table(accounts)
	qp, _ := f.dev.CreateQP(rdma.QPConfig{})
	buf := make([]byte, layout.Buckets*layout.BucketSize)
	for off := uint64(0); off < uint64(len(buf)); off += rdma.MaxTransferBytes {
		end := min(off+rdma.MaxTransferBytes, uint64(len(buf)))
		cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: layout.Region.RKey, RemoteAddr: layout.Region.Addr + off, Local: buf[off:end]})
		if err != nil || rdma.FirstError(cs) != nil {
			t.Fatal(err, rdma.FirstError(cs))
		}
	}
	count := map[uint64]int{}
	for off := uint64(0); off < uint64(len(buf)); off += layout.SlotSize {
		s := layout.DecodeSlot(buf[off:])
		if s.Meta.Present() {
			count[s.Key]++
		}
		if s.Lock != 0 {
			t.Errorf("slot at %d left locked: %#x", off, s.Lock)
		}
	}
	for k := range uint64(keys) {
		if count[k] > 1 {
			t.Errorf("key %d present %d times", k, count[k])
		}
	}
}

func TestBankTotalUnderConcurrency(t *testing.T) {
	f := newFixture(t, nil)
	const n, initial = 16, 1000
	c := f.coordinator(t)
	for k := range uint64(n) {
		mustCommit(t, c, func(tx txn.Tx) error { return tx.Insert(ref(k), u64(initial)) })
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.coordinator(t)
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 500 {
				a, b := rng.Uint64N(n), rng.Uint64N(n)
				if a == b {
					continue
				}
				r := c.Run(context.Background(), 1, func(tx txn.Tx) error {
					vs, err := tx.GetForUpdateMany([]txn.Ref{ref(a), ref(b)})
					if err != nil {
						return err
					}
					if err := tx.Put(ref(a), u64(binary.LittleEndian.Uint64(vs[0])-1)); err != nil {
						return err
					}
					return tx.Put(ref(b), u64(binary.LittleEndian.Uint64(vs[1])+1))
				})
				if r.Outcome == Committed {
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	var total uint64
	mustCommit(t, c, func(tx txn.Tx) error {
		total = 0
		for k := range uint64(n) {
			v, err := tx.Get(ref(k))
			if err != nil {
				return err
			}
			total += binary.LittleEndian.Uint64(v)
		}
		return nil
	})
	if total != n*initial {
		t.Fatalf("total %d, want %d (%d committed)", total, n*initial, committed)
	}
	if committed == 0 {
		t.Fatal("nothing committed")
	}
}
