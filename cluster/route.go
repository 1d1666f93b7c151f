package cluster

import "slices"

// PlannerCandidates lists the live members that may host the planner, in
// placement order: the first is PlannerNode(members, order), the others
// follow by the same rule (order's names, or without order by name).
func PlannerCandidates(members []Member, order []string) []string {
	var out []string
	if len(order) > 0 {
		for _, n := range order {
			i := slices.IndexFunc(members, func(m Member) bool { return m.Name == n })
			if i >= 0 && members[i].HasRole(RolePlanner) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, m := range members {
		if m.HasRole(RolePlanner) {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HeartbeatRoute chooses the planner a node sends its heartbeats to. It
// is a pure state machine: the caller gives it the candidates of its
// membership view (PlannerCandidates) and tells it how each heartbeat
// fared; it holds no clock and does no I/O.
//
// Placement alone does not make one planner act: two nodes whose views
// differ (an asymmetric partition) may each host one, and only the holder
// of the planner lease grants owner leases (package actors/planner). A
// node whose view places the planner on the idle one would get no owner
// lease, and own nothing, for as long as the views differ. So when the
// placed planner refuses for want of the planner lease, the route tries the
// next candidate, and keeps to the first one that answers otherwise: a
// grant, or a refusal for another reason (that planner acts; its reason,
// "stale map" say, passes). A candidate that does not answer, or refuses
// for want of the lease too, is passed over in turn; the round ends back at
// the placed planner. The route returns to the placed planner whenever
// placement changes.
//
// Why this is safe: a planner grants owner leases only while its planner
// lease is valid, so whichever planner answers, the grant comes from the
// one planner that acts. The route only decides whose grants the node can
// get.
type HeartbeatRoute struct {
	placed string // the first candidate when the detour was chosen
	detour string // "": heartbeats go to placed
}

// Target returns the node the next heartbeat goes to ("" when there is no
// candidate).
func (r *HeartbeatRoute) Target(candidates []string) string {
	if len(candidates) == 0 {
		r.placed, r.detour = "", ""
		return ""
	}
	if candidates[0] != r.placed {
		r.placed, r.detour = candidates[0], ""
	}
	if r.detour != "" && !slices.Contains(candidates, r.detour) {
		r.detour = ""
	}
	return r.current()
}

func (r *HeartbeatRoute) current() string {
	if r.detour != "" {
		return r.detour
	}
	return r.placed
}

// Outcome is how a heartbeat fared, as HeartbeatRoute.Observe sees it.
type Outcome uint8

const (
	// Answered: a grant, or a refusal for a reason other than the planner
	// lease. The planner that answered acts.
	Answered Outcome = iota
	// NoPlannerLease: the planner refused because it does not hold a valid
	// planner lease.
	NoPlannerLease
	// Unanswered: no answer came (no planner runs there, or it is down or
	// slow).
	Unanswered
)

// Observe records how the heartbeat sent to target fared. An outcome for
// a target the route has moved away from since is ignored (heartbeats are
// answered out of order). A placed planner that does not answer is kept:
// membership moves the planner off a node that is gone, and a node cut
// from the acting planner should lose its owner lease.
func (r *HeartbeatRoute) Observe(target string, o Outcome, candidates []string) {
	if target == "" || target != r.current() || o == Answered {
		return
	}
	if o == Unanswered && r.detour == "" {
		return
	}
	i := slices.Index(candidates, target)
	if i < 0 {
		r.detour = ""
		return
	}
	next := candidates[(i+1)%len(candidates)]
	if next == r.placed {
		next = ""
	}
	r.detour = next
}
