package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rules"
	"github.com/aura-runtime/aura/workload"
)

// Bounds of the management API's HTTP server. Requests are tiny GETs and
// answers at most a manifest (900 KiB): the timeouts only have to outlast a
// slow loopback or LAN peer, and they keep idle or stalled clients from
// holding connections.
const (
	mgmtReadHeaderTimeout = 2 * time.Second
	mgmtReadTimeout       = 5 * time.Second
	mgmtWriteTimeout      = 10 * time.Second
	mgmtIdleTimeout       = 60 * time.Second
	mgmtMaxHeaderBytes    = 8 << 10 // 8 KiB: a GET with a few headers
	// mgmtShutdownTimeout bounds the graceful shutdown when the node stops.
	mgmtShutdownTimeout = 2 * time.Second
)

// mgmtServer is a node's management API (aura node --http):
//
//   - GET /management/topology: the live compute nodes as workers (SPEC §8,
//     with partition = cohort and worker = compute node), see
//     client.Topology;
//
//   - GET /management/partition-route?rule=NAME&key=K1,K2[&epoch=E]: where
//     a key tuple goes (client.PartitionRoute): the named rule (package
//     rules) maps it to a key group and partition value; the key group's
//     cohort in the installed OwnerMap gives the owner, else the map's
//     fallback table, else the workload's static fallback over the
//     topology's workers — the choice client.Client makes for a
//     transaction writing that key;
//
//   - GET /management/ownermap: an AURA extension, the node's installed
//     OwnerMap as a version-2 manifest (X-Aura-Epoch: its epoch), from
//     which a client takes the cohort → key group overlay it routes by.
//
//   - GET /metrics: the node's metrics in Prometheus text format
//     (docs/metrics.md);
//
//   - GET /healthz (liveness): 200 {"status":"ok"} while the process serves
//     HTTP, from the moment the port is bound;
//
//   - GET /readyz (readiness): 200 once the node is ready to take
//     transactions, else 503 {code: "NotReady", message} (see readiness);
//
//   - GET /dashboard (and / redirects there): the live dashboard, a page
//     with embedded assets (/dashboard/assets/NAME) polling
//     GET /dashboard/state (dashboard.go, docs/dashboard.md).
//
// With a token (aura node --auth-token), every request except /healthz,
// /readyz, the redirect from / and the dashboard's page and assets (static
// files without cluster data; the page asks for the token and sends it
// with its polls) must carry "Authorization: Bearer TOKEN", or is answered 401
// NotAuthorized before anything else is looked at; /metrics is protected
// like the rest (it describes the cluster's ownership and load). The two
// health endpoints stay open so that orchestrators' probes, which carry no
// credentials, work; they reveal only whether the node is up and ready.
// Anything else is a JSON error {code, message} with its status.
//
// The server starts as soon as the port is bound (startMgmtEarly); until
// the node is attached (its tables loaded, membership joined) only the
// health endpoints, /metrics and the dashboard's page answer, the rest 503
// NotReady. Once the node leaves (beginLeave), /readyz and the routing
// endpoints (topology, partition-route, ownermap) answer 503 NotReady, so
// that neither probes nor clients pick a node on its way out, while
// /healthz, /metrics and the dashboard go on showing the leave until the
// server stops, last.
type mgmtServer struct {
	// node, mem and order are set once by attach, before attached is.
	node     *actors.Node
	mem      *cluster.Membership
	order    []string // --nodes
	attached atomic.Bool
	// leaving: the node is shutting down; it is not ready any more.
	leaving atomic.Bool
	opts    mgmtOptions
	log     *slog.Logger
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
	dash    *dashboard

	tokenSum [sha256.Size]byte // of opts.AuthToken

	// authFailures counts refused requests; authLogged is the count when
	// one was last logged, authLoggedAt (UnixNano) when.
	authFailures atomic.Uint64
	authMu       sync.Mutex
	authLogged   uint64
	authLoggedAt int64

	// removeNode forwards a removal to the planner (plannerHost
	// .removeNode); nil: the endpoint answers NoPlanner.
	removeNode func(node string, timeout time.Duration) (*messages.RemoveNodeReply, error)

	rtMu    sync.Mutex
	rtMap   *control.OwnerMap // the map rt was built from
	rt      *router.Router
	rtError error
}

