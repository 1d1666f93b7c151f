package occ

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// KeyGroupFunc maps a record to its key group under the workload's rule.
type KeyGroupFunc func(txn.Ref) uint64

// Config configures an Engine.
type Config struct {
	// Node identifies this compute node in lock tags; unique per cluster,
	// below 2^22. Default 0 (fine for a single node).
	Node uint32
	// AddrCacheEntries caps the record → slot address cache that lets a
	// coordinator read or lock a known record in one round trip instead of two.
	// When full it is cleared (a bound, not an LRU: records are re-found in one
	// extra round trip). Default 1<<20 (about 64 MiB).
	AddrCacheEntries int
	// CleanupTimeout bounds how long a coordinator keeps retrying, across
	// memory-node connection loss, the write-back of a validated transaction
	// and the release of an aborted one's locks. Default 5 s: longer than a
	// memory-node reconnect, short enough that a dead memory node is reported.
	CleanupTimeout time.Duration
	// CleanupBackoff is the first pause between those retries; it doubles up
	// to a quarter of CleanupTimeout. Default 2 ms.
	CleanupBackoff time.Duration
	// ExactlyOnce makes every transaction that writes go through the commit
	// ledger (see "Exactly once" in the package documentation): one more
	// READ in its validation doorbell and one more WRITE in its write-back,
	// no atomic. It requires transaction ids to name transactions, not
	// attempts: two different transactions must never share an id (all of
	// AURA's clients number them (client << 40) | sequence). Default false
	// (the engine alone does not know how its callers number transactions);
	// compute nodes turn it on.
	ExactlyOnce bool
	// KeyGroupIndex maps a key group to its dense index, so that lock
	// requests carry the address of the key group's fence word
	// (LockRequest.Fence; the layout's store.Layout.FenceAddr). Nil, the
	// default, or a layout without fence words: requests carry none, and the
	// memory-node CAS path reads no fence. Compute nodes with an ownership
	// path set it from their workload's rule (workload.KeyGroupIndexer);
	// a node without one (mn-only) leaves it nil, since nothing fences.
	KeyGroupIndex func(kg uint64) (uint64, bool)
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{AddrCacheEntries: 1 << 20, CleanupTimeout: 5 * time.Second, CleanupBackoff: 2 * time.Millisecond}
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Node >= 1<<22 {
		errs = append(errs, fmt.Errorf("occ: Node %d must be below 2^22", c.Node))
	}
	if c.AddrCacheEntries < 0 {
		errs = append(errs, fmt.Errorf("occ: AddrCacheEntries %d must not be negative", c.AddrCacheEntries))
	}
	if c.CleanupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("occ: CleanupTimeout %v must be positive", c.CleanupTimeout))
	}
	if c.CleanupBackoff <= 0 || c.CleanupBackoff > c.CleanupTimeout {
		errs = append(errs, fmt.Errorf("occ: CleanupBackoff %v must be positive and at most CleanupTimeout", c.CleanupBackoff))
	}
	return errors.Join(errs...)
}

// Engine runs transaction programs on the tables of a store.Layout with
// FORD-style optimistic concurrency control. An Engine is shared by the
// coordinators of one compute node.
type Engine struct {
	layout *store.Layout
	locker func() Locker
	kg     KeyGroupFunc
	cfg    Config
	seq    atomic.Uint64
	cache  addrCache
	redo   *RedoLog
}

// UseRedoLog makes every commit that writes write its redo record first
// (see "Crash recovery" in the package documentation). Call it before
// creating coordinators; l must be this engine's node's (Config.Node).
func (e *Engine) UseRedoLog(l *RedoLog) error {
	if l.cfg.Node != e.cfg.Node {
		return fmt.Errorf("%w: log of node %d, engine of node %d", ErrRedo, l.cfg.Node, e.cfg.Node)
	}
	e.redo = l
	return nil
}

// NewEngine returns an engine. newLocker is called once per coordinator to get
// its lock path (a coordinator is single-threaded, so the locker may be too);
// kg may be nil when no path needs key groups.
func NewEngine(layout *store.Layout, newLocker func() Locker, kg KeyGroupFunc, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if kg == nil {
		kg = func(txn.Ref) uint64 { return 0 }
	}
	e := &Engine{layout: layout, locker: newLocker, kg: kg, cfg: cfg}
	e.cache.init(cfg.AddrCacheEntries)
	return e, nil
}

// fenceAddr is the address of key group kg's fence word, or 0.
func (e *Engine) fenceAddr(kg uint64) uint64 {
	if e.cfg.KeyGroupIndex == nil {
		return 0
	}
	i, ok := e.cfg.KeyGroupIndex(kg)
	if !ok {
		return 0
	}
	a, ok := e.layout.FenceAddr(i)
	if !ok {
		return 0
	}
	return a
}

// Layout returns the engine's table layout.
func (e *Engine) Layout() *store.Layout { return e.layout }

// addrCache maps records to slot addresses, sharded to keep coordinators of
// one node from contending on one mutex.
type addrCache struct {
	shards   [64]addrShard
	perShard int
}

type addrShard struct {
	mu sync.Mutex
	m  map[txn.Ref]uint64
}

func (c *addrCache) init(entries int) {
	c.perShard = entries / len(c.shards)
	for i := range c.shards {
		c.shards[i].m = make(map[txn.Ref]uint64)
	}
}

func (c *addrCache) shard(r txn.Ref) *addrShard {
	return &c.shards[(r.Key*0x9E3779B97F4A7C15+uint64(r.Table))>>58]
}

func (c *addrCache) get(r txn.Ref) (uint64, bool) {
	if c.perShard == 0 {
		return 0, false
	}
	s := c.shard(r)
	s.mu.Lock()
	a, ok := s.m[r]
	s.mu.Unlock()
	return a, ok
}

func (c *addrCache) put(r txn.Ref, addr uint64) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(r)
	s.mu.Lock()
	if len(s.m) >= c.perShard {
		clear(s.m)
	}
	s.m[r] = addr
	s.mu.Unlock()
}

func (c *addrCache) drop(r txn.Ref) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(r)
	s.mu.Lock()
	delete(s.m, r)
	s.mu.Unlock()
}
