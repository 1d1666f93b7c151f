package planner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
)

// protoactor's dead-letter throttle keeps a goroutine for one throttle
// period after a message reaches a stopped actor (a late push result or tick
// after the test poisoned the planner); it ends by itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// fakeCluster is a Pusher whose nodes assemble pushes in memory; a node in
// mute never answers (its pushes time out).
type fakeCluster struct {
	mu    sync.Mutex
	asm   map[string]*Assembler
	mute  map[string]bool
	maps  map[string][]*control.OwnerMap // installed maps, in order
	chunk map[string]int                 // pushes received
}

func newFakeCluster(names ...string) *fakeCluster {
	c := &fakeCluster{asm: map[string]*Assembler{}, mute: map[string]bool{}, maps: map[string][]*control.OwnerMap{}, chunk: map[string]int{}}
	for _, n := range names {
		c.asm[n] = NewAssembler(0)
	}
	return c
}

func (c *fakeCluster) Push(ctx context.Context, node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error) {
	c.mu.Lock()
	if c.mute[node] {
		c.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer c.mu.Unlock()
	a := c.asm[node]
	if a == nil {
		return nil, fmt.Errorf("no node %s", node)
	}
	c.chunk[node]++
	ack := &messages.OwnerMapAck{Epoch: p.GetEpoch(), Node: node, ChunkIndex: p.GetChunkIndex()}
	m, err := a.Offer(p)
	switch {
	case errors.Is(err, ErrNeedFull):
		ack.NeedFull = true
	case err != nil:
		ack.Error = err.Error()
	case m != nil:
		c.maps[node] = append(c.maps[node], m)
	}
	ack.InstalledEpoch = a.Installed().Epoch
	return ack, nil
}

func (c *fakeCluster) installed(node string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asm[node].Installed().Epoch
}

// driver feeds heartbeats of a partitioned workload (tenant t's transactions
// run on node t mod 3) to the planner actor.
type driver struct {
	prof  []*accessgraph.Profiler
	rng   *rand.Rand
	shift int // drift: tenant t runs on node (t + shift) mod n
}

func newDriver(t *testing.T, n int) *driver {
	d := &driver{rng: rand.New(rand.NewPCG(7, 7))}
	for i := range n {
		pc := accessgraph.DefaultProfilerConfig()
		pc.Node, pc.NodeIndex, pc.Seed = fmt.Sprintf("cn-%d", i), uint32(i), uint64(i+1)
		p, err := accessgraph.NewProfiler(pc)
		if err != nil {
			t.Fatal(err)
		}
		d.prof = append(d.prof, p)
	}
	return d
}

func (d *driver) beat(root *actor.RootContext, pid *actor.PID, tick uint64) {
	w := make([]control.KeyGroup, 3)
	for range 3000 {
		tn := d.rng.IntN(12)
		for j := range w {
			w[j] = control.KeyGroup(uint64(tn)<<20 | uint64(d.rng.IntN(10)))
		}
		d.prof[(tn+d.shift)%len(d.prof)].Record(w, nil)
	}
	for _, p := range d.prof {
		root.Send(pid, p.Summary(tick, accessgraph.SummaryV2))
	}
}

func status(t *testing.T, root *actor.RootContext, pid *actor.PID) Status {
	t.Helper()
	r, err := root.RequestFuture(pid, GetStatus{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return r.(Status)
}

func start(t *testing.T, fc *fakeCluster, names []string) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	cfg := DefaultConfig("cn-0", len(names))
	cfg.Tick = 10 * time.Millisecond
	cfg.PushTimeout = 100 * time.Millisecond
	cfg.ChunkBytes = 64 // many chunks per manifest: reassembly is exercised
	a, err := NewActor(cfg, fc)
	if err != nil {
		t.Fatal(err)
	}
	pid := sys.Root.Spawn(a.Props(4096))
	sys.Root.Send(pid, Nodes{Names: names, MembershipEpoch: 1})
	return sys, pid
}

func stop(sys *actor.ActorSystem, pid *actor.PID) {
	_ = sys.Root.PoisonFuture(pid).Wait()
	sys.Shutdown()
}

// waitFor polls cond every few milliseconds, feeding heartbeats, until it
// holds or 20 s pass.
func waitFor(t *testing.T, d *driver, sys *actor.ActorSystem, pid *actor.PID, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tick := uint64(1); ; tick++ {
		d.beat(sys.Root, pid, tick)
		time.Sleep(10 * time.Millisecond)
		st := status(t, sys.Root, pid)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, st)
		}
	}
}