// mgmtOptions are the management API's optional parts.
type mgmtOptions struct {
	// Rules are the partition rules the route endpoint serves (nil: none,
	// every rule is NoSuchRule).
	Rules *rules.Registry
	// Workload chooses the static fallback (client.StaticFallback); nil:
	// rendezvous hashing.
	Workload workload.Workload
	// AuthToken, when not empty, is the bearer token every request must
	// carry (except /healthz and /readyz).
	AuthToken string
	// Metrics are the node's metrics, served on /metrics; nil: a set with
	// the node's own counters and membership only (no device verbs, no
	// planner, no latency histograms fed).
	Metrics *nodeMetrics
	// DashboardPeriod is the dashboard's sample period; 0:
	// dashSamplePeriod (tests shorten it).
	DashboardPeriod time.Duration
}

// codeNotReady is the error code of /readyz and of the API before the node
// is attached.
const codeNotReady = "NotReady"

// startMgmt serves the management API of node on ln until shutdown.
func startMgmt(ln net.Listener, node *actors.Node, mem *cluster.Membership, order []string, log *slog.Logger, opts mgmtOptions) *mgmtServer {
	s := startMgmtEarly(ln, log, opts)
	s.attach(node, mem, order)
	return s
}

// startMgmtEarly serves the health endpoints and /metrics on ln at once,
// and the rest of the API once attach names the node: a node waiting for
// its tables (--wait-load) is alive, and says it is not ready.
func startMgmtEarly(ln net.Listener, log *slog.Logger, opts mgmtOptions) *mgmtServer {
	if opts.Metrics == nil {
		opts.Metrics = newNodeMetrics()
	}
	s := &mgmtServer{opts: opts, log: log, ln: ln, done: make(chan struct{})}
	s.dash = newDashboard(s, opts.DashboardPeriod)
	if opts.AuthToken != "" {
		s.tokenSum = sha256.Sum256([]byte(opts.AuthToken))
	}
	opts.Metrics.set.NewGauge("aura_http_auth_refused_total", func() float64 { return float64(s.AuthFailures()) })
	api := http.NewServeMux()
	api.HandleFunc(client.TopologyPath, s.get(s.topology))
	api.HandleFunc(client.OwnerMapPath, s.get(s.ownerMap))
	api.HandleFunc(client.PartitionRoutePath, s.method(s.partitionRoute))
	api.HandleFunc(client.RemoveNodePath, s.removeNodeHandler)
	api.HandleFunc(metricsPath, s.get(s.metrics))
	api.HandleFunc(dashboardStatePath, s.get(s.dash.serveState))
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "NotFound", "no such endpoint: "+r.URL.Path)
	})
	protected := s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.attached.Load() && r.URL.Path != metricsPath {
			writeAPIError(w, http.StatusServiceUnavailable, codeNotReady, "node starting: "+r.URL.Path+" is served once it has joined")
			return
		}
		if s.leaving.Load() && routingPaths[r.URL.Path] {
			writeAPIError(w, http.StatusServiceUnavailable, codeNotReady, "node leaving: ask another node for "+r.URL.Path)
			return
		}
		api.ServeHTTP(w, r)
	}))
	root := http.NewServeMux()
	root.HandleFunc(healthzPath, s.method(s.healthz))
	root.HandleFunc(readyzPath, s.method(s.readyz))
	root.HandleFunc(dashboardPath, s.method(serveDashboardPage))
	root.HandleFunc(dashboardPath+"/{$}", s.method(serveDashboardPage))
	root.HandleFunc(dashboardAssetsPath, s.method(serveDashboardPage))
	root.HandleFunc("/{$}", s.method(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dashboardPath, http.StatusFound)
	}))
	root.Handle("/", protected)
	s.srv = &http.Server{Handler: root, ReadHeaderTimeout: mgmtReadHeaderTimeout, ReadTimeout: mgmtReadTimeout,
		WriteTimeout: mgmtWriteTimeout, IdleTimeout: mgmtIdleTimeout, MaxHeaderBytes: mgmtMaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go s.dash.run()
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("management API", "err", err)
		}
	}()
	return s
}

