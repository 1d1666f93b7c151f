package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"
)

// serveMNMetrics serves the memory node's verb counters and memory in
// Prometheus text format on /metrics (docs/metrics.md), and liveness on
// /healthz, until stopped. The counters are read from the server at scrape
// time, so serving them costs nothing on the verb path. mem and refused
// (the clients refused for their token) may be nil.
func serveMNMetrics(ctx context.Context, addr string, stats func() rdma.Stats, refused func() uint64, mem *rdma.Memory,
	dstats func() durable.Stats, log *slog.Logger) (string, func(), error) {
	set := metrics.NewSet()
	counter := func(name string, get func(rdma.Stats) uint64) {
		set.NewGauge(name, func() float64 { return float64(get(stats())) })
	}
	counter(`aura_mn_verbs_total{op="read"}`, func(s rdma.Stats) uint64 { return s.Reads })
	counter(`aura_mn_verbs_total{op="write"}`, func(s rdma.Stats) uint64 { return s.Writes })
	counter(`aura_mn_verbs_total{op="cas"}`, func(s rdma.Stats) uint64 { return s.CAS })
	counter(`aura_mn_verbs_total{op="faa"}`, func(s rdma.Stats) uint64 { return s.FAA })
	counter(`aura_mn_cas_failed_total`, func(s rdma.Stats) uint64 { return s.CASFailed })
	counter(`aura_mn_doorbells_total`, func(s rdma.Stats) uint64 { return s.Doorbells })
	counter(`aura_mn_verb_errors_total`, func(s rdma.Stats) uint64 { return s.Errors })
	counter(`aura_mn_bytes_total{dir="read"}`, func(s rdma.Stats) uint64 { return s.BytesRead })
	counter(`aura_mn_bytes_total{dir="write"}`, func(s rdma.Stats) uint64 { return s.BytesWritten })
	if refused != nil {
		set.NewGauge(`aura_mn_clients_refused_total`, func() float64 { return float64(refused()) })
	}
	if mem != nil {
		set.NewGauge(`aura_mn_memory_capacity_bytes`, func() float64 { return float64(mem.Capacity()) })
		// One Regions call per gauge and scrape: a handful of regions.
		set.NewGauge(`aura_mn_memory_registered_bytes`, func() float64 {
			var n uint64
			for _, r := range mem.Regions() {
				n += r.Length
			}
			return float64(n)
		})
		set.NewGauge(`aura_mn_regions`, func() float64 { return float64(len(mem.Regions())) })
	}

	if dstats != nil {
		// The durable memory node's log and snapshots (--data-dir).
		gauge := func(name string, get func(durable.Stats) float64) {
			set.NewGauge(name, func() float64 { return get(dstats()) })
		}
		gauge(`aura_mn_log_bytes_total`, func(s durable.Stats) float64 { return float64(s.LogBytes) })
		gauge(`aura_mn_log_records_total`, func(s durable.Stats) float64 { return float64(s.LogRecords) })
		gauge(`aura_mn_log_fsyncs_total`, func(s durable.Stats) float64 { return float64(s.Fsyncs) })
		gauge(`aura_mn_log_fsync_seconds_total`, func(s durable.Stats) float64 { return s.FsyncSeconds })
		gauge(`aura_mn_log_group_commit_max_records`, func(s durable.Stats) float64 { return float64(s.MaxGroupRecords) })
		gauge(`aura_mn_log_durable_seq`, func(s durable.Stats) float64 { return float64(s.Durable) })
		gauge(`aura_mn_snapshots_total`, func(s durable.Stats) float64 { return float64(s.Snapshots) })
		gauge(`aura_mn_snapshot_errors_total`, func(s durable.Stats) float64 { return float64(s.SnapshotErrors) })
		gauge(`aura_mn_snapshot_last_seconds`, func(s durable.Stats) float64 { return s.SnapshotSeconds })
		gauge(`aura_mn_snapshot_last_bytes`, func(s durable.Stats) float64 { return float64(s.SnapshotBytes) })
		gauge(`aura_mn_recovery_seconds`, func(s durable.Stats) float64 { return s.RecoverySeconds })
		gauge(`aura_mn_recovery_records`, func(s durable.Stats) float64 { return float64(s.Recovered) })
	}

	mux := http.NewServeMux()
	mux.HandleFunc(healthzPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc(metricsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		set.WritePrometheus(w)
		metrics.WriteProcessMetrics(w)
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
	return l.Addr().String(), stop, nil
}
