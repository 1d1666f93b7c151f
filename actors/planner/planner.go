package planner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/cohortgen"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/control/plane"
	"github.com/aura-runtime/aura/control/plannerlease"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/messages"
)

// Pusher delivers one OwnerMapPush to a node and returns its
// acknowledgement. Implementations must be safe for concurrent use and
// bounded in time (the actor passes a context with Config.PushTimeout).
type Pusher interface {
	Push(ctx context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error)
}

// Config configures the planner actor.
type Config struct {
	// Name is the planner's node name, stamped on every push. Required.
	Name string
	// Loop configures the control loop. Loop.Nodes is the owner index
	// space: the most roster slots the planner hands out (at most
	// control.MaxNodes−1); live nodes beyond it get no slot and own nothing
	// until one frees. The planner's per-tick work and memory grow with it
	// (each cohort's home weights and each node scan cover every slot), so
	// size it to the cluster, not to the maximum.
	Loop plane.Config
	// Tick is the planning period. Default 100 ms (SPEC §5).
	Tick time.Duration
	// ChunkBytes bounds the manifest bytes per push. Default
	// DefaultChunkBytes.
	ChunkBytes int
	// PushTimeout bounds one push to one node (retries happen at later
	// ticks). Default 2 s.
	PushTimeout time.Duration
	// MaxHeartbeatsPerTick bounds the summaries applied between two ticks;
	// extra ones are dropped and counted (a node flooding the planner cannot
	// stall planning). Default 1,024.
	MaxHeartbeatsPerTick int
	// StartupTicks is how many ticks a newly started planner waits, before
	// its first publication, for a heartbeat from every live node: the
	// heartbeats carry each node's installed OwnerMap epoch, and a planner
	// taking over from a failed one must publish above the highest of them
	// (see "Taking over" in the package doc). Past it the planner goes on
	// with what it has heard (a node it missed is caught by its ack).
	// Default 10 (1 s at the default tick); 0: no wait.
	StartupTicks int
	// Logger receives one line per published epoch (debug: per tick).
	// Default: discard.
	Logger *slog.Logger
	// Transfer bounds the migration protocol's rounds (Planner is set from
	// Name). Used when the Pusher is also a Migrator; default
	// transfer.DefaultConfig.
	Transfer transfer.Config
	// Lease is the owner lease granted with each answered heartbeat (see
	// lease.go and package actors/owner, "Owner leases"). A departed
	// node's cohorts move Lease + Lease/4 + one drain deadline after its
	// last grant, so it is the price of a crash in time to recovery; it
	// must outlast a few heartbeat periods, or a node loses its lease (and
	// its WRITE path) between two answers, and a planner busy for longer
	// than it (a stalled actor) costs every node its WRITE path until it
	// answers again: a throughput dip, never a safety issue. Default 1 s
	// (ten heartbeats at the default period); at most owner.MaxLease.
	Lease time.Duration
	// LeaseWord is the planner lease's word on the memory node (see
	// singleton.go and package control/plannerlease). With it, the planner
	// acts — grants owner leases, pushes maps, sends migration messages —
	// only while it holds a valid planner lease, so at most one planner
	// acts at a time even when two each see a majority of the compute
	// nodes (an asymmetric partition); a planner deposed by another forgets
	// its state. nil: no planner lease, for a caller that runs exactly one
	// planner (the embedded bench, unit tests). Every `aura node` sets it.
	LeaseWord LeaseWord
	// PlannerLease configures the planner lease (used with LeaseWord; a
	// zero Holder is drawn at random for each planner). Default: a 1 s
	// lease (what a failover of the planner's node adds), renewed every
	// 50 ms — every tick, since a tick is the lease's clock and a 100 ms
	// renewal period would skip ticks that come a little early.
	PlannerLease plannerlease.Config
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig(name string, nodes int) Config {
	// EvictBeforeMove is decided by NewActor: off when the Pusher is a
	// Migrator (moves use the migration protocol), on otherwise.
	loop := plane.DefaultConfig(nodes)
	// The actor refines cohorts off its own goroutine (see Actor.refine):
	// a tick stays within its budget and heartbeats are not held up.
	loop.Cohorts.RefineInline = false
	// A key group joins the cohorts from a quarter of the generator's
	// default admission weight: about one write in 80 ticks (8 s). Why:
	// the nodes' profilers sample one transaction in 8, so at the rates a
	// cluster runs below saturation a key group written about once a
	// second — a TPC-C CUSTOMER bucket at 1,400 txn/s — is one sample in
	// several seconds, and its decayed weight swings around 1 and below
	// the drop level (DropFactor) between samples: it keeps leaving the
	// cohorts, and its locks are memory-node CASes. Measured with `aura
	// bench --workload tpcc --mode aura --rate 1400 --duration 25s
	// --warmup 10s`: 0.83–0.84 atomics per transaction at 1.0, 0.57–0.59
	// at 0.25. The simulator keeps the generator's default: it profiles at
	// hundreds of thousands of transactions a second.
	loop.Cohorts.MinWeight = 0.25
	return Config{Name: name, Loop: loop, Tick: 100 * time.Millisecond,
		ChunkBytes: DefaultChunkBytes, PushTimeout: 2 * time.Second, MaxHeartbeatsPerTick: 1024, StartupTicks: 10,
		Transfer: defaultTransfer(name), Lease: time.Second,
		PlannerLease: plannerlease.Config{LeaseMicros: 1_000_000, RenewMicros: 50_000}}
}

// defaultTransfer is transfer.DefaultConfig with a 4 ms drain budget: a
// cohort whose holders take longer is rolled back and planned again rather
// than keep its round frozen (SPEC §6 targets a freeze window p99 ≤ 10 ms,
// which also holds the round's publication). 4 ms rather than 5: in 19
// runs of the bank drift bench (docs/migration.md, "Measured") no freeze
// p99 exceeded 10 ms at 4 ms, against 4 of 34 at 5 ms, for about one more
// rollback per run out of ~550 migrations.
func defaultTransfer(name string) transfer.Config {
	c := transfer.DefaultConfig(name)
	c.DrainBudgetMicros = 4_000
	return c
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("planner: Name is required"))
	}
	if err := c.Loop.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Tick < time.Millisecond {
		errs = append(errs, fmt.Errorf("planner: Tick %v, want ≥ 1ms", c.Tick))
	}
	if c.ChunkBytes < 1 || c.PushTimeout <= 0 || c.MaxHeartbeatsPerTick < 1 {
		errs = append(errs, fmt.Errorf("planner: ChunkBytes %d, PushTimeout %v, MaxHeartbeatsPerTick %d must be positive",
			c.ChunkBytes, c.PushTimeout, c.MaxHeartbeatsPerTick))
	}
	if c.Lease < 10*time.Millisecond || c.Lease > owner.MaxLease {
		errs = append(errs, fmt.Errorf("planner: Lease %v, want 10ms to %v", c.Lease, owner.MaxLease))
	}
	if c.LeaseWord != nil {
		lc := c.PlannerLease
		lc.Holder = max(lc.Holder, 1) // drawn at random when zero
		if err := lc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.StartupTicks < 0 {
		errs = append(errs, fmt.Errorf("planner: StartupTicks %d must not be negative", c.StartupTicks))
	}
	if c.Transfer != (transfer.Config{}) {
		tc := c.Transfer
		tc.Planner = c.Name
		if err := tc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Nodes tells the planner the live compute nodes at a membership epoch.
// The planner gives each live node a roster slot (its owner index) and
// publishes the roster with every OwnerMap (see "Roster" in the package
// doc). Names lists the live nodes; "" entries are ignored, and the order
// is the order in which nodes without a slot get one (so a caller that
// lists a static roster in owner-index order on a fresh planner gets
// exactly that numbering). Unsettled holds ownership where it is (SPEC §6).
type Nodes struct {
	Names           []string
	MembershipEpoch uint64
	Unsettled       bool
	// Leaving are live nodes leaving gracefully: they receive no cohort
	// and the planner moves theirs to the others (migrations, so they are
	// drained and handed off before the node goes).
	Leaving []string
	// Known are the compute nodes of the roster installed on the
	// planner's own node (the last map it acknowledged, whoever published
	// it). They count, with the live nodes and the planner's roster, in
	// the majority the planner needs to publish and grant leases: a
	// planner started on a node cut off from most of the cluster knows
	// from it that it is in a minority (see lease.go).
	Known []string
}

// Status is the planner's state, returned for a GetStatus request.
type Status struct {
	Tick            uint64
	Epoch           uint64 // last published (possibly not yet acknowledged)
	Acked           uint64 // last epoch acknowledged by every live node
	Cohorts         int
	Heartbeats      uint64
	Dropped         uint64 // heartbeats over MaxHeartbeatsPerTick, rejected, or from nodes without a roster slot
	Deferred        uint64 // ticks skipped while an epoch awaited acks
	LastPlan        ownership.Stats
	MembershipEpoch uint64
	// Roster is the current slot assignment (owner index i is Roster[i],
	// "" a free slot); the published one drops departed nodes no cohort
	// names any more.
	Roster []string
	// Unslotted counts live nodes that got no slot because all
	// Config.Loop.Nodes were taken (they own nothing until one frees).
	Unslotted int
	// Base is added to the control loop's epochs to give the published
	// ones (non-zero after taking over from another planner).
	Base uint64
	// Transfer counts the migration protocol's work (zero without a
	// Migrator); FreezeMicros and DrainMicros are the freeze windows and
	// drain times of the last finished migrations (at most 4,096, oldest
	// first; see transfer.Record), PublishMicros the part of each freeze
	// window after its round settled (waits for a majority or a departed
	// node's lease included, then the map published and acknowledged by
	// every node).
	Transfer      transfer.Stats
	FreezeMicros  []int64
	DrainMicros   []int64
	PublishMicros []int64
	// LastTickMicros is how long the last planning tick took (the control
	// loop's Tick: graph decay, clustering, the plan); TickMicros sums
	// them over Tick ticks, for a mean.
	LastTickMicros int64
	TickMicros     uint64
	// MaxTickMicros is the longest planning tick so far: the longest the
	// actor was busy planning, during which heartbeats and
	// acknowledgements wait in its mailbox.
	MaxTickMicros int64
	// Refines counts cohort refinements run off the actor (Louvain over
	// one region, on a goroutine of its own; see Config.Loop.Cohorts
	// .RefineInline), RefineMicros sums their time and Refining reports
	// one in flight.
	Refines      uint64
	RefineMicros uint64
	Refining     bool
	// RefinesDropped counts refinement results not offered: their loop
	// restarted (taking over from another planner), they came from a
	// planner that ran on this PID before, or Refine panicked.
	RefinesDropped uint64
	// GraphNodes and GraphEdges are the access graph's key groups and
	// edges after the last tick.
	GraphNodes, GraphEdges int
	// Quorum: the live nodes are a majority of the known ones (the
	// planner publishes and grants leases only then); NoQuorumTicks
	// counts the times it could not publish for want of one (ticks, and
	// settled rounds waiting). LeaseGrants and LeaseRefusals count the
	// answers to heartbeats; LeaseHolds the times a new map waited for a
	// departed node's lease to run out (see lease.go).
	Quorum                     bool
	NoQuorumTicks              uint64
	LeaseGrants, LeaseRefusals uint64
	LeaseHolds                 uint64
	// Removed are the nodes an operator removed (RemoveNode) that a roster
	// still names; Removals counts the removals accepted.
	Removed  []string
	Removals uint64
	// PlannerLease is the planner lease's state (Config.LeaseWord).
	PlannerLease PlannerLeaseStatus
}

// GetStatus asks the actor for its Status.
type GetStatus struct{}

type tickMsg struct{}

// refineDone carries a refinement computed off the actor.
type refineDone struct {
	// req identifies the refinement (the actor's inflight one, or not:
	// then another planner actor's on the same PID, and dropped).
	req    *cohortgen.RefineRequest
	res    *cohortgen.RefineResult // nil when Refine panicked
	micros int64
	panic  string
}

type pushDone struct {
	node  string
	epoch uint64
	ack   *messages.OwnerMapAck
	err   error
}

// Actor is the planner singleton: heartbeats in, OwnerMap epochs out.
type Actor struct {
	cfg    Config
	pusher Pusher
	loop   *plane.Loop
	// inflight is the refinement running off the actor (nil: none), and
	// inflightLoop the loop it was taken from: a result is offered only
	// to that loop (resetAbove replaces it).
	inflight     *cohortgen.RefineRequest
	inflightLoop *plane.Loop
	log          *slog.Logger
	stop         chan struct{}

	nodes    Nodes
	live     map[string]bool
	tick     uint64
	beats    int
	status   Status
	pending  map[string]bool // live nodes that have not acknowledged status.Epoch
	have     map[string]bool // live nodes that acknowledged status.Epoch
	needFull map[string]bool
	inFlight map[string]bool   // nodes with a push not yet answered: at most one each
	cur      *control.OwnerMap // the published map of status.Epoch (nil before the first)
	prev     *control.OwnerMap // the map before status.Epoch (delta base)

	// Roster: roster[i] is the node at owner index i ("" free); slotOf
	// inverts it. pubRoster is the roster published with cur.
	roster    []string
	slotOf    map[string]int
	pubRoster []string
	unslotted map[string]bool // live nodes refused a slot (logged once)

	// Taking over: installed epochs the nodes' heartbeats report, the ticks
	// waited for them, and the base of published epochs over the loop's.
	seen    map[string]uint64
	waited  int
	started bool   // the first publication decision is made
	rebase  uint64 // an ack showed a newer map than ours: reset above it

	// Migration protocol (nil xfer: no Migrator, moves evict then install).
	migrator       Migrator
	inlineMigrator InlineMigrator
	inlinePusher   InlinePusher
	xfer           *transfer.Controller
	t0             time.Time
	staged         *control.OwnerMap // planned map waiting for its round to settle
	stagedCh       changes
	installEpoch   map[control.CohortID]uint64 // per published cohort: its owner's install epoch
	// publishedRound: the map of the round's outcomes is published and
	// awaits every node's acknowledgement before Publish is sent.
	publishedRound bool
	tickArmed      bool              // a transferTick is scheduled
	phases         ring[phaseSample] // the last maxFreezeSamples migrations
	// overBudget counts each cohort's migrations rolled back in a row over
	// the drain budget (noteOverBudget); past fullDrainAfter the next one
	// drains to the deadline.
	overBudget map[control.CohortID]int
	round      roundLog
	// resetEpoch is the empty map published on taking over, until every
	// node acknowledged it; quietUntil (planner micros) then holds planning
	// for one drain deadline.
	resetEpoch uint64
	quietUntil int64

	// Owner leases (lease.go): granted is when this planner last granted
	// each node a lease (planner micros; kept after the node departs until
	// the lease ran out), joinEpoch the published epoch when each live
	// node last became live (it gets no lease before installing it).
	granted   map[string]int64
	joinEpoch map[string]uint64
	clean     map[string]bool
	// reported is the roster each live node's last heartbeat said it
	// installed: its names are known nodes too.
	reported map[string][]string
	// removed are the nodes an operator removed (RemoveNode): not counted
	// among the known ones while they are not live.
	removed         map[string]bool
	noQuorumLogged  bool
	leaseHeldLogged string

	// pl is the planner lease (nil without Config.LeaseWord; singleton.go);
	// lapsed: the holder's lapse was logged, its resumption is not yet.
	pl     *plannerlease.Lease
	lapsed bool

	// decisions and migrations are the operator's history (decisions.go).
	decisions  ring[Decision]
	migrations ring[MigrationRecord]
}

// NewActor returns the actor (spawn it with Props).
func NewActor(cfg Config, pusher Pusher) (*Actor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pusher == nil {
		return nil, errors.New("planner: nil Pusher")
	}
	migrator, _ := pusher.(Migrator)
	inlineMigrator, _ := pusher.(InlineMigrator)
	inlinePusher, _ := pusher.(InlinePusher)
	cfg.Loop.EvictBeforeMove = migrator == nil
	if cfg.Transfer == (transfer.Config{}) {
		cfg.Transfer = transfer.DefaultConfig(cfg.Name)
	}
	cfg.Transfer.Planner = cfg.Name
	l, err := plane.New(cfg.Loop)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Actor{cfg: cfg, pusher: pusher, loop: l, log: log, pending: map[string]bool{}, have: map[string]bool{},
		needFull: map[string]bool{}, inFlight: map[string]bool{}, live: map[string]bool{}, slotOf: map[string]int{},
		unslotted: map[string]bool{}, seen: map[string]uint64{}, migrator: migrator, t0: time.Now(),
		inlineMigrator: inlineMigrator, inlinePusher: inlinePusher,
		installEpoch: map[control.CohortID]uint64{}, decisions: newRing[Decision](MaxDecisions),
		granted: map[string]int64{}, joinEpoch: map[string]uint64{}, clean: map[string]bool{}, reported: map[string][]string{},
		removed: map[string]bool{}, overBudget: map[control.CohortID]int{}, phases: newRing[phaseSample](maxFreezeSamples),
		migrations: newRing[MigrationRecord](MaxMigrationRecords)}
	if a.pl, err = newPlannerLease(cfg); err != nil {
		return nil, err
	}
	if migrator != nil {
		// Migration ids only need to differ from a previous planner's
		// among the messages still in flight; the start time in
		// microseconds, shifted, keeps them apart across restarts.
		if a.xfer, err = transfer.New(cfg.Transfer, uint64(a.t0.UnixMicro())<<8); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Props returns the actor's props with a bounded mailbox.
func (a *Actor) Props(mailboxSize int) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithMailbox(actor.Bounded(mailboxSize)))
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.stop != nil {
			// A supervisor restart reuses this Actor: stop the previous
			// ticker, or ticks would come twice.
			close(a.stop)
		}
		a.stop = make(chan struct{})
		self, root, period, stop := ctx.Self(), ctx.ActorSystem().Root, a.cfg.Tick, a.stop
		go func() {
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					root.Send(self, tickMsg{})
				}
			}
		}()
	case *actor.Stopping:
		if a.stop != nil {
			close(a.stop)
			a.stop = nil
		}
		a.releaseLease()
	case *messages.AccessSummary:
		// The lease is answered even when the summary is dropped: a
		// flood of heartbeats must not cost the senders their leases.
		a.noteRoster(m)
		a.answerLease(ctx, m)
		if a.beats >= a.cfg.MaxHeartbeatsPerTick {
			a.status.Dropped++
			return
		}
		a.beats++
		a.noteInstalled(m.GetNode(), m.GetOwnermapEpoch())
		slot, ok := a.slotOf[m.GetNode()]
		if !ok {
			// No slot (not live yet, or the roster is full): its homes
			// cannot be numbered, so its weights wait for a slot.
			a.status.Dropped++
			return
		}
		// The planner numbers the nodes, not the senders: a node learns
		// its slot only from the next map, and may not be in one yet.
		m.NodeIndex = uint32(slot)
		if err := a.loop.Apply(m); err != nil {
			a.status.Dropped++
			a.log.Warn("heartbeat rejected", "node", m.GetNode(), "err", err)
			return
		}
		a.status.Heartbeats++
	case Nodes:
		a.setNodes(ctx, m)
		a.onEpochAcked(ctx)
	case tickMsg:
		a.driveLease(ctx)
		a.onTick(ctx)
	case leaseDone:
		if a.pl != nil {
			a.onLeaseDone(m)
		}
	case refineDone:
		a.onRefineDone(m)
	case pushDone:
		a.onPushDone(ctx, m)
		a.onEpochAcked(ctx)
	case migrationDone:
		if a.xfer != nil {
			a.onMigrationDone(ctx, m)
		}
	case transferTick:
		if a.xfer != nil {
			a.onTransferTick(ctx)
		}
	case *messages.RemoveNode:
		ctx.Respond(a.removeNode(m))
	case GetStatus:
		ctx.Respond(a.snapshot())
	case GetDecisions:
		ctx.Respond(a.decisionsReply())
	}
}

