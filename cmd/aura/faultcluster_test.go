package main

// The fault suite's cluster: a memory node, compute nodes on their own
// loopback addresses (127.0.0.11, .12, …) with every path between processes
// behind a netfault proxy — each node's protoactor remote (--advertise) and
// memberlist (--gossip-advertise, UDP and TCP) addresses, and the memory
// node as the compute nodes see it (--mn) — a bank workload that drifts
// (so the planner keeps migrating cohorts), and a client that knows exactly
// which transfers committed. See docs/faults.md.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/internal/netfault"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload/bank"
)

// faultResolve is how long, after the load stops, clients keep
// resubmitting a transaction whose outcome they do not know yet.
const faultResolve = 10 * time.Second

// repairWait bounds the wait for a crashed holder's lock words to be
// repaired: the nodes' RepairAfter, 2·(10 s request timeout + 5 s
// CleanupTimeout), a sweep period (an eighth of it) and a margin.
const repairWait = 40 * time.Second

var faultsFull = flag.Bool("faults.full", false, "run the fault scenarios' longer versions (longer load, faults and drift)")

// faultTimes are one scenario's phases.
type faultTimes struct {
	warmup, fault, after, drift time.Duration
	converge                    time.Duration // deadline for convergence after the heal
}

func faultTiming() faultTimes {
	if *faultsFull {
		return faultTimes{warmup: 10 * time.Second, fault: 10 * time.Second, after: 10 * time.Second, drift: time.Second, converge: 60 * time.Second}
	}
	return faultTimes{warmup: 4 * time.Second, fault: 4 * time.Second, after: 3 * time.Second, drift: time.Second, converge: 30 * time.Second}
}

// skipFaults skips the process fault tests in -short runs and, under
// -race, all but the scenarios allowed there.
func skipFaults(t *testing.T, underRace bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts four or more processes")
	}
	if raceEnabled && !underRace {
		t.Skip("the race pass runs only the memory-node scenario: each scenario drives a cluster from the test process, several-fold slower under the detector")
	}
}

// faultNode is a compute node of a faultCluster; its proxies and addresses
// outlive restarts of its process.
type faultNode struct {
	name              string
	listen, gossip    string // real addresses, on the node's own 127.0.0.N
	http              string
	remote, gossipPxy *netfault.Proxy
	proc              *nodeProcess
	alive             bool
}

type faultCluster struct {
	t *testing.T
	// locksMustClear: the scenario crashes no process, so every lock word
	// must be free soon after the load stopped (6 s); otherwise crashed
	// holders' words may wait for the nodes' repair (repairWait).
	locksMustClear bool
	wl             *bank.Workload
	wlArgs         []string
	perNode        map[string][]string // flags for single nodes, by name
	mn             *mnProcess
	mnProxy        *netfault.Proxy
	dev            rdma.Device
	layout         *store.Layout
	nodes          []*faultNode
	common         []string
	injected       []string
	epochs         *epochWatch
	pids           atomic.Pointer[map[int]string]    // live node processes by pid, for sourceOf
	ips            atomic.Pointer[map[string]string] // node names by their own loopback address
	procs          atomic.Pointer[[]liveProc]        // the live nodes' processes, for background goroutines
}

type liveProc struct {
	fn   *faultNode // only its immutable fields (name, addresses, proxies)
	proc *nodeProcess
}

// freePortOn returns a port free for TCP (and, with udp, for UDP too) on ip.
func freePortOn(t *testing.T, ip string, udp bool) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Skipf("cannot listen on %s (loopback aliases needed): %v", ip, err)
		}
		addr := ln.Addr().String()
		if udp {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				ln.Close()
				continue
			}
			pc.Close()
		}
		ln.Close()
		return addr
	}
	t.Fatalf("no free port on %s", ip)
	return ""
}

