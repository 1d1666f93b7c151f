package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aura-runtime/aura/bench"
	auraclient "github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/kvrec"
)

// Outcome is one simulated run: the result in the bench JSON schema and the
// figures the schema has no field for.
type Outcome struct {
	Result *bench.Result
	// CNBusy is each CN's CPU utilisation after the warm-up (0..1+).
	CNBusy []float64
	// CNCommitted is the transactions each CN was home to after the warm-up.
	CNCommitted []uint64
	// Cohorts is the published cohort count after every planner tick.
	Cohorts []int
	// TickCNCommitted is, for every planner tick, the transactions each CN
	// was home to during that tick (warm-up included): the per-tick load
	// split that shows a collapse onto one CN as it happens.
	TickCNCommitted [][]uint64
	// TickWall is the real time each planner tick took (not part of the
	// deterministic output).
	TickWall []time.Duration
}

// access is one record a transaction touches.
type access struct {
	ref    txn.Ref
	kg     uint64
	part   uint64 // the rule's partition value
	key    uint64 // the record's hash: lock table key and lock word address
	addr   uint64 // lock word address (NIC slot hashing)
	size   int
	insert bool // a row the transaction inserts: counted, never conflicts
}

// txnInfo is a generated transaction and its access set.
type txnInfo struct {
	msg     *messages.TxnSubmit
	kind    string
	ta      *typeAcc
	home    uint64 // the rule's Home partition value
	writes  []access
	reads   []access
	start   int64
	attempt int
	// The last attempt's lock paths (for the profiler's lock counts).
	nLocal, nRPC, nMN uint64
	casKGs            []uint64
}

type lockEntry struct {
	holder  int32
	kg      uint64
	release int64 // planned release (0 while unknown)
}

type client struct {
	id      int32
	gen     workload.Generator
	rng     *rand.Rand
	cur     *txnInfo
	backoff int64
	next    int64 // pacing: earliest start of the next transaction
	home    int
	held    []uint64
	done    bool
}

type counters struct {
	committed, aborted, failed uint64
	local, rpc, mnCAS          uint64
	read, write, cas, faa      uint64
}

func (c counters) sub(o counters) counters {
	return counters{c.committed - o.committed, c.aborted - o.aborted, c.failed - o.failed,
		c.local - o.local, c.rpc - o.rpc, c.mnCAS - o.mnCAS,
		c.read - o.read, c.write - o.write, c.cas - o.cas, c.faa - o.faa}
}

type typeAcc struct {
	committed, aborted, atomics, locks, commitLocks uint64
}

// sim is one run's state.
type sim struct {
	cfg     Config
	costs   Costs
	wl      workload.Workload
	rule    workload.Rule
	sizes   []int
	tpcc    *tpccShape
	nic     *rdma.NIC
	pol     policy
	q       queue
	clients []*client
	locks   map[uint64]lockEntry // by access.key
	frozen  map[uint64]int64     // key group → end of its migration window
	cpuFree []int64
	busy    []int64 // CPU ns reserved after the warm-up
	homeCnt []uint64
	tickCnt []uint64 // commits per CN in the current tick
	warmEnd int64
	end     int64
	now     int64
	c       counters
	warm    counters
	prev    counters
	lat     bench.Histogram
	byType  map[string]*typeAcc
	res     *bench.Result
	out     *Outcome
	// migrations
	migrations uint64
	freezeHist bench.Histogram
	interval   int64 // pacing interval per client (0 = closed loop)
	staticMemo map[uint64]int
	fallback   router.FallbackFunc
}

