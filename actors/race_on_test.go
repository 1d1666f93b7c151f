//go:build race

package actors

// raceEnabled reports a -race build: tests whose assertions depend on the
// cluster learning within wall-clock seconds skip (the detector slows the
// data plane ten-fold; they run in the plain test pass).
const raceEnabled = true
