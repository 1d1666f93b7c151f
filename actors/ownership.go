package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/cohort"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/invariants"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/workload"
)

// OwnershipConfig turns on the owner path of a node: an owner lock table
// for the cohorts the OwnerMap gives it, owner RPC to other nodes, the
// access profiler whose summaries feed the planner, and OwnerMap pushes.
type OwnershipConfig struct {
	// Names is the static roster, for OwnerMaps pushed without one (by a
	// planner that predates OwnerMapPush.roster): owner index i is the node
	// Names[i]. A push that carries a roster replaces it for that map (the
	// planner chooses the roster from live membership; see package
	// planner). Optional: empty means the node owns nothing until a map
	// with a roster arrives. It need not contain NodeConfig.Name (a node
	// absent from a roster owns nothing), must not repeat a name, and has
	// fewer than control.MaxNodes entries (one owner byte means unowned).
	// The node's position in it, if any, is the profiler's NodeIndex (the
	// planner renumbers heartbeats by its own roster anyway).
	Names []string
	// Transport carries owner RPCs to the other nodes (nil for a single
	// node: every owned cohort is local).
	Transport owner.Transport
	// Table bounds the owner lock table. Default owner.DefaultConfig().
	Table owner.Config
	// Owner configures the lockers (Self is set from NodeConfig.Name).
	Owner owner.NodeConfig
	// Profiler configures the access profiler (Node and NodeIndex are set
	// from the node). Default NodeProfilerConfig().
	Profiler accessgraph.ProfilerConfig
	// HeartbeatEvery is the period of the profiler's summaries (and of the
	// retirement of drained cohorts). Default 100 ms (the planner's tick).
	HeartbeatEvery time.Duration
	// Heartbeat receives each summary, to send to the planner as a request
	// whose answer, a LeaseGrant, it passes to reply (from any goroutine;
	// at most once; not at all if none came). Heartbeat must not block on
	// the answer: it is called on the node's profiler loop. With Heartbeat
	// set, the node's owner lock grants are bounded by the owner lease the
	// planner's answers renew (owner.NodeConfig.Lease; package owner,
	// "Owner leases"); without it the node has no planner (a fixed map),
	// summaries are dropped and no lease bounds its cohorts.
	Heartbeat func(s *messages.AccessSummary, reply func(*messages.LeaseGrant))
	// MaxManifestBytes caps an OwnerMap manifest (0: the manifest package's
	// default, 900 KiB).
	MaxManifestBytes int
	// Observer, if set, is told every activation, deactivation and grant
	// of the node's cohorts, from inside the owner table's critical
	// section (package invariants checks I1 and I4 with it).
	Observer invariants.Observer
	// Logger receives a warning when a frozen cohort cannot be retired for
	// a reason other than waiting (its drain deadline, its holders), once
	// per cohort and reason. Default: discard (NodeConfig sets the node's).
	Logger *slog.Logger
}

func (c *OwnershipConfig) validate(self string) (int, error) {
	var errs []error
	idx := slices.Index(c.Names, self)
	if err := planner.ValidateRoster(nil, c.Names); err != nil {
		errs = append(errs, fmt.Errorf("ownership: Names: %w", err))
	}
	if c.HeartbeatEvery < 0 {
		errs = append(errs, fmt.Errorf("ownership: HeartbeatEvery %v must not be negative", c.HeartbeatEvery))
	}
	return idx, errors.Join(errs...)
}

// NodeProfilerConfig is a node's default profiler configuration:
// accessgraph.DefaultProfilerConfig with SampleEvery 1, so that a node
// samples every committed transaction until MaxSamplesPerWindow (256 per
// heartbeat window) raises the interval. Why: the planner learns from
// samples, and at a few hundred transactions per second per node (a
// multi-process cluster on loopback) one in 8 leaves about one sample per
// node per 50 ms tick — too few for cohorts to form. A sampled transaction
// costs ~6 µs of profiler CPU (BenchmarkRecord), under 1% of a node's
// transaction (hundreds of µs of CPU on these paths), and the window bound
// keeps the total per window fixed at high rates.
func NodeProfilerConfig() accessgraph.ProfilerConfig {
	c := accessgraph.DefaultProfilerConfig()
	c.SampleEvery = 1
	return c
}

