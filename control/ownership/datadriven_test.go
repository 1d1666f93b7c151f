package ownership

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aura-runtime/aura/control"
)

// The DSL (testdata/*.txt; regenerate the expected outputs with
// go test ./control/ownership -run TestDataDriven -rewrite):
//
//	config [naive] [key=value ...]      reset the planner: DefaultConfig (or NaiveConfig) with
//	                                    overrides: crpc cfreeze cdrain chandoff cinstall cload slack
//	                                    budget-slack theta-w theta-f theta-b theta-cold cold-ticks
//	                                    cooldown move-budget max-inflight install-budget evict-budget
//	                                    max-published unit
//	nodes n=N [capacity=a,b,..] [state=up,leaving,down,..] [base=a,b,..]
//	cohort c1 w=100 home=0:0.9,1:0.1 [fcas=0.02] [cost=2] [kgs=1-8|1,2,3]
//	                                    add or replace a cohort; home gives P(home=i), HomeWeight = W·P;
//	                                    several cohorts may be given one per input line instead
//	drop c1 [c2 ...]                    remove cohorts from the input
//	owner c1=1 c2=none                  set current owners
//	inflight c1=0>1 | inflight clear    set in-flight transfers
//	membership settled|unsettled
//	plan tick=T [dry] [async] [brief]   plan, print, and apply (owners follow moves, installs and
//	                                    evictions; with async, moves become in-flight transfers);
//	                                    dry plans on a clone and applies nothing
//	explain c1                          the Benefit terms at every node
//	oracle nodes=N [slack=s] [max-groups=k] [capacity=..]
//	                                    input lines: "kg 1 w=10 home=0:8,1:2" (absolute home weights)
//	                                    and "community 1,2,3"
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.run(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

type cohortSpec struct {
	id   control.CohortID
	w    float64
	home map[int]float64
	fcas float64
	cost float64
	kgs  []control.KeyGroup
}

type harness struct {
	t         *testing.T
	cfg       Config
	p         *Planner
	nodes     int
	capacity  []float64
	state     []NodeState
	base      []float64
	cohorts   map[control.CohortID]*cohortSpec
	owners    map[control.CohortID]int
	inflight  []Transfer
	unsettled bool
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, nodes: 2, cohorts: map[control.CohortID]*cohortSpec{}, owners: map[control.CohortID]int{}}
	h.cfg = DefaultConfig()
	var err error
	if h.p, err = New(h.cfg); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) input(tick uint64) Input {
	in := Input{Tick: tick, Nodes: h.nodes, Capacity: h.capacity, State: h.state, BaseLoad: h.base,
		Unsettled: h.unsettled, Owners: map[control.CohortID]int{}, InFlight: slices.Clone(h.inflight)}
	ids := make([]control.CohortID, 0, len(h.cohorts))
	for id := range h.cohorts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := h.cohorts[id]
		c := CohortStats{ID: id, KeyGroups: s.kgs, W: s.w, FallbackCASShare: s.fcas, AtomicCost: s.cost,
			HomeWeight: make([]float64, h.nodes)}
		for i, p := range s.home {
			if i < h.nodes {
				c.HomeWeight[i] = s.w * p
			}
		}
		in.Cohorts = append(in.Cohorts, c)
	}
	for id, o := range h.owners {
		in.Owners[id] = o
	}
	return in
}

