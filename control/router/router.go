package router

import (
	"errors"
	"fmt"
	"math"

	"github.com/aura-runtime/aura/control"
)

// Errors. Match them with errors.Is.
var (
	// ErrStaleEpoch: Install was given a map older than the installed one
	// (the error is a *StaleEpochError).
	ErrStaleEpoch = errors.New("router: stale epoch")
	// ErrInvalidMap: Install was given a map it cannot route by (an owner
	// outside [0, Nodes), a cohort listed twice, a key group in two cohorts,
	// unsorted key groups, a fallback entry naming no node of the cluster).
	ErrInvalidMap = errors.New("router: invalid OwnerMap")
	// ErrUnknownCohort: SetWeights named a cohort the installed map lacks.
	ErrUnknownCohort = errors.New("router: cohort not in the installed OwnerMap")
	// ErrBadWeight: SetWeights was given a negative or non-finite weight.
	ErrBadWeight = errors.New("router: bad weight")
)

// StaleEpochError reports an Install of an OwnerMap older than the installed
// one. The caller keeps routing by the installed map (SPEC invariant I4:
// epochs only grow).
type StaleEpochError struct {
	// Installed is the epoch in force; Got the refused map's.
	Installed, Got uint64
}

func (e *StaleEpochError) Error() string {
	return fmt.Sprintf("router: stale epoch: OwnerMap epoch %d is older than the installed epoch %d", e.Got, e.Installed)
}

// Is makes errors.Is(err, ErrStaleEpoch) true.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// Layer says which routing layer decided.
type Layer uint8

const (
	// Fallback: no key group of the transaction was owned; the static
	// fallback chose the node.
	Fallback Layer = iota
	// Overlay: the cohort overlay scored the nodes and chose the best.
	Overlay
)

func (l Layer) String() string {
	switch l {
	case Fallback:
		return "fallback"
	case Overlay:
		return "overlay"
	}
	return fmt.Sprintf("Layer(%d)", uint8(l))
}

// Decision is where a transaction goes and why.
type Decision struct {
	// Node is the chosen home node.
	Node int
	// Layer is the layer that chose it.
	Layer Layer
	// FallbackNode is the node the fallback layer picks for the
	// transaction's partition, whether or not it decided; FromTable says it
	// came from the installed map's fallback table, not Config.Fallback.
	FallbackNode int
	FromTable    bool
	// Score is Score(T, Node) = Writes + Reads − Queue.
	Score float64
	// Writes is Σ A(c) over the write key groups Node owns; Reads is β·Σ R(c)
	// over the read key groups Node owns; Queue is Queue(Node).
	Writes, Reads, Queue float64
	// OwnedWrites counts the write key group entries owned by any node, and
	// LocalWrites those owned by Node: the locks the transaction can take
	// without the network if it runs there.
	OwnedWrites, LocalWrites int
	// OwnedReads counts the read key group entries owned by any node; reads
	// are looked up only when β > 0, so it is 0 otherwise.
	OwnedReads int
}

// cohortSlot is what the router keeps of an installed cohort.
type cohortSlot struct {
	id    control.CohortID
	owner int
	a, r  float64
	// weighted: SetWeights set a and r (they survive reinstalls).
	weighted bool
}

// Router is the AffinityRouter. See the package doc.
type Router struct {
	cfg       Config
	fallback  FallbackFunc
	installed bool
	epoch     uint64
	table     []uint8 // the installed map's fallback table
	ix        index
	cohorts   []cohortSlot
	slotOf    map[control.CohortID]uint32
}

// New returns a router with no OwnerMap installed: it routes everything by
// the fallback until Install. It panics if cfg.Validate fails (a programming
// error; call Validate first to handle it).
func New(cfg Config) *Router {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	r := &Router{cfg: cfg, fallback: cfg.Fallback}
	if r.fallback == nil {
		r.fallback = ModuloFallback(cfg.Nodes)
	}
	return r
}

// Config returns the router's configuration.
func (r *Router) Config() Config { return r.cfg }

// Epoch returns the installed map's epoch, and whether one is installed.
func (r *Router) Epoch() (uint64, bool) { return r.epoch, r.installed }

// Cohorts returns the number of installed cohorts.
func (r *Router) Cohorts() int { return len(r.cohorts) }

// KeyGroups returns the number of installed (owned) key groups.
func (r *Router) KeyGroups() int { return r.ix.n }

