package occ

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// twoNodes builds two engines ("nodes" 1 and 2, their own address caches
// and lockers) with ExactlyOnce over one memory node.
func twoNodes(t *testing.T) (*fixture, [2]*Engine) {
	t.Helper()
	f := newFixture(t, nil)
	var es [2]*Engine
	for i := range es {
		cfg := DefaultConfig()
		cfg.Node, cfg.ExactlyOnce = uint32(i+1), true
		e, err := NewEngine(f.engine.Layout(), func() Locker {
			qp, err := f.dev.CreateQP(rdma.QPConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return NewCASLocker(qp)
		}, nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	return f, es
}

func coordOf(t *testing.T, f *fixture, e *Engine) *Coordinator {
	t.Helper()
	qp, err := f.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := e.NewCoordinator(qp)
	t.Cleanup(func() { c.Close() })
	return c
}

// increment adds 1 to account k.
func increment(k uint64) txn.Program {
	return func(tx txn.Tx) error {
		v, err := tx.GetForUpdate(ref(k))
		if err != nil {
			return err
		}
		return tx.Put(ref(k), u64(binary.LittleEndian.Uint64(v)+1))
	}
}

func balance(t *testing.T, c *Coordinator, k uint64) uint64 {
	t.Helper()
	var got uint64
	r := c.Run(context.Background(), 1<<40|1<<39|k, func(tx txn.Tx) error {
		v, err := tx.Get(ref(k))
		got = binary.LittleEndian.Uint64(v)
		return err
	})
	if r.Outcome != Committed {
		t.Fatalf("read: %v %v", r.Outcome, r.Err)
	}
	return got
}

// TestExactlyOnceAcrossNodes: a transaction retried on another node after
// it committed (its reply lost) is answered as a replay and applied once;
// a read-only transaction is not recorded; another transaction of the
// same client is not mistaken for it.
func TestExactlyOnceAcrossNodes(t *testing.T) {
	f, es := twoNodes(t)
	a, b := coordOf(t, f, es[0]), coordOf(t, f, es[1])
	mustCommit(t, a, func(tx txn.Tx) error { return tx.Insert(ref(1), u64(100)) })

	const id = 7<<40 | 1
	if r := a.Run(context.Background(), id, increment(1)); r.Outcome != Committed || r.Replayed {
		t.Fatalf("first attempt: %v replayed %v %v", r.Outcome, r.Replayed, r.Err)
	}
	r := b.Run(context.Background(), id, increment(1))
	if r.Outcome != Committed || !r.Replayed {
		t.Fatalf("retry on the other node: %v replayed %v %v", r.Outcome, r.Replayed, r.Err)
	}
	if r := a.Run(context.Background(), id, increment(1)); !r.Replayed {
		t.Fatal("retry on the same node not replayed")
	}
	if got := balance(t, a, 1); got != 101 {
		t.Fatalf("balance %d, want 101 (applied once)", got)
	}
	// The next transaction of client 7 uses another ledger word; the one
	// LedgerRing later reuses this one and is not a replay either.
	for _, next := range []uint64{7<<40 | 2, 7<<40 | (1 + store.LedgerRing)} {
		if r := b.Run(context.Background(), next, increment(1)); r.Outcome != Committed || r.Replayed {
			t.Fatalf("transaction %#x: %v replayed %v", next, r.Outcome, r.Replayed)
		}
	}
	if got := balance(t, b, 1); got != 103 {
		t.Fatalf("balance %d, want 103", got)
	}
}

// TestExactlyOnceConcurrentAttempts runs attempts of one transaction on
// both nodes at once, many times: each transaction is applied exactly once
// (the attempts serialise on the record's lock, and the later one finds the
// earlier's ledger word), however the attempts interleave.
func TestExactlyOnceConcurrentAttempts(t *testing.T) {
	f, es := twoNodes(t)
	a := coordOf(t, f, es[0])
	mustCommit(t, a, func(tx txn.Tx) error { return tx.Insert(ref(2), u64(0)) })
	const txns, attemptsPer = 200, 4
	var applied atomic.Uint64
	for i := range uint64(txns) {
		id := 9<<40 | (i + 1)
		var wg sync.WaitGroup
		var committed atomic.Int32
		for j := range attemptsPer {
			c := coordOf(t, f, es[j%2])
			wg.Go(func() {
				// Retry aborts, as a client does, until this attempt
				// commits or finds the transaction committed.
				for {
					r := c.Run(context.Background(), id, increment(2))
					if r.Outcome == Committed {
						if !r.Replayed {
							committed.Add(1)
						}
						return
					}
					if r.Outcome != Aborted {
						t.Errorf("attempt: %v %v", r.Outcome, r.Err)
						return
					}
				}
			})
		}
		wg.Wait()
		if n := committed.Load(); n != 1 {
			t.Fatalf("transaction %d: %d attempts committed, want exactly 1", i, n)
		}
		applied.Add(1)
	}
	if got := balance(t, a, 2); got != applied.Load() {
		t.Fatalf("balance %d after %d transactions", got, applied.Load())
	}
}

// TestLedgerAddr: client lanes and ring positions map to distinct words,
// inside the region.
func TestLedgerAddr(t *testing.T) {
	r := rdma.Region{Addr: 4096, Length: store.LedgerBytes}
	seen := map[uint64]bool{}
	for client := uint64(1); client <= 64; client++ {
		for seq := uint64(1); seq <= store.LedgerRing; seq++ {
			a := store.LedgerAddr(r, client<<40|seq)
			if a < r.Addr || a+8 > r.Addr+r.Length || a%8 != 0 || seen[a] {
				t.Fatalf("client %d seq %d: address %d", client, seq, a)
			}
			seen[a] = true
		}
	}
	for _, id := range []uint64{1, 2, 1 << 39, ^uint64(0)} {
		if a := store.LedgerAddr(r, id); a < r.Addr || a+8 > r.Addr+r.Length {
			t.Fatalf("id %#x: address %d outside the region", id, a)
		}
	}
}
