package router

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aura-runtime/aura/control"
)

// TestDataDriven runs the scenarios in testdata/*.txt. Regenerate their
// expected output with go test ./control/router -run TestDataDriven -rewrite.
//
// Commands:
//
//	new nodes=N [beta=B] [write-weight=A] [read-weight=R] [fallback=modulo|rendezvous]
//	install epoch=E            input: [fallback O O …] and cohort id=C owner=O kgs=(K,…) lines
//	owner kg=K
//	fallback home=H
//	set-weights cohort=C a=A r=R
//	route [writes=(K,…)] [reads=(K,…)] home=H [queue=(Q,…)]
//	route-naive [writes=(K,…)] home=H
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var r *Router
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && r == nil {
				d.Fatalf(t, "run new first")
			}
			switch d.Cmd {
			case "new":
				var nodes int
				d.ScanArgs(t, "nodes", &nodes)
				cfg := DefaultConfig(nodes)
				d.MaybeScanArgs(t, "beta", &cfg.Beta)
				d.MaybeScanArgs(t, "write-weight", &cfg.WriteWeight)
				d.MaybeScanArgs(t, "read-weight", &cfg.ReadWeight)
				var fb string
				if d.MaybeScanArgs(t, "fallback", &fb) {
					switch fb {
					case "modulo":
					case "rendezvous":
						cfg.Fallback = RendezvousFallback(nodes)
					default:
						d.Fatalf(t, "unknown fallback %q", fb)
					}
				}
				if err := cfg.Validate(); err != nil {
					return "error: " + err.Error()
				}
				r = New(cfg)
				return "ok"
			case "install":
				m := &control.OwnerMap{}
				d.ScanArgs(t, "epoch", &m.Epoch)
				for _, line := range strings.Split(d.Input, "\n") {
					cmd, args, err := datadriven.ParseLine(line)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					switch cmd {
					case "":
					case "fallback":
						for _, f := range strings.Fields(line)[1:] {
							if f == "-" {
								m.Fallback = append(m.Fallback, control.Unowned)
								continue
							}
							o, err := strconv.ParseUint(f, 10, 8)
							if err != nil {
								d.Fatalf(t, "fallback entry %q: %v", f, err)
							}
							m.Fallback = append(m.Fallback, uint8(o))
						}
					case "cohort":
						sub := &datadriven.TestData{CmdArgs: args}
						var p control.Placement
						sub.ScanArgs(t, "id", &p.ID)
						sub.ScanArgs(t, "owner", &p.Owner)
						p.KeyGroups = keyGroups(t, sub, "kgs")
						m.Cohorts = append(m.Cohorts, p)
					default:
						d.Fatalf(t, "unknown install line %q", line)
					}
				}
				if err := r.Install(m); err != nil {
					return "error: " + err.Error()
				}
				epoch, _ := r.Epoch()
				return fmt.Sprintf("epoch %d: %d cohorts, %d key groups", epoch, r.Cohorts(), r.KeyGroups())
			case "owner":
				var kg uint64
				d.ScanArgs(t, "kg", &kg)
				c, o, ok := r.OwnerOfKeyGroup(kg)
				if !ok {
					return fmt.Sprintf("kg %d: not owned", kg)
				}
				return fmt.Sprintf("kg %d: cohort %d, owner %d", kg, c, o)
			case "fallback":
				var home uint64
				d.ScanArgs(t, "home", &home)
				n, fromTable := r.FallbackNode(home)
				return fmt.Sprintf("home %d: node %d (%s)", home, n, source(fromTable))
			case "set-weights":
				var c uint64
				var a, rw float64
				d.ScanArgs(t, "cohort", &c)
				d.ScanArgs(t, "a", &a)
				d.ScanArgs(t, "r", &rw)
				if err := r.SetWeights(c, a, rw); err != nil {
					return "error: " + err.Error()
				}
				return "ok"
			case "route", "route-naive":
				writes := keyGroups(t, d, "writes")
				var home uint64
				d.ScanArgs(t, "home", &home)
				if d.Cmd == "route-naive" {
					return describe(r.RouteNaive(writes, home))
				}
				reads := keyGroups(t, d, "reads")
				var queue []float64
				if arg, ok := d.Arg("queue"); ok {
					for _, v := range arg.Vals {
						q, err := strconv.ParseFloat(v, 64)
						if err != nil {
							d.Fatalf(t, "queue %q: %v", v, err)
						}
						queue = append(queue, q)
					}
				}
				dec := r.Route(writes, reads, home, queue)
				return describe(dec) + fmt.Sprintf("scores %v\n", r.Scores(nil, writes, reads, queue))
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func keyGroups(t *testing.T, d *datadriven.TestData, key string) []control.KeyGroup {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []control.KeyGroup
	for _, v := range arg.Vals {
		if v == "" {
			continue
		}
		kg, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "%s %q: %v", key, v, err)
		}
		out = append(out, kg)
	}
	return out
}

func source(fromTable bool) string {
	if fromTable {
		return "map's fallback table"
	}
	return "fallback function"
}

func describe(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %d by %s; fallback node %d (%s)\n", d.Node, d.Layer, d.FallbackNode, source(d.FromTable))
	fmt.Fprintf(&b, "score %g = writes %g + reads %g - queue %g\n", d.Score, d.Writes, d.Reads, d.Queue)
	fmt.Fprintf(&b, "owned writes %d (local %d), owned reads %d\n", d.OwnedWrites, d.LocalWrites, d.OwnedReads)
	return b.String()
}
