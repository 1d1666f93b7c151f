package cohortgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/control/accessgraph"
	"github.com/aura-runtime/aura/messages"
)

// The DSL (testdata/*.txt; regenerate with go test ./control/cohortgen -rewrite):
//
//	init [self=F] [merge-low=F] [merge-high=F] [split-low=F] [split-high=F] [persist=N]
//	     [max-size=N] [min-size=N] [min-weight=F] [max-cohorts=N]
//	     [refine-every=N] [refine-max-kgs=N] [split-checks=N] [sticky=N]
//	        a fresh graph and generator (defaults otherwise)
//	load name=X w=KGS [r=KGS] [n=N[,N…]] [pick=K] [node=I]
//	        every tick from now on, N transactions (default 1; a list (N,N…) is
//	        cycled, one value per tick) writing the key groups KGS and
//	        reading r; with pick=K each transaction writes K key groups
//	        drawn from KGS instead (seeded). KGS is a comma list of ids and
//	        ranges: 1,2,5-9.
//	load name=X clique=KGS weight=F
//	        every tick, a direct summary (no profiler) where every key group
//	        of KGS has write weight F and every pair an edge of weight F
//	unload name=X | unload all
//	access w=KGS [r=KGS] [n=N] [pick=K] [node=I]
//	        like load, for the current window only
//	tick [n=N] [v|events]
//	        close N windows (summaries → Graph.Apply, Graph.Tick,
//	        Generator.Step); prints the last Output, every one with v, or
//	        with events those that changed something (merges, splits,
//	        refinements, published set changes, a sticky publish)
//	cohorts  prints the published cohorts
//	ratio a=KGS b=KGS
//	        prints the merge ratio cross/min(intra) of two sets of key
//	        groups and the split ratio cut/intra of their union
//
// Profilers sample every transaction (SampleEvery 1) so the scenarios are
// exact.
type harness struct {
	t      testing.TB
	g      *accessgraph.Graph
	gen    *Generator
	profs  map[int]*accessgraph.Profiler
	loads  map[string]load
	order  []string
	rng    *rand.Rand
	tick   uint64
	last   Output
	direct []load // clique loads of the current window
}

type load struct {
	w, r   []control.KeyGroup
	ns     []int // transactions per tick, cycled
	pick   int
	node   int
	clique float64 // > 0: direct summary, every pair and node weighs clique
}

func newHarness(t testing.TB, cfg Config) *harness {
	g, err := accessgraph.NewGraph(accessgraph.DefaultGraphConfig())
	if err != nil {
		t.Fatal(err)
	}
	gen, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: g, gen: gen, profs: map[int]*accessgraph.Profiler{}, loads: map[string]load{}, rng: rand.New(rand.NewPCG(1, 1))}
}

func (h *harness) prof(node int) *accessgraph.Profiler {
	if p, ok := h.profs[node]; ok {
		return p
	}
	cfg := accessgraph.DefaultProfilerConfig()
	cfg.Node = fmt.Sprintf("cn-%d", node)
	cfg.NodeIndex = uint32(node)
	cfg.SampleEvery = 1
	cfg.MaxSamplesPerWindow = 0
	p, err := accessgraph.NewProfiler(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.profs[node] = p
	return p
}

func (h *harness) run(l load) {
	if l.clique > 0 {
		h.direct = append(h.direct, l)
		return
	}
	p := h.prof(l.node)
	w := l.w
	n := l.ns[int(h.tick)%len(l.ns)]
	for range n {
		if l.pick > 0 {
			w = w[:0:0]
			perm := h.rng.Perm(len(l.w))
			for _, i := range perm[:min(l.pick, len(l.w))] {
				w = append(w, l.w[i])
			}
		}
		p.Record(w, l.r)
	}
}

func (h *harness) step() Output {
	for _, name := range h.order {
		h.run(h.loads[name])
	}
	h.tick++
	nodes := make([]int, 0, len(h.profs))
	for n := range h.profs {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		if err := h.g.Apply(h.profs[n].Summary(h.tick, accessgraph.SummaryV2)); err != nil {
			h.t.Fatal(err)
		}
	}
	if len(h.direct) > 0 {
		s := &messages.AccessSummary{Version: 2, Node: "direct", Tick: h.tick}
		for _, l := range h.direct {
			for i, a := range l.w {
				s.Nodes = append(s.Nodes, &messages.NodeWeight{Kg: a, WriteWeight: l.clique})
				for _, b := range l.w[i+1:] {
					s.TypedEdges = append(s.TypedEdges, &messages.TypedEdge{A: min(a, b), B: max(a, b), Ww: l.clique})
				}
			}
		}
		if err := h.g.Apply(s); err != nil {
			h.t.Fatal(err)
		}
		h.direct = h.direct[:0]
	}
	h.g.Tick()
	h.last = h.gen.Step(h.g)
	checkInvariants(h.t, h.gen, &h.last)
	return h.last
}

// checkInvariants verifies what every Output promises.
func checkInvariants(t testing.TB, gen *Generator, out *Output) {
	t.Helper()
	cfg := gen.Config()
	if len(out.Cohorts) > cfg.MaxCohorts {
		t.Fatalf("tick %d: %d cohorts published > MaxCohorts %d", out.Tick, len(out.Cohorts), cfg.MaxCohorts)
	}
	seenKG := map[control.KeyGroup]control.CohortID{}
	cs := gen.Cohorts()
	for i, c := range cs {
		if i > 0 && c.ID <= cs[i-1].ID {
			t.Fatalf("cohorts not sorted by id")
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(c.KeyGroups) == 0 || len(c.KeyGroups) > cfg.MaxCohortSize {
			t.Fatalf("tick %d: cohort %d has %d key groups (max %d)", out.Tick, c.ID, len(c.KeyGroups), cfg.MaxCohortSize)
		}
		for _, kg := range c.KeyGroups {
			if other, dup := seenKG[kg]; dup {
				t.Fatalf("tick %d: kg %d in cohorts %d and %d", out.Tick, kg, other, c.ID)
			}
			seenKG[kg] = c.ID
		}
	}
	for i, c := range out.Cohorts {
		if i > 0 && c.ID <= out.Cohorts[i-1].ID {
			t.Fatalf("published cohorts not sorted by id")
		}
	}
}

func parseKGs(t testing.TB, s string) []control.KeyGroup {
	var out []control.KeyGroup
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			t.Fatalf("bad key group %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				t.Fatalf("bad key group range %q", part)
			}
		}
		for k := a; k <= b; k++ {
			out = append(out, control.KeyGroup(k))
		}
	}
	return out
}

