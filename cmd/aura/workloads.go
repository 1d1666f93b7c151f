package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
	"github.com/aura-runtime/aura/workload/tenant"
	"github.com/aura-runtime/aura/workload/tpcc"
	"github.com/aura-runtime/aura/workload/trace"
	"github.com/aura-runtime/aura/workload/ycsb"
)

// workloadNames lists the workloads --workload accepts.
var workloadNames = []string{"tpcc", "ycsb", "bank", "tenant", "trace"}

// driftWorkloads lists the workloads that can drift (workload.Drifter), for
// the error refusing --drift-every on the others.
var driftWorkloads = []string{"bank", "tenant"}

// driftBranchKGs is the bank's --branch-kgs when the run drifts and the
// flag is not given: the bank drifts by re-dealing its branches.
const driftBranchKGs = 4

// workloadFlags are the flags that choose and shape a workload; bench and
// sim share them so that a workload means the same in both.
type workloadFlags struct {
	name string
	seed *uint64 // the run's seed; also seeds TPC-C's population

	// tpcc
	warehouses        int
	tpccProfile       string
	keyEncoding       string
	items             int
	customers         int
	expectedNewOrders int
	runTime           func() time.Duration

	// ycsb
	records        uint64
	theta          float64
	opsPerTxn      int
	readProportion float64
	valueSize      int

	// bank
	accounts      uint64
	auditFraction float64
	auditAccounts uint64
	hotTheta      float64
	branchKGs     uint64
	branchLocal   float64
	branchTheta   float64

	// tenant
	tenants      int
	kgsPerTenant int
	crossTenant  float64
	tenantDist   string

	// trace
	tracePath string
	traceLoop bool

	// drifting: the run drifts the workload (bench --drift-every), which
	// turns the bank's branch locality on unless --branch-kgs is given.
	drifting bool

	// fs is the flag set the flags were registered in.
	fs *pflag.FlagSet

	// config is the built workload's configuration, for the results.
	config any
}

func (f *workloadFlags) register(fl *pflag.FlagSet) {
	f.fs = fl
	fl.StringVar(&f.name, "workload", "tpcc", "workload to run: "+strings.Join(workloadNames, ", "))
	fl.IntVar(&f.warehouses, "warehouses", 0, "tpcc: warehouses (default 4 per compute node)")
	fl.StringVar(&f.tpccProfile, "tpcc-profile", tpcc.ProfileSpec, "tpcc: transaction mix: spec (45/43/4/4/4, 1% remote lines, 15% remote payments) or crest (50/46/0/4/0, 15% remote lines)")
	fl.StringVar(&f.keyEncoding, "key-encoding", tpcc.EncodingReshaped, "tpcc: key groups: reshaped (table, warehouse, bucket) or legacy (record_key % 1024 per table, the tutorial's)")
	fl.IntVar(&f.items, "items", tpcc.SpecItems, "tpcc: items (and stock rows per warehouse)")
	fl.IntVar(&f.customers, "customers", tpcc.SpecCustomersPerDistrict, "tpcc: customers per district")
	fl.IntVar(&f.expectedNewOrders, "expected-new-orders", 0, "tpcc: NewOrders the run may commit, to size the growing tables (default: 30,000 per second of run time, at least 100,000)")
	fl.Uint64Var(&f.records, "records", 100_000, "ycsb: records")
	fl.Float64Var(&f.theta, "theta", 0.99, "ycsb: Zipfian skew (0 < θ < 1)")
	fl.IntVar(&f.opsPerTxn, "ops-per-txn", 4, "ycsb, tenant: records a transaction touches")
	fl.Float64Var(&f.readProportion, "read-proportion", 0.5, "ycsb: share of operations that only read")
	fl.IntVar(&f.valueSize, "value-size", 100, "ycsb: record size in bytes")
	fl.Uint64Var(&f.accounts, "accounts", 10_000, "bank: accounts")
	fl.Float64Var(&f.auditFraction, "audit-fraction", 0.05, "bank: share of audits in the mix")
	fl.Uint64Var(&f.auditAccounts, "audit-accounts", 64, "bank: accounts an audit reads, a range from a random start (0 = all: such audits starve under concurrent transfers, since single-version OCC validates every read; the total is checked after the run either way)")
	fl.Float64Var(&f.hotTheta, "hot-theta", 0, "bank: Zipfian skew of account choice (0 = uniform; not with branches)")
	fl.Uint64Var(&f.branchKGs, "branch-kgs", 0, fmt.Sprintf("bank: key groups (of 64 accounts) per branch; transfers mostly stay inside a branch, and a drift re-deals the key groups among branches (0 = no branches; default %d with --drift-every)", driftBranchKGs))
	fl.Float64Var(&f.branchLocal, "branch-local", bank.DefaultConfig().LocalFraction, "bank: share of transfers that stay inside their branch")
	fl.Float64Var(&f.branchTheta, "branch-theta", bank.DefaultConfig().BranchTheta, "bank: Zipfian skew of branch choice (0 = uniform)")
	fl.IntVar(&f.tenants, "tenants", 64, "tenant: tenants")
	fl.IntVar(&f.kgsPerTenant, "kgs-per-tenant", 16, "tenant: scattered key groups per tenant")
	fl.Float64Var(&f.crossTenant, "cross-tenant", 0.05, "tenant: share of transactions that touch another tenant")
	fl.StringVar(&f.tenantDist, "tenant-dist", tenant.Uniform, "tenant: how transactions pick a tenant: uniform or zipfian")
	fl.StringVar(&f.tracePath, "trace", "", "trace: JSON-lines file, one transaction a line: {\"reads\":[[\"TABLE\",KEY],…],\"writes\":[…]}")
	fl.BoolVar(&f.traceLoop, "loop", false, "trace: replay the trace again when it ends")
}

