package sim

import (
	"fmt"

	"github.com/aura-runtime/aura/bench"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/control/cohortgen"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/control/router"
	"github.com/aura-runtime/aura/workload/tenant"
)

// policy is a mode: where transactions run, who grants each lock, and what
// the planner does at a tick.
type policy interface {
	// route returns t's home CN.
	route(t *txnInfo) int
	// owner returns the CN granting a's lock, −1 for MN CAS.
	owner(a *access) int
	// committed reports a transaction committed on home.
	committed(home int, t *txnInfo)
	// tick runs the planner at virtual time now and returns the cohorts
	// whose ownership moved.
	tick(now int64) ([]migration, error)
	// drifted reports that the workload drifted.
	drifted()
	// cohorts is the number of cohorts currently placed.
	cohorts() int
	// manifest describes the current OwnerMap.
	manifest() bench.Manifest
}

func newPolicy(s *sim) (policy, error) {
	switch s.cfg.Mode {
	case "mn-only":
		return &mnOnly{s: s}, nil
	case "static":
		return newStatic(s), nil
	case "hash":
		return &hashed{base: base{s}, memo: map[uint64]int{}}, nil
	case "oracle":
		return newOracle(s)
	case "aura":
		return newAura(s)
	}
	return nil, fmt.Errorf("sim: unknown mode %q", s.cfg.Mode)
}

// base is the common part: static routing, no planner.
type base struct{ s *sim }

func (b base) route(t *txnInfo) int          { return b.s.staticNode(t.home) }
func (base) committed(int, *txnInfo)         {}
func (base) tick(int64) ([]migration, error) { return nil, nil }
func (base) drifted()                        {}
func (base) cohorts() int                    { return 0 }
func (base) manifest() bench.Manifest        { return bench.Manifest{} }

type mnOnly struct{ s *sim }

func (m *mnOnly) route(t *txnInfo) int          { return m.s.staticNode(t.home) }
func (*mnOnly) owner(*access) int               { return -1 }
func (*mnOnly) committed(int, *txnInfo)         {}
func (*mnOnly) tick(int64) ([]migration, error) { return nil, nil }
func (*mnOnly) drifted()                        {}
func (*mnOnly) cohorts() int                    { return 0 }
func (*mnOnly) manifest() bench.Manifest        { return bench.Manifest{} }

// static: every record's lock is owned by its partition's node.
type static struct {
	base
	parts map[uint64]bool
}

func newStatic(s *sim) *static { return &static{base: base{s}, parts: map[uint64]bool{}} }

func (p *static) owner(a *access) int {
	if len(p.parts) < 1<<20 {
		p.parts[a.part] = true
	}
	return p.s.staticNode(a.part)
}

func (p *static) cohorts() int {
	if p.s.tpcc != nil {
		return p.s.tpcc.wl.Config().Warehouses
	}
	return len(p.parts)
}

func (p *static) manifest() bench.Manifest { return staticManifest(p.s) }

// staticManifest is the v1 manifest of the static fallback table (TPC-C's
// warehouse → node); other workloads route by rendezvous hashing and publish
// nothing.
func staticManifest(s *sim) bench.Manifest {
	if s.tpcc == nil {
		return bench.Manifest{}
	}
	m := &control.OwnerMap{Epoch: 1, Fallback: fallbackTable(s)}
	return bench.Manifest{Epoch: 1, Bytes: manifestSize(m)}
}

// fallbackTable is the OwnerMap's fallback section: for TPC-C one owner per
// warehouse (index w % len = w's node), otherwise empty.
func fallbackTable(s *sim) []uint8 {
	if s.tpcc == nil {
		return nil
	}
	fb := make([]uint8, s.tpcc.warehouses()+1)
	for w := range fb {
		fb[w] = uint8(s.staticNode(uint64(w)))
	}
	return fb
}

// hashed: one key group, one cohort, placed by rendezvous hashing.
type hashed struct {
	base
	memo map[uint64]int
	rv   router.FallbackFunc
}

