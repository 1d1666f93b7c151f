package trace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload/kvrec"
)

const sample = `{"reads":[["ACCOUNT",1],["ACCOUNT",2]],"writes":[["HISTORY",100]]}

{"writes":[["ACCOUNT",1],["ACCOUNT",18446744073709551615]]}
{"reads":[["ORDERS",7]],"writes":[["ACCOUNT",2],["ORDERS",7]]}
   
{"reads":[["HISTORY",100],["HISTORY",100]],"writes":[["ACCOUNT",64],["ACCOUNT",1]]}
{"writes":[["ORDERS",8]]}
`

func fromString(t *testing.T, cfg Config, s string) *Workload {
	t.Helper()
	w, err := NewFromReader(cfg, strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func setup(t *testing.T, w *Workload) *memtx.Store {
	t.Helper()
	s, err := memtx.New(w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func checks(t *testing.T, w *Workload, s *memtx.Store) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, c := range w.Check(context.Background(), s) {
		out[c.Name] = c.Err
	}
	if _, ok := out["trace.records"]; !ok || len(out) != 2 {
		t.Fatalf("checks %v", out)
	}
	return out
}

func TestSchemaFromTrace(t *testing.T) {
	w := fromString(t, DefaultConfig(), sample)
	if w.Len() != 5 {
		t.Fatalf("%d transactions", w.Len())
	}
	if got := w.Tables(); !reflect.DeepEqual(got, []string{"HISTORY", "ACCOUNT", "ORDERS"}) {
		t.Fatalf("tables %v (writes are resolved before reads)", got)
	}
	s := w.Schema()
	want := []txn.Table{
		{ID: 1, Name: "HISTORY", ValueSize: 32, Capacity: 1},
		{ID: 2, Name: "ACCOUNT", ValueSize: 32, Capacity: 4},
		{ID: 3, Name: "ORDERS", ValueSize: 32, Capacity: 2},
	}
	if !reflect.DeepEqual(s.Tables, want) {
		t.Fatalf("schema %+v", s.Tables)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, line := range []int{1, 3, 4, 6, 7} {
		if w.LineOf(i) != line {
			t.Errorf("transaction %d from line %d, want %d", i, w.LineOf(i), line)
		}
	}
	// Line 6: duplicate read folded, written records ascending.
	kv := w.Message(3).GetKv()
	if len(kv.Reads) != 1 || kv.Reads[0].Key != 100 || len(kv.Writes) != 2 || kv.Writes[0].Record.Key != 1 || kv.Writes[1].Record.Key != 64 {
		t.Fatalf("message of line 6: %v", kv)
	}
	// Line 4: ORDERS 7 is read and written: only written.
	kv = w.Message(2).GetKv()
	if len(kv.Reads) != 0 || len(kv.Writes) != 2 {
		t.Fatalf("message of line 4: %v", kv)
	}
}

func TestReplayOnMemtx(t *testing.T) {
	w := fromString(t, DefaultConfig(), sample)
	s := setup(t, w)
	g := w.NewGenerator(123, 0)
	n := 0
	for msg := g.Next(); msg != nil; msg = g.Next() {
		res := &messages.TxnResult{}
		prog, err := w.Program(msg, res)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(prog); err != nil {
			t.Fatal(err)
		}
		if len(res.GetKv().GetReads()) != len(msg.GetKv().GetReads()) {
			t.Fatal("read results")
		}
		n++
	}
	if n != 5 {
		t.Fatalf("replayed %d", n)
	}
	// The max key was written once (line 3), ACCOUNT 1 twice.
	acct, _ := w.TableID("ACCOUNT")
	for key, version := range map[uint64]uint64{math.MaxUint64: 1, 1: 2, 2: 1, 64: 1} {
		r := txn.Ref{Table: acct, Key: key}
		v, ok, _ := s.Get(context.Background(), r)
		rec, err := kvrec.Verify(r, v)
		if !ok || err != nil || rec.Version != version {
			t.Errorf("ACCOUNT %d: %+v %v, want version %d", key, rec, err, version)
		}
	}
	for name, err := range checks(t, w, s) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestGeneratorStridingAndLoop(t *testing.T) {
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `{"writes":[["t",%d]]}`+"\n", i)
	}
	keys := func(g interface{ Next() *messages.TxnSubmit }, n int) []uint64 {
		var out []uint64
		for range n {
			m := g.Next()
			if m == nil {
				out = append(out, 99)
				continue
			}
			out = append(out, m.GetKv().Writes[0].Record.Key)
		}
		return out
	}
	cfg := DefaultConfig()
	cfg.Clients = 3
	w := fromString(t, cfg, b.String())
	if got := keys(w.NewGenerator(0, 1), 5); !reflect.DeepEqual(got, []uint64{1, 4, 7, 99, 99}) {
		t.Fatalf("client 1: %v", got)
	}
	if got := keys(w.NewGenerator(0, 3), 5); !reflect.DeepEqual(got, []uint64{0, 3, 6, 9, 99}) {
		t.Fatalf("client 3: %v", got)
	}
	g := w.NewGenerator(0, 2).(*Generator)
	if g.Remaining() != 3 {
		t.Fatalf("remaining %d", g.Remaining())
	}
	cfg.Loop = true
	w = fromString(t, cfg, b.String())
	if got := keys(w.NewGenerator(7, 2), 7); !reflect.DeepEqual(got, []uint64{2, 5, 8, 2, 5, 8, 2}) {
		t.Fatalf("looping client 2: %v", got)
	}
	cfg.Clients = 20
	w = fromString(t, cfg, b.String())
	if got := keys(w.NewGenerator(7, 15), 2); !reflect.DeepEqual(got, []uint64{99, 99}) {
		t.Fatalf("client beyond the trace: %v", got)
	}
}

func TestLineErrorsCarryLineNumbers(t *testing.T) {
	in := strings.Join([]string{
		`{"writes":[["t",1]]}`,
		``,
		`{"writes":[["t",-1]]}`, // 3
		`{"writes":[["t",2]]}`,
		`not json`, // 5
		"\r",
		`{"writes":[["t",2]]} trailing`, // 7
	}, "\n")
	_, err := NewFromReader(DefaultConfig(), strings.NewReader(in))
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(le.Err, ErrBadKey) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"line 3:", "line 5:", "line 7:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "line 6") || strings.Contains(err.Error(), "line 2:") {
		t.Errorf("blank lines reported: %v", err)
	}
	// CRLF line endings are fine.
	w := fromString(t, DefaultConfig(), "{\"writes\":[[\"t\",1]]}\r\n\r\n{\"reads\":[[\"t\",1]]}\r\n")
	if w.Len() != 2 || w.LineOf(1) != 3 {
		t.Fatal("CRLF")
	}
}

func TestLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLineBytes = 40
	long := `{"writes":[["t",1]],"reads":[["t",2],["t",3]]}` // 47 bytes
	_, err := NewFromReader(cfg, strings.NewReader("{\"writes\":[[\"t\",1]]}\n"+long+"\n{\"writes\":[[\"t\",1]]}\n"))
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("long line: %v", err)
	}
	// Exactly at the limit (CR not counted) is fine, also on the last line
	// without a newline.
	cfg.MaxLineBytes = len(long)
	if _, err := NewFromReader(cfg, strings.NewReader(long+"\r\n"+long)); err != nil {
		t.Fatal(err)
	}
	// A long line much larger than the read buffer.
	cfg.MaxLineBytes = 100
	_, err = NewFromReader(cfg, strings.NewReader(`{"writes":[["t",1]]}`+"\n"+strings.Repeat(" ", 1<<20)+"x\n"+`{"writes":[["t",1]]}`))
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("huge line: %v", err)
	}

	cfg = DefaultConfig()
	cfg.MaxOpsPerLine = 2
	_, err = NewFromReader(cfg, strings.NewReader(`{"writes":[["t",1],["t",2],["t",3]]}`))
	if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, ErrTooManyOps) {
		t.Fatalf("ops: %v", err)
	}

	cfg = DefaultConfig()
	cfg.MaxTransactions = 2
	_, err = NewFromReader(cfg, strings.NewReader(strings.Repeat(`{"writes":[["t",1]]}`+"\n", 3)))
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, ErrTooManyLines) {
		t.Fatalf("lines: %v", err)
	}

	cfg = DefaultConfig()
	cfg.MaxTotalOps = 3
	_, err = NewFromReader(cfg, strings.NewReader(strings.Repeat(`{"writes":[["t",1],["t",2]]}`+"\n", 2)))
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrTooManyOpsFile) {
		t.Fatalf("total ops: %v", err)
	}

	var b strings.Builder
	for i := range MaxTables + 1 {
		fmt.Fprintf(&b, `{"writes":[["t%d",1]]}`+"\n", i)
	}
	_, err = NewFromReader(DefaultConfig(), strings.NewReader(b.String()))
	if !errors.As(err, &le) || le.Line != MaxTables+1 || !errors.Is(err, ErrTooManyTables) {
		t.Fatalf("tables: %v", err)
	}

	// Many bad lines: reporting stops at 10.
	_, err = NewFromReader(DefaultConfig(), strings.NewReader(strings.Repeat("x\n", 100)))
	if n := strings.Count(err.Error(), "trace: line"); n != maxReportedErrors {
		t.Fatalf("%d errors reported", n)
	}
	if _, err := NewFromReader(DefaultConfig(), strings.NewReader("\n\n")); err == nil {
		t.Fatal("empty trace accepted")
	}
}

func TestNewFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Path = path
	w, err := New(cfg)
	if err != nil || w.Len() != 5 {
		t.Fatal(err)
	}
	cfg.Path = filepath.Join(t.TempDir(), "missing")
	if _, err := New(cfg); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig()); err == nil {
		t.Fatal("no path accepted")
	}
}

func TestRule(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TableKeysPerKG = map[string]uint64{"ORDERS": 4}
	w := fromString(t, cfg, sample)
	r := w.Rule()
	if r.Name() != "trace_range" {
		t.Fatal(r.Name())
	}
	acct, _ := w.TableID("ACCOUNT")
	orders, _ := w.TableID("ORDERS")
	if got := r.KeyGroup(txn.Ref{Table: acct, Key: 130}); got != uint64(acct)<<56|2 {
		t.Fatalf("kg %x", got)
	}
	if got := r.KeyGroup(txn.Ref{Table: orders, Key: 9}); got != uint64(orders)<<56|2 {
		t.Fatalf("override kg %x", got)
	}
	if r.KeyGroup(txn.Ref{Table: acct, Key: 5}) == r.KeyGroup(txn.Ref{Table: orders, Key: 5}) {
		t.Fatal("tables share a key group")
	}
	// Keys at the top of the range fold into the table's 56 bits.
	top := r.KeyGroup(txn.Ref{Table: acct, Key: math.MaxUint64})
	if top>>56 != uint64(acct) {
		t.Fatalf("top kg %x", top)
	}
	if r.Partition(txn.Ref{Table: acct, Key: 1}) != r.KeyGroup(txn.Ref{Table: acct, Key: 1}) {
		t.Fatal("partition")
	}
	msg := w.Message(0)
	hist, _ := w.TableID("HISTORY")
	if r.Home(msg) != r.KeyGroup(txn.Ref{Table: hist, Key: 100}) {
		t.Fatal("home")
	}
	fp := w.Footprint(msg)
	if len(fp.Writes) != 1 || len(fp.Reads) != 2 {
		t.Fatalf("footprint %+v", fp)
	}
	cfg.TableKeysPerKG = map[string]uint64{"NOPE": 4}
	if _, err := NewFromReader(cfg, strings.NewReader(sample)); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("unknown override table: %v", err)
	}
}