func (h *harness) run(d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "config":
		cfg := DefaultConfig()
		if d.HasArg("naive") {
			cfg = NaiveConfig()
		}
		for _, a := range d.CmdArgs {
			if a.Key == "naive" {
				continue
			}
			if len(a.Vals) != 1 {
				return "", fmt.Errorf("config: %s needs one value", a.Key)
			}
			if err := setConfig(&cfg, a.Key, a.Vals[0]); err != nil {
				return "", err
			}
		}
		p, err := New(cfg)
		if err != nil {
			return "", err
		}
		h.cfg, h.p = cfg, p
		return "ok\n", nil

	case "nodes":
		var n int
		d.ScanArgs(h.t, "n", &n)
		h.nodes = n
		h.capacity, h.state, h.base = nil, nil, nil
		if a, ok := d.Arg("capacity"); ok {
			v, err := floats(a.Vals)
			if err != nil {
				return "", err
			}
			h.capacity = v
		}
		if a, ok := d.Arg("base"); ok {
			v, err := floats(a.Vals)
			if err != nil {
				return "", err
			}
			h.base = v
		}
		if a, ok := d.Arg("state"); ok {
			for _, s := range splitVals(a.Vals) {
				switch s {
				case "up":
					h.state = append(h.state, NodeUp)
				case "leaving":
					h.state = append(h.state, NodeLeaving)
				case "down":
					h.state = append(h.state, NodeDown)
				default:
					return "", fmt.Errorf("nodes: unknown state %q", s)
				}
			}
		}
		return "ok\n", nil

	case "cohort":
		lines := []string{}
		if len(d.CmdArgs) > 0 {
			lines = append(lines, d.FullCmd()[len("cohort"):])
		}
		for _, l := range strings.Split(d.Input, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		for _, l := range lines {
			s, err := parseCohort(l)
			if err != nil {
				return "", err
			}
			h.cohorts[s.id] = s
		}
		return "ok\n", nil

	case "drop":
		for _, a := range d.CmdArgs {
			id, err := cohortName(a.Key)
			if err != nil {
				return "", err
			}
			delete(h.cohorts, id)
		}
		return "ok\n", nil

	case "owner":
		for _, a := range d.CmdArgs {
			id, err := cohortName(a.Key)
			if err != nil {
				return "", err
			}
			if len(a.Vals) != 1 {
				return "", fmt.Errorf("owner: %s needs one value", a.Key)
			}
			if a.Vals[0] == "none" {
				delete(h.owners, id)
				continue
			}
			o, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				return "", err
			}
			h.owners[id] = o
		}
		return "ok\n", nil

	case "inflight":
		if d.HasArg("clear") {
			h.inflight = nil
			return "ok\n", nil
		}
		for _, a := range d.CmdArgs {
			id, err := cohortName(a.Key)
			if err != nil {
				return "", err
			}
			from, to, ok := strings.Cut(a.Vals[0], ">")
			if !ok {
				return "", fmt.Errorf("inflight: want c=from>to, got %q", a.Vals[0])
			}
			f, err1 := strconv.Atoi(from)
			tt, err2 := strconv.Atoi(to)
			if err1 != nil || err2 != nil {
				return "", fmt.Errorf("inflight: bad %q", a.Vals[0])
			}
			h.inflight = append(h.inflight, Transfer{Cohort: id, From: f, To: tt})
		}
		return "ok\n", nil

	case "membership":
		h.unsettled = d.HasArg("unsettled")
		return "ok\n", nil

	case "plan":
		var tick uint64
		d.ScanArgs(h.t, "tick", &tick)
		in := h.input(tick)
		pl := h.p
		if d.HasArg("dry") {
			pl = pl.Clone()
		}
		p, err := pl.Plan(in)
		if err != nil {
			return "", err
		}
		out := formatPlan(&p, d.HasArg("brief"))
		if !d.HasArg("dry") {
			h.apply(&p, d.HasArg("async"))
		}
		return out, nil

	case "explain":
		if len(d.CmdArgs) != 1 {
			return "", fmt.Errorf("explain: one cohort")
		}
		id, err := cohortName(d.CmdArgs[0].Key)
		if err != nil {
			return "", err
		}
		ex, err := Explain(h.cfg, h.input(0), id)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		owner := "none"
		if ex.Owner >= 0 {
			owner = "n" + strconv.Itoa(ex.Owner)
		}
		fmt.Fprintf(&b, "c%d w=%s unit=%s hot=%v owner=%s best=%s\n", ex.Cohort, num(ex.W), num(ex.Unit), ex.Hot, owner, nodeName(ex.Best))
		for _, nt := range ex.Nodes {
			fmt.Fprintf(&b, "  n%d %s load=%s cap=%s budget=%s fits=%v benefit=%s\n", nt.Node, nt.State, num(nt.Load), num(nt.Capacity), num(nt.Budget), nt.Fits, nt.Terms)
		}
		return b.String(), nil

	case "oracle":
		return h.oracle(d)
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

func (h *harness) apply(p *Plan, async bool) {
	for _, m := range p.Moves {
		if async {
			h.inflight = append(h.inflight, Transfer{Cohort: m.Cohort, From: m.From, To: m.To})
		} else {
			h.owners[m.Cohort] = m.To
		}
	}
	for _, s := range p.Installs {
		h.owners[s.Cohort] = s.To
	}
	for _, e := range p.Evictions {
		delete(h.owners, e.Cohort)
	}
}

func nodeName(i int) string {
	if i < 0 {
		return "none"
	}
	return "n" + strconv.Itoa(i)
}

func formatPlan(p *Plan, brief bool) string {
	var b strings.Builder
	if !brief {
		fmt.Fprintf(&b, "tick=%d unit=%s total=%s candidates=%d published=%d\n", p.Tick, num(p.Unit), num(p.Total), p.Stats.Candidates, p.Stats.Published)
	}
	for _, s := range p.Installs {
		if brief {
			fmt.Fprintf(&b, "install c%d -> n%d\n", s.Cohort, s.To)
		} else {
			fmt.Fprintf(&b, "install c%d -> n%d: %s\n", s.Cohort, s.To, s.Terms)
		}
	}
	for _, m := range p.Moves {
		f := ""
		if m.Forced {
			f = ", forced"
		}
		if brief {
			fmt.Fprintf(&b, "move c%d n%d -> n%d (%s%s)\n", m.Cohort, m.From, m.To, m.Reason, f)
		} else {
			fmt.Fprintf(&b, "move c%d n%d -> n%d (%s%s): %s; stay %s\n", m.Cohort, m.From, m.To, m.Reason, f, m.Terms, m.Stay)
		}
	}
	for _, e := range p.Evictions {
		f := ""
		if e.Forced {
			f = ", forced"
		}
		fmt.Fprintf(&b, "evict c%d from n%d (%s%s)\n", e.Cohort, e.From, e.Reason, f)
	}
	for _, x := range p.Held {
		fmt.Fprintf(&b, "held c%d on n%d (%s)\n", x.Cohort, x.Node, x.Reason)
	}
	s := p.Stats
	if s.Rescued > 0 {
		fmt.Fprintf(&b, "rescued: %d\n", s.Rescued)
	}
	if s.Unplaced+s.CooldownSkipped+s.InstallBudgetSkipped+s.CapSkipped > 0 {
		fmt.Fprintf(&b, "skipped: unplaced=%d cooldown=%d install-budget=%d cap=%d\n", s.Unplaced, s.CooldownSkipped, s.InstallBudgetSkipped, s.CapSkipped)
	}
	b.WriteString("owners:")
	if len(p.Assignment) == 0 {
		b.WriteString(" none")
	}
	for _, a := range p.Assignment {
		fmt.Fprintf(&b, " c%d=%d", a.Cohort, a.Owner)
	}
	b.WriteString("\n")
	b.WriteString("load:")
	for i := range p.Load {
		if brief {
			fmt.Fprintf(&b, " n%d=%s", i, num(p.Load[i]))
		} else {
			fmt.Fprintf(&b, " n%d=%s/%s/%s", i, num(p.Load[i]), num(p.Capacity[i]), num(p.Budget[i]))
		}
	}
	b.WriteString("\n")
	return b.String()
}

func (h *harness) oracle(d *datadriven.TestData) (string, error) {
	in := OracleInput{}
	d.ScanArgs(h.t, "nodes", &in.Nodes)
	d.MaybeScanArgs(h.t, "slack", &in.Slack)
	d.MaybeScanArgs(h.t, "max-groups", &in.MaxGroups)
	if a, ok := d.Arg("capacity"); ok {
		v, err := floats(a.Vals)
		if err != nil {
			return "", err
		}
		in.Capacity = v
	}
	for _, l := range strings.Split(d.Input, "\n") {
		cmd, args, err := datadriven.ParseLine(l)
		if err != nil {
			return "", err
		}
		switch cmd {
		case "":
		case "kg":
			k := OracleKeyGroup{Home: make([]float64, in.Nodes)}
			for _, a := range args {
				switch {
				case len(a.Vals) == 0:
					v, err := strconv.ParseUint(a.Key, 10, 64)
					if err != nil {
						return "", err
					}
					k.KG = v
				case a.Key == "w":
					if k.W, err = strconv.ParseFloat(a.Vals[0], 64); err != nil {
						return "", err
					}
				case a.Key == "home":
					m, err := pairs(a.Vals)
					if err != nil {
						return "", err
					}
					for i, v := range m {
						k.Home[i] = v
					}
				}
			}
			in.KeyGroups = append(in.KeyGroups, k)
		case "community":
			var com []control.KeyGroup
			for _, a := range args {
				for _, s := range strings.Split(a.Key, ",") {
					v, err := strconv.ParseUint(s, 10, 64)
					if err != nil {
						return "", err
					}
					com = append(com, v)
				}
			}
			in.Communities = append(in.Communities, com)
		default:
			return "", fmt.Errorf("oracle: unknown line %q", l)
		}
	}
	r, err := Oracle(in)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "group %v w=%s -> %s local=%s\n", g.KeyGroups, num(g.W), nodeName(g.Owner), num(g.Local))
	}
	fmt.Fprintf(&b, "local=%s/%s over-budget=%d unplaced=%d\nload:", num(r.Local), num(r.Total), r.OverBudget, r.Unplaced)
	for i := range r.Load {
		fmt.Fprintf(&b, " n%d=%s/%s", i, num(r.Load[i]), num(r.Budget[i]))
	}
	b.WriteString("\n")
	return b.String(), nil
}

