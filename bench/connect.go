package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
)

// ConnectConfig configures a run against a running cluster (Connect).
type ConnectConfig struct {
	// Mode names the cluster's mode in the result. Default "aura" (what
	// `aura node` runs: the planner learns ownership).
	Mode string
	// Workload is the configured workload: the same flags the nodes were
	// started with, or the tables will not match.
	Workload workload.Workload
	// URL is the parsed connection string.
	URL client.URL
	// Listen is this process's protoactor remote address, HOST:PORT, which
	// the nodes answer to. Default "127.0.0.1:0" (loopback clusters); give
	// an address the nodes can reach otherwise.
	Listen string
	// TLS, when set, makes the client's remote endpoint mutual TLS (the
	// cluster's nodes run with it: actors.RemoteConfig.TLS). Unused with
	// System.
	TLS *tls.Config
	// System, when set, is the actor system (with a remote endpoint
	// started: actors.StartRemote) the client submits from; Listen is then
	// unused. A process has one remote endpoint (protoactor's gRPC logger
	// is process-wide), so a caller that has one passes it. nil: Connect
	// starts its own on Listen and stops it at the end.
	System *actor.ActorSystem
	// Client adjusts the client's configuration (from
	// client.DefaultConfig) before it starts; nil: the defaults.
	Client func(*client.Config)
	// Dial, when set, opens a device on the cluster's memory node: the
	// tables are loaded first (unless SkipLoad or already loaded) and the
	// workload's consistency checks run after the run. nil: no loading,
	// no checks (checks.skipped says so).
	Dial func(ctx context.Context) (rdma.Device, error)
	// MN names the memory node in the results.
	MN string
	// SkipLoad: the tables are loaded already (checked when Dial is set).
	SkipLoad bool
	// APIWait bounds how long the run waits for the management API to
	// answer once before it starts (nodes started with --wait-load join
	// only after the tables are loaded, which this run may be doing).
	// Default 30 s; negative: no wait. Past it the run starts on the URL's
	// node alone and the client keeps refreshing.
	APIWait time.Duration
	// Clients is the number of closed-loop clients. Default 8 per worker
	// the topology lists at the start.
	Clients int
	// NodeMetrics lists the management APIs (HOST:PORT, aura node --http)
	// whose /metrics the run reads process_cpu_seconds_total from at both
	// ends of the measured window, for Result.NodeCPUUsPerTxn. Default: the
	// URL's http_addr alone (the topology names no node's API): give every
	// node's for the whole cluster's CPU. A node that does not answer
	// leaves the figure out, with a progress line saying which.
	NodeMetrics []string
	// Duration, Warmup, Seed, RateTPS, MaxAttempts, Progress and
	// ProgressEvery mean what they mean in Config, with the same defaults.
	Duration      time.Duration
	Warmup        time.Duration
	Seed          uint64
	RateTPS       float64
	MaxAttempts   int
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (c *ConnectConfig) defaults() {
	if c.Mode == "" {
		c.Mode = "aura"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
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
	if c.APIWait == 0 {
		c.APIWait = 30 * time.Second
	}
	if len(c.NodeMetrics) == 0 && c.URL.HTTPAddr != "" {
		c.NodeMetrics = []string{c.URL.HTTPAddr}
	}
}

// Validate reports every problem at once.
func (c *ConnectConfig) Validate() error {
	var errs []error
	if c.Workload == nil {
		errs = append(errs, errors.New("bench: no workload"))
	}
	if c.URL.HTTPAddr == "" {
		errs = append(errs, errors.New("bench: no connection string (client.ParseURL)"))
	}
	if c.Clients < 0 || c.Clients > 65536 {
		errs = append(errs, fmt.Errorf("bench: clients %d, want 1..65536 (0: default)", c.Clients))
	}
	errs = append(errs, validatePacing(c.Duration, c.Warmup, c.RateTPS, c.MaxAttempts)...)
	if c.ProgressEvery <= 0 {
		errs = append(errs, fmt.Errorf("bench: progress interval %v must be positive", c.ProgressEvery))
	}
	return errors.Join(errs...)
}

// Connect runs cfg.Workload from closed-loop clients against a running
// cluster of `aura node` processes for Warmup+Duration, each transaction
// submitted through a client.Client (affinity routing over the cluster's
// OwnerMap, static fallback), and returns the result in Run's schema. Lock
// paths and atomics come from the nodes' per-transaction counters, summed
// over every attempt (rdma{} too: the verbs the transactions' coordinators
// posted). What the cluster's planner does is not visible from here:
// cohorts and manifest are those of the map the client routes by, and
// migrations and planner stay empty.
func Connect(ctx context.Context, cfg ConnectConfig) (*Result, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wl := cfg.Workload
	res := &Result{Mode: cfg.Mode, Workload: wl.Name(), Checks: map[string]any{}, ByType: map[string]*TypeStats{},
		Params: Params{Seed: cfg.Seed, WarmupS: cfg.Warmup.Seconds(), MN: cfg.MN, RateTPS: cfg.RateTPS}}

	var dev rdma.Device
	var layout *store.Layout
	if cfg.Dial != nil {
		var err error
		if dev, err = cfg.Dial(ctx); err != nil {
			return nil, fmt.Errorf("bench: memory node: %w", err)
		}
		defer dev.Close()
		if layout, err = store.Create(ctx, dev, wl.Schema()); err != nil {
			return nil, err
		}
		if err := loadForConnect(ctx, cfg, dev, layout, res); err != nil {
			return nil, err
		}
	}

	sys := cfg.System
	if sys == nil {
		sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		}))
		defer sys.Shutdown()
		rcfg := actors.DefaultRemoteConfig(cfg.Listen)
		rcfg.TLS = cfg.TLS
		rem, err := actors.StartRemote(sys, rcfg)
		if err != nil {
			return nil, fmt.Errorf("bench: client endpoint: %w", err)
		}
		defer rem.Shutdown()
	}
	ccfg := client.DefaultConfig(cfg.URL, wl)
	if cfg.Client != nil {
		cfg.Client(&ccfg)
	}
	cl, err := client.New(ctx, ccfg, sys)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := awaitAPI(ctx, cl, cfg); err != nil {
		return nil, err
	}
	st := cl.Stats()
	if !st.FromAPI && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "management API %s did not answer (%s): routing to %s only until it does\n",
			cfg.URL.HTTPAddr, st.LastRefreshError, cfg.URL.Addr())
	}
	clients := cfg.Clients
	if clients == 0 {
		clients = 8 * st.Workers
	}
	res.CNs, res.Params.Clients = st.Workers, clients
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "connected to %s: %d workers, OwnerMap epoch %d; %d clients\n",
			cfg.URL.HTTPAddr, st.Workers, st.Epoch, clients)
	}

	r := &connectRunner{cfg: cfg, cl: cl, runner: runner{byType: map[string]*TypeStats{}}}
	r.start = time.Now()
	r.warmEnd = r.start.Add(cfg.Warmup)
	end := r.warmEnd.Add(cfg.Duration)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(ctx, c, clients, stop)
		}()
	}
	var warm snapshot
	var warmRDMA rdma.Stats
	warmUse, warmNodes := takeUsage(), r.nodeCPU(ctx)
	warmTaken := cfg.Warmup == 0
	prev, lastT := snapshot{}, r.start
	tick := time.NewTicker(cfg.ProgressEvery)
	func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if !warmTaken && !now.Before(r.warmEnd) {
					warm, warmRDMA, warmTaken = r.c.snap(), r.rdma(), true
					warmUse, warmNodes = takeUsage(), r.nodeCPU(ctx)
				}
				cur := r.c.snap()
				s := sample(now.Sub(r.start), now.Sub(lastT), cur.sub(prev))
				cs := cl.Stats()
				s.Cohorts = cs.Cohorts
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
					fmt.Fprintf(cfg.Progress, "[%s %6.1fs] committed %d  tps %.0f  atomics/txn %.2f  local %.1f%%  aborts %d  cohorts %d  epoch %d  workers %d%s\n",
						cfg.Mode, s.TS, cur.done(), s.ThroughputTPS, s.AtomicPerTxn, 100*s.LocalHit, cur.aborted, cs.Cohorts, cs.Epoch, cs.Workers, phase)
				}
				if !now.Before(end) {
					return
				}
			}
		}
	}()
	close(stop)
	wg.Wait()
	window, endNodes := takeUsage().sub(warmUse), r.nodeCPU(ctx)
	elapsed := time.Since(r.warmEnd)
	if !warmTaken {
		warmRDMA = r.rdma()
		if cfg.Warmup > 0 {
			elapsed = time.Since(r.start)
		}
	}
	total := r.c.snap().sub(warm)
	rd := r.rdma().Sub(warmRDMA)
	res.fill(total, elapsed, &r.lat)
	res.Cost = costOf(window, total.committed)
	res.NodeCPUUsPerTxn = nodeCPUPerTxn(warmNodes, endNodes, total.committed)
	if res.NodeCPUUsPerTxn == nil && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "node CPU per transaction: not every /metrics of %v answered at both ends of the window\n", cfg.NodeMetrics)
	}
	res.Errors, res.LastError = total.errs, r.lastError()
	res.RDMA = RDMA{Read: rd.Reads, Write: rd.Writes, CAS: rd.CAS, FAA: rd.FAA}
	cs := cl.Stats()
	res.CNs = cs.Workers
	res.Cohorts.Final = cs.Cohorts
	res.Manifest = Manifest{Epoch: cs.Epoch, Bytes: uint64(cs.ManifestBytes)}
	r.fillByType(res)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "client: %d routed by the OwnerMap, %d by the static fallback; %d unreachable, %d refused, %d submissions without a usable answer; %d refreshes (%d failed)\n",
			cs.Overlay, cs.Fallback, cs.Unreachable, cs.Refused, r.c.errs.Load(), cs.Refreshes, cs.RefreshErrors)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if r.c.committed.Load()+r.c.rolledBack.Load() == 0 && r.c.errs.Load() > 0 {
		return res, fmt.Errorf("%w: %d submissions got no usable answer (last: %v); are the nodes running and is --connect's address one of them?",
			ErrNothingCommitted, r.c.errs.Load(), r.lastError())
	}
	if dev == nil {
		res.Checks["skipped"] = "no memory node given"
		return res, nil
	}
	// Every client has its final answer: the cluster is idle (as far as
	// this run goes) and the checks read a quiet memory node.
	checkStart := time.Now()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "checking %s consistency…\n", wl.Name())
	}
	res.addChecks(wl.Check(ctx, store.NewSnapshot(layout, dev)))
	res.Params.CheckS = time.Since(checkStart).Seconds()
	return res, nil
}