// snapshot is the Status a GetStatus answers: a copy the caller may keep.
func (a *Actor) snapshot() Status {
	st := a.status
	st.Roster = slices.Clone(st.Roster)
	for _, p := range a.phases.list() {
		st.FreezeMicros = append(st.FreezeMicros, p.freeze)
		st.DrainMicros = append(st.DrainMicros, p.drain)
		st.PublishMicros = append(st.PublishMicros, p.publish)
	}
	st.Refining = a.inflight != nil
	st.Quorum = a.quorum()
	st.Removed = slices.Sorted(maps.Keys(a.removed))
	a.leaseStatus(&st)
	return st
}

// dropGone deletes the entries of nodes that are not live.
func dropGone[V any](m map[string]V, live map[string]bool) {
	maps.DeleteFunc(m, func(name string, _ V) bool { return !live[name] })
}

func (a *Actor) setNodes(ctx actor.Context, n Nodes) {
	a.nodes = Nodes{Names: append([]string(nil), n.Names...), MembershipEpoch: n.MembershipEpoch, Unsettled: n.Unsettled,
		Leaving: slices.Clone(n.Leaving), Known: slices.Clone(n.Known)}
	a.status.MembershipEpoch = n.MembershipEpoch
	was := maps.Clone(a.live)
	clear(a.live)
	for _, name := range n.Names {
		if name != "" {
			a.live[name] = true
		}
	}
	if a.xfer != nil {
		// A migration waits for nothing from a node that is gone.
		for _, name := range slices.Sorted(maps.Keys(was)) {
			if !a.live[name] {
				a.sendMigrations(ctx, a.xfer.NodeGone(a.nowMicros(), name))
			}
		}
		a.afterTransferStep(ctx)
	}
	// A node that is gone no longer holds up the epoch, and its per-node
	// state goes with it.
	dropGone(a.unslotted, a.live)
	dropGone(a.pending, a.live)
	dropGone(a.have, a.live)
	dropGone(a.seen, a.live)
	dropGone(a.joinEpoch, a.live)
	dropGone(a.reported, a.live)
	for name := range a.live {
		if a.removed[name] {
			a.log.Info("a removed compute node is back: known again", "node", name)
			delete(a.removed, name)
		}
		if !was[name] {
			// Maps published while it was away moved its cohorts
			// without its acknowledgement: no lease before it has
			// installed the current one, or the staged round's, which
			// may have handed its cohorts off while it was gone
			// (lease.go).
			a.joinEpoch[name] = a.status.Epoch
			if a.staged != nil {
				a.joinEpoch[name] = max(a.joinEpoch[name], a.staged.Epoch)
			}
		}
	}
	// A node that joined since the current epoch was published gets it now
	// (in full: it has no base), so it routes by the same map as everyone
	// else; the next epoch waits for it like for every live node. Not
	// while a round of migrations is staged: the current map may still
	// place on a restarted node a cohort that the round handed to another
	// node when this one went away (I1); it gets the round's map instead.
	if a.cur != nil && a.staged == nil {
		for _, name := range n.Names {
			if name != "" && !a.have[name] && !a.pending[name] {
				a.pending[name] = true
				a.needFull[name] = true
			}
		}
	}
	a.releaseSlots(a.loop.Current())
	a.assignSlots(n.Names)
	a.maybeSettled()
}