func setConfig(c *Config, k, v string) error {
	f, ferr := strconv.ParseFloat(v, 64)
	i, ierr := strconv.Atoi(v)
	u, uerr := strconv.ParseUint(v, 10, 64)
	fl := map[string]*float64{
		"crpc": &c.CRPC, "cfreeze": &c.CFreeze, "cdrain": &c.CDrain, "chandoff": &c.CHandoff,
		"cinstall": &c.CInstall, "cload": &c.CLoadUnit, "slack": &c.Slack, "budget-slack": &c.BudgetSlack,
		"theta-w": &c.ThetaW, "theta-f": &c.ThetaF, "theta-b": &c.ThetaB, "theta-cold": &c.ThetaCold,
		"unit": &c.FixedUnit,
	}
	in := map[string]*int{
		"move-budget": &c.MoveBudget, "max-inflight": &c.MaxInFlight, "install-budget": &c.InstallBudget,
		"evict-budget": &c.EvictBudget, "max-published": &c.MaxPublished,
	}
	ui := map[string]*uint64{"cold-ticks": &c.ColdTicks, "cooldown": &c.CooldownTicks}
	switch {
	case fl[k] != nil:
		if ferr != nil {
			return ferr
		}
		*fl[k] = f
	case in[k] != nil:
		if ierr != nil {
			return ierr
		}
		*in[k] = i
	case ui[k] != nil:
		if uerr != nil {
			return uerr
		}
		*ui[k] = u
	default:
		return fmt.Errorf("config: unknown key %q", k)
	}
	return nil
}