func newFaultProxy(t *testing.T, target string, udp bool) *netfault.Proxy {
	t.Helper()
	p, err := netfault.New(netfault.Config{Listen: "127.0.0.1:0", Target: target, UDP: udp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newFaultCluster starts a memory node behind a proxy, loads the bank
// workload and starts n compute nodes cn-1…cn-n (the planner on cn-1, the
// lowest name).
func newFaultCluster(t *testing.T, n int, extra ...string) *faultCluster {
	t.Helper()
	return newFaultClusterWith(t, n, nil, extra...)
}

// newFaultClusterWith is newFaultCluster with flags for single nodes
// (perNode, by name) after the common ones.
func newFaultClusterWith(t *testing.T, n int, perNode map[string][]string, extra ...string) *faultCluster {
	t.Helper()
	wlArgs := []string{"--workload", "bank", "--accounts", "4096", "--branch-kgs", "4", "--audit-fraction", "0"}
	wl := workloadOf(t, wlArgs).(*bank.Workload)
	c := &faultCluster{t: t, wl: wl, wlArgs: wlArgs, perNode: perNode}
	c.mn = startMN(t, "--listen", "127.0.0.1:0", "--size", "256MiB")
	c.mnProxy = newFaultProxy(t, c.mn.addr, false)
	ctx := context.Background()
	dev, err := tcp.Dial(ctx, c.mn.addr, tcp.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	c.dev = dev
	c.layout = loadTables(t, ctx, dev, wl)
	c.common = append(append([]string{"--mn", c.mnProxy.Addr(), "--auth-token", faultAPIToken, "--test-timings", "--heartbeat", "50ms", "--tick", "50ms",
		"--coordinators", "4", "--log-level", "info"}, extra...), wlArgs...)
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", 11+i)
		fn := &faultNode{name: fmt.Sprintf("cn-%d", i+1), listen: freePortOn(t, ip, false), gossip: freePortOn(t, ip, true),
			http: freePortOn(t, ip, false)}
		fn.remote = c.newNodeProxy(fn.listen, false)
		fn.gossipPxy = c.newNodeProxy(fn.gossip, true)
		c.nodes = append(c.nodes, fn)
	}
	ips := map[string]string{}
	for _, fn := range c.nodes {
		h, _, _ := net.SplitHostPort(fn.listen)
		ips[h] = fn.name
	}
	c.ips.Store(&ips)
	for _, fn := range c.nodes {
		c.start(fn)
	}
	c.epochs = watchEpochs(t, c)
	return c
}

// start (re)starts a node's process, joining through a live node.
func (c *faultCluster) start(fn *faultNode) {
	c.t.Helper()
	args := append([]string{"--name", fn.name, "--listen", fn.listen, "--advertise", fn.remote.Addr(),
		"--gossip", fn.gossip, "--gossip-advertise", fn.gossipPxy.Addr(), "--http", fn.http}, c.common...)
	args = append(args, c.perNode[fn.name]...)
	for _, o := range c.nodes {
		if o != fn && o.alive {
			args = append(args, "--join", o.gossipPxy.Addr())
			break
		}
	}
	fn.proc = startNode(c.t, args...)
	fn.alive = true
	c.notePIDs()
}

// notePIDs records the live nodes' process ids for sourceOf.
func (c *faultCluster) notePIDs() {
	m := map[int]string{}
	var ps []liveProc
	for _, fn := range c.nodes {
		if fn.alive {
			m[fn.proc.cmd.Process.Pid] = fn.name
			ps = append(ps, liveProc{fn, fn.proc})
		}
	}
	c.pids.Store(&m)
	c.procs.Store(&ps)
}

func (c *faultCluster) newNodeProxy(target string, udp bool) *netfault.Proxy {
	c.t.Helper()
	p, err := netfault.New(netfault.Config{Listen: "127.0.0.1:0", Target: target, UDP: udp, SourceOf: c.sourceOf})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { p.Close() })
	return p
}

// sourceOf names the node a connection or datagram to a proxy comes from:
// by its source address when the node bound it (memberlist's UDP socket
// is on the node's own 127.0.0.N), else — TCP from 127.0.0.1, where
// outgoing connections start — by the process that owns the socket
// (/proc/net/tcp gives its inode, /proc/PID/fd the process). "" for
// anything else (this test process, the memory node).
func (c *faultCluster) sourceOf(a net.Addr) string {
	var ip net.IP
	var port int
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, port = a.IP, a.Port
	case *net.UDPAddr:
		ip, port = a.IP, a.Port
	default:
		return ""
	}
	if ips := c.ips.Load(); ips != nil {
		if name, ok := (*ips)[ip.String()]; ok {
			return name
		}
	}
	pids := c.pids.Load()
	if pids == nil {
		return ""
	}
	if _, ok := a.(*net.TCPAddr); !ok || ip.To4() == nil {
		return ""
	}
	inode := socketInode(ip.To4(), port)
	if inode == "" {
		return ""
	}
	for pid, name := range *pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "socket:["+inode+"]" {
				return name
			}
		}
	}
	return ""
}

