package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/aura-runtime/aura/bench"
)

// MaxRuns bounds the runs of one report (a comparison runs each mode once).
const MaxRuns = 16

// Input is what a report shows.
type Input struct {
	// Runs are the results, in the order they ran.
	Runs []bench.Result
	// Command is the exact command line that produced the runs
	// (CommandLine(os.Args)).
	Command string
	// Machine describes where they ran (Machine()).
	Machine string
	// Title heads the page; empty: "AURA: <workload> — <modes>".
	Title string
}

// generator marks an index.html as written by this package: Write
// replaces the files of such a directory and refuses any other non-empty
// one.
const generator = `<meta name="generator" content="aura report">`

// owned reports whether a file name is one a report writes.
func owned(name string) bool {
	return name == "index.html" || name == "runs.json" ||
		(strings.HasPrefix(name, "plot-") && strings.HasSuffix(name, ".png"))
}

// CheckDir reports whether Write may write a report into dir (see the
// package documentation's directory rule) without changing anything:
// call it before a long run so that a wrong directory fails at once.
func CheckDir(dir string) error {
	if dir == "" {
		return errors.New("report: no directory")
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("report: %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !bytes.Contains(b, []byte(generator)) {
		return fmt.Errorf("report: %s is not empty and holds no earlier report: give a new or empty directory", dir)
	}
	return nil
}

// Write renders the report of in into dir (see the package documentation).
func Write(dir string, in Input) error {
	if len(in.Runs) == 0 {
		return errors.New("report: no runs")
	}
	if len(in.Runs) > MaxRuns {
		return fmt.Errorf("report: %d runs, at most %d", len(in.Runs), MaxRuns)
	}
	if err := CheckDir(dir); err != nil {
		return err
	}
	// Render everything before touching the directory: a failure leaves an
	// earlier report as it was.
	pf, err := plots(in.Runs)
	if err != nil {
		return err
	}
	page, err := renderHTML(in, pf)
	if err != nil {
		return err
	}
	ptrs := make([]*bench.Result, len(in.Runs))
	for i := range in.Runs {
		ptrs[i] = &in.Runs[i]
	}
	runsJSON, err := json.MarshalIndent(map[string]any{"runs": ptrs}, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	// An earlier report's plots for runs this one does not have go.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, e := range entries {
		if owned(e.Name()) && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("report: %w", err)
			}
		}
	}
	for _, p := range pf {
		if err := os.WriteFile(filepath.Join(dir, p.Name), p.png, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "runs.json"), append(runsJSON, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	// index.html last: a directory with it holds a complete report.
	if err := os.WriteFile(filepath.Join(dir, "index.html"), page, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func runLabel(r bench.Result) string {
	if r.Mode == "" {
		return "run"
	}
	return r.Mode
}

// fileSafe keeps letters, digits and '-' of s, for file names.
func fileSafe(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "run"
	}
	return b.String()
}

// CommandLine is args (os.Args) as one shell command: the program by its
// base name (`go run` builds it at a temporary path), each argument
// single-quoted when the shell would otherwise split or expand it.
func CommandLine(args []string) string {
	if len(args) == 0 {
		return ""
	}
	out := []string{filepath.Base(args[0])}
	for _, a := range args[1:] {
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=,:@+%", c))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Machine describes this machine: OS and architecture, CPU model and
// count, memory, Go version (what it can read; Linux gives the most).
func Machine() string {
	parts := []string{runtime.GOOS + "/" + runtime.GOARCH}
	cpu := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu += " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
	}
	parts = append(parts, cpu)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			var kb uint64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				parts = append(parts, fmt.Sprintf("%.1f GiB memory", float64(kb)/(1<<20)))
				break
			}
		}
	}
	parts = append(parts, runtime.Version())
	return strings.Join(parts, ", ")
}

// modes lists the runs' modes in order, each once.
func modes(runs []bench.Result) []string {
	var out []string
	for _, r := range runs {
		if !slices.Contains(out, runLabel(r)) {
			out = append(out, runLabel(r))
		}
	}
	return out
}