// attach makes the server serve node's API (once).
func (s *mgmtServer) attach(node *actors.Node, mem *cluster.Membership, order []string) {
	if s.attached.Load() {
		return
	}
	s.node, s.mem, s.order = node, mem, order
	s.opts.Metrics.attach(node, mem, nil, nil) // no-op if the caller attached it with more sources
	s.attached.Store(true)
}

// routingPaths are the endpoints clients route by: a leaving node refuses
// them (503 NotReady) so that clients ask another node.
var routingPaths = map[string]bool{client.TopologyPath: true, client.PartitionRoutePath: true, client.OwnerMapPath: true}

// Paths of the health and metrics endpoints.
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
	metricsPath = "/metrics"
)

func (s *mgmtServer) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
}

// readyStatus is /readyz's answer when the node is ready.
type readyStatus struct {
	Status        string `json:"status"` // "ready"
	Node          string `json:"node"`
	OwnerMapEpoch uint64 `json:"ownermap_epoch"`
	Members       int    `json:"members"`
}

// readiness says whether the node is ready to take transactions, and if
// not, why. Ready means all of:
//   - started: its tables are loaded and its actors run (attach happens
//     only then);
//   - joined: it is in its own membership view, and not leaving (no
//     RoleLeaving, no shutdown begun);
//   - mapped: it has installed an OwnerMap, or none is expected yet. One
//     is expected once the cluster is known to have published one: a
//     client routed a transaction here by a map (TxnSubmit.epoch_seen), or
//     the planner this node hosts has published an epoch. A fresh cluster
//     publishes its first map only once transactions have shown the
//     planner what to place, so an idle node without a map is ready: with
//     no map every lock takes the memory node's CAS path, which is correct.
func (s *mgmtServer) readiness() (readyStatus, string) {
	if s.leaving.Load() {
		return readyStatus{}, "node is shutting down"
	}
	if !s.attached.Load() {
		return readyStatus{}, "node starting: waiting for the tables and the membership"
	}
	name := s.node.Name()
	members, _ := s.mem.Snapshot()
	self := -1
	for i, m := range members {
		if m.Name == name {
			self = i
		}
	}
	if self < 0 {
		return readyStatus{}, "node " + name + " is not in its membership view (not joined, or left)"
	}
	if members[self].HasRole(cluster.RoleLeaving) {
		return readyStatus{}, "node " + name + " is leaving the cluster"
	}
	installed := s.node.OwnerMapEpoch()
	if installed == 0 {
		known := s.node.EpochSeen()
		if st, ok := s.opts.Metrics.hostedPlanner(readyPlannerTimeout); ok {
			known = max(known, st.Epoch)
		}
		if known > 0 {
			return readyStatus{}, fmt.Sprintf("node %s has no OwnerMap installed; the cluster has published epoch %d", name, known)
		}
	}
	return readyStatus{Status: "ready", Node: name, OwnerMapEpoch: installed, Members: len(members)}, ""
}

// readyPlannerTimeout bounds /readyz's question to a planner on this node;
// probes expect answers in about a second.
const readyPlannerTimeout = 200 * time.Millisecond

func (s *mgmtServer) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	st, why := s.readiness()
	if why != "" {
		writeAPIError(w, http.StatusServiceUnavailable, codeNotReady, why)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *mgmtServer) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	s.opts.Metrics.writePrometheus(w)
}

// Addr is the address the server listens on.
func (s *mgmtServer) Addr() string { return s.ln.Addr().String() }

// beginLeave marks the node as leaving: /readyz answers 503 from now on,
// and so do the routing endpoints, while the server keeps serving the
// rest (health, metrics, the dashboard) until shutdown.
func (s *mgmtServer) beginLeave() { s.leaving.Store(true) }

