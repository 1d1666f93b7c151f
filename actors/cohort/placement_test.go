package cohort

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aura-runtime/aura/control"
)

func TestPlacerPrefersTheMapAndHashesTheRest(t *testing.T) {
	m := &control.OwnerMap{Epoch: 9, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 1, KeyGroups: []control.KeyGroup{10}}, Owner: 2},
		{Cohort: control.Cohort{ID: 2, KeyGroups: []control.KeyGroup{11}}, Owner: 0}}}
	roster := []string{"cn-a", "cn-b", "cn-c"}
	// cn-c is not live: the map still names it (the planner, not a
	// second opinion, re-places a dead owner's cohorts).
	p, err := NewPlacer(m, roster, []string{"cn-b", "cn-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Place(1); got != (Placement{Node: "cn-c", Epoch: 9, Mapped: true}) {
		t.Fatalf("cohort 1: %+v", got)
	}
	if got := p.Place(2); got != (Placement{Node: "cn-a", Epoch: 9, Mapped: true}) {
		t.Fatalf("cohort 2: %+v", got)
	}
	got := p.Place(3)
	if got.Mapped || got.Epoch != 9 || got.Node != Rendezvous(3, []string{"cn-a", "cn-b"}) {
		t.Fatalf("unmapped cohort 3: %+v", got)
	}
	if _, err := NewPlacer(m, roster[:2], nil); err == nil {
		t.Fatal("a map whose owner index is outside the roster was accepted")
	}
	empty, _ := NewPlacer(nil, nil, nil)
	if got := empty.Place(1); got.Node != "" || got.Mapped {
		t.Fatalf("no live nodes: %+v", got)
	}
}

func TestRendezvousSpreadsEvenlyAndMovesLittle(t *testing.T) {
	nodes := []string{"cn-1", "cn-2", "cn-3", "cn-4"}
	const ids = 20000
	count := map[string]int{}
	before := make([]string, ids)
	for id := range ids {
		before[id] = Rendezvous(control.CohortID(id+1), nodes)
		count[before[id]]++
	}
	for _, n := range nodes {
		// ±10% of the fair share: a binomial deviation this large has
		// probability far below 1e-9 for a good hash.
		if c := count[n]; c < ids/4*9/10 || c > ids/4*11/10 {
			t.Fatalf("%s wins %d of %d identities: %v", n, c, ids, count)
		}
	}
	// The order of the names does not matter.
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	for id := range 1000 {
		if a, b := Rendezvous(control.CohortID(id+1), nodes), Rendezvous(control.CohortID(id+1), rev); a != b {
			t.Fatalf("identity %d: %s vs %s by name order", id+1, a, b)
		}
	}
	// cn-3 leaves: only its identities move, and they spread over the rest.
	left := []string{"cn-1", "cn-2", "cn-4"}
	moved := map[string]int{}
	for id := range ids {
		after := Rendezvous(control.CohortID(id+1), left)
		if before[id] != "cn-3" && after != before[id] {
			t.Fatalf("identity %d moved from %s to %s though %s stayed", id+1, before[id], after, before[id])
		}
		if before[id] == "cn-3" {
			moved[after]++
		}
	}
	for _, n := range left {
		if moved[n] < count["cn-3"]/3*8/10 {
			t.Fatalf("cn-3's identities went %v: uneven", moved)
		}
	}
	// cn-5 joins: it takes about 1/5, from everyone.
	grown := append(slices.Clone(nodes), "cn-5")
	took := 0
	for id := range ids {
		after := Rendezvous(control.CohortID(id+1), grown)
		if after != before[id] && after != "cn-5" {
			t.Fatalf("identity %d moved from %s to %s on a join", id+1, before[id], after)
		}
		if after == "cn-5" {
			took++
		}
	}
	if took < ids/5*9/10 || took > ids/5*11/10 {
		t.Fatalf("the joining node took %d of %d", took, ids)
	}
}

func TestActivationNames(t *testing.T) {
	for _, id := range []control.CohortID{0, 1, 1 << 40, ^control.CohortID(0)} {
		got, ok := ParseActivationName(ActivationName(id))
		if !ok || got != id {
			t.Fatalf("%d → %q → %d, %v", id, ActivationName(id), got, ok)
		}
	}
	for _, bad := range []string{"", "cohorts", "cohorts/", "cohorts/c", "cohorts/cx", "owner/c1", "cohorts/c-1", fmt.Sprint("cohorts/c", "18446744073709551616")} {
		if _, ok := ParseActivationName(bad); ok {
			t.Fatalf("%q parsed as an activation name", bad)
		}
	}
}

func TestPIDCacheFollowsTheMapEpoch(t *testing.T) {
	c := NewPIDCache(3)
	c.Invalidate(5)
	c.Put("b", "127.0.0.1:1", 7, 5)
	if p := c.Get("b", "127.0.0.1:1", 7); p == nil || p.Id != ActivationName(7) || p.Address != "127.0.0.1:1" {
		t.Fatalf("cached PID %v", p)
	}
	// The node came back at another address: the entry is not used.
	if p := c.Get("b", "127.0.0.1:2", 7); p != nil {
		t.Fatalf("entry of an old address returned: %v", p)
	}
	// Learnt under an older map: ignored.
	c.Put("b", "127.0.0.1:1", 8, 4)
	if c.Get("b", "127.0.0.1:1", 8) != nil {
		t.Fatal("an entry of an older epoch was cached")
	}
	// The same or an older epoch keeps the entries; a newer one drops them.
	c.Invalidate(5)
	c.Invalidate(3)
	if c.Len() != 1 || c.Epoch() != 5 {
		t.Fatalf("len %d epoch %d after non-advancing invalidations", c.Len(), c.Epoch())
	}
	c.Invalidate(6)
	if c.Len() != 0 || c.Epoch() != 6 {
		t.Fatalf("len %d epoch %d after a newer map", c.Len(), c.Epoch())
	}
	// Bounded: the fourth entry starts the cache over.
	for id := range control.CohortID(4) {
		c.Put("b", "a:1", id, 6)
	}
	if c.Len() > 3 {
		t.Fatalf("%d entries in a cache of 3", c.Len())
	}
	c.Drop("b", 3)
	if c.Get("b", "a:1", 3) != nil {
		t.Fatal("dropped entry still cached")
	}
}
