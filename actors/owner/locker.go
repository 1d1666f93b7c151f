package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
)

// Route says who grants a key group's locks, as far as this node knows.
type Route struct {
	// Owned: the key group is in a cohort with an owner; false means the
	// MN CAS fallback path.
	Owned  bool
	Cohort control.CohortID
	// Owner is the owner's membership name; Local says it is this node.
	Owner string
	Local bool
	// Epoch is the OwnerMap epoch the route was read from (requests carry it).
	Epoch uint64
}

// CohortResolver is implemented by Resolvers that can say whether a cohort
// is owned at their current OwnerMap (MapResolver does). A Locker whose
// Resolver does not implement it never takes over a free sentinel of
// another cohort.
type CohortResolver interface {
	// CohortOwned reports whether cohort c is placed in the current map,
	// and the map's epoch.
	CohortOwned(c control.CohortID) (owned bool, epoch uint64)
}

// CohortPlacer is implemented by Resolvers that can say which node owns a
// cohort at their current OwnerMap (MapResolver does). A Locker whose
// Resolver does not implement it never takes over, through a remote owner,
// a free sentinel of another cohort of that owner.
type CohortPlacer interface {
	// CohortOwner returns the membership name of cohort c's owner in the
	// current map (owned false: c is not placed), and the map's epoch.
	CohortOwner(c control.CohortID) (owner string, owned bool, epoch uint64)
}

// Resolver maps key groups to their owners at the node's current OwnerMap.
// It is shared by a node's lockers and must be safe for concurrent use.
type Resolver interface {
	Resolve(kg control.KeyGroup) Route
	// Refresh asks for an OwnerMap of at least epoch atLeast (after a MOVED
	// or stale-epoch reply). Best effort, bounded by ctx; it may return
	// without progress.
	Refresh(ctx context.Context, atLeast uint64)
}

// Transport carries owner lock RPCs to other nodes. Implementations must be
// safe for concurrent use; an error means the reply is unknown (the request
// may or may not have run: it is retried with the same request id, which the
// owner answers idempotently).
type Transport interface {
	Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error)
	Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error)
}

// NodeConfig configures a Node's lockers.
type NodeConfig struct {
	// Self is this node's membership name (the requester of its RPCs).
	Self string
	// MaxRedirects bounds the MOVED / stale-epoch re-routings of one Acquire
	// (default 3); past it the lock is refused with occ.LockRedirect.
	MaxRedirects int
	// RPCTimeout bounds one attempt of an owner RPC (default 1 s), and
	// RPCAttempts the attempts, with the same request id (default 2).
	RPCTimeout  time.Duration
	RPCAttempts int
	// ResolveTimeout bounds how long a locker re-reads a lock word whose
	// CAS outcome was lost with the memory-node connection. Default 5 s,
	// occ's CleanupTimeout, for the same reason: longer than a memory-node
	// reconnect: past it the word may stay held (H) until the grant is
	// stale and its owner ends it (see "Limits").
	ResolveTimeout time.Duration
	// WriteLease bounds the time from asking the local table for a grant to
	// posting the plain WRITE that sets a marked lock word held; a grant
	// older than that sets the word by CAS instead (see "Fencing and the
	// WRITE lease" in the package documentation). Default: a quarter of the
	// local table's DrainDeadlineMicros.
	WriteLease time.Duration
	// FencedReadAge bounds how old the coordinator's READ of a slot
	// (occ.LockRequest.SeenAt) may be when the table is asked, for the
	// grant to be a fenced WRITE (F4 of "Key-group fences"); an older READ
	// makes the grant a CAS. The bound keeps the window between that READ
	// and the WRITE far shorter than the repair sweep's RepairAfter, which
	// ends only words held unchanged that long (the lemma of fenced WRITEs
	// needs no repair inside the window). Default 1 s; package actors caps
	// it at a quarter of its RepairAfter. It is not the WRITE lease (12.5
	// ms by default): on a loaded node a transaction often asks for its
	// locks tens of milliseconds after reading the slots, and under that
	// bound such first grants paid a CAS.
	FencedReadAge time.Duration
	// HintEntries bounds the node's cache of lock words last seen free
	// (the expected values of its owner-path CASes); default 1<<16, cleared
	// when full.
	HintEntries int
	// Lease is the node's owner lease, renewed by the planner's answers to
	// its heartbeats (see "Owner leases" in the package documentation): a
	// grant WRITEs a marked lock word only if the lease was valid when its
	// table was asked, and takes over another cohort's sentinel only then.
	// nil: the node's cohorts are never moved without its acknowledgement
	// (a fixed map with no planner, or a test), so no lease bounds them.
	Lease *Lease
}

func (c NodeConfig) withDefaults() NodeConfig {
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 3
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = time.Second
	}
	if c.RPCAttempts == 0 {
		c.RPCAttempts = 2
	}
	if c.ResolveTimeout == 0 {
		c.ResolveTimeout = 5 * time.Second
	}
	if c.HintEntries == 0 {
		c.HintEntries = 1 << 16
	}
	if c.FencedReadAge == 0 {
		c.FencedReadAge = DefaultFencedReadAge
	}
	return c
}

// DefaultFencedReadAge is NodeConfig.FencedReadAge's default.
const DefaultFencedReadAge = time.Second

// NodeStats counts a node's ownership-path events.
type NodeStats struct {
	// UnlockFailures are releases that could not be delivered to the owner
	// (the owner table keeps the holder until it is fenced).
	UnlockFailures atomic.Uint64
	// Resolved are owner-path lock-word CASes whose outcome was lost and
	// settled by re-reading the word; Unresolved stayed unknown past
	// ResolveTimeout.
	Resolved, Unresolved atomic.Uint64
	// Reclaimed are free owner sentinels of retired activations taken over
	// by a locker (one CAS each).
	Reclaimed atomic.Uint64
	// WordWrites are owner-path lock words set held by a plain WRITE (no
	// atomic: the record was marked at its cohort's epoch); WordCASes are
	// those set by CAS (the first grant of a record at an epoch, remote
	// grants, and grants whose mark or lease was missing).
	WordWrites, WordCASes atomic.Uint64
	// FencedWrites are the WordWrites of fenced grants: first grants of a
	// record at an epoch, made by WRITE because the node holds the record's
	// key-group fence (see "Key-group fences").
	FencedWrites atomic.Uint64
	// FenceClaims are key-group fence words this node set (one CAS each);
	// FenceRefusals are free lock words taken by CAS and given back
	// because another owner may hold the key group's fence (one more CAS
	// each); Unfenced are fences given back after their key group left
	// the activation (one CAS each).
	FenceClaims, FenceRefusals, Unfenced atomic.Uint64
}

// Node is the owner runtime of one compute node: its owner table service,
// resolver and transport, shared by the lockers of its coordinators.
type Node struct {
	cfg   NodeConfig
	svc   *Service
	res   Resolver
	tr    Transport
	reqID atomic.Uint64
	Stats NodeStats

	// hints: lock words this node last saw as a free owner sentinel, used
	// only as the expected value of a CAS (a wrong hint costs one failed
	// CAS, never safety).
	hintMu sync.Mutex
	hints  map[wordKey]uint64
}

