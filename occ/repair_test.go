package occ

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// sentinelLocker grants every lock as an owner would: CAS from 0 or its free
// sentinel S to its held sentinel H, release to S (the words of package
// actors/owner's cohort 9 at install epoch 3).
type sentinelLocker struct{ qp rdma.QueuePair }

const (
	testFree = uint64(1)<<63 | 3<<32 | 9
	testHeld = testFree | 1<<62
)

func (l *sentinelLocker) Acquire(ctx context.Context, reqs []LockRequest, res []LockResult) error {
	for i := range reqs {
		r := &reqs[i]
		res[i] = LockResult{Status: LockConflict, Path: PathLocal}
		for _, expect := range []uint64{0, testFree} {
			buf := make([]byte, r.Table.SlotSize)
			cs, err := rdma.Exec(ctx, l.qp,
				rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.Table.Region.RKey, RemoteAddr: r.SlotAddr + store.LockOffset, Compare: expect, Swap: testHeld},
				rdma.WorkRequest{Op: rdma.OpRead, RKey: r.Table.Region.RKey, RemoteAddr: r.SlotAddr, Local: buf})
			if err != nil || len(cs) < 2 || cs[0].Status != rdma.StatusSuccess || cs[1].Status != rdma.StatusSuccess {
				res[i] = LockResult{Status: LockUnknown, Path: PathLocal}
				break
			}
			if cs[0].Value == expect {
				res[i] = LockResult{Status: LockGranted, Path: PathLocal, Slot: buf, Release: testFree}
				break
			}
			res[i].LockWord = cs[0].Value
		}
	}
	return nil
}

func (l *sentinelLocker) Released([]LockRequest, []LockResult) {}

func sentinelLocking(qp rdma.QueuePair) Locker { return &sentinelLocker{qp: qp} }

// heldWords lists the account slots (address → word) whose lock is held.
func heldWords(t *testing.T, mem *rdma.MemDevice, layout *store.Layout) map[uint64]uint64 {
	t.Helper()
	tl, buf := accountsOnMN(t, mem, layout)
	held := map[uint64]uint64{}
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		if w := binary.LittleEndian.Uint64(buf[off+store.LockOffset:]); IsLocked(w) {
			held[tl.Region.Addr+off] = w
		}
	}
	return held
}

