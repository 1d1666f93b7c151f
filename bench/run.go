package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
)

// Modes this package runs, in the order a comparison lists them (SPEC §10):
//
//   - mn-only: every lock by MN CAS (FORD/Motor-style), no owner path;
//   - static: one cohort per partition value of the workload's rule (TPC-C:
//     a warehouse's key groups), owned by the partition's static node
//     (warehouse % N; rendezvous hashing otherwise), transactions routed by
//     the same rule; one fixed OwnerMap, no planner;
//   - hash: one cohort per key group placed by rendezvous hashing, one
//     fixed OwnerMap, no planner; transactions routed by the AffinityRouter
//     over it;
//   - aura: the planner actor learns cohorts and owners from the nodes'
//     profiler heartbeats and publishes OwnerMaps; clients route with the
//     AffinityRouter over their copy of the newest map.
//
// The oracle mode exists in the simulator only (aura sim).
var Modes = []string{"mn-only", "static", "hash", "aura"}

// DefaultPlannerTick is the planner's period in aura mode (and the nodes'
// heartbeat period): SPEC §5's 100 ms.
const DefaultPlannerTick = 100 * time.Millisecond

// Config configures one benchmark run of one mode.
type Config struct {
	// Mode is the lock/placement mode; see Modes.
	Mode string
	// Workload is the configured workload.
	Workload workload.Workload
	// Dial opens a device on the memory node; it is called once per compute
	// node and once for loading and checking.
	Dial func(ctx context.Context) (rdma.Device, error)
	// MN names the memory node in the results ("embedded" or its address).
	MN string
	// CNs is the number of compute nodes. Default 4.
	CNs int
	// Clients is the number of closed-loop clients. Default 8 per CN.
	Clients int
	// CoordinatorsPerCN is the number of coordinator actors per node.
	// Default 8.
	CoordinatorsPerCN int
	// Duration is the measured time, after Warmup. Default 10 s.
	Duration time.Duration
	// Warmup is run first and left out of the summary figures (the timeline
	// keeps it). Default 2 s.
	Warmup time.Duration
	// Seed makes the generated transactions reproducible.
	Seed uint64
	// RateTPS, when positive, paces clients open-loop at this total rate.
	RateTPS float64
	// MaxAttempts caps how often one transaction is retried after aborts
	// before the client reports it as failed. Default 1000.
	MaxAttempts int
	// SkipLoad skips loading (the tables are already loaded).
	SkipLoad bool
	// Progress, when set, receives a progress line every ProgressEvery.
	Progress io.Writer
	// ProgressEvery is the progress and timeline interval. Default 1 s.
	ProgressEvery time.Duration
	// PlannerTick is the planner's period in aura mode, and the nodes'
	// heartbeat period in every mode with the owner path. Default
	// DefaultPlannerTick.
	PlannerTick time.Duration
	// DriftEvery, when positive, drifts the workload (a workload.Drifter)
	// during the run, warm-up included: Drift(0) before loading, then
	// Drift(1), Drift(2), … every DriftEvery of wall time until the run
	// ends, so the planner has to follow a moving access pattern under load.
	// 0 (the default) never drifts. At least 1ms.
	DriftEvery time.Duration
	// OnWindow, when set, is called with true when the measured window
	// starts (the warm-up is over) and with false when it ends (the
	// clients stopped): aura bench starts and stops its
	// --window-cpu-profile there, so that the profile leaves the load and
	// the checks out.
	OnWindow func(start bool)
}

func (c *Config) window(start bool) {
	if c.OnWindow != nil {
		c.OnWindow(start)
	}
}

