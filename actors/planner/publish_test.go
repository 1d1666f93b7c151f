package planner

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
)

func testMap(epoch uint64, cohorts, size int, shift int) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch, Fallback: []uint8{0, 1, 2, 0}}
	for c := range cohorts {
		p := control.Placement{Cohort: control.Cohort{ID: control.CohortID(c + 1)}, Owner: (c + shift) % 3}
		for k := range size {
			p.KeyGroups = append(p.KeyGroups, control.KeyGroup(c*1000+k))
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	return m
}

func TestPushesRoundTripInAnyChunkOrder(t *testing.T) {
	m1 := testMap(1, 40, 30, 0)
	ps, err := Pushes(nil, m1, 100, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 10 {
		t.Fatalf("%d chunks for a %d-byte manifest in 100-byte chunks", len(ps), ps[0].GetTotalBytes())
	}
	a := NewAssembler(0)
	// Reverse order, with a duplicate chunk.
	var got *control.OwnerMap
	for i := len(ps) - 1; i >= 0; i-- {
		m, err := a.Offer(ps[i])
		if err != nil {
			t.Fatal(err)
		}
		if i == len(ps)-1 {
			if _, err := a.Offer(ps[i]); err != nil {
				t.Fatal(err)
			}
		}
		if m != nil {
			if i != 0 {
				t.Fatalf("installed before the last chunk arrived (chunk %d)", i)
			}
			got = m
		}
	}
	if got == nil || !manifest.Equal(got, m1) {
		t.Fatal("reassembled map differs")
	}
	// A repeated push of the installed epoch is ignored (idempotent).
	if m, err := a.Offer(ps[0]); m != nil || err != nil {
		t.Fatalf("repeated push: %v, %v", m, err)
	}
	// The next epoch travels as a delta when that is smaller.
	m2 := testMap(2, 40, 30, 0)
	m2.Cohorts[3].Owner = (m2.Cohorts[3].Owner + 1) % 3
	ds, err := Pushes(m1, m2, 100, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].GetBaseEpoch() != 1 || ds[0].GetTotalBytes() >= ps[0].GetTotalBytes() {
		t.Fatalf("one move sent as %d bytes with base %d; full is %d", ds[0].GetTotalBytes(), ds[0].GetBaseEpoch(), ps[0].GetTotalBytes())
	}
	var m *control.OwnerMap
	for _, p := range ds {
		if m, err = a.Offer(p); err != nil {
			t.Fatal(err)
		}
	}
	if m == nil || !manifest.Equal(m, m2) {
		t.Fatal("delta did not produce the next map")
	}
	// A node without the base asks for the full manifest.
	if _, err := NewAssembler(0).Offer(ds[0]); !errors.Is(err, ErrNeedFull) {
		t.Fatalf("delta on an empty node: %v, want ErrNeedFull", err)
	}
}

func TestAssemblerRefusesCorruptAndOversized(t *testing.T) {
	ps, err := Pushes(nil, testMap(1, 10, 10, 0), 1<<20, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := proto.Clone(ps[0]).(*messages.OwnerMapPush)
	bad.Manifest = append([]byte{}, bad.Manifest...)
	bad.Manifest[20] ^= 1
	if _, err := NewAssembler(0).Offer(bad); err == nil {
		t.Fatal("corrupt manifest accepted")
	}
	small := NewAssembler(64)
	if _, err := small.Offer(ps[0]); err == nil {
		t.Fatal("manifest over the cap accepted")
	}
	for _, p := range []*messages.OwnerMapPush{
		{Epoch: 1, ChunkCount: 0},
		{Epoch: 1, ChunkCount: 2, ChunkIndex: 2, TotalBytes: 10},
		{Epoch: 1, ChunkCount: 1 << 30, TotalBytes: 10},
	} {
		if _, err := NewAssembler(0).Offer(p); err == nil {
			t.Fatalf("malformed push %v accepted", p)
		}
	}
}

// FuzzAssembler offers arbitrary pushes (outside input: they arrive from the
// network) and checks the assembler never panics, never installs a map that
// fails validation, and never goes back in epoch.
func FuzzAssembler(f *testing.F) {
	ps, _ := Pushes(nil, testMap(3, 5, 4, 1), 50, "p", 1)
	for _, p := range ps {
		b, _ := proto.Marshal(p)
		f.Add(b, b)
	}
	f.Add([]byte{}, []byte{0x08, 0x01})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a := NewAssembler(1 << 16)
		for _, raw := range [][]byte{x, y, x} {
			var p messages.OwnerMapPush
			if proto.Unmarshal(raw, &p) != nil {
				continue
			}
			before := a.Installed().Epoch
			m, err := a.Offer(&p)
			if m != nil {
				if err != nil {
					t.Fatal("map and error")
				}
				if verr := m.Validate(); verr != nil {
					t.Fatalf("installed an invalid map: %v", verr)
				}
				if m.Epoch <= before {
					t.Fatalf("installed epoch %d after %d", m.Epoch, before)
				}
			}
			if a.Installed().Epoch < before {
				t.Fatal("installed epoch went back")
			}
		}
	})
}

// TestRosterTravelsWithTheMap: the roster of a push is installed with its
// map (every chunk carries it), checked against the map, and a push
// without one leaves no roster installed.
func TestRosterTravelsWithTheMap(t *testing.T) {
	m1 := testMap(1, 20, 10, 0) // owners 0..2
	roster := []string{"cn-a", "", "cn-c", "cn-b"}
	if _, err := PushesWithRoster(nil, m1, roster, 100, "p", 1); !errors.Is(err, ErrBadRoster) {
		t.Fatalf("a map naming free slot 1 was encoded: %v", err)
	}
	roster[1] = "cn-x"
	ps, err := PushesWithRoster(nil, m1, roster, 100, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAssembler(0)
	for _, p := range ps {
		if _, err := a.Offer(p); err != nil {
			t.Fatal(err)
		}
	}
	if a.Installed().Epoch != 1 || !slices.Equal(a.Roster(), roster) || a.InstalledFrom() != "p" {
		t.Fatalf("installed epoch %d roster %v from %q", a.Installed().Epoch, a.Roster(), a.InstalledFrom())
	}
	// A delta carries the whole roster too.
	m2 := testMap(2, 20, 10, 1)
	next := []string{"cn-a", "cn-x", "cn-c"}
	ds, err := PushesWithRoster(m1, m2, next, 1<<20, "p", 1)
	if err != nil || ds[0].GetBaseEpoch() != 1 {
		t.Fatalf("delta: %v base %d", err, ds[0].GetBaseEpoch())
	}
	if m, err := a.Offer(ds[0]); err != nil || m == nil || !slices.Equal(a.Roster(), next) {
		t.Fatalf("delta with roster: %v, roster %v", err, a.Roster())
	}
	// Without a roster: none installed (the node uses its static one).
	ps, _ = Pushes(nil, testMap(3, 2, 2, 0), 1<<20, "p", 1)
	if m, err := a.Offer(ps[0]); err != nil || m == nil || a.Roster() != nil {
		t.Fatalf("push without roster: %v, roster %v", err, a.Roster())
	}
}

func TestAssemblerRefusesBadRosters(t *testing.T) {
	m := testMap(1, 3, 2, 0)
	long := make([]string, control.MaxNodes)
	for i := range long {
		long[i] = fmt.Sprintf("n%d", i)
	}
	for name, roster := range map[string][]string{
		"duplicate":       {"a", "b", "a"},
		"too short":       {"a", "b"},
		"free owner slot": {"a", "", "c"},
		"too long":        long,
		"long name":       {"a", "b", string(make([]byte, MaxRosterNameLen+1))},
	} {
		ps, err := Pushes(nil, m, 1<<20, "p", 1)
		if err != nil {
			t.Fatal(err)
		}
		ps[0].Roster = roster
		if got, err := NewAssembler(0).Offer(ps[0]); got != nil || !errors.Is(err, ErrBadRoster) {
			t.Errorf("%s: installed %v, err %v", name, got, err)
		}
	}
}
