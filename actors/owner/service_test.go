package owner

import (
	"testing"

	"github.com/aura-runtime/aura/messages"
)

func rec(k uint64) *messages.RecordRef { return &messages.RecordRef{Table: 1, Key: k} }

func TestServiceWire(t *testing.T) {
	tb, err := NewTable(Config{MaxKeysPerRequest: 3})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	s := NewService(tb, func() int64 { return now })
	if err := s.Do(func(t *Table) error { return t.Install(4, []uint64{1}, 2) }); err != nil {
		t.Fatal(err)
	}
	lock := func(txn, epoch, id uint64, keys ...uint64) *messages.LockReply {
		req := &messages.LockRequest{TxnId: txn, CohortId: 4, Epoch: epoch, Requester: "cn-1", RequestId: id}
		for _, k := range keys {
			req.Records = append(req.Records, rec(k))
		}
		return s.HandleLock(req)
	}
	if r := lock(10, 2, 1, 1, 2); r.Status != messages.LockStatus_LOCK_STATUS_OK || len(r.Granted) != 2 || r.Epoch != 2 || r.RequestId != 1 {
		t.Fatalf("grant: %v", r)
	}
	if r := lock(11, 3, 2, 3, 2); r.Status != messages.LockStatus_LOCK_STATUS_CONFLICT || r.ConflictIndex != 1 || r.HolderTxnId != 10 || len(r.Granted) != 1 {
		t.Fatalf("conflict: %v", r)
	}
	if r := lock(11, 1, 3, 5); r.Status != messages.LockStatus_LOCK_STATUS_STALE_EPOCH || r.Epoch != 2 {
		t.Fatalf("stale: %v", r)
	}
	if r := lock(11, 2, 4, 1, 2, 3, 4); r.Status != messages.LockStatus_LOCK_STATUS_ERROR || r.Error == "" {
		t.Fatalf("limit: %v", r)
	}
	if r := s.HandleLock(&messages.LockRequest{TxnId: 1, CohortId: 4, Epoch: 2, Records: []*messages.RecordRef{nil}}); r.Status != messages.LockStatus_LOCK_STATUS_ERROR {
		t.Fatalf("nil record: %v", r)
	}
	// Retransmission of request 1 after the holder moved on: same reply.
	if r := lock(10, 2, 1, 1, 2); r.Status != messages.LockStatus_LOCK_STATUS_OK || len(r.Granted) != 2 {
		t.Fatalf("retransmission: %v", r)
	}
	u := s.HandleUnlock(&messages.UnlockRequest{TxnId: 10, CohortId: 4, Epoch: 2, All: true, RequestId: 9})
	if u.Status != messages.LockStatus_LOCK_STATUS_OK || u.Released != 2 || u.RequestId != 9 {
		t.Fatalf("unlock: %v", u)
	}
	s.HandleUnlock(&messages.UnlockRequest{TxnId: 11, CohortId: 4, Epoch: 2, Records: []*messages.RecordRef{rec(3)}})
	if err := s.Do(func(t *Table) error {
		if err := t.Freeze(4, 2, now); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := lock(12, 2, 5, 1); r.Status != messages.LockStatus_LOCK_STATUS_RETRY || r.RetryAfterMicros == 0 || r.Epoch != 2 {
		t.Fatalf("frozen: %v", r)
	}
	if err := s.Do(func(t *Table) error { return t.Retire(4, 2, Moved{Owner: "cn-2", Epoch: 3}) }); err != nil {
		t.Fatal(err)
	}
	r := lock(12, 2, 6, 1)
	if r.Status != messages.LockStatus_LOCK_STATUS_MOVED || r.Moved.GetOwner() != "cn-2" || r.Moved.GetEpoch() != 3 || r.Moved.GetCohortId() != 4 {
		t.Fatalf("moved: %v", r)
	}
	u = s.HandleUnlock(&messages.UnlockRequest{TxnId: 12, CohortId: 4, Epoch: 2, All: true})
	if u.Status != messages.LockStatus_LOCK_STATUS_MOVED || u.Moved.GetOwner() != "cn-2" {
		t.Fatalf("unlock after retire: %v", u)
	}
	if r := s.HandleLock(&messages.LockRequest{TxnId: 1, CohortId: 99, Epoch: 3, Records: []*messages.RecordRef{rec(1)}}); r.Status != messages.LockStatus_LOCK_STATUS_STALE_EPOCH {
		t.Fatalf("unknown cohort: %v", r)
	}
}
