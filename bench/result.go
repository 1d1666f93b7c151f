package bench

import "github.com/aura-runtime/aura/actors"

// Result is one mode's run, with the fields of the specification's JSON
// contract, named exactly so. Fields of capabilities a mode does not have
// (cohorts, migrations, manifest for mn-only; migrations for the fixed maps
// of static and hash) are present and zero.
type Result struct {
	Mode       string  `json:"mode"`
	Workload   string  `json:"workload"`
	CNs        int     `json:"cns"`
	DurationS  float64 `json:"duration_s"`
	Committed  uint64  `json:"committed"`
	RolledBack uint64  `json:"rolled_back"`
	Aborted    uint64  `json:"aborted"`
	Failed     uint64  `json:"failed"`
	// Errors counts the attempts after the warm-up that ended in an error
	// (ERROR, MOVED, REJECTED) or got no answer, retried with the same
	// transaction id or failed; LastError says why the last one of the run
	// did (absent when none did).
	Errors        uint64  `json:"errors"`
	LastError     string  `json:"last_error,omitempty"`
	AbortRate     float64 `json:"abort_rate"`
	ThroughputTPS float64 `json:"throughput_tps"`
	LatencyUs     Latency `json:"latency_us"`
	Locks         Locks   `json:"locks"`
	AtomicPerTxn  float64 `json:"atomic_per_txn"`
	OwnerRPCPer   float64 `json:"owner_rpc_per_txn"`
	LocalHit      float64 `json:"local_hit"`
	RemoteLockOps float64 `json:"remote_lock_ops_per_txn"`
	RDMA          RDMA    `json:"rdma"`
	// Cost is the measured window's CPU and allocations per committed
	// transaction (cpu_us_per_txn, allocs_per_txn, alloc_bytes_per_txn, at
	// the top level of each run's JSON).
	Cost
	// NodeCPUUsPerTxn is, with --connect, the nodes' CPU per committed
	// transaction over the window: the sum of their
	// process_cpu_seconds_total increases (read from each node's /metrics)
	// divided by the committed transactions. Absent in embedded runs, whose
	// nodes are this process (cpu_us_per_txn counts them).
	NodeCPUUsPerTxn *float64              `json:"node_cpu_us_per_txn,omitempty"`
	Cohorts         Cohorts               `json:"cohorts"`
	Migrations      Migrations            `json:"migrations"`
	Manifest        Manifest              `json:"manifest"`
	Checks          map[string]any        `json:"checks"`
	ByType          map[string]*TypeStats `json:"by_type"`
	Timeline        []Sample              `json:"timeline"`
	Params          Params                `json:"params"`
	// Planner is the planner actor's state at the end of an aura run.
	Planner *PlannerStats `json:"planner,omitempty"`
	// OwnerPath sums the nodes' owner-path lock-word verbs over the whole
	// run, warm-up included (absent for mn-only, which has no owner path):
	// where the atomics an owner still pays come from.
	OwnerPath *actors.OwnerPathStats `json:"owner_path,omitempty"`
}

// PlannerStats is the planner actor's state at the end of an aura run.
type PlannerStats struct {
	TickMs float64 `json:"tick_ms"`
	Ticks  uint64  `json:"ticks"`
	// Epoch is the last published OwnerMap epoch, Acked the last one every
	// node acknowledged.
	Epoch uint64 `json:"epoch"`
	Acked uint64 `json:"acked"`
	// Heartbeats applied; Dropped over the per-tick bound or rejected;
	// Deferred ticks that planned nothing while an epoch awaited acks.
	Heartbeats uint64 `json:"heartbeats"`
	Dropped    uint64 `json:"dropped"`
	Deferred   uint64 `json:"deferred"`
	// MeanTickUs and MaxTickUs are the planning ticks' mean and longest
	// wall time (graph decay, cohort generator, Benefit planner) — how long
	// the actor was busy, heartbeats and acknowledgements waiting.
	MeanTickUs float64 `json:"mean_tick_us"`
	MaxTickUs  int64   `json:"max_tick_us"`
	// Refines counts the cohort refinements run off the actor, and
	// MeanRefineUs their mean wall time.
	Refines      uint64  `json:"refines"`
	MeanRefineUs float64 `json:"mean_refine_us"`
}

// Latency holds latency quantiles in microseconds, from a transaction's first
// submission to its final outcome (retries included).
type Latency struct {
	P50 uint64 `json:"p50"`
	P99 uint64 `json:"p99"`
}

// Locks counts lock acquisitions by path.
type Locks struct {
	Total    uint64 `json:"total"`
	Local    uint64 `json:"local"`
	OwnerRPC uint64 `json:"owner_rpc"`
	MNCAS    uint64 `json:"mn_cas"`
}

// RDMA counts verbs issued by the compute nodes.
type RDMA struct {
	Read  uint64 `json:"read"`
	Write uint64 `json:"write"`
	CAS   uint64 `json:"cas"`
	FAA   uint64 `json:"faa"`
}