// wordKey names a record slot's lock word on the memory node.
type wordKey struct {
	rkey uint32
	addr uint64
}

func (n *Node) hint(k wordKey) uint64 {
	n.hintMu.Lock()
	defer n.hintMu.Unlock()
	return n.hints[k]
}

func (n *Node) setHint(k wordKey, w uint64) {
	n.hintMu.Lock()
	defer n.hintMu.Unlock()
	if w == 0 {
		delete(n.hints, k)
		return
	}
	if len(n.hints) >= n.cfg.HintEntries {
		clear(n.hints)
	}
	n.hints[k] = w
}

// NewNode returns a node. svc may be nil for a node that owns nothing; tr
// may be nil for a single-node cluster.
func NewNode(cfg NodeConfig, svc *Service, res Resolver, tr Transport) (*Node, error) {
	if res == nil {
		return nil, errors.New("owner: NewNode needs a Resolver")
	}
	if cfg.MaxRedirects < 0 || cfg.RPCAttempts < 0 || cfg.RPCTimeout < 0 || cfg.ResolveTimeout < 0 ||
		cfg.WriteLease < 0 || cfg.HintEntries < 0 || cfg.FencedReadAge < 0 {
		return nil, fmt.Errorf("owner: negative NodeConfig field: %+v", cfg)
	}
	cfg = cfg.withDefaults()
	if cfg.WriteLease == 0 && svc != nil {
		cfg.WriteLease = time.Duration(svc.Config().DrainDeadlineMicros) * time.Microsecond / 4
	}
	return &Node{cfg: cfg, svc: svc, res: res, tr: tr, hints: map[wordKey]uint64{}}, nil
}

// Service returns the node's owner table service (nil if it has none).
func (n *Node) Service() *Service { return n.svc }

// NewLocker returns an occ.Locker for one coordinator: qp carries the
// owner-path lock-word verbs and fallback takes the locks of unowned key
// groups (an occ.CASLocker on its own queue pair, or the atomic actor).
func (n *Node) NewLocker(qp rdma.QueuePair, fallback occ.Locker) *Locker {
	return &Locker{n: n, qp: qp, fb: fallback, grants: map[grantKey]grant{}}
}

type grantKey struct {
	table uint32
	key   uint64
	tag   uint64
}

type grant struct {
	route Route
	epoch uint64
}

// Locker is an occ.Locker that takes each lock through its key group's
// owner: the node's own table (occ.PathLocal), a remote owner over the
// Transport (occ.PathOwnerRPC), or the fallback locker for unowned key
// groups (occ.PathMNCAS). An owner's grant is then made visible on the
// memory node by setting the slot's lock word to the held owner sentinel:
// by a plain WRITE when the owner's table has the slot marked, by CAS
// otherwise (see the package documentation). Owner tables are keyed by
// slot (table id, slot address), not by record. Like every occ.Locker it is
// used by one coordinator goroutine at a time.
type Locker struct {
	n      *Node
	qp     rdma.QueuePair
	fb     occ.Locker
	grants map[grantKey]grant
	wrs    []rdma.WorkRequest
}

var _ occ.Locker = (*Locker)(nil)

// maxKeysPerRPC splits large owner requests (the table's default bound is 1024).
const maxKeysPerRPC = 256

// routeGroup is the requests of one Acquire that go to one owner cohort.
type routeGroup struct {
	route Route
	tag   uint64
}

// ownerGrant is a table grant waiting for its lock word.
type ownerGrant struct {
	i       int
	route   Route
	epoch   uint64
	already bool
	// marked: the owner's table knows the word is this activation's
	// sentinel (local grants only); asked is when the table was asked,
	// and leased whether the node's owner lease was valid then.
	marked bool
	asked  time.Time
	leased bool
	// from: the free sentinel of another cohort of the same table whose
	// mark the table moved to this grant (AcquireReply.Taken; local grants
	// only): the expected value of the grant's CAS.
	from uint64
	// fenceSince (remote grants only; zero if none): a time on this node's
	// clock by which the owner had set the record's key-group fence, from
	// the reply's fence age (messages.LockReply.fence_age_micros): a READ
	// posted after it came after the fence was set.
	fenceSince time.Time
}

// fenceClockMargin is taken off a remote owner's fence age: the two nodes'
// clocks may run at slightly different rates (parts per million: a few
// microseconds over the seconds a fence is held), and the owner rounds to
// microseconds.
const fenceClockMargin = time.Millisecond

// slotKey is the owner-table key of a lock request: its slot, not its
// record. Lock words are per slot, and two records can meet in one slot (a
// delete and an insert, or a stale cached address), so the table must
// serialise grantees per slot for its marks to be trusted.
func slotKey(q *occ.LockRequest) Key { return Key{Table: q.Ref.Table, Key: q.SlotAddr} }

func wordOf(q *occ.LockRequest) wordKey { return wordKey{q.Table.Region.RKey, q.SlotAddr} }

// Acquire implements occ.Locker.
func (l *Locker) Acquire(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult) error {
	if len(res) != len(reqs) {
		return fmt.Errorf("owner: %d results for %d lock requests", len(res), len(reqs))
	}
	pending := make([]int, len(reqs))
	for i := range reqs {
		res[i] = occ.LockResult{}
		pending[i] = i
	}
	hints := map[int]Route{}
	attempted := false
	for round := 0; len(pending) > 0; round++ {
		routes := make(map[int]Route, len(pending))
		var fb []int
		groups := map[routeGroup][]int{}
		var order []routeGroup
		for _, i := range pending {
			r, ok := hints[i]
			if !ok {
				r = l.n.res.Resolve(reqs[i].KeyGroup)
			}
			if r.Owned && !r.Local && l.n.tr == nil || r.Owned && r.Local && l.n.svc == nil {
				res[i] = occ.LockResult{Status: occ.LockRedirect, Path: occ.PathOwnerRPC}
				continue
			}
			routes[i] = r
			if !r.Owned {
				fb = append(fb, i)
				continue
			}
			g := routeGroup{route: r, tag: reqs[i].Tag}
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], i)
		}
		var again []int
		reroute := func(idx []int, atLeast uint64, moved *Moved, cohort control.CohortID) {
			if round >= l.n.cfg.MaxRedirects {
				for _, i := range idx {
					res[i] = occ.LockResult{Status: occ.LockRedirect, Path: pathOf(routes[i])}
				}
				return
			}
			l.n.res.Refresh(ctx, atLeast)
			for _, i := range idx {
				delete(hints, i)
				if moved != nil && l.n.res.Resolve(reqs[i].KeyGroup).Epoch < moved.Epoch {
					hints[i] = Route{Owned: moved.Owner != "", Cohort: cohort, Owner: moved.Owner,
						Local: moved.Owner == l.n.cfg.Self, Epoch: moved.Epoch}
				}
				again = append(again, i)
			}
		}
		// follow: locks refused by a free sentinel of a cohort the map
		// places elsewhere, re-routed to that cohort's owner.
		follow := map[int]Route{}
		if len(fb) > 0 {
			err := l.acquireFallback(ctx, reqs, res, fb, follow, round < l.n.cfg.MaxRedirects)
			if err != nil {
				if !attempted && len(groups) == 0 {
					return err
				}
				for _, i := range fb {
					res[i] = occ.LockResult{Status: occ.LockConflict, Path: occ.PathMNCAS}
				}
			}
			attempted = true
		}
		var granted []ownerGrant
		for _, g := range order {
			idx := groups[g]
			for start := 0; start < len(idx); start += maxKeysPerRPC {
				chunk := idx[start:min(start+maxKeysPerRPC, len(idx))]
				granted = append(granted, l.ask(ctx, reqs, res, g, chunk, reroute)...)
				attempted = true
			}
		}
		if len(granted) > 0 {
			l.lockWords(ctx, reqs, res, granted, follow, round < l.n.cfg.MaxRedirects)
		}
		if round < l.n.cfg.MaxRedirects {
			for i, r := range follow {
				hints[i] = r
				again = append(again, i)
			}
		}
		pending = again
	}
	return nil
}

