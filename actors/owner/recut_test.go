package owner

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
)

// TestTableRecut: one holder per key across the cohorts of a table; a grant
// of a key another cohort marked takes the mark over (AcquireReply.Taken);
// Reconfigure changes an active cohort's key groups in place and keeps its
// install epoch and marks; key groups of a frozen cohort may be installed
// in another one.
func TestTableRecut(t *testing.T) {
	tb, err := NewTable(Config{DrainDeadlineMicros: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id  control.CohortID
		kgs []control.KeyGroup
	}{{1, []control.KeyGroup{0, 1}}, {2, []control.KeyGroup{2}}} {
		if err := tb.Install(c.id, c.kgs, 1); err != nil {
			t.Fatal(err)
		}
	}
	a := Key{Table: 1, Key: 64}
	acq := func(c control.CohortID, h Holder) AcquireReply {
		t.Helper()
		rep, err := tb.Acquire(AcquireRequest{Cohort: c, Epoch: 3, Holder: h, Keys: []Key{a}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rel := func(c control.CohortID, h Holder) {
		t.Helper()
		if rep, err := tb.Release(ReleaseRequest{Cohort: c, Epoch: 1, Holder: h, Keys: []Key{a}}); err != nil || rep.Released != 1 {
			t.Fatalf("release: %+v %v", rep, err)
		}
	}
	if rep := acq(1, 7); rep.Status != StatusOK || len(rep.Taken) != 0 {
		t.Fatalf("first grant: %+v", rep)
	}
	if rep := acq(2, 8); rep.Status != StatusConflict || rep.ConflictHolder != 7 {
		t.Fatalf("a key held through cohort 1 granted through cohort 2: %+v", rep)
	}
	if n := tb.Mark(1, 1, 7, []Key{a}); n != 1 {
		t.Fatalf("marked %d", n)
	}
	rel(1, 7)
	rep := acq(2, 8)
	if rep.Status != StatusOK || len(rep.Marked) != 0 || len(rep.Taken) != 1 ||
		rep.Taken[0] != (TakenWord{Index: 0, Word: Sentinel(1, 1, false)}) {
		t.Fatalf("grant of a key cohort 1 marked: %+v", rep)
	}
	if tb.Marked(1, a) || tb.Marks() != 0 {
		t.Fatalf("cohort 1 keeps its mark after cohort 2's grant (%d marks)", tb.Marks())
	}
	if rep := acq(1, 9); rep.Status != StatusConflict || rep.ConflictHolder != 8 {
		t.Fatalf("a key held through cohort 2 granted through cohort 1: %+v", rep)
	}
	if n := tb.Mark(2, 1, 8, []Key{a}); n != 1 || !tb.Marked(2, a) {
		t.Fatalf("cohort 2 marked %d", n)
	}
	rel(2, 8)
	if rep := acq(2, 10); len(rep.Marked) != 1 || len(rep.Taken) != 0 {
		t.Fatalf("cohort 2's own mark: %+v", rep)
	}
	rel(2, 10)

	// Re-cut at epoch 2: key group 0 leaves cohort 1 for a new cohort 3.
	if err := tb.Reconfigure(2, 1, []control.KeyGroup{1, 2}, 2); !errors.Is(err, ErrKeyGroupTaken) {
		t.Fatalf("reconfigure onto an active cohort's key group: %v", err)
	}
	if err := tb.Reconfigure(1, 1, []control.KeyGroup{1}, 2); err != nil {
		t.Fatal(err)
	}
	if err := tb.Install(3, []control.KeyGroup{0}, 2); err != nil {
		t.Fatal(err)
	}
	if c, e, _, _ := tb.CohortOf(0); c != 3 || e != 2 {
		t.Fatalf("key group 0 in cohort %d at %d", c, e)
	}
	if c, e, p, _ := tb.CohortOf(1); c != 1 || e != 1 || p != PhaseActive {
		t.Fatalf("cohort 1 after reconfigure: %d at %d, %s", c, e, p)
	}
	if !tb.Marked(2, a) || !tb.InstalledSentinel(Sentinel(1, 1, false)) || tb.InstalledSentinel(Sentinel(1, 2, false)) ||
		!tb.InstalledSentinel(Sentinel(3, 2, false)) {
		t.Fatal("marks or installed sentinels changed by the re-cut")
	}
	if err := tb.Reconfigure(1, 1, []control.KeyGroup{1}, 0); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("reconfigure at an epoch before the install: %v", err)
	}

	// Cohort 1 leaves the node at epoch 3: frozen, its key group may be
	// given to another cohort at once, and it cannot thaw over it.
	if err := tb.Freeze(1, 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reconfigure(1, 1, []control.KeyGroup{1}, 3); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("reconfigure of a frozen cohort: %v", err)
	}
	if err := tb.Install(4, []control.KeyGroup{1}, 3); err != nil {
		t.Fatal(err)
	}
	if err := tb.Thaw(1, 1); !errors.Is(err, ErrKeyGroupTaken) {
		t.Fatalf("thaw over a key group given away: %v", err)
	}
	if err := tb.Retire(1, 1, Moved{Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	if c, _, _, ok := tb.CohortOf(1); !ok || c != 4 {
		t.Fatalf("retiring cohort 1 dropped key group 1 of cohort 4: %d %v", c, ok)
	}
}

// TestRecutOnOneNode: a key group moves between cohorts of one owner. Its
// records, marked by the old cohort, are taken over by the new one with one
// CAS each — by a local grantee (the table hands the mark over) and by a
// remote one (the map places both cohorts on the same owner) — and then
// granted with plain WRITEs; no attempt is refused.
func TestRecutOnOneNode(t *testing.T) {
	c := verbCluster(t)
	co0, co1 := c.coordinator(0), c.coordinator(1)
	k := []uint64{0, 8, 16} // key group 0: cohort 1 on cn-0
	for range 2 {
		bump(t, c, co0, k)
	}
	publish := func(m *control.OwnerMap) {
		c.published.Store(m)
		for _, r := range c.resolvers {
			if err := r.Update(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Epoch 2: key group 0 leaves cohort 1 for cohort 3, both on cn-0.
	if err := c.tables[0].Do(func(tb *Table) error {
		if err := tb.Reconfigure(1, 1, []control.KeyGroup{1}, 2); err != nil {
			return err
		}
		return tb.Install(3, []control.KeyGroup{0}, 2)
	}); err != nil {
		t.Fatal(err)
	}
	m2 := threeNodeMap(2)
	m2.Cohorts[0].KeyGroups = []uint64{1}
	m2.Cohorts = append(m2.Cohorts, control.Placement{Cohort: control.Cohort{ID: 3, KeyGroups: []uint64{0}}, Owner: 0})
	publish(m2)
	for i, want := range []uint64{3, 0, 0} {
		cnt, dev := bump(t, c, co0, k)
		if cnt.LocksLocal != 3 || cnt.MNCAS != want || cnt.MNCASFailed != 0 || cnt.Redirects != 0 || dev.CAS != want {
			t.Fatalf("local, transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	for _, key := range k {
		if w := c.lockWord(t, key); w != Sentinel(3, 2, false) {
			t.Fatalf("key %d after the re-cut: %#x", key, w)
		}
	}
	// Epoch 3: key group 0 moves on to cohort 4 on cn-0 (cohort 3 keeps
	// key group 4); cn-1 locks the records through the owner RPC.
	if err := c.tables[0].Do(func(tb *Table) error {
		if err := tb.Reconfigure(3, 2, []control.KeyGroup{4}, 3); err != nil {
			return err
		}
		return tb.Install(4, []control.KeyGroup{0}, 3)
	}); err != nil {
		t.Fatal(err)
	}
	m3 := m2.Clone()
	m3.Epoch = 3
	m3.Cohorts[2].KeyGroups = []uint64{4}
	m3.Cohorts = append(m3.Cohorts, control.Placement{Cohort: control.Cohort{ID: 4, KeyGroups: []uint64{0}}, Owner: 0})
	if err := c.tables[0].Do(func(tb *Table) error {
		if n := tb.Marks(); n != 3 {
			t.Errorf("%d marks in cn-0's table, want cohort 3's 3", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	publish(m3)
	for i := range 2 {
		cnt, dev := bump(t, c, co1, k)
		if cnt.LocksOwnerRPC != 3 || cnt.MNCAS != 3 || cnt.MNCASFailed != 0 || cnt.Redirects != 0 || dev.CAS != 3 {
			t.Fatalf("remote, transaction %d: %+v, memory node %d CAS", i, cnt, dev.CAS)
		}
	}
	// The remote grants took cohort 3's marks over (the remote grantee
	// cannot mark for cohort 4: its grants CAS from S(4,3)).
	if err := c.tables[0].Do(func(tb *Table) error {
		if n := tb.Marks(); n != 0 {
			t.Errorf("%d marks left in cn-0's table", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, w := range c.allLockWords(t) {
		if w != 0 && w != Sentinel(4, 3, false) && w != Sentinel(2, 1, false) && w != Sentinel(1, 1, false) {
			t.Fatalf("slot %d: %#x", i, w)
		}
	}
}

// TestBankRecuts runs concurrent transfers on three nodes while key groups
// move between cohorts — within one node (the new cohort takes the old
// one's sentinels over) and across nodes (locks follow the old cohort's
// sentinels to its owner) — by Reconfigure and Install, without freezes;
// each map reaches one node only, the others learn it late. The total must
// be kept and no lock may stay held.
func TestBankRecuts(t *testing.T) { bothLayouts(t, testBankRecuts) }

func testBankRecuts(t *testing.T, fenced bool) {
	const nAccts, initial, workersPerNode, transfers = 16, 1000, 3, 300
	c := newClusterWith(t, 3, threeNodeMap(1), nil, fenced)
	co := c.coordinator(0)
	for k := range uint64(nAccts) {
		mustRun(t, co, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(initial)) })
	}
	load := &bankLoad{}
	load.start(c, nAccts, workersPerNode, transfers)
	stop := make(chan struct{})
	go func() { load.wg.Wait(); close(stop) }()
	type cohort struct {
		owner int
		epoch uint64
		kgs   []control.KeyGroup
	}
	cohorts := map[control.CohortID]*cohort{1: {0, 1, []control.KeyGroup{0, 1}}, 2: {1, 1, []control.KeyGroup{2, 3}}}
	// Each step moves key group kg to cohort to (installed on node on at
	// the step's epoch if new).
	steps := []struct {
		kg control.KeyGroup
		to control.CohortID
		on int
	}{
		{1, 10, 0}, // within cn-0, to a new cohort
		{0, 10, 0}, // within cn-0, to an existing cohort
		{1, 1, 0},  // back
		{2, 10, 1}, // cn-1 → cn-0
		{3, 20, 1}, // within cn-1, to a new cohort
		{0, 20, 1}, // cn-0 → cn-1
		{4, 1, 0},  // unowned → cn-0
		{1, 20, 1}, // cn-0 → cn-1
		{0, 1, 0},  // cn-1 → cn-0
	}
	epoch := uint64(1)
	for i, st := range steps {
		select {
		case <-stop:
		case <-time.After(3 * time.Millisecond):
		}
		epoch++
		for id, ch := range cohorts {
			if j := slices.Index(ch.kgs, st.kg); j >= 0 {
				ch.kgs = slices.Delete(ch.kgs, j, j+1)
				if err := c.tables[ch.owner].Do(func(tb *Table) error { return tb.Reconfigure(id, ch.epoch, ch.kgs, epoch) }); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ch, ok := cohorts[st.to]; ok {
			ch.kgs = append(ch.kgs, st.kg)
			slices.Sort(ch.kgs)
			if err := c.tables[ch.owner].Do(func(tb *Table) error { return tb.Reconfigure(st.to, ch.epoch, ch.kgs, epoch) }); err != nil {
				t.Fatal(err)
			}
		} else {
			cohorts[st.to] = &cohort{st.on, epoch, []control.KeyGroup{st.kg}}
			if err := c.tables[st.on].Do(func(tb *Table) error { return tb.Install(st.to, []control.KeyGroup{st.kg}, epoch) }); err != nil {
				t.Fatal(err)
			}
		}
		m := &control.OwnerMap{Epoch: epoch}
		for _, id := range slices.Sorted(maps.Keys(cohorts)) {
			ch := cohorts[id]
			m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: slices.Clone(ch.kgs)}, Owner: ch.owner})
		}
		c.published.Store(m)
		if err := c.resolvers[i%3].Update(m); err != nil {
			t.Fatal(err)
		}
	}
	<-stop
	total := bankTotal(t, co, nAccts)
	var reclaimed uint64
	for _, n := range c.nodes {
		reclaimed += n.Stats.Reclaimed.Load()
	}
	committed, sum := load.committed, load.sum
	t.Logf("committed %d, counters %+v, rpc locks %d, taken over %d", committed, sum, c.tr.locks.Load(), reclaimed)
	if total != nAccts*initial {
		t.Fatalf("total %d, want %d", total, nAccts*initial)
	}
	if committed == 0 {
		t.Fatal("nothing committed")
	}
	c.assertNothingHeld(t)
	if fenced {
		claims, writes, refusals, unfenced := c.fenceStats()
		t.Logf("fences: %d claimed, %d fenced writes, %d refusals, %d given back", claims, writes, refusals, unfenced)
	}
}

// TestRecutTakeoverNeedsTheLease: a remote grantee takes over the free
// sentinel of another cohort of the same owner (a key group re-cut from
// cohort 3 to cohort 4 on cn-0, TestRecutOnOneNode) only while it holds its
// owner lease; without one the locks follow the sentinel to the cohort that
// marked it, whose grants CAS from it and release to it, so the marks of a
// re-cut stay put until a leased node takes them. Either way every CAS
// expects the word it replaces: the memory node arbitrates.
func TestRecutTakeoverNeedsTheLease(t *testing.T) {
	c := verbCluster(t)
	co0, co1 := c.coordinator(0), c.coordinator(1)
	k := []uint64{0, 8, 16} // key group 0: cohort 1 on cn-0
	publish := func(m *control.OwnerMap) {
		c.published.Store(m)
		for _, r := range c.resolvers {
			if err := r.Update(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	recut := func(from control.CohortID, fromEpoch uint64, keep []control.KeyGroup, to control.CohortID, epoch uint64) {
		t.Helper()
		if err := c.tables[0].Do(func(tb *Table) error {
			if err := tb.Reconfigure(from, fromEpoch, keep, epoch); err != nil {
				return err
			}
			return tb.Install(to, []control.KeyGroup{0}, epoch)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Epoch 2: key group 0 goes from cohort 1 to cohort 3; cn-0's grants
	// leave the records marked S(3,2).
	recut(1, 1, []control.KeyGroup{1}, 3, 2)
	m2 := threeNodeMap(2)
	m2.Cohorts[0].KeyGroups = []uint64{1}
	m2.Cohorts = append(m2.Cohorts, control.Placement{Cohort: control.Cohort{ID: 3, KeyGroups: []uint64{0}}, Owner: 0})
	publish(m2)
	for range 2 {
		bump(t, c, co0, k)
	}
	words := func(want uint64) {
		t.Helper()
		for _, key := range k {
			if w := c.lockWord(t, key); w != want {
				t.Fatalf("key %d: lock word %#x, want %#x", key, w, want)
			}
		}
	}
	words(Sentinel(3, 2, false))
	// Epoch 3: key group 0 goes on to cohort 4; cn-1 locks its records
	// through the owner RPC, first with its lease run out.
	recut(3, 2, []control.KeyGroup{4}, 4, 3)
	m3 := m2.Clone()
	m3.Epoch = 3
	m3.Cohorts[2].KeyGroups = []uint64{4}
	m3.Cohorts = append(m3.Cohorts, control.Placement{Cohort: control.Cohort{ID: 4, KeyGroups: []uint64{0}}, Owner: 0})
	publish(m3)
	expired := &Lease{}
	expired.Grant("cn-1", time.Now().Add(-2*time.Second), time.Second)
	c.nodes[1].cfg.Lease = expired
	for i := range 2 {
		cnt, dev := bump(t, c, co1, k)
		if cnt.LocksOwnerRPC != 3 || cnt.MNCAS != 3 || dev.CAS != 3 || c.nodes[1].Stats.Reclaimed.Load() != 0 {
			t.Fatalf("no lease, transaction %d: %+v, memory node %d CAS, %d reclaimed", i, cnt, dev.CAS, c.nodes[1].Stats.Reclaimed.Load())
		}
		words(Sentinel(3, 2, false))
	}
	// With the lease, the next grants take cohort 3's sentinels over.
	lease := &Lease{}
	lease.Grant("cn-1", time.Now(), time.Minute)
	c.nodes[1].cfg.Lease = lease
	bump(t, c, co1, k)
	if r := c.nodes[1].Stats.Reclaimed.Load(); r != 3 {
		t.Fatalf("leased: %d sentinels taken over, want 3", r)
	}
	words(Sentinel(4, 3, false))
}
