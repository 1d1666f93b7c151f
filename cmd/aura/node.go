package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/store"
)

func init() { subcommands = append(subcommands, newNodeCmd) }

// nodeReadyPrefix starts the line `aura node` prints on stdout once it has
// joined and serves requests; "remote HOST:PORT gossip HOST:PORT" follows.
const nodeReadyPrefix = "aura node ready: "

// TxnActorName is the name of a node's transaction endpoint: it takes a
// messages.TxnSubmit and answers a messages.TxnResult.
const TxnActorName = "txn"

type nodeFlags struct {
	workloadFlags
	name          string
	listen        string
	advertise     string
	gossip        string
	gossipAdv     string
	join          []string
	mn            string
	plannerOrder  []string
	plannerRole   bool
	maxNodes      int
	id            uint32
	settle        time.Duration
	ownerLease    time.Duration
	coordinators  int
	maxInFlight   int
	heartbeat     time.Duration
	tick          time.Duration
	leave         time.Duration
	logLevel      string
	logFormat     string
	protoactorLog string
	testTimings   bool
	http          string
	waitLoad      time.Duration
	mgmt          mgmtFlags
	sec           securityFlags
	cfg           configFlags
}

func newNodeCmd() *cobra.Command {
	f := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a compute node: transactions, owner locks, membership and (on one node) the planner",
		Long: `Run a compute node (CN). It connects to the memory node (--mn), joins the
cluster's membership by gossip (--gossip, --join), serves transactions and
owner lock requests from other nodes over protoactor remote (--listen), and
takes its locks through the owner path: the cohorts the planner gives it are
locked in its own memory, others by owner RPC or by the memory node's CAS.

The roster comes from membership: every live node with the "cn" role gets
a slot (an owner index) from the planner, which publishes the roster with
each OwnerMap. Slots are stable: a node keeps its index while it is live,
and a departed node's index is not reused while a map still names it. A
node joining takes cohorts within a few planner ticks once membership has
been settled for 1 s (--settle); a node that leaves gracefully has its
cohorts moved to the others at once, one that dies once the failure
detector declares it, membership has settled and its owner lease has run
out; no map names it after that. At most --max-nodes
nodes hold slots at once; more nodes still run transactions but own
nothing until a slot frees.

The planner runs on one node: without --nodes, on the live node with the
lowest name among those advertising the planner role (--planner); with
--nodes, on the first live one of that list that advertises it (--nodes is
then the placement order and allow-list; it does not restrict which nodes
may join or own cohorts). It moves when that node leaves or dies, or when a
preferred node joins (its state is rebuilt from heartbeats; learned
ownership starts over, since the new planner first returns every cohort to
the fallback path). The planner publishes only while it sees a majority of
the known compute nodes, and answers every heartbeat with an owner lease
(--owner-lease): a node grants locks of its cohorts by plain WRITE only
while its lease runs, so a node cut off from the planner falls back to CAS
within a lease, and the planner moves a departed node's cohorts only once
the last lease it granted has run out. Surviving a crash therefore takes
three or more nodes: with two, the survivor keeps its own cohorts but the
dead node's stay placed on it until it returns.

The workload flags must be the same on every node and on the client: they
define the tables. The tables must be loaded (aura bench loads them). TPC-C
needs --warehouses (the loader's value) unless --nodes is given, in which
case it defaults to 4 per listed node, as the loader's default does.

Once joined it prints one line on stdout,

    aura node ready: NAME remote HOST:PORT gossip HOST:PORT

--http serves the management API: GET /management/topology (the workers
and the cohorts each owns), /management/partition-route?rule=NAME&key=K1,K2
(where a key tuple goes under a named partition rule: the workload's rules,
default_range, and those of --rules) and /management/ownermap; /metrics
(Prometheus text format, the aura_ metrics of docs/metrics.md); /healthz
(liveness: 200 {"status":"ok"} while the process serves HTTP, from the
moment the port is bound) and /readyz (readiness: 200 once the tables are
loaded, the node is in its membership view and not leaving, and it has an
OwnerMap or none is expected yet; else 503 {"code":"NotReady","message"});
/dashboard (and / redirects there): a live page of the members, the
cohort → owner map, this node's throughput, LOCAL hit, atomics and
migrations over the last 5 minutes, and the planner's last decisions with
their Benefit terms (docs/dashboard.md); it polls /dashboard/state.
With --auth-token (or $AURA_AUTH_TOKEN) every request except /healthz and
/readyz must carry "Authorization: Bearer TOKEN", else it is answered 401
NotAuthorized; /metrics is protected too (give the scraper the token), the
two health endpoints and the dashboard's page are open so that probes need
no credentials (the page asks for the token and sends it with its polls).
aura topology and aura route read the API.

SIGINT or SIGTERM, a graceful leave within --leave-timeout: /readyz turns
503 at once (and the routing endpoints refuse), the node announces its
leave and the planner moves its cohorts to the others with the migration
protocol, without waiting for --settle; then it refuses new transactions
(REJECTED: resubmit elsewhere), lets those in flight finish, stops
granting whatever it still owns, broadcasts its membership leave, and
stops the management API last; it exits 0.`,
		Example: `  aura node --name cn-1 --listen 127.0.0.1:8001 --gossip 127.0.0.1:9001 --mn 127.0.0.1:7070 --warehouses 12
  aura node --name cn-2 --listen 127.0.0.1:8002 --gossip 127.0.0.1:9002 --join 127.0.0.1:9001 --mn 127.0.0.1:7070 --warehouses 12
  # pin the planner to cn-1, then cn-2:
  aura node --name cn-3 --gossip 127.0.0.1:9003 --join 127.0.0.1:9001 --nodes cn-1,cn-2 --warehouses 12`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runNode(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	addConfigFlags(cmd, &f.cfg)
	f.register(fl)
	fl.StringVar(&f.name, "name", "", "this node's unique name in the cluster, 1..64 bytes of [A-Za-z0-9._-] (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "protoactor remote address, HOST:PORT (port 0: a free port)")
	fl.StringVar(&f.advertise, "advertise", "", "remote address other nodes use, when it differs from --listen")
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "membership (memberlist) bind address, HOST:PORT")
	fl.StringVar(&f.gossipAdv, "gossip-advertise", "", "membership address other nodes use (UDP and TCP, one port), when it differs from --gossip, for example behind a proxy")
	fl.StringSliceVar(&f.join, "join", nil, "gossip addresses of nodes to join through, comma separated (none: start a new cluster)")
	fl.StringVar(&f.mn, "mn", "127.0.0.1:7070", "memory node address, HOST:PORT")
	fl.StringSliceVar(&f.plannerOrder, "nodes", nil, "optional: nodes that may host the planner, comma separated, in order of preference (default: any node with --planner, lowest name first); the roster of owners comes from membership either way")
	fl.BoolVar(&f.plannerRole, "planner", true, "advertise the planner role: this node may host the planner")
	fl.IntVar(&f.maxNodes, "max-nodes", 32, fmt.Sprintf("roster slots the planner hands out (owner indexes, 1..%d); the same on every node", control.MaxNodes-1))
	fl.Uint32Var(&f.id, "id", 0, "node number in lock tags, unique in the cluster, below 2^22 (default: position in --nodes + 1, else a hash of --name checked against the live members)")
	fl.DurationVar(&f.settle, "settle", time.Second, "membership must have had no join, failure or update this long before the planner moves cohorts (SPEC §6: act on settled membership; graceful leaves do not count)")
	fl.IntVar(&f.coordinators, "coordinators", 8, "transactions this node runs at once")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 256, "transactions accepted from clients and not yet answered; more are refused")
	fl.DurationVar(&f.heartbeat, "heartbeat", 100*time.Millisecond, "period of the access summaries sent to the planner")
	fl.DurationVar(&f.tick, "tick", 100*time.Millisecond, "planner tick (on the node running the planner)")
	fl.DurationVar(&f.ownerLease, "owner-lease", time.Second, "owner lease the planner grants with each answered heartbeat (on the node running the planner; 10ms..1m, at least two --heartbeat periods): a dead node's cohorts move 1.25 × this plus a drain deadline after its last heartbeat")
	fl.DurationVar(&f.leave, "leave-timeout", 5*time.Second, "how long a graceful leave may take")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringVar(&f.protoactorLog, "protoactor-log-level", "warn", "threshold for protoactor-go's own logs, on top of --log-level (it logs every endpoint connection at info)")
	f.sec.addGossipTLS(fl)
	f.sec.addMNToken(fl)
	fl.BoolVar(&f.testTimings, "test-timings", false, "membership timings for loopback tests (fast failure detection)")
	fl.DurationVar(&f.waitLoad, "wait-load", 0, "wait this long for the tables to be loaded (for example by 'aura bench --connect', which loads them before it drives the cluster) before giving up; 0: they must be loaded already")
	fl.StringVar(&f.http, "http", "", "management API address, HOST:PORT (GET /management/topology, /management/partition-route and /management/ownermap, for aura bench --connect, aura topology and aura route; /metrics, /healthz and /readyz); empty: none")
	f.mgmt.register(fl)
	return cmd
}

