package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseProcessCPU(t *testing.T) {
	page := "# HELP process_cpu_seconds_total CPU\n# TYPE process_cpu_seconds_total counter\n" +
		"process_cpu_seconds_total_x 9\nprocess_cpu_seconds_total 12.5\ngo_goroutines 40\n"
	v, err := parseProcessCPU([]byte(page))
	if err != nil || v != 12.5 {
		t.Fatalf("parse = %v, %v; want 12.5", v, err)
	}
	if _, err := parseProcessCPU([]byte("go_goroutines 40\n")); err == nil {
		t.Fatal("a page without the series parsed")
	}
	if _, err := parseProcessCPU([]byte("process_cpu_seconds_total NaNx\n")); err == nil {
		t.Fatal("a bad value parsed")
	}
	if v, err := parseProcessCPU([]byte("process_cpu_seconds_total 3 1700000000000\n")); err != nil || v != 3 {
		t.Fatalf("with a timestamp: %v, %v", v, err)
	}
}

func TestProcessCPUSecondsSendsTheToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != MetricsPath || r.Header.Get("Authorization") != "Bearer tk" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("process_cpu_seconds_total 7.25\n"))
	}))
	defer srv.Close()
	a := &API{Addr: strings.TrimPrefix(srv.URL, "http://"), Token: "tk"}
	if v, err := a.ProcessCPUSeconds(context.Background()); err != nil || v != 7.25 {
		t.Fatalf("ProcessCPUSeconds = %v, %v", v, err)
	}
	a.Token = ""
	if _, err := a.ProcessCPUSeconds(context.Background()); err == nil {
		t.Fatal("no error without the token")
	}
}
