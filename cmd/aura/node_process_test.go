package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/actors"
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
	if local < 0.5 {
		t.Errorf("local hit %.1f%% after 12 s, want ≥ 50%% (chance: 33%%): the cluster did not learn ownership", 100*local)
	}
	for _, r := range wl.Check(ctx, store.NewSnapshot(layout, dev)) {
		if r.Err != nil {
			t.Errorf("TPC-C %s: %v", r.Name, r.Err)
		}
	}
	// SIGTERM: graceful leave and a clean exit.
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
// planner and checks that the next node of the roster hosts it within 10 s
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
	t.Logf("planner on cn-2 %.1f s after cn-1 was killed", d.Seconds())

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
	var wf workloadFlags
	fs := pflag.NewFlagSet("wl", pflag.ContinueOnError)
	wf.register(fs)
	if err := fs.Parse(wlArgs); err != nil {
		t.Fatal(err)
	}
	seed := uint64(1)
	wl, _, err := wf.forRun(3, 0, &seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	mn := startMN(t, "--listen", "127.0.0.1:0", "--size", "2GiB")
	ctx := context.Background()
	dev, err := tcp.Dial(ctx, mn.addr, tcp.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return wl, wlArgs, mn.addr, dev, loadTables(t, ctx, dev, wl)
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
