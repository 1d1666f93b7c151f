package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/bench"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/internal/headless"
)

var testModes = []string{"mn-only", "static", "hash", "aura", "oracle"}

// syntheticRuns makes a deterministic run per mode: 40 samples of 4 CNs,
// and for aura OwnerMap samples whose ownership settles over time.
func syntheticRuns() []bench.Result {
	var runs []bench.Result
	for mi, mode := range testModes {
		r := bench.Result{Mode: mode, Workload: "tpcc", CNs: 4, DurationS: 8, Committed: uint64(10000 * (mi + 1)),
			ThroughputTPS: float64(1000 * (mi + 1)), LatencyUs: bench.Latency{P50: 100, P99: 900},
			AtomicPerTxn: 13.5 / float64(mi+1), OwnerRPCPer: 0.1, LocalHit: float64(mi) / 5,
			RemoteLockOps: 10 / float64(mi+1), AbortRate: 0.01,
			Checks: map[string]any{"tpcc_consistency": "pass", "details": map[string]string{"tpcc.a": "pass"}},
			Params: bench.Params{Seed: 1, Clients: 32, WarmupS: 2, MN: "embedded",
				Workload: map[string]any{"warehouses": 16}}}
		var m *control.OwnerMap
		for i := range 40 {
			s := bench.Sample{TS: 0.25 * float64(i+1), ThroughputTPS: float64(1000*(mi+1)) + 50*math.Sin(float64(i)),
				AtomicPerTxn: 13.5 / float64(mi+1), LocalHit: float64(mi) / 5, RemoteLockOps: 10 / float64(mi+1),
				CNTPS: []float64{100, 200, 300, float64(100 + 10*i)}}
			if mode != "mn-only" {
				s.Cohorts = 16
			}
			if mode == "aura" {
				s.Migrations = uint64(i / 4)
				// A new map every 5 samples: key groups join cohorts and
				// move between owners.
				if i%5 == 0 {
					m = &control.OwnerMap{Epoch: uint64(i/5 + 1)}
					for c := range 8 {
						p := control.Placement{Cohort: control.Cohort{ID: uint64(c + 1)}, Owner: (c + i/10) % 4}
						for k := range 20 + 10*(i/5) {
							p.KeyGroups = append(p.KeyGroups, uint64(c*1000+k))
						}
						m.Cohorts = append(m.Cohorts, p)
					}
				}
				s.Owners = bench.NextOwnerSample(r.Timeline, m)
			}
			r.Timeline = append(r.Timeline, s)
		}
		runs = append(runs, r)
	}
	return runs
}

var imgSrc = regexp.MustCompile(`<img[^>]*\ssrc="([^"]+)"`)

