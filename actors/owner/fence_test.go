package owner

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// fencedVerbCluster is verbCluster on the fenced layout: 64 records loaded
// through the plain MN CAS path (lock words 0, no fence set).
func fencedVerbCluster(t *testing.T) *cluster {
	t.Helper()
	c := newClusterWith(t, 3, threeNodeMap(1), nil, true)
	plain, err := occ.NewEngine(c.layout, func() occ.Locker { return occ.NewCASLocker(c.qp()) }, kgOf,
		occ.Config{Node: 9, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		n.cfg.WriteLease = time.Minute // as in verbCluster: counts independent of scheduling
	}
	loader := plain.NewCoordinator(c.qp())
	for k := range uint64(64) {
		mustRun(t, loader, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	return c
}

// fenceWord reads key group kg's fence word.
func (c *cluster) fenceWord(t *testing.T, kg uint64) uint64 {
	t.Helper()
	addr, ok := c.layout.FenceAddr(kg)
	if !ok {
		t.Fatalf("no fence word for key group %d", kg)
	}
	buf := make([]byte, 8)
	cs, err := rdma.Exec(context.Background(), c.checkQP(), rdma.WorkRequest{Op: rdma.OpRead, RKey: c.layout.Fences.RKey, RemoteAddr: addr, Local: buf})
	if err != nil || rdma.FirstError(cs) != nil {
		t.Fatal(err, rdma.FirstError(cs))
	}
	return binary.LittleEndian.Uint64(buf)
}

// backdateFence makes node's table believe it set key group kg's fence d
// earlier than it did, so that READs posted up to d before now count as
// after the fence (F4) without the test waiting.
func (c *cluster) backdateFence(t *testing.T, node int, kg control.KeyGroup, d time.Duration) {
	t.Helper()
	if err := c.tables[node].Do(func(tb *Table) error {
		f, ok := tb.fences[kg]
		if !ok {
			return fmt.Errorf("no fence record for key group %d", kg)
		}
		f.atMicros -= d.Microseconds()
		tb.fences[kg] = f
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// slotAddr returns the address of account k's slot.
func (c *cluster) slotAddr(t *testing.T, k uint64) uint64 {
	t.Helper()
	tl, _ := c.layout.Table(accounts)
	for i := range c.allLockWords(t) {
		a := tl.Region.Addr + uint64(i)*tl.SlotSize
		if s := c.slot(t, a); s.Meta.Present() && s.Key == k {
			return a
		}
	}
	t.Fatalf("account %d not found", k)
	return 0
}

// TestKeyGroupFences walks the key-group fence protocol through its cases
// and counts its verbs:
//   - an owner's first grant in a key group claims the group's fence (one
//     CAS) beside its lock-word CASes; after that, first grants of records
//     it never granted, and inserts into the group's empty slots, are plain
//     WRITEs: zero atomics;
//   - an MN CAS locker whose map is older than the fence takes a word from
//     0, reads the fence, and gives the word back (redirect);
//   - another owner's grantee that takes a word from 0 while the fence is
//     held by an activation on another node gives it back, and the lock
//     follows the fence's cohort (an owner RPC);
//   - once the key group left the fencing activation, the node gives the
//     fence back after a drain deadline, and the new owner claims it.
func TestKeyGroupFences(t *testing.T) {
	c := fencedVerbCluster(t)
	co0, co1, co2 := c.coordinator(0), c.coordinator(1), c.coordinator(2)

	// Key group 0 is cohort 1's, LOCAL on cn-0. The first doorbell claims
	// the fence and READs the three slots; the next WRITEs their words.
	cnt, dev := bump(t, c, co0, []uint64{0, 8, 16})
	if cnt.LocksLocal != 3 || cnt.MNCAS != 1 || dev.CAS != 1 || c.nodes[0].Stats.FencedWrites.Load() != 3 {
		t.Fatalf("first grants: %+v, memory node %d CAS, %d fenced writes; want the fence by CAS and 3 fenced WRITEs",
			cnt, dev.CAS, c.nodes[0].Stats.FencedWrites.Load())
	}
	if w := c.fenceWord(t, 0); w != Sentinel(1, 1, false) {
		t.Fatalf("fence of key group 0: %#x", w)
	}
	cnt, dev = bump(t, c, co0, []uint64{24, 32, 40})
	if cnt.LocksLocal != 3 || cnt.MNCAS != 0 || dev.CAS != 0 {
		t.Fatalf("first grants of never-granted records under the fence: %+v, memory node %d CAS, want none", cnt, dev.CAS)
	}
	before := c.mem.Stats()
	r := mustRun(t, co0, func(tx txn.Tx) error { return tx.Insert(acct(8*100), u64(7)) })
	if d := c.mem.Stats().Sub(before); r.Counters.MNCAS != 0 || d.CAS != 0 {
		t.Fatalf("insert under the fence: %+v, memory node %d CAS, want none", r.Counters, d.CAS)
	}
	if got := c.nodes[0].Stats.FencedWrites.Load(); got != 7 {
		t.Fatalf("fenced writes %d, want 7", got)
	}

	// A node whose map is older than the fence (no map yet: epoch 0): its
	// MN CAS takes key 48's word, meets the fence of epoch 1 and gives the
	// word back.
	stale := NewMapResolver("cn-9", c.names, func(context.Context) (*control.OwnerMap, error) { return &control.OwnerMap{}, nil })
	node9, err := NewNode(NodeConfig{Self: "cn-9"}, nil, stale, c.tr)
	if err != nil {
		t.Fatal(err)
	}
	eng9, err := occ.NewEngine(c.layout, func() occ.Locker { return node9.NewLocker(c.qp(), occ.NewCASLocker(c.qp())) }, kgOf,
		occ.Config{Node: 10, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond,
			KeyGroupIndex: func(kg uint64) (uint64, bool) { return kg, kg < 8 }})
	if err != nil {
		t.Fatal(err)
	}
	r = eng9.NewCoordinator(c.qp()).Run(context.Background(), 1, func(tx txn.Tx) error {
		_, err := tx.GetForUpdate(acct(48))
		return err
	})
	if r.Outcome == occ.Committed || r.Counters.LocksMNCAS != 0 || r.Counters.MNCAS != 2 {
		t.Fatalf("MN CAS under a newer fence: %v %+v, want refused after 2 CAS (take, give back)", r.Outcome, r.Counters)
	}
	if w := c.lockWord(t, 48); w != 0 {
		t.Fatalf("key 48 after the refused MN CAS: %#x, want 0", w)
	}
	if n := node9.Stats.FenceRefusals.Load(); n != 1 {
		t.Fatalf("refusals %d, want 1", n)
	}
	_ = co2

	// A re-cut that cn-1 learnt first: key group 0 moves to cohort 2 (cn-1)
	// at epoch 2 while cn-0 still holds cohort 1 with it. cn-1's grant takes
	// key 56's word from 0, meets cohort 1's fence and gives the word back;
	// the lock follows cohort 1 to cn-0.
	m2 := &control.OwnerMap{Epoch: 2, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{1}}, Owner: 0},
		{Cohort: control.Cohort{ID: 2, KeyGroups: []uint64{0, 2, 3}}, Owner: 1},
	}}
	c.published.Store(m2)
	if err := c.resolvers[1].Update(m2); err != nil {
		t.Fatal(err)
	}
	if err := c.tables[1].Do(func(tb *Table) error { return tb.Reconfigure(2, 1, []control.KeyGroup{0, 2, 3}, 2) }); err != nil {
		t.Fatal(err)
	}
	// This step walks the CAS path of the followed grant. Whether cn-1's
	// grantee could instead WRITE over the word it READ depends on the
	// clock: its READ must come fenceClockMargin (1 ms) after cn-0 set the
	// fence, which a loaded machine takes and an idle one does not, and a
	// remote fenced WRITE releases to 0. So for this step cn-1 counts no
	// READ as recent enough for a fenced WRITE.
	readAge := c.nodes[1].cfg.FencedReadAge
	c.nodes[1].cfg.FencedReadAge = time.Nanosecond
	cnt, _ = bump(t, c, co1, []uint64{56})
	c.nodes[1].cfg.FencedReadAge = readAge
	if cnt.LocksOwnerRPC != 1 || c.nodes[1].Stats.FenceRefusals.Load() != 1 {
		t.Fatalf("grant against another node's fence: %+v, refusals %d; want it to follow cohort 1", cnt, c.nodes[1].Stats.FenceRefusals.Load())
	}
	if w := c.lockWord(t, 56); w != Sentinel(1, 1, false) {
		t.Fatalf("key 56 after the followed grant: %#x", w)
	}

	// cn-0 learns the re-cut: key group 0 leaves cohort 1, and a drain
	// deadline (20 ms) later its sweeper gives the fence back.
	if err := c.resolvers[0].Update(m2); err != nil {
		t.Fatal(err)
	}
	if err := c.tables[0].Do(func(tb *Table) error { return tb.Reconfigure(1, 1, []control.KeyGroup{1}, 2) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.fenceWord(t, 0) != 0 || c.nodes[0].Stats.Unfenced.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("fence of key group 0 still %#x", c.fenceWord(t, 0))
		}
		time.Sleep(time.Millisecond)
	}
	if n := c.nodes[0].Stats.Unfenced.Load(); n != 1 {
		t.Fatalf("cn-0 gave back %d fences, want 1", n)
	}
	// cn-1 last saw cohort 1's fence, so its next grant (key 48, word 0:
	// the refused MN CAS gave it back) is a CAS that reads the fence again,
	// and the grant after it (an insert) claims the fence: one CAS, then a
	// fenced WRITE of the empty slot it READ in the claim's doorbell. The
	// insert after that is a WRITE.
	cnt, _ = bump(t, c, co1, []uint64{48})
	if cnt.LocksLocal != 1 || cnt.MNCAS != 1 {
		t.Fatalf("after the give-back: %+v, want a local grant and 1 CAS", cnt)
	}
	for i, want := range []uint64{1, 0} {
		r = mustRun(t, co1, func(tx txn.Tx) error { return tx.Insert(acct(8*uint64(101+i)), u64(7)) })
		if r.Counters.MNCAS != want || r.Counters.LocksLocal != 1 {
			t.Fatalf("cn-1's insert %d: %+v, want a local grant and %d CAS", i, r.Counters, want)
		}
	}
	if w := c.fenceWord(t, 0); w != Sentinel(2, 1, false) {
		t.Fatalf("fence of key group 0 after cn-1's grants: %#x", w)
	}
	c.assertNothingHeld(t)
}

// TestTableFences: the table trusts a fence only while its key group is in
// the active activation that set it; a fence it can no longer trust is
// given back a drain deadline after the table first saw that, unless the
// key group came back; Fence makes the activation's fences untrusted until
// seen set again; MaxFences bounds them.
func TestTableFences(t *testing.T) {
	tb, err := NewTable(Config{DrainDeadlineMicros: 100, MaxFences: 3})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tb.Install(1, []control.KeyGroup{10, 11, 12}, 1))
	if tb.Fenced(1, 2, 10, 7, 80, 5) || tb.Fenced(2, 1, 10, 7, 80, 5) || tb.Fenced(1, 1, 13, 7, 88, 5) {
		t.Fatal("recorded a fence of another epoch, cohort or key group")
	}
	for i, kg := range []control.KeyGroup{10, 11, 12} {
		if !tb.Fenced(1, 1, kg, 7, 8*uint64(kg), int64(10+i)) {
			t.Fatalf("key group %d not recorded", kg)
		}
	}
	if at, ok := tb.FenceSince(1, 1, 11); !ok || at != 11 {
		t.Fatalf("FenceSince = %d, %v", at, ok)
	}
	if !tb.Fenced(1, 1, 11, 7, 88, 50) {
		t.Fatal("re-recording failed")
	}
	if at, _ := tb.FenceSince(1, 1, 11); at != 11 {
		t.Fatalf("re-recording moved the time to %d", at)
	}
	must(tb.Install(2, []control.KeyGroup{20}, 1))
	if tb.Fenced(2, 1, 20, 7, 160, 5) {
		t.Fatal("recorded past MaxFences")
	}

	// Key group 12 leaves cohort 1: untrusted at once, given back 100 µs
	// after the table first saw it; 11 leaves and comes back in time.
	must(tb.Reconfigure(1, 1, []control.KeyGroup{10}, 2))
	if _, ok := tb.FenceSince(1, 1, 12); ok {
		t.Fatal("a fence of a key group that left is trusted")
	}
	if got := tb.DueUnfences(1000, 10); len(got) != 0 {
		t.Fatalf("given back at first sight: %v", got)
	}
	must(tb.Reconfigure(1, 1, []control.KeyGroup{10, 11}, 3))
	if got := tb.DueUnfences(1099, 10); len(got) != 0 {
		t.Fatalf("given back before the deadline: %v", got)
	}
	got := tb.DueUnfences(1100, 10)
	if len(got) != 1 || got[0] != (Unfence{KeyGroup: 12, RKey: 7, Addr: 96, Word: Sentinel(1, 1, false)}) {
		t.Fatalf("due = %+v", got)
	}
	if _, ok := tb.FenceSince(1, 1, 11); !ok {
		t.Fatal("key group 11 came back but its fence is not trusted")
	}

	// Fence distrusts them until seen set again; a retired activation's
	// fences are given back.
	must(tb.Freeze(1, 1, 2000))
	if _, ok := tb.FenceSince(1, 1, 10); ok {
		t.Fatal("a frozen activation's fence is trusted")
	}
	if _, err := tb.Fence(1, 1, 2100); err != nil {
		t.Fatal(err)
	}
	must(tb.Thaw(1, 1))
	if _, ok := tb.FenceSince(1, 1, 10); ok {
		t.Fatal("a fenced activation's fence is trusted before it is seen set again")
	}
	if !tb.Fenced(1, 1, 10, 7, 80, 2200) {
		t.Fatal("not re-recorded")
	}
	if at, ok := tb.FenceSince(1, 1, 10); !ok || at != 2200 {
		t.Fatalf("after the thaw: %d, %v", at, ok)
	}
	must(tb.Freeze(1, 1, 3000))
	must(tb.Retire(1, 1, Moved{Owner: "cn-1", Epoch: 4}))
	tb.DueUnfences(3000, 10)
	if got := tb.DueUnfences(3100, 10); len(got) != 2 {
		t.Fatalf("retired activation's fences due = %+v, want 2", got)
	}
	if tb.Fences() != 0 {
		t.Fatalf("%d fences left", tb.Fences())
	}
	// An activation evicted to the fallback path: its fences are forgotten
	// without a give-back (every locker takes them as retired).
	must(tb.Install(3, []control.KeyGroup{30}, 5))
	if !tb.Fenced(3, 5, 30, 7, 240, 3200) {
		t.Fatal("not recorded")
	}
	must(tb.Freeze(3, 5, 3300))
	must(tb.Retire(3, 5, Moved{Epoch: 6}))
	if got := tb.DueUnfences(5000, 10); len(got) != 0 || tb.Fences() != 0 {
		t.Fatalf("evicted activation: due %+v, %d fences left", got, tb.Fences())
	}
}

// TestFencedReadAge: a grant under a trusted fence is a fenced WRITE when
// the coordinator's READ of the slot is younger than FencedReadAge, however
// much older than the WRITE lease it is (a long transaction reads its slots
// long before it asks for their locks), and a CAS when the READ is older.
func TestFencedReadAge(t *testing.T) {
	c := fencedVerbCluster(t)
	n0 := c.nodes[0]
	n0.cfg.WriteLease = time.Minute
	n0.cfg.FencedReadAge = 10 * time.Minute
	if cnt, _ := bump(t, c, c.coordinator(0), []uint64{0}); cnt.LocksLocal != 1 {
		t.Fatalf("claiming key group 0's fence: %+v", cnt)
	}
	// The fence was set a quarter of an hour ago, as far as the table knows,
	// so that every READ below comes after it (F4).
	c.backdateFence(t, 0, 0, 15*time.Minute)
	tl, _ := c.layout.Table(accounts)
	fence, _ := c.layout.FenceAddr(0)
	grant := func(k uint64, readAge time.Duration) occ.LockResult {
		t.Helper()
		l := n0.NewLocker(c.qp(), occ.NewCASLocker(c.qp()))
		req := []occ.LockRequest{{Ref: acct(k), KeyGroup: 0, Table: tl, SlotAddr: c.slotAddr(t, k), Tag: store.CASTag(61, k),
			Seen: 0, SeenAt: time.Now().Add(-readAge), SeenKG: true, Fence: fence, FenceRKey: c.layout.Fences.RKey}}
		res := make([]occ.LockResult, 1)
		if err := l.Acquire(context.Background(), req, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Status != occ.LockGranted || res[0].Path != occ.PathLocal {
			t.Fatalf("key %d: %+v, want a local grant", k, res[0])
		}
		c.setSlotWord(t, req[0].SlotAddr, res[0].Release)
		l.Released(req, res)
		return res[0]
	}
	writes := n0.Stats.FencedWrites.Load()
	before := c.mem.Stats()
	grant(8, 2*time.Minute) // older than the WRITE lease, younger than FencedReadAge
	if d := c.mem.Stats().Sub(before); d.CAS != 0 || n0.Stats.FencedWrites.Load() != writes+1 {
		t.Fatalf("READ 2 min old: %d CAS, fenced writes %d → %d; want a fenced WRITE", d.CAS, writes, n0.Stats.FencedWrites.Load())
	}
	before = c.mem.Stats()
	grant(16, 12*time.Minute) // older than FencedReadAge
	if d := c.mem.Stats().Sub(before); d.CAS != 1 || n0.Stats.FencedWrites.Load() != writes+1 {
		t.Fatalf("READ 12 min old: %d CAS, fenced writes %d; want one CAS", d.CAS, n0.Stats.FencedWrites.Load())
	}
	c.assertNothingHeld(t)
}

// TestRemoteFencedGrants: an owner RPC's reply says how long the owner has
// held each granted record's key-group fence, and a remote grantee whose
// READ came after the fence was set WRITEs a free word instead of CASing
// it, then releases it to 0 (the owner's table cannot learn a mark over
// the RPC). A record marked at the owner, and every record while the
// owner's lease has run out, is taken by CAS.
func TestRemoteFencedGrants(t *testing.T) {
	c := fencedVerbCluster(t)
	co0, co1 := c.coordinator(0), c.coordinator(1)
	if cnt, _ := bump(t, c, co0, []uint64{0}); cnt.LocksLocal != 1 {
		t.Fatalf("cn-0 claiming key group 0's fence: %+v", cnt)
	}
	// The fence was set long before any READ below.
	c.backdateFence(t, 0, 0, time.Minute)
	n1 := c.nodes[1]
	for round := range 2 {
		cnt, dev := bump(t, c, co1, []uint64{8})
		if cnt.LocksOwnerRPC != 1 || cnt.MNCAS != 0 || dev.CAS != 0 || n1.Stats.FencedWrites.Load() != uint64(round+1) {
			t.Fatalf("round %d, remote grant of an unmarked record under cn-0's fence: %+v, memory node %d CAS, fenced writes %d; want a WRITE",
				round, cnt, dev.CAS, n1.Stats.FencedWrites.Load())
		}
		if w := c.lockWord(t, 8); w != 0 {
			t.Fatalf("key 8 after a remote fenced grant: %#x, want 0", w)
		}
	}
	// Key 0 is marked at cn-0 (its word is S(1,1)): the reply gives no
	// fence age for it, and cn-1 CASes from the sentinel.
	if cnt, dev := bump(t, c, co1, []uint64{0}); cnt.LocksOwnerRPC != 1 || dev.CAS != 1 {
		t.Fatalf("remote grant of a marked record: %+v, memory node %d CAS; want one CAS", cnt, dev.CAS)
	}
	// A coordinator that read key 0's word as 0 before cn-0 marked it: the
	// owner gives no fence age for a marked record, so cn-1 does not WRITE
	// over (and then clear) the sentinel cn-0's marks rely on: it CASes
	// (from S(1,1), its hint since the grant above), and releases to
	// S(1,1).
	tl, _ := c.layout.Table(accounts)
	fence, _ := c.layout.FenceAddr(0)
	l := n1.NewLocker(c.qp(), occ.NewCASLocker(c.qp()))
	req := []occ.LockRequest{{Ref: acct(0), KeyGroup: 0, Table: tl, SlotAddr: c.slotAddr(t, 0), Tag: store.CASTag(62, 1),
		Seen: 0, SeenAt: time.Now(), SeenKG: true, Fence: fence, FenceRKey: c.layout.Fences.RKey}}
	res := make([]occ.LockResult, 1)
	before := c.mem.Stats()
	if err := l.Acquire(context.Background(), req, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Status != occ.LockGranted || res[0].Path != occ.PathOwnerRPC || c.mem.Stats().Sub(before).CAS != 1 ||
		res[0].Release != Sentinel(1, 1, false) || n1.Stats.FencedWrites.Load() != 2 {
		t.Fatalf("remote grant of a marked record seen free: %+v, %d CAS", res[0], c.mem.Stats().Sub(before).CAS)
	}
	c.setSlotWord(t, req[0].SlotAddr, res[0].Release)
	l.Released(req, res)
	// An owner whose lease ran out reports no fence: a CAS, and the fence
	// READ that goes with a CAS from 0.
	c.tables[0].UseLease(&Lease{})
	if cnt, dev := bump(t, c, co1, []uint64{16}); cnt.LocksOwnerRPC != 1 || dev.CAS != 1 || n1.Stats.FencedWrites.Load() != 2 {
		t.Fatalf("remote grant from an owner without a lease: %+v, memory node %d CAS; want one CAS", cnt, dev.CAS)
	}
	c.tables[0].UseLease(nil)
	// A garbled request (key groups not parallel to its records) is refused
	// whole.
	rep := c.tables[0].HandleLock(&messages.LockRequest{TxnId: 5, CohortId: 1, Epoch: 1, Requester: "cn-1", RequestId: 99,
		Records: []*messages.RecordRef{{Table: uint32(accounts), Key: 1}}, KeyGroups: []uint64{0, 0}})
	if rep.GetStatus() != messages.LockStatus_LOCK_STATUS_ERROR || len(rep.GetGranted()) != 0 {
		t.Fatalf("mismatched key groups: %v", rep)
	}
	c.assertNothingHeld(t)
}
