package tpcc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload"
)

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.Warehouses = 2
	cfg.ItemCount = 1000
	cfg.CustomersPerDistrict = 300
	cfg.ExpectedNewOrders = 10_000
	return cfg
}

func newWorkload(t testing.TB, cfg Config) *Workload {
	t.Helper()
	wl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

func loadStore(t testing.TB, wl *Workload) *memtx.Store {
	t.Helper()
	s, err := memtx.New(wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := wl.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func requireChecksPass(t testing.TB, res []workload.CheckResult) {
	t.Helper()
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("%s failed: %v", r.Name, r.Err)
		}
	}
}

func checkErr(res []workload.CheckResult, name string) (error, bool) {
	for _, r := range res {
		if r.Name == name {
			return r.Err, true
		}
	}
	return nil, false
}

// runTxns runs n generated transactions from `clients` generators
// round-robin, serially on s. It returns committed and rolled-back counts by
// body type.
func runTxns(t testing.TB, wl *Workload, s *memtx.Store, seed uint64, clients, n int) (committed, rolledBack map[string]int) {
	t.Helper()
	committed, rolledBack = map[string]int{}, map[string]int{}
	gens := make([]workload.Generator, clients)
	for i := range gens {
		gens[i] = wl.NewGenerator(seed, i)
	}
	for k := 0; k < n; k++ {
		msg := gens[k%clients].Next()
		kind := bodyKind(msg)
		prog, err := wl.Program(msg, &messages.TxnResult{})
		if err != nil {
			t.Fatalf("txn %d (%s): Program: %v", k, kind, err)
		}
		switch err := s.Run(prog); {
		case err == nil:
			committed[kind]++
		case errors.Is(err, txn.ErrRollback):
			if kind != "new_order" || !msg.GetNewOrder().GetRollback() {
				t.Fatalf("txn %d (%s): unexpected rollback: %v", k, kind, err)
			}
			rolledBack[kind]++
		default:
			t.Fatalf("txn %d (%s): %v", k, kind, err)
		}
	}
	return committed, rolledBack
}

func bodyKind(msg *messages.TxnSubmit) string {
	switch msg.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		return "new_order"
	case *messages.TxnSubmit_Payment:
		return "payment"
	case *messages.TxnSubmit_OrderStatus:
		return "order_status"
	case *messages.TxnSubmit_Delivery:
		return "delivery"
	case *messages.TxnSubmit_StockLevel:
		return "stock_level"
	}
	return "?"
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := Config{Warehouses: 0, Profile: "tpch", KeyEncoding: "zigzag", ItemCount: 1, CustomersPerDistrict: 5000, ExpectedNewOrders: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"Warehouses", "Profile", "KeyEncoding", "BucketsPerWarehouse", "LegacyKeyGroups", "ExpectedNewOrders", "ItemCount", "CustomersPerDistrict"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	if _, err := New(bad); err == nil {
		t.Error("New accepted a bad config")
	}
}

func TestSchema(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	s := wl.Schema()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(s.Tables) != NumTables {
		t.Fatalf("%d tables, want %d", len(s.Tables), NumTables)
	}
	for _, tb := range s.Tables {
		if tb.Name != TableName(tb.ID) {
			t.Errorf("table %d named %q", tb.ID, tb.Name)
		}
	}
	if wl.Name() != "tpcc" || wl.Rule().Name() != "tpcc_warehouse" {
		t.Errorf("names %q %q", wl.Name(), wl.Rule().Name())
	}
}

func TestLoadThenCheckAfterLoad(t *testing.T) {
	cfg := smallConfig()
	wl := newWorkload(t, cfg)
	s := loadStore(t, wl)
	res := wl.CheckAfterLoad(context.Background(), s)
	if _, ok := checkErr(res, CheckC11); !ok {
		t.Fatal("CheckAfterLoad does not run c11")
	}
	requireChecksPass(t, res)
	if _, ok := checkErr(wl.Check(context.Background(), s), CheckC11); ok {
		t.Error("Check runs c11")
	}
	// Row counts of the population, and capacities that hold them.
	W, cpd := cfg.Warehouses, cfg.CustomersPerDistrict
	want := map[txn.TableID]int{
		TableWarehouse: W, TableDistrict: W * 10, TableCustomer: W * 10 * cpd, TableHistory: W * 10 * cpd,
		TableOrder: W * 10 * cpd, TableNewOrder: W * 10 * cpd * 3 / 10, TableItem: cfg.ItemCount,
		TableStock: W * cfg.ItemCount, TableCustomerLastOrder: W * 10 * cpd, TableDeliveryCursor: W * 10,
	}
	for tb, n := range want {
		if got := s.Len(tb); got != n {
			t.Errorf("%s: %d rows, want %d", TableName(tb), got, n)
		}
	}
	for _, tb := range wl.Schema().Tables {
		if uint64(s.Len(tb.ID)) > tb.Capacity {
			t.Errorf("%s: %d rows exceed capacity %d", tb.Name, s.Len(tb.ID), tb.Capacity)
		}
	}
	if ol := s.Len(TableOrderLine); ol < W*10*cpd*5 || ol > W*10*cpd*15 {
		t.Errorf("%d order lines", ol)
	}
}

func TestLoadDeterministic(t *testing.T) {
	cfg := smallConfig()
	cfg.Warehouses = 1
	a := loadStore(t, newWorkload(t, cfg))
	b := loadStore(t, newWorkload(t, cfg))
	ctx := context.Background()
	for _, r := range []txn.Ref{
		ref(TableCustomer, CustomerKey(1, 3, 17)), ref(TableStock, StockKey(1, 999)),
		ref(TableOrderLine, OrderLineKey(1, 7, 250, 5)), ref(TableItem, ItemKey(5)),
	} {
		va, _, _ := a.Get(ctx, r)
		vb, _, _ := b.Get(ctx, r)
		if string(va) != string(vb) {
			t.Errorf("%v differs between two loads", r)
		}
	}
}

func TestRunThenCheck(t *testing.T) {
	for _, profile := range []string{ProfileSpec, ProfileCrest} {
		t.Run(profile, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Profile = profile
			wl := newWorkload(t, cfg)
			s := loadStore(t, wl)
			committed, rolledBack := runTxns(t, wl, s, 42, 8, 4000)
			t.Logf("committed %v rolled back %v", committed, rolledBack)
			if committed["new_order"] == 0 || committed["payment"] == 0 || committed["delivery"] == 0 {
				t.Fatalf("mix not exercised: %v", committed)
			}
			if profile == ProfileSpec && (committed["order_status"] == 0 || committed["stock_level"] == 0) {
				t.Fatalf("read-only transactions not exercised: %v", committed)
			}
			requireChecksPass(t, wl.Check(context.Background(), s))
			for _, tb := range wl.Schema().Tables {
				if uint64(s.Len(tb.ID)) > tb.Capacity {
					t.Errorf("%s: %d rows exceed capacity %d", tb.Name, s.Len(tb.ID), tb.Capacity)
				}
			}
		})
	}
}

