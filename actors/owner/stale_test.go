package owner

import (
	"context"
	"testing"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// TestStaleLocksPin: StaleLocks returns the grants older than its bound,
// once, and pins their keys: while pinned no grantee gets the key, even
// after the stale grant is released (its word on the memory node may still
// be the gone holder's); Unpin lets the key be granted again.
func TestStaleLocksPin(t *testing.T) {
	tb, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Install(1, []control.KeyGroup{1}, 1); err != nil {
		t.Fatal(err)
	}
	k := Key{Table: 1, Key: 4096}
	acquire := func(holder Holder, now int64) Status {
		rep, err := tb.Acquire(AcquireRequest{Cohort: 1, Epoch: 1, Holder: holder, Keys: []Key{k}, NowMicros: now})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Status
	}
	if s := acquire(7, 100); s != StatusOK {
		t.Fatalf("first grant: %v", s)
	}
	if st := tb.StaleLocks(100, 10); len(st) != 0 {
		t.Fatalf("a grant at 100 is not older than 100: %+v", st)
	}
	st := tb.StaleLocks(101, 10)
	if len(st) != 1 || st[0].Key != k || st[0].Holder != 7 || st[0].Cohort != 1 || st[0].Epoch != 1 {
		t.Fatalf("stale locks: %+v", st)
	}
	if again := tb.StaleLocks(1000, 10); len(again) != 0 {
		t.Fatalf("a pinned key returned twice: %+v", again)
	}
	if _, err := tb.Release(ReleaseRequest{Cohort: 1, Epoch: 1, Holder: 7, Keys: []Key{k}}); err != nil {
		t.Fatal(err)
	}
	if s := acquire(8, 200); s != StatusConflict {
		t.Fatalf("a pinned key was granted: %v", s)
	}
	tb.Unpin([]Key{k})
	if s := acquire(8, 300); s != StatusOK {
		t.Fatalf("after Unpin: %v", s)
	}
	for i := range 5 {
		k := Key{Table: 1, Key: uint64(8192 + i*64)}
		if rep, err := tb.Acquire(AcquireRequest{Cohort: 1, Epoch: 1, Holder: 9, Keys: []Key{k}, NowMicros: 10}); err != nil || rep.Status != StatusOK {
			t.Fatal(rep.Status, err)
		}
	}
	if st := tb.StaleLocks(50, 3); len(st) != 3 {
		t.Fatalf("max 3: got %d", len(st))
	}
}

// TestHeldRetired: a lock refused by a held owner sentinel is flagged
// Retired (a gone holder's word, which the engine may repair) only when
// the locker's map shows that activation grants no more — never for the
// current activation, whose grantees re-take the same word.
func TestHeldRetired(t *testing.T) {
	const k = 3
	m1 := &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []control.KeyGroup{k}}, Owner: 0}}}
	c := newCluster(t, 2, m1)
	mustRun(t, c.coordinator(0), func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	tl, _ := c.layout.Table(accounts)
	var addr uint64
	for i := range c.allLockWords(t) {
		a := tl.Region.Addr + uint64(i)*tl.SlotSize
		if s := c.slot(t, a); s.Meta.Present() && s.Key == k {
			addr = a
		}
	}
	held := Sentinel(1, 1, true)
	c.setSlotWord(t, addr, held) // a grantee of (1,1) that died holding it
	tag := uint64(0)
	try := func(node int) occ.LockResult {
		tag++
		l := c.nodes[node].NewLocker(c.qp(), occ.NewCASLocker(c.qp()))
		req := []occ.LockRequest{{Ref: acct(k), KeyGroup: k, Table: tl, SlotAddr: addr, Tag: store.CASTag(60, tag), Seen: held}}
		res := make([]occ.LockResult, 1)
		if err := l.Acquire(context.Background(), req, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Status == occ.LockGranted {
			t.Fatalf("granted over a held sentinel: %+v", res[0])
		}
		return res[0]
	}
	update := func(m *control.OwnerMap) {
		c.published.Store(m)
		for _, r := range c.resolvers {
			if err := r.Update(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := try(1); r.LockWord != held || r.Retired {
		t.Fatalf("cohort 1 active at epoch 1 (owner RPC): %+v, want refused, not retired", r)
	}
	update(&control.OwnerMap{Epoch: 2})
	if r := try(1); r.LockWord != held || !r.Retired {
		t.Fatalf("cohort 1 no longer placed (MN CAS path): %+v, want retired", r)
	}
	m3 := &control.OwnerMap{Epoch: 3, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []control.KeyGroup{k}}, Owner: 1}}}
	if err := c.tables[1].Do(func(tb *Table) error { return tb.Install(1, []control.KeyGroup{k}, 3) }); err != nil {
		t.Fatal(err)
	}
	update(m3)
	if r := try(1); r.LockWord != held || !r.Retired {
		t.Fatalf("cohort 1 re-installed at epoch 3 (local): %+v, want retired", r)
	}
}
