package tpcc

import (
	"errors"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload"
)

func TestKeyPacking(t *testing.T) {
	w, d, id := unpack(OrderLineKey(65535, 10, 1<<35, 15))
	if w != 65535 || d != 10 || id != (1<<35)<<4|15 {
		t.Fatalf("unpack = %d %d %d", w, d, id)
	}
	// Keys are unique per table over a grid of tuples.
	seen := map[uint64]bool{}
	for w := uint32(1); w <= 3; w++ {
		for d := uint32(1); d <= 10; d++ {
			for o := uint64(1); o <= 40; o++ {
				for ol := uint32(1); ol <= 15; ol++ {
					k := OrderLineKey(w, d, o, ol)
					if seen[k] {
						t.Fatalf("duplicate order-line key %#x", k)
					}
					seen[k] = true
				}
			}
		}
	}
	if CustomerKey(1, 2, 3) == CustomerKey(1, 3, 2) || StockKey(1, 2) == StockKey(2, 1) {
		t.Fatal("key collision")
	}
}

// stockKeyGroups maps each stock key group of the given warehouses to the
// set of warehouses whose stock rows it holds.
func stockKeyGroups(wl *Workload, ws []uint32) map[uint64]map[uint32]bool {
	kgs := map[uint64]map[uint32]bool{}
	rule := wl.Rule()
	for _, w := range ws {
		for i := uint32(1); int(i) <= wl.cfg.ItemCount; i++ {
			kg := rule.KeyGroup(ref(TableStock, StockKey(w, i)))
			if kgs[kg] == nil {
				kgs[kg] = map[uint32]bool{}
			}
			kgs[kg][w] = true
		}
	}
	return kgs
}

func TestKeyEncodings(t *testing.T) {
	cfg := smallConfig()
	cfg.Warehouses = 4

	cfg.KeyEncoding = EncodingLegacy
	legacy := newWorkload(t, cfg)
	mixed := 0
	lk := stockKeyGroups(legacy, []uint32{1, 2, 3, 4})
	for _, ws := range lk {
		if len(ws) > 1 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatal("legacy encoding never puts two warehouses' stock rows in one key group")
	}
	t.Logf("legacy: %d of %d stock key groups mix warehouses", mixed, len(lk))
	if len(lk) > cfg.LegacyKeyGroups {
		t.Errorf("legacy: %d stock key groups > %d", len(lk), cfg.LegacyKeyGroups)
	}

	cfg.KeyEncoding = EncodingReshaped
	reshaped := newWorkload(t, cfg)
	rk := stockKeyGroups(reshaped, []uint32{1, 2, 3, 4})
	for kg, ws := range rk {
		if len(ws) != 1 {
			t.Fatalf("reshaped key group %#x mixes warehouses %v", kg, ws)
		}
	}
	if len(rk) != 4*cfg.BucketsPerWarehouse {
		t.Errorf("reshaped: %d stock key groups, want %d", len(rk), 4*cfg.BucketsPerWarehouse)
	}

	// Every table, under reshaped: the key group's warehouse is the record's
	// partition, and its table is the record's table.
	rule := reshaped.Rule()
	refs := []txn.Ref{
		ref(TableWarehouse, WarehouseKey(3)), ref(TableDistrict, DistrictKey(3, 10)),
		ref(TableCustomer, CustomerKey(3, 4, 300)), ref(TableHistory, HistoryKey(3, 9, 12345)),
		ref(TableNewOrder, OrderKey(3, 1, 4000)), ref(TableOrder, OrderKey(3, 1, 4000)),
		ref(TableOrderLine, OrderLineKey(3, 2, 77, 15)), ref(TableStock, StockKey(3, 1000)),
		ref(TableCustomerName, CustomerNameKey(3, 5, 999)), ref(TableCustomerLastOrder, CustomerKey(3, 6, 1)),
		ref(TableDeliveryCursor, DistrictKey(3, 7)),
	}
	for _, r := range refs {
		kg := rule.KeyGroup(r)
		if KeyGroupWarehouse(kg) != 3 || rule.Partition(r) != 3 || KeyGroupTable(kg) != r.Table {
			t.Errorf("%s: kg %#x (table %d, w %d), partition %d", TableName(r.Table), kg, KeyGroupTable(kg), KeyGroupWarehouse(kg), rule.Partition(r))
		}
		if lkg := legacy.Rule().KeyGroup(r); KeyGroupTable(lkg) != r.Table || lkg&kgLowMask >= uint64(cfg.LegacyKeyGroups) {
			t.Errorf("%s: legacy kg %#x", TableName(r.Table), lkg)
		}
	}
	item := ref(TableItem, ItemKey(5))
	if KeyGroupWarehouse(rule.KeyGroup(item)) != 0 || rule.Partition(item) != 0 {
		t.Error("ITEM must have warehouse 0")
	}
	// Legacy keys are w × C + id (doc.go).
	if got := legacy.legacyKey(ref(TableStock, StockKey(2, 7))); got != 2*uint64(cfg.ItemCount)+7 {
		t.Errorf("legacy stock key %d", got)
	}
	if got := legacy.legacyKey(ref(TableDistrict, DistrictKey(2, 7))); got != 27 {
		t.Errorf("legacy district key %d", got)
	}
}

