package sim

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/workload"
)

// Modes the simulator runs.
var Modes = []string{"mn-only", "static", "hash", "aura", "oracle"}

// Lever B settings: how aura routes transactions.
const (
	// LeverGuarded routes with the AffinityRouter (score with queue
	// penalty) and plans with the load term, size cap and churn bounds.
	LeverGuarded = "guarded"
	// LeverNaive routes by the owner of the transaction's primary write key
	// group and plans in the planner's naive mode (the tutorial's collapse).
	LeverNaive = "naive"
	// LeverOff routes by the static rule only.
	LeverOff = "off"
)

// Costs are the data-plane costs of the model, in virtual time.
type Costs struct {
	// NIC is the memory node's NIC model (verb latencies, atomic slots).
	NIC rdma.CostModel
	// LocalLock is a lock granted by the home CN's owner table. Default 100 ns.
	LocalLock time.Duration
	// OwnerRPC is the round trip of a lock request to another CN's owner.
	// Default 7 µs.
	OwnerRPC time.Duration
	// RPCCPU is the owner CN's CPU time per lock request. Default 1 µs.
	RPCCPU time.Duration
	// TxnCPU is the home CN's CPU time per attempt. Default 4 µs.
	TxnCPU time.Duration
	// OpCPU is the home CN's CPU time per record accessed. Default 200 ns.
	OpCPU time.Duration
	// Freeze and Handoff are a migration's fixed phases (the drain in
	// between is measured). Defaults 200 µs and 100 µs.
	Freeze, Handoff time.Duration
	// BackoffMin and BackoffMax bound the retry backoff after an abort.
	// Defaults 20 µs and 2 ms.
	BackoffMin, BackoffMax time.Duration
}

// DefaultCosts returns the defaults documented on Costs.
func DefaultCosts() Costs {
	return Costs{
		NIC:        rdma.DefaultCostModel(),
		LocalLock:  100 * time.Nanosecond,
		OwnerRPC:   7 * time.Microsecond,
		RPCCPU:     time.Microsecond,
		TxnCPU:     4 * time.Microsecond,
		OpCPU:      200 * time.Nanosecond,
		Freeze:     200 * time.Microsecond,
		Handoff:    100 * time.Microsecond,
		BackoffMin: 20 * time.Microsecond,
		BackoffMax: 2 * time.Millisecond,
	}
}

// Config configures one simulated run of one mode.
type Config struct {
	// Mode is one of Modes.
	Mode string
	// Workload is the configured workload. Runs of several modes may share
	// it: a run resets a drifting workload to its first layout.
	Workload workload.Workload
	// CNs is the number of compute nodes, 1..255. Default 4.
	CNs int
	// Clients is the number of clients. Default 8 per CN.
	Clients int
	// Duration is the measured virtual time, after Warmup. Default 10 s.
	Duration time.Duration
	// Warmup is virtual time left out of the summary figures. Default 2 s.
	Warmup time.Duration
	// Tick is the planner period (and the timeline's). Default 100 ms.
	Tick time.Duration
	// Seed seeds every random stream.
	Seed uint64
	// RateTPS, when positive, paces the clients open-loop at this total
	// rate (a client still has one transaction outstanding at a time).
	RateTPS float64
	// LeverB is how aura routes: LeverGuarded (default), LeverNaive, LeverOff.
	LeverB string
	// DriftEvery, when positive, drifts the workload at this virtual period
	// (tenant only).
	DriftEvery time.Duration
	// MaxAttempts caps the attempts of one transaction. Default 1000.
	MaxAttempts int
	// Costs are the model's costs; the zero value means DefaultCosts.
	Costs *Costs
	// Progress, when set, receives a line per simulated second.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.CNs == 0 {
		c.CNs = 4
	}
	if c.Clients == 0 {
		c.Clients = 8 * c.CNs
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Tick == 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.LeverB == "" {
		c.LeverB = LeverGuarded
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 1000
	}
	if c.Costs == nil {
		d := DefaultCosts()
		c.Costs = &d
	}
}

// Validate reports every problem with a defaulted config.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sim: "+format, args...)) }
	if !slices.Contains(Modes, c.Mode) {
		add("mode %q, want one of %v", c.Mode, Modes)
	}
	if c.Workload == nil {
		add("no workload")
	}
	if c.CNs < 1 || c.CNs > 254 {
		add("cns %d, want 1..254", c.CNs)
	}
	if c.Clients < 1 {
		add("clients %d, want ≥ 1", c.Clients)
	}
	if c.Duration <= 0 || c.Warmup < 0 {
		add("duration %v / warmup %v, want > 0 / ≥ 0", c.Duration, c.Warmup)
	}
	if c.Tick < time.Millisecond {
		add("tick %v, want ≥ 1ms", c.Tick)
	}
	if c.RateTPS < 0 {
		add("rate %v, want ≥ 0", c.RateTPS)
	}
	switch c.LeverB {
	case LeverGuarded, LeverNaive, LeverOff:
	default:
		add("lever-b %q, want guarded, naive or off", c.LeverB)
	}
	if c.DriftEvery < 0 {
		add("drift-every %v, want ≥ 0", c.DriftEvery)
	}
	if c.DriftEvery > 0 && c.Workload != nil {
		if _, ok := c.Workload.(drifter); !ok {
			add("--drift-every: workload %q cannot drift in the simulator (tenant only)", c.Workload.Name())
		}
	}
	if c.MaxAttempts < 1 {
		add("max attempts %d, want ≥ 1", c.MaxAttempts)
	}
	if c.Costs != nil {
		if err := c.Costs.NIC.Validate(); err != nil {
			add("%v", err)
		}
		for _, d := range []time.Duration{c.Costs.LocalLock, c.Costs.OwnerRPC, c.Costs.RPCCPU, c.Costs.TxnCPU,
			c.Costs.OpCPU, c.Costs.Freeze, c.Costs.Handoff, c.Costs.BackoffMin, c.Costs.BackoffMax} {
			if d < 0 {
				add("negative cost %v", d)
			}
		}
		if c.Costs.BackoffMin <= 0 || c.Costs.BackoffMax < c.Costs.BackoffMin {
			add("backoff %v..%v, want 0 < min ≤ max", c.Costs.BackoffMin, c.Costs.BackoffMax)
		}
	}
	return errors.Join(errs...)
}

// drifter is a workload whose layout the simulator can drift (tenant).
type drifter interface {
	Drift(epoch int) error
	Advance() (int, error)
}