// Install makes m the map the router routes by. It refuses an older epoch
// than the installed one (*StaleEpochError) and a map it cannot route by
// (ErrInvalidMap), leaving the router unchanged; an equal epoch is a no-op
// (the first Install accepts any epoch). Weights set with SetWeights carry
// over to the cohorts of m with the same id and are dropped for the others.
// The router copies what it needs: m may be modified afterwards.
func (r *Router) Install(m *control.OwnerMap) error {
	if m == nil {
		return fmt.Errorf("%w: nil", ErrInvalidMap)
	}
	if r.installed {
		if m.Epoch < r.epoch {
			return &StaleEpochError{Installed: r.epoch, Got: m.Epoch}
		}
		if m.Epoch == r.epoch {
			return nil
		}
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: epoch %d: %s", ErrInvalidMap, m.Epoch, fmt.Sprintf(format, args...))
	}
	for i, o := range m.Fallback {
		if o != control.Unowned && int(o) >= r.cfg.Nodes {
			return invalid("fallback entry %d names node %d of a %d-node cluster", i, o, r.cfg.Nodes)
		}
	}
	total := 0
	for _, p := range m.Cohorts {
		total += len(p.KeyGroups)
	}
	if len(m.Cohorts) >= math.MaxUint32 {
		return invalid("%d cohorts", len(m.Cohorts))
	}
	ix := newIndex(total)
	cohorts := make([]cohortSlot, len(m.Cohorts))
	slotOf := make(map[control.CohortID]uint32, len(m.Cohorts))
	for i, p := range m.Cohorts {
		if p.Owner < 0 || p.Owner >= r.cfg.Nodes {
			return invalid("cohort %d: owner %d outside [0, %d)", p.ID, p.Owner, r.cfg.Nodes)
		}
		if _, dup := slotOf[p.ID]; dup {
			return invalid("cohort %d listed twice", p.ID)
		}
		slotOf[p.ID] = uint32(i)
		c := cohortSlot{id: p.ID, owner: p.Owner, a: r.cfg.WriteWeight, r: r.cfg.ReadWeight}
		if old, ok := r.slotOf[p.ID]; ok && r.cohorts[old].weighted {
			o := r.cohorts[old]
			c.a, c.r, c.weighted = o.a, o.r, true
		}
		cohorts[i] = c
		for j, kg := range p.KeyGroups {
			if j > 0 && kg <= p.KeyGroups[j-1] {
				return invalid("cohort %d: key groups not sorted and distinct at %d", p.ID, j)
			}
			if !ix.insert(kg, uint32(i), uint32(p.Owner)) {
				return invalid("key group %d in cohort %d and another", kg, p.ID)
			}
		}
	}
	r.installed, r.epoch = true, m.Epoch
	r.table = append(r.table[:0:0], m.Fallback...)
	r.ix, r.cohorts, r.slotOf = ix, cohorts, slotOf
	return nil
}

// OwnerOfKeyGroup returns kg's cohort and that cohort's owner, ok false when
// kg is in no installed cohort (it follows the fallback).
func (r *Router) OwnerOfKeyGroup(kg control.KeyGroup) (cohort control.CohortID, owner int, ok bool) {
	ref, o, ok := r.ix.find(kg)
	if !ok {
		return 0, 0, false
	}
	return r.cohorts[ref].id, int(o), true
}

// SetWeights sets A(c) = a and R(c) = rw for installed cohort c (for
// example, the planner's atomic cost of its key groups). They stay until c
// leaves the installed map. Weights must be finite and non-negative.
func (r *Router) SetWeights(c control.CohortID, a, rw float64) error {
	if !finite(a) || !finite(rw) || a < 0 || rw < 0 {
		return fmt.Errorf("%w: cohort %d: A %v, R %v must be finite and non-negative", ErrBadWeight, c, a, rw)
	}
	i, ok := r.slotOf[c]
	if !ok {
		return fmt.Errorf("%w: cohort %d at epoch %d", ErrUnknownCohort, c, r.epoch)
	}
	s := &r.cohorts[i]
	s.a, s.r, s.weighted = a, rw, true
	return nil
}

// Weights returns A(c) and R(c) for installed cohort c.
func (r *Router) Weights(c control.CohortID) (a, rw float64, ok bool) {
	i, ok := r.slotOf[c]
	if !ok {
		return 0, 0, false
	}
	return r.cohorts[i].a, r.cohorts[i].r, true
}

// FallbackNode returns the fallback layer's node for partition value home,
// and whether it came from the installed map's fallback table.
func (r *Router) FallbackNode(home uint64) (node int, fromTable bool) {
	if n := len(r.table); n > 0 {
		if o := r.table[home%uint64(n)]; o != control.Unowned {
			return int(o), true
		}
	}
	node = r.fallback(home)
	if node < 0 || node >= r.cfg.Nodes {
		node = int(home % uint64(r.cfg.Nodes))
	}
	return node, false
}

// acc accumulates one node's score terms.
type acc struct {
	writes, reads float64
	local         int
}

// denseNodes is the cluster size up to which tally indexes nodes directly.
const denseNodes = 16

// tally accumulates the overlay's terms per owner node: in an array indexed
// by node when the cluster has at most denseNodes nodes (the common case:
// no search), else in a list of the owners seen, inline for the first
// denseNodes of them and in a slice beyond (allocating only then). It holds
// no pointer into itself, so it stays on the stack.
type tally struct {
	sparse      bool
	dense       [denseNodes]acc
	nodes       [denseNodes]int // sparse: the owners of dense[:n]
	n           int
	more        []acc
	moreNodes   []int
	ownedWrites int
	ownedReads  int
}

// find returns node's terms, or nil if it owns nothing the transaction
// touches.
func (t *tally) find(node int) *acc {
	if !t.sparse {
		return &t.dense[node]
	}
	for i := range t.n {
		if t.nodes[i] == node {
			return &t.dense[i]
		}
	}
	for i, n := range t.moreNodes {
		if n == node {
			return &t.more[i]
		}
	}
	return nil
}

