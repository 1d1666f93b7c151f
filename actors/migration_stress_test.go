package actors

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/invariants"
	"github.com/aura-runtime/aura/messages"
)

var (
	stressSchedules = flag.Int("migration.schedules", 24, "random schedules of TestMigrationStress")
	stressSteps     = flag.Int("migration.steps", 1500, "steps (1 ms of fake time each) per schedule")
	stressTrace     = flag.Bool("migration.trace", false, "log every event of TestMigrationStress")
	stressAsync     = flag.Bool("migration.async", false, "deliver every migration message on its own goroutine (as nodes serve them; schedules do not replay)")
)

// TestMigrationStress runs random schedules of continuous migrations among
// three nodes' owner paths while clients lock and release records of the
// moving cohorts: migration messages and acknowledgements are lost,
// duplicated, delayed and reordered, maps reach the nodes at different
// times, nodes crash (old and new owners mid-handoff) and restart, and the
// planner fails over mid-round (a new TransferController; the old one's
// messages are still in flight). After every step it checks I1 (at most one
// live node grants a cohort) and I4 (a cohort's grants never go back to an
// older epoch); every grant and release goes into a history that porcupine
// checks against a lock model (I2, and I3: the new owner never grants a
// lock a holder under the old owner still holds). At the end, with the
// faults stopped, the cluster must converge: every placed cohort active on
// its owner only.
//
// More schedules: go test ./actors -run TestMigrationStress -migration.schedules 500 -migration.steps 5000
func TestMigrationStress(t *testing.T) {
	migrations, outcomes := 0, map[transfer.Outcome]int{}
	for seed := range *stressSchedules {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStress(t, uint64(seed))
				s.run(*stressSteps)
				migrations += s.migrations
				for o, n := range s.outcomes {
					outcomes[o] += n
				}
			})
		})
	}
	t.Logf("%d schedules, %d migrations finished: %d moved, %d evicted, %d rolled back", *stressSchedules, migrations,
		outcomes[transfer.Moved], outcomes[transfer.Evicted], outcomes[transfer.Kept])
	if *stressSchedules >= 24 && (outcomes[transfer.Moved] == 0 || outcomes[transfer.Evicted] == 0 || outcomes[transfer.Kept] == 0) {
		t.Errorf("the schedules did not exercise every outcome: %v", outcomes)
	}
}

const (
	stressCohorts        = 6
	stressRecordsPer     = 4
	stressClients        = 8
	stressMaxHoldSteps   = 40 // under the 50 ms drain deadline: no holder is fenced, but drains wait
	stressCrashPerMille  = 2
	stressFailoverPerMil = 2
)

var stressNames = []string{"a", "b", "c"}

type netMsg struct {
	to  string
	msg proto.Message
	gen int // controller generation that sent it
}

type netAck struct {
	from string
	rep  proto.Message
	gen  int
}

type lockOp struct {
	acquire bool
	rec     uint64
	txn     uint64
	granted bool
}

type stressClient struct {
	txn                uint64
	rec                uint64
	holding            bool
	node               string
	cohort             control.CohortID
	epoch              uint64
	release            int // step at which it releases
	hintOwner          string
	hintEpoch          uint64
	callStep, holdFrom int64
}

type stress struct {
	t     *testing.T
	rng   *rand.Rand
	nodes map[string]*ownership // live nodes only
	step  int64

	ctl       *transfer.Controller
	gen       int
	pub       map[control.CohortID]string // published placement (cohort → owner name)
	epoch     uint64                      // published epoch
	install   map[control.CohortID]uint64 // install epoch per published cohort
	staged    map[control.CohortID]string
	stagedE   uint64
	toInstall map[string]*control.OwnerMap // map still to reach each node
	awaitPub  bool                         // Published to call once installs are done

	mu   sync.Mutex
	net  []netMsg
	acks []netAck

	clients    []*stressClient
	nextTxn    uint64
	ops        []porcupine.Operation
	lastGrant  map[control.CohortID]uint64
	migrations int
	outcomes   map[transfer.Outcome]int
	checker    *invariants.Checker
	// incarnations: the observer of each node's current process; a
	// crashed one reports nothing more (its delivery goroutines may still
	// run on its state, as no crashed process can).
	incarnations map[string]*incarnation
	faults       bool
	resetting    bool // a failover's empty map is not installed everywhere yet
	// partitioned exchanges no migration message with the planner until
	// partitionEnd.
	partitioned  string
	partitionEnd int64
	quietUntil   int64 // no round before this step
}

