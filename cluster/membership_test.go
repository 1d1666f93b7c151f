package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// deadline bounds every wait in these tests; the test config detects a
// failure in about 1–2s, so 10s leaves room for a loaded 2-core machine
// under -race.
const deadline = 10 * time.Second

// testConfig is DefaultTestConfig for one named node. AURA_CLUSTER_LOG=1
// sends all logs (memberlist's included) to stderr.
func testConfig(name string, seeds ...string) Config {
	c := DefaultTestConfig()
	c.NodeName = name
	c.Seeds = seeds
	c.Meta = Meta{RemoteAddr: "127.0.0.1:" + fmt.Sprint(20000+len(name)), Roles: []string{RoleCN}}
	if os.Getenv("AURA_CLUSTER_LOG") != "" {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", name)
	}
	return c
}

func startNode(t *testing.T, cfg Config) *Membership {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.NodeName, err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start(%s): %v", cfg.NodeName, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// startCluster starts n nodes named prefix-1..prefix-n; node 1 is the only
// seed.
func startCluster(t *testing.T, prefix string, n int, tweak func(*Config)) []*Membership {
	t.Helper()
	var nodes []*Membership
	for i := 1; i <= n; i++ {
		var seeds []string
		if i > 1 {
			seeds = []string{nodes[0].Addr()}
		}
		cfg := testConfig(fmt.Sprintf("%s-%d", prefix, i), seeds...)
		if tweak != nil {
			tweak(&cfg)
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitConverged(t, nodes...)
	return nodes
}

func memberNames(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// eventually polls cond until it holds or deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitConverged waits until every node sees exactly the given nodes.
func waitConverged(t *testing.T, nodes ...*Membership) {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.Name())
	}
	slices.Sort(want)
	for _, n := range nodes {
		eventually(t, fmt.Sprintf("%s sees %v", n.Name(), want), func() bool {
			return slices.Equal(memberNames(n.Members()), want)
		})
	}
}

// waitEvent reads m's events until one matches or deadline passes.
func waitEvent(t *testing.T, m *Membership, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-m.Events():
			if !ok {
				t.Fatalf("%s: events closed while waiting for %s", m.Name(), what)
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("%s: no event within %v: %s", m.Name(), deadline, what)
		}
	}
}

func TestThreeNodesJoinViaOneSeed(t *testing.T) {
	nodes := startCluster(t, "join", 3, func(c *Config) {
		if c.NodeName == "join-1" {
			c.Meta.Roles = []string{RoleCN, RolePlanner}
		}
	})
	for _, n := range nodes {
		ms, epoch := n.Snapshot()
		if len(ms) != 3 {
			t.Fatalf("%s sees %d members", n.Name(), len(ms))
		}
		if epoch < 3 {
			t.Errorf("%s: epoch %d after 3 joins", n.Name(), epoch)
		}
		for i, mem := range ms {
			src := nodes[i] // sorted by name: join-1, join-2, join-3
			if mem.Name != src.Name() || mem.Addr != src.Addr() {
				t.Errorf("%s sees %s at %s, want %s at %s", n.Name(), mem.Name, mem.Addr, src.Name(), src.Addr())
			}
			if want := src.LocalMeta(); !mem.Meta.Equal(want) || mem.Incarnation == 0 {
				t.Errorf("%s sees %s meta %+v, want %+v", n.Name(), mem.Name, mem.Meta, want)
			}
		}
		if got, ok := n.Member("join-1"); !ok || !got.HasRole(RolePlanner) || got.HasRole(RoleMN) {
			t.Errorf("%s: join-1 = %+v, %v", n.Name(), got, ok)
		}
		// Every node saw a join for each node, with consecutive epochs.
		seen := map[string]bool{}
		var last uint64
		for len(seen) < 3 {
			ev := waitEvent(t, n, "joins", func(Event) bool { return true })
			if ev.Epoch != last+1 {
				t.Errorf("%s: event epoch %d after %d", n.Name(), ev.Epoch, last)
			}
			last = ev.Epoch
			if ev.Kind == EventJoin {
				seen[ev.Member.Name] = true
			}
		}
		if n.Dropped() != 0 {
			t.Errorf("%s dropped %d events", n.Name(), n.Dropped())
		}
	}
}

func TestGracefulLeave(t *testing.T) {
	nodes := startCluster(t, "leave", 3, nil)
	a, b, c := nodes[0], nodes[1], nodes[2]
	epochA, epochB := a.Epoch(), b.Epoch()
	unrestA := unrest(a)

	if err := c.Leave(0); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	for _, n := range []*Membership{a, b} {
		ev := waitEvent(t, n, "leave-3 removed", func(ev Event) bool {
			return ev.Member.Name == "leave-3" && (ev.Kind == EventLeave || ev.Kind == EventFail)
		})
		if ev.Kind != EventLeave {
			t.Errorf("%s saw %v for a graceful leave, want leave", n.Name(), ev.Kind)
		}
		if ev.Member.Addr != c.Addr() || ev.Member.RemoteAddr != c.LocalMeta().RemoteAddr {
			t.Errorf("%s: leave event carries %+v", n.Name(), ev.Member)
		}
	}
	waitConverged(t, a, b)
	if a.Epoch() <= epochA || b.Epoch() <= epochB {
		t.Errorf("epochs did not grow: a %d→%d, b %d→%d", epochA, a.Epoch(), epochB, b.Epoch())
	}
	// A graceful leave unsettles Settled, not SettledExceptLeaves.
	if got := unrest(a); !got.Equal(unrestA) || a.LastChange().Before(got) || a.Settled(time.Hour) {
		t.Errorf("after a graceful leave: last unrest %v (was %v), last change %v", got, unrestA, a.LastChange())
	}
	if !a.SettledExceptLeaves(time.Since(unrestA)) {
		t.Error("SettledExceptLeaves counted the leave")
	}
	// The leaver's stream ends (closed) after its own leave event.
	var sawSelf bool
	for ev := range c.Events() {
		if ev.Kind == EventLeave && ev.Member.Name == c.Name() {
			sawSelf = true
		}
	}
	if !sawSelf {
		t.Error("leaver did not see its own leave")
	}
	if err := c.Leave(0); err != nil {
		t.Errorf("second Leave: %v", err)
	}
}

func TestCrashDetectedAsFail(t *testing.T) {
	nodes := startCluster(t, "crash", 3, nil)
	a, b, c := nodes[0], nodes[1], nodes[2]
	start := time.Now()
	unrestA := unrest(a)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Membership{a, b} {
		ev := waitEvent(t, n, "crash-3 declared failed", func(ev Event) bool {
			return ev.Member.Name == "crash-3" && (ev.Kind == EventLeave || ev.Kind == EventFail)
		})
		if ev.Kind != EventFail {
			t.Errorf("%s saw %v for a crash, want fail", n.Name(), ev.Kind)
		}
		t.Logf("%s detected the crash after %v", n.Name(), time.Since(start).Round(time.Millisecond))
	}
	waitConverged(t, a, b)
	if !unrest(a).After(unrestA) || a.SettledExceptLeaves(time.Since(start)) {
		t.Error("a failure did not unsettle SettledExceptLeaves")
	}
}

// unrest is m's time of the last change other than a graceful leave.
func unrest(m *Membership) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastUnrest
}

