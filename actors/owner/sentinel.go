package owner

import "github.com/aura-runtime/aura/control"

// Owner sentinels: the memory-node lock word of a slot marked by an owner
// (store reserves bit 63 for them and bit 62 for "held"):
//
//	bit 63      1 (owner sentinel, store.IsOwnerSentinel)
//	bit 62      held (store.SentinelHeld): H(c,e) when set, S(c,e) when clear
//	bits 32..61 the install epoch of the marking cohort activation, mod 2^30
//	bits 0..31  the cohort id, modulo 2^32
//
// The free sentinel S(c,e) stays on a slot between grants of activation
// (c,e): the next grant sets it held with a plain WRITE (no atomic), and the
// release stores S(c,e) again. The cohort and epoch fields say whether a
// free sentinel belongs to a live activation (who may take it over, see
// Locker.retired) and whether a held one can still be re-taken (the repair
// of gone holders' words, Locker.heldRetired). A
// sentinel is never 0 and never a CAS tag (bit 63 is clear in tags).
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