func newStress(t *testing.T, seed uint64) *stress {
	s := &stress{t: t, rng: rand.New(rand.NewPCG(seed, 0x6d6967)), nodes: map[string]*ownership{},
		pub: map[control.CohortID]string{}, install: map[control.CohortID]uint64{}, toInstall: map[string]*control.OwnerMap{},
		lastGrant: map[control.CohortID]uint64{}, faults: true, outcomes: map[transfer.Outcome]int{}, checker: invariants.New(),
		incarnations: map[string]*incarnation{}}
	for _, n := range stressNames {
		s.start(n)
	}
	s.newController()
	for c := control.CohortID(1); c <= stressCohorts; c++ {
		s.pub[c] = stressNames[int(c)%len(stressNames)]
	}
	s.epoch = 1
	m := s.ownerMap(s.pub, s.epoch)
	for c := range s.pub {
		s.install[c] = 1
	}
	for n := range s.nodes {
		s.toInstall[n] = m
	}
	s.flushInstalls()
	for range stressClients {
		s.clients = append(s.clients, &stressClient{})
	}
	return s
}

func (s *stress) start(name string) {
	var obs invariants.Observer = s.checker
	if *stressTrace {
		obs = tracingObserver{s}
	}
	inc := &incarnation{obs: obs}
	s.incarnations[name] = inc
	o, err := newOwnership(OwnershipConfig{Names: stressNames, Observer: inc}, name, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.nodes[name] = o
}

func (s *stress) newController() {
	s.gen++
	// Short deadlines, so that rollbacks, rolled-forward handoffs and
	// abandoned aborts happen within a schedule.
	cfg := transfer.DefaultConfig("p")
	cfg.ResendMicros, cfg.FreezeTimeoutMicros, cfg.HandoffTimeoutMicros = 20_000, 120_000, 60_000
	cfg.PublishTimeoutMicros, cfg.AbortTimeoutMicros = 100_000, 200_000
	ctl, err := transfer.New(cfg, uint64(s.gen)<<32)
	if err != nil {
		s.t.Fatal(err)
	}
	s.ctl = ctl
}

func (s *stress) nowMicros() int64 { return s.step * 1000 }

func (s *stress) tracef(format string, args ...any) {
	if *stressTrace {
		s.t.Logf("step %d: "+format, append([]any{s.step}, args...)...)
	}
}

// ownerMap builds an OwnerMap: cohort c holds key group c.
func (s *stress) ownerMap(pl map[control.CohortID]string, epoch uint64) *control.OwnerMap {
	m := &control.OwnerMap{Epoch: epoch}
	for _, c := range slices.Sorted(maps.Keys(pl)) {
		m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: c, KeyGroups: []control.KeyGroup{c}},
			Owner: slices.Index(stressNames, pl[c])})
	}
	return m
}

func (s *stress) installOn(name string, m *control.OwnerMap) {
	// The real path: the manifest encoding, chunks, the assembler.
	pushes, err := planner.PushesWithRoster(nil, m, stressNames, planner.DefaultChunkBytes, "p", 0)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tracef("install on %s: %v", name, m)
	for _, p := range pushes {
		if ack := s.nodes[name].handlePush(p); ack.GetError() != "" {
			s.t.Errorf("%s: install epoch %d: %s", name, m.Epoch, ack.GetError())
		}
	}
}

func (s *stress) flushInstalls() {
	for _, n := range slices.Sorted(maps.Keys(s.toInstall)) {
		s.installOn(n, s.toInstall[n])
	}
	clear(s.toInstall)
}

