package plannerlease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDatadriven runs the scripts in testdata against leases sharing one
// emulated word:
//
//	new name=a holder=1 [lease=1000 renew=100]
//	tick name=a now=N          issue a's next op (prints it, or "none")
//	land name=a                run a's in-flight op on the word
//	done name=a now=N [err]    report the op to a (err: outcome unknown)
//	release name=a now=N       a gives the word up (prints the op, or "none")
//	word value=N               overwrite the word (a memory node that restarted)
//	valid now=N                which leases are Valid at N
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var word uint64
		leases := map[string]*Lease{}
		ops := map[string]*Op{}
		olds := map[string]uint64{}
		var order []string
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var name string
			if d.HasArg("name") {
				d.ScanArgs(t, "name", &name)
			}
			now := int64(0)
			if d.HasArg("now") {
				d.ScanArgs(t, "now", &now)
			}
			switch d.Cmd {
			case "new":
				var holder uint64
				d.ScanArgs(t, "holder", &holder)
				cfg := DefaultConfig(uint32(holder))
				cfg.LeaseMicros, cfg.RenewMicros = 1000, 100
				if d.HasArg("lease") {
					d.ScanArgs(t, "lease", &cfg.LeaseMicros)
				}
				if d.HasArg("renew") {
					d.ScanArgs(t, "renew", &cfg.RenewMicros)
				}
				l, err := New(cfg)
				if err != nil {
					return err.Error()
				}
				leases[name] = l
				order = append(order, name)
				return "ok"
			case "tick", "release":
				issue := leases[name].Tick
				if d.Cmd == "release" {
					issue = leases[name].Release
				}
				op, ok := issue(now)
				if !ok {
					return name + ": none"
				}
				ops[name] = &op
				return fmt.Sprintf("%s: %s", name, fmtOp(op))
			case "land":
				op := ops[name]
				olds[name] = word
				if op.Kind == OpCAS && word == op.Compare {
					word = op.Swap
				}
				return fmt.Sprintf("word %s -> %s", fmtWord(olds[name]), fmtWord(word))
			case "done":
				op := ops[name]
				var err error
				if d.HasArg("err") {
					err = errors.New("timeout")
				}
				ev := leases[name].Done(*op, olds[name], err, now)
				delete(ops, name)
				return fmt.Sprintf("%s: %s; %s", name, ev, fmtLease(leases[name], now))
			case "word":
				d.ScanArgs(t, "value", &word)
				return "word " + fmtWord(word)
			case "valid":
				var out []string
				for _, n := range order {
					if leases[n].Valid(now) {
						out = append(out, n)
					}
				}
				return "valid: " + strings.Join(out, " ")
			}
			return "unknown command " + d.Cmd
		})
	})
}

func fmtWord(w uint64) string {
	h, c := Split(w)
	return fmt.Sprintf("%d:%d", h, c)
}

func fmtOp(op Op) string {
	if op.Kind == OpRead {
		return "read"
	}
	return fmt.Sprintf("cas %s -> %s", fmtWord(op.Compare), fmtWord(op.Swap))
}

func fmtLease(l *Lease, now int64) string {
	w, ok := l.Seen()
	s := "contending"
	if l.Holding() {
		s = "holding"
	}
	seen := "-"
	if ok {
		seen = fmtWord(w)
	}
	return fmt.Sprintf("%s word=%s valid=%t", s, seen, l.Valid(now))
}

// TestAtMostOneValid runs several leases against one word under random
// schedules: ops land late or never, answers are lost, clocks run at
// rates up to 20% apart with arbitrary offsets, and the word is sometimes
// wiped (a memory node restarted without its state), and holders stop
// for good and release the word. At every step of
// real time, at most one lease may be Valid on its own clock.
func TestAtMostOneValid(t *testing.T) {
	const lease, renew = 1000, 100
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 17))
		type node struct {
			l        *Lease
			offset   int64
			rate     float64
			op       *Op
			landAt   int64 // real time the op reaches the word (-1: lost)
			doneAt   int64 // real time the caller learns the outcome
			lost     bool  // the answer is lost: the caller times out
			old      uint64
			landed   bool
			pausedTo int64 // a stalled process: no ticks before then
			stopped  bool  // released the word and stopped for good
		}
		var nodes []*node
		for i := range 2 + rng.IntN(3) {
			cfg := DefaultConfig(uint32(i + 1))
			cfg.LeaseMicros, cfg.RenewMicros = lease, renew
			l, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, &node{l: l, offset: rng.Int64N(1e6), rate: 0.9 + 0.2*rng.Float64()})
		}
		clock := func(n *node, real int64) int64 { return n.offset + int64(float64(real)*n.rate) }
		var word uint64
		holders := map[uint32]bool{}
		for real := int64(0); real < 200_000; real += 1 + rng.Int64N(20) {
			if rng.IntN(20_000) == 0 {
				word = 0
			}
			for _, n := range nodes {
				if n.op != nil && !n.landed && n.landAt >= 0 && real >= n.landAt {
					n.landed, n.old = true, word
					if n.op.Kind == OpCAS && word == n.op.Compare {
						word = n.op.Swap
					}
				}
				if n.op != nil && real >= n.doneAt {
					if n.lost || !n.landed {
						// The caller's timeout: the outcome is unknown.
						n.l.Done(*n.op, 0, errors.New("timeout"), clock(n, real))
					} else {
						n.l.Done(*n.op, n.old, nil, clock(n, real))
					}
					n.op = nil
				}
				if n.op == nil && real >= n.pausedTo && !n.stopped {
					if n.l.Holding() && rng.IntN(2000) == 0 {
						// The planner stops for good and gives the word up.
						if op, ok := n.l.Release(clock(n, real)); ok {
							n.op, n.landed, n.lost, n.stopped = &op, false, false, true
							n.landAt = real + latency(rng)
							n.doneAt = n.landAt + latency(rng)
							continue
						}
					}
					if rng.IntN(100) == 0 {
						n.pausedTo = real + lease/2 + rng.Int64N(3*lease)
						continue
					}
					if op, ok := n.l.Tick(clock(n, real)); ok {
						n.op, n.landed = &op, false
						n.landAt = real + latency(rng)
						n.doneAt = n.landAt + latency(rng)
						n.lost = false
						switch rng.IntN(30) {
						case 0: // never reaches the word
							n.landAt, n.doneAt = -1, real+500
						case 1: // lands, the answer is lost
							n.lost, n.doneAt = true, n.landAt+500
						}
					}
				}
			}
			valid := 0
			for _, n := range nodes {
				if n.l.Valid(clock(n, real)) {
					valid++
					holders[n.l.Config().Holder] = true
				}
			}
			if valid > 1 {
				t.Fatalf("seed %d: %d leases valid at real time %d", seed, valid, real)
			}
		}
		if len(holders) == 0 {
			t.Fatalf("seed %d: no lease was ever valid in 60 leases' time", seed)
		}
	}
}

// latency is a message's delay: mostly short, sometimes up to 300.
func latency(rng *rand.Rand) int64 {
	if rng.IntN(10) == 0 {
		return rng.Int64N(300)
	}
	return rng.Int64N(20)
}

func TestConfigValidate(t *testing.T) {
	err := Config{RenewMicros: 10}.Validate()
	for _, want := range []string{"Holder", "LeaseMicros", "RenewMicros"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want a problem with %s", err, want)
		}
	}
	if err := DefaultConfig(1).Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
}
