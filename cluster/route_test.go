package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestHeartbeatRoute runs testdata/route.txt against one route:
//
//	candidates a b c              the membership view's candidates, in order
//	target                        where the next heartbeat goes
//	observe to=b outcome=O        how the heartbeat to b fared (answered,
//	                              no-lease, unanswered); prints the target after
func TestHeartbeatRoute(t *testing.T) {
	var r HeartbeatRoute
	var cands []string
	datadriven.RunTest(t, "testdata/route.txt", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "candidates":
			cands = cands[:0]
			for _, a := range d.CmdArgs {
				cands = append(cands, a.Key)
			}
			return "ok"
		case "target":
			return fmt.Sprintf("→ %q", r.Target(cands))
		case "observe":
			var to, outcome string
			d.ScanArgs(t, "to", &to)
			d.ScanArgs(t, "outcome", &outcome)
			o, ok := map[string]Outcome{"answered": Answered, "no-lease": NoPlannerLease, "unanswered": Unanswered}[outcome]
			if !ok {
				d.Fatalf(t, "unknown outcome %q", outcome)
			}
			r.Observe(to, o, cands)
			return fmt.Sprintf("→ %q", r.Target(cands))
		default:
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		}
	})
}

// TestHeartbeatRouteFindsTheActingPlanner: whichever candidate acts, and
// whatever the idle ones answer (a refusal for want of the lease, or
// nothing), a route that starts at the placed planner reaches the acting
// one within one round of the candidates and stays there.
func TestHeartbeatRouteFindsTheActingPlanner(t *testing.T) {
	cands := []string{"cn-1", "cn-2", "cn-3", "cn-4"}
	for acting := range cands {
		for idleMask := range 1 << len(cands) {
			var r HeartbeatRoute
			got := ""
			for beat := 0; beat < 2*len(cands); beat++ {
				to := r.Target(cands)
				i := slices.Index(cands, to)
				switch {
				case i == acting:
					r.Observe(to, Answered, cands)
				case i == 0 || idleMask&(1<<i) != 0:
					r.Observe(to, NoPlannerLease, cands) // hosts an idle planner
				default:
					r.Observe(to, Unanswered, cands) // hosts none
				}
				if beat == len(cands)-1 {
					got = r.Target(cands)
				}
			}
			if want := cands[acting]; got != want || r.Target(cands) != want {
				t.Fatalf("acting %s, idle planners %04b: after a round the route is at %q (then %q)", want, idleMask, got, r.Target(cands))
			}
		}
	}
}

func TestPlannerCandidates(t *testing.T) {
	m := func(name string, roles ...string) Member { return Member{Name: name, Meta: Meta{Roles: roles}} }
	members := []Member{m("cn-3", RoleCN, RolePlanner), m("cn-10", RoleCN), m("cn-2", RoleCN, RolePlanner), m("cn-1", RolePlanner)}
	for _, c := range []struct {
		order []string
		want  string
	}{
		{nil, "cn-1 cn-2 cn-3"},
		{[]string{"cn-3", "cn-9", "cn-1", "cn-10", "cn-3"}, "cn-3 cn-1"},
	} {
		got := PlannerCandidates(members, c.order)
		if strings.Join(got, " ") != c.want {
			t.Errorf("order %v: %v, want %s", c.order, got, c.want)
		}
		if len(got) > 0 && got[0] != PlannerNode(members, c.order) {
			t.Errorf("order %v: first candidate %s, PlannerNode %s", c.order, got[0], PlannerNode(members, c.order))
		}
	}
}
