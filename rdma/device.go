package rdma

import "context"

// Device is a connection to one memory node: the control path that registers and
// looks up regions (done out of band on a real cluster, through the RDMA
// connection manager or a side channel) and a factory of queue pairs.
// Implementations are safe for concurrent use.
type Device interface {
	// RegisterRegion registers length bytes of memory-node memory under name and
	// returns its address and rkey. It is idempotent: registering an existing
	// name with the same length returns the existing region; a different length
	// is an error. New memory reads as zero.
	RegisterRegion(ctx context.Context, name string, length uint64) (Region, error)
	// Regions lists the memory node's registered regions.
	Regions(ctx context.Context) ([]Region, error)
	// CreateQP opens a reliable-connected queue pair with its own completion queue.
	CreateQP(cfg QPConfig) (QueuePair, error)
	// Close closes every queue pair and releases the connection.
	Close() error
}

// QueuePair posts work requests and delivers their completions in posting order
// on its completion queue, as a reliable-connected verbs QP does.
//
// A queue pair belongs to one goroutine at a time, as a verbs QP belongs to one
// worker thread or coroutine: Post and the completion queue's Poll and Wait are
// not meant to be interleaved by several goroutines (use one QP per worker).
// Stats may be read from any goroutine.
type QueuePair interface {
	// Post rings one doorbell for the whole batch: the work requests travel and run
	// together (one round trip on the TCP backend). It fails without running any of
	// them if the batch is invalid, the send queue lacks room, or the QP is closed.
	Post(wrs ...WorkRequest) error
	// CQ is the queue pair's completion queue.
	CQ() *CompletionQueue
	// Stats returns the queue pair's verb counters.
	Stats() Stats
	// Close flushes outstanding work requests and releases the queue pair.
	Close() error
}

// QPConfig configures a queue pair.
type QPConfig struct {
	// SendQueueDepth caps posted work requests whose completions have not been
	// polled yet (ibv_qp_cap.max_send_wr). Default DefaultSendQueueDepth; the cap
	// keeps both sides' buffers bounded when a caller stops polling.
	SendQueueDepth int
}

func (c QPConfig) withDefaults() QPConfig {
	if c.SendQueueDepth <= 0 {
		c.SendQueueDepth = DefaultSendQueueDepth
	}
	return c
}

// WithDefaults returns the config with zero fields replaced by their defaults;
// backends outside this package use it.
func (c QPConfig) WithDefaults() QPConfig { return c.withDefaults() }

// Exec posts a batch on qp and waits for all of its completions, returned in
// work-request order. It needs the queue pair to itself (no other work request
// outstanding). If ctx ends first, the batch's late completions are discarded
// by the completion queue as they arrive, so the queue pair stays usable; the
// effects of the batch are then unknown to the caller.
func Exec(ctx context.Context, qp QueuePair, wrs ...WorkRequest) ([]Completion, error) {
	if err := qp.Post(wrs...); err != nil {
		return nil, err
	}
	out := make([]Completion, len(wrs))
	got := 0
	for got < len(wrs) {
		n, err := qp.CQ().Wait(ctx, out[got:], len(wrs)-got)
		got += n
		if err != nil {
			qp.CQ().Discard(len(wrs) - got)
			return out[:got], err
		}
	}
	return out, nil
}

// FirstError returns the error of the first failed completion, or nil.
func FirstError(cs []Completion) error {
	for _, c := range cs {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}
