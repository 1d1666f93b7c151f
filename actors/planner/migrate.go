package planner

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/transfer"
	"github.com/aura-runtime/aura/messages"
)

// Migrator delivers one migration-protocol message (Freeze, Drain,
// Handoff, Publish, MigrationAbort; SPEC §6) to a node's migration
// participant and returns its acknowledgement. It is an optional
// capability of a Pusher: with it the planner moves cohorts between live
// nodes with the migration protocol (package control/transfer); without it
// a move goes through the fallback path in two epochs (evict, then
// install). Implementations must be safe for concurrent use and honour the
// context's deadline.
type Migrator interface {
	Migrate(ctx context.Context, node string, msg proto.Message) (proto.Message, error)
}

// InlineMigrator is an optional capability of a Migrator whose nodes live
// in the planner's process: TryMigrate serves messages for one node, in
// order, at once where that needs no waiting (all but a Drain whose cohort
// still holds locks) and leaves the other replies nil. The planner then
// calls it from its own actor: on a loaded machine a goroutine per message
// waits milliseconds to be scheduled, and those waits would make up most
// of a freeze window. It hands over each node's messages of a step
// together, so that the node takes its owner-table lock, which every
// transaction contends for, once for all of them.
type InlineMigrator interface {
	TryMigrate(node string, msgs []proto.Message) []proto.Message
}

// InlinePusher is the same capability for a Pusher: PushNow delivers one
// push to an in-process node without blocking on anything but the node's
// own locks.
type InlinePusher interface {
	PushNow(node string, p *messages.OwnerMapPush) (*messages.OwnerMapAck, error)
}

// maxFreezeSamples bounds the freeze windows kept for Status.
const maxFreezeSamples = 4096

// phaseSample is one finished migration's timings kept for Status.
type phaseSample struct{ freeze, drain, publish int64 }

type migrationDone struct {
	node string
	rep  proto.Message
	err  error
}

func (a *Actor) nowMicros() int64 { return time.Since(a.t0).Microseconds() }

// departures lists the cohorts of the published map placed on a live node
// that next does not place there, unless each of their key groups stays on
// that node: each must be frozen and drained there before next is
// published (SPEC §6; package control/transfer).
func (a *Actor) departures(next *control.OwnerMap) []transfer.Move {
	if a.cur == nil {
		return nil
	}
	placed := make(map[control.CohortID]control.Placement, len(next.Cohorts))
	ownerOf := map[control.KeyGroup]string{}
	for _, p := range next.Cohorts {
		placed[p.ID] = p
		name := nameAt(a.roster, p.Owner)
		for _, kg := range p.KeyGroups {
			ownerOf[kg] = name
		}
	}
	var moves []transfer.Move
	for _, p := range a.cur.Cohorts {
		from := nameAt(a.pubRoster, p.Owner)
		if from == "" || !a.live[from] {
			continue // its owner is gone: nothing there to freeze
		}
		q, ok := placed[p.ID]
		if !ok && !slices.ContainsFunc(p.KeyGroups, func(kg control.KeyGroup) bool { return ownerOf[kg] != from }) {
			// Re-cut in place: every key group stays on its node, in other
			// cohorts; the node freezes the old cohort and hands its key
			// groups to the new ones in one table step (see "Re-cut
			// cohorts" in package actors/owner). No other node can grant
			// them meanwhile.
			continue
		}
		to := ""
		if ok {
			to = nameAt(a.roster, q.Owner)
			if to == from {
				continue // stays (perhaps re-cut in place)
			}
			if !a.live[to] {
				to = ""
			}
		}
		mv := transfer.Move{Cohort: p.ID, From: from, To: to, Epoch: a.installEpoch[p.ID], NewEpoch: next.Epoch,
			MembershipEpoch: a.nodes.MembershipEpoch, FullDrain: a.overBudget[p.ID] >= fullDrainAfter}
		if to != "" {
			mv.KeyGroups = q.KeyGroups
		}
		moves = append(moves, mv)
	}
	return moves
}

func nameAt(roster []string, i int) string {
	if i < 0 || i >= len(roster) {
		return ""
	}
	return roster[i]
}