func (c *Config) defaults() {
	if c.CNs == 0 {
		c.CNs = 4
	}
	if c.Clients == 0 {
		c.Clients = 8 * c.CNs
	}
	if c.CoordinatorsPerCN == 0 {
		c.CoordinatorsPerCN = 8
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 1000
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = time.Second
	}
	if c.PlannerTick == 0 {
		c.PlannerTick = DefaultPlannerTick
	}
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	known := false
	for _, m := range Modes {
		known = known || m == c.Mode
	}
	if !known {
		errs = append(errs, fmt.Errorf("bench: mode %q is not available (available: %s)", c.Mode, strings.Join(Modes, ", ")))
	}
	if c.Workload == nil {
		errs = append(errs, errors.New("bench: no workload"))
	}
	if c.Dial == nil {
		errs = append(errs, errors.New("bench: no memory node (Dial)"))
	}
	if c.CNs < 1 || c.CNs > 256 {
		errs = append(errs, fmt.Errorf("bench: cns %d, want 1..256", c.CNs))
	}
	if c.Clients < 1 || c.Clients > 65536 {
		errs = append(errs, fmt.Errorf("bench: clients %d, want 1..65536", c.Clients))
	}
	if c.CoordinatorsPerCN < 1 || c.CoordinatorsPerCN > 4096 {
		errs = append(errs, fmt.Errorf("bench: coordinators per CN %d, want 1..4096", c.CoordinatorsPerCN))
	}
	errs = append(errs, validatePacing(c.Duration, c.Warmup, c.RateTPS, c.MaxAttempts)...)
	if c.PlannerTick < time.Millisecond {
		errs = append(errs, fmt.Errorf("bench: planner tick %v, want ≥ 1ms", c.PlannerTick))
	}
	if c.DriftEvery < 0 || (c.DriftEvery > 0 && c.DriftEvery < time.Millisecond) {
		errs = append(errs, fmt.Errorf("bench: drift every %v, want 0 (never) or ≥ 1ms", c.DriftEvery))
	}
	if _, ok := c.Workload.(workload.Drifter); c.DriftEvery > 0 && c.Workload != nil && !ok {
		errs = append(errs, fmt.Errorf("bench: workload %q cannot drift", c.Workload.Name()))
	}
	return errors.Join(errs...)
}

// validatePacing checks the run-length and retry settings both kinds of
// run share.
func validatePacing(duration, warmup time.Duration, rateTPS float64, maxAttempts int) []error {
	var errs []error
	if duration <= 0 || warmup < 0 {
		errs = append(errs, fmt.Errorf("bench: duration %v must be positive and warmup %v not negative", duration, warmup))
	}
	if rateTPS < 0 {
		errs = append(errs, fmt.Errorf("bench: rate %v must not be negative", rateTPS))
	}
	if maxAttempts < 1 {
		errs = append(errs, fmt.Errorf("bench: max attempts %d must be positive", maxAttempts))
	}
	return errs
}

// counters are cumulative and read by the sampler while clients add to them.
type counters struct {
	committed, rolledBack, aborted, failed atomic.Uint64
	local, ownerRPC, mnCAS                 atomic.Uint64
	atomics                                atomic.Uint64 // MN CAS + FAA
	redirects                              atomic.Uint64 // locks refused by frozen or moved cohorts
	errs                                   atomic.Uint64 // attempts that ended in an error or got no answer
}

type snapshot struct {
	committed, rolledBack, aborted, failed uint64
	local, ownerRPC, mnCAS, atomics        uint64
	redirects, errs                        uint64
}

func (c *counters) snap() snapshot {
	return snapshot{c.committed.Load(), c.rolledBack.Load(), c.aborted.Load(), c.failed.Load(),
		c.local.Load(), c.ownerRPC.Load(), c.mnCAS.Load(), c.atomics.Load(), c.redirects.Load(), c.errs.Load()}
}

func (s snapshot) sub(o snapshot) snapshot {
	return snapshot{s.committed - o.committed, s.rolledBack - o.rolledBack, s.aborted - o.aborted, s.failed - o.failed,
		s.local - o.local, s.ownerRPC - o.ownerRPC, s.mnCAS - o.mnCAS, s.atomics - o.atomics, s.redirects - o.redirects, s.errs - o.errs}
}

