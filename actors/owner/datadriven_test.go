package owner

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
)

// TestDataDriven runs the Table scenarios in testdata/*.txt. Regenerate their
// expected output with go test ./actors/owner -run TestDataDriven -rewrite.
//
// Commands (keys are records of table 1 unless written T/K):
//
//	new [max-locks=N] [max-keys=N] [max-cohorts=N] [max-kgs=N] [max-tombstones=N] [max-idem=N] [drain-deadline=µs]
//	install cohort=C epoch=E kgs=(K,…)
//	observe epoch=E
//	acquire cohort=C epoch=E txn=H keys=(K,…) [req=R] [requester=S] [now=µs]
//	release cohort=C epoch=E txn=H [keys=(K,…)] [all]
//	freeze cohort=C epoch=E [now=µs]
//	thaw cohort=C epoch=E
//	drain cohort=C
//	fence cohort=C epoch=E now=µs
//	retire cohort=C epoch=E moved-epoch=E [moved-to=NODE]
//	owner-of kg=K
//	show
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var tb *Table
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && tb == nil {
				d.Fatalf(t, "run new first")
			}
			var cohort control.CohortID
			var epoch uint64
			var now int64
			if d.HasArg("cohort") {
				d.ScanArgs(t, "cohort", &cohort)
			}
			if d.HasArg("epoch") {
				d.ScanArgs(t, "epoch", &epoch)
			}
			d.MaybeScanArgs(t, "now", &now)
			switch d.Cmd {
			case "new":
				cfg := Config{}
				d.MaybeScanArgs(t, "max-locks", &cfg.MaxLocks)
				d.MaybeScanArgs(t, "max-keys", &cfg.MaxKeysPerRequest)
				d.MaybeScanArgs(t, "max-cohorts", &cfg.MaxCohorts)
				d.MaybeScanArgs(t, "max-kgs", &cfg.MaxKeyGroupsPerCohort)
				d.MaybeScanArgs(t, "max-tombstones", &cfg.MaxTombstones)
				d.MaybeScanArgs(t, "max-idem", &cfg.MaxIdempotencyKeys)
				d.MaybeScanArgs(t, "drain-deadline", &cfg.DrainDeadlineMicros)
				var err error
				if tb, err = NewTable(cfg); err != nil {
					return "error: " + err.Error()
				}
				return "ok"
			case "install":
				var kgs []control.KeyGroup
				d.ScanArgs(t, "kgs", &kgs)
				return errOr(tb.Install(cohort, kgs, epoch), "ok")
			case "observe":
				tb.ObserveEpoch(epoch)
				return fmt.Sprintf("epoch %d", tb.Epoch())
			case "acquire":
				req := AcquireRequest{Cohort: cohort, Epoch: epoch, Keys: scanKeys(t, d), NowMicros: now}
				d.ScanArgs(t, "txn", &req.Holder)
				d.MaybeScanArgs(t, "req", &req.RequestID)
				d.MaybeScanArgs(t, "requester", &req.Requester)
				rep, err := tb.Acquire(req)
				if err != nil {
					return "error: " + err.Error()
				}
				return formatAcquire(rep)
			case "release":
				req := ReleaseRequest{Cohort: cohort, Epoch: epoch, All: d.HasArg("all")}
				d.ScanArgs(t, "txn", &req.Holder)
				if d.HasArg("keys") {
					req.Keys = scanKeys(t, d)
				}
				rep, err := tb.Release(req)
				if err != nil {
					return "error: " + err.Error()
				}
				out := fmt.Sprintf("%s released=%d epoch=%d", rep.Status, rep.Released, rep.Epoch)
				if rep.Status == StatusMoved {
					out += fmt.Sprintf(" owner=%q moved-epoch=%d", rep.Moved.Owner, rep.Moved.Epoch)
				}
				return out
			case "freeze":
				return errOr(tb.Freeze(cohort, epoch, now), "ok")
			case "thaw":
				return errOr(tb.Thaw(cohort, epoch), "ok")
			case "drain":
				s, err := tb.Drain(cohort)
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("cohort %d epoch %d %s locks=%d holders=%d drained=%v", s.Cohort, s.Epoch, s.Phase, s.Locks, s.Holders, s.Drained)
			case "fence":
				fenced, err := tb.Fence(cohort, epoch, now)
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("fenced %v", fenced)
			case "retire":
				var m Moved
				d.ScanArgs(t, "moved-epoch", &m.Epoch)
				d.MaybeScanArgs(t, "moved-to", &m.Owner)
				return errOr(tb.Retire(cohort, epoch, m), "ok")
			case "owner-of":
				var kg control.KeyGroup
				d.ScanArgs(t, "kg", &kg)
				c, e, p, ok := tb.CohortOf(kg)
				if !ok {
					return "none"
				}
				return fmt.Sprintf("cohort %d epoch %d %s", c, e, p)
			case "show":
				return tb.String()
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func errOr(err error, ok string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}

func scanKeys(t *testing.T, d *datadriven.TestData) []Key {
	var raw []string
	d.ScanArgs(t, "keys", &raw)
	keys := make([]Key, 0, len(raw))
	for _, s := range raw {
		table, key := "1", s
		if a, b, ok := strings.Cut(s, "/"); ok {
			table, key = a, b
		}
		tn, err1 := strconv.ParseUint(table, 10, 32)
		kn, err2 := strconv.ParseUint(key, 10, 64)
		if err1 != nil || err2 != nil {
			d.Fatalf(t, "bad key %q", s)
		}
		keys = append(keys, Key{Table: txn.TableID(tn), Key: kn})
	}
	return keys
}

func formatAcquire(r AcquireReply) string {
	out := fmt.Sprintf("%s epoch=%d", r.Status, r.Epoch)
	switch r.Status {
	case StatusOK:
		out += fmt.Sprintf(" granted=%v", r.Granted)
	case StatusConflict:
		out += fmt.Sprintf(" at=%d holder=%d granted=%v", r.ConflictIndex, r.ConflictHolder, r.Granted)
	case StatusMoved:
		out += fmt.Sprintf(" owner=%q", r.Moved.Owner)
	case StatusRetry:
		out += fmt.Sprintf(" after=%dµs", r.RetryAfterMicros)
	}
	if len(r.Already) > 0 {
		out += fmt.Sprintf(" already=%v", r.Already)
	}
	return out
}
