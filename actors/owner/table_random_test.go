package owner

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// refCohort is the reference model of one cohort activation.
type refCohort struct {
	epoch    uint64
	frozen   bool
	frozenAt int64
	locks    map[Key]Holder
}

// TestTableRandomized drives a Table with random acquires, releases,
// retransmissions, freezes, thaws, fences, retirements and reinstalls, and
// after every step checks it against a reference model: I1 (no lock held by
// two holders; a grant only of a free key or of one the holder already
// holds), grants only while active and only at the installed epoch, never a
// grant for a retired cohort, and the table's holders equal the model's.
func TestTableRandomized(t *testing.T) {
	for seed := range uint64(20) {
		runRandomTable(t, seed, 3000)
	}
}

func runRandomTable(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	const deadline = 100
	tb, err := NewTable(Config{DrainDeadlineMicros: deadline, MaxLocks: 40, MaxKeysPerRequest: 6, MaxIdempotencyKeys: 64})
	if err != nil {
		t.Fatal(err)
	}
	cohorts := []control.CohortID{1, 2, 3}
	model := map[control.CohortID]*refCohort{}
	retired := map[control.CohortID]Moved{}
	epoch := uint64(1)
	now := int64(0)
	install := func(c control.CohortID) {
		epoch++
		if err := tb.Install(c, []control.KeyGroup{uint64(c) * 10}, epoch); err != nil {
			t.Fatalf("seed %d: install %d: %v", seed, c, err)
		}
		model[c] = &refCohort{epoch: epoch, locks: map[Key]Holder{}}
		delete(retired, c)
	}
	for _, c := range cohorts {
		install(c)
	}
	type sent struct {
		req AcquireRequest
		rep AcquireReply
	}
	var last []sent
	nextID := uint64(0)
	total := func() int {
		n := 0
		for _, m := range model {
			n += len(m.locks)
		}
		return n
	}
	for step := range steps {
		now += int64(rng.IntN(20))
		c := cohorts[rng.IntN(len(cohorts))]
		m := model[c]
		switch op := rng.IntN(100); {
		case op < 45: // acquire
			keys := make([]Key, 1+rng.IntN(4))
			for i := range keys {
				keys[i] = Key{Table: 1, Key: uint64(rng.IntN(12))}
			}
			e := epoch - uint64(rng.IntN(3))
			if m != nil && rng.IntN(2) == 0 {
				e = m.epoch
			}
			nextID++
			req := AcquireRequest{Cohort: c, Epoch: e, Holder: Holder(1 + rng.IntN(6)), Keys: keys,
				Requester: "cn", RequestID: nextID, NowMicros: now}
			rep, err := tb.Acquire(req)
			if errors.Is(err, ErrLimit) {
				if m == nil || m.frozen || e < m.epoch {
					t.Fatalf("seed %d step %d: limit error where no grant was possible: %v", seed, step, err)
				}
				fresh := map[Key]bool{}
				for _, k := range keys {
					if m.locks[k] != req.Holder {
						fresh[k] = true
					}
				}
				if total()+len(fresh) <= tb.Config().MaxLocks {
					t.Fatalf("seed %d step %d: spurious limit error: %v", seed, step, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			checkAcquire(t, seed, step, req, rep, m, retired, func(k Key) (Holder, bool) {
				for oc, om := range model {
					if h, held := om.locks[k]; held && oc != c {
						return h, true
					}
				}
				return 0, false
			})
			last = append(last, sent{req, rep})
		case op < 50: // retransmission of a recent request: same reply, no change
			if len(last) == 0 {
				continue
			}
			s := last[max(0, len(last)-1-rng.IntN(min(len(last), 8)))]
			rep, err := tb.Acquire(s.req)
			if err != nil || !reflect.DeepEqual(rep, s.rep) {
				t.Fatalf("seed %d step %d: retransmission got %+v, %v; first reply %+v", seed, step, rep, err, s.rep)
			}
		case op < 75: // release
			h := Holder(1 + rng.IntN(6))
			req := ReleaseRequest{Cohort: c, Holder: h, All: rng.IntN(3) == 0}
			if m != nil {
				req.Epoch = m.epoch
			}
			for range 1 + rng.IntN(3) {
				req.Keys = append(req.Keys, Key{Table: 1, Key: uint64(rng.IntN(12))})
			}
			rep, err := tb.Release(req)
			if err != nil {
				t.Fatalf("seed %d step %d: release: %v", seed, step, err)
			}
			if m == nil {
				if rep.Status == StatusOK || rep.Released != 0 {
					t.Fatalf("seed %d step %d: release of retired cohort: %+v", seed, step, rep)
				}
				continue
			}
			want := 0
			for k, holder := range m.locks {
				if holder == h && (req.All || containsKey(req.Keys, k)) {
					delete(m.locks, k)
					want++
				}
			}
			if rep.Status != StatusOK || rep.Released != want {
				t.Fatalf("seed %d step %d: release %+v: got %+v, want %d released", seed, step, req, rep, want)
			}
		case op < 83: // freeze
			if m == nil {
				continue
			}
			if err := tb.Freeze(c, m.epoch, now); err != nil {
				t.Fatal(err)
			}
			if !m.frozen {
				m.frozen, m.frozenAt = true, now
			}
		case op < 87: // thaw
			if m == nil {
				continue
			}
			if err := tb.Thaw(c, m.epoch); err != nil {
				t.Fatal(err)
			}
			m.frozen = false
		case op < 93: // fence
			if m == nil {
				continue
			}
			fenced, err := tb.Fence(c, m.epoch, now)
			switch {
			case !m.frozen:
				if !errors.Is(err, ErrNotFrozen) {
					t.Fatalf("seed %d step %d: fence of active cohort: %v", seed, step, err)
				}
			case now < m.frozenAt+deadline:
				if !errors.Is(err, ErrDrainPending) {
					t.Fatalf("seed %d step %d: fence before the deadline: %v", seed, step, err)
				}
			default:
				want := map[Holder]bool{}
				for _, h := range m.locks {
					want[h] = true
				}
				got := map[Holder]bool{}
				for _, h := range fenced {
					got[h] = true
				}
				if err != nil || !reflect.DeepEqual(got, want) || len(fenced) != len(want) {
					t.Fatalf("seed %d step %d: fenced %v, %v; want %v", seed, step, fenced, err, want)
				}
				clear(m.locks)
			}
		default: // retire, or reinstall a retired cohort
			if m == nil {
				install(c)
				continue
			}
			epoch++
			moved := Moved{Owner: "cn-x", Epoch: epoch}
			err := tb.Retire(c, m.epoch, moved)
			switch {
			case !m.frozen:
				if !errors.Is(err, ErrNotFrozen) {
					t.Fatalf("seed %d step %d: retire of active cohort: %v", seed, step, err)
				}
			case len(m.locks) > 0:
				if !errors.Is(err, ErrHoldersRemain) {
					t.Fatalf("seed %d step %d: retire with holders: %v", seed, step, err)
				}
			default:
				if err != nil {
					t.Fatalf("seed %d step %d: retire: %v", seed, step, err)
				}
				delete(model, c)
				retired[c] = moved
			}
		}
		// The table's holders are the model's, lock for lock.
		n := 0
		for _, c := range cohorts {
			m := model[c]
			if m == nil {
				continue
			}
			for k := range uint64(12) {
				key := Key{Table: 1, Key: k}
				h, ok := tb.HolderOf(c, key)
				if want, held := m.locks[key]; ok != held || h != want {
					t.Fatalf("seed %d step %d: cohort %d key %d: table holder %d/%v, model %d/%v", seed, step, c, k, h, ok, want, held)
				}
			}
			n += len(m.locks)
		}
		if tb.Locks() != n {
			t.Fatalf("seed %d step %d: table counts %d locks, model %d", seed, step, tb.Locks(), n)
		}
	}
}

// checkAcquire checks one reply against the model and applies it. other
// returns the holder of a key in another cohort of the table: one holder
// per key in the whole table, across cohorts.
func checkAcquire(t *testing.T, seed uint64, step int, req AcquireRequest, rep AcquireReply, m *refCohort, retired map[control.CohortID]Moved,
	other func(Key) (Holder, bool)) {
	t.Helper()
	fail := func(why string) {
		t.Fatalf("seed %d step %d: %s: request %+v reply %+v", seed, step, why, req, rep)
	}
	if m == nil {
		if rep.Status == StatusOK || rep.Status == StatusConflict || len(rep.Granted) > 0 {
			fail("grant for a retired cohort")
		}
		if mv, ok := retired[req.Cohort]; ok && req.Epoch < mv.Epoch && (rep.Status != StatusMoved || rep.Moved != mv) {
			fail("late request for a retired cohort not moved")
		}
		return
	}
	switch {
	case req.Epoch < m.epoch:
		if rep.Status != StatusStaleEpoch || rep.Epoch != m.epoch {
			fail("stale epoch not refused")
		}
		return
	case m.frozen:
		if rep.Status != StatusRetry {
			fail("frozen cohort did not answer retry")
		}
		return
	}
	if rep.Epoch != m.epoch {
		fail("grant not at the installed epoch")
	}
	granted := map[int]bool{}
	for _, i := range rep.Granted {
		granted[i] = true
	}
	for i, k := range req.Keys {
		h, held := m.locks[k]
		oh, elsewhere := other(k)
		switch {
		case rep.Status == StatusConflict && i == rep.ConflictIndex:
			if elsewhere {
				if oh != rep.ConflictHolder {
					fail("conflict with another cohort's holder misreported")
				}
				return
			}
			if !held || h == req.Holder || h != rep.ConflictHolder {
				fail("conflict on a key the model says is free or ours")
			}
			return
		case elsewhere:
			fail("I2: key granted while another cohort's holder holds it")
		case !granted[i]:
			fail("key neither granted nor conflicting")
		case held && h != req.Holder:
			fail("I1: key granted while another holder holds it")
		}
		m.locks[k] = req.Holder
	}
	if rep.Status != StatusOK {
		fail("all keys granted but status not ok")
	}
}

func containsKey(keys []Key, k Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
