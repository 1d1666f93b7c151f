package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const accounts txn.TableID = 1

var bankSchema = txn.Schema{Tables: []txn.Table{{ID: accounts, Name: "accounts", ValueSize: 8, Capacity: 1024}}}

// memTransport connects the nodes' services in memory; messages are cloned
// both ways, as a wire would. failEvery > 0 drops every failEvery-th call
// (before or after it ran, alternately) to exercise retries.
type memTransport struct {
	mu        sync.Mutex
	nodes     map[string]*Service
	calls     int
	failEvery int
	locks     atomic.Uint64
}

var errDropped = errors.New("memTransport: dropped")

func (m *memTransport) service(node string) (*Service, bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	drop := m.failEvery > 0 && m.calls%m.failEvery == 0
	s, ok := m.nodes[node]
	return s, ok, drop
}

func (m *memTransport) Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	s, ok, drop := m.service(node)
	if !ok {
		return nil, fmt.Errorf("no node %q", node)
	}
	if drop && req.GetRequestId()%2 == 0 {
		return nil, errDropped // lost before it ran
	}
	m.locks.Add(1)
	rep := s.HandleLock(proto.Clone(req).(*messages.LockRequest))
	if drop {
		return nil, errDropped // ran, reply lost
	}
	return proto.Clone(rep).(*messages.LockReply), ctx.Err()
}

func (m *memTransport) Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	s, ok, _ := m.service(node)
	if !ok {
		return nil, fmt.Errorf("no node %q", node)
	}
	return proto.Clone(s.HandleUnlock(proto.Clone(req).(*messages.UnlockRequest))).(*messages.UnlockReply), ctx.Err()
}

// cluster is N compute nodes on one memory node: each with an owner table,
// a resolver, and an occ engine whose lockers are owner Lockers over an MN
// CAS fallback.
type cluster struct {
	t         testing.TB
	mem       *rdma.MemDevice // the memory node, for checks
	dev       rdma.Device     // what the nodes use (mem, or mem behind a fault injector)
	layout    *store.Layout
	tr        *memTransport
	names     []string
	nodes     []*Node
	tables    []*Service
	resolvers []*MapResolver
	engines   []*occ.Engine
	published atomic.Pointer[control.OwnerMap]
	qpMu      sync.Mutex
	qps       []rdma.QueuePair
}

func kgOf(r txn.Ref) uint64 { return r.Key % 8 }

func newCluster(t testing.TB, n int, m *control.OwnerMap) *cluster {
	return newClusterOn(t, n, m, func(d rdma.Device) rdma.Device { return d })
}

// newClusterOn builds the cluster on the memory device wrapped by wrap.
func newClusterOn(t testing.TB, n int, m *control.OwnerMap, wrap func(rdma.Device) rdma.Device) *cluster {
	return newClusterWith(t, n, m, wrap, false)
}

// fencedSchema is bankSchema with a fence word per key group (kgOf) and
// its buckets partitioned by key group, as the workloads' schemas are.
var fencedSchema = txn.Schema{Tables: []txn.Table{{ID: accounts, Name: "accounts", ValueSize: 8, Capacity: 1024,
	Partitions: 8, Partition: func(key uint64) uint64 { return key % 8 }}}, KeyGroupFences: 8}

// fenceStats sums the nodes' key-group fence counters.
func (c *cluster) fenceStats() (claims, fencedWrites, refusals, unfenced uint64) {
	for _, n := range c.nodes {
		claims += n.Stats.FenceClaims.Load()
		fencedWrites += n.Stats.FencedWrites.Load()
		refusals += n.Stats.FenceRefusals.Load()
		unfenced += n.Stats.Unfenced.Load()
	}
	return
}

// bothLayouts runs test on a cluster without key-group fences and on one
// with them (newClusterWith).
func bothLayouts(t *testing.T, test func(t *testing.T, fenced bool)) {
	t.Run("plain", func(t *testing.T) { test(t, false) })
	t.Run("fenced", func(t *testing.T) { test(t, true) })
}

