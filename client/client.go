package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// The management API's paths and headers (SPEC §8; OwnerMapPath is an AURA
// extension).
const (
	TopologyPath = "/management/topology"
	OwnerMapPath = "/management/ownermap"
	// EpochHeader carries the epoch of the OwnerMap served by OwnerMapPath.
	EpochHeader = "X-Aura-Epoch"
)

// TxnActorName is the name of a node's transaction endpoint (`aura node`
// spawns it): it takes a messages.TxnSubmit and answers a
// messages.TxnResult.
const TxnActorName = "txn"

// Topology is the body of GET /management/topology.
type Topology struct {
	// WorkerCount is len(Workers).
	WorkerCount int `json:"worker_count"`
	// TCPMultiPort is false: a worker takes every request on one port.
	TCPMultiPort bool `json:"tcp_multi_port"`
	// TCPBaseListenPort is the lowest TCPListenPort of the workers.
	TCPBaseListenPort int `json:"tcp_base_listen_port"`
	// Epoch is the OwnerMap epoch installed on the answering node (0: none).
	Epoch uint64 `json:"epoch"`
	// Workers are the live compute nodes, by WorkerIndex (unslotted last).
	Workers []Worker `json:"workers"`
}

// Worker is one compute node of a Topology.
type Worker struct {
	// WorkerIndex is the node's owner index (the owner byte of the OwnerMap's
	// cohorts), or -1 for a live node that has no roster slot yet.
	WorkerIndex int `json:"worker_index"`
	// WorkerID is the node's membership name.
	WorkerID string `json:"worker_id"`
	// Address is the node's protoactor remote address, HOST:PORT.
	Address string `json:"address"`
	// TCPListenPort is Address's port.
	TCPListenPort int `json:"tcp_listen_port"`
	// PartitionIDs are the cohorts the node owns in the answering node's
	// installed OwnerMap, ascending.
	PartitionIDs []uint64 `json:"partition_ids"`
}

// APIError is the management API's error body, {code, message}, with the
// HTTP status it came with.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("management API: %d %s: %s", e.Status, e.Code, e.Message)
}

// Config configures a Client. Start from DefaultConfig.
type Config struct {
	// URL is the parsed connection string. Required.
	URL URL
	// Workload gives the rule (key groups, home partition) and footprints
	// the router scores nodes by, and chooses the static fallback (TPC-C:
	// home % N; others: rendezvous hashing). Required.
	Workload workload.Workload
	// RefreshEvery is the period of topology and OwnerMap refreshes.
	// Default 1 s: a new epoch is routed by within about a second, at two
	// small HTTP requests a second.
	RefreshEvery time.Duration
	// MinRefreshGap spaces on-demand refreshes (after an unreachable node or
	// a refusal). Default 100 ms: a burst of failures costs one refresh, not
	// one per transaction.
	MinRefreshGap time.Duration
	// HTTPTimeout bounds one management API request, connect to last byte.
	// Default 2 s.
	HTTPTimeout time.Duration
	// MaxResponseBytes bounds a topology body. Default 1 MiB (255 workers
	// listing a few thousand cohorts each). The OwnerMap body is bounded by
	// MaxManifestBytes.
	MaxResponseBytes int64
	// MaxManifestBytes bounds the OwnerMap body. Default
	// manifest.DefaultMaxBytes (900 KiB), the manifest format's own cap.
	MaxManifestBytes int
	// MaxWorkers bounds the workers a topology may list. Default
	// control.MaxNodes (255): the OwnerMap's owner byte.
	MaxWorkers int
	// MaxAttempts bounds the nodes one Submit tries (the first included);
	// a node that is unreachable or refuses is skipped for the next try.
	// Default 3.
	MaxAttempts int
	// Call bounds one submission to one node. Default: one attempt of 10 s
	// (a node's own transaction timeout). One attempt, because a
	// submission that timed out may still be running on the node, and
	// resending it there could run it twice; Submit retries on another
	// node instead.
	Call actors.CallConfig
	// HTTPClient, when set, makes the API requests (its Timeout is left as
	// is); nil: a client with HTTPTimeout.
	HTTPClient *http.Client
}