// TestRedoRecoversOwnerSentinels: a node whose locks are owner sentinels
// dies at every work request of a few transfers. Its next incarnation
// finishes, from its records, every committed transfer whose write-back it
// cut (the slots still held at the version before the record's); a held
// word left by a transfer that had not committed stays held (no record
// says whose it is) until the repair sweep releases it once RepairAfter has
// passed. The total holds at each step, and transfers commit afterwards.
// Ending every held word without records (releasing them) loses money at
// some crash point: the records are what the redo needs.
func TestRedoRecoversOwnerSentinels(t *testing.T) {
	ctx := context.Background()
	redone, swept, broken := 0, 0, 0
	for crashAt := uint64(3); crashAt <= 30; crashAt++ {
		for _, useLog := range []bool{true, false} {
			mem, layout := newBank(t)
			n, _ := newCrashNodeWith(t, mem, layout, 1, crashAt, crashOpts{locker: sentinelLocking})
			c := n.coordinator(t)
			for i := range 3 {
				c.Run(ctx, uint64(i), transfer(uint64(i), uint64(i+1), 10))
			}
			if !useLog {
				qp, err := mem.CreateQP(rdma.QPConfig{})
				if err != nil {
					t.Fatal(err)
				}
				tl, _ := layout.Table(accounts)
				rp := &repairer{qp: qp, node: redoNode}
				for addr, w := range heldWords(t, mem, layout) {
					if _, err := rp.end(ctx, tl, addr, w, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				qp.Close()
				if total, _ := bankOnMN(t, mem, layout); total != 100*nAccounts {
					broken++
				}
				continue
			}
			n2, rec := newCrashNodeWith(t, mem, layout, 1, 0, crashOpts{locker: sentinelLocking})
			redone += rec.Redone
			if total, _ := bankOnMN(t, mem, layout); total != 100*nAccounts {
				t.Fatalf("crash at %d: total %d after recovery %+v", crashAt, total, rec)
			}
			held := heldWords(t, mem, layout)
			now := time.Now()
			for addr, w := range held {
				if w != testHeld {
					t.Fatalf("crash at %d: slot %#x left %#x after recovery, want only held sentinels", crashAt, addr, w)
				}
				n2.log.Suspect(accounts, addr, w, now)
			}
			if st, err := n2.log.Sweep(ctx, layout, now.Add(time.Second/2)); err != nil || st != (RepairStats{}) {
				t.Fatalf("crash at %d: a sweep before RepairAfter did %+v (%v)", crashAt, st, err)
			}
			st, err := n2.log.Sweep(ctx, layout, now.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			swept += int(st.Released + st.Redone)
			if left := heldWords(t, mem, layout); len(left) != 0 || st.Released+st.Redone != uint64(len(held)) {
				t.Fatalf("crash at %d: sweep %+v of %d held left %v", crashAt, st, len(held), left)
			}
			if total, _ := bankOnMN(t, mem, layout); total != 100*nAccounts {
				t.Fatalf("crash at %d: total %d after the sweep %+v", crashAt, total, st)
			}
			mustCommit(t, n2.coordinator(t), transfer(3, 0, 1))
		}
	}
	t.Logf("redone at restart: %d; released by the sweep: %d; crash points where releasing without records lost money: %d", redone, swept, broken)
	if redone == 0 || swept == 0 || broken == 0 {
		t.Error("the crash points did not reach every case (redo at restart, sweep, loss without records)")
	}
}

// TestRepairSweepDeadNode: node 6 dies in the middle of write-backs under
// memory-node CAS locks and never comes back. Node 5, refused by its tags,
// watches them and, RepairAfter later, finishes each committed transfer
// from node 6's record and releases the others: the total holds and the
// accounts are usable again. A word that changes before the sweep (a live
// holder that finished) is left alone (Moot).
func TestRepairSweepDeadNode(t *testing.T) {
	ctx := context.Background()
	redone := 0
	for crashAt := uint64(3); crashAt <= 26; crashAt++ {
		mem, layout := newBank(t)
		dead, _ := newCrashNodeWith(t, mem, layout, 1, crashAt, crashOpts{node: 6})
		c := dead.coordinator(t)
		for i := range 2 {
			c.Run(ctx, uint64(i), transfer(uint64(i), uint64(i+1), 10))
		}
		live, _ := newCrashNode(t, mem, layout, 2, 0)
		lc := live.coordinator(t)
		// Node 5's transactions meet the tags and report them.
		held := heldWords(t, mem, layout)
		for k := range uint64(nAccounts) {
			lc.Run(ctx, 100+k, transfer(k, (k+1)%nAccounts, 1))
		}
		now := time.Now() // after every sighting
		live.log.suspectMu.Lock()
		watched := len(live.log.suspects)
		live.log.suspectMu.Unlock()
		if watched != len(held) {
			t.Fatalf("crash at %d: %d words held, %d watched", crashAt, len(held), watched)
		}
		st, err := live.log.Sweep(ctx, layout, now.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		redone += int(st.Redone)
		if left := heldWords(t, mem, layout); len(left) != 0 {
			t.Fatalf("crash at %d: sweep %+v left %v", crashAt, st, left)
		}
		if total, _ := bankOnMN(t, mem, layout); total != 100*nAccounts {
			t.Fatalf("crash at %d: total %d after the sweep %+v", crashAt, total, st)
		}
		mustCommit(t, lc, transfer(0, 1, 1))
	}
	if redone == 0 {
		t.Error("no sweep finished a committed transfer from the dead node's record")
	}

	// A word that changed is left alone and forgotten, due or not: its
	// holder was alive.
	mem, layout := newBank(t)
	live, _ := newCrashNode(t, mem, layout, 1, 0)
	tl, _ := layout.Table(accounts)
	now := time.Now()
	live.log.Suspect(accounts, tl.Region.Addr, store.CASTag(7, 1), now)
	live.log.Suspect(accounts, tl.Region.Addr+tl.SlotSize, store.CASTag(7, 2), now.Add(time.Second))
	st, err := live.log.Sweep(ctx, layout, now.Add(time.Second))
	live.log.suspectMu.Lock()
	watched := len(live.log.suspects)
	live.log.suspectMu.Unlock()
	if err != nil || st != (RepairStats{}) || watched != 0 {
		t.Fatalf("sweep of words no longer in place: %+v, %v; %d still watched", st, err, watched)
	}
	if total, held := bankOnMN(t, mem, layout); total != 100*nAccounts || held != 0 {
		t.Fatalf("total %d, %d held", total, held)
	}
}

// TestEndHeldFinishesCommitted: node 6 holds its locks through owner
// sentinels and dies at every work request of two transfers, never to come
// back; the owner of those grants (node 5) ends every held word once the
// grants are stale (RedoLog.EndHeld): committed transfers are finished from
// node 6's records, the others released, and the total holds.
func TestEndHeldFinishesCommitted(t *testing.T) {
	ctx := context.Background()
	redone := 0
	for crashAt := uint64(3); crashAt <= 22; crashAt++ {
		mem, layout := newBank(t)
		dead, _ := newCrashNodeWith(t, mem, layout, 1, crashAt, crashOpts{node: 6, locker: sentinelLocking})
		c := dead.coordinator(t)
		for i := range 2 {
			c.Run(ctx, uint64(i), transfer(uint64(i), uint64(i+1), 10))
		}
		owner, _ := newCrashNode(t, mem, layout, 1, 0)
		var held []HeldWord
		for addr, w := range heldWords(t, mem, layout) {
			held = append(held, HeldWord{Table: accounts, Addr: addr, Word: w})
		}
		st, words, err := owner.log.EndHeld(ctx, layout, held)
		if err != nil || st.Redone+st.Released != uint64(len(held)) {
			t.Fatalf("crash at %d: EndHeld(%v) = %+v, %v", crashAt, held, st, err)
		}
		for i, w := range words {
			if w != testFree {
				t.Fatalf("crash at %d: slot %#x left %#x, want the free sentinel", crashAt, held[i].Addr, w)
			}
		}
		redone += int(st.Redone)
		if total, held := bankOnMN(t, mem, layout); total != 100*nAccounts || held != 0 {
			t.Fatalf("crash at %d: total %d, %d held", crashAt, total, held)
		}
	}
	if redone == 0 {
		t.Error("no committed transfer was finished from its record")
	}
}

// TestRedoTagsUniqueAcrossIncarnations: a node numbers its CAS tags above
// every number an earlier incarnation may have used, crashed or closed
// cleanly, also past a reserved block: a word another node watches can
// never become a new lock of the same number.
func TestRedoTagsUniqueAcrossIncarnations(t *testing.T) {
	ctx := context.Background()
	mem, layout := newBank(t)
	n1, _ := newCrashNode(t, mem, layout, 1, 0)
	c := n1.coordinator(t)
	for i := range 3 {
		mustCommit(t, c, transfer(uint64(i), uint64(i+1), 1))
	}
	last := n1.log.seq.Load()
	// Past the reserved block: the ceiling on the memory node moves first.
	n1.log.seq.Store(n1.log.ceiling.Load() - 1)
	for range 2 {
		if _, err := n1.log.nextSeq(ctx); err != nil {
			t.Fatal(err)
		}
	}
	last = max(last, n1.log.seq.Load())
	n2, _ := newCrashNode(t, mem, layout, 1, 0) // n1 crashed
	first, err := n2.log.nextSeq(ctx)
	if err != nil || first <= last {
		t.Fatalf("after a crash the next incarnation numbers from %d (%v), the previous one used up to %d", first, err, last)
	}
	mustCommit(t, n2.coordinator(t), transfer(0, 1, 1))
	last = n2.log.seq.Load()
	if err := n2.log.Close(ctx, mem); err != nil {
		t.Fatal(err)
	}
	n3, rec := newCrashNode(t, mem, layout, 1, 0)
	if first, err := n3.log.nextSeq(ctx); rec.Scanned || err != nil || first <= last {
		t.Fatalf("after a clean close: scanned %v, numbers from %d (%v), the previous one used up to %d", rec.Scanned, first, err, last)
	}
}

// TestRedoRecoveryWritesLedger: with exactly-once, a transfer whose node
// died in its write-back and that recovery finishes from its record is
// also in the commit ledger: its client's retry on the next incarnation is
// answered as committed and the money moves once, at every crash point.
func TestRedoRecoveryWritesLedger(t *testing.T) {
	ctx := context.Background()
	const id = 1<<40 | 7
	finished := 0
	for crashAt := uint64(3); crashAt <= 16; crashAt++ {
		mem, layout := newBank(t)
		n, _ := newCrashNodeWith(t, mem, layout, 1, crashAt, crashOpts{exactlyOnce: true})
		n.coordinator(t).Run(ctx, id, transfer(0, 1, 10))
		n2, rec := newCrashNodeWith(t, mem, layout, 1, 0, crashOpts{exactlyOnce: true})
		finished += rec.Redone
		r := n2.coordinator(t).Run(ctx, id, transfer(0, 1, 10))
		if r.Outcome != Committed {
			t.Fatalf("crash at %d: the retry: %v %v", crashAt, r.Outcome, r.Err)
		}
		if b, held := balancesOnMN(t, mem, layout); b[0] != 90 || b[1] != 110 || held != 0 {
			t.Fatalf("crash at %d: balances %v (%d held) after recovery %+v and a retry (replayed %v): want the transfer once",
				crashAt, b, held, rec, r.Replayed)
		}
	}
	if finished == 0 {
		t.Error("no crash point left a write-back for recovery to finish")
	}
}

// releaseCounter is a sentinelLocker that counts the locks it is told
// were released.
type releaseCounter struct {
	sentinelLocker
	released *atomic.Int64
}

func (l *releaseCounter) Released(reqs []LockRequest, _ []LockResult) {
	l.released.Add(int64(len(reqs)))
}

// TestGivenUpCommitKeepsGrants: when a commit's write-back gives up after
// its redo record was posted, its owner-path locks are not released to
// their owner (whose table would grant them again at the versions the
// record names); an abort that gives up releases them.
func TestGivenUpCommitKeepsGrants(t *testing.T) {
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		mem, layout := newBank(t)
		var released atomic.Int64
		crashAt := uint64(0)
		if commit {
			crashAt = 11 // inside the write-back
		}
		n, _ := newCrashNodeWith(t, mem, layout, 1, crashAt, crashOpts{locker: func(qp rdma.QueuePair) Locker {
			return &releaseCounter{sentinelLocker{qp}, &released}
		}})
		prog := transfer(0, 1, 10)
		if !commit {
			prog = func(tx txn.Tx) error {
				if _, err := tx.GetForUpdateMany([]txn.Ref{ref(0), ref(1)}); err != nil {
					return err
				}
				n.crashed.Store(true) // the abort's release cannot reach the memory node
				return txn.ErrRollback
			}
		}
		r := n.coordinator(t).Run(ctx, 1, prog)
		switch {
		case r.Outcome == Committed:
			t.Fatalf("commit %v: committed", commit)
		case n.log.abandoned.Load() == 0:
			t.Fatalf("commit %v: nothing given up (%v %v)", commit, r.Outcome, r.Err)
		case commit && released.Load() != 0:
			t.Errorf("a given-up commit released %d owner-path locks", released.Load())
		case !commit && released.Load() != 2:
			t.Errorf("a given-up abort released %d of its 2 owner-path locks", released.Load())
		}
	}
}
