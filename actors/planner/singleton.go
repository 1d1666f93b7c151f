package planner

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control/plannerlease"
)

// LeaseWord is the planner lease's word on the memory node (package
// control/plannerlease has the protocol and its argument). Implementations
// must be safe for concurrent use and bounded by ctx.
type LeaseWord interface {
	// Load returns the word.
	Load(ctx context.Context) (uint64, error)
	// CompareAndSwap stores swap if the word equals compare, and returns
	// the word's value before (as RDMA's atomic CAS does).
	CompareAndSwap(ctx context.Context, compare, swap uint64) (uint64, error)
}

// PlannerLeaseStatus is the planner lease as a Status reports it.
type PlannerLeaseStatus struct {
	// Enabled: the planner has a LeaseWord (false: it acts unconditionally).
	Enabled bool
	// Holder is this planner's id in the word; Word the last value it knows
	// of (its own while it holds the word).
	Holder uint32
	Word   uint64
	// Holding: the word is this planner's; Valid: it may act now.
	Holding, Valid bool
	// The lease's operations and events since the planner started (a
	// deposed planner keeps counting).
	plannerlease.Stats
	// IdleTicks counts the ticks (and settled rounds' publications) this
	// planner skipped for want of a valid lease.
	IdleTicks uint64
}

// leaseDone carries a planner-lease operation's outcome back to the actor.
type leaseDone struct {
	op  plannerlease.Op
	old uint64
	err error
}

// newPlannerLease returns the actor's lease state machine, or nil without
// a LeaseWord. A zero Holder is drawn at random: each planner incarnation
// must write an id of its own.
func newPlannerLease(cfg Config) (*plannerlease.Lease, error) {
	if cfg.LeaseWord == nil {
		return nil, nil
	}
	lc := cfg.PlannerLease
	for lc.Holder == 0 {
		lc.Holder = rand.Uint32()
	}
	return plannerlease.New(lc)
}

// acting reports whether the planner may act now: grant owner leases,
// push maps, send migration messages and publish. Always, without a
// LeaseWord.
func (a *Actor) acting() bool {
	return a.pl == nil || a.pl.Valid(a.nowMicros())
}

// noteActing logs a holder's lease lapsing (its renewals did not land
// within half a lease: the memory node unreachable or slow, or the actor
// starved) and its resumption; a deposition and a takeover log their own.
func (a *Actor) noteActing(acting bool) {
	switch {
	case a.pl == nil:
	case !acting && !a.lapsed && a.pl.Holding():
		a.lapsed = true
		a.log.Warn("planner lease lapsed: not acting until a renewal lands")
	case acting && a.lapsed:
		a.lapsed = false
		a.log.Info("planner lease valid again: acting")
	}
}

// leaseEpochMicros is when this planner's authority began: a departed
// node's lease granted by a previous planner is counted from it (0, the
// actor's start, without a LeaseWord).
func (a *Actor) leaseEpochMicros() int64 {
	if a.pl == nil {
		return 0
	}
	return a.pl.AcquiredAt()
}

// driveLease issues the lease's next operation, if one is due, on a
// goroutine of its own (bounded by the lease's validity: an answer later
// than that is worth nothing to a holder).
func (a *Actor) driveLease(ctx actor.Context) {
	if a.pl == nil {
		return
	}
	op, ok := a.pl.Tick(a.nowMicros())
	if !ok {
		return
	}
	self, root, word := ctx.Self(), ctx.ActorSystem().Root, a.cfg.LeaseWord
	timeout := time.Duration(a.pl.Config().ValidMicros()) * time.Microsecond
	go func() {
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var old uint64
		var err error
		if op.Kind == plannerlease.OpRead {
			old, err = word.Load(c)
		} else {
			old, err = word.CompareAndSwap(c, op.Compare, op.Swap)
		}
		root.Send(self, leaseDone{op: op, old: old, err: err})
	}()
}

// onLeaseDone applies an operation's outcome. A planner that acquires the
// word starts as one taking over; a deposed one forgets everything it
// knew, since another planner may have moved cohorts, granted leases and
// published epochs meanwhile (forget).
func (a *Actor) onLeaseDone(d leaseDone) {
	switch a.pl.Done(d.op, d.old, d.err, a.nowMicros()) {
	case plannerlease.Acquired:
		h, c := plannerlease.Split(d.op.Swap)
		a.log.Info("planner lease acquired: acting as the planner", "holder", h, "counter", c)
	case plannerlease.Deposed:
		h, c := plannerlease.Split(d.old)
		a.log.Warn("planner lease taken over by another planner: forgetting this planner's state",
			"holder", h, "counter", c)
		a.forget()
	}
	if d.err != nil {
		a.log.Debug("planner lease operation failed", "op", d.op.Kind, "err", d.err)
	}
}

// forget resets the actor to a newly started planner's state, keeping its
// lease (contending again), its clock and its ticker. Answers to the
// operations it had in flight are ignored: pushes and migrations by epoch
// and id (the new transfer controller draws new ids), refinements by
// request.
func (a *Actor) forget() {
	fresh, err := NewActor(a.cfg, a.pusher)
	if err != nil {
		// Unreachable: a.cfg was validated by NewActor already.
		a.log.Error("planner: cannot reset after losing the planner lease", "err", err)
		return
	}
	fresh.pl, fresh.stop, fresh.t0, fresh.log = a.pl, a.stop, a.t0, a.log
	fresh.status.PlannerLease.IdleTicks = a.status.PlannerLease.IdleTicks
	*a = *fresh
}

// releaseTimeout bounds the release of the planner lease when the actor
// stops: the stop waits for it, and a release that does not land only
// costs the next planner one lease.
const releaseTimeout = 250 * time.Millisecond

// releaseLease gives the planner lease up as the actor stops (a placement
// change, a graceful shutdown), so that the next planner takes it at once
// rather than a lease later. The actor processes no message after
// Stopping, so it has stopped acting; what it sent before is covered as
// after a crash (owner leases counted from the next holder's acquisition,
// epochs above the nodes').
func (a *Actor) releaseLease() {
	if a.pl == nil {
		return
	}
	op, ok := a.pl.Release(a.nowMicros())
	if !ok {
		return // not holding, or an operation in flight: the next waits a lease
	}
	c, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	old, err := a.cfg.LeaseWord.CompareAndSwap(c, op.Compare, op.Swap)
	a.pl.Done(op, old, err, a.nowMicros())
	if err != nil || old != op.Compare {
		a.log.Warn("planner lease not released: the next planner waits a lease", "err", err)
		return
	}
	a.log.Info("planner lease released")
}

// leaseStatus fills the Status's PlannerLease.
func (a *Actor) leaseStatus(st *Status) {
	if a.pl == nil {
		return
	}
	p := &st.PlannerLease
	p.Enabled, p.Holder = true, a.pl.Config().Holder
	p.Word, _ = a.pl.Seen()
	p.Holding, p.Valid = a.pl.Holding(), a.pl.Valid(a.nowMicros())
	p.Stats = a.pl.Stats()
}