// DefaultConfig returns the defaults documented on Config for u and wl.
func DefaultConfig(u URL, wl workload.Workload) Config {
	call := actors.DefaultCallConfig()
	call.AttemptTimeout, call.MaxAttempts = 10*time.Second, 1
	return Config{URL: u, Workload: wl, RefreshEvery: time.Second, MinRefreshGap: 100 * time.Millisecond,
		HTTPTimeout: 2 * time.Second, MaxResponseBytes: 1 << 20, MaxManifestBytes: manifest.DefaultMaxBytes,
		MaxWorkers: control.MaxNodes, MaxAttempts: 3, Call: call}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.URL.Host == "" || c.URL.Port < 1 || c.URL.Port > 65535 || c.URL.HTTPAddr == "" {
		errs = append(errs, errors.New("client: URL is required (ParseURL)"))
	}
	if c.Workload == nil {
		errs = append(errs, errors.New("client: Workload is required"))
	}
	if c.RefreshEvery < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("client: RefreshEvery %v, want ≥ 10ms", c.RefreshEvery))
	}
	if c.MinRefreshGap < 0 || c.MinRefreshGap > c.RefreshEvery {
		errs = append(errs, fmt.Errorf("client: MinRefreshGap %v, want 0..RefreshEvery", c.MinRefreshGap))
	}
	if c.HTTPTimeout <= 0 {
		errs = append(errs, fmt.Errorf("client: HTTPTimeout %v must be positive", c.HTTPTimeout))
	}
	if c.MaxResponseBytes < 1024 || c.MaxResponseBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("client: MaxResponseBytes %d, want 1 KiB..64 MiB", c.MaxResponseBytes))
	}
	if c.MaxManifestBytes < manifest.HeaderSize || c.MaxManifestBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("client: MaxManifestBytes %d, want %d B..64 MiB", c.MaxManifestBytes, manifest.HeaderSize))
	}
	if c.MaxWorkers < 1 || c.MaxWorkers > control.MaxNodes {
		errs = append(errs, fmt.Errorf("client: MaxWorkers %d, want 1..%d", c.MaxWorkers, control.MaxNodes))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("client: MaxAttempts %d, want 1..100", c.MaxAttempts))
	}
	if err := c.Call.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("client: Call: %w", err))
	}
	return errors.Join(errs...)
}

// view is one immutable routing state: replaced whole by a refresh.
type view struct {
	// workers in static-fallback order: by worker index, unslotted last.
	workers []Worker
	byIndex map[int]int         // worker index → position in workers
	static  router.FallbackFunc // StaticFallback over len(workers)
	rt      *router.Router
	epoch   uint64 // the installed map's (0: none)
	fromAPI bool
	bytes   int // the manifest's size
}

// Stats are the client's counters since New.
type Stats struct {
	// Refreshes succeeded; RefreshErrors failed (the last view stayed).
	Refreshes, RefreshErrors uint64
	// Overlay and Fallback count routing decisions by layer.
	Overlay, Fallback uint64
	// Unreachable counts submissions that got no reply; Refused those
	// answered MOVED, REJECTED or ERROR.
	Unreachable, Refused uint64
	// Epoch is the OwnerMap epoch routed by (0: none); Workers the workers
	// known; FromAPI whether the API ever answered.
	Epoch   uint64
	Workers int
	FromAPI bool
	// Cohorts is the number of cohorts in the map routed by;
	// ManifestBytes the size of the last manifest read.
	Cohorts       int
	ManifestBytes int
	// LastRefreshError is the last refresh's error, if it failed.
	LastRefreshError string
}

// Client routes and submits transactions to a running cluster. Safe for
// concurrent use.
type Client struct {
	cfg     Config
	sys     *actor.ActorSystem
	http    *http.Client
	api     *API
	rule    workload.Rule
	cur     atomic.Pointer[view]
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	seq     atomic.Uint64
	closeMu sync.Once

	refreshMu sync.Mutex // one refresh at a time
	lastErr   atomic.Pointer[string]

	// counters of Stats
	refreshes, refreshErrs, overlay, fallback, unreachable, refused atomic.Uint64
}

// New makes a client over sys (an actor system with a remote endpoint), reads
// the topology once (an unreachable API is not an error: the URL's node is
// then the only worker) and starts the periodic refresh. Close stops it.
func New(ctx context.Context, cfg Config, sys *actor.ActorSystem) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sys == nil {
		return nil, errors.New("client: no actor system")
	}
	c := &Client{cfg: cfg, sys: sys, http: cfg.HTTPClient, rule: cfg.Workload.Rule(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = maxResponseHeaderBytes
		tr.MaxIdleConnsPerHost = 2 // the refresh loop's two requests
		c.http = &http.Client{Timeout: cfg.HTTPTimeout, Transport: tr}
	}
	c.api = &API{Addr: cfg.URL.HTTPAddr, Token: cfg.URL.Token, HTTP: c.http, MaxResponseBytes: max(cfg.MaxResponseBytes, int64(cfg.MaxManifestBytes))}
	seed := Worker{WorkerIndex: 0, WorkerID: cfg.URL.Addr(), Address: cfg.URL.Addr(), TCPListenPort: cfg.URL.Port}
	c.cur.Store(&view{workers: []Worker{seed}, byIndex: map[int]int{0: 0}, static: StaticFallback(cfg.Workload, 1)})
	_ = c.Refresh(ctx)
	go c.loop()
	return c, nil
}

