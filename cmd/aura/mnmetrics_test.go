package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"
)

func TestMNMetricsExposeVerbCounters(t *testing.T) {
	stats := rdma.Stats{Reads: 7, CAS: 3, CASFailed: 1, FAA: 2, Doorbells: 5}
	mem := rdma.NewMemory(1 << 20)
	if _, err := mem.Register("records", 4096); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveMNMetrics(context.Background(), "127.0.0.1:0", func() rdma.Stats { return stats },
		func() uint64 { return 2 }, mem, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`aura_mn_verbs_total{op="read"} 7`, `aura_mn_verbs_total{op="cas"} 3`,
		`aura_mn_cas_failed_total 1`, `aura_mn_verbs_total{op="faa"} 2`, `aura_mn_doorbells_total 5`,
		`aura_mn_memory_capacity_bytes 1048576`, `aura_mn_memory_registered_bytes 4096`, `aura_mn_regions 1`, `aura_mn_clients_refused_total 2`} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	parseMetrics(t, body)
	if st, b := get(t, "http://"+addr+healthzPath, ""); st != http.StatusOK || string(b) != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz: %d %q", st, b)
	}
}

// TestMNMetricsDurable: with --data-dir the memory node also exposes its
// log, snapshot and recovery counters, and docs/metrics.md has a row for
// every aura_mn_ family it writes.
func TestMNMetricsDurable(t *testing.T) {
	ds := durable.Stats{LogBytes: 4096, LogRecords: 30, Fsyncs: 3, FsyncSeconds: 0.5, MaxGroupRecords: 17,
		Durable: 30, Snapshots: 2, SnapshotSeconds: 0.25, SnapshotBytes: 1 << 20, RecoverySeconds: 1.5, Recovered: 12}
	mem := rdma.NewMemory(1 << 20)
	addr, stop, err := serveMNMetrics(context.Background(), "127.0.0.1:0", func() rdma.Stats { return rdma.Stats{} },
		func() uint64 { return 0 }, mem, func() durable.Stats { return ds },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	st, body := get(t, "http://"+addr+"/metrics", "")
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	for _, want := range []string{`aura_mn_log_bytes_total 4096`, `aura_mn_log_records_total 30`, `aura_mn_log_fsyncs_total 3`,
		`aura_mn_log_fsync_seconds_total 0.5`, `aura_mn_log_group_commit_max_records 17`, `aura_mn_log_durable_seq 30`,
		`aura_mn_snapshots_total 2`, `aura_mn_snapshot_errors_total 0`, `aura_mn_snapshot_last_seconds 0.25`,
		`aura_mn_snapshot_last_bytes 1048576`, `aura_mn_recovery_seconds 1.5`, `aura_mn_recovery_records 12`} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range parseMetrics(t, body) {
		if !strings.HasPrefix(name, "aura_mn_") {
			continue
		}
		f, _, _ := strings.Cut(name, "{")
		if !strings.Contains(string(doc), "| `"+f+"`") {
			t.Errorf("docs/metrics.md has no row for %s", f)
		}
	}
}
