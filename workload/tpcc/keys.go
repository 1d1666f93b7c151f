package tpcc

import "github.com/aura-runtime/aura/txn"

// Table IDs. The nine TPC-C tables come first; the auxiliary tables that
// replace range scans and secondary indexes (doc.go, "Auxiliary tables")
// follow.
const (
	TableWarehouse txn.TableID = iota + 1
	TableDistrict
	TableCustomer
	TableHistory
	TableNewOrder
	TableOrder
	TableOrderLine
	TableItem
	TableStock
	// TableCustomerName: (w, d, C_LAST) → the C_IDs with that last name,
	// sorted by C_FIRST. Read-only after load.
	TableCustomerName
	// TableCustomerLastOrder: (w, d, c) → the customer's most recent O_ID.
	// Written by NewOrder, read by OrderStatus.
	TableCustomerLastOrder
	// TableDeliveryCursor: (w, d) → the oldest undelivered O_ID of the
	// district (= D_NEXT_O_ID when none). Written by Delivery.
	TableDeliveryCursor
)

// NumTables is the number of tables, auxiliary ones included; IDs run from 1
// to NumTables.
const NumTables = int(TableDeliveryCursor)

var tableNames = [...]string{
	TableWarehouse:         "WAREHOUSE",
	TableDistrict:          "DISTRICT",
	TableCustomer:          "CUSTOMER",
	TableHistory:           "HISTORY",
	TableNewOrder:          "NEW_ORDER",
	TableOrder:             "ORDER",
	TableOrderLine:         "ORDER_LINE",
	TableItem:              "ITEM",
	TableStock:             "STOCK",
	TableCustomerName:      "CUSTOMER_NAME_IDX",
	TableCustomerLastOrder: "CUSTOMER_LAST_ORDER",
	TableDeliveryCursor:    "DELIVERY_CURSOR",
}

// TableName returns a table's name ("" for an unknown ID).
func TableName(t txn.TableID) string {
	if int(t) < len(tableNames) {
		return tableNames[t]
	}
	return ""
}

// Record keys pack a tuple into 64 bits as
//
//	key = w << 44 | d << 40 | id        (w < 2^16, d < 16, id < 2^40)
//
// with d = 0 for tables that have no district and w = 0 for ITEM. The id part
// is the table's own id within (w, d): C_ID, O_ID, I_ID, the history
// sequence number, the last-name number, or O_ID << 4 | OL_NUMBER for
// ORDER_LINE. Keys are therefore unique per table, and the warehouse and
// district of every record can be read off its key.
const (
	keyWShift = 44
	keyDShift = 40
	keyIDMask = 1<<keyDShift - 1
)

func pack(w, d uint32, id uint64) uint64 {
	return uint64(w)<<keyWShift | uint64(d&0xF)<<keyDShift | id&keyIDMask
}

// unpack returns the warehouse, district and id of a key.
func unpack(key uint64) (w, d uint32, id uint64) {
	return uint32(key >> keyWShift), uint32(key>>keyDShift) & 0xF, key & keyIDMask
}

// WarehouseKey is the key of WAREHOUSE row w.
func WarehouseKey(w uint32) uint64 { return pack(w, 0, 0) }

// DistrictKey is the key of DISTRICT row (w, d), and of its DELIVERY_CURSOR.
func DistrictKey(w, d uint32) uint64 { return pack(w, d, 0) }

// CustomerKey is the key of CUSTOMER row (w, d, c), and of its
// CUSTOMER_LAST_ORDER row.
func CustomerKey(w, d, c uint32) uint64 { return pack(w, d, uint64(c)) }

// HistoryKey is the key of the seq-th HISTORY row inserted by a Payment of
// district (w, d) (H_W_ID, H_D_ID); seq comes from the district's
// D_NEXT_H_ID counter.
func HistoryKey(w, d uint32, seq uint64) uint64 { return pack(w, d, seq) }

// OrderKey is the key of ORDER row (w, d, o), and of its NEW_ORDER row.
func OrderKey(w, d uint32, o uint64) uint64 { return pack(w, d, o) }