// loadPollEvery is how often a node waiting for the tables (--wait-load)
// asks the memory node: one FAA, negligible next to a load.
const loadPollEvery = 200 * time.Millisecond

// awaitLoaded returns once the memory node's tables are loaded, waiting up
// to wait for a loader to finish (0: no wait).
func awaitLoaded(ctx context.Context, dev rdma.Device, wait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		err := store.CheckLoaded(ctx, dev)
		if !errors.Is(err, store.ErrNotLoaded) || !time.Now().Before(deadline) {
			return err
		}
		if !logged {
			log.Info("waiting for the tables to be loaded", "wait_load", wait)
			logged = true
		}
		t := time.NewTimer(loadPollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func splitAddr(flag, addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("--%s %q: %w", flag, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--%s %q: bad port", flag, addr)
	}
	return h, port, nil
}

func (f *nodeFlags) validate() error {
	var errs []error
	if f.name == "" {
		errs = append(errs, errors.New("--name is required"))
	}
	if f.waitLoad < 0 {
		errs = append(errs, fmt.Errorf("--wait-load %v must not be negative", f.waitLoad))
	}
	seen := map[string]bool{}
	for _, n := range f.plannerOrder {
		if n == "" || seen[n] {
			errs = append(errs, fmt.Errorf("--nodes: empty or repeated name %q", n))
		}
		seen[n] = true
	}
	if len(f.plannerOrder) >= control.MaxNodes {
		errs = append(errs, fmt.Errorf("--nodes: %d names, at most %d", len(f.plannerOrder), control.MaxNodes-1))
	}
	if f.maxNodes < 1 || f.maxNodes >= control.MaxNodes {
		errs = append(errs, fmt.Errorf("--max-nodes %d: want 1..%d (the manifest's owner byte)", f.maxNodes, control.MaxNodes-1))
	}
	if f.id >= 1<<22 {
		errs = append(errs, fmt.Errorf("--id %d: must be below 2^22 (lock tags)", f.id))
	}
	if f.settle < 0 {
		errs = append(errs, fmt.Errorf("--settle %v must not be negative", f.settle))
	}
	if f.ownerLease < 10*time.Millisecond || f.ownerLease > owner.MaxLease || f.ownerLease < 2*f.heartbeat {
		errs = append(errs, fmt.Errorf("--owner-lease %v: want 10ms..%v and at least two --heartbeat periods (%v), or a lease runs out between two answers",
			f.ownerLease, owner.MaxLease, 2*f.heartbeat))
	}
	if len(f.plannerOrder) == 0 && f.workloadFlags.name == "tpcc" && f.warehouses == 0 {
		// The tables must match the loader's; TPC-C's default size is per
		// node, and the node count is only known from --nodes.
		errs = append(errs, errors.New("--warehouses is required for tpcc without --nodes (give the loader's value)"))
	}
	if _, _, err := splitAddr("gossip", f.gossip); err != nil {
		errs = append(errs, err)
	}
	if f.gossipAdv != "" {
		if _, _, err := splitAddr("gossip-advertise", f.gossipAdv); err != nil {
			errs = append(errs, err)
		}
	}
	if _, _, err := splitAddr("listen", f.listen); err != nil {
		errs = append(errs, err)
	}
	if f.coordinators < 1 || f.maxInFlight < 1 || f.heartbeat <= 0 || f.tick < time.Millisecond {
		errs = append(errs, errors.New("--coordinators, --max-in-flight, --heartbeat and --tick must be positive (tick ≥ 1ms)"))
	}
	if _, err := f.sec.gossip(); err != nil {
		errs = append(errs, err)
	}
	if _, err := f.sec.token(); err != nil {
		errs = append(errs, err)
	}
	if (f.sec.tlsCert == "") != (f.sec.tlsKey == "") || (f.sec.tlsCert == "") != (f.sec.tlsCA == "") {
		errs = append(errs, errors.New("--tls-cert, --tls-key and --tls-ca go together"))
	}
	return errors.Join(errs...)
}

func runNode(ctx context.Context, f *nodeFlags, stdout, stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	log = log.With("node", f.name)
	// The management API's port is taken first, so that a bad or busy
	// --http fails before the node joins anything.
	var httpLn net.Listener
	if f.http != "" {
		if httpLn, err = net.Listen("tcp", f.http); err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		defer httpLn.Close()
	}
	seed := uint64(1)
	// No run time: sizing flags (--expected-new-orders) must be given as on
	// the loader, or the tables will not match.
	wl, _, err := f.workloadFlags.forRun(max(1, len(f.plannerOrder)), 0, &seed, 0)
	if err != nil {
		return err
	}
	mopts, err := f.mgmt.options(wl, os.Getenv)
	if err != nil {
		return err
	}
	// The management server answers /healthz (and /readyz: not ready) from
	// here on, while the node dials the memory node, waits for the tables
	// and joins; the rest of the API once the node runs.
	var mgmt *mgmtServer
	var nm *nodeMetrics
	if httpLn != nil {
		nm = newNodeMetrics()
		mopts.Metrics = nm
		mgmt = startMgmtEarly(httpLn, log.With("component", "http"), mopts)
		defer mgmt.shutdown()
		log.Info("management API listening", "addr", mgmt.Addr(), "auth", mopts.AuthToken != "", "rules", mopts.Rules.Len())
	}
	mnToken, _ := f.sec.token() // validated
	dev, err := tcp.Dial(ctx, f.mn, tcp.ClientConfig{Token: mnToken})
	if err != nil {
		return fmt.Errorf("memory node %s: %w", f.mn, err)
	}
	defer dev.Close()
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		return err
	}
	if err := awaitLoaded(ctx, dev, f.waitLoad, log); err != nil {
		return fmt.Errorf("memory node %s: %w (load the tables first, e.g. with aura bench, or give --wait-load)", f.mn, err)
	}

	// The node's actor system and remote endpoint come first: the address
	// goes into the membership metadata.
	palog, err := componentLogger(log, "protoactor", f.protoactorLog)
	if err != nil {
		return err
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return palog }))
	rcfg := actors.DefaultRemoteConfig(f.listen)
	rcfg.AdvertiseAddr = f.advertise
	if rcfg.TLS, err = f.sec.tls(); err != nil {
		return err
	}
	rem, err := actors.StartRemote(sys, rcfg)
	if err != nil {
		return err
	}
	defer rem.Shutdown()

	ccfg := cluster.DefaultLANConfig()
	if f.testTimings {
		ccfg = cluster.DefaultTestConfig()
	}
	ccfg.NodeName = f.name
	ccfg.BindAddr, ccfg.BindPort, _ = splitAddr("gossip", f.gossip)
	if f.gossipAdv != "" {
		ccfg.AdvertiseAddr, ccfg.AdvertisePort, _ = splitAddr("gossip-advertise", f.gossipAdv)
	}
	ccfg.Seeds = f.join
	roles := []string{cluster.RoleCN}
	if f.plannerRole {
		roles = append(roles, cluster.RolePlanner)
	}
	ccfg.Meta = cluster.Meta{RemoteAddr: rem.Address(), Roles: roles}
	ccfg.Logger = log.With("component", "membership")
	ccfg.GossipKeys, _ = f.sec.gossip() // validated
	mem, err := cluster.New(ccfg)
	if err != nil {
		return err
	}
	if err := mem.Start(ctx); err != nil {
		return err
	}
	id, err := lockTagID(f, mem.Members())
	if err != nil {
		_ = mem.Leave(f.leave)
		return err
	}
	book := actors.AddressBookFunc(func(name string) (string, bool) {
		m, ok := mem.Member(name)
		if !ok {
			return "", false
		}
		return m.Meta.RemoteAddr, true
	})
	tr, err := actors.NewRemoteTransport(sys, book, actors.DefaultCallConfig(), seed)
	if err != nil {
		return err
	}
	// The planner lease's word: a planner hosted here acts only while it
	// holds it (package control/plannerlease).
	leaseWord, err := store.NewLeaseWord(ctx, dev)
	if err != nil {
		return err
	}
	defer leaseWord.Close()
	pl := &plannerHost{self: f.name, order: f.plannerOrder, maxNodes: f.maxNodes, settle: f.settle, sys: sys, mem: mem, book: book,
		tick: f.tick, lease: f.ownerLease, leaseWord: leaseWord, log: log, beats: actors.NewHeartbeatSender(sys.Root)}
	ncfg := actors.DefaultNodeConfig(f.name)
	ncfg.ID = id
	ncfg.Coordinators = f.coordinators
	ncfg.Logger = log
	ncfg.System = sys
	// No static roster: every OwnerMap comes with the planner's.
	var otr owner.Transport = tr
	if nm != nil {
		// Owner RPC latency, and the transaction latency histogram.
		otr = nm.timed(tr)
		ncfg.TxnLatency = nm.txnLatency
	}
	ncfg.Ownership = &actors.OwnershipConfig{Transport: otr, HeartbeatEvery: f.heartbeat, Heartbeat: pl.heartbeat}
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		return err
	}
	pl.known = func() []string {
		_, roster := node.InstalledMap()
		return roster
	}
	ep := &txnEndpoint{node: node, slots: make(chan struct{}, f.maxInFlight)}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return ep },
		actor.WithMailbox(actor.Bounded(4*f.maxInFlight))), TxnActorName); err != nil {
		return err
	}
	if mgmt != nil {
		nm.attach(node, mem, dev.Stats, pl.status)
		mgmt.dash.decisions = pl.decisions // before attach: the sampler reads it once attached
		mgmt.removeNode = pl.removeNode
		mgmt.attach(node, mem, f.plannerOrder)
	}
	gaddr := mem.Addr()
	fmt.Fprintf(stdout, "%s%s remote %s gossip %s\n", nodeReadyPrefix, f.name, rem.Address(), gaddr)
	log.Info("node ready", "remote", rem.Address(), "gossip", gaddr, "members", len(mem.Members()))

	// The placement loop keeps the planner placed and tells it the live
	// nodes until the node has handed its cohorts off.
	runCtx, stopRun := context.WithCancel(context.Background())
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		pl.run(runCtx)
	}()
	<-ctx.Done()
	// The graceful leave, within --leave-timeout in all (leaveBudget):
	// not ready first, the management server stopped last, so that probes
	// and the dashboard see the node leaving rather than a closed port.
	lb := newLeaveBudget(f.leave)
	log.Info("leaving", "leave_timeout", f.leave)
	if mgmt != nil {
		mgmt.beginLeave() // /readyz 503, no topology or routes served from a node on its way out
	}
	handOff(mem, node, lb.handOff(), log)
	// Transactions routed here before the clients heard of the leave ran
	// during the handoff; now new ones are refused (REJECTED: clients
	// resubmit elsewhere) and those in flight finish or abort.
	ep.closing.Store(true)
	ep.drain(lb.drain(), log)
	stopRun()
	<-placed
	// Stop granting whatever is still owned (a handoff past the timeout):
	// the planner reassigns it as soon as the others see this node leave,
	// without waiting for --settle.
	if err := node.Relinquish(); err != nil {
		log.Warn("relinquish", "err", err)
	}
	if err := mem.Leave(lb.broadcast()); err != nil {
		log.Warn("leave", "err", err)
	}
	err = node.Close()
	_ = mem.Shutdown()
	sys.Shutdown()
	if mgmt != nil {
		mgmt.shutdown() // last
	}
	log.Info("left", "took", lb.elapsed())
	return err
}

