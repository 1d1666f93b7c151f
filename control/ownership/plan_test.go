package ownership

import (
	"testing"

	"github.com/aura-runtime/aura/control"
)

func TestPlanOwnerMap(t *testing.T) {
	p, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Tick: 1, Nodes: 2, Cohorts: []CohortStats{
		{ID: 7, KeyGroups: []control.KeyGroup{1, 2}, W: 100, HomeWeight: []float64{90, 10}},
		{ID: 3, KeyGroups: []control.KeyGroup{5}, W: 100, HomeWeight: []float64{0, 100}},
		{ID: 9, KeyGroups: []control.KeyGroup{8}, W: 1, HomeWeight: []float64{1, 0}},
	}}
	plan, err := p.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := plan.Owner(7); !ok || o != 0 {
		t.Errorf("Owner(7) = %d, %v", o, ok)
	}
	if o, ok := plan.Owner(3); !ok || o != 1 {
		t.Errorf("Owner(3) = %d, %v", o, ok)
	}
	if _, ok := plan.Owner(9); ok {
		t.Error("cold cohort 9 owned")
	}
	m := plan.OwnerMap(4, []uint8{0, 1}, in.Cohorts)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 4 || len(m.Cohorts) != 2 || m.Cohorts[0].ID != 3 || m.Cohorts[1].Owner != 0 || len(m.Cohorts[1].KeyGroups) != 2 {
		t.Errorf("OwnerMap = %+v", m)
	}
	if p.Config().MaxPublished != 1024 {
		t.Error("Config")
	}
	if NodeLeaving.String() != "leaving" || NodeState(9).String() != "NodeState(9)" {
		t.Error("NodeState.String")
	}
}
