package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload"
)

// nodeProcess is a running `aura node`.
type nodeProcess struct {
	name, remote, gossip string
	cmd                  *exec.Cmd
	stderr               *syncBuffer
	exited               chan error
}

func startNode(t *testing.T, args ...string) *nodeProcess {
	t.Helper()
	p := &nodeProcess{}
	var l string
	p.cmd, p.stderr, p.exited, l = launch(t, "node", nodeReadyPrefix, args...)
	// NAME remote HOST:PORT gossip HOST:PORT
	f := strings.Fields(l)
	if len(f) != 5 {
		t.Fatalf("ready line %q", l)
	}
	p.name, p.remote, p.gossip = f[0], f[2], f[4]
	return p
}

// TestNodeProcessesLearnOwnership runs a memory node and three compute nodes
// as separate processes, loads TPC-C, drives it from this process over
// protoactor remote, and checks that the cluster learns ownership (locks
// granted in the nodes' own memory), that the TPC-C consistency conditions
// hold, and that SIGTERM makes every node leave and exit cleanly.
func TestNodeProcessesLearnOwnership(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	wl, wlArgs, mnAddr, dev, layout := tpccOnMN(t, 6)
	ctx := context.Background()

	roster := "cn-1,cn-2,cn-3"
	common := append([]string{"--mn", mnAddr, "--nodes", roster, "--test-timings", "--heartbeat", "50ms", "--tick", "50ms",
		"--coordinators", "4", "--log-level", "warn"}, wlArgs...)
	n1 := startNode(t, append([]string{"--name", "cn-1"}, common...)...)
	n2 := startNode(t, append([]string{"--name", "cn-2", "--join", n1.gossip}, common...)...)
	n3 := startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip}, common...)...)
	nodes := []*nodeProcess{n1, n2, n3}

	sys := clientSystem(t)

	var committed, lateLocal, lateTotal atomic.Uint64
	var late atomic.Bool
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := wl.NewGenerator(5, c)
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := gen.Next()
				msg.TxnId = uint64(c+1)<<40 | seq
				// The static fallback: warehouse w's transactions go to node
				// w mod 3, where the planner learns to place its cohorts.
				home := nodes[int(wl.Rule().Home(msg))%len(nodes)]
				pid := actor.NewPID(home.remote, TxnActorName)
				for attempt := uint32(1); attempt <= 100; attempt++ {
					msg.Attempt = attempt
					r, err := sys.Root.RequestFuture(pid, msg, 10*time.Second).Result()
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					res := r.(*messages.TxnResult)
					if late.Load() {
						k := res.GetCounters()
						lateLocal.Add(k.GetLocksLocal())
						lateTotal.Add(k.GetLocksLocal() + k.GetLocksOwnerRpc() + k.GetLocksMnCas())
					}
					o := res.GetOutcome()
					if o == messages.TxnOutcome_TXN_OUTCOME_COMMITTED || o == messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK {
						committed.Add(1)
						break
					}
					if o == messages.TxnOutcome_TXN_OUTCOME_ERROR || o == messages.TxnOutcome_TXN_OUTCOME_REJECTED {
						firstErr.CompareAndSwap(nil, res.GetError())
						return
					}
					time.Sleep(time.Duration(attempt) * 50 * time.Microsecond)
				}
			}
		}()
	}
	// Learning runs on wall-clock ticks: a loaded machine (CI runs the
	// simulator's tests beside this one) samples fewer transactions per tick.
	time.Sleep(12 * time.Second)
	late.Store(true)
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		t.Fatalf("client: %v", e)
	}
	local := float64(lateLocal.Load()) / float64(max(1, lateTotal.Load()))
	t.Logf("%d transactions committed; last 4 s: local hit %.1f%% of %d locks", committed.Load(), 100*local, lateTotal.Load())
	if committed.Load() == 0 {
		t.Fatal("nothing committed")
	}
	// Measured 92–94% on the 2-core development machine with every
	// transaction sampled (47–77% when nodes sampled one in 8: too few
	// samples per tick at a few hundred transactions per second).
	if local < 0.7 && !raceEnabled {
		t.Errorf("local hit %.1f%% after 12 s, want ≥ 70%% (chance: 33%%): the cluster did not learn ownership", 100*local)
	}
	for _, r := range wl.Check(ctx, store.NewSnapshot(layout, dev)) {
		if r.Err != nil {
			t.Errorf("TPC-C %s: %v", r.Name, r.Err)
		}
	}
	// SIGTERM: graceful leave and a clean exit.
	stopNodes(t, nodes...)
}

