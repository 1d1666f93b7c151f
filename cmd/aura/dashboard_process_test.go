package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	headlessrun "github.com/aura-runtime/aura/internal/headless"
)

// headless runs Chromium on url with extra flags and returns its stdout
// (the DOM with --dump-dom). --virtual-time-budget lets the page's timers
// run that many milliseconds of virtual time (its polls included: virtual
// time waits for network fetches) before the DOM is dumped, in much less
// wall time.
func headless(t *testing.T, bin, url string, flags ...string) string {
	t.Helper()
	return headlessrun.Run(t, bin, url, "1400,1800", flags...)
}

// bodyAttr returns the body element's data-NAME attribute in a dumped DOM.
func bodyAttr(t *testing.T, dom, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<body[^>]*\sdata-` + name + `="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no data-%s on the body in the dumped DOM:\n%.2000s", name, dom)
	}
	return m[1]
}

func bodyInt(t *testing.T, dom, name string) int {
	t.Helper()
	v, err := strconv.Atoi(bodyAttr(t, dom, name))
	if err != nil {
		t.Fatalf("data-%s: %v", name, err)
	}
	return v
}

// dashTestToken is cn-2's bearer token in TestDashboardInHeadlessChromium.
const dashTestToken = "dashboard-test-token"

// TestDashboardInHeadlessChromium runs a memory node and three compute
// nodes with the management API, drives TPC-C until the planner has
// published owners, and opens the dashboard of the planner's node in
// headless Chromium: the rendered page lists the three members, draws a
// populated ownership grid and the planner's decisions, polls more than
// once within one load, and a second load shows more server-side samples
// (the page updates). A screenshot is taken and checked to hold the
// grid's and charts' colors. A node with --auth-token serves the page,
// which asks for the token instead of showing data, and renders the
// cluster once the token is typed into it (driven over the DevTools
// protocol).
func TestDashboardInHeadlessChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes and a browser")
	}
	bin := headlessrun.Chromium(t)
	start := time.Now()
	wl, wlArgs, mnAddr, _, _ := tpccOnMN(t, 6)
	common := append([]string{"--mn", mnAddr, "--nodes", "cn-1,cn-2,cn-3", "--test-timings", "--heartbeat", "50ms", "--tick", "50ms",
		"--coordinators", "4", "--log-level", "warn"}, wlArgs...)
	h1, h2 := freeAddr(t), freeAddr(t)
	n1 := startNode(t, append([]string{"--name", "cn-1", "--http", h1}, common...)...)
	n2 := startNode(t, append([]string{"--name", "cn-2", "--join", n1.gossip, "--http", h2, "--auth-token", dashTestToken}, common...)...)
	n3 := startNode(t, append([]string{"--name", "cn-3", "--join", n1.gossip}, common...)...)
	nodes := []*nodeProcess{n1, n2, n3}
	lc := startLoad(t, wl, clientSystem(t), 6, nodes)

	// Wait (bounded) until cn-1, the planner's node, has a map with
	// cohorts, three members and a few samples.
	base := "http://" + h1
	var st dashStateJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, s := dashStateOf(t, base, "")
		st = s
		if status == 200 && len(st.Members) == 3 && st.OwnerMap.Cohorts > 0 && st.SamplesTaken >= 3 && st.Planner != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cn-1's dashboard state after 30 s: %d, %d members, %d cohorts, %d samples", status, len(st.Members),
				st.OwnerMap.Cohorts, st.SamplesTaken)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("cluster learning: epoch %d, %d cohorts over %d key groups after %v", st.OwnerMap.Epoch, st.OwnerMap.Cohorts,
		st.OwnerMap.KeyGroups, time.Since(start).Round(time.Millisecond))

	// Load 1: 5 s of virtual time, the page polls every 2 s.
	dom := headless(t, bin, base+"/", "--dump-dom", "--virtual-time-budget=5000")
	if s := bodyAttr(t, dom, "status"); s != "ready" {
		t.Errorf("page status %q, want ready", s)
	}
	if n := bodyInt(t, dom, "members"); n != 3 || strings.Count(dom, `<tr class="member`) != 3 {
		t.Errorf("page shows %d members (%d rows), want 3", n, strings.Count(dom, `<tr class="member`))
	}
	for _, name := range []string{"cn-1", "cn-2", "cn-3"} {
		if !strings.Contains(dom, `data-name="`+name+`"`) {
			t.Errorf("page lists no member %s", name)
		}
	}
	cells := bodyInt(t, dom, "cells")
	if cells == 0 || strings.Count(dom, `class="cell`) != cells {
		t.Errorf("ownership grid: %d cells announced, %d drawn, want a populated grid", cells, strings.Count(dom, `class="cell`))
	}
	if !strings.Contains(dom, "★ planner") {
		t.Errorf("the planner's node is not marked")
	}
	if n := strings.Count(dom, `<tr class="decision `); n == 0 {
		t.Errorf("no planner decision listed on the planner's node")
	}
	if n := strings.Count(dom, `class="uplot`); n < 4 {
		t.Errorf("%d charts drawn, want 4", n)
	}
	polls := bodyInt(t, dom, "polls")
	if polls < 2 {
		t.Errorf("the page polled %d times in 5 s of virtual time, want ≥ 2", polls)
	}
	samples1 := bodyInt(t, dom, "samples")

	// Load 2, a little later: the server took more samples, and the
	// screenshot.
	time.Sleep(1500 * time.Millisecond)
	dom = headless(t, bin, base+"/dashboard", "--dump-dom", "--virtual-time-budget=3000")
	if samples2 := bodyInt(t, dom, "samples"); samples2 <= samples1 {
		t.Errorf("samples %d on the second load, %d on the first: the dashboard does not update", samples2, samples1)
	} else {
		t.Logf("page polled %d times in 5 s of virtual time; samples %d then %d", polls, samples1, samples2)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	headless(t, bin, base+"/dashboard", "--screenshot="+shot, "--virtual-time-budget=3000")
	if dir := os.Getenv("AURA_DASHBOARD_SHOT_DIR"); dir != "" {
		// For a person to look at: AURA_DASHBOARD_SHOT_DIR=DIR go test …
		if b, err := os.ReadFile(shot); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "dashboard.png"), b, 0o644)
		}
	}
	colored := headlessrun.CheckColored(t, shot, 2000)
	t.Logf("screenshot: %d colored sample pixels", colored)

	// The node with a token: the page loads and asks for it, shows no
	// data, and once the token is typed in, sends it and renders.
	checkTokenFlow(t, bin, "http://"+h2, dashTestToken, n2)
	lc.halt()
	stopNodes(t, nodes...)
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}
