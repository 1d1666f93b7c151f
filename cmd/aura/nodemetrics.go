package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
)

// The metrics of one `aura node`, served on its management API's /metrics
// (docs/metrics.md lists them). Every node has its own metrics.Set, so
// that several nodes in one process (tests, the embedded bench) keep
// theirs apart. Counters the code keeps anyway (the node's transaction
// counters, the device's verb counters, the planner's Status, the
// membership view) are read once per scrape into a snapshot that the
// gauges read; the transaction path itself only adds to atomics and feeds
// the latency histogram.

// latencyBuckets are the upper bounds, in seconds, of the transaction and
// owner RPC latency histograms: 50 µs (a local lock on loopback) to 10 s
// (the node's request timeout).
var latencyBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
	250e-3, 500e-3, 1, 2.5, 10}

// phaseBuckets are the upper bounds, in seconds, of the migration phase
// histograms: 100 µs to 10 s (SPEC §11 wants the freeze window's p99 ≤ 10 ms).
var phaseBuckets = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3,
	500e-3, 1, 2.5, 10}

// plannerStatusTimeout bounds a scrape's wait for the planner's Status: a
// planner busy with a long tick makes its metrics lag one scrape rather
// than stall the scrape.
const plannerStatusTimeout = 500 * time.Millisecond

// outcomeLabels names the messages.TxnOutcome values (UNSPECIFIED counts
// as error, as the protocol says to treat it).
var outcomeLabels = [actors.NumTxnOutcomes]string{"error", "committed", "aborted", "rolled_back", "moved", "rejected", "error"}

// routeSources are the answers of /management/partition-route by source:
// a learned cohort, the OwnerMap's fallback table, or the static fallback
// (no map entry: the router's last resort).
var routeSources = [...]string{client.SourceCohort, client.SourceFallbackTable, client.SourceStaticFallback}

// nodeMetrics holds a node's metric set and the snapshot its gauges read.
type nodeMetrics struct {
	set *metrics.Set

	txnLatency *metrics.PrometheusHistogram
	rpcLatency [2]*metrics.PrometheusHistogram // lock, unlock
	rpcErrors  [2]*metrics.Counter
	freeze     *metrics.PrometheusHistogram
	drain      *metrics.PrometheusHistogram
	routes     [len(routeSources)]*metrics.Counter

	attachOnce sync.Once

	// mu serialises scrapes (the snapshot and the phase samples fed into
	// the histograms) and guards the sources attach sets.
	mu            sync.Mutex
	node          *actors.Node
	mem           *cluster.Membership
	verbs         func() rdma.Stats                          // nil: no device
	plannerStatus func(time.Duration) (planner.Status, bool) // nil: never hosts one
	snap          metricsSnapshot
	// phaseSeen is the number of finished migrations whose phase samples
	// have been fed into freeze and drain (of the planner instance seen
	// last; a new one starts over).
	phaseSeen uint64
	// manifestOf and manifestBytes cache the encoded size of the installed
	// map: maps are immutable once installed, so the pointer names it.
	manifestOf    *control.OwnerMap
	manifestBytes int
}

type metricsSnapshot struct {
	txn              actors.TxnStats
	verbs            rdma.Stats
	owned, frozen    int
	retireErrors     uint64
	mapEpoch         uint64
	mapCohorts       int
	manifestBytes    int
	epochSeen        uint64
	members, leaving int
	memberEpoch      uint64
	events           [cluster.EventUpdate + 1]uint64
	eventsDropped    uint64
	gossipRefused    uint64
	planner          planner.Status
	hostsPlanner     bool
	lease            owner.LeaseState
	leased           bool // the node has an owner lease (a planner answers its heartbeats)
	repair           occ.RepairStats
	recovery         occ.Recovery
	at               time.Time
}

