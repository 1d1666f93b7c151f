package cluster

import (
	"slices"
	"testing"
)

func TestPlannerPlacement(t *testing.T) {
	m := func(name string, roles ...string) Member { return Member{Name: name, Meta: Meta{Roles: roles}} }
	members := []Member{m("cn-3", RoleCN, RolePlanner), m("cn-10", RoleCN), m("cn-2", RoleCN, RolePlanner), m("mn-1", RoleMN)}
	for _, c := range []struct {
		order []string
		want  string
	}{
		{nil, "cn-2"},                      // lowest name with the role (cn-10 has not got it)
		{[]string{"cn-3", "cn-2"}, "cn-3"}, // the first live one of the order
		{[]string{"cn-1", "cn-2"}, "cn-2"}, // cn-1 is not live
		{[]string{"cn-10"}, ""},            // live but not a planner node
	} {
		if got := PlannerNode(members, c.order); got != c.want {
			t.Errorf("PlannerNode(order %v) = %q, want %q", c.order, got, c.want)
		}
	}
	if got := PlannerNode(nil, nil); got != "" {
		t.Errorf("no members: %q", got)
	}
	if got, want := ComputeNodes(members, []string{"cn-3", "cn-9"}), []string{"cn-3", "cn-10", "cn-2"}; !slices.Equal(got, want) {
		t.Errorf("ComputeNodes = %v, want %v", got, want)
	}
	if got, want := ComputeNodes(members, nil), []string{"cn-10", "cn-2", "cn-3"}; !slices.Equal(got, want) {
		t.Errorf("ComputeNodes = %v, want %v", got, want)
	}
}