// leaveBudget splits --leave-timeout between the steps of a graceful
// leave. The handoff may use all of it but a tail (a quarter, at most
// leaveTailMax) kept for the transactions still in flight and the
// membership leave broadcast; a step that finds the budget spent still
// gets leaveMinStep, so that a leave past its timeout still tells the
// others rather than vanish (the failure detector would take seconds).
type leaveBudget struct {
	start    time.Time
	deadline time.Time
	tail     time.Duration
}

// Bounds of the leave's steps.
const (
	// leaveTailMax bounds the tail kept after the handoff: a drain of
	// transactions takes a transaction's duration (milliseconds), the
	// leave broadcast a gossip round trip.
	leaveTailMax = 1500 * time.Millisecond
	// leaveMinStep is the least a late step gets: one gossip message.
	leaveMinStep = 100 * time.Millisecond
)

func newLeaveBudget(total time.Duration) leaveBudget {
	now := time.Now()
	return leaveBudget{start: now, deadline: now.Add(total), tail: min(total/4, leaveTailMax)}
}

func (b leaveBudget) left(reserve time.Duration) time.Duration {
	return max(time.Until(b.deadline)-reserve, leaveMinStep)
}

// handOff is the handoff's budget: all but the tail.
func (b leaveBudget) handOff() time.Duration { return b.left(b.tail) }

