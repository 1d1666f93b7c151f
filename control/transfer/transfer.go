package transfer

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// Config bounds a round. All durations are microseconds.
type Config struct {
	// Planner is the planner's membership name, stamped on Freeze, Handoff
	// and MigrationAbort. Required.
	Planner string
	// ResendMicros is how long an unanswered message waits before it is
	// sent again. Default 100,000 (one planner tick): long enough for a
	// drain of the longest transaction (SPEC §6: ≈ 10 ms) to finish before
	// the Drain is repeated.
	ResendMicros int64
	// DrainDeadlineMicros is sent in Drain: how long after its freeze the
	// old owner waits for holders before it fences them. Default 50,000
	// (the owner table's default, five times the longest transaction).
	DrainDeadlineMicros int64
	// FreezeTimeoutMicros bounds freeze and drain together, from Start:
	// past it the migration rolls back. Default 2,000,000 — twenty
	// resends, far above a drain deadline, short enough that a node that
	// stopped answering does not hold the next OwnerMap for long.
	FreezeTimeoutMicros int64
	// HandoffTimeoutMicros bounds the wait for HandoffAck; past it the
	// handoff rolls forward (the map installs the cohort on the new owner).
	// Default 1,000,000.
	HandoffTimeoutMicros int64
	// PublishTimeoutMicros bounds the wait for PublishAck. Default
	// 2,000,000.
	PublishTimeoutMicros int64
	// DrainBudgetMicros, when positive, bounds the wait for a drain from
	// the FreezeAck: a cohort whose holders have not all released by then is
	// rolled back (thawed on its old owner, planned again later) instead of
	// holding the whole round — and every cohort of it — frozen until the
	// drain deadline. It trades moves for a bounded freeze window: a round
	// publishes within about the budget plus the map's publication. Default
	// 0 (off): every drain runs to its deadline. Must be below
	// DrainDeadlineMicros to have an effect; NextTickMicros tells the caller
	// when to Tick for it.
	DrainBudgetMicros int64
	// AbortTimeoutMicros bounds the wait for MigrationAbortAck. Default
	// 5,000,000 (membership declares a silent node failed within 6 s, and
	// NodeGone ends the wait sooner).
	AbortTimeoutMicros int64
	// MaxMigrations caps the migrations of one round. Default 1,024 (the
	// planner's cap on published cohorts: a round cannot have more).
	MaxMigrations int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig(planner string) Config {
	return Config{Planner: planner, ResendMicros: 100_000, DrainDeadlineMicros: 50_000,
		FreezeTimeoutMicros: 2_000_000, HandoffTimeoutMicros: 1_000_000, PublishTimeoutMicros: 2_000_000,
		AbortTimeoutMicros: 5_000_000, MaxMigrations: 1024}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Planner == "" {
		errs = append(errs, errors.New("transfer: Planner is required"))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"ResendMicros", c.ResendMicros}, {"DrainDeadlineMicros", c.DrainDeadlineMicros},
		{"FreezeTimeoutMicros", c.FreezeTimeoutMicros}, {"HandoffTimeoutMicros", c.HandoffTimeoutMicros},
		{"PublishTimeoutMicros", c.PublishTimeoutMicros}, {"AbortTimeoutMicros", c.AbortTimeoutMicros},
		{"MaxMigrations", int64(c.MaxMigrations)}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("transfer: %s %d must be positive", f.name, f.v))
		}
	}
	if c.DrainBudgetMicros < 0 {
		errs = append(errs, fmt.Errorf("transfer: DrainBudgetMicros %d must not be negative", c.DrainBudgetMicros))
	}
	if c.FreezeTimeoutMicros > 0 && c.DrainDeadlineMicros >= c.FreezeTimeoutMicros {
		errs = append(errs, fmt.Errorf("transfer: DrainDeadlineMicros %d must be below FreezeTimeoutMicros %d",
			c.DrainDeadlineMicros, c.FreezeTimeoutMicros))
	}
	return errors.Join(errs...)
}

