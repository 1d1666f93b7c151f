package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload/bank"
)

// metricsNode is a loaded bank node "cn-1" with the owner path (roster
// cn-1 alone), its membership, metrics and management server, in this
// process; the server is started early and not attached yet.
type metricsNode struct {
	wl   *bank.Workload
	dev  *rdma.MemDevice
	node *actors.Node
	mem  *cluster.Membership
	nm   *nodeMetrics
	ms   *mgmtServer
	base string
}

func startMetricsNode(t *testing.T, token string) *metricsNode {
	t.Helper()
	ctx := context.Background()
	bcfg := bank.DefaultConfig()
	bcfg.Accounts = 256
	wl, err := bank.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, layout := emulatedMN(t, wl, 64<<20)
	ld, err := store.NewLoader(layout, dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := wl.Load(ctx, ld); err != nil {
		t.Fatal(err)
	}
	if err := ld.Close(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	n := &metricsNode{wl: wl, dev: dev, nm: newNodeMetrics()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.ms = startMgmtEarly(ln, quiet, mgmtOptions{AuthToken: token, Metrics: n.nm})
	t.Cleanup(n.ms.shutdown)
	n.base = "http://" + n.ms.Addr()

	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.Logger = quiet
	ncfg.Coordinators = 2
	ncfg.TxnLatency = n.nm.txnLatency
	ncfg.Ownership = &actors.OwnershipConfig{Names: []string{"cn-1"}}
	if n.node, err = actors.NewNode(ncfg, dev, layout, wl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.node.Close() })
	ccfg := cluster.DefaultTestConfig()
	ccfg.NodeName, ccfg.BindAddr, ccfg.BindPort, ccfg.Logger = "cn-1", "127.0.0.1", 0, quiet
	ccfg.Meta = cluster.Meta{RemoteAddr: "127.0.0.1:8001", Roles: []string{cluster.RoleCN}}
	if n.mem, err = cluster.New(ccfg); err != nil {
		t.Fatal(err)
	}
	if err := n.mem.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.mem.Shutdown() })
	return n
}

func (n *metricsNode) attach() {
	n.nm.attach(n.node, n.mem, n.dev.Stats, nil)
	n.ms.attach(n.node, n.mem, nil)
}

// installAll gives cn-1 one cohort with every key group of the accounts,
// so that its locks are local.
func (n *metricsNode) installAll(t *testing.T, epoch uint64) {
	t.Helper()
	var kgs []control.KeyGroup
	for a := range n.wl.Config().Accounts {
		kgs = append(kgs, control.KeyGroup(n.wl.Rule().KeyGroup(bank.Ref(a))))
	}
	slices.Sort(kgs)
	m := &control.OwnerMap{Epoch: epoch, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: slices.Compact(kgs)}}}}
	ps, err := planner.PushesWithRoster(nil, m, []string{"cn-1"}, 1<<20, "cn-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if ack := n.node.HandleOwnerMapPush(p); ack.GetError() != "" || ack.GetNeedFull() {
			t.Fatalf("push epoch %d: %v", epoch, ack)
		}
	}
}

// run submits k generated transactions, with epochSeen as the client's
// map epoch.
func (n *metricsNode) run(t *testing.T, k int, seq *uint64, epochSeen uint64) {
	t.Helper()
	gen := n.wl.NewGenerator(7, 1)
	for range k {
		*seq++
		msg := gen.Next()
		msg.TxnId, msg.EpochSeen = *seq, epochSeen
		res, err := n.node.Submit(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		if o := res.GetOutcome(); o != messages.TxnOutcome_TXN_OUTCOME_COMMITTED && o != messages.TxnOutcome_TXN_OUTCOME_ABORTED {
			t.Fatalf("txn %d: %v %s", *seq, o, res.GetError())
		}
	}
}

// get GETs path with the token (if any) and returns the status and body.
func get(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sampleLine is one sample of the Prometheus text exposition format:
// name, optional {label="value",…}, a value.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:, ?[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (\S+)$`)

// parseMetrics parses an exposition, failing on any malformed or repeated
// sample, and returns the values by series (name and labels as written).
func parseMetrics(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a Prometheus sample line: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		key := m[1] + m[2]
		if _, dup := out[key]; dup {
			t.Fatalf("series %s written twice", key)
		}
		out[key] = v
	}
	return out
}

func scrape(t *testing.T, base, token string) map[string]float64 {
	t.Helper()
	st, body := get(t, base+metricsPath, token)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d %s", st, body)
	}
	return parseMetrics(t, body)
}