// drain is the in-flight transactions' budget: half the tail.
func (b leaveBudget) drain() time.Duration { return b.left(b.tail / 2) }

// broadcast is the membership leave's budget: what is left.
func (b leaveBudget) broadcast() time.Duration { return b.left(0) }

func (b leaveBudget) elapsed() time.Duration { return time.Since(b.start) }

// handOff announces a graceful leave (RoleLeaving in the node's metadata)
// and waits, at most budget, until the planner has moved every cohort of
// the node to the others with the migration protocol (frozen, drained,
// handed off, retired here).
func handOff(mem *cluster.Membership, node *actors.Node, budget time.Duration, log *slog.Logger) {
	start := time.Now()
	meta := mem.LocalMeta()
	if !meta.HasRole(cluster.RoleLeaving) {
		meta.Roles = append(meta.Roles, cluster.RoleLeaving)
	}
	if err := mem.UpdateMeta(meta, budget); err != nil {
		log.Warn("announce leave", "err", err)
		return
	}
	const poll = 20 * time.Millisecond
	for node.HeldCohorts() > 0 {
		if time.Since(start) >= budget {
			log.Warn("handoff before leaving timed out", "cohorts", node.HeldCohorts(), "waited", time.Since(start))
			return
		}
		time.Sleep(poll)
	}
	log.Info("cohorts handed off", "took", time.Since(start))
}

