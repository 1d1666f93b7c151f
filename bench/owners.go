package bench

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// MaxOwnerKeyGroups bounds the key groups one OwnerSample records, so that
// a timeline of a map with a million key groups stays small.
const MaxOwnerKeyGroups = 256

// OwnerSample is a bounded sample of an OwnerMap: which node owns each of
// at most MaxOwnerKeyGroups of the map's key groups. KeyGroups is sorted;
// Owner[i] is the node index owning KeyGroups[i].
//
// Which key groups: those of the previous sample that are still in one of
// the map's cohorts, then, up to the bound, the map's other key groups with
// the smallest SampleHash. A key group thus stays in the samples for as
// long as it is in a cohort, and a timeline of samples shows each sampled
// key group's owner over time; one that left every cohort (it follows the
// fallback again) drops out.
type OwnerSample struct {
	Epoch     uint64   `json:"epoch"`
	KeyGroups []uint64 `json:"key_groups"`
	Owner     []int    `json:"owner"`
}

// SampleHash is the deterministic hash ranking key groups for OwnerSample
// (a 64-bit finaliser: key groups numbered in runs spread evenly).
func SampleHash(kg uint64) uint64 { return control.Mix64(kg) }

// SampleOwners samples m after prev (nil: no previous sample); nil for a
// nil map or one with no cohorts.
func SampleOwners(m *control.OwnerMap, prev *OwnerSample) *OwnerSample {
	if m == nil || len(m.Cohorts) == 0 {
		return nil
	}
	var keep map[uint64]bool
	if prev != nil {
		keep = make(map[uint64]bool, len(prev.KeyGroups))
		for _, kg := range prev.KeyGroups {
			keep[kg] = true
		}
	}
	// A max-heap by hash keeps the MaxOwnerKeyGroups smallest newcomers in
	// O(key groups · log MaxOwnerKeyGroups), without copying the map.
	var kept []kgOwner
	h := &kgHeap{}
	for _, p := range m.Cohorts {
		for _, kg := range p.KeyGroups {
			e := kgOwner{hash: SampleHash(kg), kg: kg, owner: p.Owner}
			switch {
			case keep[kg]:
				kept = append(kept, e)
			case h.Len() < MaxOwnerKeyGroups:
				heap.Push(h, e)
			case e.hash < (*h)[0].hash:
				(*h)[0] = e
				heap.Fix(h, 0)
			}
		}
	}
	kept = kept[:min(len(kept), MaxOwnerKeyGroups)]
	if n := MaxOwnerKeyGroups - len(kept); n > 0 {
		fresh := []kgOwner(*h)
		slices.SortFunc(fresh, func(a, b kgOwner) int { return cmp.Compare(a.hash, b.hash) })
		kept = append(kept, fresh[:min(n, len(fresh))]...)
	}
	if len(kept) == 0 {
		return nil
	}
	slices.SortFunc(kept, func(a, b kgOwner) int { return cmp.Compare(a.kg, b.kg) })
	out := &OwnerSample{Epoch: m.Epoch, KeyGroups: make([]uint64, len(kept)), Owner: make([]int, len(kept))}
	for i, e := range kept {
		out.KeyGroups[i], out.Owner[i] = e.kg, e.owner
	}
	return out
}

// NextOwnerSample returns the OwnerSample a new timeline sample carries
// for map m: nil when m is nil or its epoch is that of the newest sample
// in timeline that carries one (the timeline's carry-forward rule), else
// m sampled after that one.
func NextOwnerSample(timeline []Sample, m *control.OwnerMap) *OwnerSample {
	if m == nil {
		return nil
	}
	var prev *OwnerSample
	for i := len(timeline) - 1; i >= 0 && prev == nil; i-- {
		prev = timeline[i].Owners
	}
	if prev != nil && prev.Epoch == m.Epoch {
		return nil
	}
	return SampleOwners(m, prev)
}

// publishedMap is the newest OwnerMap the cluster's nodes installed (nil
// before the first).
func (c *cluster) publishedMap() *control.OwnerMap { return c.published.Load() }

// ownerSample is the Owners field of the next timeline sample: the
// published map's sample in aura mode (the run with a planner), nil for
// the fixed maps of static and hash and for mn-only.
func (c *cluster) ownerSample(timeline []Sample) *OwnerSample {
	if c.ppid == nil {
		return nil
	}
	return NextOwnerSample(timeline, c.publishedMap())
}

type kgOwner struct {
	hash, kg uint64
	owner    int
}

// kgHeap is a max-heap of key groups by hash.
type kgHeap []kgOwner

func (h kgHeap) Len() int           { return len(h) }
func (h kgHeap) Less(i, j int) bool { return h[i].hash > h[j].hash }
func (h kgHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *kgHeap) Push(x any)        { *h = append(*h, x.(kgOwner)) }
func (h *kgHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