// shutdown stops accepting, lets requests in flight finish (bounded by
// mgmtShutdownTimeout) and waits for the server and the dashboard's
// sampler to return. It may be called more than once.
func (s *mgmtServer) shutdown() {
	s.leaving.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), mgmtShutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	s.dash.close()
}

// method wraps a handler: GET (and HEAD) only.
func (s *mgmtServer) method(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" not allowed, use GET")
			return
		}
		h(w, r)
	}
}

// get wraps a handler: GET (and HEAD) only, no query parameters.
func (s *mgmtServer) get(h http.HandlerFunc) http.HandlerFunc {
	return s.method(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, r.URL.Path+" takes no query parameters")
			return
		}
		h(w, r)
	})
}

// removeNodeTimeout bounds the wait for the planner's answer to a
// removal: it answers at once unless its mailbox is full or it is gone.
const removeNodeTimeout = 3 * time.Second

// removeNodeHandler serves POST RemoveNodePath?node=NAME: the planner stops
// counting NAME among the known compute nodes (messages.RemoveNode). It
// changes how the cluster decides, so it is served only when the API has a
// token: unauthenticated, anyone who reaches the API could make a cut-off
// minority believe it is a majority.
func (s *mgmtServer) removeNodeHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" not allowed, use POST")
		return
	}
	if s.opts.AuthToken == "" {
		writeAPIError(w, http.StatusForbidden, client.CodeTokenRequired,
			"removing a node changes the cluster's majority: start the nodes with --auth-token to allow it")
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	node := q.Get("node")
	switch {
	case err != nil:
		writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, "query: "+err.Error())
		return
	case len(q) != 1 || len(q["node"]) != 1:
		writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, "want exactly one query parameter, node=NAME")
		return
	}
	if err := cluster.CheckNodeName(node); err != nil {
		writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, "node name: "+clipText(err.Error()))
		return
	}
	if s.removeNode == nil {
		writeAPIError(w, http.StatusServiceUnavailable, client.CodeNoPlanner, "this node runs no planner placement")
		return
	}
	rep, err := s.removeNode(node, removeNodeTimeout)
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, client.CodeNoPlanner, err.Error()+"; retry shortly")
		return
	}
	switch {
	case rep.GetRemoved():
	case rep.GetReason() == "live":
		writeAPIError(w, http.StatusConflict, client.CodeNodeLive,
			fmt.Sprintf("planner %s sees %s live: stop it first (a running node leaves by itself on SIGTERM)", rep.GetPlanner(), node))
		return
	case rep.GetReason() == "unknown":
		writeAPIError(w, http.StatusNotFound, client.CodeNoSuchNode,
			fmt.Sprintf("planner %s knows no compute node %q: no roster names it and it is not live", rep.GetPlanner(), node))
		return
	case rep.GetReason() == "too many":
		writeAPIError(w, http.StatusConflict, client.CodeTooManyRemovals, "planner "+rep.GetPlanner()+" holds as many removals as a roster has slots")
		return
	case rep.GetReason() == "bad name":
		writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, "planner "+rep.GetPlanner()+" refuses the node name")
		return
	default:
		writeAPIError(w, http.StatusBadGateway, "Internal", "planner "+rep.GetPlanner()+" answered: "+clipText(rep.GetReason()))
		return
	}
	s.log.Warn("compute node removed", "node", node, "planner", rep.GetPlanner(), "live", rep.GetLive(), "known", rep.GetKnown(),
		"quorum", rep.GetQuorum(), "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(client.RemoveResult{Node: node, Planner: rep.GetPlanner(),
		Live: int(rep.GetLive()), Known: int(rep.GetKnown()), Quorum: rep.GetQuorum()})
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(client.APIError{Code: code, Message: msg})
}

func (s *mgmtServer) topology(w http.ResponseWriter, _ *http.Request) {
	m, roster := s.node.InstalledMap()
	t := s.topologyOf(m, roster)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(client.EpochHeader, strconv.FormatUint(t.Epoch, 10))
	_ = json.NewEncoder(w).Encode(t)
}

