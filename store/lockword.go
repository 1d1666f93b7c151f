package store

// Lock words. A record's lock word is 0 when free. Two kinds of holder mark it:
//
//   - A memory-node CAS lock (the fallback path): bit 63 clear, bit 62 set, the
//     holder's node in bits 40..61 and its transaction sequence in bits 0..39.
//     Taken with CAS(0 → tag), released by the commit's header WRITE.
//   - An owner sentinel (the ownership paths): bit 63 set. The owning cohort
//     and epoch are in the low bits (package actors/owner lays them out) and
//     bit 62 says whether a transaction holds the lock through the owner
//     (held, H) or not (free, S). A free sentinel stays on the slot between
//     owner grants, so later grants set it held with a plain WRITE. A CAS(0 →
//     tag) that meets a sentinel fails; the fallback path redirects, or takes
//     a free sentinel of a retired cohort activation over by CAS.
//
// A word is locked when it is a CAS tag or a held sentinel (occ.IsLocked); 0
// and free sentinels are unlocked.
const (
	ownedBit  = uint64(1) << 63
	casLocked = uint64(1) << 62
	nodeShift = 40
	nodeMask  = (uint64(1) << 22) - 1
	seqMask   = (uint64(1) << 40) - 1
)

// CASTag is the lock word a fallback CAS writes for transaction seq of node.
func CASTag(node uint32, seq uint64) uint64 {
	return casLocked | (uint64(node)&nodeMask)<<nodeShift | seq&seqMask
}

// IsOwnerSentinel reports whether a lock word is an owner sentinel.
func IsOwnerSentinel(w uint64) bool { return w&ownedBit != 0 }

// IsCASTag reports whether w is a memory-node CAS lock's tag.
func IsCASTag(w uint64) bool { return w&ownedBit == 0 && w&casLocked != 0 }

// TagNode returns the node of a CAS tag.
func TagNode(w uint64) uint32 { return uint32(w >> nodeShift & nodeMask) }

// sentinelHeld is the bit of an owner sentinel that says a transaction holds
// the record's lock through the owner.
const sentinelHeld = uint64(1) << 62

// SentinelHeld reports whether an owner sentinel marks the record as locked.
func SentinelHeld(w uint64) bool { return w&sentinelHeld != 0 }

// FreeSentinel returns the free version of owner sentinel w.
func FreeSentinel(w uint64) uint64 { return w &^ sentinelHeld }

// IsFreeSentinel reports whether w is an owner sentinel that is not held.
func IsFreeSentinel(w uint64) bool { return IsOwnerSentinel(w) && !SentinelHeld(w) }