// newNodeMetrics returns a node's metrics. The histograms exist at once
// (the node and its transport feed them); the gauges once attach names the
// node and its sources.
func newNodeMetrics() *nodeMetrics {
	s := metrics.NewSet()
	m := &nodeMetrics{set: s}
	m.txnLatency = s.NewPrometheusHistogramExt("aura_txn_duration_seconds", latencyBuckets)
	for i, op := range []string{"lock", "unlock"} {
		m.rpcLatency[i] = s.NewPrometheusHistogramExt(`aura_owner_rpc_duration_seconds{op="`+op+`"}`, latencyBuckets)
		m.rpcErrors[i] = s.NewCounter(`aura_owner_rpc_errors_total{op="` + op + `"}`)
	}
	m.freeze = s.NewPrometheusHistogramExt("aura_migration_freeze_seconds", phaseBuckets)
	m.drain = s.NewPrometheusHistogramExt("aura_migration_drain_seconds", phaseBuckets)
	for i, src := range routeSources {
		m.routes[i] = s.NewCounter(`aura_route_requests_total{source="` + src + `"}`)
	}
	return m
}

// routed counts one partition-route answer by its source.
func (m *nodeMetrics) routed(source string) {
	for i, src := range routeSources {
		if src == source {
			m.routes[i].Inc()
			return
		}
	}
}

// attach registers the gauges that read node and mem, verbs (the node's
// memory-node device counters; nil: none) and plannerStatus (the Status of
// the planner while this node hosts it; nil: never). Only the first call
// counts.
func (m *nodeMetrics) attach(node *actors.Node, mem *cluster.Membership, verbs func() rdma.Stats,
	plannerStatus func(time.Duration) (planner.Status, bool)) {
	m.attachOnce.Do(func() {
		m.mu.Lock()
		m.node, m.mem, m.verbs, m.plannerStatus = node, mem, verbs, plannerStatus
		m.mu.Unlock()
		m.registerGauges()
	})
}

// hostedPlanner returns the Status of the planner this node hosts, if any.
func (m *nodeMetrics) hostedPlanner(timeout time.Duration) (planner.Status, bool) {
	m.mu.Lock()
	ps := m.plannerStatus
	m.mu.Unlock()
	if ps == nil {
		return planner.Status{}, false
	}
	return ps(timeout)
}

func (m *nodeMetrics) gauge(name string, f func(*metricsSnapshot) float64) {
	m.set.NewGauge(name, func() float64 { return f(&m.snap) })
}

