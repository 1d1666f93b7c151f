package transfer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// The DSL (testdata/*.txt; regenerate the expected outputs with
// go test ./control/transfer -run TestDataDriven -rewrite):
//
//	config [resend=µs] [drain=µs] [freeze=µs] [handoff=µs] [publish=µs] [abort=µs] [max=N] [drain-budget=µs]
//	next                       NextTickMicros
//	start t=µs                 one move per input line: c=ID from=A [to=B] epoch=E new=E2 [kgs=1,2] [full-drain=true]
//	ack t=µs node=N KIND c=ID [status=ok|not_owner|stale|error] [aborted=N] [id=N] [epoch=E]
//	                           KIND: freeze drain handoff publish abort; the migration id and old
//	                           epoch default to the cohort's
//	tick t=µs
//	gone t=µs node=N
//	published t=µs
//	state                      every migration's step and outcome, Settled, Active, Stats
//	finished                   the records finished since the last call
//
// Every command that sends prints the messages, one per line.

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Controller
		reset := func(cfg Config) {
			var err error
			if c, err = New(cfg, 1); err != nil {
				t.Fatal(err)
			}
		}
		reset(DefaultConfig("p"))
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			now := int64(0)
			if d.HasArg("t") {
				var v int
				d.ScanArgs(t, "t", &v)
				now = int64(v)
			}
			switch d.Cmd {
			case "config":
				cfg := DefaultConfig("p")
				for _, a := range d.CmdArgs {
					if len(a.Vals) == 0 {
						continue
					}
					v, err := strconv.ParseInt(a.Vals[0], 10, 64)
					if err != nil {
						d.Fatalf(t, "%s: %v", a.Key, err)
					}
					switch a.Key {
					case "resend":
						cfg.ResendMicros = v
					case "drain":
						cfg.DrainDeadlineMicros = v
					case "freeze":
						cfg.FreezeTimeoutMicros = v
					case "handoff":
						cfg.HandoffTimeoutMicros = v
					case "publish":
						cfg.PublishTimeoutMicros = v
					case "abort":
						cfg.AbortTimeoutMicros = v
					case "max":
						cfg.MaxMigrations = int(v)
					case "drain-budget":
						cfg.DrainBudgetMicros = v
					default:
						d.Fatalf(t, "unknown config key %q", a.Key)
					}
				}
				reset(cfg)
				return "ok"
			case "start":
				var moves []Move
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						moves = append(moves, parseMove(t, line))
					}
				}
				out, err := c.Start(now, moves)
				if err != nil {
					return "error: " + err.Error()
				}
				return sends(out)
			case "ack":
				return sends(c.Step(now, arg(t, d, "node"), ackMsg(t, c, d)))
			case "tick":
				return sends(c.Tick(now))
			case "next":
				return fmt.Sprint(c.NextTickMicros())
			case "gone":
				return sends(c.NodeGone(now, arg(t, d, "node")))
			case "published":
				out, err := c.Published(now)
				if err != nil {
					return "error: " + err.Error()
				}
				return sends(out)
			case "state":
				var b strings.Builder
				for _, m := range c.ms {
					fmt.Fprintf(&b, "c%d #%d %s→%s: %s %s\n", m.mv.Cohort, m.id, m.mv.From, orNone(m.mv.To),
						[...]string{"freezing", "draining", "handing-off", "ready", "publishing", "aborting", "finished"}[m.step], m.out)
				}
				s := c.Stats()
				fmt.Fprintf(&b, "settled=%v active=%v rounds=%d started=%d moved=%d evicted=%d kept=%d resends=%d stuck=%d stale-acks=%d refusals=%d",
					c.Settled(), c.Active(), s.Rounds, s.Started, s.Moved, s.Evicted, s.Kept, s.Resends, s.Stuck, s.StaleAcks, s.Refusals)
				return b.String()
			case "finished":
				var b strings.Builder
				for _, r := range c.Finished() {
					fmt.Fprintf(&b, "c%d #%d %s frozen=%d drain=%d handoff=%d settle=%d freeze=%d publish=%d aborted=%d stuck=%v", r.Move.Cohort, r.ID, r.Outcome,
						r.FrozenMicros, r.DrainMicros, r.HandoffMicros, r.SettleMicros, r.FreezeMicros, r.PublishMicros, r.AbortedHolders, r.Stuck)
					if r.Reason != "" {
						fmt.Fprintf(&b, " reason=%q", r.Reason)
					}
					b.WriteString("\n")
				}
				if b.Len() == 0 {
					return "none"
				}
				return strings.TrimSuffix(b.String(), "\n")
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func orNone(s string) string {
	if s == "" {
		return "(evict)"
	}
	return s
}

