package planner

import (
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/ownership"
	"github.com/aura-runtime/aura/control/plane"
	"github.com/aura-runtime/aura/control/transfer"
)

// The planner keeps a short history of what it decided, for operators (the
// node dashboard): the last changes it planned, each with the Benefit terms
// that justified it, and the last migrations the TransferController
// finished, stuck ones marked. Both are bounded rings; the planner is
// soft state, so the history starts over with a new planner instance.

// MaxDecisions bounds the decision log, in entries: 256 is a few rounds of
// a busy planner (the per-tick move budget is small; a first map of many
// installs overflows it, and then the newest are kept), enough to answer
// "why did this cohort just move", and small to copy for a GetDecisions
// request (about 200 bytes an entry).
const MaxDecisions = 256

// MaxMigrationRecords bounds the finished-migration log, in entries, for
// the same reasons.
const MaxMigrationRecords = 256

// Decision kinds.
const (
	DecisionInstall = "install" // a cohort nobody owned gets an owner
	DecisionMove    = "move"    // a cohort changes owner
	DecisionEvict   = "evict"   // a cohort returns to the memory-node CAS path
)

// Decision is one change the planner planned at a tick whose plan changed
// the OwnerMap. Nodes are named by the roster of that tick ("" is the
// memory-node CAS path). A move may still be rolled back by its migration
// (see MigrationRecord for the outcome).
type Decision struct {
	Tick uint64 `json:"tick"`
	// Epoch is the epoch of the map the plan became (published at once, or
	// once the round of migrations it started settled).
	Epoch     uint64           `json:"epoch"`
	UnixMilli int64            `json:"unix_ms"`
	Kind      string           `json:"kind"`
	Cohort    control.CohortID `json:"cohort,string"`
	From      string           `json:"from"`
	To        string           `json:"to"`
	// Reason is ownership's reason (benefit, owner-leaving, cold, …);
	// installs are always for benefit.
	Reason ownership.Reason `json:"reason"`
	Forced bool             `json:"forced,omitempty"`
	// Terms is Benefit(c, To) (zero for evictions) and Benefit their sum,
	// S_atomic − C_rpc − C_move − C_load; Stay is Benefit(c, From) of a
	// move, what keeping the cohort would have been worth.
	Terms   ownership.Terms  `json:"terms"`
	Benefit float64          `json:"benefit"`
	Stay    *ownership.Terms `json:"stay,omitempty"`
}

// MigrationRecord is a finished migration (package control/transfer's
// Record, with the planner's clock and the outcome by name).
type MigrationRecord struct {
	ID        uint64           `json:"id,string"`
	UnixMilli int64            `json:"unix_ms"`
	Cohort    control.CohortID `json:"cohort,string"`
	From      string           `json:"from"`
	To        string           `json:"to"`
	Epoch     uint64           `json:"epoch"`
	// Outcome is moved, evicted or kept (rolled back).
	Outcome        string `json:"outcome"`
	Reason         string `json:"reason,omitempty"`
	FreezeMicros   int64  `json:"freeze_us"`
	DrainMicros    int64  `json:"drain_us"`
	AbortedHolders uint32 `json:"aborted_holders"`
	// Stuck: a phase missed its deadline and the watchdog finished or
	// rolled the migration back.
	Stuck bool `json:"stuck"`
}

// GetDecisions asks the actor for its Decisions.
type GetDecisions struct{}

// Decisions answers GetDecisions: the logs, oldest first, and how many
// entries each has seen in all (older ones than the ring holds are gone).
type Decisions struct {
	Decisions       []Decision
	Migrations      []MigrationRecord
	TotalDecisions  uint64
	TotalMigrations uint64
	// Active: a round of migrations is running now.
	Active bool
}

// ring is a bounded log that keeps the newest entries.
type ring[T any] struct {
	buf   []T
	next  int    // where the next entry goes once buf is full
	total uint64 // entries ever added
	limit int
}

func newRing[T any](limit int) ring[T] { return ring[T]{limit: limit} }

func (r *ring[T]) add(v T) {
	r.total++
	if len(r.buf) < r.limit {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.limit
}

// list returns a copy, oldest first.
func (r *ring[T]) list() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// recordPlan logs the changes of a plan that changed the map (published
// epoch epoch), naming nodes by the current roster.
func (a *Actor) recordPlan(d *plane.Decision, epoch uint64, now time.Time) {
	ms := now.UnixMilli()
	name := func(i int) string { return nameAt(a.roster, i) }
	p := &d.Plan
	for _, in := range p.Installs {
		a.decisions.add(Decision{Tick: p.Tick, Epoch: epoch, UnixMilli: ms, Kind: DecisionInstall, Cohort: in.Cohort,
			To: name(in.To), Reason: ownership.ReasonBenefit, Terms: in.Terms, Benefit: in.Terms.Benefit()})
	}
	for _, mv := range p.Moves {
		stay := mv.Stay
		a.decisions.add(Decision{Tick: p.Tick, Epoch: epoch, UnixMilli: ms, Kind: DecisionMove, Cohort: mv.Cohort,
			From: name(mv.From), To: name(mv.To), Reason: mv.Reason, Forced: mv.Forced, Terms: mv.Terms,
			Benefit: mv.Terms.Benefit(), Stay: &stay})
	}
	for _, ev := range p.Evictions {
		a.decisions.add(Decision{Tick: p.Tick, Epoch: epoch, UnixMilli: ms, Kind: DecisionEvict, Cohort: ev.Cohort,
			From: name(ev.From), Reason: ev.Reason, Forced: ev.Forced})
	}
}

// recordMigration logs a finished migration.
func (a *Actor) recordMigration(r transfer.Record, now time.Time) {
	a.migrations.add(MigrationRecord{ID: r.ID, UnixMilli: now.UnixMilli(), Cohort: r.Move.Cohort, From: r.Move.From,
		To: r.Move.To, Epoch: r.Move.NewEpoch, Outcome: r.Outcome.String(), Reason: r.Reason, FreezeMicros: r.FreezeMicros,
		DrainMicros: r.DrainMicros, AbortedHolders: r.AbortedHolders, Stuck: r.Stuck})
}

func (a *Actor) decisionsReply() Decisions {
	out := Decisions{Decisions: a.decisions.list(), Migrations: a.migrations.list(), TotalDecisions: a.decisions.total,
		TotalMigrations: a.migrations.total}
	if a.xfer != nil {
		out.Active = a.xfer.Active()
	}
	return out
}