func (h *hashed) owner(a *access) int {
	if n, ok := h.memo[a.kg]; ok {
		return n
	}
	n := h.place(a.kg)
	h.memo[a.kg] = n
	return n
}

func (h *hashed) place(kg uint64) int {
	if h.rv == nil {
		h.rv = router.RendezvousFallback(h.s.cfg.CNs)
	}
	return h.rv(kg)
}

func (h *hashed) cohorts() int { return len(h.memo) }

// oracle: an offline assignment from the whole workload's knowledge.
type oracle struct {
	base
	tenant *tenant.Workload
	kgNode map[uint64]int
	err    error
	groups int
	epoch  uint64
	bytes  uint64
}

func newOracle(s *sim) (*oracle, error) {
	o := &oracle{base: base{s}}
	if tw, ok := s.wl.(*tenant.Workload); ok {
		o.tenant = tw
		if err := o.assign(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// assign places the tenant workload's ground-truth groups (one cohort per
// tenant, weighted by the tenant's share of transactions) on the nodes with
// ownership.Oracle: balanced under the planner's budget. Routing then follows
// the owners, so no home weights are given.
func (o *oracle) assign() error {
	groups := o.tenant.Oracle()
	weights := o.tenant.TenantWeights()
	in := ownership.OracleInput{Nodes: o.s.cfg.CNs, Communities: groups, MaxGroups: 1024}
	for t, g := range groups {
		for _, kg := range g {
			in.KeyGroups = append(in.KeyGroups, ownership.OracleKeyGroup{KG: kg, W: weights[t] / float64(len(g))})
		}
	}
	res, err := ownership.Oracle(in)
	if err != nil {
		return fmt.Errorf("sim: oracle: %w", err)
	}
	o.kgNode = res.Owner
	m := &control.OwnerMap{Epoch: o.epoch + 1}
	for i, g := range res.Groups {
		if g.Owner >= 0 {
			m.Cohorts = append(m.Cohorts, control.Placement{Cohort: control.Cohort{ID: uint64(i) + 1, KeyGroups: g.KeyGroups}, Owner: g.Owner})
		}
	}
	o.groups = len(m.Cohorts)
	o.epoch++
	o.bytes = manifestSize(m)
	return nil
}

func (o *oracle) owner(a *access) int {
	if o.kgNode != nil {
		if n, ok := o.kgNode[a.kg]; ok {
			return n
		}
		return -1
	}
	return o.s.staticNode(a.part)
}

// route sends t to the node owning most of its write set (ties: the static
// home if it is among them, else the lowest node).
func (o *oracle) route(t *txnInfo) int { return routeByWriteSet(o.s, t, o.owner) }

func (o *oracle) drifted() {
	if o.tenant != nil {
		o.err = o.assign()
	}
}

func (o *oracle) tick(int64) ([]migration, error) { return nil, o.err }

func (o *oracle) cohorts() int {
	if o.tenant != nil {
		return o.groups
	}
	if o.s.tpcc != nil {
		return o.s.tpcc.warehouses()
	}
	return 0
}

func (o *oracle) manifest() bench.Manifest {
	if o.tenant != nil {
		return bench.Manifest{Epoch: o.epoch, Bytes: o.bytes}
	}
	return staticManifest(o.s)
}

// routeByWriteSet returns the node owning most of t's write records.
func routeByWriteSet(s *sim, t *txnInfo, owner func(*access) int) int {
	home := s.staticNode(t.home)
	var cnt [256]int32
	best, bestN := home, int32(0)
	for i := range t.writes {
		o := owner(&t.writes[i])
		if o < 0 {
			continue
		}
		cnt[o]++
		if cnt[o] > bestN || (cnt[o] == bestN && o == home) {
			best, bestN = o, cnt[o]
		}
	}
	if bestN > 0 && cnt[home] == bestN {
		return home
	}
	return best
}

// naiveGenerator adapts cohortgen's Naive (the v25 generator) for
// --lever-b naive.
type naiveGenerator struct{ gen *cohortgen.Naive }

func (g naiveGenerator) step(_ uint64, graph *accessgraph.Graph) ([]control.Cohort, error) {
	return g.gen.Step(graph), nil
}
