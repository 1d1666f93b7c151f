package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/actors/cohort"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
)

// NodeConfig configures a compute node's data plane.
type NodeConfig struct {
	// Name identifies the node in results and logs. Required.
	Name string
	// ID is the node's number, unique in the cluster and below 2^22; it goes
	// into lock tags. Default 0.
	ID uint32
	// Coordinators is the number of coordinator actors, i.e. transactions the
	// node runs at once. Default 8: enough to keep a memory node busy on two
	// cores without oversubscribing them.
	Coordinators int
	// AtomicActors is the number of atomic actors (each with a queue pair)
	// serving the memory-node lock path. Default 2.
	AtomicActors int
	// MailboxSize bounds every actor's mailbox. Default 1024.
	MailboxSize int
	// RequestTimeout bounds one transaction attempt and one lock batch.
	// Default 10 s: far above any healthy attempt, short enough to surface a
	// dead memory node.
	RequestTimeout time.Duration
	// ResultCacheSize bounds the final outcomes kept by transaction id, so a
	// resubmitted transaction is answered from its recorded outcome instead of
	// running twice. Default 65,536: at 5,000 transactions a second on a
	// node, 13 s of retries. Outcomes are kept marshaled: a bank
	// transfer's costs about 140 bytes with the map's overhead (heap in
	// use, runtime.MemStats, over 65,536 entries), so a full cache holds
	// some 9 MiB.
	ResultCacheSize int
	// Engine configures the OCC engine (Node is set from ID).
	Engine occ.Config
	// RedoRecordBytes caps a coordinator's redo record on the memory node
	// (occ.RedoConfig.RecordBytes): every commit that writes first writes
	// its record there, so that locks left held by a crashed holder can be
	// ended as their transaction ended (occ, "Crash recovery"): NewNode
	// recovers its previous incarnation's, and the node repairs, on
	// contact, lock words that refused its transactions and stayed in
	// place 2·(RequestTimeout + Engine.CleanupTimeout) (30 s by default).
	// Default 256 KiB, far above the embedded workloads' largest write
	// set (a TPC-C delivery: about 130 records of at most a few hundred
	// bytes). 0 turns the
	// log, the recovery and the repair off — only for a node whose ID may
	// be shared with a live node, which the recovery would take for a
	// crashed incarnation.
	RedoRecordBytes int
	// Logger receives the node's logs and protoactor's, at warn level by
	// default. Default: slog to stderr at warn.
	Logger *slog.Logger
	// System, when set, is the actor system the node's actors live in (one
	// with a remote endpoint, so that other nodes reach its owner and
	// OwnerMap endpoints); the node does not shut it down. nil: the node
	// creates a private system and shuts it down on Close.
	System *actor.ActorSystem
	// Ownership, when set, turns on the owner path: the node's locks go
	// through its owner table, owner RPC or the MN CAS fallback as the
	// OwnerMaps it receives say, and its profiler feeds the planner. nil:
	// every lock by MN CAS (mn-only).
	Ownership *OwnershipConfig
	// TxnLatency, when set, receives the seconds each transaction spent in
	// Submit (queueing for a coordinator included; answers replayed from
	// the result cache excluded), for a latency histogram.
	// metrics.Histogram and metrics.PrometheusHistogram fit. It is called
	// concurrently from every submitting goroutine.
	TxnLatency interface{ Update(seconds float64) }
}

// DefaultNodeConfig returns the defaults documented on NodeConfig.
func DefaultNodeConfig(name string) NodeConfig {
	// Exactly once: a client that retries a transaction whose reply it
	// lost, on this node or another, must not have it committed twice.
	eng := occ.DefaultConfig()
	eng.ExactlyOnce = true
	return NodeConfig{Name: name, Coordinators: 8, AtomicActors: 2, MailboxSize: 1024,
		RequestTimeout: 10 * time.Second, ResultCacheSize: 1 << 16, Engine: eng,
		RedoRecordBytes: occ.DefaultRedoRecordBytes}
}