// Move is one cohort departing a live node.
type Move struct {
	Cohort control.CohortID
	// From is the old owner (live).
	From string
	// To is the new owner; "" evicts the cohort to the memory-node CAS path.
	To string
	// Epoch is the cohort's install epoch at From.
	Epoch uint64
	// NewEpoch is the epoch of the OwnerMap that records the move (> Epoch).
	NewEpoch uint64
	// KeyGroups are the cohort's key groups at To (sorted).
	KeyGroups []control.KeyGroup
	// MembershipEpoch is the membership epoch the planner decided on.
	MembershipEpoch uint64
	// FullDrain: the drain runs to its deadline (fencing the holders that
	// have not released by then) instead of being rolled back past
	// Config.DrainBudgetMicros. The planner sets it for a cohort whose
	// earlier migrations were rolled back over budget: a holder that never
	// releases (its node crashed after an owner RPC granted it a lock)
	// would otherwise make the cohort unmovable, frozen and thawed again on
	// every attempt.
	FullDrain bool
}

// ReasonDrainOverBudget is the Record.Reason of a migration rolled back
// because its drain outlasted Config.DrainBudgetMicros.
const ReasonDrainOverBudget = "drain over budget"

// Send is one message for one node.
type Send struct {
	To  string
	Msg proto.Message
}

// Outcome is where a migration left its cohort.
type Outcome int

const (
	// Pending: the migration is still running.
	Pending Outcome = iota
	// Moved: the cohort is placed on Move.To at NewEpoch.
	Moved
	// Evicted: the cohort is not placed (memory-node CAS path).
	Evicted
	// Kept: rolled back, the cohort stays on Move.From at Move.Epoch.
	Kept
)

func (o Outcome) String() string {
	return [...]string{"pending", "moved", "evicted", "kept"}[o]
}

// Record is a finished migration, for metrics and logs.
type Record struct {
	ID      uint64
	Move    Move
	Outcome Outcome
	// Reason says why a migration was rolled back or rolled forward.
	Reason string
	// FrozenMicros is Start → FreezeAck (0 when A left or did not hold
	// the cohort): how long the old owner went on granting.
	FrozenMicros int64
	// DrainMicros is Start → DrainAck (0 when A left).
	DrainMicros int64
	// HandoffMicros is DrainAck → HandoffAck (0 without an acknowledged
	// handoff).
	HandoffMicros int64
	// SettleMicros is Start → the round settled (every migration of the
	// round has an outcome; the map is published then).
	SettleMicros int64
	// FreezeMicros is the freeze window: the old owner's FreezeAck (Start
	// when it never answered one) → every node acknowledged the map that
	// records the outcome (Published). The cohort grants nowhere in it:
	// frozen at the old owner, and at the new one only to requesters that
	// already hold that map.
	FreezeMicros int64
	// PublishMicros is the freeze window's last part: the round settled →
	// Published (the caller publishing the map, including any wait of its
	// own before it may, and every node acknowledging it).
	PublishMicros int64
	// AbortedHolders are the transactions the drain fenced.
	AbortedHolders uint32
	// Stuck: a phase missed its deadline (the watchdog acted).
	Stuck bool
}

// Stats are the controller's counters since New.
type Stats struct {
	Rounds, Started, Moved, Evicted, Kept uint64
	Resends, Stuck, StaleAcks, Refusals   uint64
}

// ErrBusy is returned by Start while a round is running.
var ErrBusy = errors.New("transfer: a round is running")

type step int

const (
	freezing step = iota
	draining
	handingOff
	ready // settled, waiting for Published
	publishing
	aborting
	finished
)

type migration struct {
	id   uint64
	mv   Move
	step step
	out  Outcome
	rec  Record
	// sent: when the outstanding message was last sent, per participant.
	sentFrom, sentTo int64
	// waitFrom, waitTo: a reply is awaited from that participant.
	waitFrom, waitTo bool
	started, phaseAt int64
	handoffSent      bool
}

// Controller runs rounds of migrations. Not safe for concurrent use.
type Controller struct {
	cfg    Config
	nextID uint64
	ms     []*migration
	byID   map[uint64]*migration
	gone   map[string]bool
	done   []Record
	stats  Stats
	active bool
	// settledAt is when the running round settled (0: not yet).
	settledAt int64
}

