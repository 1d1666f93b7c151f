package cohort

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// ActivatorName is the name under which every node registers its
// activator; a peer addresses it as PID(node's remote address, this name).
const ActivatorName = "cohorts"

// ActivationName returns the actor id of cohort id's activation on a node
// (a child of the activator). A caller may address it directly once it
// knows the activation exists (PIDCache); when it does not, the message
// comes back as a dead letter and the caller goes through the activator.
func ActivationName(id control.CohortID) string {
	return ActivatorName + "/c" + strconv.FormatUint(id, 10)
}

// ParseActivationName returns the cohort id of an activation's actor id.
func ParseActivationName(s string) (control.CohortID, bool) {
	rest, ok := strings.CutPrefix(s, ActivatorName+"/c")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil
}

// Authority is the node's knowledge of which cohorts it owns: its installed
// OwnerMap and owner table. The activator asks it before every activation
// and on every Sync.
type Authority interface {
	// Owned reports whether this node grants cohort id's locks now (the
	// cohort is installed and active in its table at its installed map),
	// and the epoch the activation was installed at.
	Owned(id control.CohortID) (installEpoch uint64, ok bool)
	// Held reports whether the node's table still holds the activation
	// (id, installEpoch) in any phase — active, frozen or draining — so
	// that releases must still reach it.
	Held(id control.CohortID, installEpoch uint64) bool
}

// Server does the lock work of a cohort's requests: the node's owner
// table, which fences by epoch and answers MOVED, RETRY, STALE_EPOCH or
// NOT_OWNER for cohorts it does not grant (owner.Service implements it).
type Server interface {
	HandleLock(*messages.LockRequest) *messages.LockReply
	HandleUnlock(*messages.UnlockRequest) *messages.UnlockReply
}

// Config bounds an activator.
type Config struct {
	// MaxActivations caps the live activations of one node. Default 1024,
	// the owner table's cohort cap (owner.Config.MaxCohorts): a node never
	// holds more cohorts than its table, so the cap is reached only by a
	// misconfiguration; past it requests are served by the activator
	// itself (correct, one actor for all of them), never refused.
	MaxActivations int
	// MaxTombstones caps the remembered retired activations. Default 4096:
	// a tombstone keeps an activation (id, epoch) the node retired from
	// being activated again by a late request; the oldest is forgotten
	// first, by which time the table's own tombstones (and the map's epoch)
	// fence the request.
	MaxTombstones int
	// MailboxSize bounds each activation's mailbox (and the activator's).
	// Default 1024 requests.
	MailboxSize int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{MaxActivations: 1024, MaxTombstones: 4096, MailboxSize: 1024}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxActivations < 1 || c.MaxActivations > 1<<20 {
		errs = append(errs, fmt.Errorf("cohort: MaxActivations %d, want 1..%d", c.MaxActivations, 1<<20))
	}
	if c.MaxTombstones < 1 || c.MaxTombstones > 1<<24 {
		errs = append(errs, fmt.Errorf("cohort: MaxTombstones %d, want 1..%d", c.MaxTombstones, 1<<24))
	}
	if c.MailboxSize < 1 || c.MailboxSize > 1<<20 {
		errs = append(errs, fmt.Errorf("cohort: MailboxSize %d, want 1..%d", c.MailboxSize, 1<<20))
	}
	return errors.Join(errs...)
}

// Sync tells the activator that the node's ownership changed (a map was
// installed, a cohort retired): activations the Authority no longer holds
// are stopped — after the requests already in their mailboxes — and
// tombstoned.
type Sync struct{}

// GetStats asks the activator for its Stats.
type GetStats struct{}

// Stats counts an activator's work.
type Stats struct {
	// Active lists the cohorts with a live activation and its epoch.
	Active map[control.CohortID]uint64
	// Activated and Retired count activations started and stopped.
	Activated, Retired uint64
	// Direct counts requests the activator answered itself: cohorts this
	// node does not grant (the table's typed refusal) and releases of
	// retired activations.
	Direct uint64
	// Fenced counts activations refused because their (id, epoch) was
	// tombstoned.
	Fenced uint64
	// Tombstones is the number of remembered retired activations.
	Tombstones int
}

type activationRef struct {
	pid   *actor.PID
	epoch uint64
}

type tombstone struct {
	id    control.CohortID
	epoch uint64
}

// Activator is a node's cohort activator (an actor). Requests for a cohort
// (messages.LockRequest, messages.UnlockRequest) reach it by cohort id; it
// forwards them to the cohort's activation, starting one if the Authority
// says the node owns the cohort, and answers the rest itself through the
// Server, whose table refuses with the typed reply (fencing: no activation
// exists on a node that does not own the cohort at its epoch).
type Activator struct {
	cfg  Config
	auth Authority
	srv  Server

	act      map[control.CohortID]activationRef
	stopping map[control.CohortID]*actor.PID
	tombs    map[tombstone]struct{}
	order    []tombstone // FIFO of tombs, for eviction
	stats    Stats
}