func TestRestartSameNameRejoins(t *testing.T) {
	nodes := startCluster(t, "restart", 3, nil)
	a, b, c := nodes[0], nodes[1], nodes[2]
	oldAddr, oldInc := c.Addr(), c.LocalMeta().Incarnation
	if err := c.Shutdown(); err != nil { // no leave: a crash
		t.Fatal(err)
	}
	waitConverged(t, a, b)

	// Restart under the same name on a different port.
	var c2 *Membership
	for try := 0; ; try++ {
		cfg := testConfig("restart-3", a.Addr())
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if m.Addr() != oldAddr {
			c2 = m
			t.Cleanup(func() { _ = m.Shutdown() })
			break
		}
		_ = m.Shutdown() // the kernel handed out the same port again
		if try == 5 {
			t.Fatal("could not get a new port")
		}
	}
	newAddr := c2.Addr()
	for _, n := range []*Membership{a, b} {
		ev := waitEvent(t, n, "restart-3 back", func(ev Event) bool {
			return ev.Kind == EventJoin && ev.Member.Name == "restart-3" && ev.Member.Addr == newAddr
		})
		if ev.Member.Incarnation <= oldInc {
			t.Errorf("%s: restarted incarnation %d not above %d", n.Name(), ev.Member.Incarnation, oldInc)
		}
	}
	waitConverged(t, a, b, c2)
	for _, n := range []*Membership{a, b, c2} {
		if mem, _ := n.Member("restart-3"); mem.Addr != newAddr {
			t.Errorf("%s sees restart-3 at %s, want %s", n.Name(), mem.Addr, newAddr)
		}
	}
}

