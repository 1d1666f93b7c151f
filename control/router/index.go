package router

import "math/bits"

// index maps key groups to their cohort's slot and owner: an open-addressing
// hash table with linear probing, at most half full, whose 16-byte slots
// hold everything a lookup needs, so that a lookup costs one cache line (a
// Go map costs more per lookup and twice the memory at 1M key groups).
type index struct {
	slots []slot
	shift uint // 64 − log2(len(slots))
	mask  uint64
	n     int
}

type slot struct {
	kg uint64
	// ref is the cohort's slot + 1; 0 marks an empty slot (any key group
	// value, 0 included, is a valid key).
	ref   uint32
	owner uint32
}

// newIndex returns an empty index sized for n key groups.
func newIndex(n int) index {
	if n == 0 {
		return index{}
	}
	logSize := max(3, bits.Len(uint(2*n-1))) // ≥ 2n slots: at most half full
	return index{slots: make([]slot, 1<<logSize), shift: uint(64 - logSize), mask: 1<<logSize - 1}
}

// home is where kg's probe sequence starts: the top bits of a multiplicative
// hash of kg with its high half folded in, so that key groups differing only
// in low bits (sequential ids) or only in high bits (a table tag in the top
// byte) both spread.
func (ix *index) home(kg uint64) uint64 {
	return ((kg ^ kg>>32) * 0x9E3779B97F4A7C15) >> ix.shift
}

// insert adds kg; it reports false if kg is already present.
func (ix *index) insert(kg uint64, ref uint32, owner uint32) bool {
	for i := ix.home(kg); ; i = (i + 1) & ix.mask {
		s := &ix.slots[i]
		if s.ref == 0 {
			*s = slot{kg: kg, ref: ref + 1, owner: owner}
			ix.n++
			return true
		}
		if s.kg == kg {
			return false
		}
	}
}

// find returns kg's cohort slot and owner.
func (ix *index) find(kg uint64) (ref uint32, owner uint32, ok bool) {
	if ix.n == 0 {
		return 0, 0, false
	}
	for i := ix.home(kg); ; i = (i + 1) & ix.mask {
		s := &ix.slots[i]
		if s.ref == 0 {
			return 0, 0, false
		}
		if s.kg == kg {
			return s.ref - 1, s.owner, true
		}
	}
}

// batch is how many key groups findMany looks up at once.
const batch = 16

// hit is one result of findMany.
type hit struct {
	ref, owner uint32
	ok         bool
}

// findMany looks up kgs (at most batch of them) into out. It first loads
// every key group's home slot, in a loop without data-dependent branches, so
// that the CPU overlaps their cache misses; then it resolves each lookup
// (most end at the home slot, now in cache). In a large map this costs about
// one memory latency per batch instead of one per key group.
func (ix *index) findMany(kgs []uint64, out *[batch]hit) {
	if ix.n == 0 {
		*out = [batch]hit{}
		return
	}
	var homes [batch]uint64
	var first [batch]uint64
	kgs = kgs[:min(len(kgs), batch)]
	for j, kg := range kgs {
		h := ix.home(kg)
		homes[j] = h
		first[j] = ix.slots[h].kg
	}
	for j, kg := range kgs {
		i := homes[j]
		if s := &ix.slots[i]; first[j] == kg && s.ref != 0 {
			out[j] = hit{ref: s.ref - 1, owner: s.owner, ok: true}
			continue
		}
		out[j] = hit{}
		for ; ; i = (i + 1) & ix.mask {
			s := &ix.slots[i]
			if s.ref == 0 {
				break
			}
			if s.kg == kg {
				out[j] = hit{ref: s.ref - 1, owner: s.owner, ok: true}
				break
			}
		}
	}
}