func TestKeyGroupCounts(t *testing.T) {
	// At the default scale the legacy encoding has 1024 key groups per
	// table; reshaped CUSTOMER and STOCK have 16 × 64 = 1024 too.
	cfg := DefaultConfig()
	cfg.ExpectedNewOrders = 0
	cfg.ItemCount = 4096
	wl := newWorkload(t, cfg)
	kgs := map[uint64]bool{}
	for w := uint32(1); w <= 16; w++ {
		for d := uint32(1); d <= 10; d++ {
			for c := uint32(1); c <= 3000; c++ {
				kgs[wl.keyGroup(ref(TableCustomer, CustomerKey(w, d, c)))] = true
			}
		}
	}
	if len(kgs) != 1024 {
		t.Errorf("reshaped CUSTOMER key groups: %d, want 1024", len(kgs))
	}
}

func TestRuleHome(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	g := wl.Generator(1, 1)
	for i := 0; i < 200; i++ {
		if h := wl.Rule().Home(g.Next()); h != 2 {
			t.Fatalf("home %d, want 2 for client 1", h)
		}
	}
	if wl.Rule().Home(&messages.TxnSubmit{}) != 0 {
		t.Error("home of an empty body")
	}
}

// recordingTx records the records a program locks (GetForUpdate that found
// the record, Insert).
type recordingTx struct {
	txn.Tx
	locked []txn.Ref
	insert map[txn.Ref]bool
}

func (r *recordingTx) GetForUpdate(x txn.Ref) ([]byte, error) {
	v, err := r.Tx.GetForUpdate(x)
	if err == nil {
		r.locked = append(r.locked, x)
	}
	return v, err
}

func (r *recordingTx) GetForUpdateMany(xs []txn.Ref) ([][]byte, error) {
	vs, err := r.Tx.GetForUpdateMany(xs)
	if err == nil {
		for i, v := range vs {
			if v != nil {
				r.locked = append(r.locked, xs[i])
			}
		}
	}
	return vs, err
}

func (r *recordingTx) Insert(x txn.Ref, v []byte) error {
	err := r.Tx.Insert(x, v)
	if err == nil {
		r.locked = append(r.locked, x)
		r.insert[x] = true
	}
	return err
}

func runRecorded(t *testing.T, s *memtx.Store, prog txn.Program) (*recordingTx, error) {
	t.Helper()
	var rec *recordingTx
	err := s.Run(func(tx txn.Tx) error {
		rec = &recordingTx{Tx: tx, insert: map[txn.Ref]bool{}}
		return prog(rec)
	})
	return rec, err
}