// Run simulates one mode and returns its outcome.
func Run(cfg Config) (*Outcome, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d, ok := cfg.Workload.(drifter); ok {
		if err := d.Drift(0); err != nil {
			return nil, err
		}
	}
	nic, err := rdma.NewNIC(cfg.Costs.NIC)
	if err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, costs: *cfg.Costs, wl: cfg.Workload, rule: cfg.Workload.Rule(), nic: nic,
		locks: map[uint64]lockEntry{}, frozen: map[uint64]int64{},
		cpuFree: make([]int64, cfg.CNs), busy: make([]int64, cfg.CNs), homeCnt: make([]uint64, cfg.CNs),
		tickCnt: make([]uint64, cfg.CNs),
		warmEnd: int64(cfg.Warmup), end: int64(cfg.Warmup + cfg.Duration), byType: map[string]*typeAcc{},
		staticMemo: map[uint64]int{}}
	for _, t := range cfg.Workload.Schema().Tables {
		for int(t.ID) >= len(s.sizes) {
			s.sizes = append(s.sizes, 0)
		}
		s.sizes[t.ID] = t.ValueSize
	}
	s.tpcc = newTPCCShape(cfg.Workload)
	s.fallback = auraclient.StaticFallback(cfg.Workload, cfg.CNs)
	s.res = &bench.Result{Mode: cfg.Mode, Workload: cfg.Workload.Name(), CNs: cfg.CNs,
		Checks: map[string]any{}, ByType: map[string]*bench.TypeStats{},
		Params: bench.Params{Seed: cfg.Seed, Clients: cfg.Clients, WarmupS: cfg.Warmup.Seconds(), MN: "simulated", RateTPS: cfg.RateTPS}}
	s.out = &Outcome{Result: s.res}
	if s.pol, err = newPolicy(s); err != nil {
		return nil, err
	}
	if cfg.RateTPS > 0 {
		s.interval = int64(float64(time.Second) * float64(cfg.Clients) / cfg.RateTPS)
	}
	for i := range cfg.Clients {
		c := &client{id: int32(i), gen: cfg.Workload.NewGenerator(cfg.Seed, i),
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)), backoff: int64(s.costs.BackoffMin)}
		s.clients = append(s.clients, c)
	}
	if cfg.Warmup > 0 {
		s.q.push(s.warmEnd, evWarm, -1)
	}
	for i := range s.clients {
		// Stagger the first submissions by a few µs so that clients do not
		// start in lockstep.
		s.q.push(int64(i)*1000, evStart, int32(i))
	}
	s.q.push(int64(cfg.Tick), evTick, -1)
	if cfg.DriftEvery > 0 {
		s.q.push(int64(cfg.DriftEvery), evDrift, -1)
	}
	if err := s.loop(); err != nil {
		return nil, err
	}
	s.finish()
	return s.out, nil
}

func (s *sim) loop() error {
	nextProgress := int64(time.Second)
	for s.q.len() > 0 && s.q.top().t <= s.end {
		e := s.q.pop()
		s.now = e.t
		switch e.kind {
		case evStart:
			s.start(s.clients[e.c])
		case evExec:
			s.exec(s.clients[e.c])
		case evCommit:
			s.commit(s.clients[e.c])
		case evTick:
			if err := s.tick(); err != nil {
				return err
			}
			s.q.push(s.now+int64(s.cfg.Tick), evTick, -1)
		case evWarm:
			s.warm = s.c
			for i := range s.busy {
				s.busy[i] = 0
				s.homeCnt[i] = 0
			}
		case evDrift:
			if d, ok := s.wl.(drifter); ok {
				if _, err := d.Advance(); err != nil {
					return err
				}
			}
			s.pol.drifted()
			s.q.push(s.now+int64(s.cfg.DriftEvery), evDrift, -1)
		}
		if s.cfg.Progress != nil && s.now >= nextProgress {
			fmt.Fprintf(s.cfg.Progress, "[%s %5.1fs virtual] committed %d  aborted %d  cohorts %d  migrations %d\n",
				s.cfg.Mode, float64(s.now)/1e9, s.c.committed, s.c.aborted, s.pol.cohorts(), s.migrations)
			nextProgress += int64(time.Second)
		}
	}
	return nil
}

