package bench

import (
	"slices"
	"testing"

	"github.com/aura-runtime/aura/control"
)

func ownerMap(epoch uint64, cohorts, perCohort int, owner func(c int) int) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch}
	for c := range cohorts {
		p := control.Placement{Cohort: control.Cohort{ID: uint64(c + 1)}, Owner: owner(c)}
		for k := range perCohort {
			p.KeyGroups = append(p.KeyGroups, uint64(c*perCohort+k))
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	return m
}

func TestSampleOwnersBoundedAndStable(t *testing.T) {
	if SampleOwners(nil, nil) != nil || SampleOwners(&control.OwnerMap{Epoch: 3}, nil) != nil {
		t.Fatal("a sample of no cohorts")
	}
	small := SampleOwners(ownerMap(1, 3, 4, func(c int) int { return c }), nil)
	if len(small.KeyGroups) != 12 || small.Epoch != 1 || small.Owner[11] != 2 {
		t.Fatalf("small map: %+v", small)
	}
	big := ownerMap(2, 1000, 10, func(c int) int { return c % 4 })
	s := SampleOwners(big, nil)
	if len(s.KeyGroups) != MaxOwnerKeyGroups || len(s.Owner) != MaxOwnerKeyGroups || !slices.IsSorted(s.KeyGroups) {
		t.Fatalf("big map: %d key groups, sorted %v", len(s.KeyGroups), slices.IsSorted(s.KeyGroups))
	}
	for i, kg := range s.KeyGroups {
		if want := int(kg/10) % 4; s.Owner[i] != want {
			t.Fatalf("key group %d: owner %d, want %d", kg, s.Owner[i], want)
		}
	}
	// The same map, the same sample.
	if again := SampleOwners(big, nil); !slices.Equal(again.KeyGroups, s.KeyGroups) {
		t.Fatal("sampling is not deterministic")
	}
	// A grown map keeps the sampled key groups that are still in a cohort.
	grown := ownerMap(3, 5000, 10, func(c int) int { return (c + 1) % 4 })
	next := SampleOwners(grown, s)
	if !slices.Equal(next.KeyGroups, s.KeyGroups) {
		t.Error("a grown map changed the sampled key groups")
	}
	// A key group that left every cohort drops out and a new one replaces it.
	shrunk := ownerMap(4, 1000, 10, func(c int) int { return c % 4 })
	gone := s.KeyGroups[0]
	for i := range shrunk.Cohorts {
		shrunk.Cohorts[i].KeyGroups = slices.DeleteFunc(shrunk.Cohorts[i].KeyGroups, func(kg uint64) bool { return kg == gone })
	}
	after := SampleOwners(shrunk, s)
	if slices.Contains(after.KeyGroups, gone) || len(after.KeyGroups) != MaxOwnerKeyGroups {
		t.Errorf("a key group in no cohort stayed sampled (or the sample shrank to %d)", len(after.KeyGroups))
	}
}

func TestNextOwnerSampleCarriesForward(t *testing.T) {
	m1 := ownerMap(1, 2, 2, func(c int) int { return c })
	var tl []Sample
	if NextOwnerSample(tl, nil) != nil {
		t.Fatal("a sample without a map")
	}
	first := NextOwnerSample(tl, m1)
	if first == nil {
		t.Fatal("no sample of the first map")
	}
	tl = append(tl, Sample{Owners: first}, Sample{})
	if NextOwnerSample(tl, m1) != nil {
		t.Error("the same epoch sampled again")
	}
	m2 := ownerMap(2, 2, 2, func(c int) int { return 1 - c })
	if s := NextOwnerSample(tl, m2); s == nil || s.Epoch != 2 || s.Owner[0] != 1 {
		t.Errorf("a new epoch: %+v", s)
	}
}