func parseCohort(line string) (*cohortSpec, error) {
	_, args, err := datadriven.ParseLine("cohort " + line)
	if err != nil {
		return nil, err
	}
	s := &cohortSpec{home: map[int]float64{}}
	named := false
	for _, a := range args {
		if len(a.Vals) == 0 {
			if s.id, err = cohortName(a.Key); err != nil {
				return nil, err
			}
			named = true
			continue
		}
		v := a.Vals[0]
		switch a.Key {
		case "w":
			s.w, err = strconv.ParseFloat(v, 64)
		case "fcas":
			s.fcas, err = strconv.ParseFloat(v, 64)
		case "cost":
			s.cost, err = strconv.ParseFloat(v, 64)
		case "home":
			s.home, err = pairs(a.Vals)
		case "kgs":
			s.kgs, err = keyGroups(v)
		default:
			err = fmt.Errorf("cohort: unknown key %q", a.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !named {
		return nil, fmt.Errorf("cohort: no name in %q", line)
	}
	return s, nil
}

func cohortName(s string) (control.CohortID, error) {
	if !strings.HasPrefix(s, "c") {
		return 0, fmt.Errorf("cohort name %q: want c<number>", s)
	}
	return strconv.ParseUint(s[1:], 10, 64)
}

func splitVals(vals []string) []string {
	var out []string
	for _, v := range vals {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

func floats(vals []string) ([]float64, error) {
	var out []float64
	for _, s := range splitVals(vals) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func pairs(vals []string) (map[int]float64, error) {
	m := map[int]float64{}
	for _, s := range splitVals(vals) {
		k, v, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("want node:value, got %q", s)
		}
		i, err := strconv.Atoi(k)
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		m[i] = f
	}
	return m, nil
}

func keyGroups(v string) ([]control.KeyGroup, error) {
	var out []control.KeyGroup
	for _, s := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(s, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, err
			}
		}
		for k := a; k <= b; k++ {
			out = append(out, k)
		}
	}
	return out, nil
}
