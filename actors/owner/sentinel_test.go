package owner

import (
	"testing"

	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/store"
)

func TestSentinel(t *testing.T) {
	for _, tc := range []struct {
		cohort, epoch uint64
	}{{0, 0}, {1, 1}, {7, 1<<30 - 1}, {1<<40 + 5, 1<<30 + 3}} {
		free, held := Sentinel(tc.cohort, tc.epoch, false), Sentinel(tc.cohort, tc.epoch, true)
		if !store.IsOwnerSentinel(free) || !store.IsOwnerSentinel(held) {
			t.Fatalf("%+v: not sentinels: %#x %#x", tc, free, held)
		}
		if store.SentinelHeld(free) || !store.SentinelHeld(held) || occ.IsLocked(free) || !occ.IsLocked(held) {
			t.Fatalf("%+v: held bit wrong: %#x %#x", tc, free, held)
		}
		if SentinelEpoch(held) != tc.epoch%(1<<30) || SentinelCohort(held) != tc.cohort%(1<<32) {
			t.Fatalf("%+v: fields %d %d", tc, SentinelEpoch(held), SentinelCohort(held))
		}
		// A CAS tag is never mistaken for a sentinel.
		if tag := store.CASTag(1<<22-1, 1<<40-1); store.IsOwnerSentinel(tag) {
			t.Fatalf("tag %#x looks like a sentinel", tag)
		}
	}
}