// OrderLineKey is the key of ORDER_LINE row (w, d, o, ol), ol in 1..15.
func OrderLineKey(w, d uint32, o uint64, ol uint32) uint64 {
	return pack(w, d, o<<4|uint64(ol&0xF))
}

// ItemKey is the key of ITEM row i.
func ItemKey(i uint32) uint64 { return pack(0, 0, uint64(i)) }

// StockKey is the key of STOCK row (w, i).
func StockKey(w, i uint32) uint64 { return pack(w, 0, uint64(i)) }

// CustomerNameKey is the key of the CUSTOMER_NAME_IDX row of last name
// number n (0..999, clause 4.3.2.3) in district (w, d).
func CustomerNameKey(w, d uint32, n uint32) uint64 { return pack(w, d, uint64(n)) }

func ref(t txn.TableID, key uint64) txn.Ref { return txn.Ref{Table: t, Key: key} }

// Key groups are packed as
//
//	kg = table << 40 | w << 20 | bucket      (reshaped)
//	kg = table << 40 | record_key_legacy % LegacyKeyGroups   (legacy)
//
// see keyGroup.
const (
	kgTableShift = 40
	kgWShift     = 20
	kgLowMask    = 1<<kgWShift - 1
)

// KeyGroupTable returns the table of a key group (either encoding).
func KeyGroupTable(kg uint64) txn.TableID { return txn.TableID(kg >> kgTableShift) }

// KeyGroupWarehouse returns the warehouse of a reshaped key group (0 for
// ITEM). It is meaningless for legacy key groups.
func KeyGroupWarehouse(kg uint64) uint32 {
	return uint32(kg>>kgWShift) & (1<<(kgTableShift-kgWShift) - 1)
}

// legacyOrderSpan is the order-id (and history-sequence) space per district
// in the legacy record keys.
const legacyOrderSpan = 10_000_000

// legacyKey returns record_key_legacy = w × C + id for a record, with the
// per-table constant C and id documented in doc.go ("Key groups").
func (wl *Workload) legacyKey(r txn.Ref) uint64 {
	w, d, id := unpack(r.Key)
	W, D := uint64(w), uint64(d)
	cpd := uint64(wl.cfg.CustomersPerDistrict)
	dm1 := uint64(0)
	if d > 0 {
		dm1 = D - 1
	}
	switch r.Table {
	case TableWarehouse:
		return W
	case TableDistrict, TableDeliveryCursor:
		return W*DistrictsPerWarehouse + D
	case TableCustomer, TableCustomerLastOrder:
		return W*DistrictsPerWarehouse*cpd + dm1*cpd + id
	case TableCustomerName:
		return W*DistrictsPerWarehouse*LastNames + dm1*LastNames + id
	case TableHistory, TableOrder, TableNewOrder:
		return W*DistrictsPerWarehouse*legacyOrderSpan + dm1*legacyOrderSpan + id
	case TableOrderLine:
		o, ol := id>>4, id&0xF
		return (W*DistrictsPerWarehouse*legacyOrderSpan+dm1*legacyOrderSpan+o)*16 + ol
	case TableItem:
		return id
	case TableStock:
		return W*uint64(wl.cfg.ItemCount) + id
	}
	return r.Key
}

// bucket returns a record's reshaped bucket within its (table, warehouse).
func (wl *Workload) bucket(r txn.Ref) uint64 {
	_, d, id := unpack(r.Key)
	b := uint64(wl.cfg.BucketsPerWarehouse)
	dm1 := uint64(0)
	if d > 0 {
		dm1 = uint64(d - 1)
	}
	switch r.Table {
	case TableWarehouse:
		return 0
	case TableDistrict, TableDeliveryCursor, TableHistory, TableOrder, TableNewOrder, TableOrderLine:
		return dm1 % b
	case TableCustomer, TableCustomerLastOrder:
		cpd := uint64(wl.cfg.CustomersPerDistrict)
		if id > 0 {
			id--
		}
		return (dm1*cpd + id) % b
	case TableCustomerName:
		return (dm1*LastNames + id) % b
	case TableItem, TableStock:
		if id > 0 {
			id--
		}
		return id % b
	}
	return r.Key % b
}

