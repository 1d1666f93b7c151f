package rdmatest

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWordModelStep(t *testing.T) {
	cases := []struct {
		state  uint64
		in     WordInput
		out    uint64
		ok     bool
		states uint64
	}{
		{5, WordInput{Kind: WordRead}, 5, true, 5},
		{5, WordInput{Kind: WordRead}, 6, false, 5},
		{5, WordInput{Kind: WordWrite, Arg1: 9}, 0, true, 9},
		{5, WordInput{Kind: WordCAS, Arg1: 5, Arg2: 7}, 5, true, 7},
		{5, WordInput{Kind: WordCAS, Arg1: 4, Arg2: 7}, 5, true, 5},
		{5, WordInput{Kind: WordCAS, Arg1: 4, Arg2: 7}, 4, false, 5},
		{math.MaxUint64, WordInput{Kind: WordFAA, Arg1: 2}, math.MaxUint64, true, 1},
		{3, WordInput{Kind: WordFAA, Arg1: 2}, 4, false, 3},
		{3, WordInput{Kind: 0}, 3, false, 3},
	}
	for _, tc := range cases {
		ok, next := WordModel.Step(tc.state, tc.in, tc.out)
		if ok != tc.ok || (ok && next.(uint64) != tc.states) {
			t.Errorf("state %d, %s -> %d: (%v, %v), want (%v, %d)", tc.state, tc.in, tc.out, ok, next, tc.ok, tc.states)
		}
	}
}

func TestCheckHistoryPartitionsByWord(t *testing.T) {
	h := []porcupine.Operation{
		{ClientId: 0, Input: WordInput{Word: 0, Kind: WordWrite, Arg1: 1}, Call: 0, Return: 10},
		{ClientId: 1, Input: WordInput{Word: 1, Kind: WordRead}, Output: uint64(0), Call: 20, Return: 30},
		{ClientId: 1, Input: WordInput{Word: 0, Kind: WordRead}, Output: uint64(1), Call: 40, Return: 50},
	}
	if got := CheckHistory(h, 10*time.Second); got != porcupine.Ok {
		t.Fatalf("valid history: %s", got)
	}
	h[1].Output = uint64(1) // word 1 was never written
	if got := CheckHistory(h, 10*time.Second); got != porcupine.Illegal {
		t.Fatalf("history reading word 0's value from word 1: %s", got)
	}
}