func TestPlannerPublishesAcknowledgedEpochs(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	st := waitFor(t, d, sys, pid, "an acknowledged map with a cohort per tenant, after 30 ticks", func(s Status) bool {
		return s.Acked >= 1 && s.Cohorts >= 12 && s.Tick >= 30
	})
	for _, n := range names {
		if got := fc.installed(n); got < st.Acked {
			t.Fatalf("%s installed epoch %d < acknowledged %d", n, got, st.Acked)
		}
	}
	// Every node installed the same maps, epochs without gaps.
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ref := fc.maps[names[0]]
	for _, n := range names {
		ms := fc.maps[n]
		for i, m := range ms {
			if i > 0 && m.Epoch != ms[i-1].Epoch+1 {
				t.Fatalf("%s installed epoch %d after %d", n, m.Epoch, ms[i-1].Epoch)
			}
			if i < len(ref) && !manifest.Equal(m, ref[i]) {
				t.Fatalf("%s and %s installed different maps at epoch %d", n, names[0], m.Epoch)
			}
		}
	}
	// Tenants' key groups end up owned by their transactions' node.
	last := ref[len(ref)-1]
	local, total := 0, 0
	for _, p := range last.Cohorts {
		for _, kg := range p.KeyGroups {
			total++
			if int(uint64(kg)>>20)%3 == p.Owner {
				local++
			}
		}
	}
	if total == 0 || local*10 < total*9 {
		t.Fatalf("%d of %d owned key groups on their tenant's node", local, total)
	}
}

func TestPlannerWaitsForAcksAndDropsGoneNodes(t *testing.T) {
	names := []string{"cn-0", "cn-1", "cn-2"}
	fc := newFakeCluster(names...)
	fc.mute["cn-2"] = true
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 3)
	st := waitFor(t, d, sys, pid, "a first epoch held up by a silent node", func(s Status) bool {
		return s.Epoch >= 1 && s.Deferred >= 5
	})
	if st.Epoch != 1 || st.Acked != 0 {
		t.Fatalf("with cn-2 silent: epoch %d acked %d, want 1 published and none acknowledged", st.Epoch, st.Acked)
	}
	// cn-2 leaves the membership: the epoch no longer waits for it.
	sys.Root.Send(pid, Nodes{Names: []string{"cn-0", "cn-1", ""}, MembershipEpoch: 2})
	st = waitFor(t, d, sys, pid, "epochs to advance without cn-2", func(s Status) bool { return s.Acked >= 2 })
	if fc.installed("cn-2") != 0 {
		t.Fatal("the silent node installed a map")
	}
	// The planner placed nothing on the node that is gone.
	fc.mu.Lock()
	ms := fc.maps["cn-0"]
	fc.mu.Unlock()
	for _, p := range ms[len(ms)-1].Cohorts {
		if p.Owner == 2 {
			t.Fatalf("cohort %d placed on the departed node at epoch %d", p.ID, ms[len(ms)-1].Epoch)
		}
	}
}

func TestPlannerResendsFullToNodeWithoutBase(t *testing.T) {
	names := []string{"cn-0", "cn-1"}
	fc := newFakeCluster(names...)
	sys, pid := start(t, fc, names)
	defer stop(sys, pid)
	d := newDriver(t, 2)
	waitFor(t, d, sys, pid, "a map with a cohort per tenant", func(s Status) bool { return s.Acked >= 1 && s.Cohorts >= 12 })
	// cn-1 restarts with nothing installed, and the workload drifts so that
	// new epochs follow as deltas it cannot apply: it asks for the full
	// manifest and catches up.
	fc.mu.Lock()
	fc.asm["cn-1"] = NewAssembler(0)
	fc.mu.Unlock()
	d.shift = 1
	st0 := status(t, sys.Root, pid)
	waitFor(t, d, sys, pid, "cn-1 to catch up", func(s Status) bool {
		return s.Acked > st0.Acked && fc.installed("cn-1") == s.Acked
	})
}
