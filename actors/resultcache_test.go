package actors

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/aura-runtime/aura/messages"
)

// TestResultCache: a recorded outcome comes back whole (counters, output)
// as a copy the caller may change; the cache keeps the newest capacity
// outcomes, evicting the oldest; a second record of an id keeps the first;
// a result that cannot be marshaled is reported, not half-recorded.
func TestResultCache(t *testing.T) {
	var c resultCache
	c.init(2)
	res := func(id uint64, cents int64) *messages.TxnResult {
		return &messages.TxnResult{TxnId: id, Outcome: messages.TxnOutcome_TXN_OUTCOME_COMMITTED, Node: "cn-1", Epoch: 4,
			Counters: &messages.TxnCounters{Reads: 3, MnCas: 1, LocksLocal: 2},
			Output:   &messages.TxnResult_BankAudit{BankAudit: &messages.BankAuditOutput{TotalCents: cents, Accounts: 10}}}
	}
	for id := uint64(1); id <= 3; id++ {
		if !c.put(id, res(id, int64(id)*100)) {
			t.Fatalf("put %d failed", id)
		}
	}
	if _, ok := c.get(1); ok {
		t.Fatal("the oldest outcome was not evicted at capacity 2")
	}
	got, ok := c.get(2)
	if !ok || !proto.Equal(got, res(2, 200)) {
		t.Fatalf("get(2) = %v, %v; want %v", got, ok, res(2, 200))
	}
	got.Replayed, got.Counters.Reads = true, 99
	if again, _ := c.get(2); !proto.Equal(again, res(2, 200)) {
		t.Fatalf("a caller's change reached the cache: %v", again)
	}
	c.put(3, res(3, 999))
	if got, _ := c.get(3); got.GetBankAudit().GetTotalCents() != 300 {
		t.Fatalf("a second record replaced the first: %v", got)
	}
	if _, ok := c.get(0); ok {
		t.Fatal("id 0 (no id) found")
	}
	bad := res(4, 400)
	bad.Error = "key \xff\xfe"
	if c.put(4, bad) {
		t.Fatal("a result with invalid UTF-8 reported recorded")
	}
	if _, ok := c.get(4); ok {
		t.Fatal("a result that could not be marshaled was recorded")
	}
	if _, ok := c.get(2); !ok {
		t.Fatal("a failed record evicted an outcome")
	}
}

// TestNodeConfigRejectsInvalidUTF8Name: every result carries the node's
// name, and a name that is not valid UTF-8 would make every result
// impossible to marshal, for the wire and for replay.
func TestNodeConfigRejectsInvalidUTF8Name(t *testing.T) {
	c := DefaultNodeConfig("cn-\xff")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("Validate() = %v, want an invalid UTF-8 error", err)
	}
	if err := DefaultNodeConfig("cn-1").Validate(); err != nil {
		t.Fatalf("a valid name refused: %v", err)
	}
}