// topologyOf is the topology document for the installed map m and its
// roster.
func (s *mgmtServer) topologyOf(m *control.OwnerMap, roster []string) client.Topology {
	members, _ := s.mem.Snapshot()
	live := map[string]string{}
	for _, mb := range members {
		if mb.HasRole(cluster.RoleCN) && mb.Meta.RemoteAddr != "" {
			live[mb.Name] = mb.Meta.RemoteAddr
		}
	}
	if m.Epoch == 0 || len(roster) == 0 {
		// Before the first map: the order in which the planner hands out
		// slots to live compute nodes (--nodes first, then by name).
		roster = cluster.ComputeNodes(members, s.order)
	}
	return client.NewTopology(live, roster, m)
}

func (s *mgmtServer) ownerMap(w http.ResponseWriter, _ *http.Request) {
	m := s.node.OwnerMap()
	b, err := manifest.Encode(m, manifest.Version2, 0)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "Internal", "encode OwnerMap: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(client.EpochHeader, strconv.FormatUint(m.Epoch, 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// authenticate refuses requests without the bearer token (when there is
// one). Comparing SHA-256 sums in constant time hides both the token's
// bytes and its length from response timing.
func (s *mgmtServer) authenticate(h http.Handler) http.Handler {
	if s.opts.AuthToken == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason := ""
		auth := r.Header.Values("Authorization")
		scheme, tok, _ := strings.Cut(firstOr(auth, ""), " ")
		switch {
		case len(auth) == 0:
			reason = "missing Authorization header"
		case len(auth) > 1:
			reason = "more than one Authorization header"
		case !strings.EqualFold(scheme, "Bearer"):
			reason = "Authorization scheme is not Bearer"
		default:
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
				reason = "wrong bearer token"
			}
		}
		if reason == "" {
			h.ServeHTTP(w, r)
			return
		}
		s.authFailed(r, reason)
		w.Header().Set("WWW-Authenticate", `Bearer realm="aura"`)
		writeAPIError(w, http.StatusUnauthorized, client.CodeNotAuthorized, reason+": send Authorization: Bearer TOKEN (aura node --auth-token)")
	})
}

// authLogEvery spaces the warnings about refused requests: one per second
// at most, with the count since the last, so that a client retrying
// without its token cannot flood the log.
const authLogEvery = time.Second

func (s *mgmtServer) authFailed(r *http.Request, reason string) {
	n := s.authFailures.Add(1)
	now := time.Now().UnixNano()
	s.authMu.Lock()
	if now-s.authLoggedAt < int64(authLogEvery) {
		s.authMu.Unlock()
		return
	}
	since := n - s.authLogged
	s.authLogged, s.authLoggedAt = n, now
	s.authMu.Unlock()
	s.log.Warn("management API request refused", "reason", reason, "remote", r.RemoteAddr, "path", r.URL.Path,
		"refused_since_last_log", since, "refused_total", n)
}

// AuthFailures is the number of requests refused for their token.
func (s *mgmtServer) AuthFailures() uint64 { return s.authFailures.Load() }

func firstOr(v []string, def string) string {
	if len(v) == 0 {
		return def
	}
	return v[0]
}

// authTokenEnv names the environment variable that gives aura node its
// --auth-token (and aura topology / aura route theirs) when the flag is
// not set: a token in the environment stays out of process listings.
const authTokenEnv = "AURA_AUTH_TOKEN"

// mgmtFlags are aura node's management API flags beyond --http.
type mgmtFlags struct {
	authToken string
	rulesFile string
}

func (f *mgmtFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.authToken, "auth-token", "", "bearer token the management API requires on every request but /healthz and /readyz, /metrics included (401 NotAuthorized without it); default: $"+authTokenEnv+"; empty: no authentication. 1..256 bytes of visible ASCII")
	fl.StringVar(&f.rulesFile, "rules", "", "JSON file of user-defined partition rules served by /management/partition-route next to the workload's (format: package rules, FileConfig); empty: the workload's rules only")
}

