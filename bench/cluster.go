package bench

import (
	"context"
	"fmt"
	"google.golang.org/protobuf/proto"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/invariants"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
)

// cluster is one run's compute nodes in this process: actors.Node data
// planes connected by an actors.InProcess transport (owner RPCs and
// OwnerMap pushes are direct calls into the peer node), and, in aura mode,
// the planner actor in an actor system of its own.
type cluster struct {
	tick  time.Duration // the planner's tick and the nodes' heartbeat period
	names []string
	nodes []*actors.Node
	devs  []rdma.Device
	net   *actors.InProcess
	// static places partition values on nodes (routing of mn-only and
	// static, and every router's fallback layer).
	static router.FallbackFunc

	// published is the newest OwnerMap the nodes installed: the clients'
	// source for their copies (nil until the first map).
	published atomic.Pointer[control.OwnerMap]

	// aura: the planner.
	psys *actor.ActorSystem
	ppid *actor.PID
	// watched is node 0, whose installed map the clients copy; set once it
	// exists (the planner may push before).
	watched atomic.Pointer[actors.Node]

	// checker watches every owner table's activations and grants (I1, I4);
	// nil for mn-only.
	checker *invariants.Checker

	mu         sync.Mutex // guards the migration count's state
	seenEpoch  uint64
	lastOwner  map[uint64]int // key group → the node that last owned it
	migrations atomic.Uint64
	// plannerMigrations is the planner's last migration count (aura).
	plannerMigrations atomic.Uint64
}

// startCluster starts cfg.CNs nodes on the loaded tables and sets up the
// mode's ownership: none for mn-only; the fixed OwnerMap of static or hash
// pushed to every node before any transaction runs; the planner for aura.
func startCluster(ctx context.Context, cfg Config, layout *store.Layout, cen *census) (c *cluster, err error) {
	wl := cfg.Workload
	c = &cluster{tick: cfg.PlannerTick, net: actors.NewInProcess(), static: client.StaticFallback(wl, cfg.CNs),
		lastOwner: map[uint64]int{}}
	defer func() {
		if err != nil {
			c.close()
			c = nil
		}
	}()
	for i := range cfg.CNs {
		c.names = append(c.names, fmt.Sprintf("cn-%d", i+1))
	}
	var fixed *control.OwnerMap
	switch cfg.Mode {
	case "static":
		fixed = staticMap(wl, cen, cfg.CNs)
	case "hash":
		fixed = hashMap(cen, c.names)
	}
	table := owner.DefaultConfig()
	if fixed != nil {
		if err := checkMap(fixed, cfg.CNs); err != nil {
			return c, err
		}
		// A fixed map places every loaded key group, far more cohorts than
		// the planner's cap of 1,024 when each is one key group (hash), so
		// the owner tables are sized to the map.
		perNode, largest := ownedCounts(fixed, cfg.CNs)
		table.MaxCohorts = max(table.MaxCohorts, perNode)
		table.MaxKeyGroupsPerCohort = max(table.MaxKeyGroupsPerCohort, largest)
	}
	if cfg.Mode == "aura" {
		c.psys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		pcfg := planner.DefaultConfig(c.names[0], cfg.CNs)
		pcfg.Tick = cfg.PlannerTick
		pa, err := planner.NewActor(pcfg, watchPusher{c})
		if err != nil {
			return c, err
		}
		c.ppid = c.psys.Root.Spawn(pa.Props(8192))
		c.psys.Root.Send(c.ppid, planner.Nodes{Names: c.names, MembershipEpoch: 1})
	}
	for i, name := range c.names {
		dev, err := cfg.Dial(ctx)
		if err != nil {
			return c, fmt.Errorf("bench: memory node: %w", err)
		}
		c.devs = append(c.devs, dev)
		ncfg := actors.DefaultNodeConfig(name)
		ncfg.ID = uint32(i + 1)
		ncfg.Coordinators = cfg.CoordinatorsPerCN
		if cfg.Mode != "mn-only" {
			if c.checker == nil {
				c.checker = invariants.New()
			}
			oc := &actors.OwnershipConfig{Names: c.names, Transport: c.net, Table: table, HeartbeatEvery: cfg.PlannerTick,
				Observer: c.checker}
			if c.ppid != nil {
				// The profiler's summary every tick is the planner's only
				// input, as on a real node (SPEC §5).
				beats, pid := actors.NewHeartbeatSender(c.psys.Root), c.ppid
				oc.Heartbeat = func(s *messages.AccessSummary, reply func(*messages.LeaseGrant)) { beats.Send(pid, s, reply) }
			}
			ncfg.Ownership = oc
		}
		n, err := actors.NewNode(ncfg, dev, layout, wl)
		if err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, n)
		c.net.Add(n)
	}
	if c.ppid != nil {
		c.watched.Store(c.nodes[0])
	}
	if fixed != nil {
		if err := c.install(ctx, fixed); err != nil {
			return c, err
		}
	}
	return c, nil
}

