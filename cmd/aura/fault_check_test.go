package main

import (
	"testing"

	"github.com/aura-runtime/aura/messages"
)

// TestFaultExplainDiff: the balance check's handling of transfers whose
// outcome is unknown — each may have applied once or not at all — and of
// differences nothing explains (a lost or duplicated transfer).
func TestFaultExplainDiff(t *testing.T) {
	tr := func(from, to uint64, amount int64) *messages.BankTransfer {
		return &messages.BankTransfer{FromAccount: from, ToAccount: to, AmountCents: amount}
	}
	unsettled := []*messages.BankTransfer{tr(1, 2, 10), tr(2, 3, 5), tr(7, 8, 4), tr(9, 10, 6)}
	for _, c := range []struct {
		name    string
		diff    map[uint64]int64
		applied int
		left    int
	}{
		{"none applied", map[uint64]int64{}, 0, 0},
		{"one applied", map[uint64]int64{7: -4, 8: 4}, 1, 0},
		{"two linked applied", map[uint64]int64{1: -10, 2: 5, 3: 5}, 2, 0},
		{"one of a linked pair", map[uint64]int64{2: -5, 3: 5}, 1, 0},
		{"all applied", map[uint64]int64{1: -10, 2: 5, 3: 5, 7: -4, 8: 4, 9: -6, 10: 6}, 4, 0},
		{"applied twice: unexplained", map[uint64]int64{7: -8, 8: 8}, 0, 2},
		{"a lost commit elsewhere", map[uint64]int64{20: 3, 21: -3}, 0, 2},
		{"half a transfer", map[uint64]int64{9: -6}, 0, 1},
	} {
		diff := c.diff
		applied, err := explainDiff(diff, unsettled)
		if err != nil || applied != c.applied || len(diff) != c.left {
			t.Errorf("%s: applied %d, %d accounts unexplained (%v), err %v; want %d, %d", c.name, applied, len(diff), diff, err, c.applied, c.left)
		}
	}
	many := make([]*messages.BankTransfer, maxUnsettled+1)
	for i := range many {
		many[i] = tr(1, 2, int64(i+1))
	}
	if _, err := explainDiff(map[uint64]int64{}, many); err == nil {
		t.Errorf("%d linked unsettled transfers: no error", len(many))
	}
}