// lockTagID is the node's number in lock tags (occ: unique per cluster,
// below 2^22): --id, else its position in --nodes + 1 (1..254), else a hash
// of its name in [256, 2^22), refused if a live member's name hashes to the
// same number (that check misses nodes with an explicit --id and nodes
// joining at the same moment; for 10 nodes a collision has odds of about
// 1 in 100,000 anyway).
func lockTagID(f *nodeFlags, members []cluster.Member) (uint32, error) {
	if f.id != 0 {
		return f.id, nil
	}
	if i := slices.Index(f.plannerOrder, f.name); i >= 0 {
		return uint32(i + 1), nil
	}
	id := hashedID(f.name)
	for _, m := range members {
		if m.Name != f.name && !slices.Contains(f.plannerOrder, m.Name) && hashedID(m.Name) == id {
			return 0, fmt.Errorf("node %q: lock-tag number %d collides with member %q's; give one of them --id", f.name, id, m.Name)
		}
	}
	return id, nil
}

// hashedID maps a node name to [256, 2^22): above the numbers --nodes
// positions give, so the two schemes never meet.
func hashedID(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return 256 + h.Sum32()%(1<<22-256)
}

// txnEndpoint runs each submitted transaction on the node, a bounded number
// at a time, answering the sender when it completes.
type txnEndpoint struct {
	node  *actors.Node
	slots chan struct{}
	// closing: the node is leaving; new transactions are refused.
	closing atomic.Bool
}