func TestUpdateMetaSeenAsUpdate(t *testing.T) {
	nodes := startCluster(t, "upd", 2, nil)
	a, b := nodes[0], nodes[1]
	epoch := a.Epoch()
	newMeta := Meta{RemoteAddr: "127.0.0.1:31000", Roles: []string{RoleCN, RolePlanner}}
	if err := b.UpdateMeta(newMeta, 0); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, a, "upd-2 update", func(ev Event) bool {
		return ev.Kind == EventUpdate && ev.Member.Name == "upd-2"
	})
	if !ev.Member.HasRole(RolePlanner) || ev.Member.RemoteAddr != newMeta.RemoteAddr || ev.Member.Incarnation != b.LocalMeta().Incarnation {
		t.Errorf("update carries %+v", ev.Member)
	}
	if a.Epoch() <= epoch {
		t.Errorf("epoch %d did not grow past %d", a.Epoch(), epoch)
	}
	// Oversized metadata is refused and the old one stays advertised.
	big := newMeta
	big.RemoteAddr = strings.Repeat("h", 200) + ":1"
	for i := 0; i < MaxRoles-2; i++ {
		big.Roles = append(big.Roles, fmt.Sprintf("role-%02d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxx"))
	}
	if err := b.UpdateMeta(big, 0); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("UpdateMeta(big) = %v, want ErrMetaTooLarge", err)
	}
	if got := b.LocalMeta(); got.RemoteAddr != newMeta.RemoteAddr || len(got.Roles) != 2 {
		t.Errorf("local meta changed to %+v", got)
	}
}

// A consumer that never reads must not stall memberlist: the channel fills,
// the oldest events are dropped, and the view still converges.
func TestEventsNeverBlockMemberlist(t *testing.T) {
	nodes := startCluster(t, "slow", 3, func(c *Config) { c.EventQueueLen = 2 })
	// More changes than the channel holds: metadata updates, then a 4th node.
	for i := 0; i < 3; i++ {
		if err := nodes[1].UpdateMeta(Meta{RemoteAddr: fmt.Sprintf("127.0.0.1:%d", 32000+i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig("slow-4", nodes[0].Addr())
	cfg.EventQueueLen = 2
	nodes = append(nodes, startNode(t, cfg))
	waitConverged(t, nodes...)
	for _, n := range nodes[:3] {
		eventually(t, n.Name()+" sees the last update", func() bool {
			mem, _ := n.Member("slow-2")
			return mem.RemoteAddr == "127.0.0.1:32002"
		})
	}

	a := nodes[0]
	if a.Dropped() == 0 {
		t.Fatalf("%s dropped nothing with a 2-slot queue (epoch %d)", a.Name(), a.Epoch())
	}
	// What is left is the newest events, in order; the last one is the
	// current epoch (retry if a change lands while draining).
	var last uint64
	eventually(t, "queue drained at a stable epoch", func() bool {
		before := a.Epoch()
		var epochs []uint64
		for drained := false; !drained; {
			select {
			case ev := <-a.Events():
				if ev.Epoch <= last {
					t.Fatalf("event epoch %d after %d", ev.Epoch, last)
				}
				last = ev.Epoch
				epochs = append(epochs, ev.Epoch)
			default:
				drained = true
			}
		}
		if a.Epoch() != before {
			return false
		}
		if last != before {
			t.Fatalf("newest event has epoch %d (drained %v), current epoch %d", last, epochs, before)
		}
		return true
	})
}

func TestJoinFailsAfterRetries(t *testing.T) {
	// A loopback port nobody listens on: connections are refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	cfg := testConfig("lonely", dead)
	cfg.JoinRetries = 2
	cfg.JoinBackoff = 10 * time.Millisecond
	cfg.JoinBackoffMax = 20 * time.Millisecond
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(context.Background())
	if !errors.Is(err, ErrJoinFailed) {
		t.Fatalf("Start = %v, want ErrJoinFailed", err)
	}
	t.Log(err)
	for open := true; open; {
		select {
		case _, open = <-m.Events(): // drain buffered events until closed
		default:
			t.Fatal("events still open after a failed start")
		}
	}
	if err := m.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("restart of a stopped Membership = %v", err)
	}
	if err := m.UpdateMeta(Meta{}, 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("UpdateMeta after stop = %v", err)
	}
}

func TestAloneAndSettled(t *testing.T) {
	m, err := New(testConfig("solo"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Settled(0) || m.Addr() != "" {
		t.Error("settled or addressed before Start")
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	if ms := m.Members(); len(ms) != 1 || ms[0].Name != "solo" || ms[0].Addr != m.Addr() {
		t.Fatalf("alone: %+v", ms)
	}
	if m.Settled(time.Hour) {
		t.Error("settled for an hour right after start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	epoch, err := m.WaitSettled(ctx, 100*time.Millisecond)
	if err != nil || epoch != m.Epoch() || !m.Settled(100*time.Millisecond) {
		t.Errorf("WaitSettled = %d, %v; epoch %d", epoch, err, m.Epoch())
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := m.WaitSettled(short, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitSettled(1h) = %v, want deadline exceeded", err)
	}
}
