package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/messages"
)

// HeartbeatSender sends a node's ACCESS_SUMMARY heartbeats to the planner
// as requests and hands the answers (LeaseGrant, the node's owner lease) to
// the node: the OwnershipConfig.Heartbeat of a node with a planner.
type HeartbeatSender struct {
	root *actor.RootContext
	// inflight counts heartbeats whose answer is awaited, at most
	// MaxHeartbeatsInFlight: past it a heartbeat goes without asking for an
	// answer (the planner still learns from it), so a planner that stopped
	// answering costs a bounded number of waiting goroutines.
	inflight atomic.Int32
}

// MaxHeartbeatsInFlight bounds the heartbeats awaiting the planner's
// answer, and HeartbeatTimeout how long one is awaited. At the default
// period (100 ms) four cover 400 ms of a slow planner; a lease (1 s by
// default) survives a few unanswered heartbeats.
const (
	MaxHeartbeatsInFlight = 4
	HeartbeatTimeout      = time.Second
)

// NewHeartbeatSender returns a sender using root.
func NewHeartbeatSender(root *actor.RootContext) *HeartbeatSender {
	return &HeartbeatSender{root: root}
}

// Send sends s to pid; the planner's LeaseGrant, if one comes within
// HeartbeatTimeout, goes to reply. It never blocks on the answer.
func (h *HeartbeatSender) Send(pid *actor.PID, s *messages.AccessSummary, reply func(*messages.LeaseGrant)) {
	h.SendNotify(pid, s, reply, nil)
}

// SendNotify is Send that also calls unanswered (when not nil) if no
// LeaseGrant comes within HeartbeatTimeout: nothing runs at pid, it is
// down, or it is slow. Neither is called for a heartbeat sent without
// awaiting an answer (MaxHeartbeatsInFlight).
func (h *HeartbeatSender) SendNotify(pid *actor.PID, s *messages.AccessSummary, reply func(*messages.LeaseGrant), unanswered func()) {
	if reply == nil {
		h.root.Send(pid, s)
		return
	}
	if h.inflight.Add(1) > MaxHeartbeatsInFlight {
		h.inflight.Add(-1)
		h.root.Send(pid, s)
		return
	}
	f := h.root.RequestFuture(pid, s, HeartbeatTimeout)
	go func() {
		defer h.inflight.Add(-1)
		r, err := f.Result()
		if g, ok := r.(*messages.LeaseGrant); ok && err == nil {
			reply(g)
		} else if unanswered != nil {
			unanswered()
		}
	}()
}