// drainPoll is how often drain looks at the transactions in flight.
const drainPoll = 5 * time.Millisecond

// drain waits, at most budget, until no accepted transaction is in flight
// (each holds a slot until it is answered). Past the budget the node's
// coordinators still finish what they were given when the node closes;
// the clients of those may see their request time out and resubmit the
// same transaction id, which is idempotent.
func (e *txnEndpoint) drain(budget time.Duration, log *slog.Logger) {
	start := time.Now()
	for len(e.slots) > 0 {
		if time.Since(start) >= budget {
			log.Warn("transactions still in flight at the leave's drain deadline", "in_flight", len(e.slots), "waited", time.Since(start))
			return
		}
		time.Sleep(drainPoll)
	}
}

func (e *txnEndpoint) Receive(ctx actor.Context) {
	msg, ok := ctx.Message().(*messages.TxnSubmit)
	if !ok {
		return
	}
	sender, root := ctx.Sender(), ctx.ActorSystem().Root
	if e.closing.Load() {
		ctx.Respond(&messages.TxnResult{TxnId: msg.GetTxnId(), Node: e.node.Name(),
			Outcome: messages.TxnOutcome_TXN_OUTCOME_REJECTED, Error: "node leaving the cluster: submit to another node"})
		return
	}
	select {
	case e.slots <- struct{}{}:
	default:
		ctx.Respond(&messages.TxnResult{TxnId: msg.GetTxnId(), Node: e.node.Name(),
			Outcome: messages.TxnOutcome_TXN_OUTCOME_ERROR, Error: "node overloaded: too many transactions in flight"})
		return
	}
	go func() {
		defer func() { <-e.slots }()
		res, err := e.node.Submit(context.Background(), msg)
		if err != nil {
			res = &messages.TxnResult{TxnId: msg.GetTxnId(), Node: e.node.Name(),
				Outcome: messages.TxnOutcome_TXN_OUTCOME_ERROR, Error: err.Error()}
		}
		if sender != nil {
			root.Send(sender, res)
		}
	}()
}

