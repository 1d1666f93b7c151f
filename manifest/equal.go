package manifest

import (
	"slices"

	"github.com/aura-runtime/aura/control"
)

// Equal reports whether a and b are the same assignment: equal epochs,
// fallback tables and cohorts (id, owner, key groups), whatever the cohorts'
// order, with nil and empty slices alike. It is the equality that a round
// trip through Encode and Decode, or EncodeDelta and ApplyDelta, preserves.
func Equal(a, b *control.OwnerMap) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Epoch != b.Epoch || !slices.Equal(a.Fallback, b.Fallback) || len(a.Cohorts) != len(b.Cohorts) {
		return false
	}
	sorted := func(cs []control.Placement) []control.Placement {
		if slices.IsSortedFunc(cs, byID) {
			return cs
		}
		return slices.SortedFunc(slices.Values(cs), byID)
	}
	ac, bc := sorted(a.Cohorts), sorted(b.Cohorts)
	for i := range ac {
		if ac[i].ID != bc[i].ID || ac[i].Owner != bc[i].Owner || !slices.Equal(ac[i].KeyGroups, bc[i].KeyGroups) {
			return false
		}
	}
	return true
}

func byID(a, b control.Placement) int { return cmpU64(a.ID, b.ID) }