func (f *workloadFlags) build(cns, clients int) (workload.Workload, error) {
	switch f.name {
	case "tpcc":
		cfg := tpcc.DefaultConfig()
		cfg.Warehouses = cmp.Or(f.warehouses, 4*cns)
		cfg.Profile, cfg.KeyEncoding = f.tpccProfile, f.keyEncoding
		cfg.ItemCount, cfg.CustomersPerDistrict = f.items, f.customers
		cfg.ExpectedNewOrders = f.expectedNewOrders
		if cfg.ExpectedNewOrders == 0 {
			cfg.ExpectedNewOrders = max(100_000, int(30_000*f.runTime().Seconds()))
		}
		cfg.Seed = cmp.Or(*f.seed, 1)
		f.config = cfg
		return tpcc.New(cfg)
	case "ycsb":
		cfg := ycsb.DefaultConfig()
		cfg.RecordCount, cfg.Theta, cfg.OpsPerTxn = f.records, f.theta, f.opsPerTxn
		cfg.ReadProportion, cfg.ValueSize = f.readProportion, f.valueSize
		f.config = cfg
		return ycsb.New(cfg)
	case "bank":
		cfg := bank.DefaultConfig()
		cfg.Accounts, cfg.AuditFraction, cfg.HotTheta = f.accounts, f.auditFraction, f.hotTheta
		cfg.AuditAccounts = min(f.auditAccounts, f.accounts)
		cfg.BranchKGs, cfg.LocalFraction, cfg.BranchTheta = f.branchKGs, f.branchLocal, f.branchTheta
		if f.drifting && !f.changed("branch-kgs") {
			cfg.BranchKGs = driftBranchKGs
		}
		if f.drifting && cfg.BranchKGs == 0 {
			return nil, fmt.Errorf("--drift-every with --workload bank needs branches: --branch-kgs > 0 (default %d when drifting)", driftBranchKGs)
		}
		if f.drifting && cfg.HotTheta != 0 {
			return nil, errors.New("--drift-every with --workload bank drifts its branches, whose skew is --branch-theta: leave --hot-theta at 0")
		}
		f.config = cfg
		return bank.New(cfg)
	case "tenant":
		cfg := tenant.DefaultConfig()
		cfg.Tenants, cfg.KGsPerTenant, cfg.OpsPerTxn = f.tenants, f.kgsPerTenant, f.opsPerTxn
		cfg.CrossTenantFraction, cfg.TenantDistribution = f.crossTenant, f.tenantDist
		f.config = cfg
		return tenant.New(cfg)
	case "trace":
		if f.tracePath == "" {
			return nil, fmt.Errorf("--workload trace needs --trace FILE")
		}
		cfg := trace.DefaultConfig()
		cfg.Path, cfg.Loop, cfg.Clients = f.tracePath, f.traceLoop, clients
		f.config = cfg
		return trace.New(cfg)
	}
	return nil, fmt.Errorf("unknown --workload %q (want one of %s)", f.name, strings.Join(workloadNames, ", "))
}

// changed reports whether the flag name was given.
func (f *workloadFlags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

// checkDrift refuses a drift period the workload wl cannot follow for a run
// of runTime: a negative one, a workload that cannot drift, more drifts than
// the workloads' epoch bound.
func checkDrift(wl workload.Workload, every, runTime time.Duration) error {
	if every < 0 {
		return fmt.Errorf("--drift-every %v: want ≥ 0 (0 = never)", every)
	}
	if every == 0 {
		return nil
	}
	if _, ok := wl.(workload.Drifter); !ok {
		return fmt.Errorf("--drift-every: workload %q cannot drift (workloads that can: %s)", wl.Name(), strings.Join(driftWorkloads, ", "))
	}
	if every < time.Millisecond {
		return fmt.Errorf("--drift-every %v: want ≥ 1ms", every)
	}
	if n := runTime / every; n > min(bank.MaxDriftEpoch, tenant.MaxEpoch) {
		return fmt.Errorf("--drift-every %v: %d drifts in %v, want at most %d", every, n, runTime, min(bank.MaxDriftEpoch, tenant.MaxEpoch))
	}
	return nil
}

// forRun builds the workload for a run of cns compute nodes and clients
// closed-loop clients (0 means the default, 8 per node) lasting runTime; it
// returns the workload and the effective client count.
func (f *workloadFlags) forRun(cns, clients int, seed *uint64, runTime time.Duration) (workload.Workload, int, error) {
	f.seed = seed
	f.runTime = func() time.Duration { return runTime }
	if clients == 0 {
		clients = 8 * cns
	}
	wl, err := f.build(cns, clients)
	return wl, clients, err
}

// progressWriter is where progress lines go: stderr, or nowhere with --quiet.
func progressWriter(cmd *cobra.Command, quiet bool) io.Writer {
	if quiet {
		return nil
	}
	return cmd.ErrOrStderr()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