// New returns an idle controller. firstID numbers its first migration (a
// planner that takes over passes a value above any the old one used, e.g.
// derived from the epoch it starts at).
func New(cfg Config, firstID uint64) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, nextID: max(firstID, 1), byID: map[uint64]*migration{}, gone: map[string]bool{}}, nil
}

// Stats returns the counters.
func (c *Controller) Stats() Stats { return c.stats }

// Active reports whether a round is running (started and not Done).
func (c *Controller) Active() bool { return c.active }

// Start begins a round with one migration per move. It refuses (changing
// nothing) while a round runs, and refuses moves that are malformed, name
// one cohort twice or exceed MaxMigrations.
func (c *Controller) Start(now int64, moves []Move) ([]Send, error) {
	if c.active {
		return nil, ErrBusy
	}
	if len(moves) > c.cfg.MaxMigrations {
		return nil, fmt.Errorf("transfer: %d moves, at most %d per round", len(moves), c.cfg.MaxMigrations)
	}
	seen := map[control.CohortID]bool{}
	var errs []error
	for _, m := range moves {
		switch {
		case seen[m.Cohort]:
			errs = append(errs, fmt.Errorf("transfer: cohort %d moves twice", m.Cohort))
		case m.From == "" || m.From == m.To:
			errs = append(errs, fmt.Errorf("transfer: cohort %d: from %q to %q", m.Cohort, m.From, m.To))
		case m.NewEpoch <= m.Epoch:
			errs = append(errs, fmt.Errorf("transfer: cohort %d: new epoch %d not above %d", m.Cohort, m.NewEpoch, m.Epoch))
		}
		seen[m.Cohort] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.ms, c.settledAt = c.ms[:0], 0
	clear(c.byID)
	clear(c.gone)
	c.active = len(moves) > 0
	if c.active {
		c.stats.Rounds++
	}
	var out []Send
	for _, mv := range moves {
		mv.KeyGroups = slices.Clone(mv.KeyGroups)
		m := &migration{id: c.nextID, mv: mv, started: now, phaseAt: now}
		c.nextID++
		m.rec = Record{ID: m.id, Move: mv}
		c.ms = append(c.ms, m)
		c.byID[m.id] = m
		c.stats.Started++
		out = c.sendFrom(out, now, m)
	}
	return out, nil
}

// message returns the outstanding message of m (the same for either
// participant: the step decides what is outstanding).
func (c *Controller) message(m *migration) proto.Message {
	mv := m.mv
	switch m.step {
	case freezing:
		return &messages.Freeze{MigrationId: m.id, CohortId: mv.Cohort, Epoch: mv.Epoch, NewOwner: mv.To,
			NewEpoch: mv.NewEpoch, MembershipEpoch: mv.MembershipEpoch, Planner: c.cfg.Planner}
	case draining:
		return &messages.Drain{MigrationId: m.id, CohortId: mv.Cohort, Epoch: mv.Epoch,
			DeadlineMicros: uint64(c.cfg.DrainDeadlineMicros)}
	case handingOff:
		return &messages.Handoff{MigrationId: m.id, CohortId: mv.Cohort, Epoch: mv.Epoch, NewEpoch: mv.NewEpoch,
			KeyGroups: slices.Clone(mv.KeyGroups), MembershipEpoch: mv.MembershipEpoch, FromOwner: mv.From,
			Planner: c.cfg.Planner}
	case publishing:
		to := ""
		if m.out == Moved {
			to = mv.To
		}
		return &messages.Publish{MigrationId: m.id, CohortId: mv.Cohort, Epoch: mv.Epoch, OwnermapEpoch: mv.NewEpoch,
			NewOwner: to, NewEpoch: mv.NewEpoch}
	case aborting:
		return &messages.MigrationAbort{MigrationId: m.id, CohortId: mv.Cohort, Epoch: mv.Epoch,
			Phase: m.phase(), Reason: m.rec.Reason, RestoreOwner: mv.From, RestoreEpoch: mv.Epoch,
			Planner: c.cfg.Planner}
	}
	return nil
}

func (m *migration) phase() messages.MigrationPhase {
	switch m.step {
	case freezing:
		return messages.MigrationPhase_MIGRATION_PHASE_FREEZE
	case draining:
		return messages.MigrationPhase_MIGRATION_PHASE_DRAIN
	case handingOff, ready:
		return messages.MigrationPhase_MIGRATION_PHASE_HANDOFF
	case publishing:
		return messages.MigrationPhase_MIGRATION_PHASE_PUBLISH
	case aborting:
		return messages.MigrationPhase_MIGRATION_PHASE_ABORTED
	}
	return messages.MigrationPhase_MIGRATION_PHASE_DONE
}

func (c *Controller) sendFrom(out []Send, now int64, m *migration) []Send {
	if c.gone[m.mv.From] {
		m.waitFrom = false
		return out
	}
	m.waitFrom, m.sentFrom = true, now
	return append(out, Send{To: m.mv.From, Msg: c.message(m)})
}

func (c *Controller) sendTo(out []Send, now int64, m *migration) []Send {
	if m.mv.To == "" || c.gone[m.mv.To] {
		m.waitTo = false
		return out
	}
	m.waitTo, m.sentTo = true, now
	return append(out, Send{To: m.mv.To, Msg: c.message(m)})
}

// Step handles one acknowledgement from node.
func (c *Controller) Step(now int64, node string, msg proto.Message) []Send {
	id, cohort, epoch, status, errText := ackKey(msg)
	m := c.byID[id]
	if m == nil || m.mv.Cohort != cohort || m.mv.Epoch != epoch {
		c.stats.StaleAcks++
		return nil
	}
	fromA, fromB := node == m.mv.From, node == m.mv.To && m.mv.To != ""
	ok := status == messages.MigrationAckStatus_MIGRATION_ACK_STATUS_OK
	var out []Send
	switch a := msg.(type) {
	case *messages.FreezeAck:
		if m.step != freezing || !fromA {
			break
		}
		switch {
		case ok:
			m.step, m.phaseAt = draining, now
			m.rec.FrozenMicros = now - m.started
			out = c.sendFrom(out, now, m)
		case status == messages.MigrationAckStatus_MIGRATION_ACK_STATUS_NOT_OWNER:
			// A holds no activation of the cohort (never installed it, or
			// retired it): nothing grants it there, nothing to drain.
			m.waitFrom = false
			out = c.drained(out, now, m)
		default:
			c.stats.Refusals++
			out = c.rollback(out, now, m, refusal("freeze", status, errText))
		}
	case *messages.DrainAck:
		if m.step != draining || !fromA {
			break
		}
		if !ok && status != messages.MigrationAckStatus_MIGRATION_ACK_STATUS_NOT_OWNER {
			c.stats.Refusals++
			out = c.rollback(out, now, m, refusal("drain", status, errText))
			break
		}
		m.waitFrom = false
		m.rec.AbortedHolders = a.GetAbortedHolders()
		out = c.drained(out, now, m)
	case *messages.HandoffAck:
		if m.step != handingOff || !fromB {
			break
		}
		m.waitTo = false
		if ok {
			m.step, m.out = ready, Moved
			m.rec.HandoffMicros = now - m.phaseAt
			break
		}
		// B refused (e.g. an older membership epoch, or full): the cohort
		// leaves A anyway (A is drained) and is evicted rather than
		// installed on a node that said no.
		c.stats.Refusals++
		m.rec.Reason = refusal("handoff", status, errText)
		m.step, m.out = ready, Evicted
	case *messages.PublishAck:
		if m.step != publishing {
			break
		}
		if fromA {
			m.waitFrom = false
		}
		if fromB {
			m.waitTo = false
		}
		c.finishIfAnswered(m)
	case *messages.MigrationAbortAck:
		if m.step != aborting || !fromA {
			break
		}
		m.waitFrom = false
		m.step, m.out = ready, Kept
	}
	c.noteSettled(now)
	return out
}

// noteSettled records when the running round settled.
func (c *Controller) noteSettled(now int64) {
	if c.active && c.settledAt == 0 && c.Settled() {
		c.settledAt = now
	}
}

func refusal(phase string, st messages.MigrationAckStatus, detail string) string {
	s := phase + " refused: " + st.String()
	if detail != "" {
		s += ": " + detail
	}
	return s
}

func ackKey(msg proto.Message) (id uint64, cohort control.CohortID, epoch uint64, st messages.MigrationAckStatus, e string) {
	switch a := msg.(type) {
	case *messages.FreezeAck:
		return a.GetMigrationId(), a.GetCohortId(), a.GetEpoch(), a.GetStatus(), a.GetError()
	case *messages.DrainAck:
		return a.GetMigrationId(), a.GetCohortId(), a.GetEpoch(), a.GetStatus(), a.GetError()
	case *messages.HandoffAck:
		return a.GetMigrationId(), a.GetCohortId(), a.GetEpoch(), a.GetStatus(), a.GetError()
	case *messages.PublishAck:
		return a.GetMigrationId(), a.GetCohortId(), a.GetEpoch(), a.GetStatus(), a.GetError()
	case *messages.MigrationAbortAck:
		return a.GetMigrationId(), a.GetCohortId(), a.GetEpoch(), a.GetStatus(), a.GetError()
	}
	return 0, 0, 0, 0, ""
}

// drained moves m past A: to the handoff for a move, to ready for an
// eviction.
func (c *Controller) drained(out []Send, now int64, m *migration) []Send {
	m.rec.DrainMicros = now - m.started
	if m.mv.To == "" || c.gone[m.mv.To] {
		m.step, m.out = ready, Evicted
		return out
	}
	m.step, m.phaseAt, m.handoffSent = handingOff, now, true
	return c.sendTo(out, now, m)
}

func (c *Controller) rollback(out []Send, now int64, m *migration, reason string) []Send {
	m.rec.Reason = reason
	if m.handoffSent {
		panic("transfer: rollback after the handoff was sent") // I1: never re-activate A then
	}
	m.step, m.phaseAt, m.waitTo = aborting, now, false
	if c.gone[m.mv.From] {
		m.step, m.out = ready, Evicted
		return out
	}
	return c.sendFrom(out, now, m)
}

func (c *Controller) finishIfAnswered(m *migration) {
	if m.waitFrom || m.waitTo {
		return
	}
	c.finish(m)
}

func (c *Controller) finish(m *migration) {
	m.step = finished
	m.rec.Outcome = m.out
	switch m.out {
	case Moved:
		c.stats.Moved++
	case Evicted:
		c.stats.Evicted++
	case Kept:
		c.stats.Kept++
	}
	if m.rec.Stuck {
		c.stats.Stuck++
	}
	c.done = append(c.done, m.rec)
	if !slices.ContainsFunc(c.ms, func(x *migration) bool { return x.step != finished }) {
		c.active = false
	}
}

// Tick resends unanswered messages and lets the watchdog act on phases
// past their deadlines.
func (c *Controller) Tick(now int64) []Send {
	var out []Send
	for _, m := range c.ms {
		switch {
		case (m.step == freezing || m.step == draining) && now-m.started >= c.cfg.FreezeTimeoutMicros:
			m.rec.Stuck = true
			out = c.rollback(out, now, m, "freeze or drain past its deadline")
			continue
		case m.step == draining && c.cfg.DrainBudgetMicros > 0 && !m.mv.FullDrain && now-m.phaseAt >= c.cfg.DrainBudgetMicros:
			// Not stuck: its holders are slow. Unfreeze it rather than keep
			// it, and the round's other cohorts, from granting any longer.
			out = c.rollback(out, now, m, ReasonDrainOverBudget)
			continue
		case m.step == handingOff && now-m.phaseAt >= c.cfg.HandoffTimeoutMicros:
			// Roll forward: A is drained, the map installs the cohort on B.
			m.rec.Stuck, m.rec.Reason = true, "handoff unacknowledged; rolled forward by the map"
			m.waitTo, m.step, m.out = false, ready, Moved
			continue
		case m.step == aborting && now-m.phaseAt >= c.cfg.AbortTimeoutMicros:
			m.rec.Stuck, m.rec.Reason = true, m.rec.Reason+"; abort unacknowledged"
			m.waitFrom, m.step, m.out = false, ready, Kept
			continue
		case m.step == publishing && now-m.phaseAt >= c.cfg.PublishTimeoutMicros:
			m.waitFrom, m.waitTo = false, false
			c.finish(m)
			continue
		}
		if m.waitFrom && now-m.sentFrom >= c.cfg.ResendMicros {
			c.stats.Resends++
			out = c.sendFrom(out, now, m)
		}
		if m.waitTo && now-m.sentTo >= c.cfg.ResendMicros {
			c.stats.Resends++
			out = c.sendTo(out, now, m)
		}
	}
	c.noteSettled(now)
	return out
}

// NextTickMicros returns when the controller next needs a Tick for a
// deadline finer than the caller's own ticks (DrainBudgetMicros), or 0 when
// none is pending.
func (c *Controller) NextTickMicros() int64 {
	if c.cfg.DrainBudgetMicros <= 0 {
		return 0
	}
	var next int64
	for _, m := range c.ms {
		if m.step == draining && !m.mv.FullDrain {
			if at := m.phaseAt + c.cfg.DrainBudgetMicros; next == 0 || at < next {
				next = at
			}
		}
	}
	return next
}

// NodeGone tells the controller that node left the membership (crashed or
// finished leaving): nothing more is sent to it or awaited from it.
func (c *Controller) NodeGone(now int64, node string) []Send {
	if node == "" || !c.active {
		return nil
	}
	c.gone[node] = true
	var out []Send
	for _, m := range c.ms {
		if node == m.mv.From {
			m.waitFrom = false
			switch m.step {
			case freezing, draining:
				// Its activation is gone with it: hand off at the new epoch.
				out = c.drained(out, now, m)
			case aborting:
				m.step, m.out = ready, Evicted
			case publishing:
				c.finishIfAnswered(m)
			}
		}
		if node == m.mv.To {
			m.waitTo = false
			switch m.step {
			case handingOff:
				m.step, m.out = ready, Evicted
			case publishing:
				c.finishIfAnswered(m)
			}
		}
	}
	c.noteSettled(now)
	return out
}

// Settled reports whether every migration of the round has an outcome, so
// the map that records them may be published.
func (c *Controller) Settled() bool {
	for _, m := range c.ms {
		if m.step < ready || m.step == aborting {
			return false
		}
	}
	return true
}

// Placement returns the outcome of every migration of a settled round, by
// cohort.
func (c *Controller) Placement() map[control.CohortID]Outcome {
	p := make(map[control.CohortID]Outcome, len(c.ms))
	for _, m := range c.ms {
		p[m.mv.Cohort] = m.out
	}
	return p
}

// Published tells the controller that every live node acknowledged the map
// of the round's outcomes (the moves' NewEpoch): it sends Publish to the
// old and new owners and records the freeze windows. Only for a settled
// round.
func (c *Controller) Published(now int64) ([]Send, error) {
	if !c.Settled() {
		return nil, errors.New("transfer: Published before the round settled")
	}
	var out []Send
	for _, m := range c.ms {
		if m.step != ready {
			continue
		}
		m.rec.FreezeMicros = now - (m.started + m.rec.FrozenMicros)
		m.rec.SettleMicros = c.settledAt - m.started
		m.rec.PublishMicros = now - c.settledAt
		if m.out == Kept {
			// Rolled back: A thawed it, nothing to retire.
			m.waitFrom, m.waitTo = false, false
			c.finish(m)
			continue
		}
		m.step, m.phaseAt = publishing, now
		out = c.sendFrom(out, now, m)
		if m.out == Moved {
			out = c.sendTo(out, now, m)
		}
		c.finishIfAnswered(m)
	}
	return out, nil
}

// Finished returns the records of migrations finished since the last call.
func (c *Controller) Finished() []Record {
	r := c.done
	c.done = nil
	return r
}