func TestProgramRejectsForeignRecords(t *testing.T) {
	w := fromString(t, DefaultConfig(), sample)
	for _, m := range []*messages.TxnSubmit{
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 2, Key: 3}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 4, Key: 1}}}}},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{Reads: []*messages.RecordRef{{Table: 0, Key: 1}}}}},
	} {
		if _, err := w.Program(m, nil); err == nil {
			t.Errorf("accepted %v", m)
		}
	}
}

func TestChecksFailOnCorruption(t *testing.T) {
	ctx := context.Background()
	w := fromString(t, DefaultConfig(), sample)
	acct, _ := w.TableID("ACCOUNT")
	r := txn.Ref{Table: acct, Key: math.MaxUint64}

	s := setup(t, w)
	v, _, _ := s.Get(ctx, r)
	v[0] ^= 1
	_ = s.Load(r, v)
	if c := checks(t, w, s); c["trace.records"] == nil {
		t.Fatalf("corrupted: %v", c)
	}

	s = setup(t, w)
	_ = s.Load(r, kvrec.New(32, kvrec.Record{Ref: r, Version: 1, Balance: 1}))
	if c := checks(t, w, s); c["trace.conservation"] == nil || c["trace.records"] != nil {
		t.Fatalf("lost update: %v", c)
	}

	empty, _ := memtx.New(w.Schema())
	if c := checks(t, w, empty); c["trace.records"] == nil {
		t.Fatalf("missing: %v", c)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{TableKeysPerKG: map[string]uint64{"x": 0}}.Validate()
	for _, want := range []string{"keys per key group 0", `table "x"`, "value size", "clients", "max line bytes", "max ops per line", "max transactions", "max total ops"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}
