package tcp

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

// benchVerb builds the i-th work request of a benchmark on region r.
type benchVerb func(r rdma.Region, slot, i int, buf []byte) rdma.WorkRequest

const benchPayload = 64 // bytes per READ/WRITE, a small record

func benchRead(r rdma.Region, slot, i int, buf []byte) rdma.WorkRequest {
	return rdma.WorkRequest{ID: uint64(i), Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + uint64(slot*4096+(i%32)*benchPayload), Local: buf}
}

func benchWrite(r rdma.Region, slot, i int, buf []byte) rdma.WorkRequest {
	return rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + uint64(slot*4096+(i%32)*benchPayload), Local: buf}
}

func benchCAS(r rdma.Region, slot, i int, _ []byte) rdma.WorkRequest {
	// Compare 0, swap 0: always succeeds and leaves the word alone.
	return rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: r.Addr + uint64(slot*4096+(i%64)*8)}
}

func benchFAA(r rdma.Region, slot, i int, _ []byte) rdma.WorkRequest {
	return rdma.WorkRequest{ID: uint64(i), Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + uint64(slot*4096+(i%64)*8), Add: 1}
}

func BenchmarkTCPRead(b *testing.B)  { benchVerbs(b, benchRead) }
func BenchmarkTCPWrite(b *testing.B) { benchVerbs(b, benchWrite) }
func BenchmarkTCPCAS(b *testing.B)   { benchVerbs(b, benchCAS) }
func BenchmarkTCPFAA(b *testing.B)   { benchVerbs(b, benchFAA) }

// benchVerbs runs one verb unbatched (one Exec per verb), in doorbell batches
// of 16 and 64, and from several QPs of one device in parallel (each QP
// unbatched, or in batches of 16), against a server on loopback. Every
// variant reports ops/s, counting work requests.
func benchVerbs(b *testing.B, verb benchVerb) {
	ts := startServer(b, rdma.NewMemory(64<<20), ServerConfig{})
	d := dial(b, ts.addr, ClientConfig{})
	r, err := d.RegisterRegion(context.Background(), "bench", 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 16, 64} {
		name := "unbatched"
		if batch > 1 {
			name = fmt.Sprintf("batch%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			qp, err := d.CreateQP(rdma.QPConfig{})
			if err != nil {
				b.Fatal(err)
			}
			defer qp.Close()
			runBatches(b, qp, r, verb, 0, batch, b.N)
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "ops/s")
		})
	}
	for _, batch := range []int{1, 16} {
		name := "parallel"
		if batch > 1 {
			name = fmt.Sprintf("parallel-batch%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(4) // 4 × GOMAXPROCS QPs share the device's connection
			var slots, ops atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				slot := int(slots.Add(1) - 1)
				qp, err := d.CreateQP(rdma.QPConfig{})
				if err != nil {
					b.Error(err)
					return
				}
				defer qp.Close()
				n := 0
				for pb.Next() {
					runBatches(b, qp, r, verb, slot%200, batch, 1)
					n++
				}
				ops.Add(int64(n * batch))
			})
			b.ReportMetric(float64(ops.Load())/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// runBatches executes n doorbell batches of size batch on qp.
func runBatches(b *testing.B, qp rdma.QueuePair, r rdma.Region, verb benchVerb, slot, batch, n int) {
	wrs := make([]rdma.WorkRequest, batch)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, benchPayload)
	}
	ctx := context.Background()
	for i := range n {
		for j := range wrs {
			wrs[j] = verb(r, slot, i*batch+j, bufs[j])
		}
		cs, err := rdma.Exec(ctx, qp, wrs...)
		if err != nil {
			b.Fatal(err)
		}
		if err := rdma.FirstError(cs); err != nil {
			b.Fatal(err)
		}
	}
}