// Validate reports every problem at once.
func (c NodeConfig) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("node: Name is required"))
	} else if !utf8.ValidString(c.Name) {
		// Every result carries it: a result that cannot be marshaled
		// could be neither sent nor recorded for replay.
		errs = append(errs, fmt.Errorf("node: Name %q is not valid UTF-8", c.Name))
	}
	if c.Coordinators < 1 || c.Coordinators > 4096 {
		errs = append(errs, fmt.Errorf("node: Coordinators %d, want 1..4096", c.Coordinators))
	}
	if c.AtomicActors < 1 || c.AtomicActors > 256 {
		errs = append(errs, fmt.Errorf("node: AtomicActors %d, want 1..256", c.AtomicActors))
	}
	if c.MailboxSize < 1 {
		errs = append(errs, fmt.Errorf("node: MailboxSize %d must be positive", c.MailboxSize))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("node: RequestTimeout %v must be positive", c.RequestTimeout))
	}
	if c.ResultCacheSize < 1 {
		errs = append(errs, fmt.Errorf("node: ResultCacheSize %d must be positive", c.ResultCacheSize))
	}
	e := c.Engine
	e.Node = c.ID
	if err := e.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RedoRecordBytes != 0 {
		if err := c.redoConfig().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c NodeConfig) redoConfig() occ.RedoConfig {
	// A lock word still in place this long after it refused a lock has no
	// live holder: an attempt holds a lock at most RequestTimeout plus its
	// write-back's CleanupTimeout; twice that, for a margin.
	return occ.RedoConfig{Node: c.ID, Slots: c.Coordinators, RecordBytes: c.RedoRecordBytes,
		RepairAfter: 2 * (c.RequestTimeout + c.Engine.CleanupTimeout)}
}

// fencedReadAge returns the owner lockers' FencedReadAge for a configured
// value (0: the default) and the repair sweep's RepairAfter: at most a
// quarter of it, so that the sweep never ends a word inside a fenced
// WRITE's window (package actors/owner, "Key-group fences").
func fencedReadAge(configured, repairAfter time.Duration) time.Duration {
	if configured == 0 {
		configured = owner.DefaultFencedReadAge
	}
	return min(configured, repairAfter/4)
}

// Node is a compute node's data plane: an actor system with coordinator
// actors that run submitted transactions on the OCC engine, and atomic actors
// for the memory-node lock path.
type Node struct {
	cfg    NodeConfig
	system *actor.ActorSystem
	wl     workload.Workload
	engine *occ.Engine
	coords []*actor.PID
	atoms  []*actor.PID
	qps    []rdma.QueuePair
	next   atomic.Uint64
	cache  resultCache
	log    *slog.Logger
	dev    rdma.Device
	redo   *occ.RedoLog
	// recovery is what NewNode's redo-log recovery did.
	recovery occ.Recovery
	// sweepStop and sweepDone stop the repair sweep's goroutine.
	sweepStop, sweepDone chan struct{}
	own                  *ownership
	stats                nodeStats
	// ownSystem: the node created system and shuts it down on Close.
	ownSystem bool
}