func TestFootprintCoversLocks(t *testing.T) {
	for _, enc := range []string{EncodingReshaped, EncodingLegacy} {
		t.Run(enc, func(t *testing.T) {
			cfg := smallConfig()
			cfg.KeyEncoding = enc
			cfg.Profile = ProfileCrest // more remote lines
			wl := newWorkload(t, cfg)
			s := loadStore(t, wl)
			g := wl.Generator(17, 0)
			checked := map[string]int{}
			for i := 0; i < 3000; i++ {
				msg := g.Next()
				kind := bodyKind(msg)
				if p := msg.GetPayment(); p != nil && p.GetByLastName() {
					kind = "payment_by_name"
				}
				prog, err := wl.Program(msg, nil)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := runRecorded(t, s, prog)
				if err != nil && !errors.Is(err, txn.ErrRollback) {
					t.Fatal(err)
				}
				fp := wl.Footprint(msg)
				writes := map[txn.Ref]bool{}
				kgs := map[uint64]bool{}
				for _, r := range fp.Writes {
					writes[r] = true
					kgs[wl.keyGroup(r)] = true
				}
				checkExact := kind == "new_order" || kind == "payment"
				for _, r := range rec.locked {
					if writes[r] {
						continue
					}
					// Rows whose key the transaction decides (the new O_ID,
					// the history sequence number) are predicted by key group
					// under reshaped, and not at all under legacy.
					decided := rec.insert[r] && (r.Table == TableOrder || r.Table == TableNewOrder || r.Table == TableOrderLine || r.Table == TableHistory)
					switch {
					case decided && enc == EncodingReshaped && !kgs[wl.keyGroup(r)]:
						t.Fatalf("%s: inserted %s %#x in key group %#x not predicted", kind, TableName(r.Table), r.Key, wl.keyGroup(r))
					case decided:
					case checkExact:
						t.Fatalf("%s: locked %s %#x not in footprint %v", kind, TableName(r.Table), r.Key, fp.Writes)
					}
				}
				if kind == "order_status" || kind == "stock_level" {
					if len(rec.locked) != 0 || len(fp.Writes) != 0 {
						t.Fatalf("%s locks %v, footprint writes %v", kind, rec.locked, fp.Writes)
					}
				}
				if kind == "delivery" {
					// The cursors of every district delivered are predicted.
					for _, r := range rec.locked {
						if r.Table == TableDeliveryCursor && !writes[r] {
							t.Fatalf("delivery cursor %#x not predicted", r.Key)
						}
					}
				}
				if err == nil {
					checked[kind]++
				}
			}
			if checked["new_order"] == 0 || checked["payment"] == 0 || checked["delivery"] == 0 {
				t.Fatalf("not exercised: %v", checked)
			}
			t.Logf("checked %v", checked)
		})
	}
}

func TestFootprintCounts(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_NewOrder{NewOrder: &messages.TpccNewOrder{
		WId: 1, DId: 2, CId: 3,
		Lines: []*messages.TpccOrderLine{{IId: 1, SupplyWId: 1, Quantity: 1}, {IId: 2, SupplyWId: 2, Quantity: 1}},
	}}}
	fp := wl.Footprint(msg)
	// district + 2 stock + order + new-order + 2 lines + last-order.
	if len(fp.Writes) != 8 || len(fp.Reads) != 4 {
		t.Errorf("NewOrder footprint: %d writes %d reads: %v", len(fp.Writes), len(fp.Reads), fp)
	}
	del := wl.Footprint(&messages.TxnSubmit{Body: &messages.TxnSubmit_Delivery{Delivery: &messages.TpccDelivery{WId: 2, OCarrierId: 1}}})
	cursors := 0
	for _, r := range del.Writes {
		if r.Table == TableDeliveryCursor {
			cursors++
		}
		if partition(r) != 2 {
			t.Errorf("delivery footprint outside its warehouse: %v", r)
		}
	}
	if cursors != 10 {
		t.Errorf("%d delivery cursors predicted", cursors)
	}
	if fp := wl.Footprint(&messages.TxnSubmit{}); len(fp.Writes)+len(fp.Reads) != 0 {
		t.Error("footprint of an empty body")
	}
}