func (s *stress) run(steps int) {
	for s.step = 1; s.step <= int64(steps); s.step++ {
		s.tick()
	}
	// Faults stop; the cluster must converge.
	s.faults = false
	for i := 0; i < 5000 && (s.ctl.Active() || s.staged != nil || len(s.toInstall) > 0 || s.holding()); i++ {
		s.step++
		s.tick()
	}
	if s.ctl.Active() || s.staged != nil || len(s.toInstall) > 0 {
		s.t.Fatalf("no convergence: controller active %v, staged %v, installs pending %d", s.ctl.Active(), s.staged != nil, len(s.toInstall))
	}
	s.checkConverged()
	s.checkHistory()
	if r := s.checker.Result(); !r.Pass() || r.Events == 0 {
		s.t.Fatalf("invariant checker: %s (%d events)", r, r.Events)
	}
	// Drains still waiting on nodes that crashed end by their deadline.
	time.Sleep(maxDrainWait)
	synctest.Wait()
}

func (s *stress) holding() bool {
	return slices.ContainsFunc(s.clients, func(c *stressClient) bool { return c.holding })
}

func (s *stress) tick() {
	time.Sleep(time.Millisecond)
	synctest.Wait()
	now := s.nowMicros()
	s.mu.Lock()
	acks := s.acks
	s.acks = nil
	s.mu.Unlock()
	// Drains answer on their own goroutines: put their acknowledgements in
	// a canonical order before the seeded shuffle.
	slices.SortStableFunc(acks, func(x, y netAck) int {
		kx, ky := fmt.Sprintf("%s %T %v", x.from, x.rep, x.rep), fmt.Sprintf("%s %T %v", y.from, y.rep, y.rep)
		return strings.Compare(kx, ky)
	})
	s.rng.Shuffle(len(acks), func(i, j int) { acks[i], acks[j] = acks[j], acks[i] })
	for _, a := range acks {
		if s.faults && s.rng.IntN(10) == 0 {
			continue // lost
		}
		if a.gen != s.gen || a.from == s.partitioned && s.step < s.partitionEnd {
			continue // to a controller that failed over, or cut off
		}
		s.tracef("ack from %s: %T %v", a.from, a.rep, a.rep)
		s.send(s.ctl.Step(now, a.from, a.rep))
	}
	s.send(s.ctl.Tick(now))
	s.deliverSome()
	s.maybeInstall()
	s.settle(now)
	if s.faults {
		s.maybeFault(now)
	}
	if s.resetting && len(s.toInstall) == 0 {
		// As planner.Actor after a takeover: one drain deadline (50 ms)
		// before any cohort is installed again.
		s.resetting, s.quietUntil = false, s.step+50
	}
	if s.faults && !s.ctl.Active() && s.staged == nil && len(s.toInstall) == 0 && !s.resetting && s.step >= s.quietUntil && s.rng.IntN(5) == 0 {
		s.planRound(now)
	}
	s.clientsStep()
	s.checkI1()
}

func (s *stress) send(out []transfer.Send) {
	for _, m := range out {
		s.net = append(s.net, netMsg{to: m.To, msg: m.Msg, gen: s.gen})
	}
}

// deliverSome delivers a random part of the network queue, each message on
// its own goroutine (a Drain waits); some are lost, duplicated or kept for
// later (delayed, so reordered).
func (s *stress) deliverSome() {
	var keep []netMsg
	for _, m := range s.net {
		r := s.rng.IntN(10)
		switch {
		case s.faults && r == 0:
			continue // lost
		case s.faults && r <= 2:
			keep = append(keep, m) // delayed
			continue
		case s.faults && r == 3:
			keep = append(keep, m) // duplicated: delivered now and later
		}
		if m.to == s.partitioned && s.step < s.partitionEnd {
			continue // cut off
		}
		o := s.nodes[m.to]
		if o == nil {
			continue // the node is down
		}
		s.tracef("deliver to %s: %T %v", m.to, m.msg, m.msg)
		deliver := func() {
			rep, err := o.migrate(context.Background(), m.msg)
			if err != nil {
				s.t.Errorf("%s: %v", m.to, err)
				return
			}
			s.mu.Lock()
			s.acks = append(s.acks, netAck{from: m.to, rep: rep, gen: m.gen})
			s.mu.Unlock()
		}
		if _, drain := m.msg.(*messages.Drain); drain || *stressAsync {
			go deliver() // waits for the holders, on the bubble's clock
		} else {
			deliver() // in order, so that a seed replays the same schedule
		}
	}
	s.net = keep
}