// plannerHost keeps the planner actor on the node cluster.PlannerNode
// chooses from this node's membership view (the first live node of --nodes
// that advertises the planner role, or without --nodes the lowest-named
// such node): it starts the actor when this node becomes that node and
// stops it when another does, and tells a running planner the live compute
// nodes.
type plannerHost struct {
	self     string
	order    []string // --nodes: placement order and allow-list; empty: by name
	maxNodes int
	settle   time.Duration
	sys      *actor.ActorSystem
	mem      *cluster.Membership
	book     actors.AddressBook
	tick     time.Duration
	lease    time.Duration
	// leaseWord is the planner lease's word on the memory node.
	leaseWord planner.LeaseWord
	log       *slog.Logger

	beats *actors.HeartbeatSender
	// known returns the roster of the map installed on this node (Nodes
	// .Known: a planner started here counts its majority over it too).
	known func() []string

	mu     sync.Mutex
	leader string
	pid    *actor.PID
	// candidates are the nodes that may host the planner in this node's
	// view, placement order first (cluster.PlannerCandidates); route picks
	// the one heartbeats go to: the placed planner, or the one that acts
	// when the placed one holds no planner lease (cluster.HeartbeatRoute).
	candidates []string
	route      cluster.HeartbeatRoute
	// grantedBy is the planner of the last owner lease granted, for the
	// log line that marks a change.
	grantedBy string
}

// status returns the Status of the planner actor when this node hosts it,
// waiting at most timeout (for the metrics and /readyz).
func (p *plannerHost) status(timeout time.Duration) (planner.Status, bool) {
	return askPlanner[planner.Status](p, planner.GetStatus{}, timeout)
}

// askPlanner sends msg to the planner actor when this node hosts it and
// returns its reply of type T, waiting at most timeout.
func askPlanner[T any](p *plannerHost, msg any, timeout time.Duration) (T, bool) {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	var zero T
	if pid == nil {
		return zero, false
	}
	r, err := p.sys.Root.RequestFuture(pid, msg, timeout).Result()
	v, ok := r.(T)
	if err != nil || !ok {
		return zero, false
	}
	return v, true
}

// heartbeat sends a summary to the planner the route picks, which answers
// with the node's owner lease, and tells the route how it fared.
func (p *plannerHost) heartbeat(s *messages.AccessSummary, reply func(*messages.LeaseGrant)) {
	p.mu.Lock()
	to := p.route.Target(p.candidates)
	p.mu.Unlock()
	if to == "" {
		return
	}
	addr, ok := p.book.RemoteAddress(to)
	if !ok {
		p.observe(to, cluster.Unanswered)
		return
	}
	p.beats.SendNotify(actor.NewPID(addr, "planner"), s, func(g *messages.LeaseGrant) {
		o := cluster.Answered
		if !g.GetGranted() && g.GetReason() == planner.ReasonNoPlannerLease {
			o = cluster.NoPlannerLease
		}
		p.observe(to, o)
		if g.GetGranted() {
			p.mu.Lock()
			if g.GetPlanner() != p.grantedBy {
				// Once per change of the granting planner: a grant from
				// another than the placed one means views differ.
				p.grantedBy = g.GetPlanner()
				p.log.Info("owner lease granted by a new planner", "planner", g.GetPlanner(), "placed", p.leader)
			}
			p.mu.Unlock()
		}
		reply(g)
	}, func() { p.observe(to, cluster.Unanswered) })
}

