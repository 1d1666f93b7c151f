package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rules"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// mgmtNode is a TPC-C compute node with the owner path, its membership
// and its management API, all in this process, plus a second live member
// ("cn-2") so that the topology has two workers.
type mgmtNode struct {
	wl   *tpcc.Workload
	node *actors.Node
	ms   *mgmtServer
	base string
	logs *bytes.Buffer
}

// startMgmtNode starts the node; token "" turns authentication off.
func startMgmtNode(t *testing.T, token string) *mgmtNode {
	t.Helper()
	ctx := context.Background()
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses, cfg.ItemCount, cfg.CustomersPerDistrict, cfg.ExpectedNewOrders = 4, 1000, 300, 1000
	wl, err := tpcc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rdma.NewMemDevice(rdma.NewMemory(256<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.Logger = quiet
	ncfg.Ownership = &actors.OwnershipConfig{Names: []string{"cn-1", "cn-2"}}
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	var seeds []string
	for i, name := range []string{"cn-1", "cn-2"} {
		ccfg := cluster.DefaultTestConfig()
		ccfg.NodeName, ccfg.BindAddr, ccfg.BindPort, ccfg.Logger, ccfg.Seeds = name, "127.0.0.1", 0, quiet, seeds
		ccfg.Meta = cluster.Meta{RemoteAddr: "127.0.0.1:800" + string(rune('1'+i)), Roles: []string{cluster.RoleCN}}
		mem, err := cluster.New(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Shutdown() })
		if i == 0 {
			seeds = []string{mem.Addr()}
			defer func(mem *cluster.Membership) { startMgmtOn(t, mem, node, wl, token, &seeds) }(mem)
		}
	}
	n := &mgmtNode{wl: wl, node: node, logs: &bytes.Buffer{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rules.ForWorkload(wl)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := rules.NewRegistry(rs...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: n.logs}, nil))
	n.ms = startMgmt(ln, node, memOf(t), nil, log, mgmtOptions{Rules: reg, Workload: wl, AuthToken: token})
	t.Cleanup(n.ms.shutdown)
	n.base = "http://" + n.ms.Addr()
	return n
}
