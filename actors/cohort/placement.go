package cohort

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// Placement says where a cohort's activation belongs.
type Placement struct {
	// Node is the membership name of the node that activates the cohort;
	// empty when no live node can (an empty roster).
	Node string
	// Epoch is the OwnerMap epoch the placement was read from (0 for a
	// placer built without a map).
	Epoch uint64
	// Mapped is true when the OwnerMap names the owner; false when the
	// cohort is placed by rendezvous hashing over the live nodes.
	Mapped bool
}

// Placer places cohort identities on nodes: the OwnerMap's owner for the
// cohorts the map holds, and rendezvous (highest-random-weight) hashing over
// the live nodes for any other identity. A Placer is immutable: build a new
// one when the map or the live set changes (PID caches keyed by the map's
// epoch are invalidated at the same moment; see PIDCache).
type Placer struct {
	epoch  uint64
	owners map[control.CohortID]string
	live   []string
	salts  []uint64
}

// NewPlacer returns the placer of map m (nil: no map) whose owner indexes
// name nodes of roster, with live the nodes rendezvous hashing may choose.
// An owner index outside the roster is an error: the map and the roster
// must come from the same publication.
func NewPlacer(m *control.OwnerMap, roster, live []string) (*Placer, error) {
	p := &Placer{owners: map[control.CohortID]string{}, live: slices.Clone(live)}
	slices.Sort(p.live)
	p.live = slices.Compact(p.live)
	p.salts = make([]uint64, len(p.live))
	for i, n := range p.live {
		p.salts[i] = nameSalt(n)
	}
	if m == nil {
		return p, nil
	}
	p.epoch = m.Epoch
	for _, c := range m.Cohorts {
		if c.Owner < 0 || c.Owner >= len(roster) {
			return nil, fmt.Errorf("cohort: placer: epoch %d: cohort %d owned by index %d, roster has %d names",
				m.Epoch, c.ID, c.Owner, len(roster))
		}
		p.owners[c.ID] = roster[c.Owner]
	}
	return p, nil
}

// Place returns where cohort id belongs. The map's owner is returned even
// when that node is not live: the map is the only authority on owned
// cohorts (a dead owner's cohorts wait for the planner's next map, never a
// second opinion), and rendezvous hashing only places identities no map
// holds.
func (p *Placer) Place(id control.CohortID) Placement {
	if n, ok := p.owners[id]; ok {
		return Placement{Node: n, Epoch: p.epoch, Mapped: true}
	}
	return Placement{Node: p.rendezvous(id), Epoch: p.epoch}
}

func (p *Placer) rendezvous(id control.CohortID) string {
	best, bestW := -1, uint64(0)
	for i, s := range p.salts {
		if w := control.Mix64(id ^ s); best < 0 || w > bestW || w == bestW && p.live[i] < p.live[best] {
			best, bestW = i, w
		}
	}
	if best < 0 {
		return ""
	}
	return p.live[best]
}

// Rendezvous returns the node of nodes that wins identity id under
// highest-random-weight hashing (empty for no nodes). Each (id, node) pair
// gets a pseudo-random weight from the node's name, so the choice depends
// only on the set of names, not their order: when a node leaves, only the
// identities it won move (≈ 1/N of them), each to its next-highest node;
// when one joins, it takes ≈ 1/(N+1). It costs one hash per node.
func Rendezvous(id control.CohortID, nodes []string) string {
	p, _ := NewPlacer(nil, nil, nodes)
	return p.rendezvous(id)
}

// nameSalt is a node's 64-bit salt: FNV-1a of its name, mixed.
func nameSalt(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return control.Mix64(h.Sum64() ^ 0x5851F42D4C957F2D)
}
