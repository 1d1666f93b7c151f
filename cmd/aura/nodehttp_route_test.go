package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// mgmtNode is a TPC-C compute node "cn-1" with the owner path, the
// membership of it and of a second live member "cn-2" (so that the
// topology has two workers), and cn-1's management API, all in this
// process.
type mgmtNode struct {
	wl   *tpcc.Workload
	node *actors.Node
	ms   *mgmtServer
	base string
	logs *syncBuffer
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
	dev, layout := emulatedMN(t, wl, 256<<20)
	quiet := slog.New(slog.DiscardHandler)
	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.Logger = quiet
	ncfg.Ownership = &actors.OwnershipConfig{Names: []string{"cn-1", "cn-2"}}
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	var mems []*cluster.Membership
	for i, name := range []string{"cn-1", "cn-2"} {
		ccfg := cluster.DefaultTestConfig()
		ccfg.NodeName, ccfg.BindAddr, ccfg.BindPort, ccfg.Logger = name, "127.0.0.1", 0, quiet
		ccfg.Meta = cluster.Meta{RemoteAddr: fmt.Sprintf("127.0.0.1:%d", 8001+i), Roles: []string{cluster.RoleCN}}
		if i > 0 {
			ccfg.Seeds = []string{mems[0].Addr()}
		}
		mem, err := cluster.New(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Shutdown() })
		mems = append(mems, mem)
	}
	for deadline := time.Now().Add(10 * time.Second); len(mems[0].Members()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cn-1 sees %d members after 10 s", len(mems[0].Members()))
		}
	}
	var f mgmtFlags
	f.authToken = token
	opts, err := f.options(wl, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &mgmtNode{wl: wl, node: node, logs: &syncBuffer{}}
	n.ms = startMgmt(ln, node, mems[0], nil, slog.New(slog.NewTextHandler(n.logs, nil)), opts)
	t.Cleanup(n.ms.shutdown)
	n.base = "http://" + n.ms.Addr()
	return n
}

// install pushes m with roster (cn-1, cn-2, and any more names) to the
// node, as the planner does.
func (n *mgmtNode) install(t *testing.T, m *control.OwnerMap, more ...string) {
	t.Helper()
	ps, err := planner.PushesWithRoster(nil, m, append([]string{"cn-1", "cn-2"}, more...), 1<<20, "cn-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if ack := n.node.HandleOwnerMapPush(p); ack.GetError() != "" || ack.GetNeedFull() {
			t.Fatalf("push epoch %d: %v", m.Epoch, ack)
		}
	}
	if got := n.node.OwnerMapEpoch(); got != m.Epoch {
		t.Fatalf("installed epoch %d, want %d", got, m.Epoch)
	}
}

// call GETs path with the token (if any) and decodes the JSON body into v.
func call(t *testing.T, base, path, token string, v any) int {
	t.Helper()
	status, b := get(t, base+path, token)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v in %q", path, err, b)
		}
	}
	return status
}

func routePath(rule, key string) string {
	return client.PartitionRoutePath + "?" + url.Values{"rule": {rule}, "key": {key}}.Encode()
}

