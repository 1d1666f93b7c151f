package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control"
)

// dashStateOf GETs /dashboard/state with token and decodes it.
func dashStateOf(t *testing.T, base, token string) (int, dashStateJSON) {
	t.Helper()
	var st dashStateJSON
	status, b := get(t, base+dashboardStatePath, token)
	if status == http.StatusOK {
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("state: %v in %s", err, b)
		}
	}
	return status, st
}

// dashStateJSON is the state document as a client decodes it (the shape
// docs/dashboard.md documents).
type dashStateJSON struct {
	Node         string `json:"node"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
	SamplesTaken uint64 `json:"samples_taken"`
	Members      []struct {
		Name      string   `json:"name"`
		Roles     []string `json:"roles"`
		Planner   bool     `json:"planner"`
		Leaving   bool     `json:"leaving"`
		Self      bool     `json:"self"`
		Slot      int      `json:"slot"`
		Cohorts   int      `json:"cohorts"`
		KeyGroups int      `json:"key_groups"`
	} `json:"members"`
	PlannerNode string           `json:"planner_node"`
	Planner     *json.RawMessage `json:"planner"`
	OwnerMap    struct {
		Epoch     uint64   `json:"epoch"`
		Roster    []string `json:"roster"`
		Cohorts   int      `json:"cohorts"`
		KeyGroups int      `json:"key_groups"`
		PerCell   int      `json:"per_cell"`
		Cells     []struct {
			KG     string `json:"kg"`
			Owner  int    `json:"o"`
			Cohort string `json:"c"`
			Mixed  bool   `json:"mixed"`
		} `json:"cells"`
		Fallback []int `json:"fallback"`
	} `json:"ownermap"`
	Local struct {
		Owned, Frozen int
		Stuck         bool `json:"stuck"`
	} `json:"local"`
	Series struct {
		T            []int64    `json:"t"`
		TPS          []float64  `json:"tps"`
		LocalHit     []*float64 `json:"local_hit"`
		AtomicPerTxn []*float64 `json:"atomic_per_txn"`
		OwnerChanges []int      `json:"owner_changes"`
		Migrations   []*int     `json:"migrations"`
	} `json:"series"`
}

// TestDashboardStateAndAuth serves the dashboard of an in-process node
// with a token: the page and its assets load without it (they hold no
// cluster data), the state needs it, / redirects to the page, and the
// state shows the members, the installed map as a grid with its roster,
// and a series that grows by one sample per sample taken, bounded by
// dashMaxSamples, with the owner changes between two maps.
func TestDashboardStateAndAuth(t *testing.T) {
	const token = "dash-secret-token"
	n := startMgmtNode(t, token)

	// The page and assets: open, no token in them.
	for _, p := range []string{dashboardPath, dashboardPath + "/"} {
		status, page := get(t, n.base+p, "")
		if status != http.StatusOK || !strings.Contains(string(page), "/dashboard/assets/dashboard.js") {
			t.Fatalf("GET %s: %d %.200s", p, status, page)
		}
	}
	for _, a := range []string{"dashboard.js", "dashboard.css", "uplot.min.js", "uplot.min.css", "uplot.LICENSE"} {
		if status, b := get(t, n.base+dashboardAssetsPath+a, ""); status != http.StatusOK || len(b) == 0 {
			t.Errorf("GET asset %s: %d, %d bytes", a, status, len(b))
		}
	}
	for _, bad := range []string{"index.html", "nope.js", "sub/x.js", "../dashboard.go", "..%2fdashboard.go"} {
		// Not found (a path the mux cleans leaves the assets and meets
		// the token check instead).
		if status, b := get(t, n.base+dashboardAssetsPath+bad, ""); status != http.StatusNotFound && status != http.StatusUnauthorized {
			t.Errorf("GET asset %q: %d %.100s, want 404", bad, status, b)
		}
	}
	noRedirect := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(n.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != dashboardPath {
		t.Errorf("GET /: %d Location %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), dashboardPath)
	}
	// The state: 401 without the token or with a wrong one.
	refusedBefore := n.ms.AuthFailures()
	if status, _ := dashStateOf(t, n.base, ""); status != http.StatusUnauthorized {
		t.Errorf("state without token: %d, want 401", status)
	}
	if status, _ := dashStateOf(t, n.base, "wrong"); status != http.StatusUnauthorized {
		t.Errorf("state with a wrong token: %d, want 401", status)
	}
	if n.ms.AuthFailures() != refusedBefore+2 {
		t.Errorf("refused requests counted %d, want %d", n.ms.AuthFailures(), refusedBefore+2)
	}
	if strings.Contains(n.logs.String(), token) {
		t.Errorf("the token appears in the node's log")
	}

	// A map: cohort 7 (three key groups) on cn-1, cohort 9 (one) on cn-2.
	m1 := &control.OwnerMap{Epoch: 1, Fallback: []uint8{0, 1, control.Unowned}, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 7, KeyGroups: []control.KeyGroup{10, 11, 12}}, Owner: 0},
		{Cohort: control.Cohort{ID: 9, KeyGroups: []control.KeyGroup{1 << 60}}, Owner: 1}}}
	n.install(t, m1)
	d := n.ms.dash
	d.sample(time.Now())
	_, st := dashStateOf(t, n.base, token)
	if st.Node != "cn-1" || st.Status != "ready" || len(st.Members) != 2 || st.SamplesTaken < 1 {
		t.Fatalf("state: %+v", st)
	}
	for _, mb := range st.Members {
		want := map[string]struct{ slot, cohorts, kgs int }{"cn-1": {0, 1, 3}, "cn-2": {1, 1, 1}}[mb.Name]
		if mb.Slot != want.slot || mb.Cohorts != want.cohorts || mb.KeyGroups != want.kgs || mb.Self != (mb.Name == "cn-1") {
			t.Errorf("member %+v, want slot %d, %d cohorts, %d key groups", mb, want.slot, want.cohorts, want.kgs)
		}
	}
	g := st.OwnerMap
	if g.Epoch != 1 || g.Cohorts != 2 || g.KeyGroups != 4 || g.PerCell != 1 || len(g.Cells) != 4 ||
		strings.Join(g.Roster, ",") != "cn-1,cn-2" || len(g.Fallback) != 3 || g.Fallback[2] != -1 {
		t.Fatalf("grid %+v", g)
	}
	// Cells in key-group order; 64-bit ids as strings, exact.
	if c := g.Cells[3]; c.KG != "1152921504606846976" || c.Owner != 1 || c.Cohort != "9" {
		t.Errorf("last cell %+v, want key group 2^60 of cohort 9 on owner 1", c)
	}
	if c := g.Cells[0]; c.KG != "10" || c.Owner != 0 || c.Cohort != "7" {
		t.Errorf("first cell %+v", c)
	}
	if st.Planner != nil && string(*st.Planner) != "null" {
		t.Errorf("a node hosting no planner shows planner decisions: %s", *st.Planner)
	}

	// Cohort 7 moves to cn-2 and cohort 9 is evicted: two owner changes
	// in the next sample.
	m2 := &control.OwnerMap{Epoch: 2, Fallback: m1.Fallback, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 7, KeyGroups: []control.KeyGroup{10, 11, 12}}, Owner: 1}}}
	n.install(t, m2)
	d.sample(time.Now())
	_, st = dashStateOf(t, n.base, token)
	last := len(st.Series.OwnerChanges) - 1
	if last < 1 || st.Series.OwnerChanges[last] != 2 {
		t.Errorf("owner changes %v, want 2 in the last sample", st.Series.OwnerChanges)
	}
	if len(st.Series.T) != len(st.Series.TPS) || len(st.Series.T) != len(st.Series.LocalHit) || len(st.Series.T) != len(st.Series.Migrations) {
		t.Errorf("series columns of different lengths: %+v", st.Series)
	}
	// Without transactions there is no ratio: null, not 0 or NaN.
	if v := st.Series.LocalHit[last]; v != nil {
		t.Errorf("local hit %v without any lock in the interval, want null", *v)
	}

	// The ring is bounded, oldest first.
	for range dashMaxSamples + 5 {
		d.sample(time.Now())
	}
	_, st = dashStateOf(t, n.base, token)
	if len(st.Series.T) != dashMaxSamples {
		t.Errorf("%d samples served, want the bound %d", len(st.Series.T), dashMaxSamples)
	}
	for i := 1; i < len(st.Series.T); i++ {
		if st.Series.T[i] < st.Series.T[i-1] {
			t.Fatalf("samples out of order at %d: %d after %d", i, st.Series.T[i], st.Series.T[i-1])
		}
	}

	// Leaving: not ready, no routing answers, but health, metrics and the
	// dashboard go on.
	n.ms.beginLeave()
	if status, _ := get(t, n.base+readyzPath, ""); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz while leaving: %d, want 503", status)
	}
	if status, _ := get(t, n.base+client.TopologyPath, token); status != http.StatusServiceUnavailable {
		t.Errorf("topology while leaving: %d, want 503", status)
	}
	for _, p := range []string{healthzPath, metricsPath, dashboardPath} {
		if status, _ := get(t, n.base+p, token); status != http.StatusOK {
			t.Errorf("%s while leaving: %d, want 200", p, status)
		}
	}
	if _, st = dashStateOf(t, n.base, token); st.Status != "leaving" {
		t.Errorf("dashboard status while leaving %q", st.Status)
	}
}

// TestDashboardGridIsBounded: a map with more key groups than
// dashGridCells is drawn at several key groups per cell, a cell's owner
// being the one most of its key groups have.
func TestDashboardGridIsBounded(t *testing.T) {
	d := &dashboard{}
	m := &control.OwnerMap{Epoch: 5}
	kg := control.KeyGroup(0)
	for c := range 200 {
		p := control.Placement{Cohort: control.Cohort{ID: control.CohortID(c)}, Owner: c % 3}
		for range 30 {
			p.KeyGroups = append(p.KeyGroups, kg)
			kg++
		}
		m.Cohorts = append(m.Cohorts, p)
	}
	g := d.gridFor(m, []string{"a", "b", "c"})
	if g.KeyGroups != 6000 || len(g.Cells) > dashGridCells || g.PerCell != 6 || len(g.Cells) != 1000 {
		t.Fatalf("grid of 6,000 key groups: %d cells of %d, want ≤ %d", len(g.Cells), g.PerCell, dashGridCells)
	}
	// Cells of 6 inside one cohort of 30: its owner, not mixed.
	if c := g.Cells[5]; c.Owner != 1 || c.Mixed || c.Cohort != 1 {
		t.Errorf("cell 5 %+v, want cohort 1's owner 1", c)
	}
	if again := d.gridFor(m, []string{"a", "b", "c"}); &again.Cells[0] != &g.Cells[0] {
		t.Errorf("grid rebuilt for the same map")
	}
}

// TestDashboardAssetsAreSelfContained: every asset the page loads is
// embedded and referenced by an absolute path on the node; nothing points
// at another host (the dashboard must work offline).
func TestDashboardAssetsAreSelfContained(t *testing.T) {
	page, err := fs.ReadFile(dashboardFiles, "dashboard/index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	if len(refs) < 4 {
		t.Fatalf("page references %d assets", len(refs))
	}
	for _, r := range refs {
		name, ok := strings.CutPrefix(r[1], dashboardAssetsPath)
		if !ok {
			t.Errorf("page references %q outside %s", r[1], dashboardAssetsPath)
			continue
		}
		if _, err := fs.Stat(dashboardFiles, "dashboard/"+name); errors.Is(err, fs.ErrNotExist) {
			t.Errorf("page references %q, which is not embedded", r[1])
		}
	}
	for _, f := range []string{"dashboard.js", "dashboard.css", "uplot.min.css"} {
		b, _ := fs.ReadFile(dashboardFiles, "dashboard/"+f)
		if regexp.MustCompile(`(?i)(url\(\s*['"]?(https?:)?//|@import|fetch\(\s*["']https?:|https?://)`).Match(b) {
			t.Errorf("%s refers to another host", f)
		}
	}
}