// checkReport asserts dir holds a complete report: index.html, every image
// it references present beside it and a valid PNG, each mode in the
// headline table.
func checkReport(t *testing.T, dir string, modes []string) []string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	srcs := imgSrc.FindAllStringSubmatch(html, -1)
	if len(srcs) == 0 {
		t.Fatal("index.html references no image")
	}
	var names []string
	for _, m := range srcs {
		name := m[1]
		if strings.Contains(name, "/") || strings.Contains(name, ":") {
			t.Errorf("image %q is not a file beside index.html", name)
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("image %s: %v", name, err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("image %s is not a PNG: %v", name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 || b.Dx() > 2000 || b.Dy() > 2000 {
			t.Errorf("image %s is %v", name, b)
		}
		names = append(names, name)
	}
	if strings.Contains(html, "http://") || strings.Contains(html, "https://") {
		t.Error("index.html references the network")
	}
	start := strings.Index(html, `<table id="headline">`)
	end := strings.Index(html[max(0, start):], "</table>")
	if start < 0 || end < 0 {
		t.Fatal("no headline table")
	}
	head := html[start : start+end]
	for _, m := range modes {
		if !strings.Contains(head, "<td>"+m+"</td>") {
			t.Errorf("headline table has no row for %s", m)
		}
	}
	var doc struct{ Runs []bench.Result }
	if b, err := os.ReadFile(filepath.Join(dir, "runs.json")); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(b, &doc); err != nil || len(doc.Runs) != len(modes) {
		t.Errorf("runs.json: %d runs, %v", len(doc.Runs), err)
	}
	return names
}

func TestReportFromSyntheticRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	in := Input{Runs: syntheticRuns(), Command: CommandLine([]string{"/tmp/x/aura", "bench", "--mode", "mn-only,static,hash,aura", "--label", "a b"}),
		Machine: "test machine"}
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	names := checkReport(t, dir, testModes)
	want := []string{"plot-throughput.png", "plot-atomics.png", "plot-local-hit.png", "plot-remote-locks.png",
		"plot-cohorts.png", "plot-migrations.png", "plot-cn-imbalance.png", "plot-cn-3-aura.png", "plot-owners-3-aura.png"}
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			t.Errorf("no %s among %v", w, names)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, s := range []string{"aura bench --mode mn-only,static,hash,aura --label &#39;a b&#39;", "test machine", "tps vs mn-only", "remote vs oracle", "0.50×"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("index.html lacks %q", s)
		}
	}

	// The same input renders the same bytes.
	again := filepath.Join(t.TempDir(), "again")
	if err := Write(again, in); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(names, "index.html", "runs.json") {
		a, _ := os.ReadFile(filepath.Join(dir, n))
		b, _ := os.ReadFile(filepath.Join(again, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two renderings of the same runs", n)
		}
	}
}

func TestReportDirectoryRule(t *testing.T) {
	runs := syntheticRuns()
	base := t.TempDir()

	// A non-empty directory that holds no report is refused, untouched.
	foreign := filepath.Join(base, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	if err := CheckDir(foreign); err == nil {
		t.Error("CheckDir accepted a non-empty directory without a report")
	}
	if err := Write(foreign, Input{Runs: runs}); err == nil {
		t.Error("Write wrote into a non-empty directory without a report")
	}
	if entries, _ := os.ReadDir(foreign); len(entries) != 1 {
		t.Errorf("refused directory changed: %d entries", len(entries))
	}
	// A file is refused.
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	if err := CheckDir(file); err == nil {
		t.Error("CheckDir accepted a file")
	}

	// An earlier report is replaced: its plots for runs that are gone are
	// removed, other files stay.
	dir := filepath.Join(base, "report")
	if err := Write(dir, Input{Runs: runs}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if err := CheckDir(dir); err != nil {
		t.Fatalf("CheckDir refused an earlier report: %v", err)
	}
	if err := Write(dir, Input{Runs: runs[:2]}); err != nil {
		t.Fatal(err)
	}
	checkReport(t, dir, testModes[:2])
	if _, err := os.Stat(filepath.Join(dir, "plot-owners-3-aura.png")); err == nil {
		t.Error("an earlier report's plot stayed")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("a file the report does not own changed: %q %v", b, err)
	}
}

func TestReportBounds(t *testing.T) {
	// A long timeline with many CNs and a large map renders with bounded
	// images and heat map.
	r := bench.Result{Mode: "aura", Workload: "tenant", CNs: 64}
	m := &control.OwnerMap{Epoch: 1}
	for c := range 2000 {
		p := control.Placement{Cohort: control.Cohort{ID: uint64(c + 1)}, Owner: c % 64}
		for k := range 5 {
			p.KeyGroups = append(p.KeyGroups, uint64(c*10+k))
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	for i := range 5000 {
		s := bench.Sample{TS: float64(i) / 10, ThroughputTPS: 1, CNTPS: make([]float64, 64)}
		if i%1000 == 0 {
			m.Epoch++
			s.Owners = bench.NextOwnerSample(r.Timeline, m)
			if n := len(s.Owners.KeyGroups); n != bench.MaxOwnerKeyGroups {
				t.Fatalf("owner sample of %d key groups", n)
			}
		}
		r.Timeline = append(r.Timeline, s)
	}
	g := ownerGridOf(r)
	if c, rows := g.Dims(); c > MaxHeatColumns || rows > bench.MaxOwnerKeyGroups {
		t.Errorf("heat map %d × %d", c, rows)
	}
	if n := len(timelineSeries([]bench.Result{r}, func(s bench.Sample) float64 { return s.ThroughputTPS })[0].xys); n > MaxPoints {
		t.Errorf("%d points in a line", n)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := Write(dir, Input{Runs: []bench.Result{r}}); err != nil {
		t.Fatal(err)
	}
	checkReport(t, dir, []string{"aura"})
}

func TestThin(t *testing.T) {
	for _, c := range []struct{ n, limit int }{{0, 10}, {1, 10}, {10, 10}, {11, 10}, {5000, 400}, {401, 400}} {
		idx := thin(c.n, c.limit)
		if len(idx) > c.limit || (c.n > 0 && (idx[0] != 0 || idx[len(idx)-1] != c.n-1)) {
			t.Errorf("thin(%d, %d) = %d indexes, first/last wrong or too many", c.n, c.limit, len(idx))
		}
	}
}

// TestReportScreenshot opens a report in headless Chromium (where it is
// installed, as .ci/run does) and checks that it renders its plots: the
// same page without its images has a few hundred colored pixels
// (anti-aliased text, the broken image icons), with them several thousand
// (the plots' lines).
func TestReportScreenshot(t *testing.T) {
	bin := headless.Chromium(t)
	dir := filepath.Join(t.TempDir(), "out")
	if err := Write(dir, Input{Runs: syntheticRuns(), Command: "aura bench", Machine: "test"}); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	headless.Run(t, bin, "file://"+filepath.Join(dir, "index.html"), "1200,3000", "--screenshot="+shot)
	headless.CheckColored(t, shot, 2000)
}