// NewNode starts a node on dev for the given workload's tables (already
// created with store.Create).
func NewNode(cfg NodeConfig, dev rdma.Device, layout *store.Layout, wl workload.Workload) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n := &Node{cfg: cfg, wl: wl, log: logger, dev: dev}
	n.cache.init(cfg.ResultCacheSize)
	n.system = cfg.System
	if n.system == nil {
		n.ownSystem = true
		n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return logger.With("component", "protoactor", "node", cfg.Name)
		}))
	}
	fail := func(err error) (*Node, error) {
		n.Close()
		return nil, err
	}
	mailbox := actor.WithMailbox(actor.Bounded(cfg.MailboxSize))
	for range cfg.AtomicActors {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			return fail(err)
		}
		n.qps = append(n.qps, qp)
		a := &atomicActor{locker: occ.NewCASLocker(qp), timeout: cfg.RequestTimeout}
		n.atoms = append(n.atoms, n.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, mailbox)))
	}
	var nextAtom atomic.Uint64
	engCfg := cfg.Engine
	engCfg.Node = cfg.ID
	var ownerQPs []rdma.QueuePair
	if cfg.Ownership != nil {
		oc := *cfg.Ownership
		if oc.Logger == nil {
			oc.Logger = n.log
		}
		oc.Owner.FencedReadAge = fencedReadAge(oc.Owner.FencedReadAge, cfg.redoConfig().RepairAfter)
		o, err := newOwnership(oc, cfg.Name, wl)
		if err != nil {
			return fail(err)
		}
		n.own = o
		// One queue pair per coordinator for the owner path's lock-word
		// verbs (a coordinator's locker is single-threaded).
		for range cfg.Coordinators {
			qp, err := dev.CreateQP(rdma.QPConfig{})
			if err != nil {
				return fail(err)
			}
			n.qps = append(n.qps, qp)
			ownerQPs = append(ownerQPs, qp)
		}
		// One more for the key-group fences the node gives back.
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			return fail(err)
		}
		n.qps = append(n.qps, qp)
		o.unfenceQP = qp
		if ix, ok := wl.Rule().(workload.KeyGroupIndexer); ok {
			engCfg.KeyGroupIndex = ix.KeyGroupIndex
		}
		cc := cohort.DefaultConfig()
		cc.MaxActivations, cc.MailboxSize = o.svc.Config().MaxCohorts, cfg.MailboxSize
		if o.activator, err = cohort.Spawn(n.system, cc, o, o.svc); err != nil {
			return fail(err)
		}
		o.root = n.system.Root
		if _, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &ownerMapActor{o: o} }, mailbox), OwnerMapActorName); err != nil {
			return fail(err)
		}
		mig := &migrationActor{o: o, slot: make(chan struct{}, maxMigrationsInFlight)}
		if _, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return mig }, mailbox), MigrationActorName); err != nil {
			return fail(err)
		}
	}
	var err error
	n.engine, err = occ.NewEngine(layout, func() occ.Locker {
		pid := n.atoms[nextAtom.Add(1)%uint64(len(n.atoms))]
		var l occ.Locker = &atomicLocker{root: n.system.Root, pid: pid, timeout: cfg.RequestTimeout}
		if n.own != nil && len(ownerQPs) > 0 {
			qp := ownerQPs[0]
			ownerQPs = ownerQPs[1:]
			l = n.own.locker(qp, l)
		}
		return l
	}, wl.Rule().KeyGroup, engCfg)
	if err != nil {
		return fail(err)
	}
	if cfg.RedoRecordBytes != 0 {
		// Before any coordinator exists: every CAS tag of this node's
		// number is a previous incarnation's.
		start := time.Now()
		if n.redo, n.recovery, err = occ.OpenRedoLog(context.Background(), dev, layout, cfg.redoConfig()); err != nil {
			return fail(fmt.Errorf("node %s: redo log: %w", cfg.Name, err))
		}
		if n.recovery.Scanned {
			n.log.Warn("recovered the memory-node locks a previous incarnation left held", "node", cfg.Name,
				"slots_scanned", n.recovery.Slots, "redone", n.recovery.Redone, "released", n.recovery.Released,
				"took", time.Since(start).Round(time.Millisecond))
		}
		if err := n.engine.UseRedoLog(n.redo); err != nil {
			return fail(err)
		}
		n.sweepStop, n.sweepDone = make(chan struct{}), make(chan struct{})
		go n.sweep(layout, cfg.redoConfig().RepairAfter)
	}
	for range cfg.Coordinators {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			return fail(err)
		}
		n.qps = append(n.qps, qp)
		c := &coordinatorActor{node: n, coord: n.engine.NewCoordinator(qp)}
		n.coords = append(n.coords, n.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }, mailbox)))
	}
	if n.own != nil {
		n.own.stop, n.own.done = make(chan struct{}), make(chan struct{})
		go n.own.run()
	}
	return n, nil
}