// nodeCPU reads process_cpu_seconds_total of every cfg.NodeMetrics API,
// nil if any of them did not answer.
func (r *connectRunner) nodeCPU(ctx context.Context) []float64 {
	out := make([]float64, len(r.cfg.NodeMetrics))
	for i, addr := range r.cfg.NodeMetrics {
		api := &client.API{Addr: addr, Token: r.cfg.URL.Token}
		v, err := api.ProcessCPUSeconds(ctx)
		if err != nil {
			return nil
		}
		out[i] = v
	}
	return out
}

// nodeCPUPerTxn is the nodes' CPU per committed transaction, in
// microseconds, between two nodeCPU readings (nil when either is missing or
// nothing committed).
func nodeCPUPerTxn(from, to []float64, committed uint64) *float64 {
	if from == nil || to == nil || len(from) != len(to) || committed == 0 {
		return nil
	}
	var s float64
	for i := range to {
		s += to[i] - from[i]
	}
	v := s * 1e6 / float64(committed)
	return &v
}

// apiPollEvery is how often a run waiting for the management API asks.
const apiPollEvery = 250 * time.Millisecond

// awaitAPI waits up to cfg.APIWait for the management API to answer once.
func awaitAPI(ctx context.Context, cl *client.Client, cfg ConnectConfig) error {
	deadline := time.Now().Add(cfg.APIWait)
	for said := false; !cl.Stats().FromAPI && time.Now().Before(deadline); {
		if !said && cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "waiting up to %v for the management API at %s…\n", cfg.APIWait, cfg.URL.HTTPAddr)
			said = true
		}
		t := time.NewTimer(apiPollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		_ = cl.Refresh(ctx) // an error leaves FromAPI false: try again
	}
	return nil
}