// TestPartitionRouteAgreesWithTheOwnerMap: for TPC-C rules, the route
// endpoint answers the owner of the key group's cohort in the installed
// OwnerMap, follows the map when a cohort moves, and falls back (saying
// so) for key groups in no cohort.
func TestPartitionRouteAgreesWithTheOwnerMap(t *testing.T) {
	n := startMgmtNode(t, "")
	wr := n.wl.Rule()
	orderKG := wr.KeyGroup(txn.Ref{Table: tpcc.TableOrder, Key: tpcc.OrderKey(1, 3, 2101)})
	stockKG := wr.KeyGroup(txn.Ref{Table: tpcc.TableStock, Key: tpcc.StockKey(2, 17)})

	// Before any map: the static fallback, warehouse % 2 over (cn-1, cn-2).
	var r client.PartitionRoute
	if st := call(t, n.base, routePath("r_orders", "1,3,2101"), "", &r); st != http.StatusOK ||
		r.Source != client.SourceStaticFallback || r.PartitionID != nil || r.WorkerID != "cn-2" || r.Epoch != 0 ||
		r.KeyGroup != orderKG || r.PartitionValue != 1 || r.Table != "ORDER" || r.AnsweredBy != "cn-1" {
		t.Fatalf("before any map: %d %+v", st, r)
	}

	m := &control.OwnerMap{Epoch: 3, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 40, KeyGroups: []control.KeyGroup{orderKG}}, Owner: 0},
		{Cohort: control.Cohort{ID: 41, KeyGroups: []control.KeyGroup{stockKG}}, Owner: 1}}}
	n.install(t, m)
	check := func(rule, key string, cohort uint64, worker string, epoch uint64) {
		t.Helper()
		var r client.PartitionRoute
		st := call(t, n.base, routePath(rule, key), "", &r)
		if st != http.StatusOK || r.Source != client.SourceCohort || r.PartitionID == nil || *r.PartitionID != cohort ||
			r.WorkerID != worker || r.Epoch != epoch || r.Rule != rule {
			t.Fatalf("%s %s: %d %+v, want cohort %d on %s at epoch %d", rule, key, st, r, cohort, worker, epoch)
		}
		// The worker is the one the topology lists as owning that cohort.
		var topo client.Topology
		call(t, n.base, client.TopologyPath, "", &topo)
		for _, w := range topo.Workers {
			owns := false
			for _, p := range w.PartitionIDs {
				owns = owns || p == cohort
			}
			if owns != (w.WorkerID == worker) || owns && (w.Address != r.Address || w.WorkerIndex != r.WorkerIndex) {
				t.Fatalf("%s %s: route %+v disagrees with topology worker %+v", rule, key, r, w)
			}
		}
	}
	check("r_orders", "1,3,2101", 40, "cn-1", 3)
	check("r_stock", "2,17", 41, "cn-2", 3)
	// The workload's own rule over (table_id, record_key) agrees.
	check("tpcc_warehouse", fmt.Sprintf("%d,%d", tpcc.TableStock, tpcc.StockKey(2, 17)), 41, "cn-2", 3)

	// The cohort moves: the answer follows the next map.
	m2 := m.Clone()
	m2.Epoch = 4
	m2.Cohorts[0].Owner = 1
	n.install(t, m2)
	check("r_orders", "1,3,2101", 40, "cn-2", 4)

	// A key group in no cohort: the static fallback; with a fallback table
	// in the map, the table.
	if st := call(t, n.base, routePath("r_customer", "3,1,1"), "", &r); st != http.StatusOK ||
		r.Source != client.SourceStaticFallback || r.PartitionID != nil || r.WorkerID != "cn-2" || r.PartitionValue != 3 {
		t.Fatalf("unowned: %d %+v", st, r)
	}
	m3 := m2.Clone()
	m3.Epoch, m3.Fallback = 5, []uint8{0}
	n.install(t, m3)
	if st := call(t, n.base, routePath("r_customer", "3,1,1"), "", &r); st != http.StatusOK ||
		r.Source != client.SourceFallbackTable || r.PartitionID != nil || r.WorkerID != "cn-1" || r.Epoch != 5 {
		t.Fatalf("fallback table: %d %+v", st, r)
	}
	// epoch ≤ the node's: answered; above: StaleEpoch.
	if st := call(t, n.base, routePath("r_orders", "1,3,2101")+"&epoch=5", "", &r); st != http.StatusOK || r.Epoch != 5 {
		t.Fatalf("epoch=5: %d %+v", st, r)
	}
	var e client.APIError
	if st := call(t, n.base, routePath("r_orders", "1,3,2101")+"&epoch=6", "", &e); st != http.StatusConflict ||
		e.Code != client.CodeStaleEpoch || !strings.Contains(e.Message, "epoch 5") {
		t.Fatalf("epoch=6: %d %+v", st, e)
	}
}

