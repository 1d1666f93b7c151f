package cohortgen

const golden = 0x9E3779B97F4A7C15

// pairTable accumulates weights per unordered pair of cohort positions:
// open addressing with linear probing, iteration in first-insertion order
// (deterministic), cleared in O(used).
type pairTable struct {
	keys  []uint64 // lo<<32 | hi + 1; 0 = empty
	vals  []float64
	fast  []float64 // fast weights (accessgraph.Edge.Fast), same slots
	used  []int32   // slots in insertion order
	shift uint
}

func (t *pairTable) reset() {
	for _, s := range t.used {
		t.keys[s] = 0
	}
	t.used = t.used[:0]
	if t.keys == nil {
		t.init(1024)
	}
}

func (t *pairTable) init(size int) {
	oldK, oldV, oldF, oldU := t.keys, t.vals, t.fast, t.used
	t.keys = make([]uint64, size)
	t.vals = make([]float64, size)
	t.fast = make([]float64, size)
	t.used = make([]int32, 0, size/2)
	t.shift = 64
	for 1<<(64-t.shift) < size {
		t.shift--
	}
	for _, s := range oldU {
		t.insert(oldK[s], oldV[s], oldF[s])
	}
}

func (t *pairTable) insert(key uint64, w, f float64) {
	mask := uint64(len(t.keys) - 1)
	h := (key * golden) >> t.shift
	for {
		switch t.keys[h] {
		case key:
			t.vals[h] += w
			t.fast[h] += f
			return
		case 0:
			t.keys[h] = key
			t.vals[h] = w
			t.fast[h] = f
			t.used = append(t.used, int32(h))
			return
		}
		h = (h + 1) & mask
	}
}

func (t *pairTable) add(a, b int32, w, f float64) {
	if a > b {
		a, b = b, a
	}
	if 2*(len(t.used)+1) > len(t.keys) {
		t.init(2 * len(t.keys))
	}
	t.insert(uint64(a)<<32|uint64(b)+1, w, f)
}

func (t *pairTable) each(fn func(a, b int32, w, f float64)) {
	for _, s := range t.used {
		k := t.keys[s] - 1
		fn(int32(k>>32), int32(uint32(k)), t.vals[s], t.fast[s])
	}
}
