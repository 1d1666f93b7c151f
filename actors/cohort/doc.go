// Package cohort will hold the cohort virtual actor: a set of key groups that
// is owned, moved and routed as one, addressed by its cohort id and activated
// on its owner compute node. An activation holds the cohort's key groups, its
// epoch, its lock table and its state machine
// (installing → active → frozen → draining → handed-off), and refuses to grant
// locks outside the active state (invariant I1 of the specification).
//
// Status: filled by the cluster-runtime and migration issues; no code yet.
package cohort