// stopNodes sends SIGTERM to every node and checks that each exits cleanly
// (status 0) within 30 s.
func stopNodes(t *testing.T, nodes ...*nodeProcess) {
	t.Helper()
	for _, n := range nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		select {
		case err := <-n.exited:
			n.exited <- err
			if err != nil {
				t.Errorf("%s exited with %v after SIGTERM\n%s", n.name, err, n.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s still running 30 s after SIGTERM", n.name)
		}
	}
}

// loadTables creates and loads wl's tables on the memory node behind dev.
func loadTables(t *testing.T, ctx context.Context, dev rdma.Device, wl workload.Workload) *store.Layout {
	t.Helper()
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.LoadOnce(ctx, layout, dev, func(ctx context.Context, l *store.Loader) error { return wl.Load(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	return layout
}

// TestPlannerFailsOverWhenItsNodeIsKilled kills -9 the node hosting the
// planner and checks that the next node of --nodes hosts it within 10 s
// (crash detection plus placement) and that the surviving nodes keep
// committing transactions.
func TestPlannerFailsOverWhenItsNodeIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	wl, wlArgs, mnAddr, _, _ := tpccOnMN(t, 3)
	common := append([]string{"--mn", mnAddr, "--nodes", "cn-1,cn-2,cn-3", "--test-timings", "--log-level", "info"}, wlArgs...)
	n1 := startNode(t, append([]string{"--name", "cn-1"}, common...)...)
	n2 := startNode(t, append([]string{"--name", "cn-2", "--join", n1.gossip}, common...)...)
	n3 := startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip}, common...)...)
	waitLog := func(p *nodeProcess, what string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < within {
			if strings.Contains(p.stderr.String(), what) {
				return time.Since(start)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s did not log %q within %v", p.name, what, within)
		return 0
	}
	waitLog(n3, "member=cn-2", 10*time.Second) // everyone has joined
	_ = n1.cmd.Process.Kill()
	d := waitLog(n2, `msg="planner placed" node=cn-2 on=cn-2`, 10*time.Second)
	// The new planner acts once it holds the planner lease: cn-1's, not
	// released (kill -9), must first stay unchanged for a lease (1 s).
	l := d + waitLog(n2, `msg="planner lease acquired`, 10*time.Second)
	t.Logf("planner on cn-2 %.1f s after cn-1 was killed, acting (planner lease) %.1f s after", d.Seconds(), l.Seconds())

	sys := clientSystem(t)
	gen := wl.NewGenerator(9, 0)
	committed := 0
	for seq := uint64(1); committed < 50 && seq < 5000; seq++ {
		msg := gen.Next()
		w := int(wl.Rule().Home(msg)) % 3
		if w == 0 {
			continue // cn-1's warehouses: its node is gone
		}
		msg.TxnId = 1<<40 | seq
		target := []*nodeProcess{nil, n2, n3}[w]
		r, err := sys.Root.RequestFuture(actor.NewPID(target.remote, TxnActorName), msg, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("submit to %s after the kill: %v", target.name, err)
		}
		if o := r.(*messages.TxnResult).GetOutcome(); o == messages.TxnOutcome_TXN_OUTCOME_COMMITTED || o == messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK {
			committed++
		}
	}
	if committed < 50 {
		t.Fatalf("only %d transactions committed on the surviving nodes", committed)
	}
}

// tpccOnMN starts a memory node, loads a small TPC-C of the given
// warehouses through a TCP device, and returns the workload, its flags (to
// pass to the nodes, which must build the same tables), the memory node's
// address, the device and the layout.
func tpccOnMN(t *testing.T, warehouses int) (workload.Workload, []string, string, rdma.Device, *store.Layout) {
	t.Helper()
	wlArgs := []string{"--workload", "tpcc", "--warehouses", fmt.Sprint(warehouses), "--items", "2000", "--customers", "100", "--expected-new-orders", "100000"}
	wl := workloadOf(t, wlArgs)
	mn := startMN(t, "--listen", "127.0.0.1:0", "--size", "2GiB")
	ctx := context.Background()
	dev, err := tcp.Dial(ctx, mn.addr, tcp.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return wl, wlArgs, mn.addr, dev, loadTables(t, ctx, dev, wl)
}

// workloadOf builds the workload the workload flags args describe, as the
// processes given them do.
func workloadOf(t *testing.T, args []string) workload.Workload {
	t.Helper()
	var wf workloadFlags
	fs := pflag.NewFlagSet("wl", pflag.ContinueOnError)
	wf.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	seed := uint64(1)
	wl, _, err := wf.forRun(3, 0, &seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

// clientSystem starts this test process's actor system with a remote
// endpoint (one per process).
func clientSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	rem, err := actors.StartRemote(sys, actors.DefaultRemoteConfig("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rem.Shutdown(); sys.Shutdown() })
	return sys
}

// loadClient drives TPC-C against a changing set of node processes from
// this process: transaction w of warehouse home goes to nodes[home mod
// len(nodes)] (the static fallback over the nodes the client currently
// routes to), aborted attempts are retried with backoff, and unreachable
// or refusing nodes are counted and skipped, never fatal: nodes come and
// go under it. Commits are counted per phase.
type loadClient struct {
	wl     workload.Workload
	sys    *actor.ActorSystem
	nodes  atomic.Pointer[[]*nodeProcess]
	phase  atomic.Int32
	stop   chan struct{}
	wg     sync.WaitGroup
	errs   atomic.Uint64
	gaveUp atomic.Uint64
	// per phase
	commits [8]atomic.Uint64
	// local lock grants and all lock grants of transactions executed by
	// each node (by name), since the last reset
	mu          sync.Mutex
	local, all  map[string]uint64
	lastErr     atomic.Value
	txnsStarted atomic.Uint64
}

func startLoad(t *testing.T, wl workload.Workload, sys *actor.ActorSystem, clients int, nodes []*nodeProcess) *loadClient {
	t.Helper()
	lc := &loadClient{wl: wl, sys: sys, stop: make(chan struct{}), local: map[string]uint64{}, all: map[string]uint64{}}
	lc.route(nodes...)
	for c := range clients {
		lc.wg.Add(1)
		go lc.run(c)
	}
	t.Cleanup(lc.halt)
	return lc
}

// route makes the client send to these nodes from now on.
func (lc *loadClient) route(nodes ...*nodeProcess) {
	ns := slices.Clone(nodes)
	lc.nodes.Store(&ns)
}

func (lc *loadClient) halt() {
	select {
	case <-lc.stop:
	default:
		close(lc.stop)
	}
	lc.wg.Wait()
}

func (lc *loadClient) run(c int) {
	defer lc.wg.Done()
	gen := lc.wl.NewGenerator(11, c)
	for seq := uint64(1); ; seq++ {
		msg := gen.Next()
		msg.TxnId = uint64(c+1)<<40 | seq
		lc.txnsStarted.Add(1)
	attempts:
		for attempt := uint32(1); ; attempt++ {
			select {
			case <-lc.stop:
				return
			default:
			}
			if attempt > 200 {
				lc.gaveUp.Add(1)
				break
			}
			nodes := *lc.nodes.Load()
			home := nodes[int(lc.wl.Rule().Home(msg))%len(nodes)]
			msg.Attempt = attempt
			r, err := lc.sys.Root.RequestFuture(actor.NewPID(home.remote, TxnActorName), msg, 5*time.Second).Result()
			if err != nil {
				lc.errs.Add(1)
				lc.lastErr.Store(fmt.Sprintf("%s: %v", home.name, err))
				time.Sleep(20 * time.Millisecond)
				continue
			}
			res := r.(*messages.TxnResult)
			k := res.GetCounters()
			lc.mu.Lock()
			lc.local[res.GetNode()] += k.GetLocksLocal()
			lc.all[res.GetNode()] += k.GetLocksLocal() + k.GetLocksOwnerRpc() + k.GetLocksMnCas()
			lc.mu.Unlock()
			switch res.GetOutcome() {
			case messages.TxnOutcome_TXN_OUTCOME_COMMITTED, messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK:
				lc.commits[lc.phase.Load()].Add(1)
				break attempts
			case messages.TxnOutcome_TXN_OUTCOME_ERROR, messages.TxnOutcome_TXN_OUTCOME_REJECTED:
				lc.errs.Add(1)
				lc.lastErr.Store(fmt.Sprintf("%s: %s", home.name, res.GetError()))
				time.Sleep(20 * time.Millisecond)
			default:
				time.Sleep(time.Duration(min(attempt, 40)) * 100 * time.Microsecond)
			}
		}
	}
}

// localLocks returns the local and total lock grants of transactions that
// executed on node since the previous call for it.
func (lc *loadClient) localLocks(node string) (uint64, uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	l, a := lc.local[node], lc.all[node]
	lc.local[node], lc.all[node] = 0, 0
	return l, a
}

// logWatch scans a node's stderr from an offset for a line.
// checkPhases reports the commits of each phase (phase i counted while
// lc.phase was i) and fails the test for a phase without any.
func (lc *loadClient) checkPhases(t *testing.T, phases ...string) {
	t.Helper()
	for i, name := range phases {
		n := lc.commits[i].Load()
		t.Logf("%s: %d committed", name, n)
		if n == 0 {
			t.Errorf("nothing committed %s", name)
		}
	}
	t.Logf("client: %d transport/node errors, %d transactions given up after 200 attempts (last error: %v)",
		lc.errs.Load(), lc.gaveUp.Load(), lc.lastErr.Load())
}

type logWatch struct {
	p    *nodeProcess
	from int
	at   time.Time // when the watch was made: wait's durations count from here
}

func watchFromNow(p *nodeProcess) logWatch {
	return logWatch{p: p, from: len(p.stderr.String()), at: time.Now()}
}

// wait polls (every 10 ms) until a line after the offset satisfies match,
// and returns it with the time since the watch was made; ok false after
// within.
func (w logWatch) wait(within time.Duration, match func(line string) bool) (string, time.Duration, bool) {
	start := time.Now()
	for {
		log := w.p.stderr.String()
		if w.from <= len(log) {
			for _, l := range strings.Split(log[w.from:], "\n") {
				if match(l) {
					return l, time.Since(w.at), true
				}
			}
		}
		if time.Since(start) > within {
			return "", time.Since(w.at), false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastPublished returns p's last "epoch published" log line.
func lastPublished(p *nodeProcess) string {
	last := ""
	for _, l := range (logWatch{p: p}).lines() {
		if published(func(string, string) bool { return true })(l) {
			last = l
		}
	}
	return last
}

// lines returns the log lines after the offset.
func (w logWatch) lines() []string {
	log := w.p.stderr.String()
	if w.from > len(log) {
		return nil
	}
	return strings.Split(log[w.from:], "\n")
}

// logField returns the value of key=value in a text log line ("" if absent).
func logField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// published matches the planner's "epoch published" lines whose roster and
// owned fields satisfy cond.
func published(cond func(roster, owned string) bool) func(string) bool {
	return func(l string) bool {
		return strings.Contains(l, `msg="epoch published"`) && cond(logField(l, "roster"), logField(l, "owned"))
	}
}

// memberEvent matches a membership log line ("leave", "fail", "join")
// about node.
func memberEvent(event, node string) func(string) bool {
	return func(l string) bool {
		return strings.Contains(l, `msg="cluster: member `+event+`"`) && strings.Contains(l, "member="+node+" ")
	}
}

// awaitDeparture waits until the watched node logs node's membership event
// ("leave", "fail") within eventWithin, then a published map without node
// within mapWithin, and returns both times since the watch was made.
func awaitDeparture(t *testing.T, w logWatch, node, event string, eventWithin, mapWithin time.Duration) (seen, gone time.Duration) {
	t.Helper()
	_, seen, ok := w.wait(eventWithin, memberEvent(event, node))
	if !ok {
		t.Fatalf("the watched node logged no member %s of %s within %v", event, node, eventWithin)
	}
	line, gone, ok := w.wait(mapWithin, mapWithout(node))
	if !ok {
		t.Fatalf("an OwnerMap still names %s %v after the watch began", node, mapWithin)
	}
	t.Logf("first map without %s: %s", node, line)
	return seen, gone
}

// mapWithout matches a published map whose roster does not name node.
func mapWithout(node string) func(string) bool {
	return published(func(roster, _ string) bool { return !namesNode(roster, node) })
}

// namesNode reports whether a comma-separated roster or owned field names
// node (as "node" or "node:count").
func namesNode(field, node string) bool {
	for _, f := range strings.Split(field, ",") {
		if f == node || strings.HasPrefix(f, node+":") {
			return true
		}
	}
	return false
}

// processLeakOptions are the goroutines a test's own actor system leaves
// behind for a while after Shutdown (protoactor's dead-letter throttle and
// the gRPC connections of its remote endpoint wind down asynchronously).
func processLeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	}
}

// TestNodeProcessesJoinAndLeaveUnderLoad runs a memory node and three
// compute nodes without --nodes (the roster comes from membership, the
// planner sits on the lowest name) under TPC-C from this process, then:
// a fourth node joins (the planner gives it a roster slot within 2 s, and
// cohorts soon after), and a non-planner node is stopped with SIGTERM (it
// announces its leave, the planner moves its cohorts to the others with the
// migration protocol, then it leaves: the others see it leave within 1 s
// of the signal, and no map names it after that; its /readyz answers 503
// before it exits, and it exits within 5 s of the signal), and then a new
// process rejoins under its name (it owns cohorts again). Transactions commit in every phase and the TPC-C
// consistency conditions hold at the end.
func TestNodeProcessesJoinAndLeaveUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	leakOpts := processLeakOptions()
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) }) // runs last: after the processes and the client stopped
	wl, wlArgs, mnAddr, dev, layout := tpccOnMN(t, 8)
	common := append([]string{"--mn", mnAddr, "--test-timings", "--heartbeat", "50ms", "--tick", "50ms",
		"--coordinators", "4", "--log-level", "info"}, wlArgs...)
	n1 := startNode(t, append([]string{"--name", "cn-1"}, common...)...)
	n2 := startNode(t, append([]string{"--name", "cn-2", "--join", n1.gossip}, common...)...)
	h3 := freeAddr(t)
	n3 := startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip, "--http", h3}, common...)...)
	planner := n1 // the lowest name
	if _, _, ok := watchFromNow(planner).wait(10*time.Second, func(l string) bool {
		return strings.Contains(l, `msg="roster slot assigned"`) && strings.Contains(l, "node=cn-3 ")
	}); !ok && !strings.Contains(planner.stderr.String(), "node=cn-3 slot=") {
		t.Fatal("the planner never gave cn-3 a slot")
	}

	lc := startLoad(t, wl, clientSystem(t), 8, []*nodeProcess{n1, n2, n3})
	time.Sleep(6 * time.Second) // learn ownership on three nodes

	// Join.
	lc.phase.Store(1)
	t0 := time.Now()
	n4 := startNode(t, append([]string{"--name", "cn-4", "--join", n2.gossip}, common...)...)
	ready := time.Since(t0)
	// Durations count from the ready line (printed once it has joined);
	// lines logged earlier are before it by construction.
	joinLog := logWatch{p: planner, from: 0, at: time.Now()}
	_, seen, ok := joinLog.wait(2*time.Second, func(l string) bool {
		return strings.Contains(l, `msg="roster slot assigned"`) && strings.Contains(l, "node=cn-4 ")
	})
	if !ok {
		t.Fatalf("the planner gave cn-4 no roster slot within 2 s of its ready line")
	}
	lc.route(n1, n2, n3, n4)
	_, owns, ok := joinLog.wait(20*time.Second, published(func(roster, owned string) bool { return namesNode(owned, "cn-4") }))
	if !ok {
		t.Fatalf("no OwnerMap gave cn-4 a cohort within 20 s of joining")
	}
	t.Logf("join: cn-4 ready %v after its start; the planner gave it a slot by %v after that, cohorts by %v after it",
		ready.Round(time.Millisecond), seen.Round(time.Millisecond), owns.Round(time.Millisecond))
	lc.localLocks("cn-4")
	time.Sleep(3 * time.Second)
	if l, a := lc.localLocks("cn-4"); l == 0 {
		t.Errorf("cn-4 granted none of its transactions' %d locks locally 3 s after owning cohorts", a)
	} else {
		t.Logf("cn-4: %d of %d locks local in the 3 s after it got cohorts", l, a)
	}

	// Graceful leave of a non-planner node.
	lc.phase.Store(2)
	lc.route(n1, n2, n4)
	time.Sleep(200 * time.Millisecond) // let requests already routed to cn-3 finish
	leaveLog := watchFromNow(planner)
	t.Logf("before the leave: %s", lastPublished(planner))
	probe := probeReadiness(t, "http://"+h3+readyzPath)
	if err := n3.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	termAt := time.Now()
	// It stopped granting before it left, so the planner reassigns its
	// cohorts at once (no --settle wait for a graceful leave).
	left, gone := awaitDeparture(t, leaveLog, "cn-3", "leave", time.Second, 2*time.Second)
	select {
	case err := <-n3.exited:
		n3.exited <- err
		if err != nil {
			t.Errorf("cn-3 exited with %v after SIGTERM", err)
		}
		// SPEC §6 / issue 9: a graceful leave within 5 s (--leave-timeout's
		// default bounds it).
		if took := time.Since(termAt); took > 5*time.Second {
			t.Errorf("cn-3 exited %v after SIGTERM, want within 5 s", took.Round(time.Millisecond))
		} else {
			t.Logf("cn-3 exited %v after SIGTERM", took.Round(time.Millisecond))
		}
	case <-time.After(10 * time.Second):
		t.Errorf("cn-3 still running 10 s after SIGTERM")
	}
	probe.check(t, termAt)
	t.Logf("leave: seen as a leave %v after SIGTERM; first map without cn-3 %v after SIGTERM", left.Round(time.Millisecond),
		gone.Round(time.Millisecond))
	// It handed its cohorts off (migrations: frozen, drained, moved or
	// evicted) before it left, not after.
	if out := n3.stderr.String(); !strings.Contains(out, `msg="cohorts handed off"`) {
		t.Errorf("cn-3 left without handing its cohorts off:\n%s", lastLines(out, 20))
	}
	handedOff := false
	for _, l := range leaveLog.lines() {
		if strings.Contains(l, `msg="migrations done"`) && strings.Contains(l, ":cn-3>") {
			handedOff = true
			t.Logf("planner: %s", l[strings.Index(l, "msg="):])
		}
	}
	if !handedOff {
		t.Errorf("the planner moved no cohort off cn-3 with the migration protocol")
	}
	time.Sleep(2 * time.Second)
	// Of the maps published after the planner's node saw the leave, at
	// most two may still name cn-3: one planned before the planner heard
	// of it (membership reaches the planner every 100 ms), and the held-back
	// second half of an evict-then-install move planned with it (control/
	// plane publishes it at the next tick without replanning). The first
	// map planned after that leaves it out, and every later one does too.
	without, seenLeave, naming := false, false, 0
	for _, l := range leaveLog.lines() {
		if memberEvent("leave", "cn-3")(l) {
			seenLeave = true
		}
		if !published(func(string, string) bool { return true })(l) {
			continue
		}
		names := namesNode(logField(l, "roster"), "cn-3")
		if without && names {
			t.Errorf("a map names cn-3 again after one left it out: %s", l)
		}
		if seenLeave && names {
			naming++
		}
		without = without || !names
	}
	if naming > 2 {
		t.Errorf("%d maps published after the leave still name cn-3, want at most 2", naming)
	}

	// cn-3 comes back: a new process under the same name rejoins, gets a
	// slot and, its heartbeats counted again, cohorts.
	lc.phase.Store(3)
	rejoinLog := watchFromNow(planner)
	n3 = startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip}, common...)...)
	ready = time.Since(rejoinLog.at)
	lc.route(n1, n2, n3, n4)
	_, back, ok := rejoinLog.wait(20*time.Second, published(func(roster, owned string) bool { return namesNode(owned, "cn-3") }))
	if !ok {
		t.Fatalf("the restarted cn-3 owned no cohort within 20 s of its start")
	}
	t.Logf("rejoin: restarted cn-3 ready %v after its start, owns cohorts %v after its start", ready.Round(time.Millisecond),
		back.Round(time.Millisecond))
	lc.phase.Store(4)
	time.Sleep(2 * time.Second)
	lc.halt()

	lc.checkPhases(t, "with 3 nodes", "after the join", "after the leave", "after the rejoin", "in the last 2 s")
	for _, r := range wl.Check(context.Background(), store.NewSnapshot(layout, dev)) {
		if r.Err != nil {
			t.Errorf("TPC-C %s: %v", r.Name, r.Err)
		}
	}
	stopNodes(t, n1, n2, n3, n4)
}

