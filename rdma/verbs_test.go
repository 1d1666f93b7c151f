package rdma_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

func TestOpcodeAndStatusNames(t *testing.T) {
	for op, want := range map[rdma.Opcode]string{rdma.OpRead: "read", rdma.OpWrite: "write", rdma.OpCompareAndSwap: "cas", rdma.OpFetchAndAdd: "faa", 77: "opcode(77)"} {
		if op.String() != want {
			t.Errorf("Opcode(%d).String() = %q, want %q", uint8(op), op.String(), want)
		}
	}
	if rdma.OpRead.IsAtomic() || rdma.OpWrite.IsAtomic() || !rdma.OpCompareAndSwap.IsAtomic() || !rdma.OpFetchAndAdd.IsAtomic() {
		t.Error("IsAtomic is wrong")
	}
	if rdma.StatusRemoteAccessError.String() != "remote access error" || rdma.Status(99).String() != "status(99)" {
		t.Error("Status.String is wrong")
	}
}

func TestCompletionErrors(t *testing.T) {
	if err := (rdma.Completion{Status: rdma.StatusSuccess}).Err(); err != nil {
		t.Fatalf("successful completion has error %v", err)
	}
	sentinels := map[rdma.Status]error{
		rdma.StatusRemoteAccessError:    rdma.ErrRemoteAccess,
		rdma.StatusRemoteInvalidRequest: rdma.ErrInvalidRequest,
		rdma.StatusLocalLengthError:     rdma.ErrLength,
		rdma.StatusTransportError:       rdma.ErrConnectionLost,
		rdma.StatusFlushed:              rdma.ErrFlushed,
	}
	for st, want := range sentinels {
		err := rdma.Completion{ID: 42, Op: rdma.OpWrite, Status: st}.Err()
		if !errors.Is(err, want) {
			t.Errorf("status %s: %v does not match %v", st, err, want)
		}
		for other, o := range sentinels {
			if other != st && errors.Is(err, o) {
				t.Errorf("status %s also matches %v", st, o)
			}
		}
		if !strings.Contains(err.Error(), "42") || !strings.Contains(err.Error(), "write") {
			t.Errorf("error %q does not name the work request", err)
		}
	}
	if err := (rdma.Completion{Status: 99}).Err(); err == nil || errors.Unwrap(err) == nil {
		t.Errorf("unknown status: %v", err)
	}
	cs := []rdma.Completion{{ID: 1}, {ID: 2, Status: rdma.StatusFlushed}, {ID: 3, Status: rdma.StatusTransportError}}
	var ce *rdma.CompletionError
	if err := rdma.FirstError(cs); !errors.As(err, &ce) || ce.ID != 2 {
		t.Errorf("FirstError = %v, want work request 2's", err)
	}
	if rdma.FirstError(cs[:1]) != nil {
		t.Error("FirstError of successes is not nil")
	}
}

func TestRegionContains(t *testing.T) {
	r := rdma.Region{Addr: 4096, Length: 64}
	cases := []struct {
		addr, n uint64
		want    bool
	}{
		{4096, 64, true}, {4096, 0, true}, {4160, 0, true}, {4159, 1, true},
		{4095, 1, false}, {4160, 1, false}, {4100, 64, false}, {4096, 65, false},
		{math.MaxUint64, 2, false}, {math.MaxUint64 - 7, 8, false}, {0, math.MaxUint64, false},
		{4100, math.MaxUint64, false},
	}
	for _, tc := range cases {
		if got := r.Contains(tc.addr, tc.n); got != tc.want {
			t.Errorf("[%#x,+%d) in %+v = %v, want %v", tc.addr, tc.n, r, got, tc.want)
		}
	}
	top := rdma.Region{Addr: math.MaxUint64 - 15, Length: 16}
	if !top.Contains(math.MaxUint64-7, 8) || top.Contains(math.MaxUint64-7, 9) {
		t.Error("a region at the top of the address space")
	}
}

func TestStatsArithmetic(t *testing.T) {
	a := rdma.Stats{Reads: 1, Writes: 2, CAS: 3, CASFailed: 1, FAA: 4, BytesRead: 5, BytesWritten: 6, Doorbells: 7, Errors: 8}
	b := rdma.Stats{Reads: 10, Writes: 20, CAS: 30, CASFailed: 10, FAA: 40, BytesRead: 50, BytesWritten: 60, Doorbells: 70, Errors: 80}
	if got := a.Add(b).Sub(b); got != a {
		t.Fatalf("(a+b)-b = %+v, want %+v", got, a)
	}
	if a.Atomics() != 7 || a.Verbs() != 10 {
		t.Fatalf("Atomics %d Verbs %d", a.Atomics(), a.Verbs())
	}
	parent := rdma.NewCounters(nil)
	child := rdma.NewCounters(parent)
	wr := rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Compare: 1}
	child.Doorbell()
	child.Record(&wr, rdma.Completion{Value: 2})
	child.Record(&wr, rdma.Completion{Value: 1})
	child.Record(&wr, rdma.Completion{Status: rdma.StatusRemoteAccessError})
	want := rdma.Stats{CAS: 3, CASFailed: 1, Doorbells: 1, Errors: 1}
	if child.Snapshot() != want || parent.Snapshot() != want {
		t.Fatalf("child %+v parent %+v, want %+v", child.Snapshot(), parent.Snapshot(), want)
	}
}

func TestQPConfigDefaults(t *testing.T) {
	if got := (rdma.QPConfig{}).WithDefaults().SendQueueDepth; got != rdma.DefaultSendQueueDepth {
		t.Fatalf("default SendQueueDepth = %d", got)
	}
	if got := (rdma.QPConfig{SendQueueDepth: 3}).WithDefaults().SendQueueDepth; got != 3 {
		t.Fatalf("SendQueueDepth 3 became %d", got)
	}
}
