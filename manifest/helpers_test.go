package manifest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// randomMap returns a valid OwnerMap with up to maxCohorts cohorts of up to
// maxKGs key groups each (drawn from a space of kgSpace ids, so that they
// interleave across cohorts), owners below nodes, and up to maxWH fallback
// entries. Cohorts come out in random order.
func randomMap(rng *rand.Rand, maxCohorts, maxKGs, nodes, maxWH int, kgSpace uint64) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: rng.Uint64N(1 << 40)}
	if maxWH > 0 {
		wh := rng.IntN(maxWH + 1)
		for range wh {
			o := uint8(rng.IntN(nodes))
			if rng.IntN(8) == 0 {
				o = control.Unowned
			}
			m.Fallback = append(m.Fallback, o)
		}
	}
	used := map[uint64]bool{}
	ids := map[uint64]bool{}
	nc := 0
	if maxCohorts > 0 {
		nc = rng.IntN(maxCohorts + 1)
	}
	for range nc {
		id := rng.Uint64N(4 * uint64(maxCohorts+1))
		if rng.IntN(10) == 0 {
			id = rng.Uint64()
		}
		if ids[id] {
			continue
		}
		ids[id] = true
		k := 0
		if maxKGs > 0 {
			k = rng.IntN(maxKGs + 1)
		}
		var kgs []uint64
		for range k {
			kg := rng.Uint64N(kgSpace)
			if used[kg] {
				continue
			}
			used[kg] = true
			kgs = append(kgs, kg)
		}
		slices.Sort(kgs)
		m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: kgs}, Owner: rng.IntN(nodes)})
	}
	if err := m.Validate(); err != nil {
		panic(err)
	}
	return m
}

// gridMap returns cohorts cohorts of kgs consecutive key groups each, owners
// round-robin over nodes, and a fallback of wh entries w % nodes.
func gridMap(epoch uint64, cohorts, kgs, nodes, wh int) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch}
	for w := range wh {
		m.Fallback = append(m.Fallback, uint8(w%nodes))
	}
	for c := range cohorts {
		p := control.Placement{Cohort: control.Cohort{ID: uint64(c)}, Owner: c % nodes}
		for k := range kgs {
			p.KeyGroups = append(p.KeyGroups, uint64(c*kgs+k))
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	return m
}

// wantFormatError fails unless err is a *FormatError wrapping sentinel.
func wantFormatError(t *testing.T, err, sentinel error) *FormatError {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", sentinel)
	}
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FormatError", err, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
	return fe
}

func mustEncode(t testing.TB, m *control.OwnerMap, version int) []byte {
	t.Helper()
	b, err := Encode(m, version, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
