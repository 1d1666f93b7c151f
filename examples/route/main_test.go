package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/client"
)

// TestRunAgainstAnAPI runs the example against a stand-in management API.
func TestRunAgainstAnAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(client.APIError{Code: client.CodeNotAuthorized, Message: "no"})
			return
		}
		switch r.URL.Path {
		case client.TopologyPath:
			_ = json.NewEncoder(w).Encode(client.Topology{WorkerCount: 1, Epoch: 2, Workers: []client.Worker{{WorkerID: "cn-1"}}})
		case client.PartitionRoutePath:
			_ = json.NewEncoder(w).Encode(client.PartitionRoute{WorkerID: "cn-1", Source: client.SourceStaticFallback, Epoch: 2})
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("AURA_AUTH_TOKEN", "")
	if err := run("aura://h:1/tpcc?http_addr="+addr+"&token=tok", "r_orders", "1,3,2101"); err != nil {
		t.Fatal(err)
	}
	if err := run("aura://h:1/tpcc?http_addr="+addr, "r_orders", "1,3,2101"); !client.IsCode(err, client.CodeNotAuthorized) {
		t.Fatalf("without the token: %v", err)
	}
	t.Setenv("AURA_AUTH_TOKEN", "tok")
	if err := run("aura://h:1/tpcc?http_addr="+addr, "r_orders", "1,x"); err == nil {
		t.Fatal("bad key accepted")
	}
}