// done is the number of transactions that completed (committed or rolled
// back by their program): the denominator of every per-transaction figure.
func (s snapshot) done() uint64 { return s.committed + s.rolledBack }

type statser interface{ Stats() rdma.Stats }

// Run loads the workload, runs it in cfg.Mode on an embedded cluster of
// compute nodes against the memory node, checks consistency, and returns
// the result. Every run loads the tables itself (unless SkipLoad): compare
// modes on fresh memory nodes with the same seed, so that each starts from
// the same data.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wl := cfg.Workload
	// A workload shared by several runs starts each from its first pattern;
	// a workload that cannot drift in this configuration fails here, before
	// anything is loaded.
	drifter, _ := wl.(workload.Drifter)
	if cfg.DriftEvery > 0 {
		if err := drifter.Drift(0); err != nil {
			return nil, fmt.Errorf("bench: drift: %w", err)
		}
	}
	base, err := cfg.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: memory node: %w", err)
	}
	defer base.Close()
	layout, err := store.Create(ctx, base, wl.Schema())
	if err != nil {
		return nil, err
	}
	res := &Result{Mode: cfg.Mode, Workload: wl.Name(), CNs: cfg.CNs, Checks: map[string]any{},
		ByType: map[string]*TypeStats{}, Params: Params{Seed: cfg.Seed, Clients: cfg.Clients,
			WarmupS: cfg.Warmup.Seconds(), MN: cfg.MN, RateTPS: cfg.RateTPS}}
	// The fixed maps of static and hash place every loaded key group: count
	// them while loading.
	var cen *census
	if cfg.Mode == "static" || cfg.Mode == "hash" {
		cen = newCensus(wl.Rule())
	}
	if !cfg.SkipLoad {
		start := time.Now()
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "loading %s tables…\n", wl.Name())
		}
		loaded, err := store.LoadOnce(ctx, layout, base, func(ctx context.Context, l *store.Loader) error {
			var ins workload.Inserter = l
			if cen != nil {
				ins = cen.inserter(l)
			}
			return wl.Load(ctx, ins)
		})
		if err != nil {
			return nil, fmt.Errorf("bench: load: %w", err)
		}
		res.Params.Loaded = loaded
		res.Params.LoadS = time.Since(start).Seconds()
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "loaded %d records in %.1fs\n", res.Params.Loaded, res.Params.LoadS)
		}
	}

	if cfg.SkipLoad {
		if err := store.CheckLoaded(ctx, base); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if cen != nil {
			// The loader is deterministic: replaying it names the key
			// groups of the tables loaded earlier.
			if err := wl.Load(ctx, cen.inserter(discard{})); err != nil {
				return nil, fmt.Errorf("bench: key group census: %w", err)
			}
		}
	}
	if cen != nil {
		kgs, _, mixed := cen.keyGroups()
		res.Params.KeyGroups = len(kgs)
		if mixed && cfg.Mode == "static" && cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "static: key groups span several partitions (e.g. TPC-C's legacy encoding): each is owned by the node of the partition holding most of its records\n")
		}
	}
	cl, err := startCluster(ctx, cfg, layout, cen)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	devs := cl.devs

	r := &runner{cfg: cfg, wl: wl, cl: cl, nodes: cl.nodes, byType: map[string]*TypeStats{}}
	r.start = time.Now()
	r.warmEnd = r.start.Add(cfg.Warmup)
	end := r.warmEnd.Add(cfg.Duration)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(c, stop)
		}()
	}
	if cfg.DriftEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.drift(drifter, stop)
		}()
	}
	var warm snapshot
	var warmRDMA rdma.Stats
	warmUse := takeUsage()
	warmTaken := cfg.Warmup == 0
	if warmTaken {
		warmRDMA = sumStats(devs)
		cfg.window(true)
	}
	prev := snapshot{}
	prevCN := cl.finishedPerNode()
	tick := time.NewTicker(cfg.ProgressEvery)
	lastT := r.start
	func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if !warmTaken && !now.Before(r.warmEnd) {
					cfg.window(true)
					warm, warmRDMA, warmUse, warmTaken = r.c.snap(), sumStats(devs), takeUsage(), true
				}
				cur := r.c.snap()
				d := cur.sub(prev)
				s := sample(now.Sub(r.start), now.Sub(lastT), d)
				curCN := cl.finishedPerNode()
				s.CNTPS = cnThroughput(prevCN, curCN, now.Sub(lastT))
				prevCN = curCN
				s.Cohorts, s.Migrations = cl.cohorts(), cl.migrationCount()
				s.Owners = cl.ownerSample(res.Timeline)
				res.Timeline = append(res.Timeline, s)
				res.Cohorts.Max = max(res.Cohorts.Max, s.Cohorts)
				if !now.Before(r.warmEnd) && (!r.afterWarm || s.Cohorts < res.Cohorts.MinAfterWarmup) {
					res.Cohorts.MinAfterWarmup, r.afterWarm = s.Cohorts, true
				}
				prev, lastT = cur, now
				if cfg.Progress != nil {
					phase := ""
					if now.Before(r.warmEnd) {
						phase = " (warm-up)"
					}
					var extra string
					if cfg.DriftEvery > 0 {
						extra += fmt.Sprintf("  drifts %d", r.drifts.Load())
					}
					if cfg.Mode != "mn-only" {
						extra += fmt.Sprintf("  cohorts %d", s.Cohorts)
						if cfg.Mode == "aura" {
							extra += fmt.Sprintf("  epoch %d", cl.manifest().Epoch)
						}
					}
					fmt.Fprintf(cfg.Progress, "[%s %6.1fs] committed %d  tps %.0f  atomics/txn %.2f  local %.1f%%  aborts %d%s%s\n",
						cfg.Mode, s.TS, cur.done(), s.ThroughputTPS, s.AtomicPerTxn, 100*s.LocalHit, cur.aborted, extra, phase)
				}
				if !now.Before(end) {
					return
				}
			}
		}
	}()
	close(stop)
	wg.Wait()
	window := takeUsage().sub(warmUse)
	if warmTaken {
		cfg.window(false)
	}
	if !warmTaken {
		warmRDMA = sumStats(devs)
	}
	elapsed := time.Since(r.warmEnd)
	if cfg.Warmup > 0 && !warmTaken {
		elapsed = time.Since(r.start)
	}
	total := r.c.snap().sub(warm)
	rd := sumStats(devs).Sub(warmRDMA)
	res.fill(total, elapsed, &r.lat)
	res.Cost = costOf(window, total.committed)
	res.Errors, res.LastError = total.errs, r.lastError()
	res.RDMA = RDMA{Read: rd.Reads, Write: rd.Writes, CAS: rd.CAS, FAA: rd.FAA}
	res.Cohorts.Final = cl.cohorts()
	res.Migrations = Migrations{Count: cl.migrations.Load()}
	res.Manifest = cl.manifest()
	r.fillByType(res)
	res.Params.DriftEveryS, res.Params.Drifts = cfg.DriftEvery.Seconds(), r.drifts.Load()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := r.routeErr(); err != nil {
		return res, err
	}
	if p := r.driftFail.Load(); p != nil {
		return res, fmt.Errorf("bench: drift after %d drifts: %w", r.drifts.Load(), *p)
	}
	var mig *Migrations
	if res.Planner, mig, err = cl.plannerStatus(finalStatusTimeout); err != nil {
		return res, err
	}
	if mig != nil {
		res.Migrations = *mig
	}
	res.Migrations.LockRedirects = total.redirects
	if cfg.Mode != "mn-only" {
		var op actors.OwnerPathStats
		for _, n := range cl.nodes {
			op = op.Add(n.OwnerPathStats())
		}
		res.OwnerPath = &op
	}

	// Quiesce (planner first: no push after this), then check consistency
	// through one-sided reads.
	cl.close()
	checkStart := time.Now()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "checking %s consistency…\n", wl.Name())
	}
	res.addChecks(wl.Check(ctx, store.NewSnapshot(layout, base)))
	if cl.checker != nil {
		// SPEC §4's I1 and I4, over every activation and grant of the run
		// (package invariants); I2 and I3 show in the workload checks.
		res.Checks["invariants"] = cl.checker.Result().String()
	}
	res.Params.CheckS = time.Since(checkStart).Seconds()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "checked in %.1fs\n", res.Params.CheckS)
	}
	return res, nil
}

