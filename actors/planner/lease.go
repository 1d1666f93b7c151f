package planner

import (
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/messages"
)

// Owner leases and quorum (package actors/owner, "Owner leases", has the
// argument). The planner answers every heartbeat sent as a request with a
// LeaseGrant, and:
//
//   - grants nothing and publishes nothing without a valid planner lease
//     (with Config.LeaseWord; singleton.go), and counts the leases another
//     planner may have granted from when it took the planner lease over;
//   - grants a lease only while it sees a strict majority of the known
//     compute nodes (live ones, the nodes its roster names, those of the
//     roster installed on its own node, Nodes.Known, and those of the
//     rosters the live nodes' heartbeats report), only once it has made its
//     first publication decision (a planner taking over grants nothing
//     before its empty map is installed), and only to a live node whose
//     installed map is at least the one that was current when the node
//     (re)appeared — or the staged round's, or the takeover's empty map: a
//     node that was away may hold cohorts the planner moved without its
//     acknowledgement, and must freeze them before it may WRITE again;
//   - publishes nothing without that majority (a planner cut off with a
//     minority must not give out cohorts or epochs the majority's planner
//     also gives out);
//   - publishes no map while a departed node that may still hold cohorts
//     may still hold a lease: until LeaseWait has passed since its last
//     grant (since this planner started, or took the planner lease over,
//     for leases another planner may have granted). A node holds no
//     cohort once it acknowledged a map of this planner's that places none
//     on it, and no later map placed one (clean); any other known node
//     may, whatever the previous planner gave it. A move's target is not
//     clean from its handoff on;
//   - does not count a node an operator removed (RemoveNode: down for good)
//     among the known ones while it is not live, but still waits out its
//     lease like any departed node's before moving its cohorts;
//   - republishes its assignment at the next epoch when departed nodes left
//     its roster and nothing else changed, so that the rosters installed on
//     the nodes (what a later planner counts) drop them.

// leaseWaitMicros is how long after its last grant a departed node's
// cohorts stay put: the lease, a quarter more for clocks that run at
// different rates, and one drain deadline for a grant's WRITE still on its
// way (the WRITE lease is a quarter of it and assumption A3 bounds the
// rest). The nodes' WRITE lease is a quarter of their owner table's drain
// deadline; it must not exceed a quarter of the planner's (both 50 ms by
// default).
func (a *Actor) leaseWaitMicros() int64 {
	l := a.cfg.Lease.Microseconds()
	return l + l/4 + a.cfg.Transfer.DrainDeadlineMicros
}

// known returns the compute nodes a majority is counted over: those named
// anywhere (named), less the ones an operator removed that are not live.
func (a *Actor) known() map[string]bool {
	k := a.named()
	for name := range a.removed {
		if !a.live[name] {
			delete(k, name)
		}
	}
	return k
}

// named returns the live compute nodes and those the rosters name: the
// planner's, the one installed on its own node and those the live nodes'
// heartbeats report.
func (a *Actor) named() map[string]bool {
	k := make(map[string]bool, len(a.live)+len(a.roster)+len(a.nodes.Known))
	for name := range a.live {
		k[name] = true
	}
	for _, name := range a.roster {
		if name != "" {
			k[name] = true
		}
	}
	for _, name := range a.nodes.Known {
		if name != "" {
			k[name] = true
		}
	}
	for _, r := range a.reported {
		for _, name := range r {
			if name != "" {
				k[name] = true
			}
		}
	}
	return k
}

// noteRoster keeps the roster a live node's heartbeat reports (fewer than
// control.MaxNodes names, as a manifest's roster; a longer one is ignored).
func (a *Actor) noteRoster(m *messages.AccessSummary) {
	if r := m.GetRoster(); a.live[m.GetNode()] && len(r) > 0 && len(r) < control.MaxNodes {
		if !slices.Equal(a.reported[m.GetNode()], r) {
			a.reported[m.GetNode()] = slices.Clone(r)
		}
	}
}

// rosterShrank frees the slots of departed nodes the loop's map no longer
// names (releaseSlots) and reports whether the published roster names a
// node the roster then no longer does.
func (a *Actor) rosterShrank() bool {
	a.releaseSlots(a.loop.Current())
	for i, name := range a.pubRoster {
		if name != "" && (i >= len(a.roster) || a.roster[i] != name) {
			return true
		}
	}
	return false
}

// quorum reports whether the live nodes are a strict majority of the known
// ones.
func (a *Actor) quorum() bool {
	k := a.known()
	live := 0
	for name := range k {
		if a.live[name] {
			live++
		}
	}
	return live > 0 && 2*live > len(k)
}

// ReasonNoPlannerLease is LeaseGrant.reason when the planner that got the
// heartbeat does not hold a valid planner lease: another planner may act,
// and a node tries it (cluster.HeartbeatRoute).
const ReasonNoPlannerLease = "no planner lease"

// answerLease answers a heartbeat sent as a request with the sender's
// lease (or its refusal).
func (a *Actor) answerLease(ctx actor.Context, m *messages.AccessSummary) {
	if ctx.Sender() == nil {
		return
	}
	node := m.GetNode()
	g := &messages.LeaseGrant{Planner: a.cfg.Name, LeaseMicros: uint64(a.cfg.Lease.Microseconds()), Epoch: a.status.Epoch}
	switch {
	case !a.acting():
		g.Reason = ReasonNoPlannerLease
	case !a.live[node]:
		g.Reason = "not live"
	case !a.quorum():
		g.Reason = "no quorum"
	case !a.started:
		g.Reason = "starting"
	case m.GetOwnermapEpoch() < a.joinEpoch[node]:
		g.Reason = "stale map"
	default:
		g.Granted = true
		a.granted[node] = a.nowMicros()
		a.status.LeaseGrants++
	}
	if !g.Granted {
		a.status.LeaseRefusals++
	}
	ctx.Respond(g)
}