// Cohorts describes the cohort set over the run.
type Cohorts struct {
	Final          int `json:"final"`
	Max            int `json:"max"`
	MinAfterWarmup int `json:"min_after_warmup"`
}

// Migrations describes ownership moves. In aura mode they are the planner's
// migrations (SPEC §6, package control/transfer): Count is the cohorts that
// left a node (Moved to another node plus Evicted to the fallback path),
// RolledBack those that stayed after a failed freeze or drain, Stuck the
// migrations whose watchdog acted, and FreezeP99Us the 99th percentile of
// the freeze windows (freeze sent → the map recording the move acknowledged
// by every node). The fixed maps of static and hash never move a cohort;
// the simulator models migrations itself (package sim).
type Migrations struct {
	Count       uint64 `json:"count"`
	FreezeP99Us uint64 `json:"freeze_p99_us"`
	Moved       uint64 `json:"moved,omitempty"`
	Evicted     uint64 `json:"evicted,omitempty"`
	RolledBack  uint64 `json:"rolled_back,omitempty"`
	Stuck       uint64 `json:"stuck,omitempty"`
	// DrainP99Us is the 99th percentile of Start → drained (the old owner's
	// holders released or fenced), in microseconds.
	DrainP99Us uint64 `json:"drain_p99_us,omitempty"`
	// PublishP99Us is the 99th percentile of the freeze windows' part
	// after their round settled: any wait of the planner's before it may
	// publish (a majority, a departed node's lease), then the map published
	// and acknowledged by every node, in microseconds.
	PublishP99Us uint64 `json:"publish_p99_us,omitempty"`
	// LockRedirects counts, after warm-up, the locks refused because their
	// cohort was frozen, had moved or was known at another epoch; each
	// aborted an attempt that the client retried (no transaction fails for
	// it).
	LockRedirects uint64 `json:"lock_redirects"`
}

// Manifest describes the last published OwnerMap.
type Manifest struct {
	Epoch uint64 `json:"epoch"`
	Bytes uint64 `json:"bytes"`
}

// TypeStats are the counted figures of one transaction type after warm-up.
type TypeStats struct {
	Committed    uint64  `json:"committed"`
	RolledBack   uint64  `json:"rolled_back"`
	Aborted      uint64  `json:"aborted"`
	AtomicPerTxn float64 `json:"atomic_per_txn"`
	LocksPerTxn  float64 `json:"locks_per_txn"`
	// LocksPerCommit counts only the attempt that committed: what the
	// transaction itself needs, without the retries contention adds.
	LocksPerCommit float64 `json:"locks_per_commit"`
	mnAtomics      uint64
	locks          uint64
	commitLocks    uint64
}

// Sample is one point of the timeline (one per second, warm-up included):
// the figures of the interval before TS, with Cohorts the published map's
// cohorts at TS and Migrations the count since the start.
type Sample struct {
	TS            float64 `json:"t_s"`
	ThroughputTPS float64 `json:"throughput_tps"`
	AtomicPerTxn  float64 `json:"atomic_per_txn"`
	LocalHit      float64 `json:"local_hit"`
	Cohorts       int     `json:"cohorts"`
	Migrations    uint64  `json:"migrations"`
	// RemoteLockOps is the interval's (owner RPC + MN CAS) lock
	// acquisitions per completed transaction: the run's
	// remote_lock_ops_per_txn, per interval.
	RemoteLockOps float64 `json:"remote_lock_ops_per_txn"`
	// CNTPS is each compute node's completed transactions per second over
	// the interval, by node index: aura bench counts the transactions each
	// node's coordinators finished, aura sim those of each home CN; absent
	// with --connect (the nodes are other processes: see their /metrics).
	CNTPS []float64 `json:"cn_tps,omitempty"`
	// Owners samples the published OwnerMap (aura mode): present when the
	// map's epoch changed since the last sample that carried it; a sample
	// without it has the ownership of the one before (none before the first
	// map). See OwnerSample.
	Owners *OwnerSample `json:"owners,omitempty"`
}

// Params records how the run was made.
type Params struct {
	Seed     uint64  `json:"seed"`
	Clients  int     `json:"clients"`
	WarmupS  float64 `json:"warmup_s"`
	MN       string  `json:"mn"`
	RateTPS  float64 `json:"rate_tps,omitempty"`
	Loaded   uint64  `json:"loaded_records"`
	LoadS    float64 `json:"load_s"`
	CheckS   float64 `json:"check_s"`
	Workload any     `json:"workload_config,omitempty"`
	// KeyGroups is the number of loaded key groups the fixed OwnerMap of
	// static or hash places.
	KeyGroups int `json:"key_groups,omitempty"`
	// DriftEveryS is the workload's drift period (Config.DriftEvery; absent:
	// no drift), Drifts the drifts applied during the run, warm-up included.
	DriftEveryS float64 `json:"drift_every_s,omitempty"`
	Drifts      uint64  `json:"drifts,omitempty"`
}