// OwnerMapActorName is the name of every node's OwnerMap receiver.
const OwnerMapActorName = "ownermap"

// ownership is a node's owner-path state.
type ownership struct {
	cfg   OwnershipConfig
	self  string
	index int // this node's owner index in the installed roster, −1 if absent (guarded by mu)
	wl    workload.Workload
	svc   *owner.Service
	res   *rosterResolver
	onode *owner.Node
	// unfenceQP carries the node's key-group fence give-backs (run).
	unfenceQP rdma.QueuePair
	start     time.Time
	// lease is the node's owner lease (nil without a planner), renewed by
	// the answers to its heartbeats.
	lease *owner.Lease
	// activator is the node's cohort activator (package actors/cohort),
	// told through root to Sync after every change of the owned cohorts;
	// nil when the node runs without actors (tests of this file).
	activator *actor.PID
	root      *actor.RootContext

	// profMu guards the profiler and its buffers: apart from mu, so that
	// building a heartbeat's summary (milliseconds on TPC-C) does not hold
	// up freezes, handoffs and map installs, which wait on mu.
	profMu sync.Mutex
	prof   *accessgraph.Profiler
	tick   uint64
	wbuf   []control.KeyGroup
	rbuf   []control.KeyGroup

	mu     sync.Mutex // guards everything below
	asm    *planner.Assembler
	owned  map[control.CohortID][]control.KeyGroup
	epoch  map[control.CohortID]uint64 // install epoch of owned cohorts
	frozen map[control.CohortID]frozenCohort
	// relinquished: the node is leaving; it grants none of its cohorts any
	// more and installs no new ones.
	relinquished bool
	// memberEpoch is the newest membership epoch a planner's push or
	// migration message carried: a Handoff decided on an older one is
	// refused.
	memberEpoch uint64
	// retireErrors counts retirement attempts of frozen cohorts that failed
	// for a reason other than waiting (retireIn): each is retried every
	// heartbeat, so a count that keeps growing names a cohort stuck frozen.
	retireErrors uint64

	stop chan struct{}
	done chan struct{}
}

type frozenCohort struct {
	epoch uint64
	moved owner.Moved
	// migration is the id of the migration that froze the cohort
	// (noMigration: frozen by a map or a leave); awaitPublish keeps it
	// from being retired before the move is published (SPEC §6 step 4: a
	// Publish, or a map at moved.Epoch or later); kgs are its key groups,
	// restored if the migration rolls back.
	migration    uint64
	awaitPublish bool
	kgs          []control.KeyGroup
	// awaitSince is when the migration took it (ownership.nowMicros):
	// past awaitPublishLimit the migration is over whatever became of its
	// messages, and awaitPublish ends.
	awaitSince int64
	// retireErr is the last unexpected error retiring it (retireIn), so
	// that each new reason is logged once, not every heartbeat.
	retireErr string
}

// awaitPublishLimit bounds how long a migration's frozen activation waits
// for the move's publication: longer than any migration lives in the
// planner's TransferController (freeze 2 s + handoff 1 s + publication 2 s
// + abort 5 s by default), so past it the migration was published,
// rolled back or abandoned (its Publish or MigrationAbort lost, or its
// planner gone), and nothing will end the wait. Without it an activation
// whose migration was rolled back while the node stayed frozen waited for
// a map at the move's epoch, which a quiet cluster never publishes, and
// stayed frozen for good.
const awaitPublishLimit = 15 * time.Second