func TestNewOrderEffects(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	s := loadStore(t, wl)
	ctx := context.Background()
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_NewOrder{NewOrder: &messages.TpccNewOrder{
		WId: 1, DId: 4, CId: 77, EntryUnixMicros: 5,
		Lines: []*messages.TpccOrderLine{{IId: 10, SupplyWId: 1, Quantity: 3}, {IId: 10, SupplyWId: 1, Quantity: 2}, {IId: 11, SupplyWId: 2, Quantity: 1}},
	}}}
	readStock := func(w, i uint32) stock {
		b, _, _ := s.Get(ctx, ref(TableStock, StockKey(w, i)))
		var st stock
		if err := st.decode(b); err != nil {
			t.Fatal(err)
		}
		return st
	}
	s10, s11 := readStock(1, 10), readStock(2, 11)
	prog, err := wl.Program(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(prog); err != nil {
		t.Fatal(err)
	}
	o := uint64(wl.cfg.CustomersPerDistrict + 1)
	b, ok, _ := s.Get(ctx, ref(TableOrder, OrderKey(1, 4, o)))
	var od order
	if !ok || od.decode(b) != nil || od.cID != 77 || od.olCnt != 3 || od.allLocal != 0 || od.carrier != 0 {
		t.Fatalf("order %d: ok=%v %+v", o, ok, od)
	}
	if lb, _, _ := s.Get(ctx, ref(TableCustomerLastOrder, CustomerKey(1, 4, 77))); le.Uint64(lb) != o {
		t.Errorf("last order %d, want %d", le.Uint64(lb), o)
	}
	// Item 10 appears twice: both lines apply, sequentially.
	n10 := readStock(1, 10)
	if n10.ytd != s10.ytd+5 || n10.orderCnt != s10.orderCnt+2 || n10.remoteCnt != s10.remoteCnt {
		t.Errorf("stock 1/10 %+v after %+v", n10, s10)
	}
	q := s10.quantity
	for _, x := range []int32{3, 2} {
		if q >= x+10 {
			q -= x
		} else {
			q = q - x + 91
		}
	}
	if n10.quantity != q {
		t.Errorf("stock 1/10 quantity %d, want %d", n10.quantity, q)
	}
	if n11 := readStock(2, 11); n11.remoteCnt != s11.remoteCnt+1 {
		t.Errorf("remote stock 2/11 S_REMOTE_CNT %d, want %d", n11.remoteCnt, s11.remoteCnt+1)
	}

	// The rollback case leaves no trace.
	before := s.Len(TableOrder)
	msg.GetNewOrder().Lines = append(msg.GetNewOrder().Lines, &messages.TpccOrderLine{IId: uint32(wl.cfg.ItemCount + 1), SupplyWId: 1, Quantity: 1})
	prog, _ = wl.Program(msg, nil)
	if err := s.Run(prog); !errors.Is(err, txn.ErrRollback) {
		t.Fatalf("unused item: %v, want ErrRollback", err)
	}
	if s.Len(TableOrder) != before {
		t.Error("rolled-back NewOrder inserted an order")
	}
	requireChecksPass(t, wl.Check(ctx, s))
}

