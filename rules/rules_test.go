package rules

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/bank"
	"github.com/aura-runtime/aura/workload/tpcc"
	"github.com/aura-runtime/aura/workload/trace"
)

func tpccWorkload(t testing.TB, warehouses int) *tpcc.Workload {
	t.Helper()
	cfg := tpcc.DefaultConfig()
	cfg.Warehouses = warehouses
	wl, err := tpcc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

func wlRegistry(t testing.TB, wl workload.Workload) *Registry {
	t.Helper()
	rs, err := ForWorkload(wl)
	return registry(t, rs, err)
}

func registry(t testing.TB, rs []*Rule, err error) *Registry {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewRegistry(rs...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTPCCRulesAgreeWithTheWorkloadRule: each per-table rule gives the key
// group and warehouse the workload's own rule gives the same record.
func TestTPCCRulesAgreeWithTheWorkloadRule(t *testing.T) {
	wl := tpccWorkload(t, 4)
	g := wlRegistry(t, wl)
	wr := wl.Rule()
	for _, c := range []struct {
		rule string
		key  []uint64
		ref  txn.Ref
	}{
		{"r_warehouse", []uint64{3}, txn.Ref{Table: tpcc.TableWarehouse, Key: tpcc.WarehouseKey(3)}},
		{"r_district", []uint64{2, 7}, txn.Ref{Table: tpcc.TableDistrict, Key: tpcc.DistrictKey(2, 7)}},
		{"r_customer", []uint64{4, 10, 2999}, txn.Ref{Table: tpcc.TableCustomer, Key: tpcc.CustomerKey(4, 10, 2999)}},
		{"r_history", []uint64{1, 1, 77}, txn.Ref{Table: tpcc.TableHistory, Key: tpcc.HistoryKey(1, 1, 77)}},
		{"r_new_order", []uint64{1, 3, 2101}, txn.Ref{Table: tpcc.TableNewOrder, Key: tpcc.OrderKey(1, 3, 2101)}},
		{"r_orders", []uint64{1, 3, 2101}, txn.Ref{Table: tpcc.TableOrder, Key: tpcc.OrderKey(1, 3, 2101)}},
		{"r_order_line", []uint64{2, 5, 3001, 15}, txn.Ref{Table: tpcc.TableOrderLine, Key: tpcc.OrderLineKey(2, 5, 3001, 15)}},
		{"r_item", []uint64{99999}, txn.Ref{Table: tpcc.TableItem, Key: tpcc.ItemKey(99999)}},
		{"r_stock", []uint64{4, 100000}, txn.Ref{Table: tpcc.TableStock, Key: tpcc.StockKey(4, 100000)}},
	} {
		r, ok := g.Lookup(c.rule)
		if !ok {
			t.Fatalf("no rule %q in %v", c.rule, g.Names())
		}
		res, err := r.Resolve(c.key)
		if err != nil {
			t.Fatalf("%s %v: %v", c.rule, c.key, err)
		}
		if res.Table != c.ref.Table || res.KeyGroup != wr.KeyGroup(c.ref) || res.Partition != wr.Partition(c.ref) {
			t.Errorf("%s %v: %+v, want kg %d partition %d", c.rule, c.key, res, wr.KeyGroup(c.ref), wr.Partition(c.ref))
		}
		// The workload's own rule over (table_id, record_key) agrees too.
		own, _ := g.Lookup(wr.Name())
		if res2, err := own.Resolve([]uint64{uint64(c.ref.Table), c.ref.Key}); err != nil || res2 != res {
			t.Errorf("%s over (%d, %d): %+v %v, want %+v", wr.Name(), c.ref.Table, c.ref.Key, res2, err, res)
		}
	}
}

func TestTPCCRuleErrors(t *testing.T) {
	g := wlRegistry(t, tpccWorkload(t, 4))
	orders, _ := g.Lookup("r_orders")
	for _, c := range []struct {
		key  []uint64
		want error
		msg  string
	}{
		{[]uint64{5, 1, 1}, ErrNoSuchPartition, "warehouses 1..4"},
		{[]uint64{1001, 50001}, ErrBadKey, "takes 3 key columns (w_id,d_id,o_id), got 2"},
		{[]uint64{1, 11, 1}, ErrBadKey, "d_id = 11 outside [1, 10]"},
		{[]uint64{0, 1, 1}, ErrBadKey, "w_id = 0"},
		{[]uint64{1 << 16, 1, 1}, ErrBadKey, "w_id"},
		{[]uint64{1, 1, 1 << 40}, ErrBadKey, "o_id"},
		{nil, ErrBadKey, "got 0"},
	} {
		_, err := orders.Resolve(c.key)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want %v containing %q", c.key, err, c.want, c.msg)
		}
	}
	item, _ := g.Lookup("r_item")
	if _, err := item.Resolve([]uint64{1}); err != nil {
		t.Errorf("item 1: %v", err)
	}
}

func TestBankRangeAndDefaultRange(t *testing.T) {
	cfg := bank.DefaultConfig()
	cfg.Accounts = 1000
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := wlRegistry(t, wl)
	if got := strings.Join(g.Names(), " "); got != "bank_range default_range" {
		t.Fatalf("names %q", got)
	}
	br, _ := g.Lookup("bank_range")
	ref := bank.Ref(130)
	res, err := br.Resolve([]uint64{uint64(bank.AccountTable), 130})
	if err != nil || res.KeyGroup != wl.Rule().KeyGroup(ref) || res.Partition != wl.Rule().Partition(ref) {
		t.Fatalf("bank_range: %+v %v", res, err)
	}
	if _, err := br.Resolve([]uint64{9, 1}); !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "no table 9") {
		t.Fatalf("unknown table: %v", err)
	}
	dr, _ := g.Lookup(DefaultRangeRule)
	res, err = dr.Resolve([]uint64{uint64(bank.AccountTable), 130})
	if kg := trace.PackKG(bank.AccountTable, 2); err != nil || res.KeyGroup != kg || res.Partition != kg {
		t.Fatalf("default_range: %+v %v", res, err)
	}
	if dr.Arity() != 2 || dr.Columns()[0].Name != "table_id" || dr.Source() != "builtin" || br.Table() != "*" {
		t.Fatalf("default_range: %d %v %s", dr.Arity(), dr.Columns(), dr.Source())
	}
}

func bankSchema() txn.Schema {
	return txn.Schema{Tables: []txn.Table{{ID: 1, Name: "account", ValueSize: 16, Capacity: 100}}}
}

func TestLoadExampleFile(t *testing.T) {
	rs, err := Load("testdata/rules.json", bankSchema())
	if err != nil {
		t.Fatal(err)
	}
	g := registry(t, rs, nil)
	r, _ := g.Lookup("r_account_branch")
	res, err := r.Resolve([]uint64{5, 130})
	wantP := control.Mix64(0^control.Mix64(5)) % 16
	if err != nil || res.Table != 1 || res.KeyGroup != 2 || res.Partition != wantP || r.Source() != "testdata/rules.json" {
		t.Fatalf("r_account_branch: %+v %v", res, err)
	}
	if _, err := r.Resolve([]uint64{1024, 1}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("branch 1024: %v", err)
	}
	tagged, _ := g.Lookup("r_account_tagged")
	res, err = tagged.Resolve([]uint64{1000})
	if err != nil || res.KeyGroup != 1<<56|31 || res.Partition != 0 {
		t.Fatalf("r_account_tagged: %+v %v", res, err)
	}
	if _, err := tagged.Resolve([]uint64{1000001}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("above max: %v", err)
	}
}

func TestPartitionsBound(t *testing.T) {
	rs, err := Parse("p.json", []byte(`{"rules":[{"name":"r","table":"account","columns":[{"name":"a"}],
		"key_group":{"kind":"range","columns":["a"],"divisor":1},
		"partition":{"kind":"range","columns":["a"],"divisor":10},"partitions":3}]}`), bankSchema())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rs[0].Resolve([]uint64{29}); err != nil || res.Partition != 2 {
		t.Fatalf("29: %+v %v", res, err)
	}
	if _, err := rs[0].Resolve([]uint64{30}); !errors.Is(err, ErrNoSuchPartition) {
		t.Fatalf("30: %v", err)
	}
	if res, err := rs[0].Resolve([]uint64{math.MaxUint64}); !errors.Is(err, ErrNoSuchPartition) {
		t.Fatalf("max: %+v %v", res, err)
	}
}

// TestParseReportsEveryProblem: one file with a problem in each of several
// rules and fields gets them all back, each naming file, rule and field.
func TestParseReportsEveryProblem(t *testing.T) {
	bad := `{"rules":[
	 {"name":"ok","table":"account","columns":[{"name":"a"}],
	  "key_group":{"kind":"range","columns":["a"],"divisor":1},"partition":{"kind":"hash","columns":["a"]}},
	 {"name":"ok","table":"nope","columns":[{"name":"a","min":5,"max":4},{"name":"a"}],
	  "key_group":{"kind":"ranges","columns":["b"]},"table_shift":70},
	 {"name":"bad name!","table":"account","columns":[],
	  "key_group":{"kind":"range","columns":["x","y"],"divisor":0},"partition":{"kind":"hash","columns":[],"divisor":3}}
	]}`
	_, err := Parse("bad.json", []byte(bad), bankSchema())
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`bad.json: rule 2 "ok": name: also the name of rule 1`,
		`rule 2 "ok": table: "nope" is not a table of the schema (tables: [account])`,
		`rule 2 "ok": columns[0]: min 5 above max 4`,
		`rule 2 "ok": columns[1].name: "a" given twice`,
		`rule 2 "ok": key_group.columns[0]: "b" is not a column of the rule`,
		`rule 2 "ok": key_group.kind: "ranges", want "range" or "hash"`,
		`rule 2 "ok": partition: missing`,
		`rule 2 "ok": table_shift: 70, want 0..63`,
		`rule 3 "bad name!": name: "bad name!": only letters`,
		`rule 3 "bad name!": columns: 0 columns, want 1..8`,
		`rule 3 "bad name!": key_group.divisor: must be at least 1`,
		`rule 3 "bad name!": key_group.columns: a range takes one column, got 2`,
		`rule 3 "bad name!": partition.divisor: only a range takes a divisor`,
		`rule 3 "bad name!": partition.columns: 0 columns, want 1..8`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `rule 1 "ok"`) {
		t.Errorf("rule 1 is fine but reported:\n%v", err)
	}
}