func (m *nodeMetrics) registerGauges() {
	g := m.gauge
	u := func(v uint64) float64 { return float64(v) }
	// Locks by path and redirects, from the coordinators' counters.
	g(`aura_locks_total{path="local"}`, func(s *metricsSnapshot) float64 { return u(s.txn.Counters.LocksLocal) })
	g(`aura_locks_total{path="owner_rpc"}`, func(s *metricsSnapshot) float64 { return u(s.txn.Counters.LocksOwnerRPC) })
	g(`aura_locks_total{path="mn_cas"}`, func(s *metricsSnapshot) float64 { return u(s.txn.Counters.LocksMNCAS) })
	g(`aura_lock_redirects_total`, func(s *metricsSnapshot) float64 { return u(s.txn.Counters.Redirects) })
	g(`aura_txn_replayed_total`, func(s *metricsSnapshot) float64 { return u(s.txn.Replayed) })
	// Verbs of the node's memory-node connection (every queue pair of its
	// device: coordinators, lockers, atomic actors).
	if m.verbs != nil {
		g(`aura_verbs_total{op="read"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.Reads) })
		g(`aura_verbs_total{op="write"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.Writes) })
		g(`aura_verbs_total{op="cas"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.CAS) })
		g(`aura_verbs_total{op="faa"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.FAA) })
		g(`aura_cas_failed_total`, func(s *metricsSnapshot) float64 { return u(s.verbs.CASFailed) })
		g(`aura_doorbells_total`, func(s *metricsSnapshot) float64 { return u(s.verbs.Doorbells) })
		g(`aura_verb_errors_total`, func(s *metricsSnapshot) float64 { return u(s.verbs.Errors) })
		g(`aura_verb_bytes_total{dir="read"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.BytesRead) })
		g(`aura_verb_bytes_total{dir="write"}`, func(s *metricsSnapshot) float64 { return u(s.verbs.BytesWritten) })
	}
	// Cohorts and the installed OwnerMap.
	g(`aura_cohorts{state="owned"}`, func(s *metricsSnapshot) float64 { return float64(s.owned) })
	g(`aura_cohorts{state="frozen"}`, func(s *metricsSnapshot) float64 { return float64(s.frozen) })
	g(`aura_cohort_retire_errors_total`, func(s *metricsSnapshot) float64 { return u(s.retireErrors) })
	g(`aura_manifest_epoch`, func(s *metricsSnapshot) float64 { return u(s.mapEpoch) })
	g(`aura_manifest_cohorts`, func(s *metricsSnapshot) float64 { return float64(s.mapCohorts) })
	g(`aura_manifest_bytes`, func(s *metricsSnapshot) float64 { return float64(s.manifestBytes) })
	g(`aura_manifest_epoch_seen`, func(s *metricsSnapshot) float64 { return u(s.epochSeen) })
	// The owner lease (package actors/owner, "Owner leases").
	g(`aura_owner_lease_seconds`, func(s *metricsSnapshot) float64 {
		if !s.leased || !s.lease.Until.After(s.at) {
			return 0
		}
		return s.lease.Until.Sub(s.at).Seconds()
	})
	g(`aura_owner_lease_grants_total`, func(s *metricsSnapshot) float64 { return u(s.lease.Grants) })
	g(`aura_owner_lease_refusals_total`, func(s *metricsSnapshot) float64 { return u(s.lease.Refusals) })
	// Lock words left held by gone holders (package occ, "Crash recovery"):
	// ended at this node's start, and by its repair sweep since.
	g(`aura_lock_recovered_total{how="redone"}`, func(s *metricsSnapshot) float64 { return float64(s.recovery.Redone) })
	g(`aura_lock_recovered_total{how="released"}`, func(s *metricsSnapshot) float64 { return float64(s.recovery.Released) })
	g(`aura_lock_repaired_total{how="redone"}`, func(s *metricsSnapshot) float64 { return u(s.repair.Redone) })
	g(`aura_lock_repaired_total{how="released"}`, func(s *metricsSnapshot) float64 { return u(s.repair.Released) })
	g(`aura_lock_repair_moot_total`, func(s *metricsSnapshot) float64 { return u(s.repair.Moot) })
	g(`aura_lock_repair_dropped_total`, func(s *metricsSnapshot) float64 { return u(s.repair.Dropped) })
	// Membership as this node sees it.
	g(`aura_membership_members`, func(s *metricsSnapshot) float64 { return float64(s.members) })
	g(`aura_membership_leaving`, func(s *metricsSnapshot) float64 { return float64(s.leaving) })
	g(`aura_membership_epoch`, func(s *metricsSnapshot) float64 { return u(s.memberEpoch) })
	for _, k := range []cluster.EventKind{cluster.EventJoin, cluster.EventLeave, cluster.EventFail, cluster.EventUpdate} {
		g(`aura_membership_events_total{kind="`+k.String()+`"}`, func(s *metricsSnapshot) float64 { return u(s.events[k]) })
	}
	g(`aura_membership_events_dropped_total`, func(s *metricsSnapshot) float64 { return u(s.eventsDropped) })
	g(`aura_membership_gossip_refused_total`, func(s *metricsSnapshot) float64 { return u(s.gossipRefused) })
	// Remote actor endpoint (process-wide: one per process).
	g(`aura_remote_tls_refused_total`, func(*metricsSnapshot) float64 { return u(actors.TLSRefusals()) })
	g(`aura_remote_malformed_streams_total`, func(*metricsSnapshot) float64 { return u(actors.RemotePanics()) })
	g(`aura_planner_active`, func(s *metricsSnapshot) float64 {
		if s.hostsPlanner {
			return 1
		}
		return 0
	})
	// Transactions by type and outcome, and the planner's figures, are
	// written by writers: only the types a node has seen, and the planner
	// only where it runs, so that idle series do not crowd the page.
	m.set.RegisterMetricsWriter(m.writeTxns)
	m.set.RegisterMetricsWriter(m.writePlanner)
}

// writeTxns writes aura_txn_total for every transaction type with at least
// one finished submission (all outcomes of that type, zeros included).
func (m *nodeMetrics) writeTxns(w io.Writer) {
	for k, byOutcome := range m.snap.txn.ByKind {
		var sum uint64
		for _, n := range byOutcome {
			sum += n
		}
		if sum == 0 {
			continue
		}
		var merged [len(outcomeLabels)]uint64
		for o, n := range byOutcome {
			merged[o] = n
		}
		// UNSPECIFIED and ERROR share the label "error".
		merged[messages.TxnOutcome_TXN_OUTCOME_ERROR] += merged[messages.TxnOutcome_TXN_OUTCOME_UNSPECIFIED]
		for o := int(messages.TxnOutcome_TXN_OUTCOME_COMMITTED); o < len(merged); o++ {
			metrics.WriteCounterUint64(w, fmt.Sprintf(`aura_txn_total{type=%q,outcome=%q}`, actors.TxnKinds[k], outcomeLabels[o]), merged[o])
		}
	}
}

// writePlanner writes the planner's figures when this node hosts it.
func (m *nodeMetrics) writePlanner(w io.Writer) {
	if !m.snap.hostsPlanner {
		return
	}
	st := &m.snap.planner
	c := func(name string, v uint64) { metrics.WriteCounterUint64(w, name, v) }
	gu := func(name string, v uint64) { metrics.WriteGaugeUint64(w, name, v) }
	c("aura_planner_ticks_total", st.Tick)
	metrics.WriteGaugeFloat64(w, "aura_planner_tick_seconds", float64(st.LastTickMicros)/1e6)
	metrics.WriteCounterFloat64(w, "aura_planner_tick_seconds_total", float64(st.TickMicros)/1e6)
	metrics.WriteGaugeFloat64(w, "aura_planner_tick_max_seconds", float64(st.MaxTickMicros)/1e6)
	c("aura_planner_refines_total", st.Refines)
	c("aura_planner_refines_dropped_total", st.RefinesDropped)
	metrics.WriteCounterFloat64(w, "aura_planner_refine_seconds_total", float64(st.RefineMicros)/1e6)
	c("aura_planner_deferred_ticks_total", st.Deferred)
	c("aura_planner_heartbeats_total", st.Heartbeats)
	c("aura_planner_heartbeats_dropped_total", st.Dropped)
	quorum := uint64(0)
	if st.Quorum {
		quorum = 1
	}
	gu("aura_planner_quorum", quorum)
	c("aura_planner_no_quorum_total", st.NoQuorumTicks)
	c("aura_planner_lease_grants_total", st.LeaseGrants)
	c("aura_planner_lease_refusals_total", st.LeaseRefusals)
	c("aura_planner_lease_holds_total", st.LeaseHolds)
	c("aura_planner_removals_total", st.Removals)
	if pl := st.PlannerLease; pl.Enabled {
		b := func(v bool) uint64 {
			if v {
				return 1
			}
			return 0
		}
		gu("aura_planner_lease_holding", b(pl.Holding))
		gu("aura_planner_lease_valid", b(pl.Valid))
		c("aura_planner_lease_acquired_total", pl.Acquired)
		c("aura_planner_lease_deposed_total", pl.Deposed)
		c("aura_planner_lease_op_failures_total", pl.Failures)
		c("aura_planner_lease_idle_ticks_total", pl.IdleTicks)
	}
	gu("aura_planner_removed_nodes", uint64(len(st.Removed)))
	gu("aura_planner_graph_nodes", uint64(max(st.GraphNodes, 0)))
	gu("aura_planner_graph_edges", uint64(max(st.GraphEdges, 0)))
	gu("aura_planner_epoch", st.Epoch)
	gu("aura_planner_acked_epoch", st.Acked)
	gu("aura_planner_cohorts", uint64(max(st.Cohorts, 0)))
	slots := 0
	for _, n := range st.Roster {
		if n != "" {
			slots++
		}
	}
	gu("aura_planner_roster_slots", uint64(slots))
	gu("aura_planner_unslotted_nodes", uint64(max(st.Unslotted, 0)))
	tr := st.Transfer
	c("aura_migration_rounds_total", tr.Rounds)
	c("aura_migrations_started_total", tr.Started)
	c(`aura_migrations_total{outcome="moved"}`, tr.Moved)
	c(`aura_migrations_total{outcome="evicted"}`, tr.Evicted)
	c(`aura_migrations_total{outcome="rolled_back"}`, tr.Kept)
	c("aura_migrations_stuck_total", tr.Stuck)
	c("aura_migration_resends_total", tr.Resends)
	c("aura_migration_refusals_total", tr.Refusals)
}

// refresh reads the sources into the snapshot. m.mu is held.
func (m *nodeMetrics) refresh() {
	s := &m.snap
	if m.verbs != nil {
		s.verbs = m.verbs()
	}
	s.at = time.Now()
	if n := m.node; n != nil {
		s.lease, s.leased = n.Lease()
		s.repair, s.recovery = n.RepairStats(), n.Recovery()
		s.txn = n.TxnStats()
		s.owned, s.frozen = n.CohortCounts()
		s.retireErrors = n.RetireErrors()
		om := n.OwnerMap()
		s.mapEpoch, s.mapCohorts, s.epochSeen = om.Epoch, len(om.Cohorts), n.EpochSeen()
		if om != m.manifestOf {
			// Once per installed map: the size a full push of it takes.
			m.manifestOf, m.manifestBytes = om, 0
			if b, err := manifest.Encode(om, manifest.Version2, 0); err == nil {
				m.manifestBytes = len(b)
			}
		}
		s.manifestBytes = m.manifestBytes
	}
	if mem := m.mem; mem != nil {
		members, epoch := mem.Snapshot()
		s.members, s.memberEpoch, s.leaving = len(members), epoch, len(cluster.LeavingNodes(members))
		for k := range s.events {
			s.events[k] = mem.EventCount(cluster.EventKind(k))
		}
		s.eventsDropped, s.gossipRefused = mem.Dropped(), mem.Refused()
	}
	s.hostsPlanner = false
	if m.plannerStatus != nil {
		if st, ok := m.plannerStatus(plannerStatusTimeout); ok {
			s.planner, s.hostsPlanner = st, true
			m.feedPhases(&st)
		}
	}
}

// feedPhases adds the phase samples of migrations finished since the last
// scrape to the histograms. The planner keeps the last 4,096 samples and
// counts finished migrations (moved + evicted + kept, one sample each), so
// the newest count−seen samples are the new ones; more than 4,096 between
// two scrapes lose the oldest. A planner that restarted (count below seen)
// is read from its start.
func (m *nodeMetrics) feedPhases(st *planner.Status) {
	total := st.Transfer.Moved + st.Transfer.Evicted + st.Transfer.Kept
	if total < m.phaseSeen {
		m.phaseSeen = 0
	}
	fresh := min(total-m.phaseSeen, uint64(len(st.FreezeMicros)), uint64(len(st.DrainMicros)))
	for _, us := range st.FreezeMicros[len(st.FreezeMicros)-int(fresh):] {
		m.freeze.Update(float64(us) / 1e6)
	}
	for _, us := range st.DrainMicros[len(st.DrainMicros)-int(fresh):] {
		m.drain.Update(float64(us) / 1e6)
	}
	m.phaseSeen = total
}

// writePrometheus writes every metric in Prometheus text format, process
// metrics (CPU, memory, goroutines, file descriptors) included.
func (m *nodeMetrics) writePrometheus(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refresh()
	m.set.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

// timedTransport measures owner RPCs (lock and unlock, retries included)
// around the node's transport; it adds a clock read and a histogram update
// per RPC, next to a network round trip.
type timedTransport struct {
	owner.Transport
	m *nodeMetrics
}

// timed wraps t (nil stays nil: a node without peers).
func (m *nodeMetrics) timed(t owner.Transport) owner.Transport {
	if t == nil {
		return nil
	}
	return &timedTransport{Transport: t, m: m}
}

func (t *timedTransport) Lock(ctx context.Context, node string, req *messages.LockRequest) (*messages.LockReply, error) {
	start := time.Now()
	rep, err := t.Transport.Lock(ctx, node, req)
	t.m.rpcLatency[0].UpdateDuration(start)
	if err != nil {
		t.m.rpcErrors[0].Inc()
	}
	return rep, err
}

func (t *timedTransport) Unlock(ctx context.Context, node string, req *messages.UnlockRequest) (*messages.UnlockReply, error) {
	start := time.Now()
	rep, err := t.Transport.Unlock(ctx, node, req)
	t.m.rpcLatency[1].UpdateDuration(start)
	if err != nil {
		t.m.rpcErrors[1].Inc()
	}
	return rep, err
}