// newTxn generates a client's next transaction; nil when its generator is
// exhausted.
func (s *sim) newTxn(c *client) *txnInfo {
	msg := c.gen.Next()
	if msg == nil {
		return nil
	}
	fp := s.wl.Footprint(msg)
	t := &txnInfo{msg: msg, kind: bench.TxnType(msg), home: s.rule.Home(msg), start: s.now}
	t.ta = s.typeAcc(t.kind)
	var insert []bool
	if s.tpcc != nil {
		fp.Writes, insert = s.tpcc.expand(msg, fp, c.rng)
	}
	t.writes = make([]access, 0, len(fp.Writes))
	for i, r := range fp.Writes {
		a := s.access(r)
		a.insert = insert != nil && insert[i]
		t.writes = append(t.writes, a)
	}
	t.reads = make([]access, 0, len(fp.Reads))
	for _, r := range fp.Reads {
		t.reads = append(t.reads, s.access(r))
	}
	return t
}

func (s *sim) access(r txn.Ref) access {
	a := access{ref: r, kg: s.rule.KeyGroup(r), part: s.rule.Partition(r)}
	if int(r.Table) < len(s.sizes) {
		a.size = s.sizes[r.Table]
	}
	a.key = kvrec.Mix64(uint64(r.Table)<<56 ^ r.Key)
	a.addr = (a.key >> 8) << 3
	if a.size == 0 {
		a.size = 64
	}
	return a
}

func (s *sim) start(c *client) {
	if c.cur == nil {
		if c.cur = s.newTxn(c); c.cur == nil {
			c.done = true
			return
		}
	}
	t := c.cur
	t.attempt++
	home := s.pol.route(t)
	if home < 0 || home >= s.cfg.CNs {
		home = s.staticNode(t.home)
	}
	c.home = home
	cpu := int64(s.costs.TxnCPU) + int64(s.costs.OpCPU)*int64(len(t.writes)+len(t.reads))
	st := max(s.now, s.cpuFree[home])
	s.cpuFree[home] = st + cpu
	s.busy[home] += cpu
	s.q.push(st+cpu, evExec, c.id)
}

// ownerOf returns the CN granting a's lock, −1 for MN CAS.
func (s *sim) ownerOf(a *access) int {
	if len(s.frozen) > 0 {
		if until, ok := s.frozen[a.kg]; ok && until > s.now {
			return -1
		}
	}
	return s.pol.owner(a)
}