func pathOf(r Route) occ.Path {
	switch {
	case !r.Owned:
		return occ.PathMNCAS
	case r.Local:
		return occ.PathLocal
	}
	return occ.PathOwnerRPC
}

// ask requests the locks of idx (one cohort, one holder) from the owner's
// table and returns the grants; refusals are written to res or re-routed.
func (l *Locker) ask(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, g routeGroup, idx []int,
	reroute func(idx []int, atLeast uint64, moved *Moved, cohort control.CohortID)) []ownerGrant {
	path := pathOf(g.route)
	keys := make([]Key, len(idx))
	for j, i := range idx {
		keys[j] = slotKey(&reqs[i])
	}
	id := l.n.reqID.Add(1)
	asked := time.Now()
	leased := l.n.cfg.Lease == nil || l.n.cfg.Lease.ValidAt(asked)
	var rep AcquireReply
	if g.route.Local {
		r, err := l.n.svc.Acquire(AcquireRequest{Cohort: g.route.Cohort, Epoch: g.route.Epoch, Holder: g.tag,
			Keys: keys, Requester: l.n.cfg.Self, RequestID: id})
		if err != nil { // a bound exceeded: refuse, the transaction aborts
			for _, i := range idx {
				res[i] = occ.LockResult{Status: occ.LockConflict, Path: path}
			}
			return nil
		}
		rep = r
	} else {
		kgs := make([]uint64, len(idx))
		for j, i := range idx {
			kgs[j] = reqs[i].KeyGroup
		}
		r, ok := l.lockRPC(ctx, g, keys, kgs, id)
		if !ok {
			for _, i := range idx {
				res[i] = occ.LockResult{Status: occ.LockConflict, Path: path}
			}
			return nil
		}
		rep = r
	}
	switch rep.Status {
	case StatusOK, StatusConflict:
		already := map[int]bool{}
		for _, j := range rep.Already {
			already[j] = true
		}
		marked := map[int]bool{}
		taken := map[int]uint64{}
		if g.route.Local { // remote replies carry no marks
			for _, j := range rep.Marked {
				marked[j] = true
			}
			for _, tw := range rep.Taken {
				taken[tw.Index] = tw.Word
			}
		}
		held := map[int]bool{}
		var out []ownerGrant
		recv := time.Now()
		for n, j := range rep.Granted {
			if j < 0 || j >= len(idx) {
				continue
			}
			held[j] = true
			og := ownerGrant{i: idx[j], route: g.route, epoch: rep.Epoch, already: already[j],
				marked: marked[j], asked: asked, leased: leased, from: taken[j]}
			if !g.route.Local && len(rep.FenceAgeMicros) == len(rep.Granted) && rep.FenceAgeMicros[n] > 0 {
				og.fenceSince = recv.Add(-time.Duration(rep.FenceAgeMicros[n]) * time.Microsecond).Add(fenceClockMargin)
			}
			out = append(out, og)
		}
		for j, i := range idx {
			if !held[j] {
				res[i] = occ.LockResult{Status: occ.LockConflict, Path: path}
			}
		}
		return out
	case StatusMoved:
		reroute(idx, rep.Moved.Epoch, &rep.Moved, g.route.Cohort)
	case StatusStaleEpoch, StatusNotOwner:
		reroute(idx, max(rep.Epoch, g.route.Epoch+1), nil, 0)
	default: // StatusRetry: frozen or not installed yet; OCC never waits
		for _, i := range idx {
			res[i] = occ.LockResult{Status: occ.LockRedirect, Path: path}
		}
	}
	return nil
}

// lockRPC sends one owner lock request, retrying with the same request id.
// ok is false when no attempt got an answer; the locks the owner may have
// granted are then released best effort.
func (l *Locker) lockRPC(ctx context.Context, g routeGroup, keys []Key, kgs []uint64, id uint64) (AcquireReply, bool) {
	req := &messages.LockRequest{TxnId: g.tag, CohortId: g.route.Cohort, Epoch: g.route.Epoch,
		Records: recordRefs(keys), Requester: l.n.cfg.Self, RequestId: id, KeyGroups: kgs}
	for range l.n.cfg.RPCAttempts {
		c, cancel := context.WithTimeout(ctx, l.n.cfg.RPCTimeout)
		rep, err := l.n.tr.Lock(c, g.route.Owner, req)
		cancel()
		if err != nil || rep == nil {
			if ctx.Err() != nil {
				break
			}
			continue
		}
		out := AcquireReply{Epoch: rep.GetEpoch(), ConflictIndex: int(rep.GetConflictIndex()), ConflictHolder: rep.GetHolderTxnId()}
		for _, j := range rep.GetGranted() {
			out.Granted = append(out.Granted, int(j))
		}
		out.FenceAgeMicros = rep.GetFenceAgeMicros()
		switch rep.GetStatus() {
		case messages.LockStatus_LOCK_STATUS_OK:
			out.Status = StatusOK
		case messages.LockStatus_LOCK_STATUS_CONFLICT:
			out.Status = StatusConflict
		case messages.LockStatus_LOCK_STATUS_MOVED:
			out.Status = StatusMoved
			out.Moved = Moved{Owner: rep.GetMoved().GetOwner(), Epoch: rep.GetMoved().GetEpoch()}
		case messages.LockStatus_LOCK_STATUS_RETRY:
			out.Status = StatusRetry
		case messages.LockStatus_LOCK_STATUS_STALE_EPOCH:
			out.Status = StatusStaleEpoch
		default:
			return AcquireReply{}, false
		}
		return out, true
	}
	l.unlockRPC(g.route, g.route.Epoch, g.tag, keys)
	return AcquireReply{}, false
}

// maxWordAttempts bounds the CASes one owner-path grant may post on its lock
// word (expected value from the hint, then the value found, then a last
// retry).
const maxWordAttempts = 3