// TestPartitionRouteErrors: every parameter problem is a JSON error with
// its code and status, never a panic or a 500.
func TestPartitionRouteErrors(t *testing.T) {
	n := startMgmtNode(t, "")
	// A cohort owned by a roster member that is not live.
	wr := n.wl.Rule()
	kg := wr.KeyGroup(txn.Ref{Table: tpcc.TableWarehouse, Key: tpcc.WarehouseKey(2)})
	n.install(t, &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 9, KeyGroups: []control.KeyGroup{kg}}, Owner: 2}}}, "cn-3")
	long := strings.Repeat("1,", 600) + "1"
	for _, c := range []struct {
		query  string
		status int
		code   string
		msg    string
	}{
		{"", http.StatusBadRequest, client.CodeBadRequest, "missing parameter rule"},
		{"rule=r_orders", http.StatusBadRequest, client.CodeBadRequest, "missing parameter key"},
		{"key=1,2", http.StatusBadRequest, client.CodeBadRequest, "missing parameter rule"},
		{"rule=r_orders&key=", http.StatusBadRequest, client.CodeBadRequest, "empty key tuple"},
		{"rule=r_orders&key=1,x,3", http.StatusBadRequest, client.CodeBadRequest, "not an unsigned decimal"},
		{"rule=r_orders&key=1,-3,3", http.StatusBadRequest, client.CodeBadRequest, "not an unsigned decimal"},
		{"rule=r_orders&key=1,,3", http.StatusBadRequest, client.CodeBadRequest, "empty"},
		{"rule=r_orders&key=1,3,99999999999999999999", http.StatusBadRequest, client.CodeBadRequest, "above"},
		{"rule=r_orders&key=1001,50001", http.StatusBadRequest, client.CodeBadRequest, "takes 3 key columns (w_id,d_id,o_id), got 2"},
		{"rule=r_orders&key=1,2,3,4,5,6,7,8,9", http.StatusBadRequest, client.CodeBadRequest, "at most 8"},
		{"rule=r_orders&key=1,11,3", http.StatusBadRequest, client.CodeBadRequest, "d_id = 11 outside [1, 10]"},
		{"rule=r_orders&key=" + long, http.StatusBadRequest, client.CodeBadRequest, "at most 1024"},
		{"rule=r_orders&key=1,2,3&key=1,2,3", http.StatusBadRequest, client.CodeBadRequest, "given 2 times"},
		{"rule=r_orders&key=1,2,3&x=1", http.StatusBadRequest, client.CodeBadRequest, `unknown parameter "x"`},
		{"rule=r_orders&key=1,2,3&epoch=-1", http.StatusBadRequest, client.CodeBadRequest, "epoch"},
		{"rule=r_orders&key=1,2,3&epoch=", http.StatusBadRequest, client.CodeBadRequest, "epoch"},
		{"rule=r_orders&key=1,2,3;", http.StatusBadRequest, client.CodeBadRequest, "malformed query"},
		{"rule=%zz&key=1", http.StatusBadRequest, client.CodeBadRequest, "malformed query"},
		{"rule=" + strings.Repeat("r", 65) + "&key=1", http.StatusBadRequest, client.CodeBadRequest, "at most 64"},
		{"rule=r_nope&key=1,2", http.StatusNotFound, client.CodeNoSuchRule, `no rule "r_nope"; this node serves: default_range, r_customer`},
		{"rule=r_orders&key=5,1,1", http.StatusNotFound, client.CodeNoSuchPartition, "warehouse 5, the workload has warehouses 1..4"},
		{"rule=r_warehouse&key=2", http.StatusNotFound, client.CodeNoSuchPartition, "cohort 9 is owned by index 2 (cn-3, not live)"},
		{"rule=tpcc_warehouse&key=99,1", http.StatusBadRequest, client.CodeBadRequest, "no table 99"},
		{"rule=r_orders&key=1,2,3&epoch=2", http.StatusConflict, client.CodeStaleEpoch, "epoch 1"},
	} {
		var e client.APIError
		st := call(t, n.base, client.PartitionRoutePath+"?"+c.query, "", &e)
		if st != c.status || e.Code != c.code || !strings.Contains(e.Message, c.msg) {
			t.Errorf("?%.60s: %d %+v, want %d %s containing %q", c.query, st, e, c.status, c.code, c.msg)
		}
	}
}

