package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/bench"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
	htmlreport "github.com/aura-runtime/aura/report"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

type benchFlags struct {
	workloadFlags
	sec         securityFlags
	modes       []string
	mn          string
	mnSize      string
	costModel   bool
	cns         int
	clients     int
	coords      int
	duration    time.Duration
	warmup      time.Duration
	seed        uint64
	rate        float64
	maxAttempts int
	jsonPath    string
	quiet       bool
	cpuProfile  string
	memProfile  string
	winProfile  string
	execTrace   string
	plannerTick time.Duration
	connect     string
	skipLoad    bool
	listen      string
	nodeMetrics []string
	driftEvery  time.Duration
	reportDir   string
}

func newBenchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a workload on an embedded cluster (or a running one: --connect) and report atomics, locality and throughput",
		Long: `bench loads a workload into a memory node, runs it from closed-loop clients
through N compute nodes (actor systems with coordinator and atomic actors), and
reports throughput, latency, lock paths and remote atomics per transaction,
then checks the workload's consistency conditions.

By default everything runs in this process on an emulated memory node; with
--mn it uses a separate 'aura mn' over TCP. The compute nodes always run in
this process and reach each other's owner tables by direct calls (no network
between them). Transactions finished during --warmup are left out of the
summary figures; the timeline keeps them.

Modes (--mode, a comma list: run one after another on the same seed, each on
a freshly loaded memory node, and compared in one table):
  mn-only  every lock by a memory-node CAS (FORD/Motor-style); transactions
           routed by the rule's static placement of their home partition
           (TPC-C: warehouse % N, otherwise rendezvous hashing).
  static   one cohort per partition value of the rule (TPC-C: all key groups
           of warehouse w), owned by its static node (w % N, otherwise
           rendezvous hashing); routing by the same rule. One fixed OwnerMap
           pushed to every node before the run; no planner.
  hash     one cohort per key group, placed by rendezvous hashing of the key
           group; one fixed OwnerMap, no planner; routing by the
           AffinityRouter (the node owning most of the write set).
  aura     the planner actor learns cohorts and owners from the nodes'
           profiler heartbeats every --planner-tick and publishes OwnerMaps;
           clients route with the AffinityRouter over their copy of the
           newest map. It starts from an empty map (all locks by MN CAS):
           use a warm-up of a few seconds.
The oracle mode exists in 'aura sim' only. The table's "tps vs mn-only"
column appears when mn-only is among the modes. With --mn only one mode may
run (a second would find the tables loaded and modified): restart 'aura mn'
between modes.

With --connect aura://HOST:PORT/DB?http_addr=HOST:PORT no embedded cluster
starts: the clients drive a running cluster of 'aura node' processes.
HOST:PORT is a node's remote address (--listen), http_addr a node's
management API (aura node --http). Each transaction goes, as an actor
message, to the node the AffinityRouter chooses over the client's copy of
the cluster's OwnerMap (re-read every second, and at once when a node does
not answer or refuses), or by the workload's static fallback while the map
says nothing. The workload flags must be those the nodes run with (TPC-C
needs --warehouses). --mn names the cluster's memory node: the tables are
loaded first unless already loaded or --skip-load is given, and the
workload's consistency checks run afterwards; without --mn (allowed only
with --skip-load) the checks are skipped. --mode is a label for the
cluster's mode (one mode, default aura); --cns and the embedded cluster's
flags (--mn-size, --cost-model, --coordinators, --planner-tick) do not
apply. --clients defaults to 8 per node the topology lists.

With --drift-every D the workload's access pattern drifts every D of wall
time during each mode's run, warm-up included (epoch 1, 2, …; every mode
starts from epoch 0), so the planner has to move ownership under load.
Workloads that can drift: ` + strings.Join(driftWorkloads, ", ") + `. bank drifts its branches: the
key groups are re-dealt among branches (groups of --branch-kgs key groups,
4 by default when drifting) that transfers mostly stay in (--branch-local),
with hot branches by --branch-theta, so both which accounts transfer to each
other and which are hot change; money is conserved across drifts. tenant
re-deals its tenants' key groups. Not with --connect.

With --report DIR the results also go to a self-contained HTML report,
written after every mode ran: DIR/index.html (the command line, this
machine, a table of each mode's headline figures with ratios against
mn-only, every run's parameters) and PNG plots beside it (throughput,
atomics/txn, LOCAL hit, remote lock ops/txn, cohorts and migrations over
time, one line per mode; for aura a heat map of sampled key groups' owners
over time), plus DIR/runs.json. It opens offline. DIR is created; an
existing DIR must be empty or hold an earlier report, whose index.html,
runs.json and plot-*.png are replaced (other files stay); any other DIR is
refused before the run starts. See docs/report.md.

Progress (unless --quiet) goes to standard error: on a terminal one live
line per mode rewrites itself (elapsed time, committed, atomics/txn and
LOCAL hit of the last interval); otherwise a plain line every second.`,
		Example: `  aura bench
  aura bench --workload tpcc --mode mn-only,static,hash,aura --duration 20s --warmup 5s
  aura bench --workload tpcc --mode mn-only --duration 10s --json out.json
  aura bench --workload tpcc --mode mn-only,static,aura --duration 10s --report out/
  aura bench --workload bank --duration 5s
  aura bench --workload bank --mode aura --drift-every 2s --duration 20s --json out.json
  aura bench --mn 127.0.0.1:7070 --workload tpcc --warehouses 8
  aura bench --connect 'aura://127.0.0.1:8001/tpcc?http_addr=127.0.0.1:8081' --mn 127.0.0.1:7070 --warehouses 12 --expected-new-orders 1000000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringSliceVar(&f.modes, "mode", []string{"mn-only"}, "lock/placement modes to run one after another, comma separated ("+strings.Join(bench.Modes, ", ")+"); with --connect one mode, the cluster's (default aura)")
	fl.DurationVar(&f.plannerTick, "planner-tick", bench.DefaultPlannerTick, "aura mode: the planner's period, and every mode's profiler heartbeat period")
	fl.StringVar(&f.mn, "mn", "", "address HOST:PORT of a running 'aura mn'; empty runs an embedded memory node (with --connect: the cluster's memory node, for loading and checks)")
	f.sec.addMNToken(fl)
	fl.StringVar(&f.mnSize, "mn-size", "8GiB", "memory of the embedded memory node (suffixes KiB, MiB, GiB); pages are only touched as used. Tables are sized for the whole run: TPC-C at 16 warehouses for 190s needs more than 8GiB")
	fl.BoolVar(&f.costModel, "cost-model", false, "apply the NIC cost model (verb latency, 512-slot atomic serialisation) to the embedded memory node")
	fl.IntVar(&f.cns, "cns", 4, "number of compute nodes")
	fl.IntVar(&f.clients, "clients", 0, "closed-loop clients (default 8 per compute node)")
	fl.IntVar(&f.coords, "coordinators", 8, "coordinator actors per compute node (transactions a node runs at once)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measured run time, after the warm-up")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "warm-up time, left out of the summary figures")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the transaction generators (same seed, same transactions)")
	fl.Float64Var(&f.rate, "rate", 0, "open-loop pacing: total transactions per second over all clients (0 = closed loop)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 1000, "attempts per transaction before a client reports it failed")
	fl.StringVar(&f.jsonPath, "json", "", "write the results as JSON to this file ({\"runs\":[…]} when several modes run)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	fl.StringVar(&f.reportDir, "report", "", "after the run, write an HTML report with plots to this directory (created; an existing one must be empty or hold an earlier report)")
	fl.StringVar(&f.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file (inspect with 'go tool pprof')")
	fl.StringVar(&f.winProfile, "window-cpu-profile", "", "write a Go CPU profile of each mode's measured window only (after the warm-up, before the checks; the load left out) to this file; with several modes to FILE.MODE")
	fl.StringVar(&f.memProfile, "mem-profile", "", "write a Go allocation profile of the whole run to this file when it ends (inspect with 'go tool pprof -sample_index=alloc_objects'; focus on occ or actors to leave the load and the checks out)")
	fl.StringVar(&f.execTrace, "exec-trace", "", "write a Go execution trace of the whole run to this file (inspect with 'go tool trace': goroutines waiting for a processor, GC pauses); it grows by megabytes a second")
	fl.StringVar(&f.connect, "connect", "", "drive a running cluster instead of an embedded one: aura://HOST:PORT/DB?http_addr=HOST:PORT (a node's remote address and its management API)")
	fl.BoolVar(&f.skipLoad, "skip-load", false, "with --connect: do not load the tables (they are loaded already); needed to run without --mn")
	fl.DurationVar(&f.driftEvery, "drift-every", 0, "drift the workload's access pattern at this wall-time period during each run, warm-up included ("+strings.Join(driftWorkloads, ", ")+"; 0 = never)")
	f.sec.addTLS(fl)
	fl.StringSliceVar(&f.nodeMetrics, "node-metrics", nil, "with --connect: the nodes' management APIs (HOST:PORT, comma separated) whose /metrics give the nodes' CPU per transaction (node_cpu_us_per_txn); default: the connection string's http_addr alone")
	fl.StringVar(&f.listen, "client-listen", "127.0.0.1:0", "with --connect: this process's protoactor remote address, HOST:PORT, which the nodes answer to (port 0: a free port)")
	return cmd
}

// startProfiles writes a Go CPU profile to cpuPath and an execution trace
// to tracePath (each: none when empty) until the returned function is
// called.
func startProfiles(cpuPath, tracePath, memPath string) (func(), error) {
	var stops []func()
	stopAll := func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}
	for _, p := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{cpuPath, pprof.StartCPUProfile, pprof.StopCPUProfile}, {tracePath, trace.Start, trace.Stop},
		{memPath, func(io.Writer) error { return nil }, nil}} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			stopAll()
			return nil, err
		}
		if err := p.start(f); err != nil {
			f.Close()
			stopAll()
			return nil, err
		}
		if p.stop == nil {
			// The allocation profile is cumulative: written when the run
			// ends, it holds every allocation sampled since the start.
			stops = append(stops, func() { pprof.Lookup("allocs").WriteTo(f, 0); f.Close() })
			continue
		}
		stops = append(stops, func() { p.stop(); f.Close() })
	}
	return stopAll, nil
}

// windowProfile returns a bench.Config.OnWindow that profiles the CPU
// from the window's start to its end into path. Go runs one CPU profile
// at a time: with the whole run's (--cpu-profile) on, it refuses.
func windowProfile(path string, wholeRun bool) (func(bool), error) {
	if wholeRun {
		return nil, errors.New("--window-cpu-profile and --cpu-profile cannot both be given (Go runs one CPU profile at a time)")
	}
	var out *os.File
	return func(start bool) {
		if start {
			f, err := os.Create(path)
			if err != nil {
				fmt.Fprintf(os.Stderr, "--window-cpu-profile: %v\n", err)
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(os.Stderr, "--window-cpu-profile: %v\n", err)
				f.Close()
				return
			}
			out = f
			return
		}
		if out != nil {
			pprof.StopCPUProfile()
			out.Close()
			out = nil
		}
	}, nil
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	if f.connect != "" {
		return runBenchConnect(cmd, f)
	}
	for _, name := range []string{"skip-load", "client-listen", "tls-cert", "tls-key", "tls-ca"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies only with --connect", name)
		}
	}
	f.workloadFlags.drifting = f.driftEvery > 0
	wl, clients, err := f.workloadFlags.forRun(f.cns, f.clients, &f.seed, f.duration+f.warmup)
	if err != nil {
		return err
	}
	if err := checkDrift(wl, f.driftEvery, f.duration+f.warmup); err != nil {
		return err
	}
	if _, err := f.sec.token(); err != nil {
		return err
	}
	if f.reportDir != "" {
		if err := htmlreport.CheckDir(f.reportDir); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	stopProfile, err := startProfiles(f.cpuProfile, f.execTrace, f.memProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// A later mode with --mn would find the tables loaded and modified.
	if f.mn != "" && len(f.modes) > 1 {
		return errors.New("several modes against one --mn memory node are not supported: restart 'aura mn' between modes")
	}
	for _, m := range f.modes {
		if !slices.Contains(bench.Modes, strings.TrimSpace(m)) {
			return fmt.Errorf("--mode %q: not a mode (available: %s)", m, strings.Join(bench.Modes, ", "))
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress, endProgress := liveProgress(progressWriter(cmd, f.quiet))
	defer endProgress()
	var results []*bench.Result
	for _, mode := range f.modes {
		dial, label, cleanup, err := f.memoryNode()
		if err != nil {
			return err
		}
		cfg := bench.Config{Mode: strings.TrimSpace(mode), Workload: wl, Dial: dial, MN: label, CNs: f.cns,
			Clients: clients, CoordinatorsPerCN: f.coords, Duration: f.duration, Warmup: f.warmup,
			Seed: f.seed, RateTPS: f.rate, MaxAttempts: f.maxAttempts, Progress: progress, PlannerTick: f.plannerTick,
			DriftEvery: f.driftEvery}
		if f.winProfile != "" {
			path := f.winProfile
			if len(f.modes) > 1 {
				path += "." + cfg.Mode
			}
			var winErr error
			cfg.OnWindow, winErr = windowProfile(path, f.cpuProfile != "")
			if winErr != nil {
				return winErr
			}
		}
		res, err := bench.Run(ctx, cfg)
		cleanup()
		// The embedded memory node of this mode is garbage now: return its
		// pages before the next mode loads its own (the tables of TPC-C at
		// 16 warehouses take gigabytes).
		debug.FreeOSMemory()
		if err != nil {
			if errors.Is(err, rdma.ErrOutOfMemory) {
				// The tables are sized for the run (TPC-C's grow with
				// --duration and the rate): say which knob helps.
				where := "raise --mn-size (now " + f.mnSize + ")"
				if f.mn != "" {
					where = "restart 'aura mn' with a larger --size"
				}
				return fmt.Errorf("mode %s: %w (the tables are sized for the whole run: %s, or shorten --duration)", mode, err, where)
			}
			return fmt.Errorf("mode %s: %w", mode, err)
		}
		res.Params.Workload = f.workloadFlags.config
		results = append(results, res)
	}
	endProgress()
	return report(cmd, f, results)
}

// report prints the results, writes them as JSON when asked, and fails on
// a failed check or failed transactions.
func report(cmd *cobra.Command, f *benchFlags, results []*bench.Result) error {
	printSummary(cmd.OutOrStdout(), results)
	if err := writeResultsJSON(f.jsonPath, results); err != nil {
		return err
	}
	// The report shows failed checks too: write it before failing on them.
	if err := writeReport(cmd, f.reportDir, f.quiet, results); err != nil {
		return err
	}
	for _, r := range results {
		for k, v := range r.Checks {
			if v == "fail" {
				return fmt.Errorf("mode %s: check %s failed (see checks.details)", r.Mode, k)
			}
		}
		if r.Failed > 0 {
			return fmt.Errorf("mode %s: %d transactions failed (last error: %s)", r.Mode, r.Failed, r.LastError)
		}
	}
	return nil
}

// runBenchConnect runs one mode against a running cluster (--connect).
func runBenchConnect(cmd *cobra.Command, f *benchFlags) error {
	u, err := client.ParseURL(f.connect)
	if err != nil {
		return fmt.Errorf("--connect: %w", err)
	}
	var errs []error
	mode := "aura"
	if cmd.Flags().Changed("mode") {
		if len(f.modes) != 1 {
			errs = append(errs, fmt.Errorf("--mode %s: --connect runs one mode, the cluster's (give one, e.g. --mode aura)", strings.Join(f.modes, ",")))
		} else if mode = strings.TrimSpace(f.modes[0]); !slices.Contains(bench.Modes, mode) {
			errs = append(errs, fmt.Errorf("--mode %q: not a mode (available: %s)", mode, strings.Join(bench.Modes, ", ")))
		}
	}
	for _, name := range []string{"cns", "mn-size", "cost-model", "coordinators", "planner-tick"} {
		if cmd.Flags().Changed(name) {
			errs = append(errs, fmt.Errorf("--%s does not apply with --connect: the running cluster's nodes are the compute nodes", name))
		}
	}
	if cmd.Flags().Changed("drift-every") {
		errs = append(errs, errors.New("--drift-every applies to the embedded cluster only, not with --connect"))
	}
	if f.mn == "" && !f.skipLoad {
		errs = append(errs, errors.New("--connect needs --mn (the cluster's memory node) to load the tables and check them afterwards; give --skip-load to run without it (no checks then)"))
	}
	if f.workloadFlags.name == "tpcc" && f.warehouses == 0 {
		errs = append(errs, errors.New("--connect with --workload tpcc needs --warehouses (the nodes' value)"))
	}
	if f.workloadFlags.name == "trace" && f.clients == 0 {
		errs = append(errs, errors.New("--connect with --workload trace needs --clients (the trace is split among them)"))
	}
	if f.reportDir != "" {
		if err := htmlreport.CheckDir(f.reportDir); err != nil {
			errs = append(errs, fmt.Errorf("--report: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wl, _, err := f.workloadFlags.forRun(max(1, f.cns), max(1, f.clients), &f.seed, f.duration+f.warmup)
	if err != nil {
		return err
	}
	stopProfile, err := startProfiles(f.cpuProfile, f.execTrace, f.memProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress, endProgress := liveProgress(progressWriter(cmd, f.quiet))
	defer endProgress()
	tlsCfg, err := f.sec.tls()
	if err != nil {
		return err
	}
	cfg := bench.ConnectConfig{Mode: mode, Workload: wl, URL: u, Listen: f.listen, SkipLoad: f.skipLoad, TLS: tlsCfg,
		Clients: f.clients, Duration: f.duration, Warmup: f.warmup, Seed: f.seed, RateTPS: f.rate,
		MaxAttempts: f.maxAttempts, Progress: progress, NodeMetrics: f.nodeMetrics}
	if f.mn != "" {
		var err error
		if cfg.Dial, _, _, err = f.memoryNode(); err != nil {
			return err
		}
		cfg.MN = f.mn
	} else if progress != nil {
		fmt.Fprintln(progress, "no --mn: consistency checks skipped")
	}
	res, err := bench.Connect(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--connect %s: %w", u.HTTPAddr, err)
	}
	res.Params.Workload = f.workloadFlags.config
	endProgress()
	return report(cmd, f, []*bench.Result{res})
}

// memoryNode returns how compute nodes reach the memory node for one run.
func (f *benchFlags) memoryNode() (func(context.Context) (rdma.Device, error), string, func(), error) {
	if f.mn != "" {
		tok, err := f.sec.token()
		if err != nil {
			return nil, "", nil, err
		}
		dial := func(ctx context.Context) (rdma.Device, error) {
			return tcp.Dial(ctx, f.mn, tcp.ClientConfig{Token: tok})
		}
		return dial, f.mn, func() {}, nil
	}
	size, err := parseBytes(f.mnSize)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--mn-size: %w", err)
	}
	mem := rdma.NewMemory(size)
	var mcfg rdma.MemConfig
	if f.costModel {
		m := rdma.DefaultCostModel()
		mcfg.Cost = &m
	}
	dial := func(context.Context) (rdma.Device, error) { return rdma.NewMemDevice(mem, mcfg) }
	return dial, "embedded", func() {}, nil
}

func printSummary(w io.Writer, results []*bench.Result) {
	// Ratios against the mn-only baseline (throughput, atomics) and the
	// oracle (remote lock operations; aura sim only) when those modes ran in
	// the same invocation.
	var base, oracle *bench.Result
	for _, r := range results {
		switch r.Mode {
		case "mn-only":
			base = r
		case "oracle":
			oracle = r
		}
	}
	ratio := func(x, y float64) string {
		if y == 0 {
			if x == 0 {
				return "1.00×"
			}
			return "–"
		}
		return fmt.Sprintf("%.2f×", x/y)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "mode\tworkload\tcns\tcommitted\ttps\t"
	if base != nil {
		head += "tps vs mn-only\t"
	}
	head += "p50 µs\tp99 µs\tabort %\tatomics/txn\t"
	if base != nil {
		head += "atomics vs mn-only\t"
	}
	head += "owner rpc/txn\tlocal hit\tremote locks/txn\t"
	if oracle != nil {
		head += "remote vs oracle\t"
	}
	head += "cohorts\tmigrations\t"
	// CPU and allocations per transaction are measured in real runs (aura
	// bench); the simulator's virtual time has none to show.
	measured := slices.ContainsFunc(results, func(r *bench.Result) bool { return r.CPUSeconds > 0 })
	if measured {
		head += "cpu µs/txn\tallocs/txn\talloc B/txn\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		line := fmt.Sprintf("%s\t%s\t%d\t%d\t%.0f\t", r.Mode, r.Workload, r.CNs, r.Committed+r.RolledBack, r.ThroughputTPS)
		if base != nil {
			line += ratio(r.ThroughputTPS, base.ThroughputTPS) + "\t"
		}
		line += fmt.Sprintf("%d\t%d\t%.2f\t%.2f\t", r.LatencyUs.P50, r.LatencyUs.P99, 100*r.AbortRate, r.AtomicPerTxn)
		if base != nil {
			line += ratio(r.AtomicPerTxn, base.AtomicPerTxn) + "\t"
		}
		line += fmt.Sprintf("%.2f\t%.1f%%\t%.3f\t", r.OwnerRPCPer, 100*r.LocalHit, r.RemoteLockOps)
		if oracle != nil {
			line += ratio(r.RemoteLockOps, oracle.RemoteLockOps) + "\t"
		}
		line += fmt.Sprintf("%d\t%d\t", r.Cohorts.Final, r.Migrations.Count)
		if measured {
			line += fmt.Sprintf("%.1f\t%.1f\t%.0f\t", r.CPUUsPerTxn, r.AllocsPerTxn, r.AllocBytesPerTxn)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, r := range results {
		if r.NodeCPUUsPerTxn != nil {
			fmt.Fprintf(w, "\n%s — nodes' CPU (their process_cpu_seconds_total): %.1f µs per committed transaction\n", r.Mode, *r.NodeCPUUsPerTxn)
		}
	}
	for _, r := range results {
		if len(r.ByType) > 0 {
			fmt.Fprintf(w, "\n%s — per transaction type (after warm-up):\n", r.Mode)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "type\tcompleted\taborted attempts\tatomics/txn\tlocks/txn\t")
			for _, name := range sortedKeys(r.ByType) {
				t := r.ByType[name]
				fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t\n", name, t.Committed+t.RolledBack, t.Aborted, t.AtomicPerTxn, t.LocksPerTxn)
			}
			tw.Flush()
		}
		fmt.Fprintf(w, "\n%s — checks:", r.Mode)
		for _, k := range sortedKeys(r.Checks) {
			if k != "details" {
				fmt.Fprintf(w, " %s=%v", k, r.Checks[k])
			}
		}
		fmt.Fprintln(w)
	}
}

// writeResultsJSON writes one result, or {"runs":[…]} for several, to path
// (nothing when path is empty).
func writeResultsJSON(path string, results []*bench.Result) error {
	if path == "" || len(results) == 0 {
		return nil
	}
	var doc any = results[0]
	if len(results) > 1 {
		doc = map[string]any{"runs": results}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeReport writes the HTML report of results to dir (nothing when dir is
// empty), naming this process's command line and machine.
func writeReport(cmd *cobra.Command, dir string, quiet bool, results []*bench.Result) error {
	if dir == "" || len(results) == 0 {
		return nil
	}
	runs := make([]bench.Result, len(results))
	for i, r := range results {
		runs[i] = *r
	}
	in := htmlreport.Input{Runs: runs, Command: commandLine(cmd), Machine: htmlreport.Machine()}
	if err := htmlreport.Write(dir, in); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if !quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", filepath.Join(dir, "index.html"))
	}
	return nil
}

// commandLine is this process's command line when it ran cmd (os.Args),
// else (cmd run in-process with other arguments) cmd's path with the flags
// it was given.
func commandLine(cmd *cobra.Command) string {
	if len(os.Args) > 1 && os.Args[1] == cmd.Name() {
		return htmlreport.CommandLine(os.Args)
	}
	args := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	return htmlreport.CommandLine(args)
}
