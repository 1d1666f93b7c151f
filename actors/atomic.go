package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/occ"
)

// lockBatch asks an atomic actor to take locks on the memory node. It is a
// local message (never crosses a process), so it is a plain Go value.
type lockBatch struct {
	reqs []occ.LockRequest
}

// lockBatchDone answers a lockBatch. The actor fills a result slice of its
// own, so a coordinator that stopped waiting never shares memory with it.
type lockBatchDone struct {
	res []occ.LockResult
	err error
}

// atomicActor is the memory-node lock path as an actor: it owns a queue pair
// and turns each lock batch into one doorbell of CAS + READ work requests.
// Its mailbox is bounded, so a burst of coordinators queues (and, past the
// bound, waits to enqueue) instead of growing memory.
type atomicActor struct {
	locker *occ.CASLocker
	// timeout bounds one batch on the memory node.
	timeout time.Duration
}

func (a *atomicActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *lockBatch:
		c, cancel := context.WithTimeout(context.Background(), a.timeout)
		res := make([]occ.LockResult, len(m.reqs))
		err := a.locker.Acquire(c, m.reqs, res)
		cancel()
		ctx.Respond(&lockBatchDone{res: res, err: err})
	}
}

// atomicLocker is a coordinator's handle on an atomic actor: an occ.Locker
// whose Acquire is a request to the actor.
type atomicLocker struct {
	root    *actor.RootContext
	pid     *actor.PID
	timeout time.Duration
}

var errAtomicActor = errors.New("actors: atomic actor did not answer")

func (l *atomicLocker) Acquire(_ context.Context, reqs []occ.LockRequest, res []occ.LockResult) error {
	f := l.root.RequestFuture(l.pid, &lockBatch{reqs: reqs}, l.timeout)
	r, err := f.Result()
	if err != nil {
		// The actor may still run the batch: report every lock as unknown so
		// that the coordinator releases whatever was taken by tag.
		for i := range res {
			res[i] = occ.LockResult{Status: occ.LockUnknown, Path: occ.PathMNCAS}
		}
		return nil
	}
	done, ok := r.(*lockBatchDone)
	if !ok {
		return fmt.Errorf("%w: unexpected reply %T", errAtomicActor, r)
	}
	copy(res, done.res)
	return done.err
}

func (l *atomicLocker) Released([]occ.LockRequest, []occ.LockResult) {}
