package main

import (
	"embed"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// The live dashboard (docs/dashboard.md): GET /dashboard is a page that
// polls GET /dashboard/state, a JSON document this file builds. The page
// and its assets (embedded below: no network access is needed to render
// it) carry no cluster data and are served without the bearer token, so
// that a browser can load the page and let the operator type the token;
// the state is protected like the rest of the API.
//
// The time series are sampled on the server, once per
// dashSamplePeriod, into a bounded ring: a page opened later still shows
// the last minutes, and any number of open pages costs the node nothing
// beyond encoding the state they poll. The planner's decisions are fetched
// by the same sampler, so viewers never reach the planner actor.

//go:embed dashboard
var dashboardFiles embed.FS

// Paths of the dashboard.
const (
	dashboardPath       = "/dashboard"
	dashboardStatePath  = "/dashboard/state"
	dashboardAssetsPath = "/dashboard/assets/"
)

// Bounds of the dashboard's sampler.
const (
	// dashSamplePeriod is the time between two samples: 1 s resolves a
	// migration round or a drift's first seconds, and costs one pass over
	// the node's counters per second.
	dashSamplePeriod = time.Second
	// dashMaxSamples bounds the ring of samples: 300 at 1 s is the last 5
	// minutes, about 30 KiB in memory and in each /dashboard/state answer.
	dashMaxSamples = 300
	// dashGridCells bounds the cells of the ownership grid: an OwnerMap
	// holds at most 1,024 cohorts (the planner's default cap) of up to 64
	// key groups, so a large map is shown at several key groups per cell;
	// 1,024 cells are about 40 KiB of JSON.
	dashGridCells = 1024
	// dashPlannerTimeout bounds the sampler's questions to a planner on
	// this node; a busy planner makes the dashboard lag a sample, never
	// stall it.
	dashPlannerTimeout = 300 * time.Millisecond
	// dashFrozenStuckAfter: a node that has held frozen cohorts for this
	// long without a break is past every phase deadline of the migration
	// protocol (the longest, an abort's, is 5 s by default; the watchdog
	// acts at it), so the dashboard marks its handoff as stuck.
	dashFrozenStuckAfter = 10 * time.Second
	// dashMaxFallback bounds the fallback table shown (partition value →
	// owner): 4,096 warehouses or partitions.
	dashMaxFallback = 4096
)

// dashSample is one point of the time series, over the interval since the
// previous sample. Rates are per second; ratios are null (NaN is not JSON)
// when their denominator was zero in the interval.
type dashSample struct {
	t            int64 // Unix milliseconds
	tps          float64
	abortsPerSec float64
	localHit     *float64 // local / (local + owner RPC + MN CAS) lock grants
	atomicPerTxn *float64 // MN CAS + FAA / committed
	ownerChanges int      // cohorts whose owner changed in the installed map
	migrations   *int     // migrations finished (only where the planner runs)
	owned        int
	frozen       int
}

// dashCounters are the cumulative counters a sample takes differences of.
type dashCounters struct {
	at                     time.Time
	committed, aborted     uint64
	local, ownerRPC, mnCAS uint64
	atomics                uint64
	migrations             uint64
	plannerOK              bool
	mapEpoch               uint64
	owners                 map[control.CohortID]int
	ownersOf               *control.OwnerMap
}

// dashboard samples the node and serves the page and its state.
type dashboard struct {
	s      *mgmtServer
	period time.Duration
	stop   chan struct{}
	done   chan struct{}

	// decisions returns the decision log of the planner this node hosts
	// (false: it hosts none). Set before the server is attached.
	decisions func(time.Duration) (planner.Decisions, bool)

	mu      sync.Mutex
	samples []dashSample // ring: the newest dashMaxSamples
	next    int          // where the next sample goes once full
	taken   uint64       // samples ever taken
	prev    dashCounters
	// status and reason are /readyz's verdict at the last sample
	// ("starting" before the first): a page's poll never waits on the
	// planner actor, which readiness may ask.
	status, reason string
	owned, frozen  int       // this node's cohorts at the last sample
	frozenSince    time.Time // start of the current run of samples with frozen cohorts
	plan           *dashPlanner
	gridOf         *control.OwnerMap // the map grid was built from
	grid           dashGrid
}

func newDashboard(s *mgmtServer, period time.Duration) *dashboard {
	if period <= 0 {
		period = dashSamplePeriod
	}
	return &dashboard{s: s, period: period, stop: make(chan struct{}), done: make(chan struct{}), status: "starting"}
}

// run samples every period until close.
func (d *dashboard) run() {
	defer close(d.done)
	t := time.NewTicker(d.period)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			if d.s.attached.Load() {
				d.sample(now)
			}
		}
	}
}

