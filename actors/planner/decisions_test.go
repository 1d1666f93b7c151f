package planner

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func TestRingKeepsTheNewestInOrder(t *testing.T) {
	r := newRing[int](4)
	if got := r.list(); len(got) != 0 {
		t.Fatalf("empty ring lists %v", got)
	}
	for i := range 3 {
		r.add(i)
	}
	if got := r.list(); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("partial ring lists %v", got)
	}
	for i := 3; i < 11; i++ {
		r.add(i)
	}
	if got := r.list(); !slices.Equal(got, []int{7, 8, 9, 10}) || r.total != 11 || len(r.buf) != 4 {
		t.Fatalf("full ring lists %v (total %d, %d held), want the newest 4 of 11", got, r.total, len(r.buf))
	}
	// list is a copy: the caller may keep it while the ring moves on.
	got := r.list()
	r.add(11)
	if got[0] != 7 {
		t.Fatalf("list shares the ring's buffer")
	}
}

func decisions(t *testing.T, root *actor.RootContext, pid *actor.PID) Decisions {
	t.Helper()
	r, err := root.RequestFuture(pid, GetDecisions{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return r.(Decisions)
}

// TestPlannerRecordsItsDecisions drives the planner until it publishes
// owners, then drifts the workload so that cohorts move, and checks the
// decision log: installs and moves named by roster node, with the Benefit
// terms that chose them (S_atomic positive, Benefit their difference), at
// the epochs the planner published, within MaxDecisions.
func TestPlannerRecordsItsDecisions(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	waitFor(t, d, sys, pid, "an acknowledged map with cohorts", func(s Status) bool { return s.Acked >= 1 && s.Cohorts >= 12 })
	got := decisions(t, sys.Root, pid)
	if len(got.Decisions) == 0 || got.TotalDecisions < uint64(len(got.Decisions)) {
		t.Fatalf("no decisions recorded after a map with cohorts: %+v", got)
	}
	installs := 0
	for _, x := range got.Decisions {
		if x.Kind != DecisionInstall {
			continue
		}
		installs++
		if !slices.Contains(names, x.To) || x.From != "" || x.Epoch == 0 || x.UnixMilli == 0 {
			t.Errorf("install %+v: want a roster node as To, no From, an epoch and a time", x)
		}
		if x.Terms.SAtomic <= 0 || math.Abs(x.Benefit-x.Terms.Benefit()) > 1e-9 || x.Benefit <= 0 {
			t.Errorf("install %+v: want S_atomic > 0 and Benefit = S_atomic − C_rpc − C_move − C_load > 0", x)
		}
	}
	if installs == 0 {
		t.Fatalf("no install among %d decisions", len(got.Decisions))
	}

	// Drift: tenant t's transactions now run on node t+1 mod 3; cohorts
	// follow them.
	d.shift = 1
	var moves []Decision
	deadline := time.Now().Add(20 * time.Second)
	for tick := uint64(1000); len(moves) == 0; tick++ {
		if time.Now().After(deadline) {
			t.Fatalf("no move decision within 20 s of the drift: %+v", decisions(t, sys.Root, pid))
		}
		d.beat(sys.Root, pid, tick)
		time.Sleep(10 * time.Millisecond)
		for _, x := range decisions(t, sys.Root, pid).Decisions {
			if x.Kind == DecisionMove {
				moves = append(moves, x)
			}
		}
	}
	mv := moves[0]
	if mv.From == mv.To || !slices.Contains(names, mv.From) || !slices.Contains(names, mv.To) || mv.Stay == nil || mv.Reason == "" {
		t.Errorf("move %+v: want two different roster nodes, a reason and the Benefit of staying", mv)
	}
	if mv.Reason == "benefit" && mv.Benefit <= mv.Stay.Benefit() {
		t.Errorf("move %+v for benefit, but Benefit at the target %.3g is not above staying's %.3g", mv, mv.Benefit, mv.Stay.Benefit())
	}
	// The JSON form the dashboard serves names the four terms.
	b, err := json.Marshal(mv)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"s_atomic"`, `"c_rpc"`, `"c_move"`, `"c_load"`, `"kind":"move"`, `"cohort":"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("decision JSON %s lacks %s", b, k)
		}
	}
	if n := len(decisions(t, sys.Root, pid).Decisions); n > MaxDecisions {
		t.Errorf("%d decisions held, at most %d", n, MaxDecisions)
	}
}
