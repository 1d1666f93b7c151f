package actors

import (
	"context"
	"fmt"
	"google.golang.org/protobuf/proto"
	"sync"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/messages"
)

// InProcess connects the nodes of one process: owner RPCs (owner.Transport)
// and OwnerMap pushes (planner.Pusher) are direct calls into the peer
// node's handlers — the work its owner endpoint and ownermap actors do —
// so several nodes and a planner share a process (an embedded benchmark
// cluster, tests) without protoactor remote or serialisation. The messages
// are the same ones the remote endpoints carry, so the owner path, its
// epoch fencing and the planner's push protocol run unchanged.
//
// A call runs on the caller's goroutine. Handlers never block on the
// network, so this adds no queueing a remote transport would not; it does
// leave out the network's latency. Safe for concurrent use.
type InProcess struct {
	mu    sync.RWMutex
	nodes map[string]*Node
}

// Compile-time checks: InProcess carries both kinds of traffic.
var (
	_ owner.Transport = (*InProcess)(nil)
	_ planner.Pusher  = (*InProcess)(nil)
)

// NewInProcess returns a transport with no nodes.
func NewInProcess() *InProcess { return &InProcess{nodes: map[string]*Node{}} }

// Add makes n reachable under its name (replacing a node of the same name).
func (c *InProcess) Add(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[n.Name()] = n
}

// Remove makes the node of that name unreachable: later calls to it fail as
// a call to a departed node does.
func (c *InProcess) Remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.nodes, name)
}

func (c *InProcess) node(ctx context.Context, name string) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("actors: in-process transport: no node %q", name)
	}
	return n, nil
}

// Lock implements owner.Transport.
func (c *InProcess) Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	n, err := c.node(ctx, node)
	if err != nil {
		return nil, err
	}
	return n.HandleLock(req), nil
}

// Unlock implements owner.Transport.
func (c *InProcess) Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	n, err := c.node(ctx, node)
	if err != nil {
		return nil, err
	}
	return n.HandleUnlock(req), nil
}

// Push implements planner.Pusher.
func (c *InProcess) Push(ctx context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	n, err := c.node(ctx, node)
	if err != nil {
		return nil, err
	}
	return n.HandleOwnerMapPush(p), nil
}

// Migrate implements planner.Migrator.
func (c *InProcess) Migrate(ctx context.Context, node string, msg proto.Message) (proto.Message, error) {
	n, err := c.node(ctx, node)
	if err != nil {
		return nil, err
	}
	return n.HandleMigration(ctx, msg)
}

// TryMigrate implements planner.InlineMigrator.
func (c *InProcess) TryMigrate(node string, msgs []proto.Message) []proto.Message {
	n, err := c.node(context.Background(), node)
	if err != nil {
		return make([]proto.Message, len(msgs))
	}
	return n.TryMigration(msgs)
}

// PushNow implements planner.InlinePusher.
func (c *InProcess) PushNow(node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	return c.Push(context.Background(), node, p)
}
