package rdma_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

// Benchmarks of the in-process backend. Each reports ops/s: work requests
// completed per second of wall time (for batched runs, b.N counts work
// requests, not doorbells). Run them with
//
//	go test -run XXX -bench . -benchtime 1s ./rdma
//
// and compare two commits with benchstat (see README.md).

const (
	benchRecord = 64   // READ/WRITE payload: a small record
	benchWords  = 4096 // words in the benchmark region
)

func benchDevice(b *testing.B, cost *rdma.CostModel) (*rdma.MemDevice, rdma.Region) {
	b.Helper()
	dev, err := rdma.NewMemDevice(rdma.NewMemory(1<<24), rdma.MemConfig{Cost: cost})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dev.Close() })
	r, err := dev.RegisterRegion(context.Background(), "bench", benchWords*rdma.AtomicSize+benchRecord)
	if err != nil {
		b.Fatal(err)
	}
	return dev, r
}

// benchWR returns work request i of a stream of op on region r: READ and
// WRITE move benchRecord bytes, CAS swaps 0 for 0 (always succeeds, no
// change), FAA adds 1. base selects the word range (one per goroutine).
func benchWR(op rdma.Opcode, r rdma.Region, buf []byte, base, i int) rdma.WorkRequest {
	w := uint64((base + i) % benchWords)
	wr := rdma.WorkRequest{ID: uint64(i), Op: op, RKey: r.RKey, RemoteAddr: r.Addr + w*rdma.AtomicSize}
	switch op {
	case rdma.OpRead, rdma.OpWrite:
		wr.Local = buf
	case rdma.OpFetchAndAdd:
		wr.Add = 1
	}
	return wr
}

func reportOps(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}

// runBatched executes b.N work requests on one queue pair, batch per doorbell.
func runBatched(b *testing.B, dev rdma.Device, r rdma.Region, op rdma.Opcode, batch int, addr func(i int) int) {
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer qp.Close()
	ctx := context.Background()
	buf := make([]byte, benchRecord)
	wrs := make([]rdma.WorkRequest, batch)
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		for j := range n {
			wrs[j] = benchWR(op, r, buf, addr(done+j), 0)
		}
		cs, err := rdma.Exec(ctx, qp, wrs[:n]...)
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.StopTimer()
	reportOps(b)
}

// runParallel executes b.N single-work-request Execs from GOMAXPROCS
// goroutines (b.SetParallelism scales it), one queue pair each.
func runParallel(b *testing.B, dev rdma.Device, r rdma.Region, op rdma.Opcode, addr func(g, i int) int) {
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1))
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			b.Error(err)
			return
		}
		defer qp.Close()
		ctx := context.Background()
		buf := make([]byte, benchRecord)
		for i := 0; pb.Next(); i++ {
			cs, err := rdma.Exec(ctx, qp, benchWR(op, r, buf, addr(g, i), 0))
			if err == nil {
				err = rdma.FirstError(cs)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportOps(b)
}

func benchVerb(b *testing.B, op rdma.Opcode) {
	seq := func(i int) int { return i }
	b.Run("unbatched", func(b *testing.B) {
		dev, r := benchDevice(b, nil)
		runBatched(b, dev, r, op, 1, seq)
	})
	for _, batch := range []int{16, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			dev, r := benchDevice(b, nil)
			runBatched(b, dev, r, op, batch, seq)
		})
	}
	b.Run("parallel", func(b *testing.B) {
		dev, r := benchDevice(b, nil)
		// Each goroutine works on its own 256 words.
		runParallel(b, dev, r, op, func(g, i int) int { return g*256 + i%256 })
	})
}

func BenchmarkMemRead(b *testing.B)  { benchVerb(b, rdma.OpRead) }
func BenchmarkMemWrite(b *testing.B) { benchVerb(b, rdma.OpWrite) }
func BenchmarkMemCAS(b *testing.B)   { benchVerb(b, rdma.OpCompareAndSwap) }
func BenchmarkMemFAA(b *testing.B)   { benchVerb(b, rdma.OpFetchAndAdd) }

// BenchmarkMemCASCostModel runs CAS with the default cost model, in doorbell
// batches, on one hot word versus words spread over the NIC's atomic slots.
// On the hot word every CAS waits for the previous one to leave its slot
// (AtomicSlotOccupancy = 400 ns), so a batch of n takes about
// n × 400 ns + AtomicLatency; spread words overlap in the NIC, and a batch
// takes about n × IssueCost + AtomicLatency. (Many queue pairs each waiting
// for one CAS would show the same cap, but on a 2-vCPU machine their
// goroutines, spinning out the last microseconds of each modelled latency,
// measure the Go scheduler more than the model.)
func BenchmarkMemCASCostModel(b *testing.B) {
	for _, tc := range []struct {
		name string
		addr func(int) int
	}{
		{"hot", func(int) int { return 0 }},
		{"spread", func(i int) int { return i * 97 }}, // 97 is coprime with benchWords
	} {
		for _, batch := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/batch%d", tc.name, batch), func(b *testing.B) {
				m := rdma.DefaultCostModel()
				dev, r := benchDevice(b, &m)
				runBatched(b, dev, r, rdma.OpCompareAndSwap, batch, tc.addr)
			})
		}
	}
}
