package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
)

// fakeAPI serves a topology and an OwnerMap; down makes it answer 503.
type fakeAPI struct {
	mu    sync.Mutex
	topo  Topology
	m     *control.OwnerMap
	down  atomic.Bool
	reads atomic.Int64 // topology requests served
	token string       // when set, the bearer token every request must carry
}

func (f *fakeAPI) set(topo Topology, m *control.OwnerMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topo, f.m = topo, m
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(APIError{Code: "Unavailable", Message: "down"})
		return
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(APIError{Code: CodeNotAuthorized, Message: "wrong token"})
		return
	}
	f.mu.Lock()
	topo, m := f.topo, f.m
	f.mu.Unlock()
	switch r.URL.Path {
	case TopologyPath:
		f.reads.Add(1)
		_ = json.NewEncoder(w).Encode(topo)
	case OwnerMapPath:
		b, err := manifest.Encode(m, manifest.Version2, 0)
		if err != nil {
			panic(err)
		}
		_, _ = w.Write(b)
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(APIError{Code: "NotFound", Message: r.URL.Path})
	}
}

func testWorkload(t testing.TB) workload.Workload {
	t.Helper()
	wl, err := bank.New(bank.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

// fakeNodeEnv makes the test binary a fake node (see runFakeNode): a
// process has one protoactor remote endpoint (its gRPC logger is global), so
// the tests' nodes are child processes and the client's endpoint is shared.
const fakeNodeEnv = "AURA_CLIENT_TEST_FAKE_NODE"

func TestMain(m *testing.M) {
	if v := os.Getenv(fakeNodeEnv); v != "" {
		runFakeNode(v)
		return
	}
	code := m.Run()
	if sharedRemote != nil {
		sharedRemote.Shutdown()
		sharedSystem.Shutdown()
	}
	os.Exit(code)
}

var (
	sharedOnce   sync.Once
	sharedSystem *actor.ActorSystem
	sharedRemote *actors.Remote
	sharedErr    error
)

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// testSystem is the test process's actor system with its remote endpoint.
func testSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sharedOnce.Do(func() {
		sharedSystem = quietSystem()
		sharedRemote, sharedErr = actors.StartRemote(sharedSystem, actors.DefaultRemoteConfig("127.0.0.1:0"))
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedSystem
}

// runFakeNode serves a txn actor answering every TxnSubmit with the outcome
// named by spec ("NAME:OUTCOME"; OUTCOME "none": no txn actor at all),
// prints its remote address and exits when its standard input closes.
func runFakeNode(spec string) {
	name, outcome, _ := strings.Cut(spec, ":")
	sys := quietSystem()
	rem, err := actors.StartRemote(sys, actors.DefaultRemoteConfig("127.0.0.1:0"))
	if err == nil && outcome != "none" {
		o := messages.TxnOutcome(messages.TxnOutcome_value[outcome])
		_, err = sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			if m, ok := ctx.Message().(*messages.TxnSubmit); ok {
				ctx.Respond(&messages.TxnResult{TxnId: m.GetTxnId(), Outcome: o, Node: name})
			}
		}), TxnActorName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(rem.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	rem.Shutdown()
	sys.Shutdown()
}

// fakeNode starts a fake node process answering with outcome (or none) and
// returns its remote address; it stops when the test ends.
func fakeNode(t *testing.T, name string, outcome string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeNodeEnv+"="+name+":"+outcome)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fake node: %v", err)
	}
	return strings.TrimSpace(line)
}

func newTestClient(t *testing.T, api *fakeAPI, nodeAddr string, tweak func(*Config)) *Client {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	u, err := ParseURL("aura://" + nodeAddr + "/bank?http_addr=" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(u, testWorkload(t))
	cfg.Call.AttemptTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(context.Background(), cfg, testSystem(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// writeKGs returns msg's write key groups, sorted and distinct.
func writeKGs(wl workload.Workload, msg *messages.TxnSubmit) []uint64 {
	var kgs []uint64
	for _, r := range wl.Footprint(msg).Writes {
		kgs = append(kgs, wl.Rule().KeyGroup(r))
	}
	slices.Sort(kgs)
	return slices.Compact(kgs)
}

func TestConfigValidateReportsEverything(t *testing.T) {
	var c Config
	err := c.Validate()
	for _, want := range []string{"URL", "Workload", "RefreshEvery", "HTTPTimeout", "MaxResponseBytes", "MaxWorkers", "MaxAttempts", "Call"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("zero Config: error %v does not mention %s", err, want)
		}
	}
	u, _ := ParseURL("aura://h:1/?http_addr=h:2")
	if err := DefaultConfig(u, testWorkload(t)).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestClientDecodesTopologyAndOwnerMap: the topology's workers and the
// OwnerMap's cohorts are read, a transaction whose write set a cohort holds
// goes to that cohort's owner, others by the static fallback.
func TestClientDecodesTopologyAndOwnerMap(t *testing.T) {
	wl := testWorkload(t)
	gen := wl.NewGenerator(1, 0)
	var msg *messages.TxnSubmit
	for msg == nil || len(writeKGs(wl, msg)) == 0 {
		msg = gen.Next()
	}
	m := &control.OwnerMap{Epoch: 7, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 42, KeyGroups: writeKGs(wl, msg)}, Owner: 2}}}
	live := map[string]string{"cn-1": "127.0.0.1:8001", "cn-2": "127.0.0.1:8002", "cn-3": "127.0.0.1:8003", "cn-4": "127.0.0.1:8004"}
	topo := NewTopology(live, []string{"cn-1", "", "cn-3", "cn-2"}, m)
	if topo.WorkerCount != 4 || topo.TCPBaseListenPort != 8001 || topo.Epoch != 7 || topo.TCPMultiPort {
		t.Fatalf("topology %+v", topo)
	}
	if w := topo.Workers[1]; w.WorkerID != "cn-3" || w.WorkerIndex != 2 || !slices.Equal(w.PartitionIDs, []uint64{42}) || w.TCPListenPort != 8003 {
		t.Fatalf("worker 1 = %+v", w)
	}
	if w := topo.Workers[3]; w.WorkerID != "cn-4" || w.WorkerIndex != -1 {
		t.Fatalf("unslotted worker = %+v", w)
	}
	api := &fakeAPI{}
	api.set(topo, m)
	c := newTestClient(t, api, "127.0.0.1:8001", nil)
	st := c.Stats()
	if !st.FromAPI || st.Epoch != 7 || st.Workers != 4 || st.Cohorts != 1 || st.ManifestBytes == 0 {
		t.Fatalf("stats after the first refresh: %+v", st)
	}
	if r := c.Choose(msg, nil); !r.Overlay || r.Worker.WorkerID != "cn-3" {
		t.Fatalf("owned write set routed to %+v, want cn-3 by the overlay", r)
	}
	if r := c.Choose(msg, []string{"cn-3"}); r.Overlay || r.Worker.WorkerID == "cn-3" {
		t.Fatalf("with cn-3 skipped: %+v", r)
	}
	// The static fallback spreads the rest over every worker.
	seen := map[string]bool{}
	for range 2000 {
		r := c.Choose(gen.Next(), nil)
		if !r.Overlay {
			seen[r.Worker.WorkerID] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("static fallback used %v, want all 4 workers", seen)
	}
	// An older map from a lagging node is not installed.
	api.set(NewTopology(live, []string{"cn-1", "", "cn-3", "cn-2"}, &control.OwnerMap{Epoch: 3}), &control.OwnerMap{Epoch: 3})
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.Epoch() != 7 {
		t.Fatalf("epoch %d after a stale map, want 7 kept", c.Epoch())
	}
}

func TestClientRefusesBadTopologies(t *testing.T) {
	for name, ws := range map[string][]Worker{
		"no workers":     {},
		"index twice":    {{WorkerIndex: 0, WorkerID: "a", Address: "h:1"}, {WorkerIndex: 0, WorkerID: "b", Address: "h:2"}},
		"id twice":       {{WorkerIndex: 0, WorkerID: "a", Address: "h:1"}, {WorkerIndex: 1, WorkerID: "a", Address: "h:2"}},
		"bad address":    {{WorkerIndex: 0, WorkerID: "a", Address: "h"}},
		"index too high": {{WorkerIndex: 300, WorkerID: "a", Address: "h:1"}},
	} {
		api := &fakeAPI{}
		api.set(Topology{Workers: ws}, &control.OwnerMap{})
		c := newTestClient(t, api, "127.0.0.1:8001", nil)
		if st := c.Stats(); st.FromAPI || st.RefreshErrors == 0 || st.Workers != 1 {
			t.Errorf("%s: accepted: %+v", name, st)
		}
	}
	api := &fakeAPI{}
	api.set(Topology{Workers: []Worker{{WorkerIndex: 0, WorkerID: "a", Address: "h:1"}, {WorkerIndex: 1, WorkerID: "b", Address: "h:2"}}}, &control.OwnerMap{})
	c := newTestClient(t, api, "127.0.0.1:8001", func(c *Config) { c.MaxWorkers = 1 })
	if st := c.Stats(); st.FromAPI || !strings.Contains(st.LastRefreshError, "at most 1") {
		t.Errorf("too many workers accepted: %+v", st)
	}
}

// TestClientRefreshesOnRefusalAndSkipsTheNode: a node answering REJECTED
// makes the client refresh at once and send the transaction elsewhere.
func TestClientRefreshesOnRefusalAndSkipsTheNode(t *testing.T) {
	bad := fakeNode(t, "bad", "TXN_OUTCOME_REJECTED")
	good := fakeNode(t, "good", "TXN_OUTCOME_COMMITTED")
	api := &fakeAPI{}
	api.set(NewTopology(map[string]string{"bad": bad, "good": good}, []string{"bad", "good"}, nil), &control.OwnerMap{})
	c := newTestClient(t, api, bad, func(c *Config) { c.RefreshEvery = time.Hour })
	wl := testWorkload(t)
	gen := wl.NewGenerator(3, 0)
	var msg *messages.TxnSubmit
	for msg == nil || c.Choose(msg, nil).Worker.WorkerID != "bad" {
		msg = gen.Next()
	}
	before := api.reads.Load()
	msg.TxnId = 1
	res, rt, err := c.Submit(context.Background(), msg)
	if err != nil || res.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED || rt.Worker.WorkerID != "good" {
		t.Fatalf("submit: %v %v via %+v", res, err, rt)
	}
	if st := c.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v, want one refusal", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for api.reads.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no refresh after a refusal")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientFallsBackWhenTheAPIIsDown: with the API never answering, the
// URL's node is the only worker; once it answered, its last view is kept
// while it is down, and transactions still go out.
func TestClientFallsBackWhenTheAPIIsDown(t *testing.T) {
	node := fakeNode(t, "n", "TXN_OUTCOME_COMMITTED")
	api := &fakeAPI{}
	api.down.Store(true)
	c := newTestClient(t, api, node, func(c *Config) { c.RefreshEvery = 20 * time.Millisecond; c.MinRefreshGap = 10 * time.Millisecond })
	st := c.Stats()
	var ae *APIError
	if st.FromAPI || st.Workers != 1 || !strings.Contains(st.LastRefreshError, "Unavailable") {
		t.Fatalf("stats with the API down: %+v", st)
	}
	wl := testWorkload(t)
	msg := wl.NewGenerator(1, 0).Next()
	msg.TxnId = 9
	res, rt, err := c.Submit(context.Background(), msg)
	if err != nil || res.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED || rt.Worker.Address != node {
		t.Fatalf("submit with the API down: %v %v %+v", res, err, rt)
	}
	if err := c.Refresh(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("refresh error %v, want an *APIError with 503", err)
	}

	other := fakeNode(t, "m", "TXN_OUTCOME_COMMITTED")
	api.set(NewTopology(map[string]string{"n": node, "m": other}, []string{"m", "n"}, nil), &control.OwnerMap{})
	api.down.Store(false)
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	api.down.Store(true)
	time.Sleep(100 * time.Millisecond) // several failed periodic refreshes
	st = c.Stats()
	if !st.FromAPI || st.Workers != 2 || st.RefreshErrors < 2 {
		t.Fatalf("stats after the API went down again: %+v", st)
	}
	used := map[string]bool{}
	gen := wl.NewGenerator(2, 0)
	for i := range 50 {
		msg := gen.Next()
		msg.TxnId = uint64(100 + i)
		res, rt, err := c.Submit(context.Background(), msg)
		if err != nil || res.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED {
			t.Fatalf("submit: %v %v", res, err)
		}
		used[rt.Worker.WorkerID] = true
	}
	if len(used) != 2 {
		t.Fatalf("static fallback over the last view used %v, want both workers", used)
	}
}

// TestClientSkipsAnUnreachableNode: a worker that does not answer is
// skipped for the next attempt and triggers a refresh.
func TestClientSkipsAnUnreachableNode(t *testing.T) {
	good := fakeNode(t, "good", "TXN_OUTCOME_COMMITTED")
	silent := fakeNode(t, "silent", "none") // a remote endpoint without a txn actor
	api := &fakeAPI{}
	api.set(NewTopology(map[string]string{"silent": silent, "good": good}, []string{"silent", "good"}, nil), &control.OwnerMap{})
	c := newTestClient(t, api, good, func(c *Config) { c.Call.AttemptTimeout = 300 * time.Millisecond })
	wl := testWorkload(t)
	gen := wl.NewGenerator(4, 0)
	var msg *messages.TxnSubmit
	for msg == nil || c.Choose(msg, nil).Worker.WorkerID != "silent" {
		msg = gen.Next()
	}
	msg.TxnId = 5
	res, rt, err := c.Submit(context.Background(), msg)
	if err != nil || res.GetOutcome() != messages.TxnOutcome_TXN_OUTCOME_COMMITTED || rt.Worker.WorkerID != "good" {
		t.Fatalf("submit: %v %v via %+v", res, err, rt)
	}
	if st := c.Stats(); st.Unreachable != 1 {
		t.Fatalf("stats %+v, want one unreachable", st)
	}
}

// TestClientSendsTheToken: the client authenticates its refreshes with the
// URL's token; with a wrong one it keeps its last view and its error does
// not show the token.
func TestClientSendsTheToken(t *testing.T) {
	api := &fakeAPI{token: "right-token"}
	m := &control.OwnerMap{Epoch: 3}
	api.set(NewTopology(map[string]string{"cn-1": "127.0.0.1:8001"}, []string{"cn-1"}, m), m)
	c := newTestClient(t, api, "127.0.0.1:8001", func(cfg *Config) { cfg.URL.Token = "right-token" })
	if s := c.Stats(); !s.FromAPI || s.Refreshes == 0 || s.Epoch != 3 {
		t.Fatalf("with the token: %+v", s)
	}
	if topo, err := c.Topology(context.Background()); err != nil || topo.Epoch != 3 {
		t.Fatalf("Topology: %+v %v", topo, err)
	}
	bad := newTestClient(t, api, "127.0.0.1:8001", func(cfg *Config) { cfg.URL.Token = "wrong-token" })
	s := bad.Stats()
	if s.FromAPI || s.RefreshErrors == 0 || !strings.Contains(s.LastRefreshError, CodeNotAuthorized) || strings.Contains(s.LastRefreshError, "wrong-token") {
		t.Fatalf("with a wrong token: %+v", s)
	}
}
