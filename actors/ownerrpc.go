package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/messages"
)

// OwnerActorName is the name under which every node registers its owner
// endpoint; a peer's endpoint is the PID (peer's remote address, this name).
const OwnerActorName = "owner"

// ownerActor serves a node's owner lock table to other nodes. The Service
// does the work under its own mutex, so one actor per node suffices: a lock
// request costs a few microseconds of table work.
type ownerActor struct{ svc *owner.Service }

func (a *ownerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.LockRequest:
		ctx.Respond(a.svc.HandleLock(m))
	case *messages.UnlockRequest:
		ctx.Respond(a.svc.HandleUnlock(m))
	}
}

// SpawnOwnerEndpoint registers svc as system's owner endpoint, with a
// bounded mailbox.
func SpawnOwnerEndpoint(system *actor.ActorSystem, svc *owner.Service, mailboxSize int) (*actor.PID, error) {
	if svc == nil {
		return nil, fmt.Errorf("owner endpoint: nil service")
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &ownerActor{svc: svc} },
		actor.WithMailbox(actor.Bounded(mailboxSize)))
	pid, err := system.Root.SpawnNamed(props, OwnerActorName)
	if err != nil {
		return nil, fmt.Errorf("owner endpoint: %w", err)
	}
	return pid, nil
}

// AddressBook maps a node's membership name to its remote address
// (host:port). cluster.Membership provides it from the members' metadata.
type AddressBook interface {
	RemoteAddress(node string) (string, bool)
}

// AddressBookFunc adapts a function to AddressBook.
type AddressBookFunc func(node string) (string, bool)

// RemoteAddress implements AddressBook.
func (f AddressBookFunc) RemoteAddress(node string) (string, bool) { return f(node) }

// RemoteTransport carries owner lock RPCs to other nodes' owner endpoints
// through protoactor remote, each request through Call (per-attempt timeout,
// jittered exponential backoff, bounded attempts). It implements
// owner.Transport.
type RemoteTransport struct {
	root  *actor.RootContext
	book  AddressBook
	cfg   CallConfig
	mu    sync.Mutex
	rng   *rand.Rand
	cache map[string]*actor.PID
}

// NewRemoteTransport returns a transport sending from system's root context.
func NewRemoteTransport(system *actor.ActorSystem, book AddressBook, cfg CallConfig, seed uint64) (*RemoteTransport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RemoteTransport{root: system.Root, book: book, cfg: cfg,
		rng: rand.New(rand.NewPCG(seed, 0x6f776e6572)), cache: map[string]*actor.PID{}}, nil
}

// UnknownNodeError is returned for a node the address book does not know.
type UnknownNodeError struct{ Node string }

func (e *UnknownNodeError) Error() string { return fmt.Sprintf("owner rpc: unknown node %q", e.Node) }

func (t *RemoteTransport) pid(node string) (*actor.PID, *rand.Rand, error) {
	addr, ok := t.book.RemoteAddress(node)
	if !ok {
		return nil, nil, &UnknownNodeError{Node: node}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.cache[node]
	if p == nil || p.Address != addr {
		// A restarted node comes back at a new address: the cached PID is
		// replaced as soon as the address book says so.
		p = actor.NewPID(addr, OwnerActorName)
		t.cache[node] = p
	}
	// Each call gets its own generator so calls do not serialise on one.
	return p, rand.New(rand.NewPCG(t.rng.Uint64(), t.rng.Uint64())), nil
}

// Lock implements owner.Transport.
func (t *RemoteTransport) Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	return remoteCall[*messages.LockReply](ctx, t, node, req, "lock")
}

// Unlock implements owner.Transport.
func (t *RemoteTransport) Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	return remoteCall[*messages.UnlockReply](ctx, t, node, req, "unlock")
}

// remoteCall sends req to node's owner endpoint and type-checks the reply.
func remoteCall[R any](ctx context.Context, t *RemoteTransport, node string, req any, what string) (R, error) {
	var zero R
	pid, rng, err := t.pid(node)
	if err != nil {
		return zero, err
	}
	r, err := Call(ctx, t.root, pid, req, t.cfg, rng)
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
	addr, ok := p.t.book.RemoteAddress(node)
	if !ok {
		return nil, &UnknownNodeError{Node: node}
	}
	p.t.mu.Lock()
	rng := rand.New(rand.NewPCG(p.t.rng.Uint64(), p.t.rng.Uint64()))
	p.t.mu.Unlock()
	r, err := Call(ctx, p.t.root, actor.NewPID(addr, OwnerMapActorName), m, p.t.cfg, rng)
	if err != nil {
		return nil, err
	}
	ack, ok := r.(*messages.OwnerMapAck)
	if !ok {
		return nil, fmt.Errorf("ownermap push: %s answered with %T", node, r)
	}
	return ack, nil
}

var _ planner.Pusher = (*RemotePusher)(nil)