// noteInstalled records a node's installed epoch from its heartbeat. Before
// the first publication it is how a planner taking over learns the epochs
// to publish above; afterwards a live node reporting epoch 0 while counted
// as having the current map has restarted, and gets the full map again.
func (a *Actor) noteInstalled(node string, epoch uint64) {
	if !a.live[node] {
		return
	}
	a.seen[node] = max(epoch, a.seen[node])
	if epoch == 0 && a.cur != nil && a.have[node] && a.staged == nil {
		delete(a.have, node)
		a.pending[node] = true
		a.needFull[node] = true
	}
}

// referenced reports whether a cohort of m is owned by slot i.
func referenced(m *control.OwnerMap, i int) bool {
	if m == nil {
		return false
	}
	for _, p := range m.Cohorts {
		if p.Owner == i {
			return true
		}
	}
	return false
}

// releaseSlots frees the slots of departed nodes that no cohort of m (the
// loop's current map) names any more. A slot still named keeps its node, so
// an owner index never changes meaning while a map uses it; the planner
// reassigns those cohorts (the slot is down) and frees the slot at the
// epoch that no longer names it.
func (a *Actor) releaseSlots(m *control.OwnerMap) {
	for i, name := range a.roster {
		if name != "" && !a.live[name] && !referenced(m, i) {
			a.roster[i] = ""
			delete(a.slotOf, name)
		}
	}
	for len(a.roster) > 0 && a.roster[len(a.roster)-1] == "" {
		a.roster = a.roster[:len(a.roster)-1]
	}
}