// readinessProbe polls a node's /readyz like an orchestrator would, every
// 10 ms, recording each answer's status (0: no connection) until the
// connection is refused after the node has answered once (it exited).
type readinessProbe struct {
	done chan struct{}
	obs  []probeObs
}

type probeObs struct {
	at     time.Time
	status int
}

// It returns once the node has answered 200 (ready), or fails the test
// after 5 s.
func probeReadiness(t *testing.T, url string) *readinessProbe {
	t.Helper()
	p := &readinessProbe{done: make(chan struct{})}
	ready := make(chan struct{})
	hc := &http.Client{Timeout: time.Second}
	go func() {
		defer close(p.done)
		defer hc.CloseIdleConnections() // no keep-alive goroutines left for the leak check
		wasReady := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			o := probeObs{at: time.Now()}
			resp, err := hc.Get(url)
			if err == nil {
				o.status = resp.StatusCode
				resp.Body.Close()
			} else if !errors.Is(err, syscall.ECONNREFUSED) {
				continue // slow (a timeout on a busy machine), not closed: ask again
			}
			p.obs = append(p.obs, o)
			if o.status == http.StatusOK && !wasReady {
				wasReady = true
				close(ready)
			}
			if o.status == 0 && wasReady {
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not answer 200 within 5 s", url)
	}
	return p
}

// check waits for the probe to end and asserts what an orchestrator
// needs from a graceful leave: ready (200) before the signal at termAt,
// then not ready (503) while the node hands off and leaves, answered
// before the port closes: the management server stops last.
func (p *readinessProbe) check(t *testing.T, termAt time.Time) {
	t.Helper()
	<-p.done
	firstNotReady, closed := time.Time{}, time.Time{}
	readyBefore := false
	for _, o := range p.obs {
		switch {
		case o.at.Before(termAt) && o.status == http.StatusOK:
			readyBefore = true
		case !o.at.Before(termAt) && o.status == http.StatusServiceUnavailable && firstNotReady.IsZero():
			firstNotReady = o.at
		case !o.at.Before(termAt) && o.status == 0 && closed.IsZero():
			closed = o.at
		}
	}
	if !readyBefore {
		t.Errorf("/readyz never answered 200 before SIGTERM")
	}
	if firstNotReady.IsZero() || (!closed.IsZero() && closed.Before(firstNotReady)) {
		t.Errorf("/readyz did not answer 503 before the node's port closed (503 at %v, closed at %v after SIGTERM)",
			firstNotReady.Sub(termAt), closed.Sub(termAt))
		return
	}
	t.Logf("/readyz: 503 %v after SIGTERM, port closed %v after SIGTERM", firstNotReady.Sub(termAt).Round(time.Millisecond),
		closed.Sub(termAt).Round(time.Millisecond))
}

// TestNodeProcessesSurviveCrashes runs four compute nodes without --nodes
// under TPC-C, kills -9 a non-planner node (the others declare it failed
// within 6 s, its cohorts go to the survivors and no map names it after
// that), then kills -9 the planner's node (the next lowest name hosts the
// planner, publishes above the epochs the nodes hold, and the survivors
// get cohorts again). Transactions routed to the survivors keep committing,
// and the TPC-C consistency conditions hold afterwards: a commit's
// write-back is one doorbell, which the TCP memory node receives as one
// frame and applies whole or not at all when its sender dies (a process
// killed mid-frame leaves an incomplete frame, which the memory node drops),
// so a kill -9 cannot leave half a transaction. What it can leave are the
// dead node's held lock words: records its in-flight transactions locked
// stay locked (later transactions on them abort) until the survivors'
// repair ends them, 30 s after they met them (package occ, "Crash
// recovery"). A
// transaction whose reply was lost and that the client resubmits elsewhere
// is answered from the commit ledger if it committed (package occ,
// "Exactly once"), not run twice.
func TestNodeProcessesSurviveCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	leakOpts := processLeakOptions()
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	wl, wlArgs, mnAddr, dev, layout := tpccOnMN(t, 8)
	common := append([]string{"--mn", mnAddr, "--test-timings", "--heartbeat", "50ms", "--tick", "50ms",
		"--coordinators", "4", "--log-level", "info"}, wlArgs...)
	n1 := startNode(t, append([]string{"--name", "cn-1"}, common...)...)
	n2 := startNode(t, append([]string{"--name", "cn-2", "--join", n1.gossip}, common...)...)
	n3 := startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip}, common...)...)
	n4 := startNode(t, append([]string{"--name", "cn-4", "--join", n1.gossip}, common...)...)
	if _, _, ok := watchFromNow(n1).wait(10*time.Second, published(func(roster, owned string) bool {
		return namesNode(roster, "cn-4")
	})); !ok && !strings.Contains(n1.stderr.String(), "node=cn-4 slot=") {
		t.Fatal("the planner never gave cn-4 a slot")
	}
	lc := startLoad(t, wl, clientSystem(t), 8, []*nodeProcess{n1, n2, n3, n4})
	time.Sleep(6 * time.Second)

	// kill -9 a node that does not host the planner.
	lc.phase.Store(1)
	crashLog := watchFromNow(n1)
	t.Logf("before the crash: %s", lastPublished(n1))
	_ = n4.cmd.Process.Kill()
	lc.route(n1, n2, n3) // a client that lost its connection re-routes at once
	detected, gone := awaitDeparture(t, crashLog, "cn-4", "fail", 6*time.Second, 20*time.Second)
	t.Logf("crash: cn-4 declared failed %v after kill -9; first map without it %v after the kill",
		detected.Round(time.Millisecond), gone.Round(time.Millisecond))
	time.Sleep(2 * time.Second)

	// kill -9 the planner's node: cn-2 (the next name) takes over.
	lc.phase.Store(2)
	lastEpoch := uint64(0)
	fmt.Sscan(logField(lastPublished(n1), "epoch"), &lastEpoch)
	failLog := watchFromNow(n2)
	_ = n1.cmd.Process.Kill()
	lc.route(n2, n3)
	_, placed, ok := failLog.wait(10*time.Second, func(l string) bool {
		return strings.Contains(l, `msg="planner placed"`) && strings.Contains(l, "on=cn-2")
	})
	if !ok {
		t.Fatal("cn-2 did not take the planner over within 10 s of the kill")
	}
	first, firstAt, ok := failLog.wait(10*time.Second, published(func(string, string) bool { return true }))
	if !ok {
		t.Fatal("the new planner published nothing within 10 s")
	}
	var e uint64
	fmt.Sscan(logField(first, "epoch"), &e)
	if e <= lastEpoch || logField(first, "cohorts") != "0" {
		t.Errorf("the new planner's first map: epoch %d with %s cohorts; want an empty map above the old planner's last epoch %d",
			e, logField(first, "cohorts"), lastEpoch)
	}
	_, owns, ok := failLog.wait(20*time.Second, published(func(roster, owned string) bool {
		return !namesNode(roster, "cn-1") && owned != ""
	}))
	if !ok {
		t.Fatal("the new planner gave the survivors no cohorts within 20 s")
	}
	t.Logf("planner failover: cn-2 hosts it %v after cn-1's kill -9; its first map (epoch %d > %d, empty) %v after; cohorts again %v after",
		placed.Round(time.Millisecond), e, lastEpoch, firstAt.Round(time.Millisecond), owns.Round(time.Millisecond))
	lc.phase.Store(3)
	time.Sleep(2 * time.Second)
	lc.halt()
	lc.checkPhases(t, "with 4 nodes", "after the crash", "during the planner failover", "in the last 2 s")
	for _, r := range wl.Check(context.Background(), store.NewSnapshot(layout, dev)) {
		if r.Err != nil {
			t.Errorf("TPC-C %s after two kill -9: %v", r.Name, r.Err)
		}
	}
}

