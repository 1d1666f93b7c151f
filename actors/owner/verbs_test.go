package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// verbCluster is a three-node cluster (threeNodeMap(1)) whose records were
// loaded through the plain MN CAS path, so that no owner has marked them.
func verbCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t, 3, threeNodeMap(1))
	plain, err := occ.NewEngine(c.layout, func() occ.Locker { return occ.NewCASLocker(c.qp()) }, kgOf,
		occ.Config{Node: 9, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A WRITE needs its grant younger than the WRITE lease (a quarter of the
	// 20 ms drain deadline here). These tests fence nobody, so they widen
	// the lease to keep the verb counts independent of scheduling delays
	// (the race detector on shared cores).
	for _, n := range c.nodes {
		n.cfg.WriteLease = time.Minute
	}
	loader := plain.NewCoordinator(c.qp())
	for k := range uint64(32) {
		mustRun(t, loader, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	return c
}

// bump runs one transaction on co that locks keys and adds 1 to each, and
// returns its counters and the CAS the memory node executed meanwhile.
func bump(t *testing.T, c *cluster, co *occ.Coordinator, keys []uint64) (occ.Counters, rdma.Stats) {
	t.Helper()
	refs := make([]txn.Ref, len(keys))
	for i, k := range keys {
		refs[i] = acct(k)
	}
	before := c.mem.Stats()
	r := co.Run(context.Background(), 1, func(tx txn.Tx) error {
		vs, err := tx.GetForUpdateMany(refs)
		if err != nil {
			return err
		}
		for i, v := range vs {
			if err := tx.Put(refs[i], u64(binary.LittleEndian.Uint64(v)+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if r.Outcome != occ.Committed {
		t.Fatalf("keys %v: %v (%v)", keys, r.Outcome, r.Err)
	}
	return r.Counters, c.mem.Stats().Sub(before)
}

// TestOwnerGrantsAtomicFree: on the node that owns a cohort, the first
// transaction locking a record at the cohort's epoch marks its lock word
// with one CAS; every later grant of it sets the word held with a plain
// WRITE — zero atomics, counted both by occ and by the memory node — and
// OCC validation still sees those locks.
func TestOwnerGrantsAtomicFree(t *testing.T) {
	c := verbCluster(t)
	co0 := c.coordinator(0)
	keys := []uint64{0, 8, 16} // key group 0: cohort 1, LOCAL on cn-0
	const n = 20
	for i := range n {
		cnt, dev := bump(t, c, co0, keys)
		want := uint64(0)
		if i == 0 {
			want = uint64(len(keys))
		}
		if cnt.LocksLocal != uint64(len(keys)) || cnt.MNCAS != want || cnt.MNCASFailed != 0 || dev.CAS != want {
			t.Fatalf("transaction %d: want %d CAS, got occ %+v, memory node %d CAS", i, want, cnt, dev.CAS)
		}
		if i <= 1 {
			t.Logf("transaction %d: %d local locks, %d MN CAS (memory node: %d CAS, %d writes)", i, cnt.LocksLocal, cnt.MNCAS, dev.CAS, dev.Writes)
		}
	}
	if w, cs := c.nodes[0].Stats.WordWrites.Load(), c.nodes[0].Stats.WordCASes.Load(); w != uint64(len(keys)*(n-1)) || cs != uint64(len(keys)) {
		t.Fatalf("word writes %d, word CASes %d", w, cs)
	}
	for _, k := range keys {
		if w := c.lockWord(t, k); w != Sentinel(1, 1, false) {
			t.Fatalf("key %d: lock word %#x, want the free sentinel", k, w)
		}
	}

	// A reader on cn-1 reads keys 0 and 8; then cn-0 locks key 0 (a WRITE,
	// no atomic) and holds it while the reader validates: the reader must
	// see the held sentinel and abort.
	readDone, locked, readerDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var rr occ.Result
	go func() {
		defer close(readerDone)
		rr = c.coordinator(1).Run(context.Background(), 2, func(tx txn.Tx) error {
			if _, err := tx.GetMany([]txn.Ref{acct(0), acct(8)}); err != nil {
				return err
			}
			close(readDone)
			<-locked
			return nil
		})
	}()
	<-readDone
	before := c.mem.Stats()
	ro := co0.Run(context.Background(), 3, func(tx txn.Tx) error {
		v, err := tx.GetForUpdate(acct(0))
		if err != nil {
			return err
		}
		close(locked)
		<-readerDone
		return tx.Put(acct(0), u64(binary.LittleEndian.Uint64(v)-1))
	})
	if ro.Outcome != occ.Committed || ro.Counters.MNCAS != 0 || c.mem.Stats().Sub(before).CAS != 0 {
		t.Fatalf("owner transaction: %v %+v", ro.Outcome, ro.Counters)
	}
	if rr.Outcome != occ.Aborted || !errors.Is(rr.Err, txn.ErrConflict) {
		t.Fatalf("reader racing an owner-held lock: %v (%v), want a conflict", rr.Outcome, rr.Err)
	}

	// Remote grants (owner RPC) set the word by CAS, once per grant,
	// expecting the free sentinel the coordinator saw: no failed CAS.
	co2 := c.coordinator(2)
	for i := range 3 {
		cnt, dev := bump(t, c, co2, keys)
		if cnt.LocksOwnerRPC != uint64(len(keys)) || cnt.MNCAS != uint64(len(keys)) || cnt.MNCASFailed != 0 || dev.CAS != uint64(len(keys)) {
			t.Fatalf("remote transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	// And the owner's own grants stay atomic-free afterwards.
	if cnt, dev := bump(t, c, co0, keys); cnt.MNCAS != 0 || dev.CAS != 0 {
		t.Fatalf("owner after remote grants: %+v, %d CAS", cnt, dev.CAS)
	}
	// A grant older than the WRITE lease sets its marked word by CAS from
	// the free sentinel instead (one CAS, none failed).
	c.nodes[0].cfg.WriteLease = time.Nanosecond
	if cnt, dev := bump(t, c, co0, keys); cnt.MNCAS != uint64(len(keys)) || cnt.MNCASFailed != 0 || dev.CAS != uint64(len(keys)) {
		t.Fatalf("past the lease: %+v, %d CAS", cnt, dev.CAS)
	}
	c.nodes[0].cfg.WriteLease = time.Minute
	if cnt, _ := bump(t, c, co0, keys); cnt.MNCAS != 0 {
		t.Fatalf("within the lease again: %+v", cnt)
	}
}

// TestEvictionAndMoveSentinels: after a cohort is evicted, the MN CAS path
// takes over the free sentinels its records keep, one CAS each (then plain
// MN CAS); a cohort moved to another owner at a newer epoch pays one CAS
// per record on the new owner's first grant (taking over the old epoch's
// free sentinel) and none afterwards.
func TestEvictionAndMoveSentinels(t *testing.T) {
	c := verbCluster(t)
	co0, co1, co2 := c.coordinator(0), c.coordinator(1), c.coordinator(2)
	k1 := []uint64{0, 8, 16}  // cohort 1 (key group 0), LOCAL on cn-0
	k2 := []uint64{2, 10, 18} // cohort 2 (key group 2), LOCAL on cn-1
	for range 2 {
		bump(t, c, co0, k1)
		bump(t, c, co1, k2)
	}
	publish := func(m *control.OwnerMap) {
		c.published.Store(m)
		for _, r := range c.resolvers {
			if err := r.Update(m); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Evict cohort 1 at epoch 2.
	migrate(t, c, 1, []control.KeyGroup{0, 1}, 0, -1, 1, 2)
	m2 := threeNodeMap(2)
	m2.Cohorts = m2.Cohorts[1:]
	publish(m2)
	for i, want := range []uint64{3, 3} {
		cnt, dev := bump(t, c, co2, k1)
		if cnt.LocksMNCAS != 3 || cnt.MNCAS != want || cnt.MNCASFailed != 0 || dev.CAS != want {
			t.Fatalf("evicted, transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	if r := c.nodes[2].Stats.Reclaimed.Load(); r != 3 {
		t.Fatalf("reclaimed %d, want 3", r)
	}
	for _, k := range k1 {
		if w := c.lockWord(t, k); w != 0 {
			t.Fatalf("key %d after the MN CAS path: %#x", k, w)
		}
	}

	// Move cohort 2 from cn-1 to cn-0 at epoch 3: its records carry the
	// free sentinel of epoch 1.
	migrate(t, c, 2, []control.KeyGroup{2, 3}, 1, 0, 1, 3)
	m3 := &control.OwnerMap{Epoch: 3, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 2, KeyGroups: []uint64{2, 3}}, Owner: 0}}}
	publish(m3)
	for i, want := range []uint64{3, 0, 0} {
		cnt, dev := bump(t, c, co0, k2)
		if cnt.LocksLocal != 3 || cnt.MNCAS != want || cnt.MNCASFailed != 0 || dev.CAS != want {
			t.Fatalf("moved, transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	for _, k := range k2 {
		if w := c.lockWord(t, k); w != Sentinel(2, 3, false) {
			t.Fatalf("key %d after the move: %#x", k, w)
		}
	}
	// Cohort 1 adopted by cn-1 at epoch 4: its words are 0 now (the MN CAS
	// path released them), so the first grant is one CAS from 0.
	if err := c.tables[1].Do(func(tb *Table) error { return tb.Install(1, []control.KeyGroup{0, 1}, 4) }); err != nil {
		t.Fatal(err)
	}
	m4 := m3.Clone()
	m4.Epoch = 4
	m4.Cohorts = append(m4.Cohorts, control.Placement{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{0, 1}}, Owner: 1})
	publish(m4)
	for i, want := range []uint64{3, 0} {
		cnt, dev := bump(t, c, co1, k1)
		if cnt.LocksLocal != 3 || cnt.MNCAS != want || dev.CAS != want {
			t.Fatalf("adopted, transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	for i, w := range c.allLockWords(t) {
		if occ.IsLocked(w) {
			t.Fatalf("slot %d left locked: %#x", i, w)
		}
	}
}

// TestTableMarks: marks follow the holder of a key, are reported with later
// grants at the same epoch, and are forgotten by a clearing release, a fence
// and a retire.
func TestTableMarks(t *testing.T) {
	tb, err := NewTable(Config{DrainDeadlineMicros: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Install(1, []control.KeyGroup{0}, 5); err != nil {
		t.Fatal(err)
	}
	k, other := Key{Table: 1, Key: 64}, Key{Table: 1, Key: 128}
	acq := func(h Holder) AcquireReply {
		t.Helper()
		rep, err := tb.Acquire(AcquireRequest{Cohort: 1, Epoch: 5, Holder: h, Keys: []Key{k, other}})
		if err != nil || rep.Status != StatusOK {
			t.Fatalf("acquire: %+v %v", rep, err)
		}
		return rep
	}
	rel := func(h Holder, cleared ...Key) {
		t.Helper()
		if rep, err := tb.Release(ReleaseRequest{Cohort: 1, Epoch: 5, Holder: h, Keys: []Key{k, other}, Cleared: cleared}); err != nil || rep.Status != StatusOK {
			t.Fatalf("release: %+v %v", rep, err)
		}
	}
	if rep := acq(7); len(rep.Marked) != 0 {
		t.Fatalf("fresh keys marked: %v", rep.Marked)
	}
	if n := tb.Mark(1, 5, 8, []Key{k}); n != 0 { // not the holder
		t.Fatalf("a non-holder marked %d", n)
	}
	if n := tb.Mark(1, 4, 7, []Key{k}); n != 0 { // another epoch
		t.Fatalf("marked at another epoch: %d", n)
	}
	if n := tb.Mark(1, 5, 7, []Key{k, other}); n != 2 || tb.Marks() != 2 {
		t.Fatalf("marked %d, table %d", n, tb.Marks())
	}
	rel(7)
	if rep := acq(8); len(rep.Marked) != 2 {
		t.Fatalf("marked keys not reported: %+v", rep)
	}
	rel(8, other) // other's slot was left empty: word 0
	if rep := acq(9); len(rep.Marked) != 1 || rep.Marked[0] != 0 {
		t.Fatalf("after a clearing release: %+v", rep)
	}
	if err := tb.Freeze(1, 5, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Fence(1, 5, 100); err != nil {
		t.Fatal(err)
	}
	if tb.Marks() != 0 || tb.Marked(1, k) {
		t.Fatalf("fence kept %d marks", tb.Marks())
	}
	if err := tb.Thaw(1, 5); err != nil {
		t.Fatal(err)
	}
	if rep := acq(10); len(rep.Marked) != 0 {
		t.Fatalf("marks after fence and thaw: %+v", rep)
	}
	tb.Mark(1, 5, 10, []Key{k})
	rel(10)
	if err := tb.Freeze(1, 5, 200); err != nil {
		t.Fatal(err)
	}
	if err := tb.Retire(1, 5, Moved{Epoch: 6}); err != nil {
		t.Fatal(err)
	}
	if tb.Marks() != 0 {
		t.Fatalf("retire kept %d marks", tb.Marks())
	}
}

// TestInsertReusesFreeSentinels: a remote grantee's delete leaves its
// cohort's free sentinel on the empty slot (it cannot unmark it at the
// owner); inserts of unowned keys and of the cohort's keys still succeed,
// the owner claims such a slot with a WRITE, and the MN CAS path is
// refused it while the cohort is placed.
func TestInsertReusesFreeSentinels(t *testing.T) {
	c := newCluster(t, 3, threeNodeMap(1))
	for _, n := range c.nodes {
		n.cfg.WriteLease = time.Minute // as in verbCluster
	}
	co0, co1, co2 := c.coordinator(0), c.coordinator(1), c.coordinator(2)
	const n = 100
	for i := range uint64(n) {
		mustRun(t, co0, func(tx txn.Tx) error { return tx.Insert(acct(8*i), u64(i)) }) // cohort 1, LOCAL on cn-0
	}
	for i := range uint64(n) {
		mustRun(t, co2, func(tx txn.Tx) error { // owner RPC from cn-2
			if _, err := tx.GetForUpdate(acct(8 * i)); err != nil {
				return err
			}
			return tx.Delete(acct(8 * i))
		})
	}
	sentinels := 0
	for _, w := range c.allLockWords(t) {
		if w == Sentinel(1, 1, false) {
			sentinels++
		}
	}
	if sentinels != n {
		t.Fatalf("%d free sentinels after remote deletes, want %d", sentinels, n)
	}
	// Unowned keys avoid the marked slots.
	for i := range uint64(n) {
		mustRun(t, co1, func(tx txn.Tx) error { return tx.Insert(acct(8*i+4), u64(i)) })
	}
	for i := range uint64(n) {
		mustRun(t, co0, func(tx txn.Tx) error { return tx.Insert(acct(8*i+n*8), u64(i)) })
	}
	// An empty slot left with cohort 1's free sentinel: cohort 1's owner
	// claims it with a WRITE (the slot is still marked in its table); the
	// MN CAS path may not take it (cohort 1 is placed): the lock follows
	// the sentinel the coordinator saw to cohort 1's owner (an owner RPC
	// grant, one CAS from S(1,1)), which leaves S(1,1).
	tl, _ := c.layout.Table(accounts)
	var addr uint64
	for i, w := range c.allLockWords(t) {
		a := tl.Region.Addr + uint64(i)*tl.SlotSize
		if w == Sentinel(1, 1, false) && !c.slot(t, a).Meta.Present() {
			addr = a
			break
		}
	}
	if addr == 0 {
		t.Fatal("no empty slot with a free sentinel")
	}
	claim := func(node int, k uint64) occ.LockResult {
		l := c.nodes[node].NewLocker(c.qp(), occ.NewCASLocker(c.qp()))
		req := []occ.LockRequest{{Ref: acct(k), KeyGroup: kgOf(acct(k)), Table: tl, SlotAddr: addr,
			Tag: store.CASTag(uint32(50+node), k), Seen: Sentinel(1, 1, false)}}
		res := make([]occ.LockResult, 1)
		if err := l.Acquire(context.Background(), req, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Status == occ.LockGranted {
			c.setSlotWord(t, addr, res[0].Release)
			l.Released(req, res)
		}
		return res[0]
	}
	if r := claim(1, 8*n+4); r.Status != occ.LockGranted || r.Path != occ.PathOwnerRPC || r.CAS != 1 || r.CASFailed != 0 ||
		r.Release != Sentinel(1, 1, false) {
		t.Fatalf("unowned key on a live free sentinel: %+v", r)
	}
	before := c.mem.Stats()
	if r := claim(0, 8*3*n); r.Status != occ.LockGranted || r.CAS != 0 || c.mem.Stats().Sub(before).CAS != 0 {
		t.Fatalf("owner claiming its own free sentinel: %+v", r)
	}
	if w := c.lockWord0(t, addr); w != Sentinel(1, 1, false) {
		t.Fatalf("slot word after the claim: %#x", w)
	}
	mustRun(t, co0, func(tx txn.Tx) error {
		for i := range uint64(n) {
			for _, k := range []uint64{8*i + 4, 8*i + n*8} {
				v, err := tx.Get(acct(k))
				if err != nil {
					return err
				}
				if binary.LittleEndian.Uint64(v) != i {
					t.Errorf("key %d = %d", k, binary.LittleEndian.Uint64(v))
				}
			}
		}
		return nil
	})
}

// slot reads one slot by address.
func (c *cluster) slot(t testing.TB, addr uint64) store.Slot {
	t.Helper()
	tl, _ := c.layout.Table(accounts)
	buf := make([]byte, tl.SlotSize)
	cs, err := rdma.Exec(context.Background(), c.checkQP(), rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: addr, Local: buf})
	if err != nil || rdma.FirstError(cs) != nil {
		t.Fatal(err, rdma.FirstError(cs))
	}
	return tl.DecodeSlot(buf)
}

func (c *cluster) lockWord0(t testing.TB, addr uint64) uint64 { return c.slot(t, addr).Lock }

// setSlotWord writes a slot's lock word (a coordinator's release).
func (c *cluster) setSlotWord(t testing.TB, addr, w uint64) {
	t.Helper()
	tl, _ := c.layout.Table(accounts)
	cs, err := rdma.Exec(context.Background(), c.checkQP(), rdma.WorkRequest{Op: rdma.OpWrite, RKey: tl.Region.RKey,
		RemoteAddr: addr + store.LockOffset, Local: binary.LittleEndian.AppendUint64(nil, w)})
	if err != nil || rdma.FirstError(cs) != nil {
		t.Fatal(err, rdma.FirstError(cs))
	}
}

// TestOwnerLeaseGatesWrites: a node grants by plain WRITE only while its
// owner lease runs (the planner may move its cohorts once it ran out); with
// none, or an expired one, every grant sets the lock word by CAS, which any
// new owner's CAS is arbitrated against.
func TestOwnerLeaseGatesWrites(t *testing.T) {
	c := verbCluster(t)
	co0 := c.coordinator(0)
	keys := []uint64{0, 8, 16} // key group 0: cohort 1, LOCAL on cn-0
	lease := &Lease{}
	c.nodes[0].cfg.Lease = lease
	run := func(what string, wantCAS uint64) {
		t.Helper()
		writes := c.nodes[0].Stats.WordWrites.Load()
		cnt, dev := bump(t, c, co0, keys)
		if cnt.LocksLocal != uint64(len(keys)) || cnt.MNCAS != wantCAS || dev.CAS != wantCAS {
			t.Fatalf("%s: want %d CAS, got occ %+v, memory node %d CAS", what, wantCAS, cnt, dev.CAS)
		}
		if got := c.nodes[0].Stats.WordWrites.Load() - writes; got != uint64(len(keys))-wantCAS {
			t.Fatalf("%s: %d word writes, want %d", what, got, uint64(len(keys))-wantCAS)
		}
	}
	n := uint64(len(keys))
	run("never leased: first grants", n)
	run("never leased: marked records still CAS", n)
	lease.Grant("cn-0", time.Now(), time.Minute)
	run("leased: marked records WRITE", 0)
	expired := &Lease{}
	expired.Grant("cn-0", time.Now().Add(-2*time.Second), time.Second)
	c.nodes[0].cfg.Lease = expired
	run("lease ran out", n)
	for _, k := range keys {
		if w := c.lockWord(t, k); w != Sentinel(1, 1, false) {
			t.Fatalf("key %d: lock word %#x, want the free sentinel", k, w)
		}
	}
	if st := lease.State(); st.Grants != 1 || st.Planner != "cn-0" || !st.Until.After(time.Now()) {
		t.Fatalf("lease state %+v", st)
	}
}

// TestLeaseNeverShortens: a grant for an older heartbeat answered late
// does not cut a lease a newer one extended; refusals leave it running.
func TestLeaseNeverShortens(t *testing.T) {
	var l Lease
	t0 := time.Now()
	if l.ValidAt(t0) {
		t.Fatal("the zero lease is valid")
	}
	l.Grant("p1", t0, time.Second)
	l.Grant("p2", t0.Add(-500*time.Millisecond), time.Second) // late answer to an older heartbeat
	l.Refuse()
	if !l.ValidAt(t0.Add(999*time.Millisecond)) || l.ValidAt(t0.Add(time.Second)) {
		t.Fatalf("lease until %v, want %v", l.State().Until, t0.Add(time.Second))
	}
	if st := l.State(); st.Planner != "p1" || st.Grants != 2 || st.Refusals != 1 {
		t.Fatalf("state %+v", st)
	}
}