// install pushes m to every node, as the planner would (the manifest
// package's encoding, chunked OwnerMapPush messages, acknowledgements), and
// publishes it to the clients once every node installed it.
func (c *cluster) install(ctx context.Context, m *control.OwnerMap) error {
	pushes, err := planner.Pushes(nil, m, planner.DefaultChunkBytes, "bench", 1)
	if err != nil {
		return fmt.Errorf("bench: encode OwnerMap: %w", err)
	}
	for _, name := range c.names {
		var ack *messages.OwnerMapAck
		for _, p := range pushes {
			if ack, err = c.net.Push(ctx, name, p); err != nil {
				return fmt.Errorf("bench: push OwnerMap to %s: %w", name, err)
			}
			if ack.GetError() != "" || ack.GetNeedFull() {
				return fmt.Errorf("bench: %s refused OwnerMap epoch %d: %q", name, m.Epoch, ack.GetError())
			}
		}
		if ack.GetInstalledEpoch() != m.Epoch {
			return fmt.Errorf("bench: %s installed epoch %d, want %d", name, ack.GetInstalledEpoch(), m.Epoch)
		}
	}
	c.observe(m)
	return nil
}

// watchPusher is the planner's Pusher: the in-process transport, watching
// node 0's installs to publish each new map to the clients and count
// migrations. The planner pushes every epoch to every node (it advances
// only once all acknowledged), so no epoch is missed.
type watchPusher struct{ c *cluster }

func (w watchPusher) Push(ctx context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	ack, err := w.c.net.Push(ctx, node, p)
	if n := w.c.watched.Load(); err == nil && n != nil && node == n.Name() {
		w.c.observe(n.OwnerMap())
	}
	return ack, err
}

// Migrate implements planner.Migrator: migration messages go to the nodes
// through the in-process transport.
func (w watchPusher) Migrate(ctx context.Context, node string, msg proto.Message) (proto.Message, error) {
	return w.c.net.Migrate(ctx, node, msg)
}

// TryMigrate implements planner.InlineMigrator.
func (w watchPusher) TryMigrate(node string, msgs []proto.Message) []proto.Message {
	return w.c.net.TryMigrate(node, msgs)
}

// PushNow implements planner.InlinePusher (watching node 0's installs, as
// Push does).
func (w watchPusher) PushNow(node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	return w.Push(context.Background(), node, p)
}

// observe publishes m if it is newer than the last map seen and counts its
// migrations: cohorts installed on a node other than the one that last
// owned one of their key groups. The planner moves a cohort by evicting it
// (its key groups fall back to MN CAS) and installing it elsewhere a later
// epoch, so the previous owner is remembered across unowned epochs.
// Re-cutting cohorts on one node is not a migration.
func (c *cluster) observe(m *control.OwnerMap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m == nil || m.Epoch <= c.seenEpoch {
		return
	}
	c.seenEpoch = m.Epoch
	for _, p := range m.Cohorts {
		moved := false
		for _, kg := range p.KeyGroups {
			if o, ok := c.lastOwner[kg]; ok && o != p.Owner {
				moved = true
			}
			c.lastOwner[kg] = p.Owner
		}
		if moved {
			c.migrations.Add(1)
		}
	}
	c.published.Store(m)
}

// cohorts is the number of cohorts of the published map.
func (c *cluster) cohorts() int {
	if m := c.published.Load(); m != nil {
		return len(m.Cohorts)
	}
	return 0
}

// manifest describes the published map: its epoch and the size of its full
// version-2 manifest (what a node that joins now is sent).
func (c *cluster) manifest() Manifest {
	m := c.published.Load()
	if m == nil {
		return Manifest{}
	}
	return Manifest{Epoch: m.Epoch, Bytes: uint64(max(0, manifest.Size(m, manifest.Version2)))}
}