// loadForConnect loads the tables unless told not to or already loaded
// (the nodes need loaded tables to start, so a running cluster normally
// finds them loaded), and checks they are loaded otherwise.
func loadForConnect(ctx context.Context, cfg ConnectConfig, dev rdma.Device, layout *store.Layout, res *Result) error {
	if !cfg.SkipLoad {
		start := time.Now()
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "loading %s tables…\n", cfg.Workload.Name())
		}
		loaded, err := store.LoadOnce(ctx, layout, dev, func(ctx context.Context, l *store.Loader) error {
			return cfg.Workload.Load(ctx, l)
		})
		switch {
		case errors.Is(err, store.ErrAlreadyLoaded):
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "tables already loaded\n")
			}
		case err != nil:
			return fmt.Errorf("bench: load: %w", err)
		default:
			res.Params.Loaded, res.Params.LoadS = loaded, time.Since(start).Seconds()
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "loaded %d records in %.1fs\n", loaded, res.Params.LoadS)
			}
		}
	}
	if err := store.CheckLoaded(ctx, dev); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// connectRunner drives the clients of a Connect run; it counts with the
// embedded runner's counters, histogram and per-type figures.
type connectRunner struct {
	runner
	cfg ConnectConfig
	cl  *client.Client
	// verbs the transactions report (every attempt)
	reads, writes, cas, faa atomic.Uint64
}