// assignSlots gives every live node without a slot one, in the order of
// names: a never-used index while the roster is shorter than
// Config.Loop.Nodes (the planner's index space), else the lowest freed one.
// Fresh indexes first keeps a reused index from inheriting the decayed
// access history (homes) of its previous node.
func (a *Actor) assignSlots(names []string) {
	for _, name := range names {
		if name == "" {
			continue
		}
		if _, ok := a.slotOf[name]; ok {
			continue
		}
		slot := -1
		if len(a.roster) < a.cfg.Loop.Nodes {
			slot = len(a.roster)
			a.roster = append(a.roster, name)
		} else if i := slices.Index(a.roster, ""); i >= 0 {
			slot = i
			a.roster[i] = name
		}
		if slot < 0 {
			if !a.unslotted[name] {
				a.unslotted[name] = true
				a.log.Warn("roster full: node gets no slot and owns nothing until one frees", "node", name, "slots", a.cfg.Loop.Nodes)
			}
			continue
		}
		delete(a.unslotted, name)
		a.slotOf[name] = slot
		a.log.Info("roster slot assigned", "node", name, "slot", slot)
	}
	a.status.Unslotted = len(a.unslotted)
	a.status.Roster = slices.Clone(a.roster)
}

func (a *Actor) maybeSettled() {
	if len(a.pending) == 0 && a.status.Acked < a.status.Epoch {
		a.status.Acked = a.status.Epoch
		a.log.Info("epoch acknowledged", "epoch", a.status.Epoch)
	}
}