func newOwnership(cfg OwnershipConfig, self string, wl workload.Workload) (*ownership, error) {
	idx, err := cfg.validate(self)
	if err != nil {
		return nil, err
	}
	if cfg.Table == (owner.Config{}) {
		cfg.Table = owner.DefaultConfig()
	}
	if cfg.Profiler == (accessgraph.ProfilerConfig{}) {
		cfg.Profiler = NodeProfilerConfig()
	}
	if cfg.HeartbeatEvery == 0 {
		cfg.HeartbeatEvery = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pc := cfg.Profiler
	pc.Node, pc.NodeIndex = self, uint32(max(idx, 0))
	prof, err := accessgraph.NewProfiler(pc)
	if err != nil {
		return nil, err
	}
	table, err := owner.NewTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	o := &ownership{cfg: cfg, self: self, index: idx, wl: wl, start: time.Now(), prof: prof,
		asm: planner.NewAssembler(cfg.MaxManifestBytes), owned: map[control.CohortID][]control.KeyGroup{},
		epoch: map[control.CohortID]uint64{}, frozen: map[control.CohortID]frozenCohort{}}
	// Summary ticks start at the number of heartbeat periods since the Unix
	// epoch: the planner's graph drops a (node, tick) not above the last one
	// it applied from that node name, so a node restarted under the same
	// name must continue above its previous run's ticks (which never exceed
	// the wall clock in periods), not restart at 1 and be ignored for as
	// long as that run lasted. A clock stepped back delays it by that step.
	o.tick = uint64(max(0, time.Now().UnixNano()/int64(cfg.HeartbeatEvery)))
	o.svc = owner.NewService(table, o.nowMicros)
	if obs := cfg.Observer; obs != nil {
		o.svc.ObserveGrants(func(c, e uint64) { obs.Granted(self, c, e) })
	}
	o.res = newRosterResolver(self, slices.Clone(cfg.Names))
	oc := cfg.Owner
	oc.Self = self
	if cfg.Heartbeat != nil {
		o.lease = &owner.Lease{}
		oc.Lease = o.lease
		o.svc.UseLease(o.lease)
	}
	if o.onode, err = owner.NewNode(oc, o.svc, o.res, cfg.Transport); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *ownership) nowMicros() int64 { return time.Since(o.start).Microseconds() }

// activated and deactivated report a change of the activations to the
// Observer; call them inside svc.Do, right after the table change.
func (o *ownership) activated(c control.CohortID, e uint64) {
	if o.cfg.Observer != nil {
		o.cfg.Observer.Activated(o.self, c, e)
	}
}

func (o *ownership) deactivated(c control.CohortID, e uint64) {
	if o.cfg.Observer != nil {
		o.cfg.Observer.Deactivated(o.self, c, e)
	}
}

// locker returns a coordinator's lock path: owner table, owner RPC or the
// fallback (MN CAS through the atomic actors).
func (o *ownership) locker(qp rdma.QueuePair, fallback occ.Locker) occ.Locker {
	return o.onode.NewLocker(qp, fallback)
}

// record feeds a committed transaction's predicted key groups to the
// profiler (the footprint is what routing and the planner reason about).
func (o *ownership) record(msg *messages.TxnSubmit, c occ.Counters) {
	fp := o.wl.Footprint(msg)
	rule := o.wl.Rule()
	o.profMu.Lock()
	defer o.profMu.Unlock()
	o.wbuf, o.rbuf = o.wbuf[:0], o.rbuf[:0]
	for _, r := range fp.Writes {
		o.wbuf = append(o.wbuf, control.KeyGroup(rule.KeyGroup(r)))
	}
	for _, r := range fp.Reads {
		o.rbuf = append(o.rbuf, control.KeyGroup(rule.KeyGroup(r)))
	}
	o.prof.Record(o.wbuf, o.rbuf)
	o.prof.RecordLocks(accessgraph.LockCounts{Local: c.LocksLocal, OwnerRPC: c.LocksOwnerRPC, MNCAS: c.LocksMNCAS}, nil)
}

// run sends a summary every HeartbeatEvery and retires drained cohorts,
// until stop closes.
func (o *ownership) run() {
	defer close(o.done)
	if o.unfenceQP != nil {
		ufDone := make(chan struct{})
		go o.unfenceLoop(ufDone)
		defer func() { <-ufDone }()
	}
	o.every(o.cfg.HeartbeatEvery, func() {
		o.profMu.Lock()
		o.tick++
		s := o.prof.Summary(o.tick, accessgraph.SummaryV2)
		o.profMu.Unlock()
		o.mu.Lock()
		s.OwnermapEpoch = o.asm.Installed().Epoch
		s.Roster = slices.Clone(o.asm.Roster())
		retired := o.retireDrained()
		o.mu.Unlock()
		if retired {
			o.syncActivations()
		}
		if o.cfg.Heartbeat != nil {
			o.cfg.Heartbeat(s, o.leaseReply(time.Now()))
		}
	})
}

// every runs f every period until stop closes.
func (o *ownership) every(period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		f()
	}
}