// Close stops the refresh loop and drops idle API connections.
// Submissions in flight finish.
func (c *Client) Close() {
	c.closeMu.Do(func() { close(c.stop) })
	<-c.done
	c.http.CloseIdleConnections()
}

// maxResponseHeaderBytes bounds the API's response headers: 64 KiB, far
// above the few headers it sends.
const maxResponseHeaderBytes = 64 << 10

func (c *Client) loop() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.RefreshEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.kick:
			if d := c.cfg.MinRefreshGap - time.Since(last); d > 0 {
				select {
				case <-c.stop:
					return
				case <-time.After(d):
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.cfg.HTTPTimeout)
		_ = c.Refresh(ctx)
		cancel()
		last = time.Now()
	}
}

// requestRefresh asks the loop for a refresh soon, without waiting.
func (c *Client) requestRefresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Refresh reads the topology and the OwnerMap now. On error the client keeps
// routing by its previous view.
func (c *Client) Refresh(ctx context.Context) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	err := c.refresh(ctx)
	if err != nil {
		c.refreshErrs.Add(1)
		s := err.Error()
		c.lastErr.Store(&s)
		return err
	}
	c.refreshes.Add(1)
	c.lastErr.Store(nil)
	return nil
}

func (c *Client) refresh(ctx context.Context) error {
	body, _, err := c.get(ctx, TopologyPath, c.cfg.MaxResponseBytes)
	if err != nil {
		return err
	}
	var topo Topology
	if err := json.Unmarshal(body, &topo); err != nil {
		return fmt.Errorf("client: topology: %w", err)
	}
	workers, err := c.checkWorkers(topo.Workers)
	if err != nil {
		return err
	}
	body, _, err = c.get(ctx, OwnerMapPath, int64(c.cfg.MaxManifestBytes))
	if err != nil {
		return err
	}
	m, _, err := manifest.Decode(body, manifest.DecodeOptions{MaxBytes: c.cfg.MaxManifestBytes})
	if err != nil {
		return fmt.Errorf("client: ownermap: %w", err)
	}
	old := c.cur.Load()
	v := &view{workers: workers, byIndex: map[int]int{}, fromAPI: true, bytes: len(body),
		static: StaticFallback(c.cfg.Workload, len(workers))}
	nodes := 1
	for i, w := range workers {
		if w.WorkerIndex >= 0 {
			v.byIndex[w.WorkerIndex] = i
			nodes = max(nodes, w.WorkerIndex+1)
		}
	}
	switch {
	case m.Epoch == 0:
		// No map on that node yet: fallback routing only.
	case old.rt != nil && m.Epoch < old.epoch:
		// A lagging node: keep the newer map (epochs only grow).
		v.rt, v.epoch, v.bytes = old.rt, old.epoch, old.bytes
	default:
		for _, p := range m.Cohorts {
			nodes = max(nodes, p.Owner+1)
		}
		for _, o := range m.Fallback {
			if o != control.Unowned {
				nodes = max(nodes, int(o)+1)
			}
		}
		rc := router.DefaultConfig(min(nodes, control.MaxNodes))
		rc.Fallback = StaticFallback(c.cfg.Workload, rc.Nodes)
		rt := router.New(rc)
		if err := rt.Install(m); err != nil {
			return fmt.Errorf("client: ownermap epoch %d: %w", m.Epoch, err)
		}
		v.rt, v.epoch = rt, m.Epoch
	}
	c.cur.Store(v)
	return nil
}