// options builds the management API's options for wl: the token (flag,
// else the environment) and the rules (the workload's, plus --rules).
func (f *mgmtFlags) options(wl workload.Workload, getenv func(string) string) (mgmtOptions, error) {
	tok := f.authToken
	if tok == "" {
		tok = getenv(authTokenEnv)
	}
	if tok != "" {
		if err := client.CheckToken(tok); err != nil {
			return mgmtOptions{}, fmt.Errorf("--auth-token: %w", err)
		}
	}
	rs, err := rules.ForWorkload(wl)
	if err != nil {
		return mgmtOptions{}, err
	}
	if f.rulesFile != "" {
		more, err := rules.Load(f.rulesFile, wl.Schema())
		if err != nil {
			return mgmtOptions{}, fmt.Errorf("--rules: %w", err)
		}
		rs = append(rs, more...)
	}
	reg, err := rules.NewRegistry(rs...)
	if err != nil {
		return mgmtOptions{}, fmt.Errorf("--rules: %w", err)
	}
	return mgmtOptions{Rules: reg, Workload: wl, AuthToken: tok}, nil
}

// Bounds of the route endpoint's query: 1 KiB holds a 64-byte rule name,
// a MaxKeyBytes tuple and a 20-digit epoch with room to spare.
const maxRouteQueryBytes = 1 << 10

// routeQuery is a parsed partition-route query.
type routeQuery struct {
	rule  string
	key   []uint64
	epoch uint64 // 0: any
}

// parseRouteQuery parses rule=NAME&key=K1,K2[&epoch=E]: each parameter at
// most once, nothing else. It never panics; its error is the BadRequest
// message.
func parseRouteQuery(raw string) (routeQuery, error) {
	if len(raw) > maxRouteQueryBytes {
		return routeQuery{}, fmt.Errorf("query of %d bytes, at most %d", len(raw), maxRouteQueryBytes)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return routeQuery{}, fmt.Errorf("malformed query: %v", err)
	}
	for k, v := range q {
		if k != "rule" && k != "key" && k != "epoch" {
			return routeQuery{}, fmt.Errorf("unknown parameter %q (want rule, key and optionally epoch)", clipText(k))
		}
		if len(v) != 1 {
			return routeQuery{}, fmt.Errorf("parameter %s given %d times", k, len(v))
		}
	}
	var out routeQuery
	out.rule = q.Get("rule")
	if out.rule == "" {
		return routeQuery{}, errors.New("missing parameter rule")
	}
	if len(out.rule) > rules.MaxNameBytes {
		return routeQuery{}, fmt.Errorf("rule name of %d bytes, at most %d", len(out.rule), rules.MaxNameBytes)
	}
	if _, ok := q["key"]; !ok {
		return routeQuery{}, errors.New("missing parameter key (K1,K2,…)")
	}
	if out.key, err = rules.ParseKey(q.Get("key")); err != nil {
		return routeQuery{}, err
	}
	if e, ok := q["epoch"]; ok {
		if out.epoch, err = strconv.ParseUint(e[0], 10, 64); err != nil || e[0][0] == '+' {
			return routeQuery{}, fmt.Errorf("epoch %q is not an unsigned 64-bit integer", clipText(e[0]))
		}
	}
	return out, nil
}

