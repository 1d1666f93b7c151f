// Package planner will hold the planner singleton actor: it aggregates the
// nodes' ACCESS_SUMMARY heartbeats into the decayed global access graph, runs
// the cohort generator and the Benefit ownership planner every tick, drives
// migrations through the transfer controller, and publishes each new OwnerMap
// epoch.
//
// Status: the control-plane issue provides the pure packages it runs; the
// cluster-runtime issue provides the actor. No code yet.
package planner