// lockWords makes table grants visible on the memory node: one doorbell
// with, per grant, a verb that sets the lock word to the held sentinel
// H(c,e) of the grant's cohort and install epoch, and a READ of the slot.
//
//   - A marked local grant (the owner's table knows the word is S(c,e), and
//     the grant is younger than the WRITE lease) posts a plain WRITE of
//     H(c,e): no atomic. Only holders of this slot at (c,e) change a word
//     that is S(c,e) or H(c,e) while (c,e) is active, and this grantee is
//     the only one now.
//   - So does a fenced local grant: the table holds the fence of the
//     record's key group for (c,e), and the coordinator saw a free word
//     the grant may replace (0, or a retired or re-cut activation's free
//     sentinel: fenceable), with the record in the slot, in a READ posted
//     after the fence was set and less than FencedReadAge before the asking
//     (F4 of "Key-group fences"). The table marks the slot once the WRITE
//     completed.
//   - Any other grant posts CAS(expected → H(c,e)), expecting S(c,e) if
//     the node's hint or the word the coordinator saw (LockRequest.Seen)
//     says so, else the seen word if it is a retired activation's free
//     sentinel, else 0. On a mismatch it retries (bounded) with the
//     value found when that value is free for it: 0, this activation's free
//     sentinel S(c,e), or a free sentinel of a retired activation (see
//     retired). A CAS tag or another held sentinel refuses the grant
//     (LockConflict); a free sentinel of an activation that may still be
//     active refuses it as LockRedirect. Successful local CASes mark the
//     keys in the table, so the next grants WRITE. A CAS that takes a free
//     word other than S(c,e), of a record with a fence word, reads the
//     fence in the same doorbell and gives the word back (CAS H(c,e) → 0)
//     when another activation may hold the fence (fenceBlocks); the lock
//     then follows the fence's cohort.
//   - A local grant whose key group's fence the table does not hold yet
//     also claims it: CAS(0, or a retired activation's fence → S(c,e)) on
//     the fence word, once per key group and doorbell (fenceExpect). The
//     grants of that key group post only a READ of their slot in that
//     doorbell, after the claim, and take their words in the next one:
//     by fenced WRITE if the claim held and the READ allows it
//     (fencedAfterClaim), else by CAS.
//
// Grants whose word cannot be taken are released in the table again.
func (l *Locker) lockWords(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, gs []ownerGrant,
	follow map[int]Route, canFollow bool) {
	expect := make([]uint64, len(gs))
	write := make([]bool, len(gs))
	fenced := make([]bool, len(gs))    // a fenced WRITE over a free word
	wantFence := make([]bool, len(gs)) // claim the key group's fence
	needFence := map[int]bool{}        // a CAS whose fence READ was lost with it
	todo := make([]int, 0, len(gs))
	var undo []ownerGrant
	fs := l.fenceStates(reqs, gs)
	// seen: the word a fenced WRITE replaces (the coordinator's READ, or
	// the READ in a fence claim's doorbell); claimRead: a grant that posts
	// no word verb in the doorbell claiming its fence, only a READ of its
	// slot (see "Key-group fences", F4).
	seen := make([]uint64, len(gs))
	claimRead := make([]bool, len(gs))
	for k, g := range gs {
		q := &reqs[g.i]
		if seen := q.Seen; canFollow && !g.already && g.from == 0 && store.IsFreeSentinel(seen) &&
			seen != Sentinel(g.route.Cohort, g.epoch, false) && !(g.marked && g.route.Local) {
			// The coordinator saw a free sentinel of a cohort the map
			// places elsewhere: ask that cohort's owner at once rather than
			// post a CAS bound to fail.
			if ok, _ := l.retired(seen, g.route, g.epoch); !ok && !l.takeable(seen, g) {
				if r, ok := l.follow(seen, g.route); ok {
					res[g.i] = occ.LockResult{Status: occ.LockRedirect, Path: pathOf(g.route), LockWord: seen}
					follow[g.i] = r
					undo = append(undo, g)
					continue
				}
			}
		}
		todo = append(todo, k)
		write[k] = g.marked && !g.already && g.route.Local
		if !write[k] && l.mayFenceWrite(q, g, fs[k]) {
			write[k], fenced[k] = true, true
		}
		wantFence[k] = fs[k].want && !g.already
		seen[k] = q.Seen
		expect[k] = l.expectFor(q, g, q.Seen)
	}
	type markKey struct {
		cohort control.CohortID
		epoch  uint64
		tag    uint64
	}
	marks := map[markKey][]Key{}
	var wordUndo []int // grants whose CAS took the word but a fence refuses them
	for attempt := 0; len(todo) > 0; attempt++ {
		var next []int
		// A grant is at most four work requests (fence CAS, word verb, slot
		// READ, fence READ).
		for start := 0; start < len(todo); start += rdma.MaxBatch / 4 {
			chunk := todo[start:min(start+rdma.MaxBatch/4, len(todo))]
			l.wrs = l.wrs[:0]
			at := make([]int, len(chunk))      // index of each grant's word verb
			fenceAt := make([]int, len(chunk)) // of its fence READ, or -1
			fenceCAS := map[uint64]int{}       // fence address → index of its CAS
			var claims []int                   // grants whose fence CAS was posted
			for j, k := range chunk {
				g := gs[k]
				q := &reqs[g.i]
				if wantFence[k] {
					if _, ok := fenceCAS[q.Fence]; !ok {
						if e, ok := l.fenceExpect(q, g); ok {
							fenceCAS[q.Fence] = len(l.wrs)
							claims = append(claims, k)
							l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpCompareAndSwap, RKey: q.FenceRKey,
								RemoteAddr: q.Fence, Compare: e, Swap: Sentinel(g.route.Cohort, g.epoch, false)})
						}
					}
					wantFence[k] = false
				}
				if _, claiming := fenceCAS[q.Fence]; claiming && attempt == 0 && !write[k] && g.route.Local &&
					!g.already && g.from == 0 && g.leased && q.Fence != 0 {
					// Its key group's fence is claimed in this doorbell:
					// READ the slot after the claim instead of taking the
					// word by CAS, and WRITE it in the next doorbell if
					// the claim held and the word is free for a fenced
					// grant.
					claimRead[k] = true
					at[j] = len(l.wrs)
					l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpRead, RKey: q.Table.Region.RKey,
						RemoteAddr: q.SlotAddr, Local: make([]byte, q.Table.SlotSize)})
					fenceAt[j] = -1
					continue
				}
				claimRead[k] = false
				held := Sentinel(g.route.Cohort, g.epoch, true)
				if write[k] && (!g.leased || time.Since(g.asked) >= l.n.cfg.WriteLease) {
					// Past the WRITE lease, or asked without an owner
					// lease: CAS from the free sentinel (from the word
					// seen, if the WRITE was a fenced one).
					write[k] = false
					expect[k] = Sentinel(g.route.Cohort, g.epoch, false)
					if fenced[k] {
						fenced[k], expect[k] = false, seen[k]
					}
				}
				at[j] = len(l.wrs)
				if write[k] {
					l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpWrite, RKey: q.Table.Region.RKey,
						RemoteAddr: q.SlotAddr + store.LockOffset, Local: binary.LittleEndian.AppendUint64(nil, held)})
				} else {
					l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpCompareAndSwap, RKey: q.Table.Region.RKey,
						RemoteAddr: q.SlotAddr + store.LockOffset, Compare: expect[k], Swap: held})
				}
				l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpRead, RKey: q.Table.Region.RKey,
					RemoteAddr: q.SlotAddr, Local: make([]byte, q.Table.SlotSize)})
				fenceAt[j] = -1
				if !write[k] && q.Fence != 0 && expect[k] != Sentinel(g.route.Cohort, g.epoch, false) {
					fenceAt[j] = len(l.wrs)
					l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpRead, RKey: q.FenceRKey,
						RemoteAddr: q.Fence, Local: make([]byte, 8)})
				}
			}
			cs, _ := rdma.Exec(ctx, l.qp, l.wrs...)
			ok := func(i int) bool { return i >= 0 && i < len(cs) && cs[i].Status == rdma.StatusSuccess }
			for _, k := range claims {
				q, g := &reqs[gs[k].i], gs[k]
				i := fenceCAS[q.Fence]
				if i < len(cs) && cs[i].Status != rdma.StatusFlushed {
					res[g.i].CAS++
				}
				if !ok(i) {
					continue
				}
				l.fenceClaimed(q, g, l.wrs[i].Compare, cs[i].Value)
			}
			var unknown []int
			var afterClaim []int
			for j, k := range chunk {
				g := gs[k]
				q := &reqs[g.i]
				out := &res[g.i]
				out.Path = pathOf(g.route)
				if claimRead[k] {
					// Nothing was done to the word: take it in the next
					// doorbell, by a fenced WRITE if the slot READ allows.
					if i := fenceCAS[q.Fence]; ok(i) && ok(at[j]) && l.n.hint(fenceOf(q)) == Sentinel(g.route.Cohort, g.epoch, false) {
						slot := q.Table.DecodeSlot(l.wrs[at[j]].Local)
						// The record's slot, or an empty one only its key
						// group can fill (not another record's slot, nor an
						// empty one any key group may fill).
						if (slot.Meta.Present() && slot.Key == q.Ref.Key) || (!slot.Meta.Present() && q.Table.KeyGroupAligned()) {
							seen[k] = slot.Lock
							afterClaim = append(afterClaim, k)
						}
					}
					expect[k] = l.expectFor(q, g, q.Seen)
					next = append(next, k)
					continue
				}
				if !ok(at[j]) {
					if !write[k] {
						out.CAS++ // posted: may have applied
						if fenceAt[j] >= 0 {
							needFence[k] = true
						}
					}
					unknown = append(unknown, k)
					continue
				}
				var slot []byte
				if ok(at[j] + 1) {
					slot = l.wrs[at[j]+1].Local
				}
				free := Sentinel(g.route.Cohort, g.epoch, false)
				if write[k] {
					l.n.Stats.WordWrites.Add(1)
					if fenced[k] {
						l.n.Stats.FencedWrites.Add(1)
						l.granted(reqs, res, g, slot, seen[k])
						if !g.route.Local {
							// The owner's table has the slot unmarked and
							// cannot learn marks over the RPC: release to
							// 0, which the fence guards, never to S(c,e).
							out.Release, out.ClearWhenEmpty = 0, true
							continue
						}
						mk := markKey{g.route.Cohort, g.epoch, q.Tag}
						marks[mk] = append(marks[mk], slotKey(q))
						continue
					}
					l.granted(reqs, res, g, slot, free)
					continue
				}
				out.CAS++
				v := cs[at[j]].Value
				if v == expect[k] {
					foreign := false
					if fenceAt[j] >= 0 {
						if !ok(fenceAt[j]) {
							// The word is ours, but the fence was not read:
							// give the word back.
							wordUndo = append(wordUndo, k)
							continue
						}
						fw := binary.LittleEndian.Uint64(l.wrs[fenceAt[j]].Local)
						l.n.setHint(fenceOf(q), fw)
						blocks, viaOwner := l.fenceBlocks(fw, g)
						if blocks {
							out.LockWord = fw
							wordUndo = append(wordUndo, k)
							if r, ok := l.follow(fw, g.route); ok && canFollow {
								follow[g.i] = r
							}
							continue
						}
						foreign = viaOwner
					}
					l.n.Stats.WordCASes.Add(1)
					l.n.setHint(wordOf(q), free)
					if store.IsOwnerSentinel(v) && v != free {
						l.n.Stats.Reclaimed.Add(1)
					}
					l.granted(reqs, res, g, slot, v)
					if foreign {
						// Another activation of this owner holds the
						// fence: leave 0, never this cohort's sentinel,
						// and do not mark (see "Key-group fences").
						out.Release, out.ClearWhenEmpty = 0, true
						continue
					}
					if g.route.Local && !g.already {
						mk := markKey{g.route.Cohort, g.epoch, q.Tag}
						marks[mk] = append(marks[mk], slotKey(q))
					}
					continue
				}
				if v == Sentinel(g.route.Cohort, g.epoch, true) && g.already {
					l.granted(reqs, res, g, slot, free) // held by this attempt already
					continue
				}
				out.CASFailed++
				switch {
				case attempt+1 >= maxWordAttempts:
					out.Status, out.LockWord = occ.LockConflict, v
					undo = append(undo, g)
				case v == 0 || v == free:
					// A wrong hint: the word was cleared by a local delete,
					// or marked by another grantee of this activation (a
					// remote one, whose marks the table does not learn).
					// Both are free for this grantee; CAS again from it.
					expect[k] = v
					next = append(next, k)
				case store.IsFreeSentinel(v):
					if ok, _ := l.retired(v, g.route, g.epoch); ok || l.takeable(v, g) {
						expect[k] = v
						next = append(next, k)
						continue
					}
					// A free sentinel of an activation that may be active:
					// only its own grantees may take it. Ask its owner.
					out.Status, out.LockWord = occ.LockRedirect, v
					undo = append(undo, g)
					if r, ok := l.follow(v, g.route); ok {
						follow[g.i] = r
					}
				default: // a CAS tag or a held sentinel: locked by another path or owner
					out.Status, out.LockWord = occ.LockConflict, v
					out.Retired = l.heldRetired(v, g.route, g.epoch)
					undo = append(undo, g)
				}
			}
			if len(afterClaim) > 0 {
				l.fencedAfterClaim(reqs, gs, afterClaim, seen, expect, write, fenced)
			}
			if len(unknown) > 0 {
				undo = append(undo, l.resolve(ctx, reqs, res, gs, unknown)...)
				for _, k := range unknown {
					// A CAS that applied, but whose fence was not read:
					// give the word back rather than trust it.
					if g := gs[k]; needFence[k] && res[g.i].Status == occ.LockGranted {
						q := &reqs[g.i]
						delete(l.grants, grantKey{uint32(q.Ref.Table), q.SlotAddr, q.Tag})
						res[g.i].Status = occ.LockRedirect
						wordUndo = append(wordUndo, k)
					}
				}
			}
		}
		todo = next
	}
	if len(wordUndo) > 0 {
		undo = append(undo, l.giveBack(ctx, reqs, res, gs, wordUndo, follow)...)
	}
	for mk, keys := range marks {
		l.n.svc.Mark(mk.cohort, mk.epoch, mk.tag, keys)
	}
	l.release(undo, reqs)
}