func sumStats(devs []rdma.Device) rdma.Stats {
	var s rdma.Stats
	for _, d := range devs {
		if st, ok := d.(statser); ok {
			s = s.Add(st.Stats())
		}
	}
	return s
}

func sample(at, over time.Duration, d snapshot) Sample {
	s := Sample{TS: at.Seconds()}
	if over > 0 {
		s.ThroughputTPS = float64(d.done()) / over.Seconds()
	}
	if n := d.done(); n > 0 {
		s.AtomicPerTxn = float64(d.atomics) / float64(n)
	}
	if locks := d.local + d.ownerRPC + d.mnCAS; locks > 0 {
		s.LocalHit = float64(d.local) / float64(locks)
	}
	if n := d.done(); n > 0 {
		s.RemoteLockOps = float64(d.ownerRPC+d.mnCAS) / float64(n)
	}
	return s
}

// cnThroughput is each node's finished transactions per second between
// two finishedPerNode counts taken over apart.
func cnThroughput(prev, cur []uint64, over time.Duration) []float64 {
	if over <= 0 || len(prev) != len(cur) {
		return nil
	}
	out := make([]float64, len(cur))
	for i := range cur {
		out[i] = float64(cur[i]-prev[i]) / over.Seconds()
	}
	return out
}

func (res *Result) fill(s snapshot, elapsed time.Duration, lat *Histogram) {
	res.DurationS = elapsed.Seconds()
	res.Committed = s.committed
	res.RolledBack = s.rolledBack
	res.Aborted = s.aborted
	res.Failed = s.failed
	n := s.done()
	if attempts := n + s.aborted; attempts > 0 {
		res.AbortRate = float64(s.aborted) / float64(attempts)
	}
	if elapsed > 0 {
		res.ThroughputTPS = float64(n) / elapsed.Seconds()
	}
	res.LatencyUs = Latency{P50: lat.Quantile(0.5), P99: lat.Quantile(0.99)}
	res.Locks = Locks{Total: s.local + s.ownerRPC + s.mnCAS, Local: s.local, OwnerRPC: s.ownerRPC, MNCAS: s.mnCAS}
	if n > 0 {
		res.AtomicPerTxn = float64(s.atomics) / float64(n)
		res.OwnerRPCPer = float64(s.ownerRPC) / float64(n)
		res.RemoteLockOps = float64(s.ownerRPC+s.mnCAS) / float64(n)
	}
	if res.Locks.Total > 0 {
		res.LocalHit = float64(s.local) / float64(res.Locks.Total)
	}
}