func (s *sim) exec(c *client) {
	t := c.cur
	now := s.now
	after := now >= s.warmEnd
	issue := int64(s.costs.NIC.IssueCost)
	wr := 0 // work requests in the doorbell batch
	done := now
	localT := now
	var contacted [8]int
	nContacted := 0
	var rpcOwners []int
	conflict := false
	var locks, atomics uint64
	t.nLocal, t.nRPC, t.nMN, t.casKGs = 0, 0, 0, t.casKGs[:0]
	for i := range t.writes {
		a := &t.writes[i]
		if !a.insert {
			if e, ok := s.locks[a.key]; ok && e.holder != c.id {
				conflict = true
			}
		}
		o := s.ownerOf(a)
		switch {
		case o < 0:
			d := s.nic.Schedule(now+int64(wr)*issue, rdma.OpCompareAndSwap, a.addr, 8)
			wr++
			done = max(done, d)
			s.c.cas++
			atomics++
			if !conflict {
				s.c.mnCAS++
				t.nMN++
				t.casKGs = append(t.casKGs, a.kg)
			}
		case o == c.home:
			localT += int64(s.costs.LocalLock)
			if !conflict {
				s.c.local++
				t.nLocal++
			}
		default:
			seen := false
			for _, x := range contacted[:nContacted] {
				seen = seen || x == o
			}
			for _, x := range rpcOwners {
				seen = seen || x == o
			}
			if !seen {
				if nContacted < len(contacted) {
					contacted[nContacted] = o
					nContacted++
				} else {
					rpcOwners = append(rpcOwners, o)
				}
				half := int64(s.costs.OwnerRPC) / 2
				st := max(now+half, s.cpuFree[o])
				s.cpuFree[o] = st + int64(s.costs.RPCCPU)
				s.busy[o] += int64(s.costs.RPCCPU)
				done = max(done, st+int64(s.costs.RPCCPU)+half)
			}
			if !conflict {
				s.c.rpc++
				t.nRPC++
			}
		}
		if conflict {
			break
		}
		locks++
		if !a.insert {
			if _, ok := s.locks[a.key]; !ok {
				s.locks[a.key] = lockEntry{holder: c.id, kg: a.kg}
				c.held = append(c.held, a.key)
			}
		}
	}
	if !conflict {
		for i := range t.writes {
			if !t.writes[i].insert {
				done = max(done, s.nic.Schedule(now+int64(wr)*issue, rdma.OpRead, t.writes[i].addr, t.writes[i].size))
				wr++
				s.c.read++
			}
		}
		for i := range t.reads {
			done = max(done, s.nic.Schedule(now+int64(wr)*issue, rdma.OpRead, t.reads[i].addr, t.reads[i].size))
			wr++
			s.c.read++
		}
	}
	done = max(done, localT)
	if after {
		ta := t.ta
		ta.locks += locks
		ta.atomics += atomics
		if conflict {
			ta.aborted++
		}
	}
	if conflict {
		s.release(c)
		s.c.aborted++
		if t.attempt >= s.cfg.MaxAttempts {
			s.c.failed++
			s.nextTxn(c, done)
			return
		}
		delay := c.rng.Int64N(c.backoff) + 1
		c.backoff = min(2*c.backoff, int64(s.costs.BackoffMax))
		s.q.push(done+delay, evStart, c.id)
		return
	}
	// Validation reads the read set's versions again, then the commit writes
	// back the write set and releases MN locks with a WRITE each.
	val := done
	wr = 0
	for i := range t.reads {
		val = max(val, s.nic.Schedule(done+int64(wr)*issue, rdma.OpRead, t.reads[i].addr, 8))
		wr++
		s.c.read++
	}
	end := val
	wr = 0
	for i := range t.writes {
		end = max(end, s.nic.Schedule(val+int64(wr)*issue, rdma.OpWrite, t.writes[i].addr, t.writes[i].size))
		wr++
		s.c.write++
	}
	for _, r := range c.held {
		e := s.locks[r]
		e.release = end
		s.locks[r] = e
	}
	if after {
		t.ta.commitLocks += locks
	}
	s.q.push(end, evCommit, c.id)
}

func (s *sim) typeAcc(kind string) *typeAcc {
	ta := s.byType[kind]
	if ta == nil {
		ta = &typeAcc{}
		s.byType[kind] = ta
	}
	return ta
}

func (s *sim) release(c *client) {
	for _, r := range c.held {
		if e, ok := s.locks[r]; ok && e.holder == c.id {
			delete(s.locks, r)
		}
	}
	c.held = c.held[:0]
}

func (s *sim) commit(c *client) {
	t := c.cur
	s.release(c)
	s.c.committed++
	s.tickCnt[c.home]++
	if s.now >= s.warmEnd {
		s.lat.Record(uint64((s.now - t.start) / 1000))
		t.ta.committed++
		s.homeCnt[c.home]++
	}
	s.pol.committed(c.home, t)
	s.nextTxn(c, s.now)
}

// nextTxn ends c's transaction and schedules its next one.
func (s *sim) nextTxn(c *client, at int64) {
	c.cur = nil
	c.backoff = int64(s.costs.BackoffMin)
	if s.interval > 0 {
		c.next = max(c.next+s.interval, at)
		at = c.next
	}
	s.q.push(at, evStart, c.id)
}

// staticNode maps a partition value to its node under the rule's static
// fallback, the router's: TPC-C warehouse % N, otherwise rendezvous hashing.
func (s *sim) staticNode(part uint64) int {
	if s.tpcc != nil {
		return int(part % uint64(s.cfg.CNs))
	}
	if n, ok := s.staticMemo[part]; ok {
		return n
	}
	n := s.fallback(part)
	if len(s.staticMemo) < 1<<20 {
		s.staticMemo[part] = n
	}
	return n
}