// NewProps returns the props of an activator with a bounded mailbox.
func NewProps(cfg Config, auth Authority, srv Server) (*actor.Props, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if auth == nil || srv == nil {
		return nil, errors.New("cohort: activator needs an Authority and a Server")
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Activator{cfg: cfg, auth: auth, srv: srv, act: map[control.CohortID]activationRef{},
			stopping: map[control.CohortID]*actor.PID{}, tombs: map[tombstone]struct{}{}}
	}, actor.WithMailbox(actor.Bounded(cfg.MailboxSize))), nil
}

// Spawn registers an activator under ActivatorName in system.
func Spawn(system *actor.ActorSystem, cfg Config, auth Authority, srv Server) (*actor.PID, error) {
	props, err := NewProps(cfg, auth, srv)
	if err != nil {
		return nil, err
	}
	pid, err := system.Root.SpawnNamed(props, ActivatorName)
	if err != nil {
		return nil, fmt.Errorf("cohort: activator: %w", err)
	}
	return pid, nil
}

// Receive implements actor.Actor.
func (a *Activator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.LockRequest:
		if pid := a.route(ctx, m.GetCohortId()); pid != nil {
			ctx.Forward(pid)
			return
		}
		a.stats.Direct++
		ctx.Respond(a.srv.HandleLock(m))
	case *messages.UnlockRequest:
		// Releases go to a live activation (it serialises with its
		// grants); a cohort this node does not grant is never activated
		// for a release: the table releases what it still holds.
		if r, ok := a.act[m.GetCohortId()]; ok {
			ctx.Forward(r.pid)
			return
		}
		a.stats.Direct++
		ctx.Respond(a.srv.HandleUnlock(m))
	case Sync:
		a.sync(ctx)
	case GetStats:
		s := a.stats
		s.Active = make(map[control.CohortID]uint64, len(a.act))
		for id, r := range a.act {
			s.Active[id] = r.epoch
		}
		s.Tombstones = len(a.tombs)
		ctx.Respond(s)
	case *actor.Terminated:
		for id, pid := range a.stopping {
			if pid.Equal(m.Who) {
				delete(a.stopping, id)
			}
		}
	}
}

// route returns the activation serving cohort id, starting it if this node
// owns the cohort; nil when the activator answers itself.
func (a *Activator) route(ctx actor.Context, id control.CohortID) *actor.PID {
	if r, ok := a.act[id]; ok {
		return r.pid
	}
	epoch, ok := a.auth.Owned(id)
	if !ok {
		return nil
	}
	if _, dead := a.tombs[tombstone{id, epoch}]; dead {
		a.stats.Fenced++
		return nil
	}
	if _, busy := a.stopping[id]; busy || len(a.act) >= a.cfg.MaxActivations {
		// The previous activation's name is still registered until it
		// stops, or the cap is reached: answer directly meanwhile.
		return nil
	}
	srv := a.srv
	props := actor.PropsFromProducer(func() actor.Actor { return &activation{srv: srv} },
		actor.WithMailbox(actor.Bounded(a.cfg.MailboxSize)))
	pid, err := ctx.SpawnNamed(props, "c"+strconv.FormatUint(id, 10))
	if err != nil {
		return nil
	}
	a.act[id] = activationRef{pid: pid, epoch: epoch}
	a.stats.Activated++
	return pid
}

// sync stops and tombstones the activations the Authority no longer holds.
func (a *Activator) sync(ctx actor.Context) {
	for id, r := range a.act {
		if a.auth.Held(id, r.epoch) {
			if e, ok := a.auth.Owned(id); !ok || e == r.epoch {
				continue
			}
			// Held but re-installed at another epoch: impossible while
			// the table holds (id, r.epoch); fall through and retire.
		}
		// Poison, not Stop: requests already queued are answered (by the
		// table, which now refuses them with MOVED or releases them).
		ctx.Poison(r.pid)
		delete(a.act, id)
		a.stopping[id] = r.pid
		a.bury(tombstone{id, r.epoch})
		a.stats.Retired++
	}
}

func (a *Activator) bury(t tombstone) {
	if _, ok := a.tombs[t]; ok {
		return
	}
	if len(a.order) >= a.cfg.MaxTombstones {
		delete(a.tombs, a.order[0])
		a.order = a.order[1:]
	}
	a.tombs[t] = struct{}{}
	a.order = append(a.order, t)
}

// activation serves one cohort's requests on its owner. The table does the
// granting and fencing; the activation gives the cohort its own mailbox
// and address, so that requests of different cohorts do not queue behind
// each other and a caller can reach it without the activator's hop.
type activation struct{ srv Server }

func (a *activation) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.LockRequest:
		ctx.Respond(a.srv.HandleLock(m))
	case *messages.UnlockRequest:
		ctx.Respond(a.srv.HandleUnlock(m))
	}
}