// maybeInstall delivers the pending map to some nodes (maps reach nodes at
// different times).
func (s *stress) maybeInstall() {
	for _, n := range slices.Sorted(maps.Keys(s.toInstall)) {
		if _, live := s.nodes[n]; !live {
			delete(s.toInstall, n)
			continue
		}
		if !s.faults || s.rng.IntN(3) == 0 {
			s.installOn(n, s.toInstall[n])
			delete(s.toInstall, n)
		}
	}
}

func (s *stress) settle(now int64) {
	if s.staged != nil && s.ctl.Settled() {
		out := s.ctl.Placement()
		next := maps.Clone(s.staged)
		for c, o := range out {
			switch o {
			case transfer.Kept:
				next[c] = s.pub[c]
			case transfer.Evicted:
				delete(next, c)
			}
		}
		s.publish(next, s.stagedE)
		s.staged = nil
		s.awaitPub = true
	}
	if s.awaitPub && len(s.toInstall) == 0 {
		s.awaitPub = false
		out, err := s.ctl.Published(now)
		if err != nil {
			s.t.Fatal(err)
		}
		s.send(out)
	}
	for _, r := range s.ctl.Finished() {
		s.migrations++
		s.outcomes[r.Outcome]++
	}
}

func (s *stress) publish(next map[control.CohortID]string, epoch uint64) {
	for c, n := range next {
		if s.pub[c] != n || s.install[c] == 0 {
			s.install[c] = epoch
		}
	}
	for c := range s.install {
		if _, ok := next[c]; !ok {
			delete(s.install, c)
		}
	}
	s.pub, s.epoch = next, epoch
	m := s.ownerMap(next, epoch)
	for n := range s.nodes {
		s.toInstall[n] = m
	}
}

// planRound moves one to three cohorts: to another live node, off the
// map, or (unplaced ones) onto a live node; cohorts of a dead owner are
// placed again without a migration (nothing there to freeze).
func (s *stress) planRound(now int64) {
	live := slices.Sorted(maps.Keys(s.nodes))
	next := maps.Clone(s.pub)
	for c, n := range next {
		if _, ok := s.nodes[n]; !ok {
			next[c] = live[s.rng.IntN(len(live))]
		}
	}
	for range 1 + s.rng.IntN(3) {
		c := control.CohortID(1 + s.rng.IntN(stressCohorts))
		if s.rng.IntN(4) == 0 {
			delete(next, c)
		} else {
			next[c] = live[s.rng.IntN(len(live))]
		}
	}
	epoch := s.epoch + 1
	var moves []transfer.Move
	for _, c := range slices.Sorted(maps.Keys(s.pub)) {
		from := s.pub[c]
		if _, ok := s.nodes[from]; !ok || next[c] == from {
			continue
		}
		mv := transfer.Move{Cohort: c, From: from, To: next[c], Epoch: s.install[c], NewEpoch: epoch}
		if mv.To != "" {
			mv.KeyGroups = []control.KeyGroup{c}
		}
		moves = append(moves, mv)
	}
	if len(moves) == 0 {
		s.publish(next, epoch)
		return
	}
	out, err := s.ctl.Start(now, moves)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tracef("round to epoch %d: %+v", epoch, moves)
	s.staged, s.stagedE = next, epoch
	s.send(out)
}