// checkWorkers validates a topology's workers and orders them for the
// static fallback: by worker index, unslotted (-1) last by name.
func (c *Client) checkWorkers(ws []Worker) ([]Worker, error) {
	if len(ws) == 0 {
		return nil, errors.New("client: topology lists no workers")
	}
	if len(ws) > c.cfg.MaxWorkers {
		return nil, fmt.Errorf("client: topology lists %d workers, at most %d", len(ws), c.cfg.MaxWorkers)
	}
	idx, ids := map[int]bool{}, map[string]bool{}
	for _, w := range ws {
		if w.WorkerIndex < -1 || w.WorkerIndex >= control.MaxNodes {
			return nil, fmt.Errorf("client: worker %q: index %d outside [-1, %d)", w.WorkerID, w.WorkerIndex, control.MaxNodes)
		}
		if w.WorkerIndex >= 0 && idx[w.WorkerIndex] {
			return nil, fmt.Errorf("client: worker index %d listed twice", w.WorkerIndex)
		}
		idx[w.WorkerIndex] = true
		if w.WorkerID == "" || ids[w.WorkerID] {
			return nil, fmt.Errorf("client: worker id %q empty or listed twice", w.WorkerID)
		}
		ids[w.WorkerID] = true
		if _, p, err := net.SplitHostPort(w.Address); err != nil || p == "0" {
			return nil, fmt.Errorf("client: worker %q: address %q is not HOST:PORT", w.WorkerID, w.Address)
		}
	}
	out := slices.Clone(ws)
	slices.SortFunc(out, byWorkerIndex)
	return out, nil
}

// get fetches path from the management API, reading at most limit bytes.
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, http.Header, error) {
	return c.api.get(ctx, path, limit)
}

// Topology reads the management API's topology now (the client's cached
// view is Workers and Epoch).
func (c *Client) Topology(ctx context.Context) (Topology, error) { return c.api.Topology(ctx) }

// PartitionRoute asks the management API where key goes under rule (see
// API.PartitionRoute).
func (c *Client) PartitionRoute(ctx context.Context, rule string, key []uint64, minEpoch uint64) (PartitionRoute, error) {
	return c.api.PartitionRoute(ctx, rule, key, minEpoch)
}

// StaticFallback is the workload's static placement of partition values
// over n nodes — the AffinityRouter's fallback layer, and the placement the
// embedded benchmark and the simulator use: TPC-C's dense warehouse ids go
// to warehouse mod n (the tutorial's RouteByWarehouse); other workloads'
// partition values (hashes, ranges) by rendezvous hashing, which spreads
// any set of values evenly.
func StaticFallback(wl workload.Workload, n int) router.FallbackFunc {
	if _, ok := wl.(*tpcc.Workload); ok {
		return router.ModuloFallback(n)
	}
	return router.RendezvousFallback(n)
}

// Route says where a transaction goes: the chosen worker, and whether the
// OwnerMap overlay chose it (false: the static fallback).
type Route struct {
	Worker  Worker
	Overlay bool
}

// Choose routes msg, skipping the workers named in skip (nil: none) unless
// every worker is skipped.
func (c *Client) Choose(msg *messages.TxnSubmit, skip []string) Route {
	v := c.cur.Load()
	home := c.rule.Home(msg)
	if v.rt != nil {
		fp := c.cfg.Workload.Footprint(msg)
		kgs := make([]control.KeyGroup, 0, len(fp.Writes))
		for _, ref := range fp.Writes {
			kgs = append(kgs, c.rule.KeyGroup(ref))
		}
		d := v.rt.Route(kgs, nil, home, nil)
		if d.Layer == router.Overlay || d.FromTable {
			if i, ok := v.byIndex[d.Node]; ok && !slices.Contains(skip, v.workers[i].WorkerID) {
				return Route{Worker: v.workers[i], Overlay: d.Layer == router.Overlay}
			}
		}
	}
	ws, static := v.workers, v.static
	if len(skip) > 0 {
		rest := slices.DeleteFunc(slices.Clone(ws), func(w Worker) bool { return slices.Contains(skip, w.WorkerID) })
		if len(rest) > 0 && len(rest) < len(ws) {
			ws, static = rest, StaticFallback(c.cfg.Workload, len(rest))
		}
	}
	i := static(home)
	if i < 0 || i >= len(ws) {
		i = int(home % uint64(len(ws)))
	}
	return Route{Worker: ws[i]}
}

