package cohortgen

const golden = 0x9E3779B97F4A7C15

// pairTable accumulates weights per unordered pair of cohort positions.
// The entries are stored densely in first-insertion order (each iterates
// them sequentially, deterministic); an open-addressing table with linear
// probing, at most half full, maps a pair to its entry. Cleared in O(used).
// It holds at most one entry per edge of the graph per Step.
type pairTable struct {
	slots   []pairSlot
	entries []pairEntry
	shift   uint
}

type pairSlot struct {
	key uint64 // lo<<32 | hi + 1; 0 = empty
	idx int32  // index in entries
}

type pairEntry struct {
	a, b int32   // a < b
	w, f float64 // decayed and fast (accessgraph.Edge.Fast) weights
	slot int32   // its slot, to clear it
}

func (t *pairTable) reset() {
	for _, e := range t.entries {
		t.slots[e.slot].key = 0
	}
	t.entries = t.entries[:0]
	if t.slots == nil {
		t.init(1024)
	}
}

func (t *pairTable) init(size int) {
	t.slots = make([]pairSlot, size)
	t.shift = 64
	for 1<<(64-t.shift) < size {
		t.shift--
	}
	mask := uint64(size - 1)
	for i := range t.entries {
		e := &t.entries[i]
		key := uint64(e.a)<<32 | uint64(e.b) + 1
		h := (key * golden) >> t.shift
		for t.slots[h].key != 0 {
			h = (h + 1) & mask
		}
		t.slots[h] = pairSlot{key, int32(i)}
		e.slot = int32(h)
	}
}

func (t *pairTable) add(a, b int32, w, f float64) {
	if a > b {
		a, b = b, a
	}
	if 2*(len(t.entries)+1) > len(t.slots) {
		t.init(2 * len(t.slots))
	}
	key := uint64(a)<<32 | uint64(b) + 1
	mask := uint64(len(t.slots) - 1)
	h := (key * golden) >> t.shift
	for {
		switch t.slots[h].key {
		case key:
			e := &t.entries[t.slots[h].idx]
			e.w += w
			e.f += f
			return
		case 0:
			t.slots[h] = pairSlot{key, int32(len(t.entries))}
			t.entries = append(t.entries, pairEntry{a: a, b: b, w: w, f: f, slot: int32(h)})
			return
		}
		h = (h + 1) & mask
	}
}

func (t *pairTable) each(fn func(a, b int32, w, f float64)) {
	for i := range t.entries {
		e := &t.entries[i]
		fn(e.a, e.b, e.w, e.f)
	}
}