func (s *stress) maybeFault(now int64) {
	switch r := s.rng.IntN(1000); {
	case r < stressCrashPerMille && len(s.nodes) > 1:
		live := slices.Sorted(maps.Keys(s.nodes))
		victim := live[s.rng.IntN(len(live))]
		delete(s.nodes, victim)
		s.incarnations[victim].kill()
		s.checker.NodeDown(victim)
		s.tracef("crash %s", victim)
		delete(s.toInstall, victim)
		// Its transactions die with it: their holds end now.
		for _, c := range s.clients {
			if c.holding && c.node == victim {
				s.endHold(c)
			}
		}
		s.send(s.ctl.NodeGone(now, victim))
		s.settle(now)
	case r < 2*stressCrashPerMille && len(s.nodes) < len(stressNames):
		// Restart a crashed node under its name, fresh, with the map.
		for _, n := range stressNames {
			if _, ok := s.nodes[n]; !ok {
				s.start(n)
				s.tracef("restart %s", n)
				if s.staged == nil {
					// As planner.Actor: not while a round is staged (the
					// published map may still place on n a cohort the
					// round handed elsewhere when n went away).
					s.toInstall[n] = s.ownerMap(s.pub, s.epoch)
				}
				break
			}
		}
	case r < 2*stressCrashPerMille+2 && s.step >= s.partitionEnd:
		// Cut a live node off the planner for 50–250 ms: its migration
		// messages and acknowledgements are lost (freezes time out and
		// roll back; aborts go unanswered).
		live := slices.Sorted(maps.Keys(s.nodes))
		s.partitioned, s.partitionEnd = live[s.rng.IntN(len(live))], s.step+50+int64(s.rng.IntN(200))
		s.tracef("partition %s until step %d", s.partitioned, s.partitionEnd)
	case r < 2*stressCrashPerMille+2+stressFailoverPerMil:
		// Planner failover: a new controller; the old one's messages are
		// still in the network. Like planner.Actor's takeover, it first
		// publishes a map without cohorts above every installed epoch.
		s.newController()
		s.tracef("planner failover")
		s.staged, s.awaitPub, s.resetting = nil, false, true
		s.publish(map[control.CohortID]string{}, s.epoch+2)
	}
}

func (s *stress) clientsStep() {
	for _, c := range s.clients {
		if c.holding {
			if s.step >= int64(c.release) {
				o := s.nodes[c.node]
				if o != nil {
					rep := o.svc.HandleUnlock(&messages.UnlockRequest{TxnId: c.txn, CohortId: c.cohort, Epoch: c.epoch,
						Records: []*messages.RecordRef{{Table: 1, Key: c.rec}}, Requester: "client", RequestId: c.txn<<8 | 1})
					if rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
						s.t.Fatalf("unlock of %d by txn %d at %s: %v", c.rec, c.txn, c.node, rep.GetStatus())
					}
				}
				s.endHold(c)
			}
			continue
		}
		if s.rng.IntN(2) == 0 {
			continue
		}
		cohort := control.CohortID(1 + s.rng.IntN(stressCohorts))
		rec := uint64(cohort)*100 + uint64(s.rng.IntN(stressRecordsPer))
		node, epoch := c.hintOwner, c.hintEpoch
		c.hintOwner = ""
		if node == "" {
			// Route by the map some live node installed (views lag).
			live := slices.Sorted(maps.Keys(s.nodes))
			view := s.nodes[live[s.rng.IntN(len(live))]]
			view.mu.Lock()
			m := view.asm.Installed()
			view.mu.Unlock()
			epoch = m.Epoch
			for _, p := range m.Cohorts {
				if p.ID == cohort {
					node = stressNames[p.Owner]
				}
			}
		}
		o := s.nodes[node]
		if o == nil {
			continue // unowned (memory-node path, not modelled) or owner down
		}
		s.nextTxn++
		txn := s.nextTxn
		rep := o.svc.HandleLock(&messages.LockRequest{TxnId: txn, CohortId: cohort, Epoch: epoch,
			Records: []*messages.RecordRef{{Table: 1, Key: rec}}, Requester: "client", RequestId: txn << 8})
		switch rep.GetStatus() {
		case messages.LockStatus_LOCK_STATUS_OK:
			if last := s.lastGrant[cohort]; rep.GetEpoch() < last {
				s.t.Fatalf("step %d: I4 violated: cohort %d granted at epoch %d by %s after a grant at %d", s.step, cohort, rep.GetEpoch(), node, last)
			}
			s.lastGrant[cohort] = rep.GetEpoch()
			for _, o := range s.clients {
				if o.holding && o.rec == rec {
					s.t.Fatalf("step %d: I2 violated: record %d granted to txn %d by %s at epoch %d while txn %d holds it from %s at epoch %d",
						s.step, rec, txn, node, rep.GetEpoch(), o.txn, o.node, o.epoch)
				}
			}
			*c = stressClient{txn: txn, rec: rec, holding: true, node: node, cohort: cohort, epoch: rep.GetEpoch(),
				release: int(s.step) + 1 + s.rng.IntN(stressMaxHoldSteps), holdFrom: s.step}
			s.ops = append(s.ops, porcupine.Operation{ClientId: int(txn % stressClients), Input: lockOp{acquire: true, rec: rec, txn: txn},
				Call: s.step * 2, Output: true, Return: s.step*2 + 1})
		case messages.LockStatus_LOCK_STATUS_MOVED:
			c.hintOwner, c.hintEpoch = rep.GetMoved().GetOwner(), rep.GetMoved().GetEpoch()
		}
	}
}