func parseLoad(t testing.TB, td *datadriven.TestData) load {
	l := load{ns: []int{1}}
	var s string
	if td.HasArg("clique") {
		td.ScanArgs(t, "clique", &s)
		l.w = parseKGs(t, s)
		td.ScanArgs(t, "weight", &l.clique)
		return l
	}
	td.ScanArgs(t, "w", &s)
	l.w = parseKGs(t, s)
	if td.HasArg("r") {
		td.ScanArgs(t, "r", &s)
		l.r = parseKGs(t, s)
	}
	if arg, ok := td.Arg("n"); ok {
		l.ns = l.ns[:0]
		for i := range arg.Vals {
			var n int
			arg.Scan(t, i, &n)
			l.ns = append(l.ns, n)
		}
	}
	td.MaybeScanArgs(t, "pick", &l.pick)
	td.MaybeScanArgs(t, "node", &l.node)
	return l
}

func fmtIDs(ids []control.CohortID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// fmtKGs prints sorted key groups with runs collapsed: [1-5 9].
func fmtKGs(kgs []control.KeyGroup) string {
	var parts []string
	for i := 0; i < len(kgs); {
		j := i
		for j+1 < len(kgs) && kgs[j+1] == kgs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", kgs[i], kgs[j]))
		} else {
			parts = append(parts, strconv.FormatUint(kgs[i], 10))
		}
		i = j + 1
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtOutput(o *Output, withCohorts bool) string {
	var b strings.Builder
	st := o.Stats
	fmt.Fprintf(&b, "tick %d: published=%d tracked=%d singletons=%d armed=%d", o.Tick, st.Published, st.TrackedKGs, st.Singletons, st.MergeCandidates)
	if st.Published > 0 {
		fmt.Fprintf(&b, " sizes=%d..%d", st.MinSize, st.MaxSize)
	}
	if o.Sticky {
		b.WriteString(" STICKY")
	}
	b.WriteString("\n")
	if len(o.Merged) > 8 {
		fmt.Fprintf(&b, "  %d merges\n", len(o.Merged))
	} else {
		for _, m := range o.Merged {
			fmt.Fprintf(&b, "  merge %s -> %d\n", fmtIDs(m.From), m.Into)
		}
	}
	for _, s := range o.Split {
		kind := "split"
		if s.Separation {
			kind = "separate"
		}
		fmt.Fprintf(&b, "  %s %d -> %s\n", kind, s.From, fmtIDs(s.Into))
	}
	for _, r := range o.Refined {
		fmt.Fprintf(&b, "  refine %s -> %s gain=%.2f\n", fmtIDs(r.Old), fmtIDs(r.New), r.Gain)
	}
	if n := len(o.New) + len(o.Retired) + len(o.Changed); n > 24 {
		fmt.Fprintf(&b, "  new=%d retired=%d changed=%d\n", len(o.New), len(o.Retired), len(o.Changed))
	} else if n > 0 {
		fmt.Fprintf(&b, "  new=%s retired=%s changed=%s\n", fmtIDs(o.New), fmtIDs(o.Retired), fmtIDs(o.Changed))
	}
	if withCohorts {
		b.WriteString(fmtCohorts(o.Cohorts))
	}
	return b.String()
}

func fmtCohorts(cs []control.Cohort) string {
	var b strings.Builder
	if len(cs) > 24 {
		sizes := map[int]int{}
		for _, c := range cs {
			sizes[len(c.KeyGroups)]++
		}
		keys := make([]int, 0, len(sizes))
		for k := range sizes {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		b.WriteString("  sizes:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %d×%d", sizes[k], k)
		}
		b.WriteString("\n")
		return b.String()
	}
	for _, c := range cs {
		fmt.Fprintf(&b, "  %d: %s\n", c.ID, fmtKGs(c.KeyGroups))
	}
	return b.String()
}

// ratios computes the merge ratio of two key group sets and the split ratio
// of their union, as the generator defines them.
func ratios(g *accessgraph.Graph, kappa float64, a, b []control.KeyGroup) (m, s float64) {
	intra := func(xs []control.KeyGroup) float64 {
		t := 0.0
		for i, x := range xs {
			t += kappa * g.W(x)
			for _, y := range xs[i+1:] {
				t += g.EdgeWeight(x, y)
			}
		}
		return t
	}
	cross := 0.0
	for _, x := range a {
		for _, y := range b {
			cross += g.EdgeWeight(x, y)
		}
	}
	ia, ib := intra(a), intra(b)
	return cross / min(ia, ib), cross / (ia + ib + cross)
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *harness
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "init":
				cfg := DefaultConfig()
				td.MaybeScanArgs(t, "self", &cfg.SelfWeight)
				td.MaybeScanArgs(t, "merge-low", &cfg.ThetaMergeLow)
				td.MaybeScanArgs(t, "merge-high", &cfg.ThetaMergeHigh)
				td.MaybeScanArgs(t, "split-low", &cfg.ThetaSplitLow)
				td.MaybeScanArgs(t, "split-high", &cfg.ThetaSplitHigh)
				td.MaybeScanArgs(t, "persist", &cfg.PersistWindows)
				td.MaybeScanArgs(t, "max-size", &cfg.MaxCohortSize)
				td.MaybeScanArgs(t, "min-size", &cfg.MinCohortSize)
				td.MaybeScanArgs(t, "min-weight", &cfg.MinWeight)
				td.MaybeScanArgs(t, "max-cohorts", &cfg.MaxCohorts)
				td.MaybeScanArgs(t, "refine-every", &cfg.RefineEvery)
				td.MaybeScanArgs(t, "refine-max-kgs", &cfg.RefineMaxKGs)
				td.MaybeScanArgs(t, "split-checks", &cfg.SplitChecksPerTick)
				td.MaybeScanArgs(t, "sticky", &cfg.StickyMaxTicks)
				h = newHarness(t, cfg)
				return "ok"
			case "load":
				var name string
				td.ScanArgs(t, "name", &name)
				if _, ok := h.loads[name]; !ok {
					h.order = append(h.order, name)
				}
				h.loads[name] = parseLoad(t, td)
				return "ok"
			case "unload":
				if td.HasArg("all") {
					h.loads, h.order = map[string]load{}, nil
					return "ok"
				}
				var name string
				td.ScanArgs(t, "name", &name)
				delete(h.loads, name)
				h.order = slices.DeleteFunc(h.order, func(s string) bool { return s == name })
				return "ok"
			case "access":
				h.run(parseLoad(t, td))
				return "ok"
			case "tick":
				n := 1
				td.MaybeScanArgs(t, "n", &n)
				verbose, events := td.HasArg("v"), td.HasArg("events")
				var b strings.Builder
				for i := range n {
					out := h.step()
					eventful := len(out.Merged)+len(out.Split)+len(out.Refined)+len(out.New)+len(out.Retired)+len(out.Changed) > 0 || out.Sticky
					if verbose || i == n-1 || (events && eventful) {
						b.WriteString(fmtOutput(&out, i == n-1))
					}
				}
				return b.String()
			case "cohorts":
				return fmtCohorts(h.last.Cohorts)
			case "ratio":
				var a, b string
				td.ScanArgs(t, "a", &a)
				td.ScanArgs(t, "b", &b)
				m, s := ratios(h.g, h.gen.Config().SelfWeight, parseKGs(t, a), parseKGs(t, b))
				return fmt.Sprintf("merge=%.3f split=%.3f", m, s)
			default:
				t.Fatalf("unknown command %q", td.Cmd)
				return ""
			}
		})
	})
}