func TestPaymentByLastNamePicksMiddle(t *testing.T) {
	cfg := smallConfig()
	cfg.CustomersPerDistrict = 3000 // names repeat only beyond the first 1000
	cfg.Warehouses = 1
	cfg.ItemCount = 100
	wl := newWorkload(t, cfg)
	s := loadStore(t, wl)
	ctx := context.Background()
	// Find a name shared by at least 3 customers of district 1/1.
	byName := map[uint16][]uint32{}
	firsts := map[uint32]string{}
	for c := uint32(1); c <= 3000; c++ {
		b, _, _ := s.Get(ctx, ref(TableCustomer, CustomerKey(1, 1, c)))
		var cu customer
		if err := cu.decode(b); err != nil {
			t.Fatal(err)
		}
		byName[cu.lastNum] = append(byName[cu.lastNum], c)
		firsts[c] = string(cu.first[:])
	}
	var name uint16
	var ids []uint32
	for n, cs := range byName {
		if len(cs) >= 3 && len(cs) > len(ids) {
			name, ids = n, cs
		}
	}
	if ids == nil {
		t.Fatal("no repeated last name")
	}
	// Sort by C_FIRST like the specification's ORDER BY.
	sorted := append([]uint32(nil), ids...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if firsts[sorted[j]] < firsts[sorted[i]] || (firsts[sorted[j]] == firsts[sorted[i]] && sorted[j] < sorted[i]) {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	want := sorted[(len(sorted)+1)/2-1] // position ceil(n/2), 1-based
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_Payment{Payment: &messages.TpccPayment{
		WId: 1, DId: 2, CWId: 1, CDId: 1, ByLastName: true, CLast: LastName(int(name)), HAmountCents: 12345, DateUnixMicros: 9,
	}}}
	prog, err := wl.Program(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(prog); err != nil {
		t.Fatal(err)
	}
	for _, c := range ids {
		b, _, _ := s.Get(ctx, ref(TableCustomer, CustomerKey(1, 1, c)))
		var cu customer
		_ = cu.decode(b)
		if paid := cu.paymentCnt == 2; paid != (c == want) {
			t.Errorf("customer %d paid=%v, want the middle customer %d of %v", c, paid, want, sorted)
		}
	}
}

func TestProgramRejectsInvalidInput(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	bad := []*messages.TxnSubmit{
		{},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{}}},
		{Body: &messages.TxnSubmit_NewOrder{NewOrder: &messages.TpccNewOrder{WId: 3, DId: 1, CId: 1, Lines: []*messages.TpccOrderLine{{IId: 1, SupplyWId: 1, Quantity: 1}}}}},
		{Body: &messages.TxnSubmit_NewOrder{NewOrder: &messages.TpccNewOrder{WId: 1, DId: 11, CId: 1}}},
		{Body: &messages.TxnSubmit_Payment{Payment: &messages.TpccPayment{WId: 1, DId: 1, CWId: 1, CDId: 1, ByLastName: true, CLast: "SMITH", HAmountCents: 100}}},
		{Body: &messages.TxnSubmit_OrderStatus{OrderStatus: &messages.TpccOrderStatus{WId: 1, DId: 1, CId: 301}}},
		{Body: &messages.TxnSubmit_Delivery{Delivery: &messages.TpccDelivery{WId: 1, OCarrierId: 11}}},
		{Body: &messages.TxnSubmit_StockLevel{StockLevel: &messages.TpccStockLevel{WId: 0, DId: 1}}},
	}
	for i, m := range bad {
		if _, err := wl.Program(m, nil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("case %d: %v, want ErrInvalidInput", i, err)
		}
	}
}

func TestLastNames(t *testing.T) {
	if got := LastName(371); got != "PRICALLYOUGHT" {
		t.Errorf("LastName(371) = %q", got)
	}
	seen := map[string]bool{}
	for n := 0; n < LastNames; n++ {
		s := LastName(n)
		if seen[s] {
			t.Fatalf("duplicate last name %q", s)
		}
		seen[s] = true
		if m, ok := LastNameNumber(s); !ok || int(m) != n {
			t.Fatalf("LastNameNumber(%q) = %d, %v", s, m, ok)
		}
	}
}
