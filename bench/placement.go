package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aura-runtime/aura/actors/cohort"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// census records, while the tables load, every key group that holds
// records and the partition values of its records: the fixed OwnerMaps of
// static and hash must name every key group up front (a key group in no
// cohort falls back to MN CAS), and the workloads have no other way to list
// them. Key groups a run creates later (none for the built-in workloads:
// TPC-C's inserts land in key groups of loaded district buckets) stay on
// the fallback path. Safe for concurrent use (loaders may insert from
// several goroutines).
type census struct {
	rule workload.Rule
	mu   sync.Mutex
	// counts[kg][part] is the number of loaded records of kg in partition
	// part. A key group has one partition under every rule except TPC-C's
	// legacy encoding, whose key groups mix warehouses.
	counts map[uint64]map[uint64]uint32
	// last is the key group of the previous record, to skip the outer map
	// lookup on runs of records of one key group.
	last      uint64
	lastParts map[uint64]uint32
}

func newCensus(rule workload.Rule) *census {
	return &census{rule: rule, counts: map[uint64]map[uint64]uint32{}}
}

func (c *census) add(r txn.Ref) {
	kg, part := c.rule.KeyGroup(r), c.rule.Partition(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := c.lastParts
	if parts == nil || kg != c.last {
		parts = c.counts[kg]
		if parts == nil {
			parts = map[uint64]uint32{}
			c.counts[kg] = parts
		}
		c.last, c.lastParts = kg, parts
	}
	parts[part]++
}

// inserter wraps ins so that every loaded record is counted.
func (c *census) inserter(ins workload.Inserter) workload.Inserter {
	return censusInserter{c, ins}
}

type censusInserter struct {
	c   *census
	ins workload.Inserter
}

func (ci censusInserter) Insert(ctx context.Context, r txn.Ref, value []byte) error {
	ci.c.add(r)
	return ci.ins.Insert(ctx, r, value)
}

// discard is an Inserter that stores nothing: a census of tables loaded
// earlier (Config.SkipLoad) replays the workload's deterministic loader
// into it.
type discard struct{}

func (discard) Insert(context.Context, txn.Ref, []byte) error { return nil }

// keyGroups returns the key groups in ascending order with the partition
// holding most of each one's records (ties: the lowest value), and whether
// some key group spans several partitions (TPC-C legacy).
func (c *census) keyGroups() (kgs []uint64, part []uint64, mixed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kgs = make([]uint64, 0, len(c.counts))
	for kg := range c.counts {
		kgs = append(kgs, kg)
	}
	slices.Sort(kgs)
	part = make([]uint64, len(kgs))
	for i, kg := range kgs {
		parts := c.counts[kg]
		mixed = mixed || len(parts) > 1
		best, bestN := uint64(0), uint32(0)
		for p, n := range parts {
			if n > bestN || n == bestN && p < best {
				best, bestN = p, n
			}
		}
		part[i] = best
	}
	return kgs, part, mixed
}

// staticMap is the static mode's OwnerMap: one cohort per partition value
// (for TPC-C a warehouse: all its key groups), owned by the partition's
// static node — the simulator's static policy, where every record's lock is
// owned by its partition's node. For TPC-C the map also carries the
// fallback table warehouse → node (sim.fallbackTable). Under TPC-C's
// legacy encoding a key group holds records of every warehouse, so a key
// group goes with the warehouse holding most of its records and the other
// warehouses' records in it are granted by that owner, not their
// warehouse's node: static ownership is only as good as the key groups'
// alignment with the rule's partitions (the Lever B lesson, SPEC §5).
func staticMap(wl workload.Workload, c *census, nodes int) *control.OwnerMap {
	place := client.StaticFallback(wl, nodes)
	kgs, parts, _ := c.keyGroups()
	byPart := map[uint64][]uint64{}
	for i, kg := range kgs {
		byPart[parts[i]] = append(byPart[parts[i]], kg) // ascending: kgs is sorted
	}
	m := &control.OwnerMap{Epoch: 1}
	for i, p := range slices.Sorted(mapKeys(byPart)) {
		// Cohort ids are small and dense (not the partition value, which may
		// be a 64-bit hash): lock-word sentinels keep the id mod 2^32.
		m.Cohorts = append(m.Cohorts, control.Placement{
			Cohort: control.Cohort{ID: uint64(i) + 1, KeyGroups: byPart[p]}, Owner: place(p)})
	}
	if t, ok := wl.(*tpcc.Workload); ok {
		m.Fallback = make([]uint8, t.Config().Warehouses+1)
		for w := range m.Fallback {
			m.Fallback[w] = uint8(place(uint64(w)))
		}
	}
	return m
}

// hashMap is the hash mode's OwnerMap: one cohort per key group, the
// cohort actor placed by rendezvous hashing of its key group over the
// nodes' names (cohort.Rendezvous: the placement of identities no planner
// chose): ownership that ignores co-access, so a transaction's key groups
// land on N nodes at random.
func hashMap(c *census, names []string) *control.OwnerMap {
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	kgs, _, _ := c.keyGroups()
	m := &control.OwnerMap{Epoch: 1, Cohorts: make([]control.Placement, len(kgs))}
	for i, kg := range kgs {
		m.Cohorts[i] = control.Placement{Cohort: control.Cohort{ID: uint64(i) + 1, KeyGroups: []uint64{kg}},
			Owner: index[cohort.Rendezvous(kg, names)]}
	}
	return m
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ownedCounts returns the largest number of cohorts one node owns in m and
// the largest cohort: the owner tables' bounds must admit them.
func ownedCounts(m *control.OwnerMap, nodes int) (perNode, kgsPerCohort int) {
	n := make([]int, nodes)
	for _, p := range m.Cohorts {
		if p.Owner >= 0 && p.Owner < nodes {
			n[p.Owner]++
		}
		kgsPerCohort = max(kgsPerCohort, len(p.KeyGroups))
	}
	for _, x := range n {
		perNode = max(perNode, x)
	}
	return perNode, kgsPerCohort
}

// checkMap refuses a map the nodes could not install, with the reason.
func checkMap(m *control.OwnerMap, nodes int) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, p := range m.Cohorts {
		if p.Owner >= nodes {
			return fmt.Errorf("bench: cohort %d owned by node %d of %d", p.ID, p.Owner, nodes)
		}
	}
	return nil
}