// sweep runs the redo log's repair of suspect lock words (occ.RedoLog.Sweep)
// every eighth of repairAfter (at least every 100 ms, at most every 5 s),
// until Close.
func (n *Node) sweep(layout *store.Layout, repairAfter time.Duration) {
	defer close(n.sweepDone)
	t := time.NewTicker(min(max(repairAfter/8, 100*time.Millisecond), 5*time.Second))
	defer t.Stop()
	for {
		select {
		case <-n.sweepStop:
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
			st, err := n.redo.Sweep(ctx, layout, now)
			cancel()
			if err != nil {
				n.log.Warn("repair sweep", "node", n.cfg.Name, "err", err)
			}
			if n.own != nil {
				ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
				ost, err := n.expireGrants(ctx, layout, repairAfter)
				cancel()
				if err != nil {
					n.log.Warn("repair of stale owner-table grants", "node", n.cfg.Name, "err", err)
				}
				st.Redone, st.Released, st.Moot = st.Redone+ost.Redone, st.Released+ost.Released, st.Moot+ost.Moot
			}
			if st.Redone+st.Released > 0 {
				n.log.Warn("repaired lock words left held by gone holders", "node", n.cfg.Name,
					"redone", st.Redone, "released", st.Released, "moot", st.Moot)
			}
		}
	}
}

// redoCloseTimeout bounds the WRITE that marks the redo log closed at
// Close: a node leaving must not wait long on a slow memory node for what
// only saves its next start a scan.
const redoCloseTimeout = 2 * time.Second

// maxExpiredPerSweep bounds the stale grants one sweep ends (the rest wait
// for the next sweep).
const maxExpiredPerSweep = 256

// expireGrants ends the grants of this node's owner table held longer than
// repairAfter — longer than any transaction attempt can hold a lock, so
// their holder is gone (a grantee that crashed before its unlock reached
// this node, or a lock whose outcome was left unknown): it ends the held
// sentinel the holder may have left on the memory node (finished from the
// holder's redo record if its transaction committed, else released; the
// table pins the keys meanwhile, so no other grantee can take them) and
// then releases the grant, unmarking the slot unless its word is the
// cohort's free sentinel.
func (n *Node) expireGrants(ctx context.Context, layout *store.Layout, repairAfter time.Duration) (occ.RepairStats, error) {
	stale := n.own.svc.StaleLocks(repairAfter.Microseconds(), maxExpiredPerSweep)
	if len(stale) == 0 {
		return occ.RepairStats{}, nil
	}
	keys := make([]owner.Key, len(stale))
	held := make([]occ.HeldWord, len(stale))
	for i, s := range stale {
		keys[i] = s.Key
		held[i] = occ.HeldWord{Table: s.Key.Table, Addr: s.Key.Key, Word: owner.Sentinel(s.Cohort, s.Epoch, true)}
	}
	defer n.own.svc.Unpin(keys) // after the releases below
	st, words, err := n.redo.EndHeld(ctx, layout, held)
	if err != nil {
		return st, err // the grants stay: the next sweep tries again
	}
	for i, s := range stale {
		req := owner.ReleaseRequest{Cohort: s.Cohort, Epoch: s.Epoch, Holder: s.Holder, Keys: []owner.Key{s.Key}}
		if words[i] != owner.Sentinel(s.Cohort, s.Epoch, false) {
			req.Cleared = req.Keys
		}
		if _, err := n.own.svc.Release(req); err != nil {
			return st, err
		}
	}
	return st, nil
}