// mayFenceWrite reports whether grant g may set its lock word by a fenced
// WRITE over the word its coordinator saw (F4 of "Key-group fences"): a
// word the grant may replace, read with the record in the slot (or the
// slot empty in a partitioned table) less than FencedReadAge before the
// asking, and after the fence was set — by the local table's trust (fs),
// or, for a remote grant, by the owner's fence age in its reply
// (g.fenceSince; the owner gives none for a slot it marked).
func (l *Locker) mayFenceWrite(q *occ.LockRequest, g ownerGrant, fs fenceState) bool {
	if g.already || !q.SeenKG || !l.fenceable(q.Seen, g) || g.asked.Sub(q.SeenAt) >= l.n.cfg.FencedReadAge {
		return false
	}
	if g.route.Local {
		return fs.trusted && fs.seenAfter && (g.from == 0 || g.from == q.Seen)
	}
	return g.from == 0 && !g.fenceSince.IsZero() && q.SeenAt.After(g.fenceSince)
}

// expectFor returns the value grant g's lock-word CAS expects: this
// node's hint if it is this activation's free sentinel, else the word seen
// (by the coordinator when it located the slot, or since) if that is free
// for this grant, else 0.
func (l *Locker) expectFor(q *occ.LockRequest, g ownerGrant, seen uint64) uint64 {
	free := Sentinel(g.route.Cohort, g.epoch, false)
	switch {
	case g.from != 0:
		return g.from
	case l.n.hint(wordOf(q)) == free, seen == free:
		return free
	case store.IsFreeSentinel(seen):
		if ok, _ := l.retired(seen, g.route, g.epoch); ok || l.takeable(seen, g) {
			return seen
		}
	}
	return 0
}