// ErrNothingCommitted is returned (wrapped) by Connect when no submission
// got an answer that committed: the cluster is down, not loaded, or
// refuses every transaction. The result is still returned.
var ErrNothingCommitted = errors.New("bench: no transaction committed on the cluster")

func (r *connectRunner) rdma() rdma.Stats {
	return rdma.Stats{Reads: r.reads.Load(), Writes: r.writes.Load(), CAS: r.cas.Load(), FAA: r.faa.Load()}
}

func (r *connectRunner) client(ctx context.Context, id, clients int, stop <-chan struct{}) {
	closedLoop(r.cfg.Workload.NewGenerator(r.cfg.Seed, id), r.cfg.Seed, id, clients, r.cfg.RateTPS, stop,
		func(msg *messages.TxnSubmit, rng *rand.Rand) { r.execute(ctx, msg, rng, stop) })
}

// connectRetryPause is the wait after a submission that got no usable
// answer from any node (all unreachable or refusing): long enough for the
// client's on-demand refresh (100 ms apart at most) to see a new topology
// within a few retries.
const connectRetryPause = 20 * time.Millisecond

// execute runs one transaction to its final outcome: aborts are retried
// with the same transaction id (a node answers a finished id from its
// result cache instead of running it again) and jittered exponential
// backoff (20 µs doubling to 2 ms), submissions without a usable answer
// after connectRetryPause (until the run stops); MaxAttempts bounds both
// together.
func (r *connectRunner) execute(ctx context.Context, msg *messages.TxnSubmit, rng *rand.Rand, stop <-chan struct{}) {
	r.attempts(msg, rng, r.cfg.MaxAttempts, func() (*messages.TxnResult, error) {
		res, _, err := r.cl.Submit(ctx, msg)
		if ctx.Err() != nil {
			return nil, errRunOver
		}
		if res != nil {
			c := res.GetCounters()
			r.reads.Add(c.GetRdmaReads())
			r.writes.Add(c.GetRdmaWrites())
			r.cas.Add(c.GetMnCas())
			r.faa.Add(c.GetMnFaa())
		}
		return res, err
	}, func(*messages.TxnResult, error) afterError {
		// Giving up at the end of the run is safe: an unanswered or
		// failed submission has not committed (ERROR) or will finish on
		// its node on its own, and the checks read committed state.
		return retryAfter(connectRetryPause, stop)
	})
}