// close stops the sampler (once).
func (d *dashboard) close() {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	<-d.done
}

// sample reads the node's counters and appends a sample. Only the sampler
// goroutine calls it (and tests).
func (d *dashboard) sample(now time.Time) {
	node := d.s.node
	var c dashCounters
	c.at = now
	st := node.TxnStats()
	for _, byOutcome := range st.ByKind {
		c.committed += byOutcome[messages.TxnOutcome_TXN_OUTCOME_COMMITTED]
		c.aborted += byOutcome[messages.TxnOutcome_TXN_OUTCOME_ABORTED]
	}
	k := st.Counters
	c.local, c.ownerRPC, c.mnCAS = k.LocksLocal, k.LocksOwnerRPC, k.LocksMNCAS
	// MN atomics as aura bench counts them (atomic_per_txn): the CAS and
	// FAA the transactions' lock paths and cleanup issued, every attempt
	// included.
	c.atomics = k.MNCAS + k.MNFAA
	m := node.OwnerMap()
	c.mapEpoch, c.ownersOf = m.Epoch, m
	owned, frozen := node.CohortCounts()
	_, why := d.s.readiness()
	status := "ready"
	if why != "" {
		status = "not-ready"
	}

	var plan *dashPlanner
	if d.decisions != nil {
		if ds, ok := d.decisions(dashPlannerTimeout); ok {
			plan = &dashPlanner{Decisions: ds.Decisions, Migrations: ds.Migrations, TotalDecisions: ds.TotalDecisions,
				TotalMigrations: ds.TotalMigrations, RoundActive: ds.Active}
			// Every finished migration is recorded once in the log.
			c.migrations, c.plannerOK = ds.TotalMigrations, true
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.prev
	// The owners of the previous sample's map, to count changes: built
	// once per installed map (maps are immutable once installed).
	if p.ownersOf == m {
		c.owners = p.owners
	} else {
		c.owners = make(map[control.CohortID]int, len(m.Cohorts))
		for _, pl := range m.Cohorts {
			c.owners[pl.ID] = pl.Owner
		}
	}
	d.status, d.reason, d.owned, d.frozen = status, why, owned, frozen
	s := dashSample{t: now.UnixMilli(), owned: owned, frozen: frozen}
	if !p.at.IsZero() {
		dt := now.Sub(p.at).Seconds()
		if dt <= 0 {
			dt = d.period.Seconds()
		}
		dc := sub(c.committed, p.committed)
		s.tps = float64(dc) / dt
		s.abortsPerSec = float64(sub(c.aborted, p.aborted)) / dt
		dl, dr, dm := sub(c.local, p.local), sub(c.ownerRPC, p.ownerRPC), sub(c.mnCAS, p.mnCAS)
		if all := dl + dr + dm; all > 0 {
			v := float64(dl) / float64(all)
			s.localHit = &v
		}
		if dc > 0 {
			v := float64(sub(c.atomics, p.atomics)) / float64(dc)
			s.atomicPerTxn = &v
		}
		if c.plannerOK && p.plannerOK {
			n := int(sub(c.migrations, p.migrations))
			s.migrations = &n
		}
		if p.ownersOf != m {
			s.ownerChanges = ownerChanges(p.owners, c.owners)
		}
	}
	d.prev = c
	if frozen > 0 {
		if d.frozenSince.IsZero() {
			d.frozenSince = now
		}
	} else {
		d.frozenSince = time.Time{}
	}
	if plan != nil {
		for _, r := range plan.Migrations {
			if r.Stuck {
				plan.Stuck++
			}
		}
	}
	d.plan = plan
	if len(d.samples) < dashMaxSamples {
		d.samples = append(d.samples, s)
	} else {
		d.samples[d.next] = s
		d.next = (d.next + 1) % dashMaxSamples
	}
	d.taken++
}

// sub is a − b for counters, 0 if a counter went backwards (a planner
// instance restarted its counts).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// ownerChanges counts the cohorts installed, evicted or moved between two
// maps' owner tables.
func ownerChanges(before, after map[control.CohortID]int) int {
	n := 0
	for id, o := range after {
		if b, ok := before[id]; !ok || b != o {
			n++
		}
	}
	for id := range before {
		if _, ok := after[id]; !ok {
			n++
		}
	}
	return n
}

// dashState is the /dashboard/state document (docs/dashboard.md).
type dashState struct {
	Node      string `json:"node"`
	NowUnixMs int64  `json:"now_unix_ms"`
	// Status is "ready", "not-ready", "leaving" or "starting"; Reason says
	// why it is not ready (as /readyz).
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	SamplesTaken   uint64 `json:"samples_taken"`
	SamplePeriodMs int64  `json:"sample_period_ms"`
	MaxSamples     int    `json:"max_samples"`

	MembershipEpoch uint64       `json:"membership_epoch"`
	Members         []dashMember `json:"members"`
	// PlannerNode is where the planner runs (cluster.PlannerNode of this
	// node's view; "" if no member may host it).
	PlannerNode string       `json:"planner_node"`
	Planner     *dashPlanner `json:"planner"` // null unless this node hosts it
	Local       dashLocal    `json:"local"`
	OwnerMap    dashGrid     `json:"ownermap"`
	Series      dashSeries   `json:"series"`
}

type dashMember struct {
	Name       string   `json:"name"`
	GossipAddr string   `json:"gossip_addr"`
	RemoteAddr string   `json:"remote_addr"`
	Roles      []string `json:"roles"`
	Planner    bool     `json:"planner"` // hosts the planner
	Leaving    bool     `json:"leaving"`
	Self       bool     `json:"self"`
	// Slot is the member's owner index in the installed map's roster (−1:
	// none); Cohorts and KeyGroups what that map gives it.
	Slot      int `json:"slot"`
	Cohorts   int `json:"cohorts"`
	KeyGroups int `json:"key_groups"`
}

// dashPlanner is the hosted planner's recent history.
type dashPlanner struct {
	Decisions       []planner.Decision        `json:"decisions"`
	Migrations      []planner.MigrationRecord `json:"migrations"`
	TotalDecisions  uint64                    `json:"total_decisions"`
	TotalMigrations uint64                    `json:"total_migrations"`
	RoundActive     bool                      `json:"round_active"`
	// Stuck counts the stuck migrations among Migrations.
	Stuck int `json:"stuck"`
}

// dashLocal is this node's own cohort state.
type dashLocal struct {
	Owned  int `json:"owned"`
	Frozen int `json:"frozen"`
	// FrozenForS is how long the node has held frozen cohorts without a
	// break, in seconds (0: none frozen); Stuck when that is past
	// dashFrozenStuckAfter.
	FrozenForS float64 `json:"frozen_for_s"`
	Stuck      bool    `json:"stuck"`
}

// dashGrid is the installed OwnerMap: its roster, and its key groups in
// ascending order cut into at most dashGridCells cells of PerCell key
// groups each.
type dashGrid struct {
	Epoch     uint64     `json:"epoch"`
	Roster    []string   `json:"roster"`
	Cohorts   int        `json:"cohorts"`
	KeyGroups int        `json:"key_groups"`
	PerCell   int        `json:"per_cell"`
	Cells     []dashCell `json:"cells"`
	// Fallback is the map's fallback table (partition value → owner
	// index, −1 unowned), at most dashMaxFallback entries.
	Fallback []int `json:"fallback"`
}

// dashCell is a run of PerCell key groups: the first one, the owner index
// most of them have and the cohort of the first. Ids are strings: they
// are 64-bit, and JSON numbers lose precision above 2^53.
type dashCell struct {
	KG     control.KeyGroup `json:"kg,string"`
	Owner  int              `json:"o"`
	Cohort control.CohortID `json:"c,string"`
	Mixed  bool             `json:"mixed,omitempty"` // the cell's key groups have several owners
}

// dashSeries are the samples as columns (oldest first), the layout the
// page's chart library takes.
type dashSeries struct {
	T            []int64    `json:"t"` // Unix milliseconds
	TPS          []float64  `json:"tps"`
	AbortsPerSec []float64  `json:"aborts_per_s"`
	LocalHit     []*float64 `json:"local_hit"`
	AtomicPerTxn []*float64 `json:"atomic_per_txn"`
	OwnerChanges []int      `json:"owner_changes"`
	Migrations   []*int     `json:"migrations"`
	Owned        []int      `json:"owned"`
	Frozen       []int      `json:"frozen"`
}

// gridFor returns the grid of m with roster (cached per installed map).
// d.mu is held.
func (d *dashboard) gridFor(m *control.OwnerMap, roster []string) dashGrid {
	if d.gridOf == m && slices.Equal(d.grid.Roster, roster) {
		return d.grid
	}
	type kgOwner struct {
		kg     control.KeyGroup
		owner  int
		cohort control.CohortID
	}
	var all []kgOwner
	for _, p := range m.Cohorts {
		for _, kg := range p.KeyGroups {
			all = append(all, kgOwner{kg, p.Owner, p.ID})
		}
	}
	slices.SortFunc(all, func(a, b kgOwner) int {
		switch {
		case a.kg < b.kg:
			return -1
		case a.kg > b.kg:
			return 1
		}
		return 0
	})
	g := dashGrid{Epoch: m.Epoch, Roster: slices.Clone(roster), Cohorts: len(m.Cohorts), KeyGroups: len(all),
		PerCell: max(1, (len(all)+dashGridCells-1)/dashGridCells), Cells: []dashCell{}}
	votes := map[int]int{}
	for i := 0; i < len(all); i += g.PerCell {
		run := all[i:min(i+g.PerCell, len(all))]
		clear(votes)
		best := run[0].owner
		for _, x := range run {
			votes[x.owner]++
			if votes[x.owner] > votes[best] || (votes[x.owner] == votes[best] && x.owner < best) {
				best = x.owner
			}
		}
		g.Cells = append(g.Cells, dashCell{KG: run[0].kg, Owner: best, Cohort: run[0].cohort, Mixed: len(votes) > 1})
	}
	g.Fallback = make([]int, 0, min(len(m.Fallback), dashMaxFallback))
	for _, o := range m.Fallback[:min(len(m.Fallback), dashMaxFallback)] {
		if o == control.Unowned {
			g.Fallback = append(g.Fallback, -1)
		} else {
			g.Fallback = append(g.Fallback, int(o))
		}
	}
	d.gridOf, d.grid = m, g
	return g
}

// state builds the /dashboard/state document.
func (d *dashboard) state(now time.Time) dashState {
	s := d.s
	st := dashState{NowUnixMs: now.UnixMilli(), SamplePeriodMs: d.period.Milliseconds(), MaxSamples: dashMaxSamples,
		Members: []dashMember{}}
	node := s.node
	st.Node = node.Name()
	m, roster := node.InstalledMap()
	members, epoch := s.mem.Snapshot()
	st.MembershipEpoch = epoch
	st.PlannerNode = cluster.PlannerNode(members, s.order)
	perSlot := map[int][2]int{}
	for _, p := range m.Cohorts {
		c := perSlot[p.Owner]
		perSlot[p.Owner] = [2]int{c[0] + 1, c[1] + len(p.KeyGroups)}
	}
	for _, mb := range members {
		// Snapshot's members are copies, sorted by name.
		dm := dashMember{Name: mb.Name, GossipAddr: mb.Addr, RemoteAddr: mb.Meta.RemoteAddr, Roles: mb.Meta.Roles,
			Planner: mb.Name == st.PlannerNode, Leaving: mb.HasRole(cluster.RoleLeaving), Self: mb.Name == st.Node,
			Slot: slices.Index(roster, mb.Name)}
		if m.Epoch > 0 && dm.Slot >= 0 {
			c := perSlot[dm.Slot]
			dm.Cohorts, dm.KeyGroups = c[0], c[1]
		} else {
			dm.Slot = -1
		}
		st.Members = append(st.Members, dm)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	st.Status, st.Reason = d.status, d.reason
	if s.leaving.Load() {
		st.Status, st.Reason = "leaving", "node is shutting down"
	}
	st.SamplesTaken = d.taken
	st.OwnerMap = d.gridFor(m, roster)
	st.Planner = d.plan
	st.Local.Owned, st.Local.Frozen = d.owned, d.frozen
	if !d.frozenSince.IsZero() && st.Local.Frozen > 0 {
		st.Local.FrozenForS = now.Sub(d.frozenSince).Seconds()
		st.Local.Stuck = now.Sub(d.frozenSince) >= dashFrozenStuckAfter
	}
	n := len(d.samples)
	ser := dashSeries{T: make([]int64, 0, n), TPS: make([]float64, 0, n), AbortsPerSec: make([]float64, 0, n),
		LocalHit: make([]*float64, 0, n), AtomicPerTxn: make([]*float64, 0, n), OwnerChanges: make([]int, 0, n),
		Migrations: make([]*int, 0, n), Owned: make([]int, 0, n), Frozen: make([]int, 0, n)}
	for i := range n {
		x := d.samples[(d.next+i)%n]
		ser.T = append(ser.T, x.t)
		ser.TPS = append(ser.TPS, x.tps)
		ser.AbortsPerSec = append(ser.AbortsPerSec, x.abortsPerSec)
		ser.LocalHit = append(ser.LocalHit, x.localHit)
		ser.AtomicPerTxn = append(ser.AtomicPerTxn, x.atomicPerTxn)
		ser.OwnerChanges = append(ser.OwnerChanges, x.ownerChanges)
		ser.Migrations = append(ser.Migrations, x.migrations)
		ser.Owned = append(ser.Owned, x.owned)
		ser.Frozen = append(ser.Frozen, x.frozen)
	}
	st.Series = ser
	return st
}

// serveState answers /dashboard/state.
func (d *dashboard) serveState(w http.ResponseWriter, _ *http.Request) {
	st := d.state(time.Now())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}

// serveDashboardPage answers /dashboard (the page) and /dashboard/assets/NAME.
func serveDashboardPage(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != dashboardPath && r.URL.Path != dashboardPath+"/" {
		name = strings.TrimPrefix(r.URL.Path, dashboardAssetsPath)
		if name == "" || strings.Contains(name, "/") || name == "index.html" {
			writeAPIError(w, http.StatusNotFound, "NotFound", "no such dashboard asset: "+r.URL.Path)
			return
		}
	}
	b, err := fs.ReadFile(dashboardFiles, path.Join("dashboard", name))
	if err != nil {
		writeAPIError(w, http.StatusNotFound, "NotFound", "no such dashboard asset: "+r.URL.Path)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	// The assets are part of the binary: a page and its scripts always
	// match the node that serves them, and nothing is loaded from
	// elsewhere (the policy forbids it, so a page that tried would fail
	// here first, as it would offline).
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(b)
}

// decisions returns the decision log of the planner actor when this node
// hosts it, waiting at most timeout (for the dashboard).
func (p *plannerHost) decisions(timeout time.Duration) (planner.Decisions, bool) {
	return askPlanner[planner.Decisions](p, planner.GetDecisions{}, timeout)
}
