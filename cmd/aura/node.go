package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/messages"
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
	name         string
	listen       string
	advertise    string
	gossip       string
	join         []string
	mn           string
	roster       []string
	coordinators int
	maxInFlight  int
	heartbeat    time.Duration
	tick         time.Duration
	leave        time.Duration
	logLevel     string
	logFormat    string
	testTimings  bool
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

--nodes lists the cluster's compute nodes in owner-index order (the same list
on every node; OwnerMaps name owners by position in it). The planner runs on
the first node of that list that is alive, and moves to the next when that
node leaves or dies (its state is rebuilt from heartbeats).

The workload flags must be the same on every node and on the client: they
define the tables. The tables must be loaded (aura bench loads them).

Once joined it prints one line on stdout,

    aura node ready: NAME remote HOST:PORT gossip HOST:PORT

SIGINT or SIGTERM: it leaves the membership (others see a graceful leave),
finishes the transactions it accepted and exits 0.`,
		Example: `  aura node --name cn-1 --listen 127.0.0.1:8001 --gossip 127.0.0.1:9001 --mn 127.0.0.1:7070 --nodes cn-1,cn-2,cn-3
  aura node --name cn-2 --listen 127.0.0.1:8002 --gossip 127.0.0.1:9002 --join 127.0.0.1:9001 --mn 127.0.0.1:7070 --nodes cn-1,cn-2,cn-3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runNode(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.name, "name", "", "this node's name, one of --nodes (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "protoactor remote address, HOST:PORT (port 0: a free port)")
	fl.StringVar(&f.advertise, "advertise", "", "remote address other nodes use, when it differs from --listen")
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "membership (memberlist) bind address, HOST:PORT")
	fl.StringSliceVar(&f.join, "join", nil, "gossip addresses of nodes to join through, comma separated (none: start a new cluster)")
	fl.StringVar(&f.mn, "mn", "127.0.0.1:7070", "memory node address, HOST:PORT")
	fl.StringSliceVar(&f.roster, "nodes", nil, "every compute node's name, comma separated, in owner-index order (required)")
	fl.IntVar(&f.coordinators, "coordinators", 8, "transactions this node runs at once")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 256, "transactions accepted from clients and not yet answered; more are refused")
	fl.DurationVar(&f.heartbeat, "heartbeat", 100*time.Millisecond, "period of the access summaries sent to the planner")
	fl.DurationVar(&f.tick, "tick", 100*time.Millisecond, "planner tick (on the node running the planner)")
	fl.DurationVar(&f.leave, "leave-timeout", 5*time.Second, "how long a graceful leave may take")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fl.BoolVar(&f.testTimings, "test-timings", false, "membership timings for loopback tests (fast failure detection)")
	return cmd
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
	if len(f.roster) == 0 {
		errs = append(errs, errors.New("--nodes is required"))
	} else if !slices.Contains(f.roster, f.name) {
		errs = append(errs, fmt.Errorf("--name %q is not in --nodes %v", f.name, f.roster))
	}
	seen := map[string]bool{}
	for _, n := range f.roster {
		if n == "" || seen[n] {
			errs = append(errs, fmt.Errorf("--nodes: empty or repeated name %q", n))
		}
		seen[n] = true
	}
	if _, _, err := splitAddr("gossip", f.gossip); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := splitAddr("listen", f.listen); err != nil {
		errs = append(errs, err)
	}
	if f.coordinators < 1 || f.maxInFlight < 1 || f.heartbeat <= 0 || f.tick < time.Millisecond {
		errs = append(errs, errors.New("--coordinators, --max-in-flight, --heartbeat and --tick must be positive (tick ≥ 1ms)"))
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
	seed := uint64(1)
	// No run time: sizing flags (--expected-new-orders) must be given as on
	// the loader, or the tables will not match.
	wl, _, err := f.workloadFlags.forRun(len(f.roster), 0, &seed, 0)
	if err != nil {
		return err
	}
	dev, err := tcp.Dial(ctx, f.mn, tcp.ClientConfig{})
	if err != nil {
		return fmt.Errorf("memory node %s: %w", f.mn, err)
	}
	defer dev.Close()
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		return err
	}
	if err := store.CheckLoaded(ctx, dev); err != nil {
		return fmt.Errorf("memory node %s: %w (load the tables first, e.g. with aura bench)", f.mn, err)
	}

	// The node's actor system and remote endpoint come first: the address
	// goes into the membership metadata.
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("component", "protoactor")
	}))
	rcfg := actors.DefaultRemoteConfig(f.listen)
	rcfg.AdvertiseAddr = f.advertise
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
	ccfg.Seeds = f.join
	ccfg.Meta = cluster.Meta{RemoteAddr: rem.Address(), Roles: []string{cluster.RoleCN, cluster.RolePlanner}}
	ccfg.Logger = log.With("component", "membership")
	mem, err := cluster.New(ccfg)
	if err != nil {
		return err
	}
	if err := mem.Start(ctx); err != nil {
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
	pl := &plannerHost{self: f.name, roster: f.roster, sys: sys, mem: mem, book: book, tick: f.tick, log: log}
	ncfg := actors.DefaultNodeConfig(f.name)
	ncfg.ID = uint32(slices.Index(f.roster, f.name) + 1)
	ncfg.Coordinators = f.coordinators
	ncfg.Logger = log
	ncfg.System = sys
	ncfg.Ownership = &actors.OwnershipConfig{Names: f.roster, Transport: tr, HeartbeatEvery: f.heartbeat, Heartbeat: pl.heartbeat}
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		return err
	}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &txnEndpoint{node: node, slots: make(chan struct{}, f.maxInFlight)}
	}, actor.WithMailbox(actor.Bounded(4*f.maxInFlight))), TxnActorName); err != nil {
		return err
	}
	gaddr := mem.Addr()
	fmt.Fprintf(stdout, "%s%s remote %s gossip %s\n", nodeReadyPrefix, f.name, rem.Address(), gaddr)
	log.Info("node ready", "remote", rem.Address(), "gossip", gaddr, "members", len(mem.Members()))

	pl.run(ctx) // until ctx ends: keeps the planner on the first live roster node
	log.Info("leaving")
	if err := mem.Leave(f.leave); err != nil {
		log.Warn("leave", "err", err)
	}
	err = node.Close()
	_ = mem.Shutdown()
	sys.Shutdown()
	return err
}

