package rules

import (
	"fmt"
	"math"

	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
	"github.com/aura-runtime/aura/workload/trace"
)

// DefaultRangeRule is the name of the default range rule: key group =
// (table, record_key / DefaultRangeKeys), as trace.PackKG packs it, and the
// partition value is the key group (the trace workload's default).
const DefaultRangeRule = "default_range"

// DefaultRangeKeys is the default range rule's keys per key group.
const DefaultRangeKeys = 64

// ForWorkload returns the rules a node running wl serves (see the package
// documentation), sorted by name in a Registry.
func ForWorkload(wl workload.Workload) ([]*Rule, error) {
	schema := wl.Schema()
	tableCol := Column{Name: "table_id", Min: 1, Max: math.MaxUint32}
	keyCol := Column{Name: "record_key", Max: math.MaxUint64}
	checkTable := func(rule string, t uint64) (txn.TableID, error) {
		if _, ok := schema.Table(txn.TableID(t)); !ok {
			return 0, fmt.Errorf("%w: rule %q: workload %s has no table %d", ErrBadKey, rule, wl.Name(), t)
		}
		return txn.TableID(t), nil
	}
	wr := wl.Rule()
	own, err := NewRule(wr.Name(), "*", "workload", []Column{tableCol, keyCol}, func(key []uint64) (Resolution, error) {
		t, err := checkTable(wr.Name(), key[0])
		if err != nil {
			return Resolution{}, err
		}
		ref := txn.Ref{Table: t, Key: key[1]}
		return Resolution{Table: t, KeyGroup: wr.KeyGroup(ref), Partition: wr.Partition(ref)}, nil
	})
	if err != nil {
		return nil, err
	}
	out := []*Rule{own}
	if wr.Name() != DefaultRangeRule {
		def, err := NewRule(DefaultRangeRule, "*", "builtin", []Column{tableCol, keyCol}, func(key []uint64) (Resolution, error) {
			t, err := checkTable(DefaultRangeRule, key[0])
			if err != nil {
				return Resolution{}, err
			}
			kg := trace.PackKG(t, key[1]/DefaultRangeKeys)
			return Resolution{Table: t, KeyGroup: kg, Partition: kg}, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, def)
	}
	if t, ok := wl.(*tpcc.Workload); ok {
		trs, err := tpccRules(t)
		if err != nil {
			return nil, err
		}
		out = append(out, trs...)
	}
	return out, nil
}

// tpccRule is one TPC-C table's rule: its key columns (the warehouse first,
// except for ITEM) and how they pack into the table's record key.
type tpccRule struct {
	name  string
	table txn.TableID
	cols  []Column
	key   func(k []uint64) uint64
}

// Column bounds of the TPC-C record keys (tpcc/keys.go): w < 2^16,
// d in 1..10, ids < 2^40 (order ids < 2^36 in ORDER_LINE, whose low 4 bits
// hold OL_NUMBER), and ids the key functions take as uint32.
func tpccRuleSpecs() []tpccRule {
	w := Column{Name: "w_id", Min: 1, Max: math.MaxUint16}
	d := Column{Name: "d_id", Min: 1, Max: tpcc.DistrictsPerWarehouse}
	u32 := func(n string) Column { return Column{Name: n, Min: 1, Max: math.MaxUint32} }
	id40 := func(n string) Column { return Column{Name: n, Min: 1, Max: 1<<40 - 1} }
	return []tpccRule{
		{"r_warehouse", tpcc.TableWarehouse, []Column{w}, func(k []uint64) uint64 { return tpcc.WarehouseKey(uint32(k[0])) }},
		{"r_district", tpcc.TableDistrict, []Column{w, d}, func(k []uint64) uint64 { return tpcc.DistrictKey(uint32(k[0]), uint32(k[1])) }},
		{"r_customer", tpcc.TableCustomer, []Column{w, d, u32("c_id")}, func(k []uint64) uint64 {
			return tpcc.CustomerKey(uint32(k[0]), uint32(k[1]), uint32(k[2]))
		}},
		{"r_history", tpcc.TableHistory, []Column{w, d, id40("h_seq")}, func(k []uint64) uint64 {
			return tpcc.HistoryKey(uint32(k[0]), uint32(k[1]), k[2])
		}},
		{"r_new_order", tpcc.TableNewOrder, []Column{w, d, id40("o_id")}, func(k []uint64) uint64 {
			return tpcc.OrderKey(uint32(k[0]), uint32(k[1]), k[2])
		}},
		{"r_orders", tpcc.TableOrder, []Column{w, d, id40("o_id")}, func(k []uint64) uint64 {
			return tpcc.OrderKey(uint32(k[0]), uint32(k[1]), k[2])
		}},
		{"r_order_line", tpcc.TableOrderLine, []Column{w, d, {Name: "o_id", Min: 1, Max: 1<<36 - 1}, {Name: "ol_number", Min: 1, Max: 15}},
			func(k []uint64) uint64 { return tpcc.OrderLineKey(uint32(k[0]), uint32(k[1]), k[2], uint32(k[3])) }},
		{"r_item", tpcc.TableItem, []Column{u32("i_id")}, func(k []uint64) uint64 { return tpcc.ItemKey(uint32(k[0])) }},
		{"r_stock", tpcc.TableStock, []Column{w, u32("i_id")}, func(k []uint64) uint64 { return tpcc.StockKey(uint32(k[0]), uint32(k[1])) }},
	}
}

// tpccRules gives TPC-C's per-table rules: a warehouse above the
// configured count is a partition the workload does not have.
func tpccRules(wl *tpcc.Workload) ([]*Rule, error) {
	wr := wl.Rule()
	warehouses := uint64(wl.Config().Warehouses)
	var out []*Rule
	for _, s := range tpccRuleSpecs() {
		r, err := NewRule(s.name, tpcc.TableName(s.table), "workload", s.cols, func(k []uint64) (Resolution, error) {
			if s.table != tpcc.TableItem && k[0] > warehouses {
				return Resolution{}, fmt.Errorf("%w: rule %q: warehouse %d, the workload has warehouses 1..%d", ErrNoSuchPartition, s.name, k[0], warehouses)
			}
			ref := txn.Ref{Table: s.table, Key: s.key(k)}
			return Resolution{Table: s.table, KeyGroup: wr.KeyGroup(ref), Partition: wr.Partition(ref)}, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