// observe tells the route how the heartbeat to node fared.
func (p *plannerHost) observe(node string, o cluster.Outcome) {
	p.mu.Lock()
	p.route.Observe(node, o, p.candidates)
	p.mu.Unlock()
}

// leaderPID returns the planner actor this node's heartbeats go to (the
// one its membership view places, or the acting one the heartbeat route
// found), and that node's name.
func (p *plannerHost) leaderPID() (*actor.PID, string, error) {
	p.mu.Lock()
	leader := p.route.Target(p.candidates)
	p.mu.Unlock()
	if leader == "" {
		return nil, "", errNoPlanner
	}
	addr, ok := p.book.RemoteAddress(leader)
	if !ok {
		return nil, leader, fmt.Errorf("%w: no remote address for %s", errNoPlanner, leader)
	}
	return actor.NewPID(addr, "planner"), leader, nil
}

// removeNode asks the current planner, wherever it runs, to stop counting
// node among the known compute nodes (messages.RemoveNode), waiting at most
// timeout for its answer.
func (p *plannerHost) removeNode(node string, timeout time.Duration) (*messages.RemoveNodeReply, error) {
	pid, leader, err := p.leaderPID()
	if err != nil {
		return nil, err
	}
	r, err := p.sys.Root.RequestFuture(pid, &messages.RemoveNode{Node: node, Requester: p.self}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("planner on %s: %w", leader, err)
	}
	rep, ok := r.(*messages.RemoveNodeReply)
	if !ok {
		return nil, fmt.Errorf("planner on %s answered %T", leader, r)
	}
	return rep, nil
}

// errNoPlanner: this node's membership view places no planner (no live
// node with the planner role), so nothing can take the request.
var errNoPlanner = errors.New("no planner placed")

// placementPeriod is how often the host re-reads membership: a placement
// change (and a new node's slot) is seen within it after the view changes.
const placementPeriod = 100 * time.Millisecond

func (p *plannerHost) run(ctx context.Context) {
	t := time.NewTicker(placementPeriod)
	defer t.Stop()
	for {
		p.step()
		select {
		case <-ctx.Done():
			p.mu.Lock()
			if p.pid != nil {
				_ = p.sys.Root.PoisonFuture(p.pid).Wait()
				p.pid = nil
			}
			p.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

func (p *plannerHost) step() {
	members, epoch := p.mem.Snapshot()
	candidates := cluster.PlannerCandidates(members, p.order)
	leader := ""
	if len(candidates) > 0 {
		leader = candidates[0] // cluster.PlannerNode
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.candidates = candidates
	if leader != p.leader {
		p.log.Info("planner placed", "on", leader, "membership_epoch", epoch)
		p.leader = leader
	}
	switch {
	case leader == p.self && p.pid == nil:
		cfg := planner.DefaultConfig(p.self, p.maxNodes)
		cfg.Tick = p.tick
		if p.lease > 0 {
			cfg.Lease = p.lease
		}
		cfg.LeaseWord = p.leaseWord
		cfg.Logger = p.log.With("component", "planner")
		pusher, err := actors.NewRemotePusher(p.sys, p.book, actors.DefaultCallConfig(), epoch)
		if err != nil {
			p.log.Error("planner", "err", err)
			return
		}
		a, err := planner.NewActor(cfg, pusher)
		if err != nil {
			p.log.Error("planner", "err", err)
			return
		}
		pid, err := p.sys.Root.SpawnNamed(a.Props(1<<14), "planner")
		if err != nil {
			p.log.Error("planner", "err", err)
			return
		}
		p.pid = pid
	case leader != p.self && p.pid != nil:
		_ = p.sys.Root.PoisonFuture(p.pid).Wait()
		p.pid = nil
	}
	if p.pid != nil {
		var known []string
		if p.known != nil {
			known = slices.Clone(p.known())
		}
		p.sys.Root.Send(p.pid, planner.Nodes{Names: cluster.ComputeNodes(members, p.order), MembershipEpoch: epoch,
			Unsettled: !p.mem.SettledExceptLeaves(p.settle), Leaving: cluster.LeavingNodes(members), Known: known})
	}
}