func (a *Actor) state() []ownership.NodeState {
	st := make([]ownership.NodeState, a.cfg.Loop.Nodes)
	for i := range st {
		switch {
		case i >= len(a.roster) || a.roster[i] == "" || !a.live[a.roster[i]]:
			st[i] = ownership.NodeDown
		case slices.Contains(a.nodes.Leaving, a.roster[i]):
			st[i] = ownership.NodeLeaving
		}
	}
	return st
}

func (a *Actor) onTick(ctx actor.Context) {
	a.beats = 0
	if !a.acting() {
		// Another planner may hold the planner lease (or this one cannot
		// reach the memory node): plan, push and migrate nothing. The
		// heartbeats still build the graph.
		a.status.PlannerLease.IdleTicks++
		a.noteActing(false)
		return
	}
	a.noteActing(true)
	if a.xfer != nil && a.xfer.Active() {
		// A round of migrations runs: drive its resends and deadlines, and
		// plan nothing new until it is over (its map published and the
		// moves' old activations retired).
		a.sendMigrations(ctx, a.xfer.Tick(a.nowMicros()))
		a.afterTransferStep(ctx)
		a.status.Deferred++
		if len(a.pending) > 0 {
			a.push(ctx)
		}
		return
	}
	if len(a.pending) > 0 {
		// The previous epoch is not acknowledged everywhere: resend it to
		// the nodes that have not answered, and plan nothing new (SPEC §6:
		// an epoch advances only once the previous one is acknowledged or
		// its node is gone).
		a.status.Deferred++
		a.push(ctx)
		return
	}
	if len(a.live) == 0 {
		return // no node known yet: nothing to publish to
	}
	a.pruneGrants(a.nowMicros())
	if !a.mayPublish() {
		a.status.Deferred++
		return
	}
	if !a.started {
		if a.waited < a.cfg.StartupTicks && len(a.seen) < len(a.live) {
			a.waited++
			return // still learning the installed epochs
		}
		a.started = true
		if top := maxSeen(a.seen); top > 0 {
			// The old planner published epoch e+1 only once every live
			// node had acknowledged e, so nothing it published is above
			// top+1 (the heartbeats were sent after it stopped).
			a.resetAbove(ctx, top+1, "taking over")
			return
		}
	}
	if a.rebase > 0 {
		top := a.rebase
		a.rebase = 0
		a.resetAbove(ctx, top, "a node has a newer map")
		return
	}
	if a.resetEpoch != 0 && a.status.Acked >= a.resetEpoch {
		// Every node froze the other planner's cohorts; their holders get
		// one drain deadline to release (or be fenced) before any cohort
		// is installed anywhere again (I3 at the tables, not only at the
		// lock words).
		a.resetEpoch = 0
		a.quietUntil = a.nowMicros() + a.cfg.Transfer.DrainDeadlineMicros
	}
	if a.resetEpoch != 0 || a.nowMicros() < a.quietUntil {
		a.status.Deferred++
		return
	}
	a.tick++
	a.status.Tick = a.tick
	tickStart := time.Now()
	d, err := a.loop.Tick(plane.TickInput{Tick: a.tick, State: a.state(), Unsettled: a.nodes.Unsettled})
	if err == nil && d.Cohorts.RefineDue {
		a.refine(ctx) // its snapshot is the actor's work: timed with the tick
	}
	took := time.Since(tickStart).Microseconds()
	a.status.LastTickMicros = took
	a.status.TickMicros += uint64(max(took, 0))
	a.status.MaxTickMicros = max(a.status.MaxTickMicros, took)
	a.status.GraphNodes, a.status.GraphEdges = a.loop.Graph().Len()
	if err != nil {
		a.log.Error("planner tick", "err", err)
		return
	}
	a.status.LastPlan = d.Plan.Stats
	a.log.Debug("planner tick", "tick", a.tick, "took_us", took, "cohorts", len(d.Cohorts.Cohorts), "installs", len(d.Plan.Installs),
		"moves", len(d.Plan.Moves), "evictions", len(d.Plan.Evictions))
	if d.Map == nil {
		if a.rosterShrank() {
			// Nothing moved, but departed nodes left the roster: publish
			// the same assignment at the next epoch with the roster that
			// drops them, so the nodes' installed rosters (a later
			// planner's known nodes) stop counting them (lease.go).
			m := *a.loop.Bump()
			m.Epoch += a.status.Base
			a.publish(ctx, &m, changes{})
		}
		return
	}
	m := *d.Map // shallow: the loop never modifies a published map
	m.Epoch += a.status.Base
	a.recordPlan(&d, m.Epoch, time.Now())
	if a.xfer != nil {
		if moves := a.departures(&m); len(moves) > 0 {
			// Cohorts leave live nodes: freeze and drain them there (and
			// hand them to their new owners) before the map is published.
			out, err := a.xfer.Start(a.nowMicros(), moves)
			if err != nil {
				// Unreachable (the loop caps published cohorts at the
				// round's cap; moves are well formed): publishing without
				// the freezes would break I1, so publish nothing.
				a.log.Error("planner: migrations not started; map not published", "epoch", m.Epoch, "err", err)
				return
			}
			a.noteHandoffs(moves)
			a.staged, a.stagedCh = &m, kgChanges(d.Moves)
			a.log.Debug("migrations started", "epoch", m.Epoch, "moves", len(moves))
			a.sendMigrations(ctx, out)
			return
		}
	}
	a.publish(ctx, &m, kgChanges(d.Moves))
}

