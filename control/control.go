// Package control holds the vocabulary shared by AURA's control plane: key
// groups, cohorts, owners and the OwnerMap. The control-plane logic lives in
// pure subpackages — no goroutines, clocks or I/O; time enters as explicit
// ticks — so that the planner actor, the simulator and the tests run the same
// code:
//
//   - control/accessgraph: the per-node AccessGraphProfiler and the planner's
//     aggregated, decayed global access graph;
//   - control/cohortgen: the LockCohortGenerator (merge/split with hysteresis,
//     sticky cache, Louvain refinement);
//   - control/ownership: the OwnershipPlanner (the Benefit function, greedy
//     placement under capacity, cooldowns and churn bounds);
//   - control/router: the AffinityRouter (cohort overlay, static fallback);
//   - manifest: the OwnerMap's binary wire format (v1/v2, deltas).
package control

import (
	"fmt"
	"slices"
)

// KeyGroup names a set of records of one table under a workload's rule: the
// unit of learning and ownership.
type KeyGroup = uint64

// CohortID names a cohort: a set of key groups owned, moved and routed as one.
type CohortID = uint64

// MaxNodes caps the compute nodes a cluster may have: the manifest stores an
// owner in one byte, and Unowned takes the last value.
const MaxNodes = 255

// Unowned is the owner byte of a partition or cohort no node owns.
const Unowned = 0xFF

// Cohort is a cohort's membership.
type Cohort struct {
	ID CohortID
	// KeyGroups are the cohort's key groups, sorted ascending, no duplicates.
	KeyGroups []KeyGroup
}

// Validate checks the key groups are sorted and distinct.
func (c Cohort) Validate() error {
	for i := 1; i < len(c.KeyGroups); i++ {
		if c.KeyGroups[i] <= c.KeyGroups[i-1] {
			return fmt.Errorf("control: cohort %d: key groups not sorted and distinct at %d", c.ID, i)
		}
	}
	return nil
}

// Placement is a cohort with its owner, a node index in [0, MaxNodes).
type Placement struct {
	Cohort
	Owner int
}

// OwnerMap is the published assignment of ownership at one epoch: the static
// fallback table (partition value → owner node; for TPC-C, warehouse w maps to
// Fallback[w % len(Fallback)]) and the owned cohorts. Key groups in no cohort
// follow the fallback. Epochs only grow.
type OwnerMap struct {
	Epoch    uint64
	Fallback []uint8
	Cohorts  []Placement
}

// Clone returns a deep copy.
func (m *OwnerMap) Clone() *OwnerMap {
	out := &OwnerMap{Epoch: m.Epoch, Fallback: slices.Clone(m.Fallback), Cohorts: make([]Placement, len(m.Cohorts))}
	for i, p := range m.Cohorts {
		out.Cohorts[i] = Placement{Cohort: Cohort{ID: p.ID, KeyGroups: slices.Clone(p.KeyGroups)}, Owner: p.Owner}
	}
	return out
}

// Validate checks owners are in range, cohort ids unique, and no key group is
// in two cohorts.
func (m *OwnerMap) Validate() error {
	ids := make(map[CohortID]bool, len(m.Cohorts))
	kgs := make(map[KeyGroup]CohortID)
	for _, p := range m.Cohorts {
		if ids[p.ID] {
			return fmt.Errorf("control: epoch %d: cohort %d twice", m.Epoch, p.ID)
		}
		ids[p.ID] = true
		if p.Owner < 0 || p.Owner >= MaxNodes {
			return fmt.Errorf("control: epoch %d: cohort %d owner %d out of range", m.Epoch, p.ID, p.Owner)
		}
		if err := p.Cohort.Validate(); err != nil {
			return err
		}
		for _, kg := range p.KeyGroups {
			if other, dup := kgs[kg]; dup {
				return fmt.Errorf("control: epoch %d: key group %d in cohorts %d and %d", m.Epoch, kg, other, p.ID)
			}
			kgs[kg] = p.ID
		}
	}
	return nil
}

// Mix64 is MurmurHash3's 64-bit finalizer: a bijection whose every output
// bit depends on every input bit. Rendezvous hashing (router's fallback,
// cohort placement) draws its weights from it.
func Mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xFF51AFD7ED558CCD
	x ^= x >> 33
	x *= 0xC4CEB9FE1A85EC53
	x ^= x >> 33
	return x
}