// unfenceLoop gives back, every unfenceEvery, the key-group fences the
// table no longer trusts since a drain deadline (owner.Node.Unfence), until
// stop closes. Its own loop, so that a slow memory node does not delay the
// heartbeats, and a short period, so that a re-cut key group's new owner
// claims the fence soon after the deadline.
func (o *ownership) unfenceLoop(done chan<- struct{}) {
	defer close(done)
	o.every(unfenceEvery, func() { o.onode.Unfence(context.Background(), o.unfenceQP, maxUnfencesPerTick) })
}

// unfenceEvery is the give-back period: a fifth of the default drain
// deadline (50 ms), which a fence waits for anyway.
const unfenceEvery = 10 * time.Millisecond

// maxUnfencesPerTick bounds the key-group fences one period gives back
// (the rest wait for the next).
const maxUnfencesPerTick = 1024

// leaseReply returns the callback that applies the planner's answer to a
// heartbeat sent at sent to the node's owner lease.
func (o *ownership) leaseReply(sent time.Time) func(*messages.LeaseGrant) {
	return func(g *messages.LeaseGrant) {
		if g == nil || !g.GetGranted() {
			o.lease.Refuse()
			return
		}
		d := time.Duration(min(g.GetLeaseMicros(), uint64(owner.MaxLease/time.Microsecond))) * time.Microsecond
		o.lease.Grant(g.GetPlanner(), sent, d)
	}
}

// retireDrained retires frozen cohorts with no holders left, and fences
// those past the table's drain deadline first; it reports whether it
// retired any. o.mu is held.
func (o *ownership) retireDrained() bool {
	if len(o.frozen) == 0 {
		return false
	}
	before := len(o.frozen)
	_ = o.svc.Do(func(t *owner.Table) error {
		o.retireIn(t)
		return nil
	})
	return len(o.frozen) < before
}

// syncActivations tells the activator to stop the activations of cohorts
// the node no longer holds. Called without o.mu: the activator's mailbox is
// bounded, and it calls Owned and Held, which take o.mu.
func (o *ownership) syncActivations() {
	if o.activator != nil {
		o.root.Send(o.activator, cohort.Sync{})
	}
}

// Owned implements cohort.Authority: the node grants cohort id's locks
// (installed by the map, not frozen or relinquished).
func (o *ownership) Owned(id control.CohortID) (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.relinquished {
		return 0, false
	}
	if _, ok := o.owned[id]; !ok {
		return 0, false
	}
	return o.epoch[id], true
}

// Held implements cohort.Authority: the table still holds activation
// (id, epoch), owned or frozen and not yet retired.
func (o *ownership) Held(id control.CohortID, epoch uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.owned[id]; ok && o.epoch[id] == epoch {
		return true
	}
	f, ok := o.frozen[id]
	return ok && f.epoch == epoch
}

var _ cohort.Authority = (*ownership)(nil)

// retireIn is retireDrained with the table already locked.
func (o *ownership) retireIn(t *owner.Table) {
	now := o.nowMicros()
	{
		for _, id := range slices.Sorted(mapKeysCohort(o.frozen)) {
			f := o.frozen[id]
			if f.awaitPublish && now-f.awaitSince < awaitPublishLimit.Microseconds() {
				continue // a migration's: retired once the move is published
			}
			ds, err := t.Drain(id)
			if err != nil {
				delete(o.frozen, id) // unknown to the table: nothing to retire
				continue
			}
			if !ds.Drained {
				if _, err := t.Fence(id, f.epoch, now); err != nil {
					if !errors.Is(err, owner.ErrDrainPending) {
						o.noteRetireError(id, f, "fence", err)
					}
					continue // before the drain deadline: wait
				}
			}
			if err := t.Retire(id, f.epoch, f.moved); err != nil {
				if !errors.Is(err, owner.ErrHoldersRemain) {
					o.noteRetireError(id, f, "retire", err)
				}
				continue
			}
			delete(o.frozen, id)
		}
	}
}