// newClusterWith builds the cluster on the memory device wrapped by wrap
// (nil: unwrapped); fenced gives the layout key-group fences
// (fencedSchema), and each node a sweeper giving back fences every 2 ms.
func newClusterWith(t testing.TB, n int, m *control.OwnerMap, wrap func(rdma.Device) rdma.Device, fenced bool) *cluster {
	t.Helper()
	if wrap == nil {
		wrap = func(d rdma.Device) rdma.Device { return d }
	}
	schema, index := bankSchema, func(uint64) (uint64, bool) { return 0, false }
	if fenced {
		schema, index = fencedSchema, func(kg uint64) (uint64, bool) { return kg, kg < 8 }
	}
	mem, err := rdma.NewMemDevice(rdma.NewMemory(64<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dev := wrap(mem)
	c := &cluster{t: t, mem: mem, dev: dev, tr: &memTransport{nodes: map[string]*Service{}}}
	t.Cleanup(func() {
		c.qpMu.Lock()
		for _, qp := range c.qps {
			qp.Close()
		}
		c.qpMu.Unlock()
		dev.Close()
		mem.Close()
	})
	if c.layout, err = store.Create(context.Background(), dev, schema); err != nil {
		t.Fatal(err)
	}
	c.published.Store(m)
	start := time.Now()
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("cn-%d", i))
	}
	for i := range n {
		tb, err := NewTable(Config{DrainDeadlineMicros: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		svc := NewService(tb, func() int64 { return time.Since(start).Microseconds() })
		c.tr.nodes[c.names[i]] = svc
		res := NewMapResolver(c.names[i], c.names, func(context.Context) (*control.OwnerMap, error) { return c.published.Load(), nil })
		if err := res.Update(m); err != nil {
			t.Fatal(err)
		}
		node, err := NewNode(NodeConfig{Self: c.names[i]}, svc, res, c.tr)
		if err != nil {
			t.Fatal(err)
		}
		e, err := occ.NewEngine(c.layout, func() occ.Locker {
			return node.NewLocker(c.qp(), occ.NewCASLocker(c.qp()))
		}, kgOf, occ.Config{Node: uint32(i + 1), AddrCacheEntries: 1 << 12, CleanupTimeout: 5 * time.Second, CleanupBackoff: time.Millisecond,
			KeyGroupIndex: index})
		if err != nil {
			t.Fatal(err)
		}
		c.tables, c.resolvers, c.nodes, c.engines = append(c.tables, svc), append(c.resolvers, res), append(c.nodes, node), append(c.engines, e)
	}
	for _, p := range m.Cohorts {
		if err := c.tables[p.Owner].Do(func(t *Table) error { return t.Install(p.ID, p.KeyGroups, m.Epoch) }); err != nil {
			t.Fatal(err)
		}
	}
	if fenced {
		stop, done := make(chan struct{}), make(chan struct{})
		qps := make([]rdma.QueuePair, len(c.nodes))
		for i := range qps {
			qps[i] = c.qp()
		}
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				for i, node := range c.nodes {
					node.Unfence(context.Background(), qps[i], 64)
				}
			}
		}()
		// Registered after the device's cleanup, so it runs before it.
		t.Cleanup(func() { close(stop); <-done })
	}
	return c
}

func (c *cluster) qp() rdma.QueuePair {
	qp, err := c.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.qpMu.Lock()
	c.qps = append(c.qps, qp)
	c.qpMu.Unlock()
	return qp
}

// checkQP is a queue pair on the memory node itself, without faults.
func (c *cluster) checkQP() rdma.QueuePair {
	qp, err := c.mem.CreateQP(rdma.QPConfig{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.qpMu.Lock()
	c.qps = append(c.qps, qp)
	c.qpMu.Unlock()
	return qp
}

func (c *cluster) coordinator(node int) *occ.Coordinator {
	return c.engines[node].NewCoordinator(c.qp())
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func acct(k uint64) txn.Ref { return txn.Ref{Table: accounts, Key: k} }

// mustRun runs prog until it commits (aborts are retried, as a client does).
func mustRun(t testing.TB, co *occ.Coordinator, prog txn.Program) occ.Result {
	t.Helper()
	for attempt := 0; ; attempt++ {
		r := co.Run(context.Background(), 1, prog)
		if r.Outcome == occ.Committed {
			return r
		}
		if r.Outcome != occ.Aborted || attempt > 1000 {
			t.Fatalf("outcome %v: %v", r.Outcome, r.Err)
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
}

// lockWord reads a record's lock word.
func (c *cluster) lockWord(t testing.TB, k uint64) uint64 {
	t.Helper()
	tl, _ := c.layout.Table(accounts)
	qp := c.checkQP()
	for _, b := range []uint64{0, 1} {
		b1, b2 := tl.CandidateBuckets(k)
		bucket := []uint64{b1, b2}[b]
		buf := make([]byte, tl.BucketSize)
		cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(bucket), Local: buf})
		if err != nil || rdma.FirstError(cs) != nil {
			t.Fatal(err, rdma.FirstError(cs))
		}
		for s := range store.SlotsPerBucket {
			slot := tl.DecodeSlot(buf[uint64(s)*tl.SlotSize:])
			if slot.Meta.Present() && slot.Key == k {
				return slot.Lock
			}
		}
	}
	t.Fatalf("account %d not found", k)
	return 0
}

// setLockWord overwrites a record's lock word.
func (c *cluster) setLockWord(t testing.TB, k uint64, w uint64) {
	t.Helper()
	tl, _ := c.layout.Table(accounts)
	qp := c.checkQP()
	b1, b2 := tl.CandidateBuckets(k)
	for _, b := range []uint64{b1, b2} {
		buf := make([]byte, tl.BucketSize)
		cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b), Local: buf})
		if err != nil || rdma.FirstError(cs) != nil {
			t.Fatal(err, rdma.FirstError(cs))
		}
		for s := range store.SlotsPerBucket {
			slot := tl.DecodeSlot(buf[uint64(s)*tl.SlotSize:])
			if slot.Meta.Present() && slot.Key == k {
				cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: tl.Region.RKey,
					RemoteAddr: tl.SlotAddr(b, s) + store.LockOffset, Local: binary.LittleEndian.AppendUint64(nil, w)})
				if err != nil || rdma.FirstError(cs) != nil {
					t.Fatal(err, rdma.FirstError(cs))
				}
				return
			}
		}
	}
	t.Fatalf("account %d not found", k)
}

