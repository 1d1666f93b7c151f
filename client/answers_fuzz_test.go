package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
)

// answers is an http.RoundTripper serving fixed management API bodies, so
// a fuzz input reaches the client's decoders without a socket.
type answers struct{ topology, ownermap []byte }

func (a answers) RoundTrip(r *http.Request) (*http.Response, error) {
	body := a.topology
	if r.URL.Path == OwnerMapPath {
		body = a.ownermap
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

// FuzzManagementAnswers gives a client arbitrary answers to its topology
// and OwnerMap requests (a compromised or buggy node, or a proxy in the
// way). Refreshing may fail, never panic; whatever the client accepts, it
// routes every transaction to a worker of the topology it accepted.
func FuzzManagementAnswers(f *testing.F) {
	m := &control.OwnerMap{Epoch: 7, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 42, KeyGroups: []control.KeyGroup{1, 2}}, Owner: 2}}}
	topo := NewTopology(map[string]string{"cn-1": "127.0.0.1:8001", "cn-2": "127.0.0.1:8002", "cn-3": "127.0.0.1:8003"},
		[]string{"cn-1", "cn-2", "cn-3"}, m)
	tb, err := json.Marshal(topo)
	if err != nil {
		f.Fatal(err)
	}
	mb, err := manifest.Encode(m, manifest.Version2, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tb, mb)
	f.Add(tb, []byte{})
	f.Add([]byte(`{"workers":[{"worker_index":-1,"worker_id":"x","address":"h:1"}]}`), mb)
	f.Add([]byte(`{"workers":[{"worker_index":0,"worker_id":"a","address":"h:1"}]}`), mb) // owner 2 names no worker
	f.Add([]byte(`null`), []byte(`null`))

	wl := testWorkload(f)
	gen := wl.NewGenerator(1, 0)
	msgs := make([]*messages.TxnSubmit, 64)
	for i := range msgs {
		msgs[i] = gen.Next()
	}
	sys := quietSystem()
	f.Cleanup(sys.Shutdown)
	f.Fuzz(func(t *testing.T, topology, ownermap []byte) {
		u, err := ParseURL("aura://127.0.0.1:8001/bank?http_addr=127.0.0.1:9")
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig(u, wl)
		cfg.HTTPClient = &http.Client{Transport: answers{topology, ownermap}}
		c, err := New(context.Background(), cfg, sys)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		workers := c.Workers()
		if len(workers) == 0 {
			t.Fatal("no worker to route to")
		}
		for _, msg := range msgs {
			r := c.Choose(msg, nil)
			if !slices.ContainsFunc(workers, func(w Worker) bool { return w.WorkerID == r.Worker.WorkerID }) {
				t.Fatalf("routed to %+v, not a worker of %+v", r.Worker, workers)
			}
		}
		if st := c.Stats(); !st.FromAPI && !strings.Contains(st.LastRefreshError, "client") {
			t.Fatalf("answer refused without a reason: %+v", st)
		}
	})
}