// TestMgmtAuth: with a token, every endpoint (and unknown paths) refuses
// requests without it or with another, 401 NotAuthorized, logged and
// counted; with it, they answer as without authentication.
func TestMgmtAuth(t *testing.T) {
	const token = "s3cret-T0ken"
	n := startMgmtNode(t, token)
	paths := []string{client.TopologyPath, client.OwnerMapPath, routePath("r_orders", "1,3,2101"), "/nope"}
	refused := 0
	for _, p := range paths {
		for _, hdr := range []string{"", "Bearer wrong", "Basic " + token, "Bearer " + token + "x", "Bearer"} {
			req, _ := http.NewRequest(http.MethodGet, n.base+p, nil)
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e client.APIError
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			refused++
			if resp.StatusCode != http.StatusUnauthorized || e.Code != client.CodeNotAuthorized ||
				resp.Header.Get("WWW-Authenticate") == "" || strings.Contains(e.Message, token) {
				t.Errorf("%s with %q: %d %+v", p, hdr, resp.StatusCode, e)
			}
		}
	}
	if got := n.ms.AuthFailures(); got != uint64(refused) {
		t.Errorf("%d refusals counted, want %d", got, refused)
	}
	logs := n.logs.String()
	if !strings.Contains(logs, "management API request refused") || strings.Contains(logs, token) {
		t.Errorf("log: %s", logs)
	}
	if strings.Count(logs, "request refused") > 2 {
		t.Errorf("refusals not rate-limited in the log:\n%s", logs)
	}
	var topo client.Topology
	if st := call(t, n.base, client.TopologyPath, token, &topo); st != http.StatusOK || topo.WorkerCount != 2 {
		t.Fatalf("topology with the token: %d %+v", st, topo)
	}
	var r client.PartitionRoute
	if st := call(t, n.base, routePath("r_orders", "1,3,2101"), token, &r); st != http.StatusOK || r.WorkerID == "" {
		t.Fatalf("route with the token: %d %+v", st, r)
	}
	var e client.APIError
	if st := call(t, n.base, routePath("r_nope", "1"), token, &e); st != http.StatusNotFound || e.Code != client.CodeNoSuchRule {
		t.Fatalf("unknown rule with the token: %d %+v", st, e)
	}

	// The client library sends the URL's token.
	u, err := client.ParseURL("aura://127.0.0.1:8001/tpcc?http_addr=" + n.ms.Addr() + "&token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if topo, err := client.FetchTopology(ctx, u); err != nil || topo.WorkerCount != 2 {
		t.Fatalf("FetchTopology: %+v %v", topo, err)
	}
	if r, err := client.NewAPI(u).PartitionRoute(ctx, "r_stock", []uint64{1, 5}, 0); err != nil || r.Source != client.SourceStaticFallback {
		t.Fatalf("PartitionRoute: %+v %v", r, err)
	}
	u.Token = "other"
	if _, err := client.FetchTopology(ctx, u); !client.IsCode(err, client.CodeNotAuthorized) || strings.Contains(err.Error(), "other") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestMgmtOptions(t *testing.T) {
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses = 2
	wl, err := tpcc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == authTokenEnv {
				return v
			}
			return ""
		}
	}
	f := mgmtFlags{}
	if o, err := f.options(wl, env("from-env")); err != nil || o.AuthToken != "from-env" || o.Rules.Len() != 11 {
		t.Fatalf("env token: %+v %v", o, err)
	}
	f.authToken = "from-flag"
	if o, err := f.options(wl, env("from-env")); err != nil || o.AuthToken != "from-flag" {
		t.Fatalf("flag token: %+v %v", o, err)
	}
	f.authToken = "has space"
	if _, err := f.options(wl, env("")); err == nil || !strings.Contains(err.Error(), "--auth-token") {
		t.Fatalf("bad token: %v", err)
	}
	f = mgmtFlags{rulesFile: "testdata/no-such-rules.json"}
	if _, err := f.options(wl, env("")); err == nil || !strings.Contains(err.Error(), "--rules") {
		t.Fatalf("missing rules file: %v", err)
	}
}

// FuzzParseRouteQuery: the route query parser never panics, and what it
// accepts is within its bounds.
func FuzzParseRouteQuery(f *testing.F) {
	for _, s := range []string{"rule=r_orders&key=1,3,2101", "rule=r&key=1&epoch=7", "", "rule=&key=", "key=1,,2", "rule=%zz",
		"rule=a&key=1&key=2", "rule=a&key=18446744073709551616", "rule=a;key=1", "epoch=+1&rule=a&key=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseRouteQuery(raw)
		if err != nil {
			return
		}
		if q.rule == "" || len(q.rule) > 64 || len(q.key) == 0 || len(q.key) > 8 || len(raw) > maxRouteQueryBytes {
			t.Fatalf("%q: accepted %+v", raw, q)
		}
	})
}
