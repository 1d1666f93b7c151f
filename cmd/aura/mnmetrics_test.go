package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

func TestMNMetricsExposeVerbCounters(t *testing.T) {
	stats := rdma.Stats{Reads: 7, CAS: 3, CASFailed: 1, FAA: 2, Doorbells: 5}
	mem := rdma.NewMemory(1 << 20)
	if _, err := mem.Register("records", 4096); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveMNMetrics(context.Background(), "127.0.0.1:0", func() rdma.Stats { return stats },
		func() uint64 { return 2 }, mem,
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