// leaseHeld returns a departed node that may still hold a lease on cohorts
// the next map could move, and until when (planner micros); "" if none.
func (a *Actor) leaseHeld(now int64) (string, int64) {
	wait := a.leaseWaitMicros()
	names := a.known()
	for name := range a.granted {
		names[name] = true
	}
	// A removed node is not counted for the majority but may still hold
	// a lease (an operator may remove a node that is cut off, not down).
	for name := range a.removed {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if a.live[name] || a.clean[name] {
			continue
		}
		// No grant of ours: counted from when this planner's authority
		// began (its start, or its planner lease's acquisition), for the
		// leases a previous planner may have granted.
		if until := max(a.granted[name], a.leaseEpochMicros()) + wait; now < until {
			return name, until
		}
	}
	return "", 0
}

// noteClean records that node acknowledged the current map: it holds no
// cohort (it froze any it had) if that map places none on it.
func (a *Actor) noteClean(node string) {
	slot, ok := a.slotOf[node]
	a.clean[node] = !ok || !referenced(a.cur, slot)
}

// noteHandoffs records that the targets of a round's moves hold cohorts:
// a handoff activates a cohort on its target before the map is published.
func (a *Actor) noteHandoffs(moves []transfer.Move) {
	for _, mv := range moves {
		if mv.To != "" {
			a.clean[mv.To] = false
		}
	}
}

// noteOwners records, for a map being published, that the nodes it places
// cohorts on hold some (until they acknowledge one that places none).
func (a *Actor) noteOwners(m *control.OwnerMap) {
	for name, slot := range a.slotOf {
		if referenced(m, slot) {
			a.clean[name] = false
		}
	}
}

// mayPublish reports whether a new map may be published now: the planner
// has its majority and no departed node's lease holds its cohorts. A
// refusal is counted and logged once per cause.
func (a *Actor) mayPublish() bool {
	if !a.acting() {
		a.status.PlannerLease.IdleTicks++
		return false
	}
	if !a.quorum() {
		a.status.NoQuorumTicks++
		if !a.noQuorumLogged {
			a.noQuorumLogged = true
			a.log.Warn("no majority of the known compute nodes is live: publishing nothing and granting no lease",
				"live", len(a.live), "known", len(a.known()))
		}
		return false
	}
	a.noQuorumLogged = false
	if name, until := a.leaseHeld(a.nowMicros()); name != "" {
		a.status.LeaseHolds++
		if a.leaseHeldLogged != name {
			a.leaseHeldLogged = name
			a.log.Info("waiting for a departed node's owner lease to run out before moving its cohorts",
				"node", name, "for_ms", (until-a.nowMicros())/1000)
		}
		return false
	}
	a.leaseHeldLogged = ""
	return true
}

// pruneGrants forgets the grants of departed nodes whose leases ran out,
// and what it knew of departed nodes it no longer counts.
func (a *Actor) pruneGrants(now int64) {
	wait := a.leaseWaitMicros()
	for name, at := range a.granted {
		if !a.live[name] && now >= at+wait {
			delete(a.granted, name)
		}
	}
	known := a.known()
	for name := range a.clean {
		if _, granted := a.granted[name]; !known[name] && !granted {
			delete(a.clean, name)
		}
	}
	// A removal is kept until no roster names the node any more and its
	// lease ran out: the maps published since no longer count it anyway.
	named := a.named()
	for name := range a.removed {
		if _, granted := a.granted[name]; !named[name] && !granted {
			delete(a.removed, name)
		}
	}
}

// removeNode answers an operator's RemoveNode: a node that is not live
// stops counting among the known nodes, so that the survivors of a cluster
// that lost half of its nodes or more regain a majority. Its cohorts still
// move only after its lease ran out (leaseHeld counts removed nodes), and
// a removed node that comes back is known again (setNodes). The removal
// is the planner's soft state like the rest: a planner that takes over
// before the maps without the node were installed does not know it, and
// the operator repeats it.
func (a *Actor) removeNode(m *messages.RemoveNode) *messages.RemoveNodeReply {
	name := m.GetNode()
	r := &messages.RemoveNodeReply{Planner: a.cfg.Name}
	switch {
	case name == "" || len(name) > MaxRosterNameLen:
		r.Reason = "bad name"
	case a.live[name]:
		r.Reason = "live"
	case a.removed[name]:
		r.Removed = true
	case !a.named()[name]:
		r.Reason = "unknown"
	case len(a.removed) >= control.MaxNodes:
		r.Reason = "too many"
	default:
		a.removed[name] = true
		r.Removed = true
		a.status.Removals++
		a.noQuorumLogged = false
		a.log.Warn("compute node removed by an operator: no longer counted among the known nodes",
			"node", name, "requester", m.GetRequester(), "live", len(a.live), "known", len(a.known()))
	}
	k := a.known()
	r.Known = uint32(len(k))
	for name := range k {
		if a.live[name] {
			r.Live++
		}
	}
	r.Quorum = a.quorum()
	return r
}
