package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPICalls: the API sends the bearer token, encodes the route query,
// decodes answers and turns {code, message} errors into *APIError.
func TestAPICalls(t *testing.T) {
	var gotAuth, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotQuery = r.Header.Get("Authorization"), r.URL.RawQuery
		switch r.URL.Path {
		case TopologyPath:
			_ = json.NewEncoder(w).Encode(Topology{WorkerCount: 1, Epoch: 4, Workers: []Worker{{WorkerID: "cn-1", Address: "h:1"}}})
		case PartitionRoutePath:
			if r.URL.Query().Get("rule") == "r_nope" {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(APIError{Code: CodeNoSuchRule, Message: "no rule"})
				return
			}
			c := uint64(9)
			_ = json.NewEncoder(w).Encode(PartitionRoute{Rule: "r_orders", Key: []uint64{1, 3, 2101}, PartitionID: &c, WorkerID: "cn-1", Epoch: 4})
		case "/huge":
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("not json"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	u := URL{Host: "h", Port: 1, HTTPAddr: strings.TrimPrefix(srv.URL, "http://"), Token: "t0k"}
	topo, err := FetchTopology(ctx, u)
	if err != nil || topo.Epoch != 4 || gotAuth != "Bearer t0k" {
		t.Fatalf("topology: %+v %v auth %q", topo, err, gotAuth)
	}
	api := NewAPI(u)
	r, err := api.PartitionRoute(ctx, "r_orders", []uint64{1, 3, 2101}, 4)
	if err != nil || r.PartitionID == nil || *r.PartitionID != 9 || gotQuery != "epoch=4&key=1%2C3%2C2101&rule=r_orders" {
		t.Fatalf("route: %+v %v query %q", r, err, gotQuery)
	}
	_, err = api.PartitionRoute(ctx, "r_nope", []uint64{1}, 0)
	var ae *APIError
	if !IsCode(err, CodeNoSuchRule) || !errors.As(err, &ae) || ae.Status != http.StatusNotFound || IsCode(err, CodeBadRequest) {
		t.Fatalf("unknown rule: %v", err)
	}
	if _, err := api.PartitionRoute(ctx, "", []uint64{1}, 0); err == nil {
		t.Fatal("empty rule accepted")
	}
	if _, err := api.PartitionRoute(ctx, "r", make([]uint64, 9), 0); err == nil {
		t.Fatal("9 key values accepted")
	}
	if _, _, err := api.get(ctx, "/other", 1024); !IsCode(err, "Bad Gateway") {
		t.Fatalf("non-JSON error: %v", err)
	}
	small := &API{Addr: u.HTTPAddr, MaxResponseBytes: 1024}
	if _, _, err := small.get(ctx, "/huge", small.limit()); err == nil || !strings.Contains(err.Error(), "above 1024 bytes") {
		t.Fatalf("huge: %v", err)
	}
	if gotAuth != "" {
		t.Fatalf("token sent without one: %q", gotAuth)
	}
}
