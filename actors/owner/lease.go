package owner

import (
	"sync"
	"time"
)

// Lease is a node's owner lease (see "Owner leases" in the package
// documentation): the time until which the planner promised not to move
// this node's cohorts without its acknowledgement. A Locker grants a lock by
// plain WRITE over a marked lock word only if the lease was valid when it
// asked its table; otherwise it CASes, so a node cut off from the planner
// keeps serving its cohorts through the lock words alone, which any new
// owner's CAS is arbitrated by.
//
// A lease runs from when the heartbeat that earned it was sent, not from
// when the grant arrived: the planner counts it from when it answered,
// which is later, so the node's lease ends first (clock rates differing by
// less than the planner's margin, Lease/4).
//
// Safe for concurrent use. The zero value holds no lease.
type Lease struct {
	mu      sync.Mutex
	until   time.Time
	planner string
	grants  uint64
	refused uint64
}

// Grant extends the lease to sentAt+d (never shortens it) on a grant from
// planner for a heartbeat sent at sentAt.
func (l *Lease) Grant(planner string, sentAt time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grants++
	if end := sentAt.Add(d); end.After(l.until) {
		l.until, l.planner = end, planner
	}
}

// Refuse records a planner's refusal; a lease granted earlier runs out as
// it would (the planner that granted it still waits for it).
func (l *Lease) Refuse() {
	l.mu.Lock()
	l.refused++
	l.mu.Unlock()
}

// ValidAt reports whether the lease runs at t.
func (l *Lease) ValidAt(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return t.Before(l.until)
}

// MaxLease caps the owner lease one grant can give (a longer one is cut to
// it, and a planner's Config refuses one): a lease holds the moves of its
// node's cohorts up for that long after the node falls silent, so a lease
// of minutes is a misconfiguration, not a decision to honour.
const MaxLease = time.Minute

// LeaseState is a Lease as the metrics and the dashboard see it.
type LeaseState struct {
	// Until is when the lease ends (zero: never granted), Planner who
	// granted its end.
	Until   time.Time
	Planner string
	// Grants and Refusals count the planner's answers.
	Grants, Refusals uint64
}

// State returns the lease's current state.
func (l *Lease) State() LeaseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseState{Until: l.until, Planner: l.planner, Grants: l.grants, Refusals: l.refused}
}