// sendMigrations delivers the controller's messages. With an
// InlineMigrator, each node gets its messages of a wave in one call and
// the replies are stepped node by node (the controller's state is per
// migration, so the order across nodes does not matter; the phase
// timestamps of a batch's replies are taken after the whole batch). A
// message not answered inline (a Drain still waiting for holders), or
// every message without an InlineMigrator, goes on its own goroutine
// bounded by the controller's resend period (a later Tick sends it again),
// and its acknowledgement comes back as a migrationDone.
func (a *Actor) sendMigrations(ctx actor.Context, out []transfer.Send) {
	if len(out) == 0 || !a.acting() {
		return // resent by the controller's Tick once the planner acts again
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	timeout := time.Duration(a.cfg.Transfer.ResendMicros) * time.Microsecond
	inline := false
	send := func(s transfer.Send) {
		go func() {
			c, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			rep, err := a.migrator.Migrate(c, s.To, s.Msg)
			root.Send(self, migrationDone{node: s.To, rep: rep, err: err})
		}()
	}
	// In waves: each node gets its messages of a wave in one call, and the
	// replies' follow-ups (a Drain after a FreezeAck, a Handoff after a
	// DrainAck...) make up the next wave.
	for len(out) > 0 {
		wave := out
		out = nil
		if a.inlineMigrator == nil {
			for _, s := range wave {
				send(s)
			}
			continue
		}
		var nodes []string
		byNode := map[string][]transfer.Send{}
		for _, s := range wave {
			if _, ok := byNode[s.To]; !ok {
				nodes = append(nodes, s.To)
			}
			byNode[s.To] = append(byNode[s.To], s)
		}
		for _, node := range nodes {
			ss := byNode[node]
			msgs := make([]proto.Message, len(ss))
			for i, s := range ss {
				msgs[i] = s.Msg
			}
			reps := a.inlineMigrator.TryMigrate(node, msgs)
			for i, s := range ss {
				if i >= len(reps) || reps[i] == nil {
					send(s)
					continue
				}
				out = append(out, a.xfer.Step(a.nowMicros(), node, reps[i])...)
				inline = true
			}
		}
	}
	if inline {
		a.afterTransferStep(ctx)
	}
}

// transferTick asks the actor to Tick the controller for a deadline
// finer than the planner's ticks (transfer.Config.DrainBudgetMicros).
type transferTick struct{}

// armTransferTimer schedules a transferTick for the controller's next
// fine deadline, if any and none is scheduled.
func (a *Actor) armTransferTimer(ctx actor.Context) {
	next := a.xfer.NextTickMicros()
	if next == 0 || a.tickArmed {
		return
	}
	a.tickArmed = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(time.Duration(max(next-a.nowMicros(), 0))*time.Microsecond, func() { root.Send(self, transferTick{}) })
}

func (a *Actor) onTransferTick(ctx actor.Context) {
	a.tickArmed = false
	if !a.xfer.Active() {
		return
	}
	a.sendMigrations(ctx, a.xfer.Tick(a.nowMicros()))
	a.afterTransferStep(ctx)
}

func (a *Actor) onMigrationDone(ctx actor.Context, d migrationDone) {
	if d.err != nil || d.rep == nil {
		a.log.Debug("migration message unanswered", "node", d.node, "err", d.err)
		return // resent by the controller's Tick
	}
	a.sendMigrations(ctx, a.xfer.Step(a.nowMicros(), d.node, d.rep))
	a.afterTransferStep(ctx)
}

// afterTransferStep publishes the staged map once the round settled, with
// the migrations' outcomes applied, and collects finished records.
func (a *Actor) afterTransferStep(ctx actor.Context) {
	defer a.armTransferTimer(ctx)
	if a.staged != nil && a.xfer.Settled() && a.mayPublish() {
		m := a.applyOutcomes(a.staged)
		a.staged = nil
		loopMap := *m // the loop's epochs are the published ones less the base
		loopMap.Epoch -= a.status.Base
		if err := a.loop.Adopt(&loopMap); err != nil {
			a.log.Error("planner: adopt published map", "err", err)
		}
		a.publishedRound = true
		a.publish(ctx, m, a.stagedCh)
	}
	a.collectRecords()
}

// onEpochAcked runs when every live node acknowledged the current epoch:
// the round's moves are published (SPEC §6 step 4).
func (a *Actor) onEpochAcked(ctx actor.Context) {
	if a.xfer == nil || !a.publishedRound || len(a.pending) > 0 {
		return
	}
	a.publishedRound = false
	out, err := a.xfer.Published(a.nowMicros())
	if err != nil {
		a.log.Error("planner: publish migrations", "err", err)
		return
	}
	a.sendMigrations(ctx, out)
	a.collectRecords()
}

// fullDrainAfter is how many migrations of a cohort in a row may be
// rolled back over the drain budget before the next one drains to the
// deadline (transfer.Move.FullDrain). Two: holders that are only slow
// usually release within the budget on a later attempt, and a third
// attempt that fences costs one drain deadline (50 ms) of freeze once.
const fullDrainAfter = 2

// noteOverBudget counts, per cohort, the migrations in a row rolled back
// over the drain budget; any other outcome resets the count. Only cohorts
// of the published map are kept, so the map is bounded by its cohorts.
func (a *Actor) noteOverBudget(r transfer.Record) {
	c := r.Move.Cohort
	if r.Outcome == transfer.Kept && r.Reason == transfer.ReasonDrainOverBudget {
		a.overBudget[c]++
	} else {
		delete(a.overBudget, c)
	}
	if a.cur != nil && len(a.overBudget) > len(a.cur.Cohorts) {
		placed := make(map[control.CohortID]bool, len(a.cur.Cohorts))
		for _, p := range a.cur.Cohorts {
			placed[p.ID] = true
		}
		maps.DeleteFunc(a.overBudget, func(id control.CohortID, _ int) bool { return !placed[id] })
	}
}

// applyOutcomes returns the staged map with the round's outcomes: a kept
// cohort (rolled back) stays where and as it was published, its key groups
// taken out of the cohorts the plan gave them to; an evicted one (its target
// left or refused) is not placed.
func (a *Actor) applyOutcomes(m *control.OwnerMap) *control.OwnerMap {
	out := a.xfer.Placement()
	if !slices.ContainsFunc(slices.Collect(maps.Values(out)), func(o transfer.Outcome) bool {
		return o == transfer.Kept || o == transfer.Evicted
	}) {
		return m
	}
	next := m.Clone()
	kept := map[control.KeyGroup]bool{}
	var restored []control.Placement
	for _, p := range a.cur.Cohorts {
		if out[p.ID] == transfer.Kept {
			restored = append(restored, control.Placement{Cohort: control.Cohort{ID: p.ID, KeyGroups: slices.Clone(p.KeyGroups)}, Owner: p.Owner})
			for _, kg := range p.KeyGroups {
				kept[kg] = true
			}
		}
	}
	cs := next.Cohorts[:0]
	for _, p := range next.Cohorts {
		if o, ok := out[p.ID]; ok && (o == transfer.Kept || o == transfer.Evicted) {
			continue
		}
		p.KeyGroups = slices.DeleteFunc(p.KeyGroups, func(kg control.KeyGroup) bool { return kept[kg] })
		if len(p.KeyGroups) > 0 {
			cs = append(cs, p)
		}
	}
	cs = append(cs, restored...)
	slices.SortFunc(cs, func(x, y control.Placement) int { return cmp.Compare(x.ID, y.ID) })
	next.Cohorts = cs
	return next
}

// collectRecords logs finished migrations and keeps their freeze windows;
// one line at info per round, once all of its migrations finished.
func (a *Actor) collectRecords() {
	for _, r := range a.xfer.Finished() {
		a.recordMigration(r, time.Now())
		a.round.n++
		a.round.freezeMax = max(a.round.freezeMax, r.FreezeMicros)
		switch r.Outcome {
		case transfer.Moved:
			a.round.moved = append(a.round.moved, fmt.Sprintf("%d:%s>%s", r.Move.Cohort, r.Move.From, r.Move.To))
		case transfer.Evicted:
			a.round.evicted++
		case transfer.Kept:
			a.round.kept++
		}
		a.noteOverBudget(r)
		a.phases.add(phaseSample{freeze: r.FreezeMicros, drain: r.DrainMicros, publish: r.PublishMicros})
		lvl := a.log.Debug
		if r.Stuck || r.Outcome == transfer.Kept {
			lvl = a.log.Warn
		}
		lvl("migration finished", "id", r.ID, "cohort", r.Move.Cohort, "from", r.Move.From, "to", r.Move.To,
			"outcome", r.Outcome.String(), "epoch", r.Move.NewEpoch, "frozen_us", r.FrozenMicros, "drain_us", r.DrainMicros,
			"handoff_us", r.HandoffMicros, "settle_us", r.SettleMicros, "freeze_us", r.FreezeMicros, "publish_us", r.PublishMicros,
			"aborted_holders", r.AbortedHolders, "stuck", r.Stuck, "reason", r.Reason, "full_drain", r.Move.FullDrain)
	}
	a.status.Transfer = a.xfer.Stats()
	if a.round.n > 0 && !a.xfer.Active() {
		const maxListed = 16 // bounds the line
		listed := a.round.moved[:min(len(a.round.moved), maxListed)]
		a.log.Info("migrations done", "epoch", a.status.Epoch, "migrations", a.round.n, "moved", len(a.round.moved),
			"evicted", a.round.evicted, "rolled_back", a.round.kept, "freeze_max_us", a.round.freezeMax,
			"moves", strings.Join(listed, ","))
		a.round = roundLog{}
	}
}

// roundLog accumulates one round's finished migrations for its log line.
type roundLog struct {
	n, evicted, kept int
	moved            []string
	freezeMax        int64
}

// trackInstallEpochs records, for every cohort of m (about to be
// published), the epoch at which its owner installed it: kept from the
// previous map when the cohort stays on the same node (re-cuts keep it),
// else m's epoch.
func (a *Actor) trackInstallEpochs(m *control.OwnerMap, roster []string) {
	prev := map[control.CohortID]string{}
	if a.cur != nil {
		for _, p := range a.cur.Cohorts {
			prev[p.ID] = nameAt(a.pubRoster, p.Owner)
		}
	}
	next := make(map[control.CohortID]uint64, len(m.Cohorts))
	for _, p := range m.Cohorts {
		e, ok := a.installEpoch[p.ID]
		if !ok || prev[p.ID] != nameAt(roster, p.Owner) {
			e = m.Epoch
		}
		next[p.ID] = e
	}
	a.installEpoch = next
}