// addChecks records each check and the workload-level verdicts the JSON
// contract names: checks.tpcc_consistency and checks.bank_total.
func (res *Result) addChecks(cs []workload.CheckResult) {
	details := map[string]string{}
	groups := map[string]bool{}
	for _, c := range cs {
		verdict := "pass"
		if c.Err != nil {
			verdict = c.Err.Error()
		}
		details[c.Name] = verdict
		switch {
		case strings.HasPrefix(c.Name, "tpcc."):
			groups["tpcc_consistency"] = groups["tpcc_consistency"] || c.Err != nil
		case c.Name == "bank.total":
			groups["bank_total"] = c.Err != nil
		}
	}
	for g, failed := range groups {
		res.Checks[g] = "pass"
		if failed {
			res.Checks[g] = "fail"
		}
	}
	res.Checks["details"] = details
}

// runner drives the clients of one run.
type runner struct {
	cfg   Config
	wl    workload.Workload
	cl    *cluster
	nodes []*actors.Node
	// afterWarm: the sampler took a sample after the warm-up.
	afterWarm bool
	// routeFail holds the first OwnerMap a client's router refused (a map
	// the nodes installed must be routable: the run fails).
	routeFail atomic.Pointer[error]
	// drifts counts the drifts applied (DriftEvery); driftFail holds the
	// error that stopped them.
	drifts    atomic.Uint64
	driftFail atomic.Pointer[error]
	start     time.Time
	warmEnd   time.Time
	c         counters
	// lastErr holds the reason of the last attempt that ended in an error
	// or got no answer (counted in c.errs).
	lastErr atomic.Pointer[string]
	lat     Histogram
	mu      sync.Mutex
	byType  map[string]*TypeStats
}