// fencedAfterClaim decides, for grants whose claim of their key group's
// fence succeeded and whose READ in the claim's doorbell — executed at the
// memory node after the claim's CAS — found the record in the slot (or the
// slot empty, in a key-group-partitioned table) (ks; seen holds the words
// read), whether the next doorbell sets the word by fenced WRITE: the
// table trusts the fence now, and the word is one a fenced WRITE may
// replace. Otherwise the grant CASes from the word read, if that is free
// for it.
func (l *Locker) fencedAfterClaim(reqs []occ.LockRequest, gs []ownerGrant, ks []int, seen, expect []uint64, write, fenced []bool) {
	qs := make([]FenceQuery, len(ks))
	for j, k := range ks {
		g := gs[k]
		qs[j] = FenceQuery{Cohort: g.route.Cohort, Epoch: g.epoch, KeyGroup: control.KeyGroup(reqs[g.i].KeyGroup)}
	}
	for j, st := range l.n.svc.FenceStates(qs) {
		k := ks[j]
		g := gs[k]
		if st.Trusted && l.fenceable(seen[k], g) {
			write[k], fenced[k] = true, true
			continue
		}
		expect[k] = l.expectFor(&reqs[g.i], g, seen[k])
	}
}

// retired reports whether the free owner sentinel w = S(c', e') guards
// nothing for a lock of route r (granted at install epoch e when r is
// owned), so that the lock may take the word over by CAS:
//
//   - the same cohort at another epoch: retired iff e' < e (the table
//     granting at e was installed after the activation at e' was frozen,
//     drained or fenced, and retired);
//   - another cohort, or the MN CAS path: retired iff the resolver's map
//     (epoch m) does not own c' and e' ≤ m. An activation installed at
//     e' ≤ m that map m no longer shows was frozen and drained (or fenced)
//     before m was published, and never grants again. If e' > m the map is
//     stale (the activation may be newer than it): refused, and atLeast
//     says which epoch to refresh to. If c' is owned in the map, w may be
//     its current activation's sentinel (the map has no install epochs):
//     refused; only c' grantees take such a word.
//
// Epochs compare in their 30-bit sentinel field.
func (l *Locker) retired(w uint64, r Route, e uint64) (ok bool, atLeast uint64) {
	c, we := SentinelCohort(w), SentinelEpoch(w)
	if r.Owned && c == uint64(r.Cohort)&cohortMask {
		return we < e&epochMask, 0
	}
	cr, isCR := l.n.res.(CohortResolver)
	if !isCR {
		return false, 0
	}
	owned, m := cr.CohortOwned(control.CohortID(c))
	switch {
	case owned:
		return false, 0
	case we > m&epochMask:
		return false, we
	}
	return true, 0
}

// heldRetired reports whether w is a held owner sentinel H(c',e') whose
// activation is retired for a lock of route r at epoch e (see retired):
// it grants no more, so whoever holds w got it before the retirement, and
// a word still in place a transaction's lifetime later is a dead holder's
// (occ.LockResult.Retired; the engine's redo log repairs it).
func (l *Locker) heldRetired(w uint64, r Route, e uint64) bool {
	if !store.IsOwnerSentinel(w) || !store.SentinelHeld(w) {
		return false
	}
	ok, _ := l.retired(store.FreeSentinel(w), r, e)
	return ok
}

// takeable reports whether grant g may take over, by CAS, the free sentinel
// w = S(c',e') of another cohort c' ≠ c of g's owner (see "Re-cut cohorts"
// in the package documentation): while g holds its table grant, the owner's
// table grants the slot to no other cohort and has dropped any other
// cohort's mark of it, so only CASes compete for w. Conditions: the CAS is
// posted within the WRITE lease of the grant (so it lands before the grant
// can be fenced and the slot re-marked), and (c',e') is installed in the
// owner's table — asked of the table for a local grant; for a remote one,
// the map places c' on the same owner and e' is not newer than the map (an
// activation of c' elsewhere at an epoch ≤ the map's was retired before
// that map was published, A1).
func (l *Locker) takeable(w uint64, g ownerGrant) bool {
	if !g.route.Owned || !g.leased || SentinelCohort(w) == uint64(g.route.Cohort)&cohortMask ||
		l.n.cfg.WriteLease <= 0 || time.Since(g.asked) >= l.n.cfg.WriteLease {
		return false
	}
	if g.route.Local {
		return l.n.svc != nil && l.n.svc.InstalledSentinel(w)
	}
	cp, ok := l.n.res.(CohortPlacer)
	if !ok {
		return false
	}
	owner, owned, m := cp.CohortOwner(control.CohortID(SentinelCohort(w)))
	return owned && owner == g.route.Owner && SentinelEpoch(w) <= m&epochMask
}

// follow returns the route to the owner of the cohort c' of a free
// sentinel w = S(c',e') that refused a lock of route r: the lock is asked
// again of c' (an ordinary grant of c' — the owner's table does not check
// key groups — whose CAS expects S(c',e') when e' is the install epoch of c'
// there, or takes over an older epoch's sentinel). ok is false when c' is
// r's own cohort (then the map is stale), not placed in the map (retired:
// see retired), or newer than the map, or when the Resolver cannot say.
func (l *Locker) follow(w uint64, r Route) (Route, bool) {
	c := control.CohortID(SentinelCohort(w))
	if r.Owned && c == r.Cohort&cohortMask {
		return Route{}, false
	}
	cp, ok := l.n.res.(CohortPlacer)
	if !ok {
		return Route{}, false
	}
	owner, owned, m := cp.CohortOwner(c)
	if !owned || SentinelEpoch(w) > m&epochMask {
		return Route{}, false
	}
	return Route{Owned: true, Cohort: c, Owner: owner, Local: owner == l.n.cfg.Self, Epoch: m}, true
}

