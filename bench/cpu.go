package bench

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// usage is this process's resource use at one instant: CPU time (user +
// system, from getrusage) and the heap allocations the Go runtime counted
// since the process started (runtime/metrics). Two of them taken at the
// ends of the measured window give the window's cost; the load before it
// and the checks after it are outside, as are the other modes of the same
// invocation.
type usage struct {
	cpu        time.Duration
	allocs     uint64 // heap objects allocated
	allocBytes uint64 // heap bytes allocated
}

// allocMetrics are the runtime/metrics names usage reads: cumulative
// counts that include tiny allocations batched into one object, which is
// what -benchmem's allocs/op counts too.
var allocMetrics = []string{"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes"}

// takeUsage reads the process's usage now. Reading runtime/metrics does
// not stop the world (unlike runtime.ReadMemStats), so it costs the run
// nothing measurable.
func takeUsage() usage {
	var u usage
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s := make([]metrics.Sample, len(allocMetrics))
	for i, name := range allocMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		u.allocs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		u.allocBytes = s[1].Value.Uint64()
	}
	return u
}

func (u usage) sub(o usage) usage {
	return usage{cpu: u.cpu - o.cpu, allocs: u.allocs - o.allocs, allocBytes: u.allocBytes - o.allocBytes}
}

// Cost is what the measured window cost the process, per committed
// transaction: the figures on a shared machine that are steadier than
// wall time (throughput and latency depend on what else runs; CPU and
// allocations per transaction much less).
type Cost struct {
	// CPUUsPerTxn is the process's user + system CPU time over the
	// measured window divided by the transactions committed in it, in
	// microseconds. The embedded cluster's clients, compute nodes and
	// memory node share the process, so it is the whole system's cost;
	// with --connect it is the client's alone (NodeCPUUsPerTxn is the
	// nodes').
	CPUUsPerTxn float64 `json:"cpu_us_per_txn"`
	// AllocsPerTxn and AllocBytesPerTxn are the heap allocations (objects,
	// bytes) the process made over the window, per committed transaction.
	AllocsPerTxn     float64 `json:"allocs_per_txn"`
	AllocBytesPerTxn float64 `json:"alloc_bytes_per_txn"`
	// CPUSeconds is the window's CPU time, the numerator of CPUUsPerTxn.
	CPUSeconds float64 `json:"cpu_s"`
}

// costOf is the cost of window u (a difference of two usages) spread over
// committed transactions (zero figures when none committed).
func costOf(u usage, committed uint64) Cost {
	c := Cost{CPUSeconds: u.cpu.Seconds()}
	if committed == 0 {
		return c
	}
	n := float64(committed)
	c.CPUUsPerTxn = float64(u.cpu.Microseconds()) / n
	c.AllocsPerTxn = float64(u.allocs) / n
	c.AllocBytesPerTxn = float64(u.allocBytes) / n
	return c
}