func TestNodeHelpExplainsEveryFlag(t *testing.T) {
	// The workload flags are bench's and sim's too; their help is theirs.
	var wf workloadFlags
	shared := pflag.NewFlagSet("wl", pflag.ContinueOnError)
	wf.register(shared)
	assertHelp(t, newNodeCmd(), shared, "--nodes", "--planner", "--max-nodes", "--id", "--settle", "--owner-lease", "roster", "allow-list", nodeReadyPrefix)
}

// TestNodeRefusesBadFlags: flag problems are reported before the node
// connects anywhere.
func TestNodeRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--name", "cn-1", "--warehouses", "4", "--max-nodes", "0"},
		{"--name", "cn-1", "--warehouses", "4", "--max-nodes", "255"},
		{"--name", "cn-1", "--warehouses", "4", "--wait-load", "-1s"},
		{"--name", "cn-1", "--warehouses", "4", "--id", "4194304"},
		{"--name", "cn-1", "--warehouses", "4", "--owner-lease", "5ms"},
		{"--name", "cn-1", "--warehouses", "4", "--owner-lease", "2m"},
		{"--name", "cn-1", "--warehouses", "4", "--owner-lease", "150ms"}, // under two 100 ms heartbeats
		{"--name", "cn-1", "--warehouses", "4", "--nodes", "cn-1,cn-1"},
		{"--name", "cn-1"}, // tpcc without --warehouses or --nodes: the tables' size is unknown
		{"--warehouses", "4"},
	} {
		c := newNodeCmd()
		c.SetArgs(append(args, "--mn", "127.0.0.1:1"))
		c.SetOut(&bytes.Buffer{})
		c.SetErr(&bytes.Buffer{})
		err := c.Execute()
		if err == nil || strings.Contains(err.Error(), "memory node") {
			t.Errorf("%v: %v, want a flag error", args, err)
		}
	}
}