// granted records a granted owner-path lock; orig is the word the grant
// replaced (S(c,e) when unknown).
func (l *Locker) granted(reqs []occ.LockRequest, res []occ.LockResult, g ownerGrant, slot []byte, orig uint64) {
	q := &reqs[g.i]
	out := &res[g.i]
	out.Status, out.Slot = occ.LockGranted, slot
	// Released to the free sentinel, so the next grant here WRITEs. A slot
	// left without the requested record (empty, or another record: a stale
	// address) is cleared to 0 instead, so that any path may claim it and
	// no other record keeps this cohort's mark: by a local grantee, which
	// unmarks it in the table in Released; by a remote grantee only if the
	// word it replaced was not S(c,e) — then the slot is not marked at the
	// owner (a marked word is S or H of the activation), and while it holds
	// the grant nobody marks it. Remote grantees cannot unmark (the owner
	// RPC has no field for it), so over a possibly marked word they leave
	// S(c,e).
	free := Sentinel(g.route.Cohort, g.epoch, false)
	out.Release, out.ClearWhenEmpty = free, g.route.Local || orig != free
	l.grants[grantKey{uint32(q.Ref.Table), q.SlotAddr, q.Tag}] = grant{route: g.route, epoch: g.epoch}
}

// resolve settles lock-word CASes and WRITEs whose outcome was lost: it
// re-reads the slots until ResolveTimeout. While this holder has the table
// grant nobody else can set the held sentinel of this cohort and epoch, so
// finding it means our verb applied. It returns the grants to release in the table.
// If the memory node stays unreachable the lock is reported LockUnknown and
// the table grant is kept (it is fenced with the cohort): releasing it could
// let another holder take the record while our CAS may still land.
func (l *Locker) resolve(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, gs []ownerGrant, ks []int) []ownerGrant {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.n.cfg.ResolveTimeout)
	defer cancel()
	backoff := time.Millisecond
	for {
		wrs := make([]rdma.WorkRequest, len(ks))
		for j, k := range ks {
			q := &reqs[gs[k].i]
			wrs[j] = rdma.WorkRequest{ID: uint64(k), Op: rdma.OpRead, RKey: q.Table.Region.RKey, RemoteAddr: q.SlotAddr, Local: make([]byte, q.Table.SlotSize)}
		}
		cs, err := rdma.Exec(c, l.qp, wrs...)
		if err == nil && rdma.FirstError(cs) == nil {
			l.n.Stats.Resolved.Add(uint64(len(ks)))
			var undo []ownerGrant
			for j, k := range ks {
				g := gs[k]
				w := binary.LittleEndian.Uint64(wrs[j].Local[store.LockOffset:])
				if w == Sentinel(g.route.Cohort, g.epoch, true) {
					l.granted(reqs, res, g, wrs[j].Local, Sentinel(g.route.Cohort, g.epoch, false))
					continue
				}
				res[g.i].Status, res[g.i].LockWord = occ.LockConflict, w
				undo = append(undo, g)
			}
			return undo
		}
		select {
		case <-c.Done():
			for _, k := range ks {
				res[gs[k].i] = occ.LockResult{Status: occ.LockUnknown, Path: pathOf(gs[k].route), CAS: res[gs[k].i].CAS}
			}
			l.n.Stats.Unresolved.Add(uint64(len(ks)))
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// acquireFallback takes the locks of unowned key groups through the
// fallback locker. The fallback reports an owner sentinel as LockRedirect: a
// held one is a lock (an owner's holder, possibly of a cohort since
// evicted, or this node's map is stale) and stays refused; a free one is
// taken over by CAS (tag expected the sentinel) only if its activation is
// retired by this node's map (see retired: its cohort is not placed in the
// map and its epoch is not newer than the map); otherwise it stays a
// redirect, after refreshing the map if the sentinel is newer than it.
func (l *Locker) acquireFallback(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, idx []int,
	follow map[int]Route, canFollow bool) error {
	if l.fb == nil {
		for _, i := range idx {
			res[i] = occ.LockResult{Status: occ.LockRedirect, Path: occ.PathMNCAS}
		}
		return nil
	}
	// Records the coordinator saw with a free sentinel of a retired
	// activation are taken over directly, by one CAS from that sentinel;
	// the others go to the fallback locker.
	var reclaim, viaFB []int
	for _, i := range idx {
		if w := reqs[i].Seen; store.IsFreeSentinel(w) {
			if ok, _ := l.retired(w, Route{}, 0); ok {
				res[i] = occ.LockResult{Path: occ.PathMNCAS, LockWord: w}
				reclaim = append(reclaim, i)
				continue
			}
			if r, ok := l.follow(w, Route{}); ok && canFollow {
				res[i] = occ.LockResult{Status: occ.LockRedirect, Path: occ.PathMNCAS, LockWord: w}
				follow[i] = r
				continue
			}
		}
		viaFB = append(viaFB, i)
	}
	if len(viaFB) > 0 {
		sub := make([]occ.LockRequest, len(viaFB))
		subRes := make([]occ.LockResult, len(viaFB))
		for j, i := range viaFB {
			sub[j] = reqs[i]
		}
		if err := l.fb.Acquire(ctx, sub, subRes); err != nil {
			if len(reclaim) == 0 {
				return err
			}
			for j := range subRes {
				subRes[j] = occ.LockResult{Status: occ.LockConflict, Path: occ.PathMNCAS}
			}
		}
		var refresh uint64
		var fenced []int // taken from 0 while an owner may hold the key group's fence
		for j, i := range viaFB {
			res[i] = subRes[j]
			res[i].Retired = l.heldRetired(subRes[j].LockWord, Route{}, 0)
			if fw := subRes[j].FenceWord; subRes[j].Status == occ.LockGranted && reqs[i].Fence != 0 {
				l.n.setHint(fenceOf(&reqs[i]), fw)
				if refuses, atLeast := l.mnFenceRefuses(fw); refuses {
					fenced = append(fenced, i)
					if r, ok := l.follow(fw, Route{}); ok && canFollow {
						follow[i] = r
					}
					refresh = max(refresh, atLeast)
				}
				continue
			}
			if w := subRes[j].LockWord; subRes[j].Status == occ.LockRedirect && store.IsFreeSentinel(w) {
				ok, atLeast := l.retired(w, Route{}, 0)
				if ok {
					reclaim = append(reclaim, i)
				} else if r, ok := l.follow(w, Route{}); ok && canFollow {
					follow[i] = r
				}
				refresh = max(refresh, atLeast)
			}
		}
		if len(fenced) > 0 {
			l.giveBackTags(ctx, reqs, res, fenced, follow)
		}
		if refresh > 0 {
			l.n.res.Refresh(ctx, refresh) // met a sentinel newer than the map
		}
	}
	for start := 0; start < len(reclaim); start += rdma.MaxBatch / 3 {
		l.reclaim(ctx, reqs, res, reclaim[start:min(start+rdma.MaxBatch/3, len(reclaim))], follow, canFollow)
	}
	return nil
}

// reclaim takes over free sentinels of retired activations for the MN CAS
// path: CAS(sentinel → tag) and a READ of the slot, in one doorbell, and a
// READ of the record's fence word after the CAS (F2 of "Key-group fences":
// the word is given back when an owner may hold the fence).
func (l *Locker) reclaim(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, reclaim []int,
	follow map[int]Route, canFollow bool) {
	l.wrs = l.wrs[:0]
	at := make([]int, len(reclaim))
	for j, i := range reclaim {
		q := &reqs[i]
		at[j] = len(l.wrs)
		l.wrs = append(l.wrs,
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: q.Table.Region.RKey,
				RemoteAddr: q.SlotAddr + store.LockOffset, Compare: res[i].LockWord, Swap: q.Tag},
			rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: q.Table.Region.RKey,
				RemoteAddr: q.SlotAddr, Local: make([]byte, q.Table.SlotSize)})
		if q.Fence != 0 {
			l.wrs = append(l.wrs, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: q.FenceRKey,
				RemoteAddr: q.Fence, Local: make([]byte, 8)})
		}
	}
	cs, _ := rdma.Exec(ctx, l.qp, l.wrs...)
	var fenced []int
	var refresh uint64
	for j, i := range reclaim {
		out := &res[i]
		f := at[j]
		if f >= len(cs) || cs[f].Status != rdma.StatusSuccess {
			// The CAS to our tag may have applied: the coordinator's abort
			// releases it by CAS(tag → 0).
			*out = occ.LockResult{Status: occ.LockUnknown, Path: occ.PathMNCAS, CAS: out.CAS + 1, CASFailed: out.CASFailed}
			continue
		}
		out.CAS++
		if cs[f].Value != out.LockWord {
			out.CASFailed++
			out.LockWord = cs[f].Value
			out.Status = occ.LockConflict
			continue
		}
		if q := &reqs[i]; q.Fence != 0 {
			if f+2 >= len(cs) || cs[f+2].Status != rdma.StatusSuccess {
				*out = occ.LockResult{Status: occ.LockUnknown, Path: occ.PathMNCAS, CAS: out.CAS, CASFailed: out.CASFailed}
				continue
			}
			fw := binary.LittleEndian.Uint64(l.wrs[f+2].Local)
			l.n.setHint(fenceOf(q), fw)
			if refuses, atLeast := l.mnFenceRefuses(fw); refuses {
				out.FenceWord = fw
				fenced = append(fenced, i)
				if r, ok := l.follow(fw, Route{}); ok && canFollow {
					follow[i] = r
				}
				refresh = max(refresh, atLeast)
				continue
			}
		}
		l.n.Stats.Reclaimed.Add(1)
		out.Status, out.Release, out.LockWord = occ.LockGranted, 0, 0
		if f+1 < len(cs) && cs[f+1].Status == rdma.StatusSuccess {
			out.Slot = l.wrs[f+1].Local
		}
	}
	if len(fenced) > 0 {
		l.giveBackTags(ctx, reqs, res, fenced, follow)
	}
	if refresh > 0 {
		l.n.res.Refresh(ctx, refresh)
	}
}

