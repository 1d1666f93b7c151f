package owner

import "github.com/aura-runtime/aura/control"

// Owner sentinels: the memory-node lock word of a record locked through an
// owner (store reserves bit 63 for them and bit 62 for "held"):
//
//	bit 63      1 (owner sentinel, store.IsOwnerSentinel)
//	bit 62      held (store.SentinelHeld); always set in the words this
//	            package writes
//	bits 32..61 the install epoch of the granting cohort, modulo 2^30
//	bits 0..31  the cohort id, modulo 2^32
//
// The epoch and cohort fields say who holds the record (diagnostics, and a
// future repair sweep of words left held by crashed holders); correctness
// only needs the word to be non-zero and distinct from every CAS tag (bit 63
// is clear in tags). A released owner lock goes back to 0, not to a free
// sentinel: see the package documentation.
const (
	sentinelOwned = uint64(1) << 63
	sentinelHeld  = uint64(1) << 62
	epochShift    = 32
	epochMask     = (uint64(1) << 30) - 1
	cohortMask    = (uint64(1) << 32) - 1
)

// Sentinel returns the owner sentinel of cohort c at install epoch epoch,
// held or free.
func Sentinel(c control.CohortID, epoch uint64, held bool) uint64 {
	w := sentinelOwned | (epoch&epochMask)<<epochShift | uint64(c)&cohortMask
	if held {
		w |= sentinelHeld
	}
	return w
}

// SentinelEpoch returns the (30-bit) epoch field of an owner sentinel.
func SentinelEpoch(w uint64) uint64 { return w >> epochShift & epochMask }

// SentinelCohort returns the (32-bit) cohort field of an owner sentinel.
func SentinelCohort(w uint64) uint64 { return w & cohortMask }
