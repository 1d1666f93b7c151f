package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aura-runtime/aura/bench"
	htmlreport "github.com/aura-runtime/aura/report"
	"github.com/aura-runtime/aura/sim"
)

func init() { subcommands = append(subcommands, newSimCmd) }

type simFlags struct {
	workloadFlags
	modes      []string
	cns        int
	clients    int
	duration   time.Duration
	warmup     time.Duration
	tick       time.Duration
	seed       uint64
	rate       float64
	leverB     string
	driftEvery time.Duration
	ownerRPC   time.Duration
	jsonPath   string
	quiet      bool
	reportDir  string
}

func newSimCmd() *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate the whole control loop deterministically in virtual time",
		Long: `sim runs a discrete-event simulation, in virtual time, of N compute nodes, one
memory node (with the NIC's per-verb latency and 512-slot atomic serialisation),
closed-loop clients and the planner, running the real control-plane code
(profilers, access graph, cohort generator, ownership planner, affinity
router, manifest). The same flags and --seed give byte-identical output.

Every transaction's access set is the workload's predicted footprint; each
write record is locked LOCAL (its cohort is owned by the home CN), by OWNER
RPC (another CN owns it) or by MN CAS. Durations (--duration, --warmup,
--tick, --drift-every) are virtual. Results use the same JSON schema as
'aura bench'.

Modes (comma list, each a separate run on the same seed): ` + strings.Join(sim.Modes, ", ") + `.

With --report DIR the results also go to a self-contained HTML report,
written after every mode ran: DIR/index.html (the command line, this
machine, a table of each mode's headline figures with ratios against
mn-only and oracle, every run's parameters), PNG plots beside it (per mode
over virtual time, one sample per --tick: throughput, atomics/txn, LOCAL
hit, remote lock ops/txn, cohorts, migrations, load imbalance and per-CN
load; for aura a heat map of sampled key groups' owners over time) and
DIR/runs.json. It opens offline. DIR is created; an existing DIR must be
empty or hold an earlier report, whose index.html, runs.json and
plot-*.png are replaced (other files stay); any other DIR is refused
before the simulation starts. See docs/report.md.

Progress (unless --quiet) goes to standard error: on a terminal one live
line per mode rewrites itself; otherwise a plain line every virtual second.`,
		Example: `  aura sim --workload tpcc --cns 4 --warehouses 16 --mode mn-only,static,aura,oracle --duration 30s --seed 7
  aura sim --workload tpcc --key-encoding legacy --mode aura --lever-b naive
  aura sim --workload tenant --mode static,hash,aura,oracle --drift-every 10s --json out.json
  aura sim --workload tpcc --warehouses 16 --mode mn-only,static,aura,oracle --duration 30s --report sim-report/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringSliceVar(&f.modes, "mode", []string{"mn-only", "static", "hash", "aura", "oracle"}, "modes to simulate, comma separated ("+strings.Join(sim.Modes, ", ")+")")
	fl.IntVar(&f.cns, "cns", 4, "number of compute nodes")
	fl.IntVar(&f.clients, "clients", 0, "closed-loop clients (default 8 per compute node)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measured virtual time, after the warm-up")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "virtual warm-up time, left out of the summary figures")
	fl.DurationVar(&f.tick, "tick", 100*time.Millisecond, "planner tick (and timeline period), virtual")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of every random stream (same seed, same output)")
	fl.Float64Var(&f.rate, "rate", 0, "open-loop pacing: total transactions per virtual second (0 = closed loop)")
	fl.StringVar(&f.leverB, "lever-b", sim.LeverGuarded, "aura routing: guarded (affinity router with load guards), naive (route by the primary write key group's owner; the tutorial's collapse) or off (static routing)")
	fl.DurationVar(&f.driftEvery, "drift-every", 0, "drift the workload at this virtual period (tenant only; 0 = never)")
	fl.DurationVar(&f.ownerRPC, "owner-rpc", 7*time.Microsecond, "round trip of an owner RPC lock request")
	fl.StringVar(&f.jsonPath, "json", "", "write the results as JSON to this file ({\"runs\":[…]} when several modes run)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	fl.StringVar(&f.reportDir, "report", "", "after the simulation, write an HTML report with plots to this directory (created; an existing one must be empty or hold an earlier report)")
	return cmd
}

func runSim(cmd *cobra.Command, f *simFlags) error {
	wl, clients, err := f.workloadFlags.forRun(f.cns, f.clients, &f.seed, f.duration+f.warmup)
	if err != nil {
		return err
	}
	if f.reportDir != "" {
		if err := htmlreport.CheckDir(f.reportDir); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	progress, endProgress := liveProgress(progressWriter(cmd, f.quiet))
	defer endProgress()
	costs := sim.DefaultCosts()
	costs.OwnerRPC = f.ownerRPC
	var results []*bench.Result
	for _, mode := range f.modes {
		out, err := sim.Run(sim.Config{Mode: strings.TrimSpace(mode), Workload: wl, CNs: f.cns, Clients: clients,
			Duration: f.duration, Warmup: f.warmup, Tick: f.tick, Seed: f.seed, RateTPS: f.rate,
			LeverB: f.leverB, DriftEvery: f.driftEvery, Costs: &costs, Progress: progress})
		if err != nil {
			return fmt.Errorf("mode %s: %w", mode, err)
		}
		out.Result.Params.Workload = f.workloadFlags.config
		if progress != nil && len(out.TickWall) > 0 {
			var sum, mx time.Duration
			for _, d := range out.TickWall {
				sum += d
				mx = max(mx, d)
			}
			fmt.Fprintf(progress, "%s: %d planner ticks, real time per tick mean %v, max %v\n",
				mode, len(out.TickWall), (sum / time.Duration(len(out.TickWall))).Round(time.Microsecond), mx.Round(time.Microsecond))
		}
		results = append(results, out.Result)
	}
	endProgress()
	printSummary(cmd.OutOrStdout(), results)
	if err := writeResultsJSON(f.jsonPath, results); err != nil {
		return err
	}
	return writeReport(cmd, f.reportDir, f.quiet, results)
}