// refine starts the due cohort refinement on a goroutine of its own, at
// most one at a time (a due refinement while one runs is skipped: the next
// period picks a region again). Louvain over a region of RefineMaxKGs key
// groups takes milliseconds; run inline it would lengthen every
// RefineEvery-th tick by that much. The request shares no memory with the
// loop; the result comes back as a refineDone and the next tick adopts it
// if its region is unchanged. A panic in Refine is recovered and reported
// (Louvain is gonum's code, and a goroutine of our own has no supervisor).
func (a *Actor) refine(ctx actor.Context) {
	if a.inflight != nil {
		return
	}
	req := a.loop.PrepareRefine()
	if req == nil {
		return
	}
	a.inflight, a.inflightLoop = req, a.loop
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		start := time.Now()
		done := refineDone{req: req}
		defer func() {
			if r := recover(); r != nil {
				done.res, done.panic = nil, fmt.Sprint(r)
			}
			done.micros = time.Since(start).Microseconds()
			root.Send(self, done)
		}()
		done.res = cohortgen.Refine(req)
	}()
}

// onRefineDone offers a finished refinement to the loop it was taken from.
// Dropped (and counted): a result whose loop was since restarted (its
// cohort ids are another generator's), a result of another planner actor
// that ran on this PID before (a stopped planner's goroutine finishing
// late), and a panicked one.
func (a *Actor) onRefineDone(m refineDone) {
	if m.req == nil || m.req != a.inflight {
		a.status.RefinesDropped++
		return
	}
	a.inflight = nil
	a.status.Refines++
	a.status.RefineMicros += uint64(max(m.micros, 0))
	switch {
	case m.panic != "":
		a.status.RefinesDropped++
		a.log.Error("planner: cohort refinement panicked; result dropped", "panic", m.panic)
	case a.inflightLoop != a.loop:
		a.status.RefinesDropped++
	default:
		a.loop.OfferRefinement(m.res)
	}
	a.inflightLoop = nil
}