// migrationCount is the migrations so far: the planner's (cohorts that
// left a node) in aura mode, else the observed owner changes (none with a
// fixed map).
func (c *cluster) migrationCount() uint64 {
	if c.ppid == nil {
		return c.migrations.Load()
	}
	if _, m, err := c.plannerStatus(sampleStatusTimeout); err == nil && m != nil {
		c.plannerMigrations.Store(m.Count)
	}
	// A planner too busy to answer in time: the last count it gave (the
	// count is cumulative, so the timeline shows a flat step, not a dip).
	return c.plannerMigrations.Load()
}

// How long the planner has to answer a status request. A planner behind
// its ticks (more key groups than its tick budget covers, on a busy
// machine) answers after the heartbeats queued before the request: a
// timeline sample skips its migration count rather than stall the
// sampler, while the run's final figures wait much longer rather than
// lose the run.
const (
	sampleStatusTimeout = time.Second
	finalStatusTimeout  = time.Minute
)

// plannerStatus returns the planner's status (aura only) and its
// migrations.
func (c *cluster) plannerStatus(timeout time.Duration) (*PlannerStats, *Migrations, error) {
	if c.ppid == nil {
		return nil, nil, nil
	}
	r, err := c.psys.Root.RequestFuture(c.ppid, planner.GetStatus{}, timeout).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: planner status: %w", err)
	}
	st, ok := r.(planner.Status)
	if !ok {
		return nil, nil, fmt.Errorf("bench: planner status: unexpected %T", r)
	}
	x := st.Transfer
	mig := &Migrations{Count: x.Moved + x.Evicted, FreezeP99Us: p99(st.FreezeMicros), Moved: x.Moved, Evicted: x.Evicted,
		RolledBack: x.Kept, Stuck: x.Stuck, DrainP99Us: p99(st.DrainMicros), PublishP99Us: p99(st.PublishMicros)}
	return &PlannerStats{TickMs: float64(c.tick.Microseconds()) / 1000, Ticks: st.Tick, Epoch: st.Epoch,
		Acked: st.Acked, Heartbeats: st.Heartbeats, Dropped: st.Dropped, Deferred: st.Deferred,
		MeanTickUs: mean(st.TickMicros, st.Tick), MaxTickUs: st.MaxTickMicros,
		Refines: st.Refines, MeanRefineUs: mean(st.RefineMicros, st.Refines)}, mig, nil
}

// p99 is the 99th percentile of durations in microseconds (negative ones
// counted as 0), exact: the nearest-rank value of the samples. Why not the
// Histogram: the planner keeps at most 4,096 samples, so sorting a copy is
// cheap, and a histogram bucket's lower bound reads up to 6% low — enough
// to report a freeze window of 10.6 ms as 10,240 µs, under a 10 ms target
// it misses.
func p99(us []int64) uint64 {
	if len(us) == 0 {
		return 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	// Nearest rank: the smallest sample with at least 99% of the samples
	// at or below it.
	v := s[(99*len(s)+99)/100-1]
	return uint64(max(v, 0))
}

// mean is sum/n, 0 when n is 0.
func mean(sum, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// close stops the planner first (no push after this), then the nodes
// (after their queued transactions, whose owner RPCs still reach their
// peers), then the planner's actor system (the nodes' last heartbeats go to
// it) and the devices. Idempotent.
func (c *cluster) close() {
	if c.ppid != nil {
		_ = c.psys.Root.PoisonFuture(c.ppid).Wait()
		c.ppid = nil
	}
	for _, n := range c.nodes {
		n.Close()
	}
	for _, n := range c.nodes {
		c.net.Remove(n.Name())
	}
	c.nodes = nil
	if c.psys != nil {
		c.psys.Shutdown()
		c.psys = nil
	}
	for _, d := range c.devs {
		d.Close()
	}
	c.devs = nil
}

// router returns a client's AffinityRouter: the static fallback under the
// cohort overlay of the maps the client installs.
func (c *cluster) router() *router.Router {
	rc := router.DefaultConfig(len(c.names))
	rc.Fallback = c.static
	return router.New(rc)
}

// finishedPerNode counts, by node index, the transactions each node's
// coordinators finished (committed or rolled back by the transaction's own
// logic: the summary's "done"), whoever submitted them: the per-CN load of
// the timeline.
func (c *cluster) finishedPerNode() []uint64 {
	out := make([]uint64, len(c.nodes))
	for i, n := range c.nodes {
		st := n.TxnStats()
		for k := range st.ByKind {
			out[i] += st.ByKind[k][messages.TxnOutcome_TXN_OUTCOME_COMMITTED] + st.ByKind[k][messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK]
		}
	}
	return out
}
