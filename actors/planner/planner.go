package planner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/control/plane"
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
	// Loop configures the control loop (Loop.Nodes is the owner index
	// space; Nodes messages name the node at each index).
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
	// Logger receives one line per published epoch (debug: per tick).
	// Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig(name string, nodes int) Config {
	loop := plane.DefaultConfig(nodes)
	// No live migration yet: a move goes through the fallback path.
	loop.EvictBeforeMove = true
	return Config{Name: name, Loop: loop, Tick: 100 * time.Millisecond,
		ChunkBytes: DefaultChunkBytes, PushTimeout: 2 * time.Second, MaxHeartbeatsPerTick: 1024}
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
	return errors.Join(errs...)
}

// Nodes tells the planner the cluster's nodes: Names[i] is the node at owner
// index i ("" for an index no live node holds), at a membership epoch.
// Unsettled holds ownership where it is (SPEC §6).
type Nodes struct {
	Names           []string
	MembershipEpoch uint64
	Unsettled       bool
}

// Status is the planner's state, returned for a GetStatus request.
type Status struct {
	Tick            uint64
	Epoch           uint64 // last published (possibly not yet acknowledged)
	Acked           uint64 // last epoch acknowledged by every live node
	Cohorts         int
	Heartbeats      uint64
	Dropped         uint64 // heartbeats over MaxHeartbeatsPerTick or rejected
	Deferred        uint64 // ticks skipped while an epoch awaited acks
	LastPlan        ownership.Stats
	MembershipEpoch uint64
}

// GetStatus asks the actor for its Status.
type GetStatus struct{}

type tickMsg struct{}

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
	log    *slog.Logger
	stop   chan struct{}

	nodes    Nodes
	tick     uint64
	beats    int
	status   Status
	pending  map[string]bool // live nodes that have not acknowledged status.Epoch
	needFull map[string]bool
	inFlight map[string]bool   // nodes with a push not yet answered: at most one each
	prev     *control.OwnerMap // the map before status.Epoch (delta base)
}

// NewActor returns the actor (spawn it with Props).
func NewActor(cfg Config, pusher Pusher) (*Actor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pusher == nil {
		return nil, errors.New("planner: nil Pusher")
	}
	l, err := plane.New(cfg.Loop)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Actor{cfg: cfg, pusher: pusher, loop: l, log: log, pending: map[string]bool{}, needFull: map[string]bool{},
		inFlight: map[string]bool{}}, nil
}

// Props returns the actor's props with a bounded mailbox.
func (a *Actor) Props(mailboxSize int) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithMailbox(actor.Bounded(mailboxSize)))
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
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
	case *messages.AccessSummary:
		if a.beats >= a.cfg.MaxHeartbeatsPerTick {
			a.status.Dropped++
			return
		}
		a.beats++
		if err := a.loop.Apply(m); err != nil {
			a.status.Dropped++
			a.log.Warn("heartbeat rejected", "node", m.GetNode(), "err", err)
			return
		}
		a.status.Heartbeats++
	case Nodes:
		a.setNodes(m)
	case tickMsg:
		a.onTick(ctx)
	case pushDone:
		a.onPushDone(ctx, m)
	case GetStatus:
		ctx.Respond(a.status)
	}
}

func (a *Actor) setNodes(n Nodes) {
	a.nodes = Nodes{Names: append([]string(nil), n.Names...), MembershipEpoch: n.MembershipEpoch, Unsettled: n.Unsettled}
	a.status.MembershipEpoch = n.MembershipEpoch
	live := map[string]bool{}
	for _, name := range n.Names {
		if name != "" {
			live[name] = true
		}
	}
	// A node that is gone no longer holds up the epoch.
	for name := range a.pending {
		if !live[name] {
			delete(a.pending, name)
		}
	}
	a.maybeSettled()
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
		if i >= len(a.nodes.Names) || a.nodes.Names[i] == "" {
			st[i] = ownership.NodeDown
		}
	}
	return st
}

func (a *Actor) onTick(ctx actor.Context) {
	a.beats = 0
	if len(a.pending) > 0 {
		// The previous epoch is not acknowledged everywhere: resend it to
		// the nodes that have not answered, and plan nothing new (SPEC §6:
		// an epoch advances only once the previous one is acknowledged or
		// its node is gone).
		a.status.Deferred++
		a.push(ctx, a.loop.Current())
		return
	}
	if len(a.nodes.Names) == 0 {
		return // no node known yet: nothing to publish to
	}
	a.tick++
	a.status.Tick = a.tick
	d, err := a.loop.Tick(plane.TickInput{Tick: a.tick, State: a.state(), Unsettled: a.nodes.Unsettled})
	if err != nil {
		a.log.Error("planner tick", "err", err)
		return
	}
	a.status.LastPlan = d.Plan.Stats
	a.log.Debug("planner tick", "tick", a.tick, "cohorts", len(d.Cohorts.Cohorts), "installs", len(d.Plan.Installs),
		"moves", len(d.Plan.Moves), "evictions", len(d.Plan.Evictions))
	if d.Map == nil {
		return
	}
	a.prev = a.current()
	a.status.Epoch = d.Map.Epoch
	a.status.Cohorts = len(d.Map.Cohorts)
	clear(a.pending)
	for _, name := range a.nodes.Names {
		if name != "" {
			a.pending[name] = true
		}
	}
	a.log.Info("epoch published", "epoch", d.Map.Epoch, "cohorts", len(d.Map.Cohorts), "moves", len(d.Moves))
	a.push(ctx, d.Map)
}

// current returns the last map every live node acknowledged.
func (a *Actor) current() *control.OwnerMap {
	return a.loop.Current()
}

// push sends m to every pending node (a delta against the previous epoch,
// or the full manifest to nodes that asked for it), each on its own
// goroutine; results come back as pushDone messages.
func (a *Actor) push(ctx actor.Context, m *control.OwnerMap) {
	delta, err := Pushes(a.prev, m, a.cfg.ChunkBytes, a.cfg.Name, a.nodes.MembershipEpoch)
	if err != nil {
		a.log.Error("encode manifest", "epoch", m.Epoch, "err", err)
		return
	}
	full := delta
	if len(delta) > 0 && delta[0].GetBaseEpoch() != 0 {
		if full, err = Pushes(nil, m, a.cfg.ChunkBytes, a.cfg.Name, a.nodes.MembershipEpoch); err != nil {
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
		delete(a.pending, d.node)
		delete(a.needFull, d.node)
		a.maybeSettled()
	}
}
