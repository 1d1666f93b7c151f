// Package invariants checks, while a cluster runs, the ownership invariants
// of SPEC §4 that concern activations and epochs:
//
//   - I1 (single authority): for each cohort, at most one node's activation
//     is active at a time, and locks are granted only by the active
//     activation, at its epoch;
//   - I4 (epoch fencing): a cohort's activations and grants never go back
//     to an older epoch.
//
// The nodes report events (an activation becoming active or inactive, a
// grant) from inside the critical section that makes them happen (the owner
// table's lock), so events of one node arrive in their true order, and
// events of two nodes ordered by the migration protocol's messages (a
// freeze acknowledged before the handoff is sent) arrive in that order. A
// report therefore never shows a violation that did not happen.
//
// I2 (mutual exclusion) and I3 (no lost lock state) are properties of
// records: the workload checks (bank totals, TPC-C consistency) and the
// porcupine-checked histories of the tests are their witnesses.
//
// A Checker is safe for concurrent use and bounded: it counts every
// violation and keeps the first MaxSamples descriptions.
package invariants

import (
	"fmt"
	"strings"
	"sync"
)

// MaxSamples bounds the violation descriptions a Checker keeps.
const MaxSamples = 32

// MaxCohorts bounds the cohorts a Checker remembers (their highest epoch
// must outlive their activations for I4); events of further cohorts are
// counted in Result.Untracked and not checked. 1<<20 cohorts take about
// 50 MiB: far more than a run publishes (the planner publishes at most
// 1,024 at a time and re-uses ids).
const MaxCohorts = 1 << 20

// Observer receives a node's ownership events. Implemented by Checker.
type Observer interface {
	// Activated: node's activation of cohort at epoch grants from now on.
	Activated(node string, cohort, epoch uint64)
	// Deactivated: it stopped granting (frozen, retired, relinquished).
	Deactivated(node string, cohort, epoch uint64)
	// Granted: node granted locks of cohort at epoch.
	Granted(node string, cohort, epoch uint64)
}

type activation struct {
	node  string
	epoch uint64
}

// Checker is an Observer that checks I1 and I4 over the events it is told.
type Checker struct {
	mu       sync.Mutex
	active   map[uint64]activation
	maxEpoch map[uint64]uint64
	res      Result
}

// Result is what a Checker found.
type Result struct {
	// Events counts every reported event; I1 and I4 the violations;
	// Untracked the events of cohorts past MaxCohorts (not checked).
	Events, I1, I4, Untracked uint64
	// Samples describes the first MaxSamples violations.
	Samples []string
}

// Pass reports whether no violation was found.
func (r Result) Pass() bool { return r.I1 == 0 && r.I4 == 0 }

// String is "pass" or the violations, as the bench's checks.invariants.
func (r Result) String() string {
	if r.Pass() {
		return "pass"
	}
	return fmt.Sprintf("%d I1 and %d I4 violations in %d events: %s", r.I1, r.I4, r.Events, strings.Join(r.Samples, "; "))
}

// New returns an empty Checker.
func New() *Checker {
	return &Checker{active: map[uint64]activation{}, maxEpoch: map[uint64]uint64{}}
}

func (c *Checker) violate(i4 bool, format string, args ...any) {
	if i4 {
		c.res.I4++
	} else {
		c.res.I1++
	}
	if len(c.res.Samples) < MaxSamples {
		c.res.Samples = append(c.res.Samples, fmt.Sprintf(format, args...))
	}
}

// tracked reports whether cohort's events are checked (c.mu is held).
func (c *Checker) tracked(cohort uint64) bool {
	if _, ok := c.maxEpoch[cohort]; ok || len(c.maxEpoch) < MaxCohorts {
		return true
	}
	c.res.Untracked++
	return false
}

// Activated implements Observer.
func (c *Checker) Activated(node string, cohort, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Events++
	if !c.tracked(cohort) {
		return
	}
	if a, ok := c.active[cohort]; ok && a.node != node {
		c.violate(false, "I1: cohort %d activated on %s at epoch %d while active on %s at epoch %d", cohort, node, epoch, a.node, a.epoch)
	}
	if m := c.maxEpoch[cohort]; epoch < m {
		c.violate(true, "I4: cohort %d activated on %s at epoch %d after epoch %d", cohort, node, epoch, m)
	}
	c.active[cohort] = activation{node: node, epoch: epoch}
	c.maxEpoch[cohort] = max(c.maxEpoch[cohort], epoch)
}

// Deactivated implements Observer.
func (c *Checker) Deactivated(node string, cohort, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Events++
	if a, ok := c.active[cohort]; ok && a == (activation{node: node, epoch: epoch}) {
		delete(c.active, cohort)
	}
}

// Granted implements Observer.
func (c *Checker) Granted(node string, cohort, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Events++
	if !c.tracked(cohort) {
		return
	}
	if a, ok := c.active[cohort]; !ok || a != (activation{node: node, epoch: epoch}) {
		c.violate(false, "I1: cohort %d granted by %s at epoch %d; active: %+v (%v)", cohort, node, epoch, a, ok)
	}
	if m := c.maxEpoch[cohort]; epoch < m {
		c.violate(true, "I4: cohort %d granted by %s at epoch %d after epoch %d", cohort, node, epoch, m)
	}
}

// NodeDown forgets node's activations: the node crashed (or its process
// ended), so they grant nothing any more. A crashed node reports no
// deactivation; without this its cohorts' next owners would look like
// second authorities.
func (c *Checker) NodeDown(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, a := range c.active {
		if a.node == node {
			delete(c.active, id)
		}
	}
}

// Result returns what the Checker found so far.
func (c *Checker) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.res
	r.Samples = append([]string(nil), r.Samples...)
	return r
}