// socketInode returns the inode of the TCP socket whose local address is
// ip:port, from /proc/net/tcp ("" if none).
func socketInode(ip net.IP, port int) string {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return ""
	}
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 9 && f[1] == want {
			return f[9]
		}
	}
	return ""
}

// kill9 kills a node's process with SIGKILL.
func (c *faultCluster) kill9(fn *faultNode) {
	c.t.Helper()
	_ = fn.proc.cmd.Process.Kill()
	err := <-fn.proc.exited
	fn.proc.exited <- err
	fn.alive = false
	c.notePIDs()
}

func (c *faultCluster) live() []*faultNode {
	var out []*faultNode
	for _, fn := range c.nodes {
		if fn.alive {
			out = append(out, fn)
		}
	}
	return out
}

func (c *faultCluster) node(name string) *faultNode {
	for _, fn := range c.nodes {
		if fn.name == name {
			return fn
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}

func (c *faultCluster) inject(format string, args ...any) {
	c.injected = append(c.injected, fmt.Sprintf(format, args...))
}

// ---- management API and metrics, without failing the test ----

var faultHTTP = &http.Client{Timeout: 2 * time.Second}

// faultAPIToken is the management API token of the scenarios' nodes (an
// operator's requests, such as aura remove-node, need one).
const faultAPIToken = "fault-scenarios-token"

func fetch(url string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+faultAPIToken)
	resp, err := faultHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

func topologyOf(fn *faultNode) (client.Topology, error) {
	var topo client.Topology
	b, err := fetch("http://" + fn.http + client.TopologyPath)
	if err != nil {
		return topo, err
	}
	return topo, json.Unmarshal(b, &topo)
}

// othersOwn reports whether fn's installed OwnerMap places a cohort on a
// node other than fn.
func othersOwn(fn *faultNode) (bool, error) {
	topo, err := topologyOf(fn)
	if err != nil {
		return false, err
	}
	self := -1
	for _, w := range topo.Workers {
		if w.WorkerID == fn.name {
			self = w.WorkerIndex
		}
	}
	b, err := fetch("http://" + fn.http + client.OwnerMapPath)
	if err != nil {
		return false, err
	}
	m, _, err := manifest.Decode(b, manifest.DecodeOptions{})
	if err != nil {
		return false, err
	}
	for _, p := range m.Cohorts {
		if p.Owner != self {
			return true, nil
		}
	}
	return false, nil
}

// metricsOf returns a node's /metrics samples by series name (labels
// included, as written).
func metricsOf(fn *faultNode) (map[string]float64, error) {
	b, err := fetch("http://" + fn.http + metricsPath)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// ---- I4: epochs only grow ----

// epochWatch samples every live node's installed OwnerMap epoch and
// records any decrease within one process's life (I4 as seen from
// outside: a node never installs an older map).
type epochWatch struct {
	mu      sync.Mutex
	last    map[*nodeProcess]uint64
	samples int
	bad     []string
	stop    chan struct{}
	done    chan struct{}
}

func watchEpochs(t *testing.T, c *faultCluster) *epochWatch {
	w := &epochWatch{last: map[*nodeProcess]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	targets := func() []liveProc {
		if ps := c.procs.Load(); ps != nil {
			return *ps
		}
		return nil
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for _, tg := range targets() {
				topo, err := topologyOf(tg.fn)
				if err != nil {
					continue
				}
				w.mu.Lock()
				w.samples++
				if prev := w.last[tg.proc]; topo.Epoch < prev {
					w.bad = append(w.bad, fmt.Sprintf("%s: epoch %d after %d", tg.fn.name, topo.Epoch, prev))
				}
				w.last[tg.proc] = max(w.last[tg.proc], topo.Epoch)
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *epochWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// ---- convergence and I1 ----

// converged reports whether the live nodes agree: the same OwnerMap epoch
// and the same owners (every live node a worker with a roster slot, no
// other worker), each cohort owned by one node, each node granting
// exactly the cohorts the map gives it (none frozen), and exactly one
// acting planner among them (one valid planner lease). It returns a description of the state.
func (c *faultCluster) converged() (bool, string) {
	live := c.live()
	var ref *client.Topology
	planners := 0
	var desc []string
	for _, fn := range live {
		topo, err := topologyOf(fn)
		if err != nil {
			return false, err.Error()
		}
		m, err := metricsOf(fn)
		if err != nil {
			return false, err.Error()
		}
		planners += int(m["aura_planner_lease_valid"])
		if ref == nil {
			ref = &topo
			seen := map[uint64]string{}
			var names []string
			for _, w := range topo.Workers {
				names = append(names, w.WorkerID)
				if w.WorkerIndex < 0 {
					return false, fmt.Sprintf("%s has no roster slot at epoch %d", w.WorkerID, topo.Epoch)
				}
				for _, p := range w.PartitionIDs {
					if o, dup := seen[p]; dup {
						return false, fmt.Sprintf("cohort %d owned by %s and %s at epoch %d", p, o, w.WorkerID, topo.Epoch)
					}
					seen[p] = w.WorkerID
				}
			}
			var want []string
			for _, l := range live {
				want = append(want, l.name)
			}
			sort.Strings(names)
			if !slices.Equal(names, want) {
				return false, fmt.Sprintf("%s sees workers %v, live %v", fn.name, names, want)
			}
			// An empty map is a converged state too: a planner that took
			// over publishes one, and cohorts form again from the load.
			if topo.Epoch == 0 {
				return false, "no OwnerMap installed"
			}
		} else if !sameTopology(*ref, topo) {
			return false, fmt.Sprintf("%s at epoch %d, %s at epoch %d (or different owners)", live[0].name, ref.Epoch, fn.name, topo.Epoch)
		}
		mine := 0
		for _, w := range topo.Workers {
			if w.WorkerID == fn.name {
				mine = len(w.PartitionIDs)
			}
		}
		owned, frozen := int(m[`aura_cohorts{state="owned"}`]), int(m[`aura_cohorts{state="frozen"}`])
		if owned != mine || frozen != 0 {
			return false, fmt.Sprintf("%s grants %d cohorts (%d frozen, %.0f failed retirements), the map gives it %d",
				fn.name, owned, frozen, m[`aura_cohort_retire_errors_total`], mine)
		}
		desc = append(desc, fmt.Sprintf("%s:%d", fn.name, mine))
	}
	if planners != 1 {
		return false, fmt.Sprintf("%d planners hold a valid planner lease", planners)
	}
	return true, fmt.Sprintf("epoch %d owners %s", ref.Epoch, strings.Join(desc, ","))
}

func sameTopology(a, b client.Topology) bool {
	if a.Epoch != b.Epoch || len(a.Workers) != len(b.Workers) {
		return false
	}
	for i := range a.Workers {
		x, y := a.Workers[i], b.Workers[i]
		if x.WorkerID != y.WorkerID || x.WorkerIndex != y.WorkerIndex || !slices.Equal(x.PartitionIDs, y.PartitionIDs) {
			return false
		}
	}
	return true
}

// awaitConverged polls (every 100 ms) until converged or the deadline.
func (c *faultCluster) awaitConverged(within time.Duration) (bool, string, time.Duration) {
	start := time.Now()
	for {
		ok, desc := c.converged()
		if ok || time.Since(start) > within {
			return ok, desc, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- the client: exactly which transfers committed ----

// bankLoad drives bank transfers at the live nodes from this process. Each
// client runs one transaction at a time and resubmits it under the same
// txn id (to the next node on transport errors, ERROR or MOVED) until it
// gets a final outcome, so that the commit ledger decides whether an
// attempt whose reply was lost committed; it records each committed
// transfer's effect. The effects, added to the initial balances, must be
// exactly the balances on the memory node: a committed transfer missing is
// lost, one applied twice is duplicated.
type bankLoad struct {
	c      *faultCluster
	sys    *actor.ActorSystem
	nodes  atomic.Pointer[[]*faultNode]
	stop   chan struct{}
	wg     sync.WaitGroup
	resolv atomic.Int64 // after stop, in-doubt transactions are resolved until then (Unix ns)

	mu               sync.Mutex
	delta            map[uint64]int64
	committed        uint64
	rolledBack       uint64
	replayed         uint64
	retries, errs    uint64
	inDoubt          uint64
	unsettled        []*messages.BankTransfer
	lastErr          string
	committedByPhase [4]uint64
	phase            atomic.Int32
}

func (c *faultCluster) startLoad(clients int) *bankLoad {
	c.t.Helper()
	lc := &bankLoad{c: c, sys: clientSystem(c.t), stop: make(chan struct{}), delta: map[uint64]int64{}}
	lc.route()
	for i := range clients {
		lc.wg.Add(1)
		go lc.run(i)
	}
	c.t.Cleanup(func() { lc.halt(0) })
	return lc
}

// route sends to the cluster's live nodes from now on.
func (lc *bankLoad) route() {
	ns := lc.c.live()
	lc.nodes.Store(&ns)
}

// halt stops the clients; in-doubt transactions are resubmitted for up to
// resolve before they count as unresolved.
func (lc *bankLoad) halt(resolve time.Duration) {
	select {
	case <-lc.stop:
		return
	default:
	}
	lc.resolv.Store(time.Now().Add(resolve).UnixNano())
	close(lc.stop)
	lc.wg.Wait()
}

func (lc *bankLoad) stopped() bool {
	select {
	case <-lc.stop:
		return true
	default:
		return false
	}
}

func (lc *bankLoad) run(cl int) {
	defer lc.wg.Done()
	gen := lc.c.wl.NewGenerator(7, cl)
	rr := cl
	for seq := uint64(1); !lc.stopped(); seq++ {
		msg := gen.Next()
		msg.TxnId = uint64(cl+1)<<40 | seq
		tr := msg.GetBankTransfer()
		sent := false // an attempt may have executed: the outcome must be settled
		first := time.Now()
		for attempt := uint32(1); ; attempt++ {
			if lc.stopped() && (!sent || time.Now().UnixNano() > lc.resolv.Load()) {
				if sent {
					lc.mu.Lock()
					lc.inDoubt++
					lc.unsettled = append(lc.unsettled, tr)
					lc.mu.Unlock()
				}
				return
			}
			if sent && time.Since(first) > faultGiveUp {
				// Stuck (a lock left held: see docs/faults.md): leave it
				// unsettled and go on, so a long soak keeps its load.
				lc.mu.Lock()
				lc.inDoubt++
				lc.unsettled = append(lc.unsettled, tr)
				lc.mu.Unlock()
				break
			}
			nodes := *lc.nodes.Load()
			target := nodes[(int(tr.GetFromAccount()/256)+rr)%len(nodes)]
			msg.Attempt = attempt
			sent = true
			r, err := lc.sys.Root.RequestFuture(actor.NewPID(target.remote.Addr(), TxnActorName), msg, 3*time.Second).Result()
			if err != nil {
				lc.note(fmt.Sprintf("%s: %v", target.name, err))
				rr++
				time.Sleep(20 * time.Millisecond)
				continue
			}
			res := r.(*messages.TxnResult)
			switch res.GetOutcome() {
			case messages.TxnOutcome_TXN_OUTCOME_COMMITTED:
				lc.mu.Lock()
				lc.delta[tr.GetFromAccount()] -= tr.GetAmountCents()
				lc.delta[tr.GetToAccount()] += tr.GetAmountCents()
				lc.committed++
				lc.committedByPhase[lc.phase.Load()]++
				if res.GetReplayed() {
					lc.replayed++
				}
				lc.mu.Unlock()
			case messages.TxnOutcome_TXN_OUTCOME_ROLLED_BACK:
				lc.mu.Lock()
				lc.rolledBack++
				lc.mu.Unlock()
			case messages.TxnOutcome_TXN_OUTCOME_ERROR, messages.TxnOutcome_TXN_OUTCOME_MOVED, messages.TxnOutcome_TXN_OUTCOME_REJECTED:
				// REJECTED is an overload refusal before execution; ERROR
				// leaves the outcome unknown: resubmit, elsewhere.
				lc.note(fmt.Sprintf("%s: %v %s", target.name, res.GetOutcome(), res.GetError()))
				rr++
				time.Sleep(10 * time.Millisecond)
				continue
			default: // ABORTED: retry with backoff
				lc.mu.Lock()
				lc.retries++
				lc.mu.Unlock()
				time.Sleep(time.Duration(min(attempt, 40)) * 100 * time.Microsecond)
				continue
			}
			break
		}
	}
}

func (lc *bankLoad) note(e string) {
	lc.mu.Lock()
	lc.errs++
	lc.lastErr = e
	lc.mu.Unlock()
}

// ---- checks ----

type faultChecks struct {
	t      *testing.T
	passed []string
}

func (k *faultChecks) check(name string, err error) {
	if err != nil {
		k.t.Errorf("%s: %v", name, err)
		k.passed = append(k.passed, name+" FAIL")
		return
	}
	k.passed = append(k.passed, name+" ok")
}

// verify runs the checks after a scenario: the load is halted (in-doubt
// transactions resolved), and the cluster must converge; it prints the
// scenario's summary line.
// afterHeal is the number of transfers committed after the heal so far.
func (lc *bankLoad) afterHeal() uint64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.committedByPhase[2]
}

func (c *faultCluster) verify(scenario string, lc *bankLoad, start time.Time) {
	t := c.t
	tm := faultTiming()
	// Stop the load; while clients settle their last transactions, check
	// convergence (the map still has the load's cohorts: idle, cohorts
	// dissolve and a converged empty map says less).
	halted := make(chan struct{})
	go func() { lc.halt(faultResolve); close(halted) }()
	<-lc.stop
	stopped := time.Now()
	ok, desc, took := c.awaitConverged(tm.converge)
	<-halted
	k := &faultChecks{t: t}
	ctx := context.Background()

	// Bank total.
	var totalErr error
	for _, r := range c.wl.Check(ctx, store.NewSnapshot(c.layout, c.dev)) {
		if r.Err != nil {
			totalErr = fmt.Errorf("%s: %v", r.Name, r.Err)
		}
	}
	k.check("bank_total", totalErr)

	// No committed transfer lost or duplicated.
	lc.mu.Lock()
	lostErr, applied := c.balancesMatch(ctx, lc.delta, lc.unsettled)
	if lostErr == nil && len(lc.unsettled) > 0 {
		t.Logf("%d transactions unsettled %v after the load stopped (still aborting or unanswered); the balances show %d of them applied",
			len(lc.unsettled), faultResolve, applied)
	}
	committed, replayed, after := lc.committed, lc.replayed, lc.committedByPhase[2]
	t.Logf("client: %d committed (%d answered from the ledger), %d rolled back, %d aborted retries, %d errors (last: %s); %d committed after the heal",
		lc.committed, lc.replayed, lc.rolledBack, lc.retries, lc.errs, lc.lastErr, after)
	lc.mu.Unlock()
	k.check("no_lost_or_duplicated", lostErr)
	var progErr error
	if after == 0 {
		progErr = fmt.Errorf("nothing committed after the heal")
	}
	k.check("progress", progErr)

	// No lock left held once nothing runs (a node's cleanup of an
	// interrupted commit retries for occ's CleanupTimeout, 5 s). A crashed
	// holder's words are repaired by the nodes they refused, once they
	// stayed in place the nodes' RepairAfter (30 s) — plus a sweep period
	// (3.75 s) and a margin.
	var held []string
	var heldErr error
	lockWait := 6 * time.Second
	if !c.locksMustClear {
		lockWait = repairWait
	}
	waitStart := time.Now()
	for deadline := waitStart.Add(lockWait); ; time.Sleep(200 * time.Millisecond) {
		held, heldErr = c.heldLocks(ctx)
		if heldErr != nil || len(held) == 0 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("account locks: %d held %v after the load stopped (%v of waiting for them)", len(held),
		time.Since(stopped).Round(100*time.Millisecond), time.Since(waitStart).Round(100*time.Millisecond))
	if heldErr == nil && len(held) > 0 {
		heldErr = fmt.Errorf("%d account locks still held %v after the load stopped: %s", len(held), lockWait,
			strings.Join(held[:min(len(held), 5)], "; "))
	}
	k.check("locks_released", heldErr)

	// Convergence, with I1 as the nodes report it.
	var convErr error
	if !ok {
		convErr = fmt.Errorf("not converged %v after the load stopped: %s", tm.converge, desc)
	}
	c.epochs.halt()
	c.epochs.mu.Lock()
	var invErr error
	if len(c.epochs.bad) > 0 {
		invErr = fmt.Errorf("I4: an OwnerMap epoch went back: %v", c.epochs.bad)
	} else if !ok {
		invErr = fmt.Errorf("I1 not established: %s", desc)
	}
	samples := c.epochs.samples
	c.epochs.mu.Unlock()
	k.check("invariants", invErr)
	k.check("converged", convErr)
	t.Logf("converged in %v: %s; %d epoch samples", took.Round(time.Millisecond), desc, samples)
	fmt.Printf("fault scenario=%s injected=[%s] checks=[%s] committed=%d replayed=%d wall=%.1fs\n", scenario,
		strings.Join(c.injected, "; "), strings.Join(k.passed, ", "), committed, replayed, time.Since(start).Seconds())
}

// maxUnsettled bounds the unsettled transfers of one group (transfers
// linked by shared accounts) that balancesMatch tries in every
// combination (2^maxUnsettled subsets).
const maxUnsettled = 12

// faultGiveUp is how long a client resubmits one transaction before it
// leaves it unsettled and moves on.
const faultGiveUp = 15 * time.Second

// balancesMatch checks every account's balance on the memory node against
// the initial balance plus the committed transfers' deltas. A transfer
// whose outcome the client never learned (unsettled) may have been applied
// once or not at all: the check passes if some subset of them, each
// applied once, makes every balance exact; it returns how many that
// subset holds.
func (c *faultCluster) balancesMatch(ctx context.Context, delta map[uint64]int64, unsettled []*messages.BankTransfer) (error, int) {
	snap := store.NewSnapshot(c.layout, c.dev)
	diff := map[uint64]int64{} // actual − expected, accounts that differ
	for a := range c.wl.Config().Accounts {
		v, ok, err := snap.Get(ctx, bank.Ref(a))
		if err != nil || !ok {
			return fmt.Errorf("read account %d: %v %v", a, ok, err), 0
		}
		bal, err := bank.DecodeAccount(a, v)
		if err != nil {
			return err, 0
		}
		if d := bal - (c.wl.Config().InitialCents + delta[a]); d != 0 {
			diff[a] = d
		}
	}
	applied, err := explainDiff(diff, unsettled)
	if err != nil {
		return err, 0
	}
	if len(diff) == 0 {
		return nil, applied
	}
	var first []string
	for a, d := range diff {
		if len(first) < 3 {
			first = append(first, fmt.Sprintf("account %d off by %+d", a, d))
		}
	}
	return fmt.Errorf("%d accounts differ from the committed transfers (%s; %d unsettled transfers tried)", len(diff),
		strings.Join(first, ", "), len(unsettled)), 0
}

// explainDiff removes from diff (account → actual − expected balance) the
// accounts that some of the unsettled transfers, each applied once,
// explain exactly, and returns how many it applied. Transfers sharing no
// account are independent: it splits them into groups linked by accounts
// and tries every subset of each group (at most maxUnsettled).
func explainDiff(diff map[uint64]int64, unsettled []*messages.BankTransfer) (int, error) {
	group := make([]int, len(unsettled))
	for i := range group {
		group[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if group[i] != i {
			group[i] = find(group[i])
		}
		return group[i]
	}
	byAccount := map[uint64]int{}
	for i, tr := range unsettled {
		for _, a := range []uint64{tr.GetFromAccount(), tr.GetToAccount()} {
			if j, ok := byAccount[a]; ok {
				group[find(i)] = find(j)
			} else {
				byAccount[a] = i
			}
		}
	}
	groups := map[int][]*messages.BankTransfer{}
	for i, tr := range unsettled {
		groups[find(i)] = append(groups[find(i)], tr)
	}
	applied := 0
	for _, g := range groups {
		if len(g) > maxUnsettled {
			return 0, fmt.Errorf("%d unsettled transactions share accounts, more than the %d the check can combine", len(g), maxUnsettled)
		}
		accounts := map[uint64]bool{}
		for _, tr := range g {
			accounts[tr.GetFromAccount()], accounts[tr.GetToAccount()] = true, true
		}
		found := false
		for mask := 0; mask < 1<<len(g) && !found; mask++ {
			rest := map[uint64]int64{}
			for a := range accounts {
				rest[a] = diff[a]
			}
			for i, tr := range g {
				if mask&(1<<i) != 0 {
					rest[tr.GetFromAccount()] += tr.GetAmountCents()
					rest[tr.GetToAccount()] -= tr.GetAmountCents()
				}
			}
			if !slices.ContainsFunc(slices.Collect(maps.Values(rest)), func(d int64) bool { return d != 0 }) {
				found = true
				applied += bits.OnesCount(uint(mask))
			}
		}
		if found {
			for a := range accounts {
				delete(diff, a)
			}
		}
	}
	return applied, nil
}

// drift moves the bank's branches every period until stop (the planner
// follows with migrations).
func (c *faultCluster) drift(every time.Duration) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for e := 1; ; e++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if err := c.wl.Drift(e % (bank.MaxDriftEpoch + 1)); err != nil {
				return
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	c.t.Cleanup(stop)
	return stop
}

// awaitMigrating polls the planner's node's metrics (every 5 ms, up to
// within) until a migration has started and not finished, so that a fault
// lands while migrations are in flight; it returns whether one was seen
// and how many had finished by then.
func awaitMigrating(fn *faultNode, within time.Duration) (bool, float64) {
	start := time.Now()
	for time.Since(start) < within {
		if m, err := metricsOf(fn); err == nil {
			done := m[`aura_migrations_total{outcome="moved"}`] + m[`aura_migrations_total{outcome="evicted"}`] +
				m[`aura_migrations_total{outcome="rolled_back"}`] + m["aura_migrations_stuck_total"]
			if m["aura_migrations_started_total"] > done {
				return true, done
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false, 0
}

// heldLocks reads every account slot's lock word on the memory node and
// describes those still locked — a memory-node CAS tag (its node) or a
// held owner sentinel — once no transaction runs (I2/I3 seen from the
// memory node: after quiescence no lock may stay held).
func (c *faultCluster) heldLocks(ctx context.Context) ([]string, error) {
	tl, err := c.layout.Table(bank.AccountTable)
	if err != nil {
		return nil, err
	}
	qp, err := c.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, err
	}
	defer qp.Close()
	const chunkBytes = 64 << 10
	perChunk := max(1, chunkBytes/tl.BucketSize)
	var held []string
	for b := uint64(0); b < tl.Buckets; b += perChunk {
		n := min(perChunk, tl.Buckets-b)
		buf := make([]byte, n*tl.BucketSize)
		cs, err := rdma.Exec(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b), Local: buf})
		if err != nil {
			return nil, err
		}
		if err := rdma.FirstError(cs); err != nil {
			return nil, err
		}
		for i := range n * (tl.BucketSize / tl.SlotSize) {
			bk, sl := i/(tl.BucketSize/tl.SlotSize), i%(tl.BucketSize/tl.SlotSize)
			s := tl.DecodeSlot(buf[bk*tl.BucketSize+sl*tl.SlotSize:])
			switch {
			case s.Lock == 0 || store.IsFreeSentinel(s.Lock):
			case store.IsOwnerSentinel(s.Lock):
				held = append(held, fmt.Sprintf("account %d: held owner sentinel %#x", s.Key, s.Lock))
			default:
				held = append(held, fmt.Sprintf("account %d: CAS lock of node id %d (%#x)", s.Key, store.TagNode(s.Lock), s.Lock))
			}
		}
	}
	return held, nil
}
