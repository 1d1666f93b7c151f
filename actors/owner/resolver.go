package owner

import (
	"context"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/control"
)

// MapResolver is a Resolver over control.OwnerMap values: owner node i of
// the map is Names[i]. Key groups in no cohort route to the MN CAS path (the
// map's warehouse fallback table decides routing of transactions, not lock
// paths). Safe for concurrent use.
type MapResolver struct {
	self  string
	names []string
	fetch func(ctx context.Context) (*control.OwnerMap, error)

	mu        sync.RWMutex
	installed bool
	epoch     uint64
	kgs       map[control.KeyGroup]placement
	cohorts   map[control.CohortID]int // owner index
}

type placement struct {
	cohort control.CohortID
	owner  int
}

// NewMapResolver returns a resolver for node self. fetch, if not nil, is
// called by Refresh to get a newer map (for example from the OwnerMap
// subscription); Update installs maps pushed to the node.
func NewMapResolver(self string, names []string, fetch func(ctx context.Context) (*control.OwnerMap, error)) *MapResolver {
	return &MapResolver{self: self, names: names, fetch: fetch, kgs: map[control.KeyGroup]placement{}}
}

// Update installs m if it is newer than the current map (epochs only grow;
// an older or equal epoch is ignored).
func (r *MapResolver) Update(m *control.OwnerMap) error {
	if err := m.Validate(); err != nil {
		return err
	}
	kgs := make(map[control.KeyGroup]placement)
	cohorts := make(map[control.CohortID]int, len(m.Cohorts))
	for _, p := range m.Cohorts {
		cohorts[p.ID] = p.Owner
		if p.Owner >= len(r.names) {
			return fmt.Errorf("owner: epoch %d: cohort %d owner %d has no name", m.Epoch, p.ID, p.Owner)
		}
		for _, kg := range p.KeyGroups {
			kgs[kg] = placement{cohort: p.ID, owner: p.Owner}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.installed && m.Epoch <= r.epoch {
		return nil
	}
	r.installed, r.epoch, r.kgs, r.cohorts = true, m.Epoch, kgs, cohorts
	return nil
}

// CohortOwned implements CohortResolver.
func (r *MapResolver) CohortOwned(c control.CohortID) (bool, uint64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.cohorts[c]
	return ok, r.epoch
}

// CohortOwner implements CohortPlacer.
func (r *MapResolver) CohortOwner(c control.CohortID) (string, bool, uint64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i, ok := r.cohorts[c]
	if !ok {
		return "", false, r.epoch
	}
	return r.names[i], true, r.epoch
}

// Epoch returns the installed map's epoch.
func (r *MapResolver) Epoch() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.epoch
}

// Resolve implements Resolver.
func (r *MapResolver) Resolve(kg control.KeyGroup) Route {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.kgs[kg]
	if !ok {
		return Route{Epoch: r.epoch}
	}
	name := r.names[p.owner]
	return Route{Owned: true, Cohort: p.cohort, Owner: name, Local: name == r.self, Epoch: r.epoch}
}

// Refresh implements Resolver.
func (r *MapResolver) Refresh(ctx context.Context, atLeast uint64) {
	if r.fetch == nil || r.Epoch() >= atLeast {
		return
	}
	if m, err := r.fetch(ctx); err == nil && m != nil {
		_ = r.Update(m)
	}
}
