package occ_test

import (
	"context"
	"testing"

	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// BenchmarkRecoveryScan measures the restart recovery of a node whose
// previous incarnation did not close its redo log: a scan of every slot of
// the default TPC-C tables (16 warehouses; the tables are created, not
// loaded: the scan reads every slot either way) on the in-process memory
// node. One op is one OpenRedoLog that scans.
//
//	go test ./occ -run XXX -bench RecoveryScan -benchtime 3x
func BenchmarkRecoveryScan(b *testing.B) {
	ctx := context.Background()
	wl, err := tpcc.New(tpcc.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	dev, err := rdma.NewMemDevice(rdma.NewMemory(8<<30), rdma.MemConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		b.Fatal(err)
	}
	cfg := occ.RedoConfig{Node: 3, Slots: 8, RecordBytes: occ.DefaultRedoRecordBytes, RepairAfter: occ.DefaultRepairAfter}
	var slots uint64
	for b.Loop() {
		b.StopTimer()
		// Leaves the log marked running, as a crash does.
		if _, _, err := occ.OpenRedoLog(ctx, dev, layout, cfg); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, rec, err := occ.OpenRedoLog(ctx, dev, layout, cfg)
		if err != nil || !rec.Scanned {
			b.Fatalf("recovery %+v, %v", rec, err)
		}
		slots = rec.Slots
	}
	b.ReportMetric(float64(slots), "slots")
}
