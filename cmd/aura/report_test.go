package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var reportImg = regexp.MustCompile(`<img[^>]*\ssrc="([^"]+)"`)

// checkReportDir asserts dir holds a report whose every image exists beside
// index.html as a valid PNG and whose headline table has a row per mode.
func checkReportDir(t *testing.T, dir string, modes ...string) string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	imgs := reportImg.FindAllSubmatch(page, -1)
	if len(imgs) < 6 {
		t.Errorf("index.html shows %d images, want the 6 timeline plots at least", len(imgs))
	}
	for _, m := range imgs {
		b, err := os.ReadFile(filepath.Join(dir, string(m[1])))
		if err != nil {
			t.Errorf("image %s: %v", m[1], err)
			continue
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("image %s: %v", m[1], err)
		}
	}
	html := string(page)
	i := strings.Index(html, `<table id="headline">`)
	if i < 0 {
		t.Fatal("no headline table")
	}
	table := html[i : i+strings.Index(html[i:], "</table>")]
	for _, m := range modes {
		if !strings.Contains(table, "<td>"+m+"</td>") {
			t.Errorf("headline table has no row for %s", m)
		}
	}
	return html
}

// TestBenchReport runs a tiny bank comparison with --report and checks the
// report it writes, the aura run's ownership heat map among its plots.
func TestBenchReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"bench", "--quiet", "--workload", "bank", "--accounts", "2000", "--cns", "2", "--clients", "4",
		"--mode", "mn-only,aura", "--duration", "1500ms", "--warmup", "500ms", "--mn-size", "256MiB", "--report", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("aura bench --report: %v\n%s", err, out.String())
	}
	html := checkReportDir(t, dir, "mn-only", "aura")
	for _, want := range []string{"plot-owners-1-aura.png", "plot-cn-imbalance.png"} {
		if !strings.Contains(html, want) {
			t.Errorf("bench report lacks %s", want)
		}
	}
	if !strings.Contains(html, "aura bench") || !strings.Contains(html, "--report=") {
		t.Errorf("the command is missing from the report")
	}
}

// TestBenchReportRefusesDirectory: a non-empty directory that holds no
// report fails the command before anything runs.
func TestBenchReportRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"bench", "sim"} {
		cmd := newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{sub, "--quiet", "--workload", "bank", "--duration", "1h", "--report", dir})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--report") {
			t.Errorf("%s --report into a foreign directory: %v", sub, err)
		}
	}
}

// TestSimReport: aura sim writes the same report, with per-CN load.
func TestSimReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"sim", "--quiet", "--workload", "bank", "--accounts", "2000", "--cns", "2",
		"--mode", "mn-only,aura,oracle", "--duration", "1s", "--warmup", "500ms", "--report", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("aura sim --report: %v\n%s", err, out.String())
	}
	html := checkReportDir(t, dir, "mn-only", "aura", "oracle")
	for _, want := range []string{"plot-cn-imbalance.png", "plot-owners-1-aura.png", "remote vs oracle"} {
		if !strings.Contains(html, want) {
			t.Errorf("sim report lacks %s", want)
		}
	}
}

// TestProgressLiveLine: on a terminal the periodic lines rewrite one line,
// other lines print below it, and over-wide lines are cut to the width.
func TestProgressLiveLine(t *testing.T) {
	var buf bytes.Buffer
	l := &liveLine{w: &buf, width: func() int { return 40 }}
	for _, s := range []string{"loading bank tables…\n", "[aura 1.0s] committed 10  atomics/txn 0.50  local 75.0%\n",
		"[aura 2.0s] committed 20", "  atomics/txn 0.40  local 80.0% and a tail past the width\n", "checking bank consistency…\n",
		"[oracle 1.0s] committed 5\n"} {
		if _, err := l.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	l.end()
	l.end()
	want := "loading bank tables…\n" +
		"\r[aura 1.0s] committed 10  atomics/txn 0\x1b[K" +
		"\r[aura 2.0s] committed 20  atomics/txn 0\x1b[K" +
		"\nchecking bank consistency…\n" +
		"\r[oracle 1.0s] committed 5\x1b[K\n"
	if got := buf.String(); got != want {
		t.Errorf("live progress:\n got %q\nwant %q", got, want)
	}

	// Not a terminal: the writer is returned as it is.
	var plain bytes.Buffer
	w, end := liveProgress(&plain)
	if w != &plain {
		t.Error("a non-terminal writer was wrapped")
	}
	end()
	if w, _ := liveProgress(nil); w != nil {
		t.Error("quiet progress is not nil")
	}
}
