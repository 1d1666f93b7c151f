package store

import (
	"context"
	"errors"
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

func newDev(t *testing.T) *rdma.MemDevice {
	t.Helper()
	dev, err := rdma.NewMemDevice(rdma.NewMemory(256<<20), rdma.MemConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

func TestLoadMarker(t *testing.T) {
	ctx, dev := context.Background(), newDev(t)
	if err := CheckLoaded(ctx, dev); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("fresh node: %v", err)
	}
	if err := ClaimLoad(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := ClaimLoad(ctx, dev); !errors.Is(err, ErrAlreadyLoaded) {
		t.Fatalf("second claim: %v", err)
	}
	if err := CheckLoaded(ctx, dev); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("while loading: %v", err)
	}
	if err := MarkLoaded(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := CheckLoaded(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := ClaimLoad(ctx, dev); !errors.Is(err, ErrAlreadyLoaded) {
		t.Fatalf("claim after load: %v", err)
	}
}

func TestLoaderReaderSnapshotAgree(t *testing.T) {
	ctx, dev := context.Background(), newDev(t)
	schema := txn.Schema{Tables: []txn.Table{
		{ID: 1, Name: "a", ValueSize: 5, Capacity: 5000},
		{ID: 2, Name: "b", ValueSize: 100, Capacity: 300},
	}}
	layout, err := Create(ctx, dev, schema)
	if err != nil {
		t.Fatal(err)
	}
	// Registration is idempotent: a second compute node gets the same layout.
	again, err := Create(ctx, dev, schema)
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := layout.Table(1)
	tb, _ := again.Table(1)
	if ta.Region != tb.Region {
		t.Fatalf("second Create placed table a elsewhere: %+v vs %+v", ta.Region, tb.Region)
	}
	l, err := NewLoader(layout, dev)
	if err != nil {
		t.Fatal(err)
	}
	val := func(tbl txn.TableID, k uint64) []byte {
		size := 5
		if tbl == 2 {
			size = 100
		}
		v := make([]byte, size)
		for i := range v {
			v[i] = byte(k*7 + uint64(i) + uint64(tbl))
		}
		return v
	}
	for k := uint64(1); k <= 5000; k++ {
		if err := l.Insert(ctx, txn.Ref{Table: 1, Key: k * 1_000_003}, val(1, k*1_000_003)); err != nil {
			t.Fatal(err)
		}
	}
	for k := uint64(0); k < 300; k++ {
		if err := l.Insert(ctx, txn.Ref{Table: 2, Key: k}, val(2, k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Insert(ctx, txn.Ref{Table: 2, Key: 1}, make([]byte, 3)); !errors.Is(err, txn.ErrValueSize) {
		t.Fatalf("wrong size: %v", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(layout, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	snap := NewSnapshot(layout, dev)
	for _, ref := range []txn.Ref{{Table: 1, Key: 1_000_003}, {Table: 1, Key: 5000 * 1_000_003}, {Table: 2, Key: 0}, {Table: 2, Key: 299}, {Table: 2, Key: 300}, {Table: 1, Key: 4}} {
		v1, ok1, err1 := r.Get(ctx, ref)
		v2, ok2, err2 := snap.Get(ctx, ref)
		if err1 != nil || err2 != nil || ok1 != ok2 || string(v1) != string(v2) {
			t.Fatalf("%v: reader %v %v %v, snapshot %v %v %v", ref, v1, ok1, err1, v2, ok2, err2)
		}
		want := !(ref.Table == 2 && ref.Key == 300) && !(ref.Table == 1 && ref.Key == 4)
		if ok1 != want || (ok1 && string(v1) != string(val(ref.Table, ref.Key))) {
			t.Fatalf("%v: found %v value %v", ref, ok1, v1)
		}
	}
}

func TestTableFullIsTyped(t *testing.T) {
	ctx, dev := context.Background(), newDev(t)
	layout, err := Create(ctx, dev, txn.Schema{Tables: []txn.Table{{ID: 1, Name: "tiny", ValueSize: 8, Capacity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoader(layout, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	tl, _ := layout.Table(1)
	capacity := int(tl.Buckets) * SlotsPerBucket
	var last error
	for k := range uint64(capacity + 1) {
		if last = l.Insert(ctx, txn.Ref{Table: 1, Key: k}, make([]byte, 8)); last != nil {
			break
		}
	}
	if !errors.Is(last, txn.ErrTableFull) {
		t.Fatalf("inserting past every slot: %v", last)
	}
}

func TestLockWordKinds(t *testing.T) {
	tag := CASTag(5, 7)
	free, held := uint64(1)<<63|42, uint64(1)<<63|uint64(1)<<62|42
	if IsOwnerSentinel(tag) || IsFreeSentinel(tag) || IsFreeSentinel(0) {
		t.Fatalf("tag %#x or 0 taken for a sentinel", tag)
	}
	if !IsFreeSentinel(free) || IsFreeSentinel(held) || SentinelHeld(free) || !SentinelHeld(held) {
		t.Fatalf("free %#x / held %#x misclassified", free, held)
	}
}
