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
	addr, stop, err := serveMNMetrics(context.Background(), "127.0.0.1:0", func() rdma.Stats { return stats },
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
		`aura_mn_cas_failed_total 1`, `aura_mn_verbs_total{op="faa"} 2`, `aura_mn_doorbells_total 5`} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}
