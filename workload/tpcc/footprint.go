package tpcc

import (
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
)

// placeholderOID stands for the order id (and history sequence number) a
// transaction picks during execution: 0 is never a real one. Under the
// reshaped encoding the order-family and HISTORY tables have one key group
// per district, so a placeholder ref has the same key group as the row the
// transaction will insert; under the legacy encoding no prediction is
// possible and placeholders are left out.
const placeholderOID = 0

// Footprint predicts a transaction's locked (Writes) and read records from
// its parameters:
//
//   - NewOrder: writes DISTRICT, the distinct STOCK rows of its lines, ORDER,
//     NEW_ORDER and its ORDER_LINEs (placeholders), CUSTOMER_LAST_ORDER;
//     reads WAREHOUSE, CUSTOMER, the ITEMs.
//   - Payment: writes WAREHOUSE, DISTRICT, the CUSTOMER (by id) or — by last
//     name, where the customer is only known after reading it — the
//     CUSTOMER_NAME_IDX row that resolves it (a proxy in the customer's
//     warehouse and district; it is read, not locked), HISTORY (placeholder).
//   - Delivery: writes the ten DELIVERY_CURSORs and, per district, NEW_ORDER,
//     ORDER and ORDER_LINE placeholders; the customers are unknown.
//   - OrderStatus, StockLevel: reads only (CUSTOMER or CUSTOMER_NAME_IDX and
//     CUSTOMER_LAST_ORDER; DISTRICT).
//
// Records decided during execution (the new order id, the delivered orders'
// lines and customers) are named by placeholders (see placeholderOID) or
// missed. Invalid input yields an empty footprint.
func (wl *Workload) Footprint(msg *messages.TxnSubmit) workload.Footprint {
	var fp workload.Footprint
	addW := func(r txn.Ref) {
		for _, x := range fp.Writes {
			if x == r {
				return
			}
		}
		fp.Writes = append(fp.Writes, r)
	}
	okWD := func(w, d uint32) bool { return wl.validWD("", w, d) == nil }
	placeholders := !wl.legacy
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		m := b.NewOrder
		w, d, c := m.GetWId(), m.GetDId(), m.GetCId()
		if !okWD(w, d) {
			return fp
		}
		addW(ref(TableDistrict, DistrictKey(w, d)))
		fp.Reads = append(fp.Reads, ref(TableWarehouse, WarehouseKey(w)), ref(TableCustomer, CustomerKey(w, d, c)))
		for _, l := range m.GetLines() {
			fp.Reads = append(fp.Reads, ref(TableItem, ItemKey(l.GetIId())))
			if l.GetIId() >= 1 && int(l.GetIId()) <= wl.cfg.ItemCount {
				addW(ref(TableStock, StockKey(l.GetSupplyWId(), l.GetIId())))
			}
		}
		if placeholders {
			addW(ref(TableOrder, OrderKey(w, d, placeholderOID)))
			addW(ref(TableNewOrder, OrderKey(w, d, placeholderOID)))
			for k := range m.GetLines() {
				addW(ref(TableOrderLine, OrderLineKey(w, d, placeholderOID, uint32(k+1))))
			}
		}
		addW(ref(TableCustomerLastOrder, CustomerKey(w, d, c)))
	case *messages.TxnSubmit_Payment:
		m := b.Payment
		w, d, cw, cd := m.GetWId(), m.GetDId(), m.GetCWId(), m.GetCDId()
		if !okWD(w, d) || !okWD(cw, cd) {
			return fp
		}
		addW(ref(TableWarehouse, WarehouseKey(w)))
		addW(ref(TableDistrict, DistrictKey(w, d)))
		if m.GetByLastName() {
			if n, ok := LastNameNumber(m.GetCLast()); ok {
				addW(ref(TableCustomerName, CustomerNameKey(cw, cd, n)))
			}
		} else {
			addW(ref(TableCustomer, CustomerKey(cw, cd, m.GetCId())))
		}
		if placeholders {
			addW(ref(TableHistory, HistoryKey(w, d, placeholderOID)))
		}
	case *messages.TxnSubmit_OrderStatus:
		m := b.OrderStatus
		w, d := m.GetWId(), m.GetDId()
		if !okWD(w, d) {
			return fp
		}
		if m.GetByLastName() {
			if n, ok := LastNameNumber(m.GetCLast()); ok {
				fp.Reads = append(fp.Reads, ref(TableCustomerName, CustomerNameKey(w, d, n)))
			}
		} else {
			fp.Reads = append(fp.Reads,
				ref(TableCustomer, CustomerKey(w, d, m.GetCId())),
				ref(TableCustomerLastOrder, CustomerKey(w, d, m.GetCId())))
		}
	case *messages.TxnSubmit_Delivery:
		w := b.Delivery.GetWId()
		if !okWD(w, 1) {
			return fp
		}
		for d := uint32(1); d <= DistrictsPerWarehouse; d++ {
			addW(ref(TableDeliveryCursor, DistrictKey(w, d)))
		}
		if placeholders {
			for d := uint32(1); d <= DistrictsPerWarehouse; d++ {
				addW(ref(TableNewOrder, OrderKey(w, d, placeholderOID)))
				addW(ref(TableOrder, OrderKey(w, d, placeholderOID)))
				addW(ref(TableOrderLine, OrderLineKey(w, d, placeholderOID, 1)))
			}
		}
	case *messages.TxnSubmit_StockLevel:
		m := b.StockLevel
		if !okWD(m.GetWId(), m.GetDId()) {
			return fp
		}
		fp.Reads = append(fp.Reads, ref(TableDistrict, DistrictKey(m.GetWId(), m.GetDId())))
	}
	return fp
}
