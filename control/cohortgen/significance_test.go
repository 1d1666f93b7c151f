package cohortgen

import (
	"slices"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// TestComponents: a refinement part with no edge between two of its
// halves becomes two cohorts.
func TestComponents(t *testing.T) {
	req := &RefineRequest{KGs: make([]control.KeyGroup, 6),
		Edges: []RefineEdge{{0, 1, 5}, {2, 3, 5}, {3, 4, 1}}}
	got := components([][]int32{{0, 1, 2, 3}, {4, 5}}, req)
	want := [][]int32{{0, 1}, {2, 3}, {4}, {5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("components = %v, want %v", got, want)
	}
}

// TestDropStrays: a key group whose part holds under strayShare of its
// connection outside the region becomes a singleton, unless it has the
// part's clear home.
func TestDropStrays(t *testing.T) {
	req := &RefineRequest{KGs: make([]control.KeyGroup, 3), W: []float64{10, 10, 1},
		Edges: []RefineEdge{{0, 1, 10}, {1, 2, 1}}, Out: []float64{0, 0, 10}, Home: []int{0, 0, 1}}
	got := dropStrays([][]int32{{0, 1, 2}}, req)
	if want := [][]int32{{2}, {0, 1}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("stray of another home: %v, want %v", got, want)
	}
	req.Home[2] = 0
	got = dropStrays([][]int32{{0, 1, 2}}, req)
	if want := [][]int32{{0, 1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("stray of the same home: %v, want %v", got, want)
	}
}
