package occ

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
	"github.com/aura-runtime/aura/txn"
)

// TestConnectionLossMidTransaction injects memory-node connection failures
// into every phase of concurrent bank transactions: posts that fail, and work
// requests that fail before or after being applied (outcome unknown to the
// coordinator). Transactions must abort cleanly or commit — the history stays
// strictly serializable, the total is conserved, and no lock is left held.
// (Dropped completions are not injected: a reliable-connected queue pair
// delivers a completion or an error, never silence.)
func TestConnectionLossMidTransaction(t *testing.T) {
	var fdev *faulty.Device
	f := newFixtureOn(t, nil, func(d rdma.Device) rdma.Device {
		fdev = faulty.Wrap(d, faulty.Random(7, faulty.Probabilities{FailUnapplied: 0.02, FailApplied: 0.02, FailPost: 0.02}))
		return fdev
	})
	history := runBankHistory(t, f, 4, 150, 11)
	faults := fdev.Faults()
	if faults.Total() < 20 {
		t.Fatalf("only %d faults injected: %+v", faults.Total(), faults)
	}
	if res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second); res != porcupine.Ok {
		t.Fatalf("history under faults is %s", res)
	}
	// Nothing half-written is visible and nothing stays locked: read every
	// account's slot directly on the memory node.
	layout, _ := f.engine.Layout().Table(accounts)
	qp, err := f.mem.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := &Coordinator{e: f.engine, qp: qp, locker: NewCASLocker(qp)}
	defer c.Close()
	var total int64
	mustCommit(t, c, func(tx txn.Tx) error {
		total = 0
		for k := range uint64(nAccounts) {
			v, err := tx.Get(ref(k))
			if err != nil {
				return err
			}
			total += int64(u64le(v))
		}
		return nil
	})
	if total != 100*nAccounts {
		t.Fatalf("total %d after faults, want %d", total, 100*nAccounts)
	}
	buf := make([]byte, layout.Buckets*layout.BucketSize)
	cs, err := rdma.Exec(context.Background(), qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: layout.Region.RKey, RemoteAddr: layout.Region.Addr, Local: buf})
	if err != nil || rdma.FirstError(cs) != nil {
		t.Fatal(err, rdma.FirstError(cs))
	}
	for off := uint64(0); off < uint64(len(buf)); off += layout.SlotSize {
		if s := layout.DecodeSlot(buf[off:]); s.Lock != 0 {
			t.Errorf("slot at offset %d left locked (%#x) after faults", off, s.Lock)
		}
	}
	t.Logf("%d transactions completed under %+v", len(history), faults)
}

func u64le(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
