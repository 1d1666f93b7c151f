package actors

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload/bank"
)

// TestNodeRestartRecoversLocks: a node (mn-only: every lock by memory-node
// CAS) loses its memory node in the middle of concurrent transfers, as if
// its process died, leaving locks held and write-backs half done. The node
// started next under the same number recovers them before it runs
// anything: the bank total holds, no lock stays held, and transfers commit
// again. A node that closed cleanly leaves nothing to recover.
func TestNodeRestartRecoversLocks(t *testing.T) {
	ctx := context.Background()
	cfg := bank.DefaultConfig()
	cfg.Accounts = 16
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, base, layout := loadedMemory(t, wl, 64<<20)
	nodeCfg := func() NodeConfig {
		nc := DefaultNodeConfig("cn-1")
		nc.ID, nc.Coordinators, nc.Logger = 1, 4, slog.New(slog.DiscardHandler)
		nc.Engine.CleanupTimeout, nc.Engine.CleanupBackoff = 50*time.Millisecond, time.Millisecond
		return nc
	}
	redone, released := 0, 0
	for round := range 6 {
		var crashed atomic.Bool
		crashAt := uint64(400 + round*97) // work requests of the node's device
		inner, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dev := faulty.Wrap(inner, faulty.InjectorFunc(func(ev faulty.Event) faulty.Fault {
			if ev.Level == faulty.LevelWorkRequest && ev.Seq >= crashAt {
				crashed.Store(true)
			}
			if ev.Level == faulty.LevelWorkRequest && crashed.Load() {
				return faulty.Fault{Kind: faulty.FailUnapplied}
			}
			return faulty.Fault{}
		}))
		n, err := NewNode(nodeCfg(), dev, layout, wl)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := uint64(0); !crashed.Load(); i++ {
					from := (uint64(w)*5 + i) % uint64(cfg.Accounts)
					_, _ = n.Submit(ctx, &messages.TxnSubmit{TxnId: uint64(round)<<48 | uint64(w)<<40 | i, Client: "c",
						Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{
							FromAccount: from, ToAccount: (from + 1 + i%7) % uint64(cfg.Accounts), AmountCents: 1 + int64(i%50)}}})
				}
			}()
		}
		wg.Wait()
		n.Close()
		dev.Close()
		inner.Close()

		dev2, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
		if err != nil {
			t.Fatal(err)
		}
		n2, err := NewNode(nodeCfg(), dev2, layout, wl)
		if err != nil {
			t.Fatal(err)
		}
		rec := n2.Recovery()
		redone, released = redone+rec.Redone, released+rec.Released
		if !rec.Scanned {
			t.Errorf("round %d: the restarted node did not scan (recovery %+v)", round, rec)
		}
		for _, r := range wl.Check(ctx, store.NewSnapshot(layout, base)) {
			if r.Err != nil {
				t.Fatalf("round %d: %s after recovery %+v: %v", round, r.Name, rec, r.Err)
			}
		}
		if held := heldAccounts(t, layout, base); len(held) > 0 {
			t.Fatalf("round %d: locks held after recovery %+v: %v", round, rec, held)
		}
		res, err := n2.Submit(ctx, &messages.TxnSubmit{TxnId: uint64(round)<<48 | 1<<47, Client: "c",
			Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 2, AmountCents: 1}}})
		if err != nil || res.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED {
			t.Fatalf("round %d: transfer after recovery: %v %v", round, res, err)
		}
		n2.Close()
		dev2.Close()
	}
	t.Logf("over the rounds: %d locks redone from the log, %d released", redone, released)
	if redone+released == 0 {
		t.Error("no crash left a lock held: the test exercised no recovery")
	}

	// The last node closed cleanly: its successor does not scan.
	dev3, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev3.Close()
	n3, err := NewNode(nodeCfg(), dev3, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	defer n3.Close()
	if rec := n3.Recovery(); rec.Scanned {
		t.Errorf("after a clean close the next node scanned: %+v", rec)
	}
}

// heldAccounts lists the account slots whose lock word is held.
func heldAccounts(t *testing.T, layout *store.Layout, dev rdma.Device) []string {
	t.Helper()
	tl, err := layout.Table(bank.AccountTable)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	buf := make([]byte, tl.Buckets*tl.BucketSize)
	cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.Region.Addr, Local: buf})
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		if w := binary.LittleEndian.Uint64(buf[off+store.LockOffset:]); w != 0 && !store.IsFreeSentinel(w) {
			held = append(held, fmt.Sprintf("slot %d: %#x", off/tl.SlotSize, w))
		}
	}
	return held
}