// noteRetireError counts a failed retirement of frozen cohort id and logs
// it when its reason is new for that cohort. o.mu is held.
func (o *ownership) noteRetireError(id control.CohortID, f frozenCohort, step string, err error) {
	o.retireErrors++
	if msg := step + ": " + err.Error(); msg != f.retireErr {
		f.retireErr = msg
		o.frozen[id] = f
		o.cfg.Logger.Warn("frozen cohort not retired", "cohort", uint64(id), "epoch", f.epoch,
			"moved_epoch", f.moved.Epoch, "migration", f.migration, "step", step, "err", err)
	}
}

// handlePush assembles one OwnerMap push and, once a newer map is complete,
// installs it: cohorts this node no longer owns are frozen, then retired
// when drained; cohorts it keeps with other key groups are reconfigured in
// place (they keep their install epoch, holders and marks: see "Re-cut
// cohorts" in package owner); cohorts it newly owns are installed at the
// map's epoch; the resolver switches to the map.
func (o *ownership) handlePush(p *messages.OwnerMapPush) *messages.OwnerMapAck {
	ack, installed := o.offer(p)
	if installed {
		o.syncActivations()
	}
	return ack
}

// offer is handlePush under o.mu; it reports whether it installed a map.
func (o *ownership) offer(p *messages.OwnerMapPush) (*messages.OwnerMapAck, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	installed := false
	ack := &messages.OwnerMapAck{Epoch: p.GetEpoch(), Node: o.self, ChunkIndex: p.GetChunkIndex()}
	o.noteMembership(p.GetMembershipEpoch())
	m, err := o.asm.Offer(p)
	switch {
	case errors.Is(err, planner.ErrNeedFull):
		ack.NeedFull = true
	case err != nil:
		ack.Error = err.Error()
	case m != nil:
		installed = true
		if err := o.install(m); err != nil {
			ack.Error = err.Error()
		}
	}
	ack.InstalledEpoch = o.asm.Installed().Epoch
	ack.InstalledPlanner = o.asm.InstalledFrom()
	return ack, installed
}

