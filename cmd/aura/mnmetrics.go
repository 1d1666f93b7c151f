package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/aura-runtime/aura/rdma"
)

// serveMNMetrics serves the memory node's verb counters in Prometheus text
// format on /metrics until ctx ends. The counters are read from the server at
// scrape time, so serving them costs nothing on the verb path.
func serveMNMetrics(ctx context.Context, addr string, stats func() rdma.Stats, log *slog.Logger) (string, func(), error) {
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

	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
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