// Submit sends msg to the node Choose picks and returns its reply. A node
// that does not answer, or answers MOVED, REJECTED or ERROR, triggers a
// refresh and the next attempt goes to another node (Config.MaxAttempts in
// all); the last reply or error is returned. An ABORTED reply is returned
// as is: resubmit it (same id, next attempt number) to retry.
func (c *Client) Submit(ctx context.Context, msg *messages.TxnSubmit) (*messages.TxnResult, Route, error) {
	var skip []string
	var res *messages.TxnResult
	var rt Route
	var err error
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		rt = c.Choose(msg, skip)
		if rt.Overlay {
			c.overlay.Add(1)
		} else {
			c.fallback.Add(1)
		}
		rng := rand.New(rand.NewPCG(c.seq.Add(1), msg.GetTxnId()))
		var r any
		r, err = actors.Call(ctx, c.sys.Root, actor.NewPID(rt.Worker.Address, TxnActorName), msg, c.cfg.Call, rng)
		if err != nil {
			res = nil
			c.unreachable.Add(1)
			c.requestRefresh()
			if ctx.Err() != nil {
				return nil, rt, err
			}
			skip = append(skip, rt.Worker.WorkerID)
			continue
		}
		var ok bool
		if res, ok = r.(*messages.TxnResult); !ok {
			return nil, rt, fmt.Errorf("client: %s answered %T", rt.Worker.WorkerID, r)
		}
		if res.GetEpoch() > c.cur.Load().epoch {
			c.requestRefresh() // the node has a newer map than ours
		}
		switch res.GetOutcome() {
		case messages.TxnOutcome_TXN_OUTCOME_MOVED, messages.TxnOutcome_TXN_OUTCOME_REJECTED, messages.TxnOutcome_TXN_OUTCOME_ERROR:
			c.refused.Add(1)
			c.requestRefresh()
			skip = append(skip, rt.Worker.WorkerID)
			continue
		}
		return res, rt, nil
	}
	return res, rt, err
}

// Stats returns the client's counters and current view.
func (c *Client) Stats() Stats {
	v := c.cur.Load()
	s := Stats{Refreshes: c.refreshes.Load(), RefreshErrors: c.refreshErrs.Load(), Overlay: c.overlay.Load(),
		Fallback: c.fallback.Load(), Unreachable: c.unreachable.Load(), Refused: c.refused.Load(),
		Epoch: v.epoch, Workers: len(v.workers), FromAPI: v.fromAPI, ManifestBytes: v.bytes}
	if v.rt != nil {
		s.Cohorts = v.rt.Cohorts()
	}
	if p := c.lastErr.Load(); p != nil {
		s.LastRefreshError = *p
	}
	return s
}

// Workers returns the workers the client routes over, in static-fallback
// order.
func (c *Client) Workers() []Worker { return slices.Clone(c.cur.Load().workers) }

// Epoch returns the OwnerMap epoch the client routes by (0: none).
func (c *Client) Epoch() uint64 { return c.cur.Load().epoch }

// portOf returns the port of HOST:PORT, 0 if it has none.
func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// NewTopology builds the topology document from the live workers (name →
// remote address), the roster of the installed map (owner index i is
// roster[i]; "" a free slot) and the map itself: what a node's management
// API serves.
func NewTopology(live map[string]string, roster []string, m *control.OwnerMap) Topology {
	owned := map[int][]uint64{}
	epoch := uint64(0)
	if m != nil {
		epoch = m.Epoch
		for _, p := range m.Cohorts {
			owned[p.Owner] = append(owned[p.Owner], p.ID)
		}
	}
	t := Topology{Epoch: epoch, Workers: []Worker{}}
	for name, addr := range live {
		w := Worker{WorkerIndex: slices.Index(roster, name), WorkerID: name, Address: addr, TCPListenPort: portOf(addr),
			PartitionIDs: []uint64{}}
		if w.WorkerIndex >= 0 {
			w.PartitionIDs = append(w.PartitionIDs, owned[w.WorkerIndex]...)
			slices.Sort(w.PartitionIDs)
		}
		t.Workers = append(t.Workers, w)
	}
	slices.SortFunc(t.Workers, byWorkerIndex)
	t.WorkerCount = len(t.Workers)
	for _, w := range t.Workers {
		if w.TCPListenPort > 0 && (t.TCPBaseListenPort == 0 || w.TCPListenPort < t.TCPBaseListenPort) {
			t.TCPBaseListenPort = w.TCPListenPort
		}
	}
	return t
}

// byWorkerIndex orders workers by owner index, those without one (−1)
// last, then by name.
func byWorkerIndex(a, b Worker) int {
	ka, kb := a.WorkerIndex, b.WorkerIndex
	if ka < 0 {
		ka = control.MaxNodes
	}
	if kb < 0 {
		kb = control.MaxNodes
	}
	return cmp.Or(cmp.Compare(ka, kb), cmp.Compare(a.WorkerID, b.WorkerID))
}