// allLockWords returns the lock words of every slot of the accounts table.
func (c *cluster) allLockWords(t testing.TB) []uint64 {
	tl, _ := c.layout.Table(accounts)
	qp := c.checkQP()
	buf := make([]byte, tl.Buckets*tl.BucketSize)
	for off := uint64(0); off < uint64(len(buf)); off += rdma.MaxTransferBytes {
		end := min(off+rdma.MaxTransferBytes, uint64(len(buf)))
		cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.Region.Addr + off, Local: buf[off:end]})
		if err != nil || rdma.FirstError(cs) != nil {
			t.Fatal(err, rdma.FirstError(cs))
		}
	}
	var out []uint64
	for off := uint64(0); off < uint64(len(buf)); off += tl.SlotSize {
		out = append(out, tl.DecodeSlot(buf[off:]).Lock)
	}
	return out
}

// threeNodeMap: cohort 1 (kgs 0, 1) on cn-0, cohort 2 (kgs 2, 3) on cn-1,
// kgs 4..7 unowned (MN CAS).
func threeNodeMap(epoch uint64) *control.OwnerMap {
	return &control.OwnerMap{Epoch: epoch, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{0, 1}}, Owner: 0},
		{Cohort: control.Cohort{ID: 2, KeyGroups: []uint64{2, 3}}, Owner: 1},
	}}
}

