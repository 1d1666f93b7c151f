package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/aura-runtime/aura/bench"
)

// table is a header and rows of cells, printed as they are.
type table struct {
	Head []string
	Rows [][]string
}

type page struct {
	Title     string
	Generator template.HTML
	Command   string
	Machine   string
	Headline  table
	Params    table
	Workload  []string // distinct workload configurations, as JSON
	Plots     []plotFile
	Notes     []string
}

// ratio formats x / y ("–" when undefined).
func ratio(x, y float64) string {
	if y == 0 {
		if x == 0 {
			return "1.00×"
		}
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/y)
}

func find(runs []bench.Result, mode string) *bench.Result {
	for i := range runs {
		if runs[i].Mode == mode {
			return &runs[i]
		}
	}
	return nil
}

func headline(runs []bench.Result) table {
	base, oracle := find(runs, "mn-only"), find(runs, "oracle")
	t := table{Head: []string{"mode", "workload", "CNs", "committed", "throughput (tps)"}}
	if base != nil {
		t.Head = append(t.Head, "tps vs mn-only")
	}
	t.Head = append(t.Head, "p50 µs", "p99 µs", "abort rate", "atomics/txn")
	if base != nil {
		t.Head = append(t.Head, "atomics vs mn-only")
	}
	t.Head = append(t.Head, "owner RPC/txn", "LOCAL hit", "remote lock ops/txn")
	if base != nil {
		t.Head = append(t.Head, "remote vs mn-only")
	}
	if oracle != nil {
		t.Head = append(t.Head, "remote vs oracle")
	}
	t.Head = append(t.Head, "migrations", "cohorts final / max / min after warm-up")
	// CPU and allocations per transaction exist for real runs only (the
	// simulator's virtual time has none).
	measured := slices.ContainsFunc(runs, func(r bench.Result) bool { return r.CPUSeconds > 0 })
	if measured {
		t.Head = append(t.Head, "CPU µs/txn")
		if base != nil {
			t.Head = append(t.Head, "CPU vs mn-only")
		}
		t.Head = append(t.Head, "allocs/txn", "alloc bytes/txn")
	}
	t.Head = append(t.Head, "checks")
	for _, r := range runs {
		row := []string{runLabel(r), r.Workload, fmt.Sprint(r.CNs), fmt.Sprint(r.Committed + r.RolledBack),
			fmt.Sprintf("%.0f", r.ThroughputTPS)}
		if base != nil {
			row = append(row, ratio(r.ThroughputTPS, base.ThroughputTPS))
		}
		row = append(row, fmt.Sprint(r.LatencyUs.P50), fmt.Sprint(r.LatencyUs.P99),
			fmt.Sprintf("%.2f%%", 100*r.AbortRate), fmt.Sprintf("%.3f", r.AtomicPerTxn))
		if base != nil {
			row = append(row, ratio(r.AtomicPerTxn, base.AtomicPerTxn))
		}
		row = append(row, fmt.Sprintf("%.3f", r.OwnerRPCPer), fmt.Sprintf("%.1f%%", 100*r.LocalHit),
			fmt.Sprintf("%.3f", r.RemoteLockOps))
		if base != nil {
			row = append(row, ratio(r.RemoteLockOps, base.RemoteLockOps))
		}
		if oracle != nil {
			row = append(row, ratio(r.RemoteLockOps, oracle.RemoteLockOps))
		}
		row = append(row, fmt.Sprint(r.Migrations.Count),
			fmt.Sprintf("%d / %d / %d", r.Cohorts.Final, r.Cohorts.Max, r.Cohorts.MinAfterWarmup))
		if measured {
			cpu := fmt.Sprintf("%.1f", r.CPUUsPerTxn)
			if r.NodeCPUUsPerTxn != nil {
				cpu += fmt.Sprintf(" (nodes %.1f)", *r.NodeCPUUsPerTxn)
			}
			row = append(row, cpu)
			if base != nil {
				row = append(row, ratio(r.CPUUsPerTxn, base.CPUUsPerTxn))
			}
			row = append(row, fmt.Sprintf("%.1f", r.AllocsPerTxn), fmt.Sprintf("%.0f", r.AllocBytesPerTxn))
		}
		row = append(row, checks(r))
		t.Rows = append(t.Rows, row)
	}
	return t
}

