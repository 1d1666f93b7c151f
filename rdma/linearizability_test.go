package rdma_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

// TestLinearizability runs more operations on fewer words than the
// conformance suite, so that atomics from different queue pairs contend.
// Run it repeatedly with: go test -race -run Linearizability -count 3 ./rdma
func TestLinearizability(t *testing.T) {
	cfg := rdmatest.LinearizabilityConfig{Workers: 8, OpsPerWorker: 400, Words: 2}
	t.Run("MemDevice", func(t *testing.T) {
		for seed := range int64(3) {
			cfg.Seed = seed + 1
			rdmatest.RunLinearizability(t, newMemDevice(t, 1<<20, nil), cfg)
		}
	})
	t.Run("MemDeviceCostModel", func(t *testing.T) {
		m := rdma.DefaultCostModel()
		cfg.Seed = 7
		rdmatest.RunLinearizability(t, newMemDevice(t, 1<<20, &m), cfg)
	})
}

type hop struct {
	client    int
	in        rdmatest.WordInput
	out       uint64
	call, ret int64
}

func history(ops ...hop) []porcupine.Operation {
	h := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		h[i] = porcupine.Operation{ClientId: o.client, Input: o.in, Output: o.out, Call: o.call, Return: o.ret}
	}
	return h
}

func rd(w int) rdmatest.WordInput { return rdmatest.WordInput{Word: w, Kind: rdmatest.WordRead} }
func wrt(w int, v uint64) rdmatest.WordInput {
	return rdmatest.WordInput{Word: w, Kind: rdmatest.WordWrite, Arg1: v}
}
func cas(w int, exp, nw uint64) rdmatest.WordInput {
	return rdmatest.WordInput{Word: w, Kind: rdmatest.WordCAS, Arg1: exp, Arg2: nw}
}
func faa(w int, add uint64) rdmatest.WordInput {
	return rdmatest.WordInput{Word: w, Kind: rdmatest.WordFAA, Arg1: add}
}

// The checker must be able to fail: fabricated histories that no sequential
// order explains are Illegal, and close variants that one does are Ok.
func TestCheckerRejectsNonLinearizableHistories(t *testing.T) {
	cases := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"read of a value never written", history(
			hop{0, wrt(0, 5), 0, 0, 10},
			hop{1, rd(0), 7, 20, 30},
		), porcupine.Illegal},
		{"two sequential CAS 0→1 both succeed", history(
			hop{0, cas(0, 0, 1), 0, 0, 10},
			hop{1, cas(0, 0, 1), 0, 20, 30},
		), porcupine.Illegal},
		{"lost FAA", history(
			hop{0, faa(0, 1), 0, 0, 10},
			hop{1, faa(0, 1), 0, 20, 30},
		), porcupine.Illegal},
		{"stale read after a completed write", history(
			hop{0, wrt(0, 5), 0, 0, 10},
			hop{1, rd(0), 0, 20, 30},
		), porcupine.Illegal},
		{"failed CAS reports a value the word never had", history(
			hop{0, faa(0, 2), 0, 0, 10},
			hop{1, cas(0, 0, 9), 1, 20, 30},
		), porcupine.Illegal},
		{"CAS outcome inconsistent with order", history(
			hop{0, wrt(0, 3), 0, 0, 10},
			hop{1, cas(0, 3, 4), 3, 20, 30}, // succeeded: word is 4 from here on
			hop{2, rd(0), 3, 40, 50},
		), porcupine.Illegal},
		{"words are independent", history(
			hop{0, wrt(0, 5), 0, 0, 10},
			hop{1, rd(1), 5, 20, 30},
		), porcupine.Illegal},
		// Controls: overlapping operations may take effect in either order.
		{"concurrent write and read of the old value", history(
			hop{0, wrt(0, 5), 0, 0, 30},
			hop{1, rd(0), 0, 10, 20},
		), porcupine.Ok},
		{"concurrent CAS, one wins", history(
			hop{0, cas(0, 0, 1), 0, 0, 30},
			hop{1, cas(0, 0, 2), 1, 5, 25},
			hop{2, rd(0), 1, 40, 50},
		), porcupine.Ok},
		{"FAA wraps", history(
			hop{0, wrt(0, ^uint64(0)), 0, 0, 10},
			hop{1, faa(0, 2), ^uint64(0), 20, 30},
			hop{2, rd(0), 1, 40, 50},
		), porcupine.Ok},
	}
	for _, tc := range cases {
		if got := rdmatest.CheckHistory(tc.h, 10*time.Second); got != tc.want {
			t.Errorf("%s: porcupine says %s, want %s", tc.name, got, tc.want)
		}
	}
}