func TestLockerPaths(t *testing.T) {
	c := newCluster(t, 3, threeNodeMap(1))
	co0, co1 := c.coordinator(0), c.coordinator(1)
	for k := range uint64(8) {
		mustRun(t, co0, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	// On cn-0: key 0 (cohort 1) is LOCAL, key 2 (cohort 2) is an owner RPC
	// to cn-1, key 4 is MN CAS. While the locks are held the owner-path lock
	// words carry the held sentinel of their cohort and install epoch.
	var r occ.Result
	r = mustRun(t, co0, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdateMany([]txn.Ref{acct(0), acct(2), acct(4)}); err != nil {
			return err
		}
		if w := c.lockWord(t, 0); w != Sentinel(1, 1, true) {
			t.Errorf("key 0 lock word %#x, want held sentinel %#x", w, Sentinel(1, 1, true))
		}
		if w := c.lockWord(t, 2); w != Sentinel(2, 1, true) {
			t.Errorf("key 2 lock word %#x, want held sentinel", w)
		}
		if w := c.lockWord(t, 4); store.IsOwnerSentinel(w) || w == 0 {
			t.Errorf("key 4 lock word %#x, want a CAS tag", w)
		}
		// A transaction on cn-1 meets each of them, whatever path: a lock
		// conflict, and a plain read sees the lock too (OCC readers check
		// lock words; an owner lock kept only in its table would let two
		// crossed read-one-write-the-other transactions both commit).
		for _, k := range []uint64{0, 2, 4} {
			for _, read := range []bool{false, true} {
				inner := c.coordinator(1).Run(context.Background(), 2, func(tx txn.Tx) error {
					if read {
						_, err := tx.Get(acct(k))
						return err
					}
					_, err := tx.GetForUpdate(acct(k))
					return err
				})
				if inner.Outcome != occ.Aborted || !errors.Is(inner.Err, txn.ErrConflict) {
					t.Errorf("key %d (read %v): inner transaction %v (%v), want a conflict", k, read, inner.Outcome, inner.Err)
				}
			}
		}
		if err := tx.Put(acct(0), u64(90)); err != nil {
			return err
		}
		return tx.Put(acct(2), u64(110))
	})
	if r.Counters.LocksLocal != 1 || r.Counters.LocksOwnerRPC != 1 || r.Counters.LocksMNCAS != 1 {
		t.Fatalf("counters %+v", r.Counters)
	}
	// Released: owner-path lock words are back to their cohort's free
	// sentinel (the next grant at this epoch sets them held by WRITE), the
	// MN CAS word to 0, and both owner tables are empty.
	if w := c.lockWord(t, 0); w != Sentinel(1, 1, false) {
		t.Fatalf("key 0 after commit: %#x", w)
	}
	if w := c.lockWord(t, 2); w != Sentinel(2, 1, false) {
		t.Fatalf("key 2 after commit: %#x", w)
	}
	if w := c.lockWord(t, 4); w != 0 {
		t.Fatalf("key 4 after commit: %#x", w)
	}
	for i, s := range c.tables {
		s.Do(func(t2 *Table) error {
			if t2.Locks() != 0 {
				t.Errorf("cn-%d table holds %d locks after commit", i, t2.Locks())
			}
			return nil
		})
	}
	// The MN CAS path cannot take a record an owner's holder holds: a stale
	// node that believes key 0 unowned meets the held sentinel and is
	// refused (redirected).
	stale := NewMapResolver("cn-2", c.names, nil)
	if err := stale.Update(&control.OwnerMap{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	staleNode, _ := NewNode(NodeConfig{Self: "cn-2"}, nil, stale, c.tr)
	e, _ := occ.NewEngine(c.layout, func() occ.Locker { return staleNode.NewLocker(c.qp(), occ.NewCASLocker(c.qp())) }, kgOf,
		occ.Config{Node: 9, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond})
	var sr occ.Result
	mustRun(t, co0, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(acct(0)); err != nil {
			return err
		}
		sr = e.NewCoordinator(c.qp()).Run(context.Background(), 3, func(tx txn.Tx) error {
			_, err := tx.GetForUpdate(acct(0))
			return err
		})
		return nil
	})
	if sr.Outcome != occ.Aborted || sr.Counters.Redirects != 1 {
		t.Fatalf("stale MN CAS on an owner-held record: %v %+v", sr.Outcome, sr.Counters)
	}
	// Conversely, a record that a stale MN CAS locker holds is refused to
	// the owner path: the lock word decides.
	r = co1.Run(context.Background(), 4, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(acct(3)); err != nil { // key 3: cohort 2, cn-1 LOCAL
			return err
		}
		return tx.Put(acct(3), u64(5))
	})
	if r.Outcome != occ.Committed {
		t.Fatalf("local lock of key 3: %v", r.Err)
	}
	staleCo := e.NewCoordinator(c.qp())
	mustRun(t, staleCo, func(tx txn.Tx) error { return tx.Insert(acct(9), u64(100)) })
	if w := c.lockWord(t, 9); w != 0 {
		t.Fatalf("key 9 inserted by MN CAS: lock word %#x", w)
	}
	var innerOut occ.Result
	sr = staleCo.Run(context.Background(), 5, func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(acct(9)); err != nil { // stale: MN CAS on a never-marked record of cohort 1
			return err
		}
		innerOut = co0.Run(context.Background(), 6, func(tx txn.Tx) error {
			_, err := tx.GetForUpdate(acct(9))
			return err
		})
		return nil
	})
	if sr.Outcome != occ.Committed || innerOut.Outcome != occ.Aborted || innerOut.Counters.MNCASFailed == 0 {
		t.Fatalf("owner path over an MN CAS holder: outer %v (%v), inner %v (%v) %+v", sr.Outcome, sr.Err, innerOut.Outcome, innerOut.Err, innerOut.Counters)
	}
	mustRun(t, co0, func(tx txn.Tx) error {
		_, err := tx.GetForUpdate(acct(9))
		return err
	})
	if w := c.lockWord(t, 9); w != Sentinel(1, 1, false) {
		t.Fatalf("key 9 after the owner took it: %#x", w)
	}
}

func TestLockerMoved(t *testing.T) { bothLayouts(t, testLockerMoved) }