func (r *runner) client(id int, stop <-chan struct{}) {
	route := r.newRoute()
	closedLoop(r.wl.NewGenerator(r.cfg.Seed, id), r.cfg.Seed, id, r.cfg.Clients, r.cfg.RateTPS, stop,
		func(msg *messages.TxnSubmit, rng *rand.Rand) { r.execute(r.nodes[route(msg)], msg, rng, stop) })
}

// closedLoop runs client id (of clients) until stop closes or gen is
// exhausted (a trace without --loop): each transaction gets a unique id
// and the client's name and goes to run, which returns once it is
// finished; with rateTPS > 0 the clients together start rateTPS
// transactions a second (open-loop pacing, each client its share).
func closedLoop(gen workload.Generator, seed uint64, id, clients int, rateTPS float64, stop <-chan struct{},
	run func(*messages.TxnSubmit, *rand.Rand)) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)+1))
	var interval time.Duration
	if rateTPS > 0 {
		interval = time.Duration(float64(time.Second) * float64(clients) / rateTPS)
	}
	next := time.Now()
	for seq := uint64(1); ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-stop:
					return
				case <-time.After(d):
				}
			}
			next = next.Add(interval)
		}
		msg := gen.Next()
		if msg == nil {
			return
		}
		msg.TxnId = uint64(id+1)<<40 | seq
		msg.Client = fmt.Sprintf("client-%d", id)
		run(msg, rng)
	}
}

// newRoute returns one client's routing: the rule's static placement of the
// transaction's home partition (mn-only, static), or the client's own
// AffinityRouter over its copy of the newest OwnerMap the nodes installed
// (hash, aura), scoring nodes by the write key groups the transaction's
// footprint predicts; with no map yet it routes by the static placement.
func (r *runner) newRoute() func(*messages.TxnSubmit) int {
	rule, n := r.wl.Rule(), len(r.nodes)
	if r.cfg.Mode == "mn-only" || r.cfg.Mode == "static" {
		return func(msg *messages.TxnSubmit) int {
			if i := r.cl.static(rule.Home(msg)); i >= 0 && i < n {
				return i
			}
			return int(rule.Home(msg) % uint64(n))
		}
	}
	rt := r.cl.router()
	var kgs []uint64
	return func(msg *messages.TxnSubmit) int {
		if m := r.cl.published.Load(); m != nil {
			if e, ok := rt.Epoch(); !ok || m.Epoch > e {
				if err := rt.Install(m); err != nil {
					r.routeFail.CompareAndSwap(nil, &err)
				}
			}
		}
		kgs = kgs[:0]
		for _, ref := range r.wl.Footprint(msg).Writes {
			kgs = append(kgs, rule.KeyGroup(ref))
		}
		return rt.Route(kgs, nil, rule.Home(msg), nil).Node
	}
}

// drift calls d.Drift(1), d.Drift(2), … every DriftEvery until stop
// closes; an error stops drifting and fails the run.
func (r *runner) drift(d workload.Drifter, stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.DriftEvery)
	defer t.Stop()
	for epoch := 1; ; epoch++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if err := d.Drift(epoch); err != nil {
			r.driftFail.CompareAndSwap(nil, &err)
			return
		}
		r.drifts.Add(1)
	}
}