func (o *ownership) install(m *control.OwnerMap) error {
	// The roster that came with the map (the assembler validated it against
	// the map), else the static one.
	roster := o.asm.Roster()
	if len(roster) == 0 {
		roster = o.cfg.Names
	}
	o.index = slices.Index(roster, o.self)
	mine := map[control.CohortID][]control.KeyGroup{}
	ownerName := map[control.CohortID]string{}
	for _, p := range m.Cohorts {
		if p.Owner < len(roster) {
			ownerName[p.ID] = roster[p.Owner]
		}
		if o.index >= 0 && p.Owner == o.index && !o.relinquished {
			mine[p.ID] = p.KeyGroups
		}
	}
	for id, f := range o.frozen {
		if f.awaitPublish && m.Epoch >= f.moved.Epoch {
			// The map that records the move: the move is published.
			f.awaitPublish = false
			o.frozen[id] = f
		}
	}
	now := o.nowMicros()
	var errs []error
	_ = o.svc.Do(func(t *owner.Table) error {
		t.ObserveEpoch(m.Epoch)
		var reformed []control.CohortID
		for _, id := range slices.Sorted(mapKeysCohort(o.owned)) {
			kgs, ok := mine[id]
			if ok && slices.Equal(kgs, o.owned[id]) {
				continue
			}
			if ok {
				// Re-formed but still ours: first shrink it to the key
				// groups it keeps, so that the key groups it gives to
				// another cohort of this node are free when that one grows.
				keep := slices.DeleteFunc(slices.Clone(o.owned[id]), func(kg control.KeyGroup) bool {
					_, found := slices.BinarySearch(kgs, kg)
					return !found
				})
				if err := t.Reconfigure(id, o.epoch[id], keep, m.Epoch); err != nil {
					errs = append(errs, err)
				} else {
					o.owned[id] = keep
				}
				reformed = append(reformed, id)
				continue
			}
			// No longer ours: stop granting now (this epoch's
			// acknowledgement promises it), retire once drained.
			e := o.epoch[id]
			if err := t.Freeze(id, e, now); err != nil {
				errs = append(errs, err)
			} else {
				o.deactivated(id, e)
			}
			o.frozen[id] = frozenCohort{epoch: e, moved: owner.Moved{Owner: ownerName[id], Epoch: m.Epoch}}
			delete(o.owned, id)
			delete(o.epoch, id)
		}
		o.retireIn(t)
		for _, id := range reformed {
			if err := t.Reconfigure(id, o.epoch[id], mine[id], m.Epoch); err != nil {
				errs = append(errs, err)
				continue
			}
			o.owned[id] = slices.Clone(mine[id])
		}
		for _, id := range slices.Sorted(mapKeysCohort(mine)) {
			if _, ok := o.owned[id]; ok {
				continue
			}
			if _, still := o.frozen[id]; still {
				// The same id re-formed here while its old activation still
				// drains: it stays unserved (requests get Retry) until a later
				// map after the retirement installs it.
				continue
			}
			if err := t.Install(id, mine[id], m.Epoch); err != nil {
				errs = append(errs, err)
				continue
			}
			o.activated(id, m.Epoch)
			o.owned[id] = slices.Clone(mine[id])
			o.epoch[id] = m.Epoch
		}
		return nil
	})
	if err := o.res.update(m, roster); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// relinquish stops granting every owned cohort (frozen: new requests get
// Retry, releases are still accepted) and keeps the node from installing
// any later. A node calls it before it leaves the membership: once the
// others see it gone the planner gives its cohorts to them at once, and
// this guarantees it grants none by then (I1), also to transactions it is
// still finishing. The cohorts stay frozen until the process ends.
func (o *ownership) relinquish() error {
	defer o.syncActivations()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.relinquished = true
	now := o.nowMicros()
	var errs []error
	_ = o.svc.Do(func(t *owner.Table) error {
		for _, id := range slices.Sorted(mapKeysCohort(o.owned)) {
			if err := t.Freeze(id, o.epoch[id], now); err != nil {
				errs = append(errs, err)
			} else {
				o.deactivated(id, o.epoch[id])
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// rosterResolver is the node's owner.Resolver: an owner.MapResolver per
// installed map, built with that map's roster (owner.MapResolver's names
// are fixed at construction, and the roster may change with every map).
// Swapping the whole resolver keeps a lookup's map and names consistent.
type rosterResolver struct {
	self string
	cur  atomic.Pointer[owner.MapResolver]
}

var (
	_ owner.Resolver       = (*rosterResolver)(nil)
	_ owner.CohortResolver = (*rosterResolver)(nil)
	_ owner.CohortPlacer   = (*rosterResolver)(nil)
)

func newRosterResolver(self string, names []string) *rosterResolver {
	r := &rosterResolver{self: self}
	r.cur.Store(owner.NewMapResolver(self, names, nil))
	return r
}

// update installs m with its roster if m is newer than the installed map.
// Callers serialise updates (ownership.mu).
func (r *rosterResolver) update(m *control.OwnerMap, roster []string) error {
	if old := r.cur.Load(); old.Epoch() >= m.Epoch && m.Epoch > 0 {
		return nil
	}
	next := owner.NewMapResolver(r.self, slices.Clone(roster), nil)
	if err := next.Update(m); err != nil {
		return err
	}
	r.cur.Store(next)
	return nil
}

func (r *rosterResolver) Resolve(kg control.KeyGroup) owner.Route { return r.cur.Load().Resolve(kg) }

// Refresh: pushes are the only source of maps on a node (no fetch), as with
// a MapResolver built without one.
func (r *rosterResolver) Refresh(ctx context.Context, atLeast uint64) {
	r.cur.Load().Refresh(ctx, atLeast)
}

func (r *rosterResolver) CohortOwned(c control.CohortID) (bool, uint64) {
	return r.cur.Load().CohortOwned(c)
}

func (r *rosterResolver) CohortOwner(c control.CohortID) (string, bool, uint64) {
	return r.cur.Load().CohortOwner(c)
}

// Epoch returns the installed map's epoch.
func (r *rosterResolver) Epoch() uint64 { return r.cur.Load().Epoch() }

func mapKeysCohort[V any](m map[control.CohortID]V) func(func(control.CohortID) bool) {
	return func(yield func(control.CohortID) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ownerMapActor serves OwnerMap pushes to the node.
type ownerMapActor struct{ o *ownership }

func (a *ownerMapActor) Receive(ctx actor.Context) {
	if p, ok := ctx.Message().(*messages.OwnerMapPush); ok {
		ctx.Respond(a.o.handlePush(p))
	}
}
