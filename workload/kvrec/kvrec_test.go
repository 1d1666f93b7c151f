package kvrec

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
)

const size = 40

var spec = &Spec{
	Name: "kvt",
	ValueSize: func(t txn.TableID) (int, bool) {
		return size, t == 1
	},
	Valid: func(r txn.Ref) error {
		if r.Key >= 100 {
			return errors.New("key out of range")
		}
		return nil
	},
}

func refs() func(func(txn.Ref) bool) {
	return func(yield func(txn.Ref) bool) {
		for k := range uint64(100) {
			if !yield(txn.Ref{Table: 1, Key: k}) {
				return
			}
		}
	}
}

func newStore(t *testing.T) *memtx.Store {
	t.Helper()
	s, err := memtx.New(txn.Schema{Tables: []txn.Table{{ID: 1, Name: "t", ValueSize: size, Capacity: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	for r := range refs() {
		if err := s.Insert(context.Background(), r, New(size, Record{Ref: r})); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func rr(k uint64) *messages.RecordRef { return &messages.RecordRef{Table: 1, Key: k} }

func kvMsg(reads []uint64, writes []uint64) *messages.TxnSubmit {
	kv := &messages.KVTxn{}
	for _, k := range reads {
		kv.Reads = append(kv.Reads, rr(k))
	}
	for _, k := range writes {
		kv.Writes = append(kv.Writes, &messages.KVWrite{Record: rr(k)})
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: kv}}
}

func TestEncodeDecode(t *testing.T) {
	for _, n := range []int{MinValueSize, 33, 39, 40, 100, 4096} {
		rec := Record{Ref: txn.Ref{Table: 7, Key: 1<<64 - 1}, Version: 42, Balance: -5}
		v := New(n, rec)
		got, err := Verify(rec.Ref, v)
		if err != nil || got != rec {
			t.Fatalf("size %d: got %+v, %v", n, got, err)
		}
		for i := range v {
			w := slices.Clone(v)
			w[i] ^= 0x10
			if _, err := Verify(rec.Ref, w); !errors.Is(err, ErrMalformed) {
				t.Fatalf("size %d: flipped byte %d not detected", n, i)
			}
		}
	}
	if _, err := Verify(txn.Ref{Table: 7, Key: 1}, New(32, Record{Ref: txn.Ref{Table: 7, Key: 2}})); !errors.Is(err, ErrMalformed) {
		t.Fatal("misplaced value not detected")
	}
	if _, err := Decode(make([]byte, 31)); !errors.Is(err, ErrMalformed) {
		t.Fatal("short value accepted")
	}
}

func TestProgramReadModifyWrite(t *testing.T) {
	s := newStore(t)
	msg := kvMsg([]uint64{5, 3, 5, 9}, []uint64{9, 2, 2, 7})
	res := &messages.TxnResult{}
	prog, err := Program(spec, msg, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(prog); err != nil {
		t.Fatal(err)
	}
	out := res.GetKv().GetReads()
	if len(out) != 4 {
		t.Fatalf("%d read results", len(out))
	}
	for i, k := range []uint64{5, 3, 5, 9} {
		if out[i].GetRecord().GetKey() != k || !out[i].GetFound() {
			t.Fatalf("read %d: %v", i, out[i])
		}
		rec, err := Verify(txn.Ref{Table: 1, Key: k}, out[i].GetValue())
		if err != nil || rec.Version != 0 {
			t.Fatalf("read %d: %+v %v (want the value before the write)", i, rec, err)
		}
	}
	// Writes: 2, 7, 9 in ascending order: deltas -2, +1, +1.
	want := map[uint64][2]int64{2: {1, -2}, 7: {1, 1}, 9: {1, 1}, 3: {0, 0}}
	for k, w := range want {
		v, _, _ := s.Get(context.Background(), txn.Ref{Table: 1, Key: k})
		rec, err := Verify(txn.Ref{Table: 1, Key: k}, v)
		if err != nil || int64(rec.Version) != w[0] || rec.Balance != w[1] {
			t.Errorf("key %d: %+v %v, want version %d balance %d", k, rec, err, w[0], w[1])
		}
	}
	for _, c := range CheckRecords(context.Background(), spec, s, refs()) {
		if c.Err != nil {
			t.Error(c.Err)
		}
	}
	fp := Footprint(msg)
	if !slices.Equal(fp.Writes, []txn.Ref{{Table: 1, Key: 2}, {Table: 1, Key: 7}, {Table: 1, Key: 9}}) || !slices.Equal(fp.Reads, []txn.Ref{{Table: 1, Key: 3}, {Table: 1, Key: 5}}) {
		t.Fatalf("footprint %+v", fp)
	}
	if h := Home(msg, func(r txn.Ref) uint64 { return r.Key * 10 }); h != 90 {
		t.Fatalf("home %d", h)
	}
}

func TestProgramRejects(t *testing.T) {
	bad := []*messages.TxnSubmit{
		{},
		{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{}}},
		kvMsg(nil, nil),
		kvMsg([]uint64{100}, nil),
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 2, Key: 1}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{nil}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Writes: []*messages.KVWrite{{Record: rr(1), Delete: true}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Writes: []*messages.KVWrite{{Record: rr(1), Value: []byte("x")}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Writes: []*messages.KVWrite{{}}}}},
		kvMsg(make([]uint64, MaxOps+1), nil),
	}
	for i, m := range bad {
		if _, err := Program(spec, m, nil); err == nil {
			t.Errorf("message %d accepted", i)
		}
	}
}

func TestProgramFailsOnMissingOrCorruptRecord(t *testing.T) {
	s := newStore(t)
	if err := s.Load(txn.Ref{Table: 1, Key: 4}, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	prog, err := Program(spec, kvMsg(nil, []uint64{4}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(prog); !errors.Is(err, ErrMalformed) {
		t.Fatalf("corrupt record: %v", err)
	}
	s2, _ := memtx.New(txn.Schema{Tables: []txn.Table{{ID: 1, Name: "t", ValueSize: size, Capacity: 100}}})
	prog, _ = Program(spec, kvMsg([]uint64{1}, []uint64{4}), nil)
	if err := s2.Run(prog); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	// A missing read is reported as not found, not an error.
	res := &messages.TxnResult{}
	prog, _ = Program(spec, kvMsg([]uint64{1}, nil), res)
	if err := s2.Run(prog); err != nil || res.GetKv().GetReads()[0].GetFound() {
		t.Fatalf("missing read: %v %v", err, res)
	}
}

func TestCheckRecordsFails(t *testing.T) {
	ctx := context.Background()
	check := func(s *memtx.Store) (records, conservation error) {
		cs := CheckRecords(ctx, spec, s, refs())
		if len(cs) != 2 || cs[0].Name != "kvt.records" || cs[1].Name != "kvt.conservation" {
			t.Fatalf("checks %+v", cs)
		}
		return cs[0].Err, cs[1].Err
	}
	s := newStore(t)
	if a, b := check(s); a != nil || b != nil {
		t.Fatal(a, b)
	}
	// A corrupted byte fails the records check.
	v, _, _ := s.Get(ctx, txn.Ref{Table: 1, Key: 10})
	v[30] ^= 1
	_ = s.Load(txn.Ref{Table: 1, Key: 10}, v)
	if a, _ := check(s); a == nil {
		t.Fatal("corrupt record passed")
	}
	// A well-formed record with a stray balance fails conservation only.
	s = newStore(t)
	_ = s.Load(txn.Ref{Table: 1, Key: 10}, New(size, Record{Ref: txn.Ref{Table: 1, Key: 10}, Version: 3, Balance: 7}))
	if a, b := check(s); a != nil || b == nil {
		t.Fatalf("stray balance: records %v, conservation %v", a, b)
	}
	// A missing record fails the records check.
	s, _ = memtx.New(txn.Schema{Tables: []txn.Table{{ID: 1, Name: "t", ValueSize: size, Capacity: 100}}})
	if a, _ := check(s); a == nil {
		t.Fatal("missing records passed")
	}
	// A cancelled context fails both.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range CheckRecords(cctx, spec, newStore(t), refs()) {
		if !errors.Is(c.Err, context.Canceled) {
			t.Fatalf("%s: %v", c.Name, c.Err)
		}
	}
}
