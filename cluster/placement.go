package cluster

import "slices"

// Planner placement by membership. Every node computes it from its own view
// with the same deterministic rule, so nodes agree as soon as their views
// do (within a gossip round or two of a change); while they differ, two
// nodes may both host a planner for that long. Only the holder of the
// planner lease acts (package actors/planner), and a node's heartbeats
// find it (HeartbeatRoute).

// PlannerNode returns the node that hosts the planner in a membership view:
// with order empty, the lowest-named member advertising RolePlanner; else
// the first name of order that is a live member advertising RolePlanner
// (order is then both the preference order and the allow-list). "" when no
// live member qualifies. members need not be sorted.
func PlannerNode(members []Member, order []string) string {
	if c := PlannerCandidates(members, order); len(c) > 0 {
		return c[0]
	}
	return ""
}

// ComputeNodes lists the live members advertising RoleCN: the names of
// order first, in that order, then the others by name. The planner gives
// roster slots to nodes without one in this order, so a static order yields
// the same owner indexes as a static roster would.
func ComputeNodes(members []Member, order []string) []string {
	return computeNodes(members, order)
}

// LeavingNodes returns the compute nodes among members that announced a
// graceful leave (RoleLeaving), sorted.
func LeavingNodes(members []Member) []string {
	var out []string
	for _, m := range members {
		if m.HasRole(RoleCN) && m.HasRole(RoleLeaving) {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

func computeNodes(members []Member, order []string) []string {
	var names, rest []string
	for _, n := range order {
		i := slices.IndexFunc(members, func(m Member) bool { return m.Name == n })
		if i >= 0 && members[i].HasRole(RoleCN) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, m := range members {
		if m.HasRole(RoleCN) && !slices.Contains(order, m.Name) {
			rest = append(rest, m.Name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}
