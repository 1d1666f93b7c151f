// Package headless runs Debian's headless Chromium for tests that check what
// a person would see: the report's page and a node's live dashboard. It
// finds the browser (a test is skipped without it, and fails where $CI is
// set, since .ci/run installs it), runs it with a time bound, and checks a
// screenshot for rendered graphics.
package headless

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Timeout bounds one Chromium run: a cold start takes 1–3 s on a loaded
// 2-core machine, a page with a virtual-time budget a few more.
const Timeout = 30 * time.Second

// maxStderrLines bounds the browser's stderr quoted in a failure.
const maxStderrLines = 20

// Chromium returns the browser's path. Without one the test is skipped,
// unless $CI is set (.ci/run installs it), where it fails.
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("chromium is not installed (.ci/run installs it)")
	}
	tb.Skip("chromium is not installed")
	return ""
}

// Run opens url in headless Chromium (bin, from Chromium) with a fresh
// profile, a window of windowSize ("W,H") and extra flags (--dump-dom,
// --screenshot=FILE, --virtual-time-budget=MS, ...), and returns its
// stdout: the DOM with --dump-dom. A failure or a run past Timeout fails
// the test with the end of the browser's stderr.
func Run(tb testing.TB, bin, url, windowSize string, flags ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + tb.TempDir(), "--window-size=" + windowSize}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	// The context kills the browser's main process; its children may hold
	// the output pipes: stop waiting for them shortly after.
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		tb.Fatalf("chromium %v: %v\n%s", flags, err, strings.Join(lines[max(0, len(lines)-maxStderrLines):], "\n"))
	}
	return string(out)
}

// CheckColored decodes the PNG screenshot at path and fails the test if it
// has fewer than want colored pixels on a 2-pixel grid (a channel spread
// above 1/8: plot lines, grid cells, not grey text). A page that rendered
// only its text has a few hundred in a screenshot of 1,200 × 1,800 pixels;
// one with its images or charts several thousand. It returns the count.
func CheckColored(tb testing.TB, path string, want int) int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("screenshot %s: %v", path, err)
	}
	r := img.Bounds()
	colored := 0
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if max(cr, cg, cb)-min(cr, cg, cb) > 0x2000 {
				colored++
			}
		}
	}
	if colored < want {
		tb.Errorf("screenshot %s (%v) has %d colored pixels, want at least %d: its graphics did not render", path, r.Size(), colored, want)
	}
	return colored
}