func testLockerMoved(t *testing.T, fenced bool) {
	c := newClusterWith(t, 3, threeNodeMap(1), nil, fenced)
	co := []*occ.Coordinator{c.coordinator(0), c.coordinator(1), c.coordinator(2)}
	for k := range uint64(8) {
		mustRun(t, co[0], func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	write := func(node int, k uint64) occ.Result {
		return mustRun(t, co[node], func(tx txn.Tx) error {
			v, err := tx.GetForUpdate(acct(k))
			if err != nil {
				return err
			}
			return tx.Put(acct(k), u64(binary.LittleEndian.Uint64(v)+1))
		})
	}
	if r := write(2, 0); r.Counters.LocksOwnerRPC != 1 {
		t.Fatalf("epoch 1: %+v", r.Counters)
	}
	// Move cohort 1 from cn-0 to cn-1 at epoch 2 (freeze, drain, handoff,
	// publish, retire). Only cn-1 is told; cn-2 still routes by epoch 1.
	migrate(t, c, 1, []control.KeyGroup{0, 1}, 0, 1, 1, 2)
	m2 := threeNodeMap(2)
	m2.Cohorts[0].Owner = 1
	c.published.Store(m2)
	if err := c.resolvers[1].Update(m2); err != nil {
		t.Fatal(err)
	}
	r := write(2, 0) // cn-2 asks cn-0, gets MOVED(cn-1, 2), refreshes, and asks cn-1
	if r.Counters.LocksOwnerRPC != 1 || c.resolvers[2].Epoch() != 2 {
		t.Fatalf("after MOVED: %+v, cn-2 at epoch %d", r.Counters, c.resolvers[2].Epoch())
	}
	if r = write(1, 0); r.Counters.LocksLocal != 1 {
		t.Fatalf("new owner: %+v", r.Counters)
	}
	// cn-0 learns nothing by push: its own table answers MOVED for its
	// retired cohort, and it follows the redirect to cn-1.
	if r = write(0, 1); r.Counters.LocksOwnerRPC != 1 || c.resolvers[0].Epoch() != 2 {
		t.Fatalf("old owner after MOVED: %+v", r.Counters)
	}
	// Evict cohort 1 at epoch 3 (moved to nobody): its records go back to
	// the MN CAS path, learned from MOVED("", 3).
	migrate(t, c, 1, []control.KeyGroup{0, 1}, 1, -1, 2, 3)
	m3 := threeNodeMap(3)
	m3.Cohorts = m3.Cohorts[1:]
	c.published.Store(m3)
	if r = write(2, 0); r.Counters.LocksMNCAS != 1 {
		t.Fatalf("eviction: %+v", r.Counters)
	}
	// With no way to refresh, MOVED is followed only MaxRedirects times.
	stuck := NewMapResolver("cn-2", c.names, nil)
	if err := stuck.Update(threeNodeMap(1)); err != nil {
		t.Fatal(err)
	}
	node, _ := NewNode(NodeConfig{Self: "cn-2", MaxRedirects: 2}, nil, stuck, &loopTransport{})
	e, _ := occ.NewEngine(c.layout, func() occ.Locker { return node.NewLocker(c.qp(), occ.NewCASLocker(c.qp())) }, kgOf,
		occ.Config{Node: 9, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond})
	r = e.NewCoordinator(c.qp()).Run(context.Background(), 7, func(tx txn.Tx) error {
		_, err := tx.GetForUpdate(acct(2))
		return err
	})
	if r.Outcome != occ.Aborted || r.Counters.Redirects != 1 {
		t.Fatalf("redirect loop: %v %+v", r.Outcome, r.Counters)
	}
	total := bankTotal(t, co[0], 8)
	if total != 800+5 {
		t.Fatalf("total %d", total)
	}
	for i, w := range c.allLockWords(t) {
		if occ.IsLocked(w) {
			t.Fatalf("slot %d: lock word %#x", i, w)
		}
	}
	if fenced {
		claims, writes, refusals, unfenced := c.fenceStats()
		t.Logf("fences: %d claimed, %d fenced writes, %d refusals, %d given back", claims, writes, refusals, unfenced)
	}
}

// loopTransport answers every lock request with MOVED to its requester's
// own epoch + 1 and the same owner, forever.
type loopTransport struct{ calls atomic.Int64 }

func (l *loopTransport) Lock(_ context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	l.calls.Add(1)
	return &messages.LockReply{Status: messages.LockStatus_LOCK_STATUS_MOVED, RequestId: req.GetRequestId(),
		Moved: &messages.Moved{Owner: node, Epoch: req.GetEpoch() + 1, CohortId: req.GetCohortId()}}, nil
}

func (l *loopTransport) Unlock(context.Context, string, *messages.UnlockRequest) (*messages.UnlockReply, error) {
	return &messages.UnlockReply{Status: messages.LockStatus_LOCK_STATUS_OK}, nil
}

// TestFreeSentinelTakenOver: a free owner sentinel of a retired activation
// (its cohort not in the map, its epoch not newer than the map) guards
// nothing: both the MN CAS path and the owner path take it over with one
// CAS. A free sentinel newer than the map, or of a cohort the map
// places, is refused (redirect); a held sentinel is a lock.
func TestFreeSentinelTakenOver(t *testing.T) { bothLayouts(t, testFreeSentinelTakenOver) }

func testFreeSentinelTakenOver(t *testing.T, fenced bool) {
	c := newClusterWith(t, 3, threeNodeMap(1), nil, fenced)
	co := c.coordinator(0)
	// Load through the plain MN CAS path: no owner has marked these records.
	plain, err := occ.NewEngine(c.layout, func() occ.Locker { return occ.NewCASLocker(c.qp()) }, kgOf,
		occ.Config{Node: 9, CleanupTimeout: time.Second, CleanupBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	loader := plain.NewCoordinator(c.qp())
	for k := range uint64(16) {
		mustRun(t, loader, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	update := func(k uint64) occ.Result {
		return co.Run(context.Background(), 1, func(tx txn.Tx) error {
			v, err := tx.GetForUpdate(acct(k))
			if err != nil {
				return err
			}
			return tx.Put(acct(k), v)
		})
	}
	for _, k := range []uint64{0, 4} { // cohort 1 LOCAL on cn-0; unowned
		c.setLockWord(t, k, Sentinel(77, 1, false))
		r := update(k)
		// The coordinator saw the sentinel when it read the slot, so the
		// takeover is one CAS expecting it. With fences, the owner's first
		// grant in the key group claims its fence instead, READs the slot
		// in that doorbell, and takes the retired sentinel by a fenced
		// WRITE: still one CAS.
		want := uint64(1)
		if r.Outcome != occ.Committed || r.Counters.MNCAS != want || r.Counters.MNCASFailed != 0 {
			t.Fatalf("key %d: %v %+v", k, r.Outcome, r.Counters)
		}
		want = 0
		if k == 0 {
			want = Sentinel(1, 1, false)
		}
		if w := c.lockWord(t, k); w != want {
			t.Fatalf("key %d after: %#x, want %#x", k, w, want)
		}
	}
	// Reclaimed counts takeovers by CAS: with fences, cn-0's was a WRITE.
	if want := map[bool]uint64{false: 2, true: 1}[fenced]; c.nodes[0].Stats.Reclaimed.Load() != want {
		t.Fatalf("reclaimed %d, want %d", c.nodes[0].Stats.Reclaimed.Load(), want)
	}
	if fenced && c.nodes[0].Stats.FencedWrites.Load() != 1 {
		t.Fatalf("fenced writes %d, want 1", c.nodes[0].Stats.FencedWrites.Load())
	}
	// Free sentinels that may belong to a live activation are not taken
	// over by either path: one newer than this node's map (cohort 77 at
	// epoch 5) is refused; one of cohort 2, which the map places on cn-1,
	// is locked through cohort 2's owner (Locker.follow): an owner RPC
	// grant of cohort 2, one CAS from S(2,1), released to S(2,1).
	for _, w := range []uint64{Sentinel(77, 5, false), Sentinel(2, 1, false)} {
		for _, k := range []uint64{8, 12} { // cohort 1 LOCAL; unowned
			c.setLockWord(t, k, w)
			r := update(k)
			if w == Sentinel(2, 1, false) {
				if r.Outcome != occ.Committed || r.Counters.LocksOwnerRPC != 1 || r.Counters.MNCAS != 1 || r.Counters.MNCASFailed != 0 {
					t.Fatalf("key %d with %#x: %v %+v", k, w, r.Outcome, r.Counters)
				}
			} else if r.Outcome != occ.Aborted || r.Counters.Redirects != 1 {
				t.Fatalf("key %d with %#x: %v %+v", k, w, r.Outcome, r.Counters)
			}
			if got := c.lockWord(t, k); got != w {
				t.Fatalf("key %d: %#x changed to %#x", k, w, got)
			}
			c.setLockWord(t, k, 0)
		}
	}
	// A held sentinel is a lock, whoever left it.
	c.setLockWord(t, 5, Sentinel(77, 5, true))
	c.setLockWord(t, 1, Sentinel(77, 5, true))
	for _, k := range []uint64{1, 5} {
		r := update(k)
		if r.Outcome != occ.Aborted {
			t.Fatalf("key %d held by a sentinel: %v", k, r.Outcome)
		}
	}
	c.setLockWord(t, 5, 0)
	c.setLockWord(t, 1, 0)
	for i, s := range c.tables {
		s.Do(func(tb *Table) error {
			if tb.Locks() != 0 {
				t.Errorf("cn-%d table holds %d locks", i, tb.Locks())
			}
			return nil
		})
	}
}

// migrate moves cohort id (key groups kgs) from node from to node to (-1:
// unowned) at epoch newEpoch: freeze, drain (fence past the deadline),
// adopt, retire. The caller publishes the map. It returns the number of
// holders fenced.
func migrate(t testing.TB, c *cluster, id control.CohortID, kgs []control.KeyGroup, from, to int, epoch, newEpoch uint64) int {
	t.Helper()
	src := c.tables[from]
	if err := src.Do(func(tb *Table) error { return tb.Freeze(id, epoch, src.now()) }); err != nil {
		t.Fatal(err)
	}
	var fenced []Holder
	for {
		var st DrainStatus
		src.Do(func(tb *Table) (err error) { st, err = tb.Drain(id); return err })
		if st.Drained {
			break
		}
		err := src.Do(func(tb *Table) (err error) { fenced, err = tb.Fence(id, epoch, src.now()); return err })
		if err == nil {
			break
		}
		if !errors.Is(err, ErrDrainPending) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	moved := Moved{Epoch: newEpoch}
	if to >= 0 {
		moved.Owner = c.names[to]
		if err := c.tables[to].Do(func(tb *Table) error { return tb.Install(id, kgs, newEpoch) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Do(func(tb *Table) error { return tb.Retire(id, epoch, moved) }); err != nil {
		t.Fatal(err)
	}
	return len(fenced)
}

// bankTotal sums the balances of accounts 0..n−1 in one transaction.
func bankTotal(t *testing.T, co *occ.Coordinator, n uint64) uint64 {
	t.Helper()
	var total uint64
	mustRun(t, co, func(tx txn.Tx) error {
		total = 0
		for k := range n {
			v, err := tx.Get(acct(k))
			if err != nil {
				return err
			}
			total += binary.LittleEndian.Uint64(v)
		}
		return nil
	})
	return total
}

// assertNothingHeld fails the test if a lock word on the memory node is
// still locked or a node's owner table still holds a lock.
func (c *cluster) assertNothingHeld(t *testing.T) {
	t.Helper()
	for i, w := range c.allLockWords(t) {
		if occ.IsLocked(w) {
			t.Fatalf("slot %d left locked: %#x", i, w)
		}
	}
	for i, s := range c.tables {
		s.Do(func(tb *Table) error {
			if tb.Locks() != 0 {
				t.Errorf("cn-%d table still holds %d locks:\n%s", i, tb.Locks(), tb)
			}
			return nil
		})
	}
}

// bankLoad runs concurrent transfers between nAccts accounts: on each of
// the three nodes, workersPerNode workers of transfers transactions each.
type bankLoad struct {
	wg        sync.WaitGroup
	mu        sync.Mutex
	sum       occ.Counters
	committed int
}

func (l *bankLoad) start(c *cluster, nAccts uint64, workersPerNode, transfers int) {
	for node := range 3 {
		for w := range workersPerNode {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				co := c.coordinator(node)
				rng := rand.New(rand.NewPCG(uint64(node), uint64(w)))
				for range transfers {
					a, b := rng.Uint64N(nAccts), rng.Uint64N(nAccts)
					if a == b {
						continue
					}
					l.record(co.Run(context.Background(), uint64(node*100+w), func(tx txn.Tx) error {
						vs, err := tx.GetForUpdateMany([]txn.Ref{acct(a), acct(b)})
						if err != nil {
							return err
						}
						if err := tx.Put(acct(a), u64(binary.LittleEndian.Uint64(vs[0])-1)); err != nil {
							return err
						}
						return tx.Put(acct(b), u64(binary.LittleEndian.Uint64(vs[1])+1))
					}))
				}
			}()
		}
	}
}

// record counts r's counters and reports whether it committed.
func (l *bankLoad) record(r occ.Result) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum.Add(r.Counters)
	if r.Outcome == occ.Committed {
		l.committed++
		return true
	}
	return false
}

// TestBankAcrossPaths runs concurrent transfers on three nodes, with locks
// split between LOCAL grants, owner RPCs and MN CAS, while cohorts migrate
// between the nodes and to the MN CAS path and back, and the transport
// drops calls. The total must be kept, every path must have granted, and no
// lock word may stay held.
func TestBankAcrossPaths(t *testing.T) { bothLayouts(t, testBankAcrossPaths) }

func testBankAcrossPaths(t *testing.T, fenced bool) {
	const nAccts, initial, workersPerNode, transfers = 16, 1000, 3, 300
	c := newClusterWith(t, 3, threeNodeMap(1), nil, fenced)
	c.tr.failEvery = 37
	co := c.coordinator(0)
	for k := range uint64(nAccts) {
		mustRun(t, co, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(initial)) })
	}
	load := &bankLoad{}
	load.start(c, nAccts, workersPerNode, transfers)
	stop := make(chan struct{})
	// A slow transaction on cohort 1's records (keys 0 and 8, key group 0)
	// outlives the drain deadline of its migrations: it gets fenced, keeps
	// its held sentinel on the memory node, and the new owner's grants are
	// refused by the lock word until it releases.
	load.wg.Add(1)
	go func() {
		defer load.wg.Done()
		co := c.coordinator(1)
		for commits := 0; commits < 4; {
			r := co.Run(context.Background(), 999, func(tx txn.Tx) error {
				vs, err := tx.GetForUpdateMany([]txn.Ref{acct(0), acct(8)})
				if err != nil {
					return err
				}
				time.Sleep(25 * time.Millisecond)
				if err := tx.Put(acct(0), u64(binary.LittleEndian.Uint64(vs[0])-7)); err != nil {
					return err
				}
				return tx.Put(acct(8), u64(binary.LittleEndian.Uint64(vs[1])+7))
			})
			if load.record(r) {
				commits++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// Ownership changes while the workers run. Each map is pushed to one
	// node only; the others learn it from MOVED / stale-epoch replies or
	// from meeting a newer sentinel, and until then lock by their old map —
	// in particular, they take cohort 3's records by MN CAS while cn-2
	// already grants them, so only the lock word keeps I2 there.
	cohortKGs := map[control.CohortID][]control.KeyGroup{1: {0, 1}, 2: {2, 3}, 3: {4, 5}}
	owners := map[control.CohortID]int{1: 0, 2: 1}
	epochs := map[control.CohortID]uint64{1: 1, 2: 1}
	steps := []struct {
		id     control.CohortID
		to     int // -1: unowned
		epoch  uint64
		notify int
	}{
		{3, 2, 2, 2},  // adopt unowned cohort 3 on cn-2
		{1, 2, 3, 2},  // cohort 1 cn-0 → cn-2
		{2, -1, 4, 0}, // evict cohort 2
		{1, 0, 5, 1},  // cohort 1 cn-2 → cn-0
		{3, 1, 6, 0},  // cohort 3 cn-2 → cn-1
	}
	var fencedTotal int
	go func() { load.wg.Wait(); close(stop) }()
	for _, st := range steps {
		select {
		case <-stop:
		case <-time.After(10 * time.Millisecond):
		}
		if from, ok := owners[st.id]; ok {
			fencedTotal += migrate(t, c, st.id, cohortKGs[st.id], from, st.to, epochs[st.id], st.epoch)
		} else if err := c.tables[st.to].Do(func(tb *Table) error { return tb.Install(st.id, cohortKGs[st.id], st.epoch) }); err != nil {
			t.Fatal(err)
		}
		delete(owners, st.id)
		if st.to >= 0 {
			owners[st.id], epochs[st.id] = st.to, st.epoch
		}
		m := &control.OwnerMap{Epoch: st.epoch}
		for _, id := range []control.CohortID{1, 2, 3} {
			if o, ok := owners[id]; ok {
				m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: cohortKGs[id]}, Owner: o})
			}
		}
		c.published.Store(m)
		if err := c.resolvers[st.notify].Update(m); err != nil {
			t.Fatal(err)
		}
	}
	<-stop
	total := bankTotal(t, co, nAccts)
	committed, sum := load.committed, load.sum
	t.Logf("committed %d, counters %+v, fenced %d, rpc locks %d, reclaimed %d", committed, sum, fencedTotal,
		c.tr.locks.Load(), c.nodes[0].Stats.Reclaimed.Load()+c.nodes[1].Stats.Reclaimed.Load()+c.nodes[2].Stats.Reclaimed.Load())
	if total != nAccts*initial {
		t.Fatalf("total %d, want %d", total, nAccts*initial)
	}
	if committed == 0 || sum.LocksLocal == 0 || sum.LocksOwnerRPC == 0 || sum.LocksMNCAS == 0 {
		t.Fatalf("a path never granted: committed %d, %+v", committed, sum)
	}
	c.assertNothingHeld(t)
	if fenced {
		claims, writes, refusals, unfenced := c.fenceStats()
		t.Logf("fences: %d claimed, %d fenced writes, %d refusals, %d given back", claims, writes, refusals, unfenced)
	}
}

// TestSlotReuseAcrossPaths: deletes through a LOCAL owner leave their empty
// slots with lock word 0 (occ.LockResult.ClearWhenEmpty; the owner unmarks
// them), so inserts of other cohorts' keys and of unowned keys reuse them.
// (Without key-group fences: with them the table's buckets are partitioned
// by key group, and no other key group's insert can meet those slots.)
func TestSlotReuseAcrossPaths(t *testing.T) {
	c := newCluster(t, 3, threeNodeMap(1))
	co0, co1 := c.coordinator(0), c.coordinator(1)
	run := func(co *occ.Coordinator, prog txn.Program) {
		t.Helper()
		for attempt := range 4 {
			r := co.Run(context.Background(), 1, prog)
			if r.Outcome == occ.Committed {
				return
			}
			if attempt == 3 {
				t.Fatalf("still %v after 4 attempts: %v", r.Outcome, r.Err)
			}
		}
	}
	const n = 300
	for i := range uint64(n) {
		run(co0, func(tx txn.Tx) error { return tx.Insert(acct(8*i), u64(i)) }) // key group 0: cohort 1, LOCAL on cn-0
	}
	for i := range uint64(n) {
		run(co0, func(tx txn.Tx) error {
			if _, err := tx.GetForUpdate(acct(8 * i)); err != nil {
				return err
			}
			return tx.Delete(acct(8 * i))
		})
	}
	for i, w := range c.allLockWords(t) {
		if w != 0 {
			t.Fatalf("slot %d: lock word %#x after the deletes", i, w)
		}
	}
	for i := range uint64(n) {
		run(co1, func(tx txn.Tx) error { return tx.Insert(acct(8*i+4), u64(i)) }) // key group 4: unowned, MN CAS
		run(co1, func(tx txn.Tx) error { return tx.Insert(acct(8*i+2), u64(i)) }) // key group 2: cohort 2, LOCAL on cn-1
	}
	for i := range uint64(n) {
		run(co0, func(tx txn.Tx) error {
			for _, k := range []uint64{8*i + 4, 8*i + 2} {
				v, err := tx.Get(acct(k))
				if err != nil {
					return err
				}
				if binary.LittleEndian.Uint64(v) != i {
					t.Errorf("key %d = %d", k, binary.LittleEndian.Uint64(v))
				}
			}
			return nil
		})
	}
}