func (r *runner) routeErr() error {
	if p := r.routeFail.Load(); p != nil {
		return fmt.Errorf("bench: client router: %w", *p)
	}
	return nil
}

// execute runs one transaction to its final outcome on node, retrying
// aborts. An attempt that ends in an error (ERROR, MOVED) or gets no
// answer is retried with the same transaction id, as a client of a real
// cluster would (a node that finished it answers from its result cache or
// commit ledger instead of running it again), on the same node — an
// embedded run's nodes share one process, so another would not fare better
// — after embeddedRetryPause, at most maxErrorRetries times and not after
// the run is over; a refusal (REJECTED: the program cannot run) fails it
// at once.
func (r *runner) execute(node *actors.Node, msg *messages.TxnSubmit, rng *rand.Rand, stop <-chan struct{}) {
	r.attempts(msg, rng, r.cfg.MaxAttempts, func() (*messages.TxnResult, error) {
		return node.Submit(context.Background(), msg)
	}, retryErrors(stop))
}

// retryErrors is execute's answer to an attempt that neither committed,
// rolled back nor aborted, for one transaction.
func retryErrors(stop <-chan struct{}) func(*messages.TxnResult, error) afterError {
	errCount := 0
	return func(res *messages.TxnResult, err error) afterError {
		if errCount++; errCount > maxErrorRetries || (err == nil && res.GetOutcome() == messages.TxnOutcome_TXN_OUTCOME_REJECTED) {
			return fail
		}
		return retryAfter(embeddedRetryPause, stop)
	}
}

// retryAfter waits pause before a retry, or quits once stop closes (the
// run is over: the transaction is left uncounted).
func retryAfter(pause time.Duration, stop <-chan struct{}) afterError {
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-stop:
		return quit
	case <-t.C:
		return retry
	}
}

// maxErrorRetries bounds the retries of one transaction after errors in an
// embedded run: an error is a timeout on a loaded machine (an owner RPC's
// attempts, a memory-node request) or a fault, and either clears within a
// few tries or is the run's failure to report.
const maxErrorRetries = 3

// embeddedRetryPause is the wait before retrying a transaction after an
// error: long enough for a loaded node to catch up, short against a run.
const embeddedRetryPause = 10 * time.Millisecond

// afterError is what attempts does after an attempt that neither
// committed, rolled back nor aborted.
type afterError int

const (
	fail  afterError = iota // count the transaction failed
	retry                   // try again (within the attempts)
	quit                    // stop: the run is over (not counted)
)

// errRunOver, from an attempts submit function: the run is over; the
// transaction is left unfinished and uncounted.
var errRunOver = errors.New("bench: run over")

// attempts runs one transaction to its final outcome: submit runs one
// attempt (errRunOver: the run is over); aborts are retried
// with jittered exponential backoff (20 µs doubling to 2 ms), other
// outcomes go to onError; maxAttempts bounds the attempts. Counters of
// every answered attempt are counted, the latency of transactions that
// finish after the warm-up recorded.
func (r *runner) attempts(msg *messages.TxnSubmit, rng *rand.Rand, maxAttempts int,
	submit func() (*messages.TxnResult, error), onError func(*messages.TxnResult, error) afterError) {
	kind := TxnType(msg)
	start := time.Now()
	backoff := 20 * time.Microsecond
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		msg.Attempt = uint32(attempt)
		res, err := submit()
		if errors.Is(err, errRunOver) {
			return
		}
		after := time.Now().After(r.warmEnd)
		if res != nil {
			r.count(res.GetCounters())
			if after {
				r.countType(kind, res)
			}
		}
		switch {
		case err == nil && res.Outcome == messages.TxnOutcome_TXN_OUTCOME_COMMITTED:
			r.c.committed.Add(1)
		case err == nil && res.Outcome == messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK:
			r.c.rolledBack.Add(1)
		case err == nil && res.Outcome == messages.TxnOutcome_TXN_OUTCOME_ABORTED:
			r.c.aborted.Add(1)
			time.Sleep(time.Duration(rng.Int64N(int64(backoff)) + 1))
			backoff = min(2*backoff, 2*time.Millisecond)
			continue
		default:
			r.noteError(msg, res, err)
			switch onError(res, err) {
			case retry:
				continue
			case quit:
				return
			}
			r.c.failed.Add(1)
			return
		}
		if after {
			r.lat.Record(uint64(time.Since(start).Microseconds()))
		}
		return
	}
	r.c.failed.Add(1)
}

