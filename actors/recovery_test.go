package actors

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/control"
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
	cfg, wl, mem, base, layout := smallBank(t)
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

// smallBank is a 16-account bank loaded on an emulated memory node.
func smallBank(t *testing.T) (bank.Config, *bank.Workload, *rdma.Memory, rdma.Device, *store.Layout) {
	t.Helper()
	cfg := bank.DefaultConfig()
	cfg.Accounts = 16
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, base, layout := loadedMemory(t, wl, 64<<20)
	return cfg, wl, mem, base, layout
}

// heldAccounts lists the account slots whose lock word is held.
func heldAccounts(t *testing.T, layout *store.Layout, dev rdma.Device) []string {
	t.Helper()
	tl, buf := accountsOn(t, layout, dev)
	var held []string
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		if w := binary.LittleEndian.Uint64(buf[off+store.LockOffset:]); w != 0 && !store.IsFreeSentinel(w) {
			held = append(held, fmt.Sprintf("slot %d: %#x", off/tl.SlotSize, w))
		}
	}
	return held
}

// accountsOn reads the whole accounts table from the memory node.
func accountsOn(t *testing.T, layout *store.Layout, dev rdma.Device) (*store.TableLayout, []byte) {
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
	return tl, buf
}

// TestNodeExpiresStaleGrants: a grantee on another node took a lock of
// this node's cohort (the grant in the table, its held sentinel on the
// memory node) and died before it unlocked. Once the grant is older than
// any attempt can live (RepairAfter: 2·(RequestTimeout + CleanupTimeout)),
// the owner's sweep ends the word (no record: released to the cohort's
// free sentinel) and drops the grant, and the account is usable again.
func TestNodeExpiresStaleGrants(t *testing.T) {
	ctx := context.Background()
	cfg, wl, mem, base, layout := smallBank(t)
	dev, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	nc := DefaultNodeConfig("cn-1")
	nc.ID, nc.Coordinators, nc.Logger = 1, 2, slog.New(slog.DiscardHandler)
	// RepairAfter 2·(1 s + 50 ms): the first transfer below runs long
	// before the grant is stale, even on a slow machine.
	nc.RequestTimeout = time.Second
	nc.Engine.CleanupTimeout, nc.Engine.CleanupBackoff = 50*time.Millisecond, time.Millisecond
	nc.Ownership = &OwnershipConfig{Names: []string{"cn-1"}}
	n, err := NewNode(nc, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var kgs []control.KeyGroup
	for a := range uint64(cfg.Accounts) {
		kgs = append(kgs, control.KeyGroup(wl.Rule().KeyGroup(bank.Ref(a))))
	}
	slices.Sort(kgs)
	kgs = slices.Compact(kgs)
	const cohort = control.CohortID(4)
	n.own.mu.Lock()
	err = n.own.install(&control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: cohort, KeyGroups: kgs}, Owner: 0}}})
	n.own.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	// The dead grantee's lock on account 5: the grant, then its CAS.
	tl, _ := layout.Table(bank.AccountTable)
	addr := slotOf(t, layout, base, 5)
	rep := n.own.svc.HandleLock(&messages.LockRequest{TxnId: 77, CohortId: uint64(cohort), Epoch: 1,
		Records: []*messages.RecordRef{{Table: uint32(bank.AccountTable), Key: addr}}, Requester: "cn-9", RequestId: 1})
	if rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("grant to the soon-dead grantee: %v %s", rep.GetStatus(), rep.GetError())
	}
	qp, err := base.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	held := owner.Sentinel(cohort, 1, true)
	cs, err := rdma.Exec(ctx, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: tl.Region.RKey, RemoteAddr: addr + store.LockOffset,
		Local: binary.LittleEndian.AppendUint64(nil, held)})
	if err != nil || rdma.FirstError(cs) != nil {
		t.Fatal(err, rdma.FirstError(cs))
	}

	transfer := func(id uint64) *messages.TxnResult {
		res, err := n.Submit(ctx, &messages.TxnSubmit{TxnId: id, Client: "c",
			Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 5, ToAccount: 6, AmountCents: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := transfer(1); res.GetOutcome() == messages.TxnOutcome_TXN_OUTCOME_COMMITTED {
		t.Fatal("a transfer committed over the dead grantee's lock")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var locks int
		_ = n.own.svc.Do(func(t *owner.Table) error { locks = t.Locks(); return nil })
		if w := heldAccounts(t, layout, base); len(w) == 0 && locks == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s later: %d grants in the table, words %v (repair stats %+v)", locks, heldAccounts(t, layout, base), n.RepairStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := n.RepairStats(); st.Released != 1 {
		t.Errorf("repair stats %+v, want one release", st)
	}
	committed := false
	for id := uint64(2); id < 50 && !committed; id++ {
		committed = transfer(id).GetOutcome() == messages.TxnOutcome_TXN_OUTCOME_COMMITTED
	}
	if !committed {
		t.Fatal("account 5 still unusable after the repair")
	}
	for _, r := range wl.Check(ctx, store.NewSnapshot(layout, base)) {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Name, r.Err)
		}
	}
}

// slotOf finds the slot address of an account.
func slotOf(t *testing.T, layout *store.Layout, dev rdma.Device, account uint64) uint64 {
	t.Helper()
	tl, buf := accountsOn(t, layout, dev)
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		if s := tl.DecodeSlot(buf[off:]); s.Meta.Present() && s.Key == account {
			return tl.Region.Addr + off
		}
	}
	t.Fatalf("account %d not found", account)
	return 0
}
