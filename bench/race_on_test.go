//go:build race

package bench

// raceEnabled reports a -race build: tests whose assertions depend on what
// the planner learns within wall-clock seconds skip (the detector slows the
// data plane ten-fold; they run in the plain test pass).
const raceEnabled = true