// clipText shortens untrusted text quoted in errors to 32 bytes.
func clipText(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

func (s *mgmtServer) partitionRoute(w http.ResponseWriter, r *http.Request) {
	q, err := parseRouteQuery(r.URL.RawQuery)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, err.Error())
		return
	}
	rule, ok := s.opts.Rules.Lookup(q.rule)
	if !ok {
		writeAPIError(w, http.StatusNotFound, client.CodeNoSuchRule,
			fmt.Sprintf("no rule %q; this node serves: %s", clipText(q.rule), strings.Join(s.opts.Rules.Names(), ", ")))
		return
	}
	res, err := rule.Resolve(q.key)
	if err != nil {
		if errors.Is(err, rules.ErrNoSuchPartition) {
			writeAPIError(w, http.StatusNotFound, client.CodeNoSuchPartition, err.Error())
		} else {
			writeAPIError(w, http.StatusBadRequest, client.CodeBadRequest, err.Error())
		}
		return
	}
	m, roster := s.node.InstalledMap()
	if q.epoch > m.Epoch {
		writeAPIError(w, http.StatusConflict, client.CodeStaleEpoch,
			fmt.Sprintf("node %s has OwnerMap epoch %d, older than the epoch %d asked for; retry shortly or ask another node", s.node.Name(), m.Epoch, q.epoch))
		return
	}
	topo := s.topologyOf(m, roster)
	out := client.PartitionRoute{Rule: rule.Name(), Key: q.key, Table: rule.Table(), KeyGroup: res.KeyGroup,
		PartitionValue: res.Partition, Epoch: m.Epoch, AnsweredBy: s.node.Name()}
	if rule.Table() == "*" && s.opts.Workload != nil {
		sc := s.opts.Workload.Schema()
		if t, ok := sc.Table(res.Table); ok {
			out.Table = t.Name
		}
	}
	byIndex := func(idx int) (client.Worker, bool) {
		for _, wk := range topo.Workers {
			if wk.WorkerIndex == idx {
				return wk, true
			}
		}
		return client.Worker{}, false
	}
	var worker client.Worker
	rt, err := s.routerFor(m)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "Internal", err.Error())
		return
	}
	var owner int
	var found bool
	if rt != nil {
		var cohort control.CohortID
		if cohort, owner, found = rt.OwnerOfKeyGroup(res.KeyGroup); found {
			out.PartitionID, out.Source = &cohort, client.SourceCohort
		} else if owner, found = rt.FallbackNode(res.Partition); found {
			out.Source = client.SourceFallbackTable
		}
	}
	if found {
		if worker, ok = byIndex(owner); !ok {
			name := "no roster entry"
			if owner < len(roster) && roster[owner] != "" {
				name = roster[owner] + ", not live"
			}
			what := "partition value " + strconv.FormatUint(res.Partition, 10)
			if out.PartitionID != nil {
				what = "cohort " + strconv.FormatUint(*out.PartitionID, 10)
			}
			writeAPIError(w, http.StatusNotFound, client.CodeNoSuchPartition,
				fmt.Sprintf("%s is owned by index %d (%s) at epoch %d; retry after the next epoch", what, owner, name, m.Epoch))
			return
		}
	} else {
		out.Source = client.SourceStaticFallback
		if len(topo.Workers) == 0 {
			writeAPIError(w, http.StatusNotFound, client.CodeNoSuchPartition, "no live worker to route to")
			return
		}
		fb := router.RendezvousFallback(len(topo.Workers))
		if s.opts.Workload != nil {
			fb = client.StaticFallback(s.opts.Workload, len(topo.Workers))
		}
		i := fb(res.Partition)
		if i < 0 || i >= len(topo.Workers) {
			i = int(res.Partition % uint64(len(topo.Workers)))
		}
		worker = topo.Workers[i]
	}
	out.WorkerID, out.WorkerIndex, out.Address = worker.WorkerID, worker.WorkerIndex, worker.Address
	s.opts.Metrics.routed(out.Source)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(client.EpochHeader, strconv.FormatUint(m.Epoch, 10))
	_ = json.NewEncoder(w).Encode(out)
}

// routerFor returns a router with m installed (nil before the first map),
// built once per installed map: maps are immutable once installed, so the
// pointer names the map.
func (s *mgmtServer) routerFor(m *control.OwnerMap) (*router.Router, error) {
	if m == nil || m.Epoch == 0 {
		return nil, nil
	}
	s.rtMu.Lock()
	defer s.rtMu.Unlock()
	if s.rtMap == m {
		return s.rt, s.rtError
	}
	nodes := 1
	for _, p := range m.Cohorts {
		nodes = max(nodes, p.Owner+1)
	}
	for _, o := range m.Fallback {
		if o != control.Unowned {
			nodes = max(nodes, int(o)+1)
		}
	}
	rt := router.New(router.DefaultConfig(min(nodes, control.MaxNodes)))
	err := rt.Install(m)
	if err != nil {
		rt, err = nil, fmt.Errorf("OwnerMap epoch %d: %w", m.Epoch, err)
	}
	s.rtMap, s.rt, s.rtError = m, rt, err
	return rt, err
}