func arg(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func parseMove(t *testing.T, line string) Move {
	var m Move
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "c":
			m.Cohort = n
		case "from":
			m.From = v
		case "to":
			m.To = v
		case "epoch":
			m.Epoch = n
		case "new":
			m.NewEpoch = n
		case "full-drain":
			m.FullDrain = v == "true"
		case "kgs":
			for _, s := range strings.Split(v, ",") {
				kg, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatalf("kgs: %v", err)
				}
				m.KeyGroups = append(m.KeyGroups, control.KeyGroup(kg))
			}
		default:
			t.Fatalf("unknown move field %q", k)
		}
	}
	return m
}

func ackMsg(t *testing.T, c *Controller, d *datadriven.TestData) proto.Message {
	var kind string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			kind = a.Key
		}
	}
	var cohort int
	d.ScanArgs(t, "c", &cohort)
	var id, epoch uint64
	for _, m := range c.ms {
		if m.mv.Cohort == control.CohortID(cohort) {
			id, epoch = m.id, m.mv.Epoch
		}
	}
	if d.HasArg("id") {
		var v int
		d.ScanArgs(t, "id", &v)
		id = uint64(v)
	}
	if d.HasArg("epoch") {
		var v int
		d.ScanArgs(t, "epoch", &v)
		epoch = uint64(v)
	}
	st := messages.MigrationAckStatus_MIGRATION_ACK_STATUS_OK
	if d.HasArg("status") {
		switch arg(t, d, "status") {
		case "ok":
		case "not_owner":
			st = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_NOT_OWNER
		case "stale":
			st = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_STALE_EPOCH
		case "error":
			st = messages.MigrationAckStatus_MIGRATION_ACK_STATUS_ERROR
		default:
			d.Fatalf(t, "unknown status")
		}
	}
	node := arg(t, d, "node")
	c64 := control.CohortID(cohort)
	switch kind {
	case "freeze":
		return &messages.FreezeAck{MigrationId: id, CohortId: c64, Epoch: epoch, Node: node, Status: st}
	case "drain":
		var ab int
		if d.HasArg("aborted") {
			d.ScanArgs(t, "aborted", &ab)
		}
		return &messages.DrainAck{MigrationId: id, CohortId: c64, Epoch: epoch, Node: node, Status: st, AbortedHolders: uint32(ab)}
	case "handoff":
		return &messages.HandoffAck{MigrationId: id, CohortId: c64, Epoch: epoch, Node: node, Status: st}
	case "publish":
		return &messages.PublishAck{MigrationId: id, CohortId: c64, Epoch: epoch, Node: node, Status: st}
	case "abort":
		return &messages.MigrationAbortAck{MigrationId: id, CohortId: c64, Epoch: epoch, Node: node, Status: st}
	}
	d.Fatalf(t, "unknown ack kind %q", kind)
	return nil
}

// sends prints messages compactly and in order.
func sends(out []Send) string {
	if len(out) == 0 {
		return "(nothing)"
	}
	lines := make([]string, 0, len(out))
	for _, s := range out {
		var body string
		switch m := s.Msg.(type) {
		case *messages.Freeze:
			body = fmt.Sprintf("Freeze #%d c%d e%d → %s@%d", m.GetMigrationId(), m.GetCohortId(), m.GetEpoch(), orNone(m.GetNewOwner()), m.GetNewEpoch())
		case *messages.Drain:
			body = fmt.Sprintf("Drain #%d c%d e%d deadline=%dµs", m.GetMigrationId(), m.GetCohortId(), m.GetEpoch(), m.GetDeadlineMicros())
		case *messages.Handoff:
			body = fmt.Sprintf("Handoff #%d c%d e%d → e%d kgs=%v from=%s", m.GetMigrationId(), m.GetCohortId(), m.GetEpoch(), m.GetNewEpoch(), m.GetKeyGroups(), m.GetFromOwner())
		case *messages.Publish:
			body = fmt.Sprintf("Publish #%d c%d e%d map=%d owner=%s@%d", m.GetMigrationId(), m.GetCohortId(), m.GetEpoch(), m.GetOwnermapEpoch(), orNone(m.GetNewOwner()), m.GetNewEpoch())
		case *messages.MigrationAbort:
			body = fmt.Sprintf("Abort #%d c%d e%d restore=%s@%d (%s)", m.GetMigrationId(), m.GetCohortId(), m.GetEpoch(), m.GetRestoreOwner(), m.GetRestoreEpoch(), m.GetReason())
		default:
			body = fmt.Sprintf("%T", m)
		}
		lines = append(lines, s.To+" ← "+body)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