// RepairStats returns what the node's repair sweep did so far (zero
// without a redo log).
func (n *Node) RepairStats() occ.RepairStats {
	if n.redo == nil {
		return occ.RepairStats{}
	}
	return n.redo.RepairStats()
}

// Recovery reports what the node's start did to the memory-node locks of
// its previous incarnation (occ.OpenRedoLog).
func (n *Node) Recovery() occ.Recovery { return n.recovery }

// System returns the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// HandleOwnerMapPush installs one OwnerMap push (the ownermap actor's work;
// callable directly by an in-process publisher). A node without the owner
// path answers with an error.
func (n *Node) HandleOwnerMapPush(p *messages.OwnerMapPush) *messages.OwnerMapAck {
	if n.own == nil {
		return &messages.OwnerMapAck{Epoch: p.GetEpoch(), Node: n.cfg.Name, Error: "node has no owner path"}
	}
	return n.own.handlePush(p)
}

// Relinquish makes the node stop granting the locks of the cohorts it owns
// and install no new ones (locks already granted are still released). Call
// it before the node leaves the cluster gracefully, so that the planner may
// give its cohorts to other nodes as soon as they see it gone without two
// owners granting at once. Without the owner path it does nothing.
func (n *Node) Relinquish() error {
	if n.own == nil {
		return nil
	}
	return n.own.relinquish()
}

// HandleLock and HandleUnlock serve owner RPCs (the owner endpoint's work;
// callable directly by an in-process transport).
func (n *Node) HandleLock(req *messages.LockRequest) *messages.LockReply {
	if n.own == nil {
		return &messages.LockReply{RequestId: req.GetRequestId(), Status: messages.LockStatus_LOCK_STATUS_ERROR, Error: "node has no owner path"}
	}
	return n.own.svc.HandleLock(req)
}

// HandleUnlock serves an owner unlock RPC; see HandleLock.
func (n *Node) HandleUnlock(req *messages.UnlockRequest) *messages.UnlockReply {
	if n.own == nil {
		return &messages.UnlockReply{RequestId: req.GetRequestId(), Status: messages.LockStatus_LOCK_STATUS_ERROR, Error: "node has no owner path"}
	}
	return n.own.svc.HandleUnlock(req)
}

