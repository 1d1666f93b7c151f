package cohort

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control"
)

// PIDCache remembers, per (node, cohort), the PID of an activation a
// caller reached, so that later requests skip the activator's hop. Entries
// belong to one OwnerMap epoch: Invalidate with a newer epoch drops them
// all (a map change may move any cohort), Drop removes one that answered
// with a dead letter or MOVED. It is bounded (MaxEntries; past it the cache
// starts over). Safe for concurrent use.
type PIDCache struct {
	max int
	// epoch mirrors the entries' epoch for Invalidate's fast path: every
	// owner RPC calls it, and almost always with the current epoch.
	epoch atomic.Uint64
	mu    sync.RWMutex
	m     map[pidKey]*actor.PID
}

type pidKey struct {
	node string
	id   control.CohortID
}

// DefaultPIDCacheEntries is the default bound of a PIDCache: the planner
// publishes at most 1,024 cohorts, each in one place.
const DefaultPIDCacheEntries = 4096

// NewPIDCache returns an empty cache of at most maxEntries entries (≤ 0:
// DefaultPIDCacheEntries).
func NewPIDCache(maxEntries int) *PIDCache {
	if maxEntries <= 0 {
		maxEntries = DefaultPIDCacheEntries
	}
	return &PIDCache{max: maxEntries, m: map[pidKey]*actor.PID{}}
}

// Get returns the cached activation of cohort id on node reached at addr,
// or nil. An entry for another address (the node restarted elsewhere) is
// not returned.
func (c *PIDCache) Get(node, addr string, id control.CohortID) *actor.PID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p := c.m[pidKey{node, id}]
	if p == nil || p.Address != addr {
		return nil
	}
	return p
}

// Put caches the activation of cohort id on node at addr, learnt at OwnerMap
// epoch (an entry learnt under an epoch older than the cache's is ignored:
// the map it came from is gone).
func (c *PIDCache) Put(node, addr string, id control.CohortID, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch < c.epoch.Load() {
		return
	}
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[pidKey{node, id}] = actor.NewPID(addr, ActivationName(id))
}

// Drop removes the entry of cohort id on node.
func (c *PIDCache) Drop(node string, id control.CohortID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, pidKey{node, id})
}

// Invalidate drops every entry if epoch is newer than the cache's epoch,
// and makes epoch the cache's.
func (c *PIDCache) Invalidate(epoch uint64) {
	if epoch <= c.epoch.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch <= c.epoch.Load() {
		return
	}
	c.epoch.Store(epoch)
	clear(c.m)
}

// Epoch returns the epoch of the cache's entries.
func (c *PIDCache) Epoch() uint64 { return c.epoch.Load() }

// Len returns the number of entries.
func (c *PIDCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
