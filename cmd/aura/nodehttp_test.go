package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
)

// TestTopologyEndpointOfALoneNode serves the management API of one node in
// this process (no map installed yet): the topology lists the node with
// index 0 and epoch 0, the OwnerMap is an empty version-2 manifest, and
// errors are JSON with their status.
func TestTopologyEndpointOfALoneNode(t *testing.T) {
	ctx := context.Background()
	bcfg := bank.DefaultConfig()
	bcfg.Accounts = 100
	wl, err := bank.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, layout := emulatedMN(t, wl, 64<<20)
	quiet := slog.New(slog.DiscardHandler)
	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.Logger = quiet
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ccfg := cluster.DefaultTestConfig()
	ccfg.NodeName, ccfg.BindAddr, ccfg.BindPort, ccfg.Logger = "cn-1", "127.0.0.1", 0, quiet
	ccfg.Meta = cluster.Meta{RemoteAddr: "127.0.0.1:8001", Roles: []string{cluster.RoleCN}}
	mem, err := cluster.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer mem.Shutdown()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := startMgmt(ln, node, mem, nil, quiet, mgmtOptions{})
	base := "http://" + ms.Addr()

	var topo client.Topology
	status, hdr := getJSON(t, http.MethodGet, base+client.TopologyPath, &topo)
	if status != http.StatusOK || hdr.Get(client.EpochHeader) != "0" {
		t.Fatalf("topology: %d %v", status, hdr)
	}
	if topo.WorkerCount != 1 || topo.Epoch != 0 || topo.TCPBaseListenPort != 8001 || topo.TCPMultiPort || len(topo.Workers) != 1 {
		t.Fatalf("topology %+v", topo)
	}
	if w := topo.Workers[0]; w.WorkerIndex != 0 || w.WorkerID != "cn-1" || w.Address != "127.0.0.1:8001" || w.TCPListenPort != 8001 ||
		w.PartitionIDs == nil || len(w.PartitionIDs) != 0 {
		t.Fatalf("worker %+v", w)
	}
	resp, err := http.Get(base + client.OwnerMapPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m, _, err := manifest.Decode(b, manifest.DecodeOptions{})
	if err != nil || m.Epoch != 0 || len(m.Cohorts) != 0 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(b)) {
		t.Fatalf("ownermap: %v %+v %v", err, m, resp.Header)
	}
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/management/partition-route", http.StatusBadRequest, "BadRequest"},
		{http.MethodPost, "/management/partition-route?rule=bank_range&key=1,1", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{http.MethodGet, "/management/partition-route?rule=bank_range&key=1,1", http.StatusNotFound, "NoSuchRule"},
		{http.MethodGet, "/no-such-endpoint", http.StatusNotFound, "NotFound"}, // "/" redirects to the dashboard
		{http.MethodDelete, client.OwnerMapPath, http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{http.MethodGet, client.OwnerMapPath + "?epoch=3", http.StatusBadRequest, "BadRequest"},
	} {
		var e client.APIError
		if status, _ := getJSON(t, c.method, base+c.path, &e); status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s %s: %d %+v, want %d %s", c.method, c.path, status, e, c.status, c.code)
		}
	}

	done := make(chan struct{})
	go func() { ms.shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown took more than 5 s")
	}
	if _, err := http.Get(base + client.TopologyPath); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// emulatedMN returns a device on a new emulated memory node of size bytes
// (closed with the test) with wl's tables created, not loaded.
func emulatedMN(t *testing.T, wl workload.Workload, bytes uint64) (*rdma.MemDevice, *store.Layout) {
	t.Helper()
	dev, err := rdma.NewMemDevice(rdma.NewMemory(bytes), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	layout, err := store.Create(context.Background(), dev, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return dev, layout
}