// txnEndpoint runs each submitted transaction on the node, a bounded number
// at a time, answering the sender when it completes.
type txnEndpoint struct {
	node  *actors.Node
	slots chan struct{}
}

func (e *txnEndpoint) Receive(ctx actor.Context) {
	msg, ok := ctx.Message().(*messages.TxnSubmit)
	if !ok {
		return
	}
	sender, root := ctx.Sender(), ctx.ActorSystem().Root
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

// plannerHost keeps the planner actor on the first live node of the roster:
// it starts the actor when this node becomes that node and stops it when
// another does, and tells a running planner the live roster.
type plannerHost struct {
	self   string
	roster []string
	sys    *actor.ActorSystem
	mem    *cluster.Membership
	book   actors.AddressBook
	tick   time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	leader string
	pid    *actor.PID
}

// heartbeat sends a summary to the current planner.
func (p *plannerHost) heartbeat(s *messages.AccessSummary) {
	p.mu.Lock()
	leader := p.leader
	p.mu.Unlock()
	if leader == "" {
		return
	}
	addr, ok := p.book.RemoteAddress(leader)
	if !ok {
		return
	}
	p.sys.Root.Send(actor.NewPID(addr, "planner"), s)
}

func (p *plannerHost) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
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
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Name] = true
	}
	names := make([]string, len(p.roster))
	leader := ""
	for i, n := range p.roster {
		if alive[n] {
			names[i] = n
			if leader == "" {
				leader = n
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if leader != p.leader {
		p.log.Info("planner placed", "on", leader, "membership_epoch", epoch)
		p.leader = leader
	}
	switch {
	case leader == p.self && p.pid == nil:
		cfg := planner.DefaultConfig(p.self, len(p.roster))
		cfg.Tick = p.tick
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
		p.sys.Root.Send(p.pid, planner.Nodes{Names: names, MembershipEpoch: epoch, Unsettled: !p.mem.Settled(time.Second)})
	}
}