// CohortCounts returns the cohorts the node owns (grants their locks) and
// those frozen and not yet retired (draining, or handed off and awaiting
// the map that publishes the move); both 0 without the owner path. A
// relinquished node's cohorts count as frozen.
func (n *Node) CohortCounts() (owned, frozen int) {
	if n.own == nil {
		return 0, 0
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	if n.own.relinquished {
		return 0, len(n.own.owned) + len(n.own.frozen)
	}
	return len(n.own.owned), len(n.own.frozen)
}

// RetireErrors returns how many times the node failed to retire a frozen
// cohort for a reason other than waiting for its holders or its drain
// deadline (each such cohort is retried every heartbeat and logged once
// per reason). It stays 0 on a healthy node.
func (n *Node) RetireErrors() uint64 {
	if n.own == nil {
		return 0
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	return n.own.retireErrors
}

// HeldCohorts returns the cohorts the node still holds: owned, or frozen
// and not yet retired (0 without the owner path).
func (n *Node) HeldCohorts() int {
	if n.own == nil {
		return 0
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	return len(n.own.owned) + len(n.own.frozen)
}

// OwnerMapEpoch returns the OwnerMap epoch installed on the node (0 without
// the owner path or before the first map).
func (n *Node) OwnerMapEpoch() uint64 {
	if n.own == nil {
		return 0
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	return n.own.asm.Installed().Epoch
}

// Lease returns the state of the node's owner lease; false when the node
// has none (no owner path, or no planner: OwnershipConfig.Heartbeat nil).
func (n *Node) Lease() (owner.LeaseState, bool) {
	if n.own == nil || n.own.lease == nil {
		return owner.LeaseState{}, false
	}
	return n.own.lease.State(), true
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Submit runs a transaction on one of the node's coordinators and returns its
// result. A transaction id whose final outcome (committed or rolled back) is
// recorded is answered from the record without running again.
func (n *Node) Submit(ctx context.Context, msg *messages.TxnSubmit) (*messages.TxnResult, error) {
	n.stats.noteEpochSeen(msg.GetEpochSeen())
	if out, ok := n.cache.get(msg.GetTxnId()); ok {
		n.stats.replayed.Add(1)
		out.Replayed = true
		return out, nil
	}
	res, err := n.submit(ctx, msg)
	outcome := messages.TxnOutcome_TXN_OUTCOME_ERROR
	if err == nil {
		outcome = res.GetOutcome()
	}
	n.stats.count(msg, outcome)
	return res, err
}

func (n *Node) submit(ctx context.Context, msg *messages.TxnSubmit) (*messages.TxnResult, error) {
	if l := n.cfg.TxnLatency; l != nil {
		defer func(start time.Time) { l.Update(time.Since(start).Seconds()) }(time.Now())
	}
	timeout := n.cfg.RequestTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	// A client's transactions go to one coordinator (by the client bits of
	// the id), so a closed-loop client never queues behind another client's
	// long transaction while a coordinator idles; ids without client bits
	// are spread round-robin.
	slot := msg.GetTxnId() >> 40
	if slot == 0 {
		slot = n.next.Add(1)
	}
	pid := n.coords[slot%uint64(len(n.coords))]
	r, err := n.system.Root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("node %s: submit: %w", n.cfg.Name, err)
	}
	res, ok := r.(*messages.TxnResult)
	if !ok {
		return nil, fmt.Errorf("node %s: unexpected reply %T", n.cfg.Name, r)
	}
	return res, nil
}

// Close stops the actors (after their queued messages) and the actor system.
func (n *Node) Close() error {
	var wg sync.WaitGroup
	var unstopped atomic.Int32
	for _, pid := range append(append([]*actor.PID(nil), n.coords...), n.atoms...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Poison is processed after the messages already queued, so no
			// accepted transaction is dropped.
			if _, err := n.system.Root.PoisonFuture(pid).Result(); err != nil {
				unstopped.Add(1)
			}
		}()
	}
	wg.Wait()
	if n.own != nil && n.own.stop != nil {
		close(n.own.stop)
		<-n.own.done
		n.own.stop = nil
	}
	if n.sweepStop != nil {
		close(n.sweepStop)
		<-n.sweepDone
		n.sweepStop = nil
	}
	var errs []error
	if n.redo != nil && len(n.coords) == n.cfg.Coordinators && unstopped.Load() == 0 {
		// Every coordinator stopped: the next incarnation need not scan,
		// unless a transaction still runs or gave up its write-back (the
		// log checks both). Best effort, bounded: if the memory node does
		// not take the mark, the next incarnation scans, which is safe.
		ctx, cancel := context.WithTimeout(context.Background(), redoCloseTimeout)
		if err := n.redo.Close(ctx, n.dev); err != nil {
			n.log.Warn("redo log not marked closed; the next start will scan", "node", n.cfg.Name, "err", err)
		}
		cancel()
	}
	for _, qp := range n.qps {
		errs = append(errs, qp.Close())
	}
	if n.ownSystem {
		n.system.Shutdown()
	}
	return errors.Join(errs...)
}

// coordinatorActor runs one transaction attempt per TxnSubmit.
type coordinatorActor struct {
	node  *Node
	coord *occ.Coordinator
}

func (c *coordinatorActor) Receive(ctx actor.Context) {
	msg, ok := ctx.Message().(*messages.TxnSubmit)
	if !ok {
		return
	}
	ctx.Respond(c.run(msg))
}

func (c *coordinatorActor) run(msg *messages.TxnSubmit) *messages.TxnResult {
	n := c.node
	start := time.Now()
	res := &messages.TxnResult{TxnId: msg.GetTxnId(), Node: n.cfg.Name, Attempts: msg.GetAttempt()}
	if n.own != nil {
		// The client refreshes its map when a node reports a newer one.
		res.Epoch = n.own.res.Epoch()
	}
	prog, err := n.wl.Program(msg, res)
	if err != nil {
		res.Outcome = messages.TxnOutcome_TXN_OUTCOME_REJECTED
		res.Error = strings.ToValidUTF8(err.Error(), "\uFFFD")
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
	r := c.coord.Run(ctx, msg.GetTxnId(), prog)
	cancel()
	n.stats.add(&r.Counters)
	res.LatencyMicros = uint64(time.Since(start).Microseconds())
	res.Counters = countersProto(r.Counters)
	if r.Err != nil {
		// Valid UTF-8, or the result could not be marshaled (for the wire
		// or the result cache): an error may quote a key's bytes.
		res.Error = strings.ToValidUTF8(r.Err.Error(), "\uFFFD")
	}
	switch r.Outcome {
	case occ.Committed:
		res.Outcome = messages.TxnOutcome_TXN_OUTCOME_COMMITTED
		if r.Replayed {
			// Committed by another attempt (the commit ledger): this one
			// wrote nothing, so its outputs are not the committed ones.
			res.Replayed, res.Output = true, nil
		}
	case occ.RolledBack:
		res.Outcome = messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK
	case occ.Aborted:
		res.Outcome = messages.TxnOutcome_TXN_OUTCOME_ABORTED
		res.Output = nil
	default:
		res.Outcome = messages.TxnOutcome_TXN_OUTCOME_ERROR
		res.Output = nil
	}
	if (r.Outcome == occ.Committed || r.Outcome == occ.RolledBack) && !n.cache.put(msg.GetTxnId(), res) {
		n.log.Error("final outcome not recorded: a retry of the transaction would run it again", "txn", msg.GetTxnId())
	}
	if r.Outcome == occ.Committed && !r.Replayed && n.own != nil {
		n.own.record(msg, r.Counters)
	}
	return res
}

func countersProto(c occ.Counters) *messages.TxnCounters {
	return &messages.TxnCounters{
		Reads: c.Reads, Writes: c.Writes, Inserts: c.Inserts, Deletes: c.Deletes,
		MnCas: c.MNCAS, MnFaa: c.MNFAA, MnCasFailed: c.MNCASFailed,
		LocksLocal: c.LocksLocal, LocksOwnerRpc: c.LocksOwnerRPC, LocksMnCas: c.LocksMNCAS,
		RdmaReads: c.RDMAReads, RdmaWrites: c.RDMAWrites, LockRedirects: c.Redirects,
	}
}

// resultCache keeps the final outcomes of recent transaction ids, bounded by
// evicting the oldest entry (FIFO). Each outcome is kept marshaled: one
// pointer-free block per entry instead of a tree of messages (the result,
// its counters, its output), so that a full cache of 65,536 outcomes per
// node costs a fraction of the memory and the garbage collector does not
// scan into it.
type resultCache struct {
	mu    sync.Mutex
	cap   int
	m     map[uint64][]byte // a messages.TxnResult, marshaled
	order []uint64
	head  int
}

func (c *resultCache) init(capacity int) {
	c.cap = capacity
	c.m = make(map[uint64][]byte, capacity)
	c.order = make([]uint64, 0, capacity)
}

// get returns a fresh copy of the outcome recorded for id.
func (c *resultCache) get(id uint64) (*messages.TxnResult, bool) {
	if id == 0 {
		return nil, false
	}
	c.mu.Lock()
	b, ok := c.m[id]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	r := &messages.TxnResult{}
	if err := proto.Unmarshal(b, r); err != nil {
		return nil, false // marshaled by put from a valid message: cannot happen
	}
	return r, true
}

// put records r's outcome for id; it reports false if r cannot be
// marshaled (then nothing is recorded, and a retry of id runs again).
func (c *resultCache) put(id uint64, r *messages.TxnResult) bool {
	if id == 0 {
		return true
	}
	c.mu.Lock()
	_, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return true
	}
	b, err := proto.Marshal(r)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; ok {
		return true
	}
	if len(c.order) < c.cap {
		c.order = append(c.order, id)
	} else {
		delete(c.m, c.order[c.head])
		c.order[c.head] = id
		c.head = (c.head + 1) % c.cap
	}
	c.m[id] = b
	return true
}

// InstalledMap returns the OwnerMap installed on the node and the roster its
// owner indexes refer to (the one pushed with it, else the static
// OwnershipConfig.Names), read together. Both are shared: callers must not
// modify them.
func (n *Node) InstalledMap() (*control.OwnerMap, []string) {
	if n.own == nil {
		return &control.OwnerMap{}, nil
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	roster := n.own.asm.Roster()
	if len(roster) == 0 {
		roster = n.own.cfg.Names
	}
	return n.own.asm.Installed(), roster
}

// OwnerMap returns the OwnerMap installed on the node (epoch 0 and no
// cohorts without the owner path or before the first map). The map is
// shared: callers must not modify it.
func (n *Node) OwnerMap() *control.OwnerMap {
	if n.own == nil {
		return &control.OwnerMap{}
	}
	n.own.mu.Lock()
	defer n.own.mu.Unlock()
	return n.own.asm.Installed()
}

// OwnerPathStats counts a node's lock-word verbs on the ownership paths
// (package actors/owner, NodeStats): what its owner-path grants cost on
// the memory node and why.
type OwnerPathStats struct {
	// WordWrites: lock words set held by plain WRITE (no atomic), of which
	// FencedWrites were first grants under a key-group fence; WordCASes:
	// set by CAS (first grants without a fence, remote grants, re-cuts).
	WordWrites   uint64 `json:"word_writes"`
	FencedWrites uint64 `json:"fenced_writes"`
	WordCASes    uint64 `json:"word_cases"`
	// FenceClaims, FenceRefusals, Unfenced: key-group fences set, lock
	// words given back to another owner's fence, fences given back (one
	// CAS each).
	FenceClaims   uint64 `json:"fence_claims"`
	FenceRefusals uint64 `json:"fence_refusals"`
	Unfenced      uint64 `json:"unfenced"`
	// Reclaimed: free sentinels of retired activations taken over by CAS.
	Reclaimed uint64 `json:"reclaimed"`
}

// Add returns the sum of two counts.
func (s OwnerPathStats) Add(o OwnerPathStats) OwnerPathStats {
	return OwnerPathStats{WordWrites: s.WordWrites + o.WordWrites, FencedWrites: s.FencedWrites + o.FencedWrites,
		WordCASes: s.WordCASes + o.WordCASes, FenceClaims: s.FenceClaims + o.FenceClaims,
		FenceRefusals: s.FenceRefusals + o.FenceRefusals, Unfenced: s.Unfenced + o.Unfenced, Reclaimed: s.Reclaimed + o.Reclaimed}
}

// OwnerPathStats returns the node's owner-path verb counts since it
// started (zero without the owner path).
func (n *Node) OwnerPathStats() OwnerPathStats {
	if n.own == nil {
		return OwnerPathStats{}
	}
	s := &n.own.onode.Stats
	return OwnerPathStats{WordWrites: s.WordWrites.Load(), FencedWrites: s.FencedWrites.Load(), WordCASes: s.WordCASes.Load(),
		FenceClaims: s.FenceClaims.Load(), FenceRefusals: s.FenceRefusals.Load(), Unfenced: s.Unfenced.Load(),
		Reclaimed: s.Reclaimed.Load()}
}