// publish makes m (the loop's map, epoch already shifted by the base) the
// pending epoch, with the roster as it stands once departed nodes m no
// longer names are dropped, and pushes it to every live node.
func (a *Actor) publish(ctx actor.Context, m *control.OwnerMap, ch changes) {
	a.releaseSlots(a.loop.Current())
	a.trackInstallEpochs(m, a.roster)
	a.pubRoster = slices.Clone(a.roster)
	a.status.Roster = slices.Clone(a.roster)
	m = a.withoutFreeSlots(m)
	if err := ValidateRoster(m, a.pubRoster); err != nil {
		// Unreachable (withoutFreeSlots): every node would refuse it, so
		// say so loudly and publish nothing.
		a.log.Error("planned map does not fit the roster; not published", "epoch", m.Epoch, "err", err)
		return
	}
	a.prev, a.cur = a.cur, m
	a.status.Epoch = m.Epoch
	a.noteOwners(m)
	a.status.Cohorts = len(m.Cohorts)
	clear(a.pending)
	clear(a.have)
	for name := range a.live {
		a.pending[name] = true
	}
	if a.log.Enabled(context.Background(), slog.LevelInfo) {
		a.log.Info("epoch published", "epoch", m.Epoch, "cohorts", len(m.Cohorts), "kgs_installed", ch.installed,
			"kgs_moved", ch.moved, "kgs_evicted", ch.evicted,
			"roster", strings.Join(a.pubRoster, ","), "owned", ownedSummary(m, a.pubRoster))
	}
	a.push(ctx)
}

// changes counts the key groups whose owner a map changes, by kind.
type changes struct{ installed, moved, evicted int }

func kgChanges(ms []plane.Move) changes {
	var c changes
	for _, m := range ms {
		switch {
		case m.From < 0:
			c.installed += len(m.KeyGroups)
		case m.To < 0:
			c.evicted += len(m.KeyGroups)
		default:
			c.moved += len(m.KeyGroups)
		}
	}
	return c
}

// withoutFreeSlots returns m without the cohorts whose owner index is a
// free slot. It happens only to the second half of an evict-then-install
// move (plane's EvictBeforeMove) whose target left, with nothing else, in
// between: the slot was freed once the first half no longer named it. Those
// cohorts are published unowned (the fallback path, as in the first half);
// the loop still counts them on the down slot and reassigns them at its
// next tick.
func (a *Actor) withoutFreeSlots(m *control.OwnerMap) *control.OwnerMap {
	free := func(p control.Placement) bool {
		return p.Owner < 0 || p.Owner >= len(a.pubRoster) || a.pubRoster[p.Owner] == ""
	}
	if !slices.ContainsFunc(m.Cohorts, free) {
		return m
	}
	out := *m
	out.Cohorts = slices.DeleteFunc(slices.Clone(m.Cohorts), free)
	a.log.Warn("cohorts planned on a departed node's freed slot published unowned", "epoch", m.Epoch,
		"cohorts", len(m.Cohorts)-len(out.Cohorts))
	return &out
}

