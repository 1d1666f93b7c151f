package actors

import (
	"context"
	"fmt"
	"google.golang.org/protobuf/proto"
	"math/rand/v2"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/cohort"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// AddressBook maps a node's membership name to its remote address
// (host:port). cluster.Membership provides it from the members' metadata.
type AddressBook interface {
	RemoteAddress(node string) (string, bool)
}

// AddressBookFunc adapts a function to AddressBook.
type AddressBookFunc func(node string) (string, bool)

// RemoteAddress implements AddressBook.
func (f AddressBookFunc) RemoteAddress(node string) (string, bool) { return f(node) }

// RemoteTransport carries owner lock RPCs to the cohorts' activations on
// other nodes through protoactor remote (package actors/cohort). A request
// goes straight to the cohort's activation when the transport's PIDCache
// knows it, else to the owner node's activator, which forwards it to the
// activation (starting one if the node owns the cohort) or answers with the
// table's typed refusal. The cache is keyed by the requests' OwnerMap
// epoch: a request from a newer map empties it. A dead letter from a
// cached activation (retired since) drops the entry and the request goes
// to the activator. Requests to the activator go through Call
// (per-attempt timeout, jittered exponential backoff, bounded attempts,
// the same request id each attempt). It implements owner.Transport.
type RemoteTransport struct {
	root *actor.RootContext
	book AddressBook
	cfg  CallConfig
	pids *cohort.PIDCache
	mu   sync.Mutex
	rng  *rand.Rand
}

// NewRemoteTransport returns a transport sending from system's root context.
func NewRemoteTransport(system *actor.ActorSystem, book AddressBook, cfg CallConfig, seed uint64) (*RemoteTransport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RemoteTransport{root: system.Root, book: book, cfg: cfg, pids: cohort.NewPIDCache(0),
		rng: rand.New(rand.NewPCG(seed, 0x6f776e6572))}, nil
}

// UnknownNodeError is returned for a node the address book does not know.
type UnknownNodeError struct{ Node string }

func (e *UnknownNodeError) Error() string { return fmt.Sprintf("owner rpc: unknown node %q", e.Node) }

func (t *RemoteTransport) address(node string) (string, error) {
	addr, ok := t.book.RemoteAddress(node)
	if !ok {
		return "", &UnknownNodeError{Node: node}
	}
	return addr, nil
}

// newRand returns a generator for one call, so calls do not serialise on
// one.
func (t *RemoteTransport) newRand() *rand.Rand {
	t.mu.Lock()
	defer t.mu.Unlock()
	return rand.New(rand.NewPCG(t.rng.Uint64(), t.rng.Uint64()))
}

// Lock implements owner.Transport.
func (t *RemoteTransport) Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	// The request's epoch is the requester's OwnerMap epoch: a newer map
	// may have moved any cohort.
	t.pids.Invalidate(req.GetEpoch())
	rep, err := cohortCall[*messages.LockReply](ctx, t, node, req.GetCohortId(), req, "lock")
	if err == nil {
		switch rep.GetStatus() {
		case messages.LockStatus_LOCK_STATUS_OK, messages.LockStatus_LOCK_STATUS_CONFLICT:
			// Granting (or refusing on a held record) means the cohort
			// is active there, so an activation serves it.
			if addr, err := t.address(node); err == nil {
				t.pids.Put(node, addr, req.GetCohortId(), req.GetEpoch())
			}
		default:
			t.pids.Drop(node, req.GetCohortId())
		}
	}
	return rep, err
}

// Unlock implements owner.Transport.
func (t *RemoteTransport) Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	return cohortCall[*messages.UnlockReply](ctx, t, node, req.GetCohortId(), req, "unlock")
}

// Activations returns the number of cached activation PIDs (for tests and
// diagnostics).
func (t *RemoteTransport) Activations() int { return t.pids.Len() }

// cohortCall sends req about cohort id to its activation on node (cached)
// or to node's activator, and type-checks the reply.
func cohortCall[R any](ctx context.Context, t *RemoteTransport, node string, id control.CohortID, req any, what string) (R, error) {
	var zero R
	addr, err := t.address(node)
	if err != nil {
		return zero, err
	}
	if pid := t.pids.Get(node, addr, id); pid != nil {
		r, err := t.root.RequestFuture(pid, req, t.cfg.AttemptTimeout).Result()
		if err == nil {
			if _, dead := r.(*actor.DeadLetterResponse); !dead {
				if rep, ok := r.(R); ok {
					return rep, nil
				}
				return zero, fmt.Errorf("owner rpc: %s answered a %s request with %T", node, what, r)
			}
		}
		// Retired since, or no answer in time: forget it and ask the
		// activator (the request id makes a resend harmless).
		t.pids.Drop(node, id)
	}
	r, err := Call(ctx, t.root, actor.NewPID(addr, cohort.ActivatorName), req, t.cfg, t.newRand())
	if err != nil {
		return zero, err
	}
	rep, ok := r.(R)
	if !ok {
		return zero, fmt.Errorf("owner rpc: %s answered a %s request with %T", node, what, r)
	}
	return rep, nil
}

var _ owner.Transport = (*RemoteTransport)(nil)

// RemotePusher delivers the planner's OwnerMap pushes to nodes' OwnerMap
// endpoints through protoactor remote, each push through Call. It
// implements planner.Pusher.
type RemotePusher struct{ t *RemoteTransport }

// NewRemotePusher returns a pusher sending from system's root context.
func NewRemotePusher(system *actor.ActorSystem, book AddressBook, cfg CallConfig, seed uint64) (*RemotePusher, error) {
	t, err := NewRemoteTransport(system, book, cfg, seed)
	if err != nil {
		return nil, err
	}
	return &RemotePusher{t: t}, nil
}

// Push implements planner.Pusher.
func (p *RemotePusher) Push(ctx context.Context, node string, m *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	return nodeCall[*messages.OwnerMapAck](ctx, p.t, node, OwnerMapActorName, m, "ownermap push")
}

// nodeCall sends req to the actor named name on node through Call and
// type-checks the reply.
func nodeCall[R any](ctx context.Context, t *RemoteTransport, node, name string, req any, what string) (R, error) {
	var zero R
	addr, err := t.address(node)
	if err != nil {
		return zero, err
	}
	r, err := Call(ctx, t.root, actor.NewPID(addr, name), req, t.cfg, t.newRand())
	if err != nil {
		return zero, err
	}
	rep, ok := r.(R)
	if !ok {
		return zero, fmt.Errorf("%s: %s answered with %T", what, node, r)
	}
	return rep, nil
}

var _ planner.Pusher = (*RemotePusher)(nil)

// Migrate implements planner.Migrator: one migration message to node's
// migration participant through Call (a Drain is answered when the cohort
// is drained, so the caller's context bounds the wait, not the attempt
// timeout alone).
func (p *RemotePusher) Migrate(ctx context.Context, node string, msg proto.Message) (proto.Message, error) {
	return nodeCall[proto.Message](ctx, p.t, node, MigrationActorName, msg, "migration")
}

var _ planner.Migrator = (*RemotePusher)(nil)