// checks lists a run's verdicts, details left out (they are in runs.json).
func checks(r bench.Result) string {
	var out []string
	keys := make([]string, 0, len(r.Checks))
	for k := range r.Checks {
		if k != "details" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s=%v", k, r.Checks[k]))
	}
	if len(out) == 0 {
		return "–"
	}
	return strings.Join(out, " ")
}

func params(runs []bench.Result) table {
	t := table{Head: []string{"mode", "duration s", "warm-up s", "seed", "clients", "memory node", "rate tps",
		"loaded records", "load s", "check s", "key groups", "drift every s / drifts", "manifest epoch / bytes",
		"freeze p99 µs", "planner ticks / tick ms", "timeline samples"}}
	for _, r := range runs {
		p := r.Params
		rate := "closed loop"
		if p.RateTPS > 0 {
			rate = fmt.Sprintf("%.0f", p.RateTPS)
		}
		drift := "–"
		if p.DriftEveryS > 0 {
			drift = fmt.Sprintf("%g / %d", p.DriftEveryS, p.Drifts)
		}
		planner := "–"
		if r.Planner != nil {
			planner = fmt.Sprintf("%d / %.2f", r.Planner.Ticks, r.Planner.TickMs)
		}
		t.Rows = append(t.Rows, []string{runLabel(r), fmt.Sprintf("%.2f", r.DurationS), fmt.Sprintf("%g", p.WarmupS),
			fmt.Sprint(p.Seed), fmt.Sprint(p.Clients), orDash(p.MN), rate, fmt.Sprint(p.Loaded),
			fmt.Sprintf("%.2f", p.LoadS), fmt.Sprintf("%.2f", p.CheckS), fmt.Sprint(p.KeyGroups), drift,
			fmt.Sprintf("%d / %d", r.Manifest.Epoch, r.Manifest.Bytes), fmt.Sprint(r.Migrations.FreezeP99Us),
			planner, fmt.Sprint(len(r.Timeline))})
	}
	return t
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// workloads returns the runs' distinct workload configurations as JSON.
func workloads(runs []bench.Result) []string {
	var out []string
	for _, r := range runs {
		if r.Params.Workload == nil {
			continue
		}
		b, err := json.MarshalIndent(r.Params.Workload, "", "  ")
		if err != nil {
			continue
		}
		if s := string(b); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func renderHTML(in Input, pf []plotFile) ([]byte, error) {
	title := in.Title
	if title == "" {
		title = fmt.Sprintf("AURA: %s — %s", in.Runs[0].Workload, strings.Join(modes(in.Runs), ", "))
	}
	p := page{Title: title, Generator: template.HTML(generator), Command: orDash(in.Command),
		Machine: orDash(in.Machine), Headline: headline(in.Runs), Params: params(in.Runs),
		Workload: workloads(in.Runs), Plots: pf}
	if find(in.Runs, "mn-only") == nil {
		p.Notes = append(p.Notes, "No mn-only run: the ratio columns against it are left out.")
	}
	if !hasCNLoad(in.Runs) {
		p.Notes = append(p.Notes, "The samples carry no per-CN load (aura bench --connect drives other processes, whose per-node counts are on their /metrics): no per-CN plots.")
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return buf.Bytes(), nil
}

var pageTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{{.Generator}}
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
pre { background: #f4f4f4; padding: .6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; white-space: nowrap; }
th { background: #eee; } td:first-child, th:first-child { text-align: left; font-weight: bold; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: .9em; color: #555; }
.note { color: #555; font-size: .9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<h2>Command</h2>
<pre id="command">{{.Command}}</pre>
<p>Machine: {{.Machine}}</p>
<h2>Headline</h2>
<table id="headline">
<thead><tr>{{range .Headline.Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Headline.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
<p class="note">Summary figures leave out the warm-up; the plots keep it (dashed line: its end).
Per-transaction figures count completed transactions (committed or rolled back by their program);
LOCAL hit = local / all lock acquisitions; remote lock ops = (owner RPC + MN CAS) / transaction.</p>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}<h2>Plots</h2>
{{range .Plots}}<figure>
<img src="{{.Name}}" alt="{{.Title}}" width="960">
<figcaption>{{.Caption}}</figcaption>
</figure>
{{end}}<h2>Parameters</h2>
<table id="params">
<thead><tr>{{range .Params.Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Params.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{range .Workload}}<p>Workload configuration:</p>
<pre>{{.}}</pre>
{{end}}<p class="note">Every run's full result, timeline included, is in <a href="runs.json">runs.json</a>.</p>
</body>
</html>
`))
