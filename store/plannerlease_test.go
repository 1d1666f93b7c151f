package store

import (
	"context"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

// TestLeaseWordIsOneWordForEveryNode: two nodes' LeaseWords on one memory
// node name the same word, zero on a fresh memory node, and CAS there as
// the memory node's atomic does (the previous value back, the swap only on
// a match).
func TestLeaseWordIsOneWordForEveryNode(t *testing.T) {
	ctx := context.Background()
	mem := rdma.NewMemory(1 << 20)
	var ws []*LeaseWord
	for range 2 {
		dev, err := rdma.NewMemDevice(mem, rdma.MemConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		w, err := NewLeaseWord(ctx, dev)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ws = append(ws, w)
	}
	if v, err := ws[0].Load(ctx); err != nil || v != 0 {
		t.Fatalf("fresh word: %d, %v", v, err)
	}
	if old, err := ws[0].CompareAndSwap(ctx, 0, 7); err != nil || old != 0 {
		t.Fatalf("CAS 0→7: old %d, %v", old, err)
	}
	if old, err := ws[1].CompareAndSwap(ctx, 0, 9); err != nil || old != 7 {
		t.Fatalf("CAS 0→9 over 7: old %d, %v", old, err)
	}
	if v, err := ws[1].Load(ctx); err != nil || v != 7 {
		t.Fatalf("the other node reads %d, %v; want 7", v, err)
	}
}