func (t *tally) get(node int) *acc {
	if a := t.find(node); a != nil {
		return a
	}
	if t.n < denseNodes {
		t.nodes[t.n] = node
		t.n++
		return &t.dense[t.n-1]
	}
	t.more = append(t.more, acc{})
	t.moreNodes = append(t.moreNodes, node)
	return &t.more[len(t.more)-1]
}

func (r *Router) count(t *tally, writes, reads []control.KeyGroup) {
	t.sparse = r.cfg.Nodes > denseNodes
	if r.ix.n == 0 {
		return
	}
	var hits [batch]hit
	for len(writes) > 0 {
		chunk := writes[:min(len(writes), batch)]
		writes = writes[len(chunk):]
		r.ix.findMany(chunk, &hits)
		for _, h := range hits[:len(chunk)] {
			if h.ok {
				a := t.get(int(h.owner))
				a.writes += r.cohorts[h.ref].a
				a.local++
				t.ownedWrites++
			}
		}
	}
	if r.cfg.Beta == 0 {
		return
	}
	for len(reads) > 0 {
		chunk := reads[:min(len(reads), batch)]
		reads = reads[len(chunk):]
		r.ix.findMany(chunk, &hits)
		for _, h := range hits[:len(chunk)] {
			if h.ok {
				t.get(int(h.owner)).reads += r.cohorts[h.ref].r
				t.ownedReads++
			}
		}
	}
}

func queueOf(queue []float64, i int) float64 {
	if i < len(queue) {
		return queue[i]
	}
	return 0
}

// Route chooses the home node of a transaction that writes key groups
// writes and reads key groups reads (each entry counts: pass one per lock to
// weigh by locks, or deduplicated key groups), whose partition value is home,
// given each node's queue penalty (queue[i] = Queue(i), in score units;
// nil means none, missing entries are 0 and extra ones are ignored; a NaN
// entry never wins). See the package doc for the layers and the tie rule.
func (r *Router) Route(writes, reads []control.KeyGroup, home uint64, queue []float64) Decision {
	var t tally
	r.count(&t, writes, reads)
	fb, fromTable := r.FallbackNode(home)
	d := Decision{FallbackNode: fb, FromTable: fromTable, OwnedWrites: t.ownedWrites, OwnedReads: t.ownedReads}
	if t.ownedWrites == 0 && t.ownedReads == 0 {
		d.Node, d.Layer = fb, Fallback
		d.Queue = queueOf(queue, fb)
		d.Score = 0 - d.Queue // not -d.Queue: no negative zero
		return d
	}
	d.Layer = Overlay
	best, bestNode := math.Inf(-1), -1
	for i := range r.cfg.Nodes {
		s := 0.0
		if a := t.find(i); a != nil {
			s = a.writes + r.cfg.Beta*a.reads
		}
		s -= queueOf(queue, i)
		if s > best || s == best && i == fb {
			best, bestNode = s, i
		}
	}
	if bestNode < 0 {
		// Every score is NaN or −∞ (a NaN or +∞ queue entry): nothing to
		// prefer, so the fallback node.
		bestNode, best = fb, 0
		if a := t.find(fb); a != nil {
			best = a.writes + r.cfg.Beta*a.reads
		}
		best -= queueOf(queue, fb)
	}
	d.Node, d.Score = bestNode, best
	d.Queue = queueOf(queue, bestNode)
	if a := t.find(bestNode); a != nil {
		d.Writes, d.Reads, d.LocalWrites = a.writes, r.cfg.Beta*a.reads, a.local
	}
	return d
}

// Scores appends Score(T, i) for every node i to dst and returns it: the
// overlay's view of the transaction, for inspection (Route does not need
// it).
func (r *Router) Scores(dst []float64, writes, reads []control.KeyGroup, queue []float64) []float64 {
	var t tally
	r.count(&t, writes, reads)
	for i := range r.cfg.Nodes {
		s := 0.0
		if a := t.find(i); a != nil {
			s = a.writes + r.cfg.Beta*a.reads
		}
		dst = append(dst, s-queueOf(queue, i))
	}
	return dst
}

// RouteNaive is the tutorial's naive Lever B (seed 000 §5.1): the owner of
// the transaction's primary (first) write key group if it is owned, else the
// fallback node of home; no score, no queue penalty, no other key group
// consulted. Decision.Writes and LocalWrites describe the primary key group
// alone.
func (r *Router) RouteNaive(writes []control.KeyGroup, home uint64) Decision {
	fb, fromTable := r.FallbackNode(home)
	d := Decision{Node: fb, Layer: Fallback, FallbackNode: fb, FromTable: fromTable}
	if len(writes) == 0 {
		return d
	}
	if ref, o, ok := r.ix.find(writes[0]); ok {
		d.Node, d.Layer = int(o), Overlay
		d.OwnedWrites, d.LocalWrites = 1, 1
		d.Writes = r.cohorts[ref].a
		d.Score = d.Writes
	}
	return d
}
