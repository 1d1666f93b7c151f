package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// CallConfig bounds one cross-node request made with Call. Every cross-node
// request in AURA goes through Call, never through protoactor's cluster
// package or a process-global request configuration (SPEC §3): each caller
// passes its own bounds.
type CallConfig struct {
	// AttemptTimeout bounds one attempt (request sent, reply received).
	// Default 500 ms: an owner RPC takes 5–10 µs on RDMA-class networks and
	// well under a millisecond on loopback TCP; half a second means the peer
	// is overloaded, partitioned or dead, and retrying elsewhere is better
	// than waiting.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of one call (the first included).
	// Default 4: with the backoff below a call gives up after about 2 s.
	MaxAttempts int
	// BackoffBase is the wait before the second attempt; each later wait
	// doubles, up to BackoffMax, and is drawn uniformly from [d/2, d] (jitter,
	// so that callers that failed together do not retry together). Default
	// 5 ms.
	BackoffBase time.Duration
	// BackoffMax caps one wait. Default 250 ms.
	BackoffMax time.Duration
}

// DefaultCallConfig returns the defaults documented on CallConfig.
func DefaultCallConfig() CallConfig {
	return CallConfig{AttemptTimeout: 500 * time.Millisecond, MaxAttempts: 4,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 250 * time.Millisecond}
}

// Validate reports every problem at once.
func (c CallConfig) Validate() error {
	var errs []error
	if c.AttemptTimeout <= 0 {
		errs = append(errs, fmt.Errorf("call: AttemptTimeout %v must be positive", c.AttemptTimeout))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("call: MaxAttempts %d, want 1..100", c.MaxAttempts))
	}
	if c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase {
		errs = append(errs, fmt.Errorf("call: backoff %v..%v, want 0 < base ≤ max", c.BackoffBase, c.BackoffMax))
	}
	return errors.Join(errs...)
}

// Backoff returns the jittered wait before attempt number attempt (2 for the
// first retry), drawn from [d/2, d] with d = BackoffBase·2^(attempt−2)
// capped at BackoffMax.
func (c CallConfig) Backoff(attempt int, rng *rand.Rand) time.Duration {
	d := c.BackoffBase
	for i := 2; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.BackoffMax)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(rng.Int64N(int64(half)+1))
}

// ErrUnreachable is returned (wrapped in a *CallError) when every attempt of
// a call timed out or found no actor at the target.
var ErrUnreachable = errors.New("peer unreachable")

// CallError describes a call that did not get a reply.
type CallError struct {
	// Target is the PID the call was addressed to.
	Target string
	// Attempts is how many attempts were made.
	Attempts int
	// Err is the last attempt's error (ErrUnreachable, or the context's).
	Err error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("call %s: %d attempts: %v", e.Target, e.Attempts, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// Call sends msg to pid and waits for its reply, retrying with exponential,
// jittered backoff on timeouts and dead letters, within cfg's bounds and ctx.
// A request is resent as is, so it must be idempotent (AURA's owner and
// migration requests carry a request id or an idempotency key for that).
// The reply is returned as received; mapping typed refusals (MOVED, RETRY)
// is the caller's business.
func Call(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, cfg CallConfig, rng *rand.Rand) (any, error) {
	var last error = ErrUnreachable
	for attempt := 1; attempt <= cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(cfg.Backoff(attempt, rng))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, &CallError{Target: pid.String(), Attempts: attempt - 1, Err: ctx.Err()}
			case <-t.C:
			}
		}
		timeout := cfg.AttemptTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		if timeout <= 0 {
			return nil, &CallError{Target: pid.String(), Attempts: attempt - 1, Err: context.DeadlineExceeded}
		}
		r, err := root.RequestFuture(pid, msg, timeout).Result()
		switch {
		case err == nil:
			if _, dead := r.(*actor.DeadLetterResponse); dead {
				last = ErrUnreachable
				continue
			}
			return r, nil
		case errors.Is(err, actor.ErrTimeout), errors.Is(err, actor.ErrDeadLetter):
			last = ErrUnreachable
		default:
			last = err
		}
		if ctx.Err() != nil {
			return nil, &CallError{Target: pid.String(), Attempts: attempt, Err: ctx.Err()}
		}
	}
	return nil, &CallError{Target: pid.String(), Attempts: cfg.MaxAttempts, Err: last}
}