// TestKeyGroupFencesAndPartitions: under both encodings every key group
// has its own dense index below the schema's KeyGroupFences; under the
// reshaped one each table's partitions hold one key group each, and every
// partition of a table is used about equally.
func TestKeyGroupFencesAndPartitions(t *testing.T) {
	for _, enc := range []string{EncodingReshaped, EncodingLegacy} {
		cfg := DefaultConfig()
		cfg.Warehouses, cfg.CustomersPerDistrict, cfg.ItemCount, cfg.ExpectedNewOrders = 3, 300, 2048, 0
		cfg.KeyEncoding = enc
		wl := newWorkload(t, cfg)
		schema := wl.Schema()
		ix := wl.Rule().(workload.KeyGroupIndexer)
		var refs []txn.Ref
		for w := uint32(1); w <= 3; w++ {
			refs = append(refs, ref(TableWarehouse, WarehouseKey(w)))
			for d := uint32(1); d <= 10; d++ {
				refs = append(refs, ref(TableDistrict, DistrictKey(w, d)), ref(TableDeliveryCursor, DistrictKey(w, d)))
				for c := uint32(1); c <= 300; c++ {
					refs = append(refs, ref(TableCustomer, CustomerKey(w, d, c)), ref(TableCustomerLastOrder, CustomerKey(w, d, c)),
						ref(TableHistory, HistoryKey(w, d, uint64(c))), ref(TableOrder, OrderKey(w, d, uint64(c))),
						ref(TableNewOrder, OrderKey(w, d, uint64(c))), ref(TableOrderLine, OrderLineKey(w, d, uint64(c), c%15+1)),
						ref(TableCustomerName, CustomerNameKey(w, d, c)))
				}
			}
			for i := uint32(1); i <= 2048; i++ {
				refs = append(refs, ref(TableStock, StockKey(w, i)))
			}
		}
		for i := uint32(1); i <= 2048; i++ {
			refs = append(refs, ref(TableItem, ItemKey(i)))
		}
		indexOf := map[uint64]uint64{} // index → key group
		type part struct {
			table txn.TableID
			p     uint64
		}
		kgOfPart := map[part]uint64{}
		used := map[txn.TableID]map[uint64]int{}
		for _, r := range refs {
			kg := wl.Rule().KeyGroup(r)
			i, ok := ix.KeyGroupIndex(kg)
			if !ok || i >= schema.KeyGroupFences {
				t.Fatalf("%v: %s key group %#x has index %d, %v (of %d)", enc, TableName(r.Table), kg, i, ok, schema.KeyGroupFences)
			}
			if other, ok := indexOf[i]; ok && other != kg {
				t.Fatalf("%v: key groups %#x and %#x share index %d", enc, other, kg, i)
			}
			indexOf[i] = kg
			tab, _ := schema.Table(r.Table)
			if enc == EncodingLegacy {
				if tab.Partitions != 0 {
					t.Fatalf("legacy %s is partitioned", tab.Name)
				}
				continue
			}
			if tab.Partitions == 0 {
				t.Fatalf("reshaped %s is not partitioned", tab.Name)
			}
			p := tab.Partition(r.Key)
			if p >= tab.Partitions {
				t.Fatalf("%s key %#x: partition %d of %d", tab.Name, r.Key, p, tab.Partitions)
			}
			if other, ok := kgOfPart[part{r.Table, p}]; ok && other != kg {
				t.Fatalf("%s partition %d holds key groups %#x and %#x", tab.Name, p, other, kg)
			}
			kgOfPart[part{r.Table, p}] = kg
			if used[r.Table] == nil {
				used[r.Table] = map[uint64]int{}
			}
			used[r.Table][p]++
		}
		if _, ok := ix.KeyGroupIndex(uint64(NumTables+1) << kgTableShift); ok {
			t.Fatalf("%v: a key group of no table has an index", enc)
		}
		if enc == EncodingLegacy {
			continue
		}
		for _, tab := range schema.Tables {
			u := used[tab.ID]
			if uint64(len(u)) != tab.Partitions {
				t.Errorf("%s: %d of %d partitions used", tab.Name, len(u), tab.Partitions)
			}
			lo, hi := int(^uint(0)>>1), 0
			for _, n := range u {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi > 2*lo {
				t.Errorf("%s: partitions hold %d to %d of the sample", tab.Name, lo, hi)
			}
		}
	}
}
