//go:build race

package main

// raceEnabled reports a -race build. The test process drives the cluster's
// clients, and the detector slows them several-fold: fewer transactions are
// sampled per wall-clock planner tick, so what the cluster learns in a fixed
// time is asserted in the plain test pass only.
const raceEnabled = true