// Released implements occ.Locker: owner-path locks are released in their
// owner's table (after the coordinator stored the release word: the free
// sentinel, or 0 for a slot a local grantee left empty, which is unmarked
// in the same step), the rest are passed to the fallback locker.
func (l *Locker) Released(reqs []occ.LockRequest, res []occ.LockResult) {
	var fbReqs []occ.LockRequest
	var fbRes []occ.LockResult
	type relKey struct {
		route Route
		epoch uint64
		tag   uint64
	}
	rel := map[relKey][]Key{}
	cleared := map[relKey][]Key{}
	var order []relKey
	for i := range reqs {
		if i >= len(res) || res[i].Status != occ.LockGranted {
			continue
		}
		q := &reqs[i]
		if res[i].Path == occ.PathMNCAS {
			fbReqs, fbRes = append(fbReqs, *q), append(fbRes, res[i])
			continue
		}
		gk := grantKey{uint32(q.Ref.Table), q.SlotAddr, q.Tag}
		g, ok := l.grants[gk]
		if !ok {
			continue
		}
		delete(l.grants, gk)
		k := relKey{route: g.route, epoch: g.epoch, tag: q.Tag}
		if _, ok := rel[k]; !ok {
			order = append(order, k)
		}
		rel[k] = append(rel[k], slotKey(q))
		if res[i].Release == 0 { // the coordinator cleared the word: unmark it
			cleared[k] = append(cleared[k], slotKey(q))
			l.n.setHint(wordOf(q), 0)
		}
	}
	for _, k := range order {
		keys := rel[k]
		for start := 0; start < len(keys); start += maxKeysPerRPC {
			l.releaseKeys(k.route, k.epoch, k.tag, keys[start:min(start+maxKeysPerRPC, len(keys))], cleared[k])
		}
	}
	if len(fbReqs) > 0 && l.fb != nil {
		l.fb.Released(fbReqs, fbRes)
	}
}

// release drops table grants whose lock word could not be taken.
func (l *Locker) release(gs []ownerGrant, reqs []occ.LockRequest) {
	type relKey struct {
		route Route
		epoch uint64
		tag   uint64
	}
	rel := map[relKey][]Key{}
	var order []relKey
	for _, g := range gs {
		if g.already {
			continue // held before this request; its owner releases it
		}
		k := relKey{route: g.route, epoch: g.epoch, tag: reqs[g.i].Tag}
		if _, ok := rel[k]; !ok {
			order = append(order, k)
		}
		rel[k] = append(rel[k], slotKey(&reqs[g.i]))
	}
	for _, k := range order {
		l.releaseKeys(k.route, k.epoch, k.tag, rel[k], nil)
	}
}

// releaseKeys releases table grants; cleared (local grants only) are keys
// whose lock word was left 0, unmarked in the same step.
func (l *Locker) releaseKeys(r Route, epoch uint64, tag uint64, keys []Key, cleared []Key) {
	if r.Local {
		if _, err := l.n.svc.Release(ReleaseRequest{Cohort: r.Cohort, Epoch: epoch, Holder: tag, Keys: keys, Cleared: cleared}); err != nil {
			l.n.Stats.UnlockFailures.Add(1)
		}
		return
	}
	l.unlockRPC(r, epoch, tag, keys)
}

// unlockRPC releases locks at a remote owner, best effort: a release that
// cannot be delivered leaves the holder in the owner's table until it is
// fenced (the lock word itself is already free).
func (l *Locker) unlockRPC(r Route, epoch uint64, tag uint64, keys []Key) {
	req := &messages.UnlockRequest{TxnId: tag, CohortId: r.Cohort, Epoch: epoch, Records: recordRefs(keys),
		Requester: l.n.cfg.Self, RequestId: l.n.reqID.Add(1)}
	for range l.n.cfg.RPCAttempts {
		c, cancel := context.WithTimeout(context.Background(), l.n.cfg.RPCTimeout)
		rep, err := l.n.tr.Unlock(c, r.Owner, req)
		cancel()
		if err == nil && rep != nil {
			return
		}
	}
	l.n.Stats.UnlockFailures.Add(1)
}

func recordRefs(keys []Key) []*messages.RecordRef {
	out := make([]*messages.RecordRef, len(keys))
	for i, k := range keys {
		out[i] = &messages.RecordRef{Table: uint32(k.Table), Key: k.Key}
	}
	return out
}