// resetAbove publishes a map without cohorts at an epoch above top (every
// cohort back to the fallback path) and restarts the control loop from it:
// the maps the nodes hold came from another planner, whose assignment this
// one does not know, so it cannot move cohorts away from their owners
// safely; evicting everything first gives the same guarantee as an
// evict-then-install move (the new owners install only after every node
// acknowledged that the old ones stopped granting).
func (a *Actor) resetAbove(ctx actor.Context, top uint64, why string) {
	if a.loop.Current().Epoch > 0 {
		l, err := plane.New(a.cfg.Loop)
		if err != nil { // unreachable: the config was valid at NewActor
			a.log.Error("planner restart", "err", err)
			return
		}
		a.loop = l
	}
	a.status.Base = top + 1
	a.resetEpoch = top + 1
	for name := range a.live {
		// Their cohorts came from another planner: no lease of ours
		// before they installed the empty map (lease.go).
		a.joinEpoch[name] = max(a.joinEpoch[name], top+1)
	}
	a.log.Warn("publishing an empty map above the nodes' epochs", "why", why, "installed", top, "epoch", top+1)
	reset := &control.OwnerMap{Epoch: top + 1, Fallback: a.loop.Current().Fallback}
	a.cur = nil // no delta against a map of ours the nodes may not have
	a.publish(ctx, reset, changes{})
}

func maxSeen(m map[string]uint64) uint64 {
	var top uint64
	for _, e := range m {
		top = max(top, e)
	}
	return top
}

// ownedSummary is "node:cohorts" per roster node that owns any, for the log.
func ownedSummary(m *control.OwnerMap, roster []string) string {
	counts := make([]int, len(roster))
	for _, p := range m.Cohorts {
		if p.Owner >= 0 && p.Owner < len(counts) {
			counts[p.Owner]++
		}
	}
	var b strings.Builder
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", roster[i], n)
	}
	return b.String()
}

// push sends the current map to every pending node (a delta against the
// previous epoch, or the full manifest to nodes that asked for it or joined
// since), each on its own goroutine; results come back as pushDone
// messages.
func (a *Actor) push(ctx actor.Context) {
	m := a.cur
	if m == nil || !a.acting() {
		return // the pending nodes get it at a tick once the planner acts
	}
	delta, err := PushesWithRoster(a.prev, m, a.pubRoster, a.cfg.ChunkBytes, a.cfg.Name, a.nodes.MembershipEpoch)
	if err != nil {
		a.log.Error("encode manifest", "epoch", m.Epoch, "err", err)
		return
	}
	full := delta
	if len(delta) > 0 && delta[0].GetBaseEpoch() != 0 {
		if full, err = PushesWithRoster(nil, m, a.pubRoster, a.cfg.ChunkBytes, a.cfg.Name, a.nodes.MembershipEpoch); err != nil {
			a.log.Error("encode manifest", "epoch", m.Epoch, "err", err)
			return
		}
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	for name := range a.pending {
		if a.inFlight[name] {
			continue // one push per node at a time; a slow node is not flooded
		}
		a.inFlight[name] = true
		ps := delta
		if a.needFull[name] {
			ps = full
		}
		if a.inlinePusher != nil {
			a.pushInline(ctx, name, m.Epoch, ps)
			continue
		}
		go func() {
			c, cancel := context.WithTimeout(context.Background(), a.cfg.PushTimeout)
			defer cancel()
			var last *messages.OwnerMapAck
			for _, p := range ps {
				ack, err := a.pusher.Push(c, name, p)
				if err != nil {
					root.Send(self, pushDone{node: name, epoch: m.Epoch, err: err})
					return
				}
				last = ack
				if ack.GetNeedFull() || ack.GetError() != "" {
					break
				}
			}
			root.Send(self, pushDone{node: name, epoch: m.Epoch, ack: last})
		}()
	}
}

// pushInline pushes ps to an in-process node from the actor itself.
func (a *Actor) pushInline(ctx actor.Context, name string, epoch uint64, ps []*messages.OwnerMapPush) {
	d := pushDone{node: name, epoch: epoch}
	for _, p := range ps {
		d.ack, d.err = a.inlinePusher.PushNow(name, p)
		if d.err != nil || d.ack.GetNeedFull() || d.ack.GetError() != "" {
			break
		}
	}
	a.onPushDone(ctx, d)
	a.onEpochAcked(ctx)
}

func (a *Actor) onPushDone(_ actor.Context, d pushDone) {
	delete(a.inFlight, d.node)
	if d.epoch != a.status.Epoch || !a.pending[d.node] {
		return // a late answer to an older push: idempotent, ignored
	}
	switch {
	case d.err != nil:
		a.log.Warn("push failed", "node", d.node, "epoch", d.epoch, "err", d.err)
	case d.ack.GetNeedFull() || d.ack.GetError() != "":
		a.needFull[d.node] = true
		a.log.Warn("push refused; full manifest next", "node", d.node, "epoch", d.epoch, "err", d.ack.GetError())
	case d.ack.GetInstalledEpoch() >= d.epoch:
		if from := d.ack.GetInstalledPlanner(); d.ack.GetInstalledEpoch() > d.epoch || (from != "" && from != a.cfg.Name) {
			// The node holds a newer map than ours, or another planner's
			// map of the same epoch: published by a planner we took over
			// from without hearing of the node in time, or by one that
			// still runs during a placement change. Ours would be ignored
			// (or, as a delta, applied to the wrong base); reset above it.
			a.rebase = max(a.rebase, d.ack.GetInstalledEpoch())
		} else {
			a.noteClean(d.node)
		}
		delete(a.pending, d.node)
		delete(a.needFull, d.node)
		a.have[d.node] = true
		a.maybeSettled()
	}
}