func wantReady(t *testing.T, base string, ready bool, msgPart string) {
	t.Helper()
	st, body := get(t, base+readyzPath, "")
	if ready {
		var r readyStatus
		if st != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Status != "ready" || r.Node != "cn-1" {
			t.Fatalf("/readyz: %d %s, want 200 ready", st, body)
		}
		return
	}
	var e client.APIError
	if st != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != codeNotReady || !strings.Contains(e.Message, msgPart) {
		t.Fatalf("/readyz: %d %s, want 503 NotReady with %q", st, body, msgPart)
	}
}

// TestNodeMetricsAndHealth: a node's management server answers /healthz
// at once and /readyz with 503 until the node is attached, ready, not
// ready while clients route by a map it lacks, ready once it has one, and
// not ready when shutting down; /metrics parses as Prometheus text, has
// the documented series, and its counters move with transactions.
func TestNodeMetricsAndHealth(t *testing.T) {
	n := startMetricsNode(t, "")
	if st, body := get(t, n.base+healthzPath, ""); st != http.StatusOK || string(body) != "{\"status\":\"ok\"}\n" {
		t.Fatalf("/healthz before attach: %d %q", st, body)
	}
	wantReady(t, n.base, false, "starting")
	if st, _ := get(t, n.base+client.TopologyPath, ""); st != http.StatusServiceUnavailable {
		t.Fatalf("topology before attach: %d", st)
	}
	before := scrape(t, n.base, "")
	if _, ok := before["aura_txn_duration_seconds_count"]; !ok {
		t.Fatalf("no latency histogram before attach: %v", before)
	}

	n.attach()
	wantReady(t, n.base, true, "")
	var seq uint64
	n.run(t, 5, &seq, 0) // no map anywhere yet: still ready (MN CAS path)
	wantReady(t, n.base, true, "")
	n.run(t, 1, &seq, 3) // a client routed by epoch 3: this node lacks it
	wantReady(t, n.base, false, "published epoch 3")
	n.installAll(t, 3)
	wantReady(t, n.base, true, "")

	m1 := scrape(t, n.base, "")
	n.run(t, 20, &seq, 3)
	m2 := scrape(t, n.base, "")
	for _, name := range []string{
		`aura_txn_total{type="bank_transfer",outcome="committed"}`, `aura_txn_total{type="bank_transfer",outcome="aborted"}`,
		`aura_txn_replayed_total`, `aura_txn_duration_seconds_count`, `aura_txn_duration_seconds_sum`,
		`aura_txn_duration_seconds_bucket{le="+Inf"}`,
		`aura_locks_total{path="local"}`, `aura_locks_total{path="owner_rpc"}`, `aura_locks_total{path="mn_cas"}`,
		`aura_lock_redirects_total`,
		`aura_verbs_total{op="read"}`, `aura_verbs_total{op="write"}`, `aura_verbs_total{op="cas"}`, `aura_verbs_total{op="faa"}`,
		`aura_cas_failed_total`, `aura_doorbells_total`, `aura_verb_errors_total`, `aura_verb_bytes_total{dir="read"}`,
		`aura_owner_rpc_duration_seconds_count{op="lock"}`, `aura_owner_rpc_errors_total{op="unlock"}`,
		`aura_cohorts{state="owned"}`, `aura_cohorts{state="frozen"}`, `aura_cohort_retire_errors_total`,
		`aura_lock_recovered_total{how="redone"}`, `aura_lock_recovered_total{how="released"}`,
		`aura_lock_repaired_total{how="redone"}`, `aura_lock_repaired_total{how="released"}`,
		`aura_lock_repair_moot_total`, `aura_lock_repair_dropped_total`,
		`aura_manifest_epoch`, `aura_manifest_bytes`, `aura_manifest_cohorts`, `aura_manifest_epoch_seen`,
		`aura_route_requests_total{source="static_fallback"}`,
		`aura_membership_members`, `aura_membership_epoch`, `aura_membership_events_total{kind="join"}`,
		`aura_membership_events_dropped_total`, `aura_membership_gossip_refused_total`, `aura_planner_active`,
		`aura_http_auth_refused_total`,
		`aura_migration_freeze_seconds_count`,
	} {
		if _, ok := m2[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for name := range m2 {
		if !strings.HasPrefix(name, "aura_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("unprefixed series %s", name)
		}
	}
	grew := func(name string) {
		t.Helper()
		if !(m2[name] > m1[name]) {
			t.Errorf("%s did not grow over 20 transactions: %v → %v", name, m1[name], m2[name])
		}
	}
	for _, name := range []string{`aura_txn_total{type="bank_transfer",outcome="committed"}`, `aura_txn_duration_seconds_count`,
		`aura_locks_total{path="local"}`, `aura_verbs_total{op="read"}`, `aura_verbs_total{op="write"}`, `aura_doorbells_total`} {
		grew(name)
	}
	if m2[`aura_manifest_epoch`] != 3 || m2[`aura_manifest_cohorts`] != 1 || m2[`aura_manifest_bytes`] <= 0 ||
		m2[`aura_cohorts{state="owned"}`] != 1 || m2[`aura_manifest_epoch_seen`] != 3 || m2[`aura_membership_members`] != 1 ||
		m2[`aura_membership_events_total{kind="join"}`] < 1 || m2[`aura_planner_active`] != 0 {
		t.Errorf("gauges: %v", m2)
	}
	for _, name := range []string{`aura_lock_recovered_total{how="redone"}`, `aura_lock_recovered_total{how="released"}`,
		`aura_lock_repaired_total{how="redone"}`, `aura_lock_repaired_total{how="released"}`,
		`aura_lock_repair_moot_total`, `aura_lock_repair_dropped_total`} {
		if m2[name] != 0 {
			t.Errorf("%s = %v on a node that recovered and repaired nothing", name, m2[name])
		}
	}
	if _, ok := m2[`aura_planner_ticks_total`]; ok {
		t.Error("planner series on a node without the planner")
	}
	// Every transaction is counted once by type and outcome.
	var txns float64
	for name, v := range m2 {
		if strings.HasPrefix(name, "aura_txn_total{") {
			txns += v
		}
	}
	if txns != float64(seq) || m2[`aura_txn_duration_seconds_count`] != float64(seq) {
		t.Errorf("%v transactions counted, %v timed, %d submitted", txns, m2[`aura_txn_duration_seconds_count`], seq)
	}
	// A resubmitted transaction is answered from the result cache.
	msg := n.wl.NewGenerator(7, 1).Next()
	msg.TxnId = 1
	if _, err := n.node.Submit(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if m3 := scrape(t, n.base, ""); m3[`aura_txn_replayed_total`] != m2[`aura_txn_replayed_total`]+1 {
		t.Errorf("replayed: %v → %v", m2[`aura_txn_replayed_total`], m3[`aura_txn_replayed_total`])
	}

	n.ms.leaving.Store(true) // what shutdown does first
	wantReady(t, n.base, false, "shutting down")
	if st, _ := get(t, n.base+healthzPath, ""); st != http.StatusOK {
		t.Fatalf("/healthz while leaving: %d", st)
	}
}

// TestMetricsAndHealthAuth: with a token, /metrics and the API need it,
// /healthz and /readyz do not.
func TestMetricsAndHealthAuth(t *testing.T) {
	const token = "m3trics-T0ken"
	n := startMetricsNode(t, token)
	n.attach()
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{healthzPath, "", http.StatusOK},
		{readyzPath, "", http.StatusOK},
		{healthzPath, "wrong", http.StatusOK},
		{metricsPath, "", http.StatusUnauthorized},
		{metricsPath, "wrong", http.StatusUnauthorized},
		{metricsPath, token, http.StatusOK},
		{client.TopologyPath, "", http.StatusUnauthorized},
		{client.TopologyPath, token, http.StatusOK},
	} {
		if st, body := get(t, n.base+c.path, c.token); st != c.status {
			t.Errorf("%s with token %q: %d %s, want %d", c.path, c.token, st, body, c.status)
		}
	}
	if got := n.ms.AuthFailures(); got != 3 {
		t.Errorf("%d refusals counted, want 3", got)
	}
	if m := scrape(t, n.base, token); m["aura_http_auth_refused_total"] != 3 {
		t.Errorf("aura_http_auth_refused_total %v, want 3", m["aura_http_auth_refused_total"])
	}
}

// fakeTransport answers every lock with err after a short wait.
type fakeTransport struct{ err error }

func (f fakeTransport) Lock(context.Context, string, *messages.LockRequest) (*messages.LockReply, error) {
	time.Sleep(time.Millisecond)
	return &messages.LockReply{}, f.err
}

func (f fakeTransport) Unlock(context.Context, string, *messages.UnlockRequest) (*messages.UnlockReply, error) {
	return &messages.UnlockReply{}, f.err
}

// TestOwnerRPCAndPlannerMetrics: owner RPCs through the timed transport
// land in the latency histogram (errors counted); the planner's Status is
// exported where it runs, and migration phase samples are fed into their
// histograms once each.
func TestOwnerRPCAndPlannerMetrics(t *testing.T) {
	st := planner.Status{Tick: 40, Epoch: 7, Acked: 6, Cohorts: 12, Heartbeats: 90, Roster: []string{"a", "", "c"},
		LastTickMicros: 1500, TickMicros: 30000, MaxTickMicros: 4200, Refines: 3, RefineMicros: 9000, RefinesDropped: 1, GraphNodes: 64, GraphEdges: 200,
		Transfer:     transfer.Stats{Rounds: 2, Started: 3, Moved: 2, Kept: 1, Stuck: 1},
		FreezeMicros: []int64{100, 2000, 50000}, DrainMicros: []int64{50, 60, 70}}
	m := newNodeMetrics()
	m.attach(nil, nil, nil, func(time.Duration) (planner.Status, bool) { return st, true })
	tr := m.timed(fakeTransport{})
	for range 3 {
		if _, err := tr.Lock(context.Background(), "cn-2", &messages.LockRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.timed(fakeTransport{err: errors.New("unreachable")}).Unlock(context.Background(), "cn-2", &messages.UnlockRequest{}); err == nil {
		t.Fatal("error swallowed")
	}
	if m.timed(nil) != nil {
		t.Fatal("nil transport wrapped")
	}
	read := func() map[string]float64 {
		var b bytes.Buffer
		m.writePrometheus(&b)
		return parseMetrics(t, b.Bytes())
	}
	got := read()
	for name, want := range map[string]float64{
		`aura_owner_rpc_duration_seconds_count{op="lock"}`: 3, `aura_owner_rpc_duration_seconds_count{op="unlock"}`: 1,
		`aura_owner_rpc_errors_total{op="lock"}`: 0, `aura_owner_rpc_errors_total{op="unlock"}`: 1,
		`aura_planner_active`: 1, `aura_planner_ticks_total`: 40, `aura_planner_tick_seconds`: 0.0015,
		`aura_planner_tick_seconds_total`: 0.03, `aura_planner_tick_max_seconds`: 0.0042, `aura_planner_refines_total`: 3, `aura_planner_refines_dropped_total`: 1,
		`aura_planner_refine_seconds_total`: 0.009, `aura_planner_graph_nodes`: 64, `aura_planner_graph_edges`: 200,
		`aura_planner_epoch`: 7, `aura_planner_acked_epoch`: 6, `aura_planner_cohorts`: 12, `aura_planner_roster_slots`: 2,
		`aura_migrations_total{outcome="moved"}`: 2, `aura_migrations_total{outcome="rolled_back"}`: 1,
		`aura_migrations_stuck_total`: 1, `aura_migration_rounds_total`: 2,
		`aura_migration_freeze_seconds_count`: 3, `aura_migration_drain_seconds_count`: 3,
		`aura_migration_freeze_seconds_bucket{le="0.01"}`: 2,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	// One more migration: only its sample is added.
	st.Transfer.Moved++
	st.FreezeMicros = append(st.FreezeMicros[1:], 300)
	st.DrainMicros = append(st.DrainMicros[1:], 80)
	if got := read(); got[`aura_migration_freeze_seconds_count`] != 4 || got[`aura_migration_drain_seconds_count`] != 4 {
		t.Errorf("after one more migration: %v", got)
	}
	if got := read(); got[`aura_migration_freeze_seconds_count`] != 4 {
		t.Errorf("a scrape without new migrations added samples: %v", got[`aura_migration_freeze_seconds_count`])
	}
}

// TestMetricsDocListsEveryMetric: docs/metrics.md has a row for every
// aura_ metric family a node or the memory node writes.
func TestMetricsDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := newNodeMetrics()
	st := planner.Status{Transfer: transfer.Stats{Moved: 1}, FreezeMicros: []int64{1}, DrainMicros: []int64{1}}
	m.attach(nil, nil, func() rdma.Stats { return rdma.Stats{} }, func(time.Duration) (planner.Status, bool) { return st, true })
	m.snap.txn.ByKind[1][1] = 1 // without a node, refresh leaves the transaction counts as they are
	var b bytes.Buffer
	m.writePrometheus(&b)
	families := map[string]bool{}
	for name := range parseMetrics(t, b.Bytes()) {
		if !strings.HasPrefix(name, "aura_") {
			continue
		}
		f := name
		if i := strings.IndexByte(f, '{'); i >= 0 {
			f = f[:i]
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(f, suffix); ok && strings.Contains(string(doc), "`"+base+"`") {
				f = base
			}
		}
		families[f] = true
	}
	for _, f := range []string{"aura_mn_verbs_total", "aura_mn_cas_failed_total", "aura_mn_doorbells_total",
		"aura_mn_verb_errors_total", "aura_mn_bytes_total", "aura_mn_memory_capacity_bytes", "aura_mn_memory_registered_bytes",
		"aura_mn_regions", "aura_mn_clients_refused_total", "aura_http_auth_refused_total"} {
		families[f] = true
	}
	for f := range families {
		if !strings.Contains(string(doc), "| `"+f+"`") {
			t.Errorf("docs/metrics.md has no row for %s", f)
		}
	}
	if len(families) < 40 {
		t.Errorf("only %d families found", len(families))
	}
}

// TestNodeIsLiveButNotReadyWhileWaitingForTables: `aura node --http`
// answers /healthz as soon as it starts, and /readyz (and the API) 503
// NotReady while it waits for the tables (--wait-load); stopping it then
// closes the port.
func TestNodeIsLiveButNotReadyWhileWaitingForTables(t *testing.T) {
	srv, err := tcp.NewServer(rdma.NewMemory(64<<20), tcp.ServerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mnLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(mnLn) }()
	defer srv.Close()
	h := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := newNodeCmd()
	cmd.SetArgs([]string{"--name", "cn-1", "--mn", mnLn.Addr().String(), "--http", h, "--workload", "bank",
		"--wait-load", "1m", "--test-timings", "--log-level", "error"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := "http://" + h
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", h, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("management port not bound after 10 s")
		}
	}
	if st, body := get(t, base+healthzPath, ""); st != http.StatusOK {
		t.Fatalf("/healthz while waiting for the tables: %d %s", st, body)
	}
	wantReady(t, base, false, "starting")
	if st, _ := get(t, base+client.TopologyPath, ""); st != http.StatusServiceUnavailable {
		t.Fatalf("topology while waiting for the tables: %d", st)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("node stopped with %v, want the cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node still waiting 10 s after cancellation")
	}
	if c, err := net.DialTimeout("tcp", h, time.Second); err == nil {
		c.Close()
		t.Fatal("management port still open after the node stopped")
	}
}
