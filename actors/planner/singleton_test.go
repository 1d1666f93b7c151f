package planner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control/plannerlease"
)

// memWord is the planner lease's word in memory, shared by the planners
// of a test; a planner cut off from it sees its operations time out.
type memWord struct {
	mu  sync.Mutex
	v   uint64
	cut map[string]bool
}

// view is one planner's access to the word.
type view struct {
	w    *memWord
	name string
}

func (v view) op(ctx context.Context, f func(*uint64) uint64) (uint64, error) {
	v.w.mu.Lock()
	if v.w.cut[v.name] {
		v.w.mu.Unlock()
		<-ctx.Done()
		return 0, ctx.Err()
	}
	defer v.w.mu.Unlock()
	return f(&v.w.v), nil
}

func (v view) Load(ctx context.Context) (uint64, error) {
	return v.op(ctx, func(w *uint64) uint64 { return *w })
}

func (v view) CompareAndSwap(ctx context.Context, compare, swap uint64) (uint64, error) {
	return v.op(ctx, func(w *uint64) uint64 {
		old := *w
		if old == compare {
			*w = swap
		}
		return old
	})
}

func (w *memWord) setCut(name string, cut bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut[name] = cut
}

// TestPlannerLeaseLetsOnePlannerAct: two planners that each see every
// node live (as under an asymmetric partition, or two nodes disagreeing on
// where the planner runs) share the cluster's nodes and the memory node's
// lease word. Only the lease's holder grants owner leases and pushes maps.
// Cut from the word, the holder stops within half a lease; the other takes
// over (never while the holder is valid: every sample of both checks it)
// and publishes above the holder's epochs; back, the old holder finds itself deposed and forgets its state.
// A holder that stops releases the word, and the other takes it at once.
func TestPlannerLeaseLetsOnePlannerAct(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	word := &memWord{cut: map[string]bool{}}
	const leaseMicros = 1_000_000
	type planner struct {
		name string
		sys  *actor.ActorSystem
		pid  *actor.PID
		d    *driver
	}
	var ps []*planner
	for _, name := range names[:2] {
		cfg := DefaultConfig(name, 3)
		cfg.LeaseWord = view{w: word, name: name}
		cfg.PlannerLease = plannerlease.Config{LeaseMicros: leaseMicros, RenewMicros: 10_000}
		sys, pid := startConfig(t, fc, names, cfg)
		defer stop(sys, pid)
		d := newDriver(t, 3)
		d.installed = fc.installed
		ps = append(ps, &planner{name: name, sys: sys, pid: pid, d: d})
	}
	// beat feeds both planners and returns their statuses; it fails if
	// both hold a valid lease at once (sampled back to back).
	tick := uint64(0)
	beat := func() []Status {
		t.Helper()
		tick++
		var sts []Status
		for _, p := range ps {
			p.d.beat(p.sys.Root, p.pid, tick)
		}
		time.Sleep(10 * time.Millisecond)
		valid := 0
		for _, p := range ps {
			st := status(t, p.sys.Root, p.pid)
			if st.PlannerLease.Valid {
				valid++
			}
			sts = append(sts, st)
		}
		if valid > 1 {
			t.Fatalf("both planners hold a valid planner lease: %+v / %+v", sts[0].PlannerLease, sts[1].PlannerLease)
		}
		return sts
	}
	until := func(what string, cond func([]Status) bool) []Status {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			sts := beat()
			if cond(sts) {
				return sts
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v / %+v", what, sts[0], sts[1])
			}
		}
	}
	sts := until("one planner to publish an acknowledged map with cohorts", func(s []Status) bool {
		for _, st := range s {
			if st.PlannerLease.Valid && st.Acked > 0 && st.Acked == st.Epoch && st.Cohorts > 0 {
				return true
			}
		}
		return false
	})
	h, o := ps[0], ps[1]
	if !sts[0].PlannerLease.Valid {
		h, o = o, h
		sts[0], sts[1] = sts[1], sts[0]
	}
	ps = []*planner{h, o} // beat's statuses: the holder's, then the other's
	if sts[1].Epoch != 0 || sts[1].LeaseGrants != 0 || sts[1].PlannerLease.IdleTicks == 0 || sts[1].PlannerLease.Holding {
		t.Fatalf("%s, not holding the planner lease, acted: %+v", o.name, sts[1])
	}
	if g := askLease(t, o.sys.Root, o.pid, "cn-2", fc.installed("cn-2")); g.Granted || g.Reason != "no planner lease" {
		t.Fatalf("%s without the planner lease answered %+v", o.name, g)
	}
	if g := askLease(t, h.sys.Root, h.pid, "cn-2", fc.installed("cn-2")); !g.Granted {
		t.Fatalf("%s, holding the planner lease, refused: %+v", h.name, g)
	}
	for range 30 {
		beat() // a while of both running: never both valid
	}
	heldEpoch := fc.installed("cn-2")

	// The holder loses the memory node. A renewal that landed before the
	// cut keeps it valid until half a lease after that renewal was sent,
	// never later: past cut + half a lease it must not act. (Each status
	// is computed when the actor processes it, so a slow test process
	// cannot make this check pass or fail spuriously.)
	word.setCut(h.name, true)
	cutAt := time.Now()
	for time.Since(cutAt) < leaseMicros*time.Microsecond/2+time.Millisecond {
		beat()
	}
	if st := status(t, h.sys.Root, h.pid); st.PlannerLease.Valid {
		t.Fatalf("%s still valid half a lease after losing the word: %+v", h.name, st.PlannerLease)
	}
	if g := askLease(t, h.sys.Root, h.pid, "cn-2", fc.installed("cn-2")); g.Granted {
		t.Fatalf("%s, its planner lease lapsed, granted an owner lease: %+v", h.name, g)
	}
	until(o.name+" to take the planner lease over", func(s []Status) bool { return s[1].PlannerLease.Valid })
	t.Logf("%s took the planner lease over %v after %s lost the word", o.name, time.Since(cutAt).Round(time.Millisecond), h.name)
	sts = until(o.name+" to publish above "+h.name+"'s epochs", func(s []Status) bool {
		return s[1].Acked > heldEpoch && s[1].Acked == s[1].Epoch
	})
	if g := askLease(t, o.sys.Root, o.pid, "cn-2", fc.installed("cn-2")); !g.Granted {
		t.Fatalf("%s, now holding the planner lease, refused: %+v", o.name, g)
	}

	// The old holder reaches the memory node again: its renewal finds the
	// other's value, and it forgets everything it knew.
	word.setCut(h.name, false)
	sts = until(h.name+" to find itself deposed", func(s []Status) bool { return s[0].PlannerLease.Deposed > 0 })
	for range 20 {
		sts = beat()
	}
	if st := sts[0]; st.PlannerLease.Valid || st.PlannerLease.Holding || st.Epoch != 0 || st.LeaseGrants != 0 {
		t.Fatalf("%s, deposed, kept acting or kept its state: %+v", h.name, st)
	}
	if !sts[1].PlannerLease.Valid {
		t.Fatalf("%s lost the planner lease to a deposed planner: %+v", o.name, sts[1].PlannerLease)
	}
	// Every node's maps: the first holder's, then only the new holder's.
	fc.mu.Lock()
	for _, n := range names {
		second := false
		for i, from := range fc.from[n] {
			switch {
			case from == o.name:
				second = true
			case second:
				t.Errorf("%s installed epoch %d from %s after %s's maps", n, fc.maps[n][i].Epoch, from, o.name)
			}
		}
		if !second {
			t.Errorf("%s installed no map of %s", n, o.name)
		}
	}
	fc.mu.Unlock()

	// The holder stops (a placement change): it releases the word, and the
	// deposed planner takes it over well within a lease.
	if err := o.sys.Root.PoisonFuture(o.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	for deadline := time.Now().Add(20 * time.Second); ; {
		tick++
		h.d.beat(h.sys.Root, h.pid, tick)
		time.Sleep(10 * time.Millisecond)
		if status(t, h.sys.Root, h.pid).PlannerLease.Valid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not take the released planner lease over", h.name)
		}
	}
	if took := time.Since(stoppedAt); took >= leaseMicros*time.Microsecond {
		t.Errorf("%s took the released planner lease over %v after %s stopped, want < the %v lease", h.name, took, o.name,
			leaseMicros*time.Microsecond)
	}
}