// noteError counts an attempt of msg that ended in an error (or got no
// answer) and keeps why: a run with errors says what the last one was
// (Result.LastError), so an error seen once on a loaded machine can be
// explained afterwards.
func (r *runner) noteError(msg *messages.TxnSubmit, res *messages.TxnResult, err error) {
	r.c.errs.Add(1)
	if !time.Now().After(r.warmEnd) {
		return // the result's figures are after the warm-up; so is its last error
	}
	why := fmt.Sprintf("txn %d (%s) attempt %d: ", msg.GetTxnId(), TxnType(msg), msg.GetAttempt())
	if err != nil {
		why += err.Error()
	} else {
		why += fmt.Sprintf("%s on %s: %s", res.GetOutcome(), res.GetNode(), res.GetError())
	}
	r.lastErr.Store(&why)
}

// lastError is the reason of the last attempt that ended in an error, ""
// if none did.
func (r *runner) lastError() string {
	if p := r.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// fillByType derives the per-type figures and puts them in res.
func (r *runner) fillByType(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, ts := range r.byType {
		if n := ts.Committed + ts.RolledBack; n > 0 {
			ts.AtomicPerTxn = float64(ts.mnAtomics) / float64(n)
			ts.LocksPerTxn = float64(ts.locks) / float64(n)
		}
		if ts.Committed > 0 {
			ts.LocksPerCommit = float64(ts.commitLocks) / float64(ts.Committed)
		}
		res.ByType[name] = ts
	}
}

func (r *runner) count(c *messages.TxnCounters) {
	r.c.local.Add(c.GetLocksLocal())
	r.c.ownerRPC.Add(c.GetLocksOwnerRpc())
	r.c.mnCAS.Add(c.GetLocksMnCas())
	r.c.atomics.Add(c.GetMnCas() + c.GetMnFaa())
	r.c.redirects.Add(c.GetLockRedirects())
}

func (r *runner) countType(kind string, res *messages.TxnResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.byType[kind]
	if ts == nil {
		ts = &TypeStats{}
		r.byType[kind] = ts
	}
	c := res.GetCounters()
	locks := c.GetLocksLocal() + c.GetLocksOwnerRpc() + c.GetLocksMnCas()
	ts.mnAtomics += c.GetMnCas() + c.GetMnFaa()
	ts.locks += locks
	switch res.Outcome {
	case messages.TxnOutcome_TXN_OUTCOME_COMMITTED:
		ts.Committed++
		ts.commitLocks += locks
	case messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK:
		ts.RolledBack++
	case messages.TxnOutcome_TXN_OUTCOME_ABORTED:
		ts.Aborted++
	}
}

// TxnType names a transaction's type for per-type figures.
func TxnType(msg *messages.TxnSubmit) string {
	switch msg.Body.(type) {
	case *messages.TxnSubmit_NewOrder:
		return "new_order"
	case *messages.TxnSubmit_Payment:
		return "payment"
	case *messages.TxnSubmit_OrderStatus:
		return "order_status"
	case *messages.TxnSubmit_Delivery:
		return "delivery"
	case *messages.TxnSubmit_StockLevel:
		return "stock_level"
	case *messages.TxnSubmit_Kv:
		return "kv"
	case *messages.TxnSubmit_BankTransfer:
		return "bank_transfer"
	case *messages.TxnSubmit_BankAudit:
		return "bank_audit"
	}
	return "unknown"
}