// keyGroup maps a record to its key group under the configured encoding.
func (wl *Workload) keyGroup(r txn.Ref) uint64 {
	t := uint64(r.Table) << kgTableShift
	if wl.legacy {
		return t | wl.legacyKey(r)%uint64(wl.cfg.LegacyKeyGroups)
	}
	w, _, _ := unpack(r.Key)
	if r.Table == TableItem {
		w = 0
	}
	return t | uint64(w)<<kgWShift | wl.bucket(r)&kgLowMask
}

// keyGroupCount is the number of dense key-group indices (keyGroupIndex):
// every table × LegacyKeyGroups under the legacy encoding, every table ×
// warehouse 0..W × BucketsPerWarehouse under the reshaped one.
func (wl *Workload) keyGroupCount() uint64 {
	if wl.legacy {
		return uint64(NumTables) * uint64(wl.cfg.LegacyKeyGroups)
	}
	return uint64(NumTables) * uint64(wl.cfg.Warehouses+1) * uint64(wl.cfg.BucketsPerWarehouse)
}

// keyGroupIndex is kg's dense index below keyGroupCount.
func (wl *Workload) keyGroupIndex(kg uint64) (uint64, bool) {
	t := kg >> kgTableShift
	if t < 1 || t > uint64(NumTables) {
		return 0, false
	}
	if wl.legacy {
		x := kg & (1<<kgTableShift - 1)
		if x >= uint64(wl.cfg.LegacyKeyGroups) {
			return 0, false
		}
		return (t-1)*uint64(wl.cfg.LegacyKeyGroups) + x, true
	}
	w, b := uint64(KeyGroupWarehouse(kg)), kg&kgLowMask
	if w > uint64(wl.cfg.Warehouses) || b >= uint64(wl.cfg.BucketsPerWarehouse) {
		return 0, false
	}
	return ((t-1)*uint64(wl.cfg.Warehouses+1)+w)*uint64(wl.cfg.BucketsPerWarehouse) + b, true
}

// tablePartitions splits a table's hash index by reshaped key group
// (txn.Table.Partitions), counting only the key groups the table uses, so
// that its capacity is spread over partitions about equally full: a
// district's tables use the buckets (d−1) mod B of their warehouse, so
// min(10, B) of them; the customer tables and STOCK spread their rows over
// all B; ITEM is warehouse 0's B; WAREHOUSE one a warehouse. Within a
// table a partition is one key group. The legacy encoding has none: its
// key groups (record key mod 1024) fill unevenly (ORDER_LINE's line
// numbers), and it is the encoding AURA is measured against.
func (wl *Workload) tablePartitions(t txn.TableID) (uint64, func(key uint64) uint64) {
	W, B := uint64(wl.cfg.Warehouses), uint64(wl.cfg.BucketsPerWarehouse)
	wOf := func(key uint64) uint64 {
		w, _, _ := unpack(key)
		return uint64(max(w, 1) - 1)
	}
	switch t {
	case TableWarehouse:
		return W, wOf
	case TableDistrict, TableDeliveryCursor, TableHistory, TableOrder, TableNewOrder, TableOrderLine:
		nd := min(uint64(DistrictsPerWarehouse), B)
		return W * nd, func(key uint64) uint64 {
			return wOf(key)*nd + wl.bucket(txn.Ref{Table: t, Key: key})%nd
		}
	case TableItem:
		return B, func(key uint64) uint64 { return wl.bucket(txn.Ref{Table: t, Key: key}) }
	}
	return W * B, func(key uint64) uint64 { return wOf(key)*B + wl.bucket(txn.Ref{Table: t, Key: key}) }
}

// partition returns a record's warehouse (0 for ITEM).
func partition(r txn.Ref) uint64 {
	if r.Table == TableItem {
		return 0
	}
	w, _, _ := unpack(r.Key)
	return uint64(w)
}
