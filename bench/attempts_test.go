package bench

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/messages"
)

// TestErrorsAreRetriedWithTheSameID: an embedded run retries a transaction
// whose attempt ended in ERROR or got no answer — the same transaction (its
// id is the message's), the next attempt number, at most maxErrorRetries
// times — and says what the last error was; a refusal fails the
// transaction at once.
func TestErrorsAreRetriedWithTheSameID(t *testing.T) {
	outcome := func(o messages.TxnOutcome) *messages.TxnResult {
		return &messages.TxnResult{Outcome: o, Node: "cn-1", Error: "owner RPC: unreachable"}
	}
	timeout := errors.New("node cn-1: submit: future: timeout")
	for _, tc := range []struct {
		name    string
		answers []func() (*messages.TxnResult, error)
		// want: committed, failed, errors, attempts made
		committed, failed, errs uint64
		attempts                int
		last                    string
	}{
		{name: "error then commit", answers: []func() (*messages.TxnResult, error){
			func() (*messages.TxnResult, error) { return outcome(messages.TxnOutcome_TXN_OUTCOME_ERROR), nil },
			func() (*messages.TxnResult, error) { return nil, timeout },
			func() (*messages.TxnResult, error) { return outcome(messages.TxnOutcome_TXN_OUTCOME_COMMITTED), nil },
		}, committed: 1, errs: 2, attempts: 3, last: "attempt 2: node cn-1: submit: future: timeout"},
		{name: "errors past the bound", answers: []func() (*messages.TxnResult, error){
			func() (*messages.TxnResult, error) { return nil, timeout },
		}, failed: 1, errs: maxErrorRetries + 1, attempts: maxErrorRetries + 1, last: "future: timeout"},
		{name: "refused", answers: []func() (*messages.TxnResult, error){
			func() (*messages.TxnResult, error) { return outcome(messages.TxnOutcome_TXN_OUTCOME_REJECTED), nil },
		}, failed: 1, errs: 1, attempts: 1, last: "TXN_OUTCOME_REJECTED on cn-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{byType: map[string]*TypeStats{}}
			msg := &messages.TxnSubmit{TxnId: 42}
			var ids []uint64
			r.attempts(msg, rand.New(rand.NewPCG(1, 2)), 100, func() (*messages.TxnResult, error) {
				ids = append(ids, uint64(msg.GetAttempt()))
				return tc.answers[min(len(ids), len(tc.answers))-1]()
			}, retryErrors(make(chan struct{})))
			s := r.c.snap()
			if s.committed != tc.committed || s.failed != tc.failed || r.c.errs.Load() != tc.errs || len(ids) != tc.attempts {
				t.Fatalf("committed %d failed %d errors %d attempts %d; want %d %d %d %d",
					s.committed, s.failed, r.c.errs.Load(), len(ids), tc.committed, tc.failed, tc.errs, tc.attempts)
			}
			for i, a := range ids {
				if a != uint64(i+1) {
					t.Fatalf("attempt numbers %v, want 1, 2, …: a node tells a retry from a first attempt by them", ids)
				}
			}
			// A transaction is counted once by type, whatever its attempts.
			committed := uint64(0)
			for _, ts := range r.byType {
				committed += ts.Committed
			}
			if committed != tc.committed {
				t.Fatalf("%d committed by type, want %d", committed, tc.committed)
			}
			if !strings.Contains(r.lastError(), tc.last) || !strings.HasPrefix(r.lastError(), "txn 42 ") {
				t.Fatalf("last error %q, want it to name txn 42 and contain %q", r.lastError(), tc.last)
			}
		})
	}
	// Once the run is over, an error ends the transaction uncounted: it did
	// not commit (ERROR) or it finishes on its node on its own.
	r := &runner{byType: map[string]*TypeStats{}}
	stop := make(chan struct{})
	close(stop)
	r.attempts(&messages.TxnSubmit{TxnId: 7}, rand.New(rand.NewPCG(1, 2)), 100, func() (*messages.TxnResult, error) {
		return nil, errors.New("unreachable")
	}, retryErrors(stop))
	if s := r.c.snap(); s.failed != 0 || s.committed != 0 || r.c.errs.Load() != 1 {
		t.Fatalf("after the run: %+v, %d errors; want nothing counted but the error", s, r.c.errs.Load())
	}
}