func TestParseSyntaxAndBounds(t *testing.T) {
	s := bankSchema()
	for _, c := range []struct {
		name, data, want string
	}{
		{"empty", "", "empty file"},
		{"syntax", "{\n  \"rules\": [,]}", "line 2, column 13"},
		{"type", `{"rules": [{"name": 3}]}`, "line 1, column 21"},
		{"unknown field", `{"rules": [], "extra": 1}`, `unknown field "extra"`},
		{"trailing", `{"rules": []} {}`, "data after"},
		{"no rules", `{"rules": []}`, "none given"},
		{"too big", `{"rules":[` + strings.Repeat(" ", MaxConfigBytes) + `]}`, "above 1048576 bytes"},
		{"too many", `{"rules":[` + strings.Repeat(`{},`, MaxRules) + `{}]}`, "1025 rules, at most 1024"},
		{"arity", `{"rules":[{"name":"r","table":"account","columns":[` + strings.Repeat(`{"name":"c"},`, MaxArity) + `{"name":"d"}]}]}`, "9 columns, want 1..8"},
		{"negative", `{"rules":[{"name":"r","columns":[{"name":"a","min":-1}]}]}`, "cannot unmarshal number -1"},
	} {
		_, err := Parse(c.name+".json", []byte(c.data), s)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name+".json") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Load("testdata/does-not-exist.json", s); err == nil || !os.IsNotExist(errors.Unwrap(err)) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []uint64
	}{
		{"1", []uint64{1}},
		{"1001,50001", []uint64{1001, 50001}},
		{"0,18446744073709551615", []uint64{0, math.MaxUint64}},
		{"1,2,3,4,5,6,7,8", []uint64{1, 2, 3, 4, 5, 6, 7, 8}},
	} {
		got, err := ParseKey(c.in)
		if err != nil || FormatKey(got) != FormatKey(c.want) || FormatKey(got) != c.in {
			t.Errorf("%q: %v %v", c.in, got, err)
		}
	}
	for _, in := range []string{"", ",", "1,", ",1", "1,,2", "-1", "+1", " 1", "1 ", "0x10", "1.5", "18446744073709551616",
		"1,2,3,4,5,6,7,8,9", strings.Repeat("1", MaxKeyBytes+1), "１"} {
		if got, err := ParseKey(in); !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: %v %v, want ErrBadKey", in, got, err)
		}
	}
}

func TestRegistry(t *testing.T) {
	rs, err := ForWorkload(tpccWorkload(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRegistry(append(rs, rs[0])...); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Fatalf("duplicate: %v", err)
	}
	g := registry(t, rs, nil)
	if g.Len() != 11 {
		t.Fatalf("%d rules: %v", g.Len(), g.Names())
	}
	if _, ok := g.Lookup("nope"); ok {
		t.Fatal("found nope")
	}
	var nilReg *Registry
	if _, ok := nilReg.Lookup("x"); ok || nilReg.Len() != 0 || nilReg.Names() != nil {
		t.Fatal("nil registry")
	}
	if _, err := NewRule("", "t", "s", []Column{{Name: "a"}}, func([]uint64) (Resolution, error) { return Resolution{}, nil }); err == nil {
		t.Fatal("empty name accepted")
	}
}