func (s *stress) endHold(c *stressClient) {
	s.ops = append(s.ops, porcupine.Operation{ClientId: int(c.txn % stressClients), Input: lockOp{rec: c.rec, txn: c.txn},
		Call: s.step * 2, Output: true, Return: s.step*2 + 1})
	c.holding = false
}

func (s *stress) checkI1() {
	for c := control.CohortID(1); c <= stressCohorts; c++ {
		var act []string
		for _, n := range slices.Sorted(maps.Keys(s.nodes)) {
			if _, ok := s.nodes[n].Owned(c); ok {
				act = append(act, n)
			}
		}
		if len(act) > 1 {
			s.t.Fatalf("step %d: I1 violated: cohort %d active on %v", s.step, c, act)
		}
	}
}

func (s *stress) checkConverged() {
	for c := control.CohortID(1); c <= stressCohorts; c++ {
		owner, placed := s.pub[c]
		for _, n := range slices.Sorted(maps.Keys(s.nodes)) {
			_, ok := s.nodes[n].Owned(c)
			if want := placed && n == owner; ok != want {
				s.t.Errorf("converged map epoch %d: cohort %d active on %s: %v, want %v", s.epoch, c, n, ok, want)
			}
		}
	}
}

// lockModel: per record, the holding transaction (0: free). A grant of a
// held record, or a release by a non-holder, is not linearizable.
var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[uint64][]porcupine.Operation{}
		for _, op := range history {
			r := op.Input.(lockOp).rec
			by[r] = append(by[r], op)
		}
		keys := slices.Sorted(maps.Keys(by))
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		holder, in := state.(uint64), input.(lockOp)
		if in.acquire {
			return holder == 0, in.txn
		}
		return holder == in.txn, uint64(0)
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockOp)
		if in.acquire {
			return fmt.Sprintf("acquire(%d) by %d", in.rec, in.txn)
		}
		return fmt.Sprintf("release(%d) by %d", in.rec, in.txn)
	},
}

func (s *stress) checkHistory() {
	sort.SliceStable(s.ops, func(i, j int) bool { return s.ops[i].Call < s.ops[j].Call })
	if res := porcupine.CheckOperations(lockModel, s.ops); !res {
		s.t.Fatalf("lock history of %d operations is not linearizable (I2/I3 violated)", len(s.ops))
	}
}

// tracingObserver logs activations and deactivations (-migration.trace)
// before handing them to the checker.
type tracingObserver struct{ s *stress }

func (o tracingObserver) Activated(node string, c, e uint64) {
	o.s.tracef("activated %s c%d e%d", node, c, e)
	o.s.checker.Activated(node, c, e)
}

func (o tracingObserver) Deactivated(node string, c, e uint64) {
	o.s.tracef("deactivated %s c%d e%d", node, c, e)
	o.s.checker.Deactivated(node, c, e)
}

func (o tracingObserver) Granted(node string, c, e uint64) { o.s.checker.Granted(node, c, e) }

// incarnation forwards one node process's ownership events until it is
// killed; the lock orders every event before or after the kill.
type incarnation struct {
	mu   sync.Mutex
	dead bool
	obs  invariants.Observer
}

func (i *incarnation) kill() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.dead = true
}

func (i *incarnation) Activated(node string, c, e uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.dead {
		i.obs.Activated(node, c, e)
	}
}

func (i *incarnation) Deactivated(node string, c, e uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.dead {
		i.obs.Deactivated(node, c, e)
	}
}

func (i *incarnation) Granted(node string, c, e uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.dead {
		i.obs.Granted(node, c, e)
	}
}