func TestLockTagIDs(t *testing.T) {
	f := &nodeFlags{name: "cn-2", plannerOrder: []string{"cn-1", "cn-2"}}
	if id, err := lockTagID(f, nil); err != nil || id != 2 {
		t.Fatalf("listed in --nodes: %d, %v", id, err)
	}
	f = &nodeFlags{name: "cn-9"}
	id, err := lockTagID(f, []cluster.Member{{Name: "cn-1"}, {Name: "cn-9"}})
	if err != nil || id < 256 || id >= 1<<22 || id != hashedID("cn-9") {
		t.Fatalf("hashed: %d, %v", id, err)
	}
	f.id = 77
	if id, err := lockTagID(f, nil); err != nil || id != 77 {
		t.Fatalf("--id: %d, %v", id, err)
	}
}

// TestNodeWaitsForTheTables: with --wait-load a node starting before the
// tables are loaded waits for the loader (aura bench --connect loads them
// before it drives the cluster), and gives up with ErrNotLoaded when none
// finishes in time.
func TestNodeWaitsForTheTables(t *testing.T) {
	ctx := context.Background()
	dev, err := rdma.NewMemDevice(rdma.NewMemory(1<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	quiet := slog.New(slog.DiscardHandler)
	if err := awaitLoaded(ctx, dev, 0, quiet); !errors.Is(err, store.ErrNotLoaded) {
		t.Fatalf("no wait, nothing loaded: %v", err)
	}
	if err := awaitLoaded(ctx, dev, 3*loadPollEvery/2, quiet); !errors.Is(err, store.ErrNotLoaded) {
		t.Fatalf("short wait, nothing loaded: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- awaitLoaded(ctx, dev, time.Minute, quiet) }()
	time.Sleep(2 * loadPollEvery)
	select {
	case err := <-done:
		t.Fatalf("returned %v before the load", err)
	default:
	}
	if err := store.ClaimLoad(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkLoaded(ctx, dev); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the load: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after the load")
	}
	// The caller's context ends the wait.
	cctx, cancel := context.WithTimeout(ctx, 2*loadPollEvery)
	defer cancel()
	other, err := rdma.NewMemDevice(rdma.NewMemory(1<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := awaitLoaded(cctx, other, time.Hour, quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
