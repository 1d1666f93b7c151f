package tpcc

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
)

// ErrInvalidInput is returned by Program for a transaction whose parameters
// are out of range (a warehouse that does not exist, a district outside
// 1..10, too many order lines, an unknown last name, …).
var ErrInvalidInput = errors.New("tpcc: invalid transaction input")

// Program returns the program executing msg (any of the five TPC-C bodies).
// The program may be run several times (retries); it does not modify msg.
// TPC-C bodies return no output, so res is not touched.
func (wl *Workload) Program(msg *messages.TxnSubmit, _ *messages.TxnResult) (txn.Program, error) {
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		return wl.newOrderProgram(b.NewOrder)
	case *messages.TxnSubmit_Payment:
		return wl.paymentProgram(b.Payment)
	case *messages.TxnSubmit_OrderStatus:
		return wl.orderStatusProgram(b.OrderStatus)
	case *messages.TxnSubmit_Delivery:
		return wl.deliveryProgram(b.Delivery)
	case *messages.TxnSubmit_StockLevel:
		return wl.stockLevelProgram(b.StockLevel)
	case nil:
		return nil, fmt.Errorf("%w: empty body", ErrInvalidInput)
	default:
		return nil, fmt.Errorf("%w: body %T is not a TPC-C transaction", ErrInvalidInput, b)
	}
}

func (wl *Workload) validWD(what string, w, d uint32) error {
	var errs []error
	if w < 1 || int(w) > wl.cfg.Warehouses {
		errs = append(errs, fmt.Errorf("%w: %s warehouse %d, want 1..%d", ErrInvalidInput, what, w, wl.cfg.Warehouses))
	}
	if d < 1 || d > DistrictsPerWarehouse {
		errs = append(errs, fmt.Errorf("%w: %s district %d, want 1..%d", ErrInvalidInput, what, d, DistrictsPerWarehouse))
	}
	return errors.Join(errs...)
}

func (wl *Workload) validCustomer(byName bool, c uint32, last string) (uint32, error) {
	if byName {
		n, ok := LastNameNumber(last)
		if !ok {
			return 0, fmt.Errorf("%w: last name %q", ErrInvalidInput, last)
		}
		return n, nil
	}
	if c < 1 || int(c) > wl.cfg.CustomersPerDistrict {
		return 0, fmt.Errorf("%w: customer %d, want 1..%d", ErrInvalidInput, c, wl.cfg.CustomersPerDistrict)
	}
	return 0, nil
}

// missing reports a record the population guarantees but the store lacks.
func missing(r txn.Ref) error {
	return fmt.Errorf("tpcc: %s key %#x: %w", TableName(r.Table), r.Key, txn.ErrNotFound)
}

type lineInput struct {
	iID, supplyW, quantity uint32
}

// newOrderProgram is clause 2.4.2.2. Round trips: (1) read WAREHOUSE,
// CUSTOMER and every ITEM; (2) lock DISTRICT, the distinct STOCK rows and the
// customer's CUSTOMER_LAST_ORDER; then insert ORDER, NEW_ORDER and the
// ORDER_LINEs. An unused item rolls back (clause 2.4.2.3) after the reads and
// the locks of the lines before it, as a line-by-line execution would.
func (wl *Workload) newOrderProgram(m *messages.TpccNewOrder) (txn.Program, error) {
	w, d, c := m.GetWId(), m.GetDId(), m.GetCId()
	errs := []error{wl.validWD("home", w, d)}
	if _, err := wl.validCustomer(false, c, ""); err != nil {
		errs = append(errs, err)
	}
	if n := len(m.GetLines()); n < 1 || n > MaxOrderLines {
		errs = append(errs, fmt.Errorf("%w: %d order lines, want 1..%d", ErrInvalidInput, n, MaxOrderLines))
	}
	lines := make([]lineInput, len(m.GetLines()))
	for k, l := range m.GetLines() {
		lines[k] = lineInput{l.GetIId(), l.GetSupplyWId(), l.GetQuantity()}
		if l.GetSupplyWId() < 1 || int(l.GetSupplyWId()) > wl.cfg.Warehouses {
			errs = append(errs, fmt.Errorf("%w: line %d supply warehouse %d", ErrInvalidInput, k+1, l.GetSupplyWId()))
		}
		if l.GetQuantity() < 1 || l.GetQuantity() > 10 {
			errs = append(errs, fmt.Errorf("%w: line %d quantity %d, want 1..10", ErrInvalidInput, k+1, l.GetQuantity()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	entry := m.GetEntryUnixMicros()

	return func(tx txn.Tx) error {
		n := len(lines)
		reads := make([]txn.Ref, 2+n)
		reads[0] = ref(TableWarehouse, WarehouseKey(w))
		reads[1] = ref(TableCustomer, CustomerKey(w, d, c))
		for k, l := range lines {
			reads[2+k] = ref(TableItem, ItemKey(l.iID))
		}
		vals, err := tx.GetMany(reads)
		if err != nil {
			return err
		}
		var wh warehouse
		var cu customer
		for k, dec := range []interface{ decode([]byte) error }{&wh, &cu} {
			if vals[k] == nil {
				return missing(reads[k])
			}
			if err := dec.decode(vals[k]); err != nil {
				return err
			}
		}
		items := make([]item, n)
		invalid := -1
		for k := range lines {
			if vals[2+k] == nil {
				invalid = k
				break
			}
			if err := items[k].decode(vals[2+k]); err != nil {
				return err
			}
		}
		valid := n
		if invalid >= 0 {
			valid = invalid
		}

		locks := make([]txn.Ref, 1, 2+valid)
		locks[0] = ref(TableDistrict, DistrictKey(w, d))
		slot := make([]int, valid) // line → index in locks of its stock row
		for k, l := range lines[:valid] {
			sr := ref(TableStock, StockKey(l.supplyW, l.iID))
			slot[k] = -1
			for j := 1; j < len(locks); j++ {
				if locks[j] == sr {
					slot[k] = j
				}
			}
			if slot[k] < 0 {
				slot[k] = len(locks)
				locks = append(locks, sr)
			}
		}
		lastOrderAt := len(locks)
		if invalid < 0 {
			locks = append(locks, ref(TableCustomerLastOrder, CustomerKey(w, d, c)))
		}
		lv, err := tx.GetForUpdateMany(locks)
		if err != nil {
			return err
		}
		if invalid >= 0 {
			return fmt.Errorf("tpcc: new-order line %d item %d is unused: %w", invalid+1, lines[invalid].iID, txn.ErrRollback)
		}
		for j, v := range lv {
			if v == nil {
				return missing(locks[j])
			}
		}
		var ds district
		if err := ds.decode(lv[0]); err != nil {
			return err
		}
		o := uint64(ds.nextOID)
		ds.nextOID++
		stocks := make([]stock, lastOrderAt)
		for j := 1; j < lastOrderAt; j++ {
			if err := stocks[j].decode(lv[j]); err != nil {
				return err
			}
		}

		or := order{entryD: entry, cID: c, olCnt: uint8(n), allLocal: 1}
		for _, l := range lines {
			if l.supplyW != w {
				or.allLocal = 0
			}
		}
		if err := tx.Insert(ref(TableOrder, OrderKey(w, d, o)), or.encode()); err != nil {
			return err
		}
		if err := tx.Insert(ref(TableNewOrder, OrderKey(w, d, o)), encodeU64(o)); err != nil {
			return err
		}
		var total int64
		for k, l := range lines {
			s := &stocks[slot[k]]
			q := int32(l.quantity)
			if s.quantity >= q+10 {
				s.quantity -= q
			} else {
				s.quantity = s.quantity - q + 91
			}
			s.ytd += int64(q)
			s.orderCnt++
			if l.supplyW != w {
				s.remoteCnt++
			}
			amount := int64(l.quantity) * items[k].price
			total += amount
			_ = items[k].original == 1 && s.original == 1 // brand-generic: "B" else "G"; display only
			line := orderLine{amount: amount, iID: l.iID, supplyW: uint16(l.supplyW), quantity: uint8(l.quantity), distInfo: s.dist[d-1]}
			if err := tx.Insert(ref(TableOrderLine, OrderLineKey(w, d, o, uint32(k+1))), line.encode()); err != nil {
				return err
			}
		}
		// The displayed total: sum(OL_AMOUNT) × (1 − C_DISCOUNT) × (1 + W_TAX + D_TAX).
		_ = total * int64(10_000-cu.discount) * int64(10_000+wh.tax+ds.tax) / 100_000_000

		if err := tx.Put(locks[0], ds.encode()); err != nil {
			return err
		}
		for j := 1; j < lastOrderAt; j++ {
			if err := tx.Put(locks[j], stocks[j].encode()); err != nil {
				return err
			}
		}
		return tx.Put(locks[lastOrderAt], encodeU64(o))
	}, nil
}

// resolveCustomer returns the C_ID a by-last-name selection picks: the
// customer at position ceil(n/2) of those with that last name sorted by
// C_FIRST (clause 2.5.2.2 and 2.6.2.2), through CUSTOMER_NAME_IDX.
func resolveCustomer(tx txn.Tx, w, d, lastNum uint32) (uint32, error) {
	r := ref(TableCustomerName, CustomerNameKey(w, d, lastNum))
	v, err := tx.Get(r)
	if err != nil {
		if errors.Is(err, txn.ErrNotFound) {
			return 0, fmt.Errorf("%w: no customer named %s in warehouse %d district %d", ErrInvalidInput, LastName(int(lastNum)), w, d)
		}
		return 0, err
	}
	ids, err := decodeNameIndex(v)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("%w: no customer named %s in warehouse %d district %d", ErrInvalidInput, LastName(int(lastNum)), w, d)
	}
	return ids[(len(ids)-1)/2], nil
}

// paymentProgram is clause 2.5.2.2. Round trips: (by last name: read the
// name index,) lock WAREHOUSE, DISTRICT and CUSTOMER, insert HISTORY.
func (wl *Workload) paymentProgram(m *messages.TpccPayment) (txn.Program, error) {
	w, d, cw, cd := m.GetWId(), m.GetDId(), m.GetCWId(), m.GetCDId()
	errs := []error{wl.validWD("home", w, d), wl.validWD("customer", cw, cd)}
	lastNum, err := wl.validCustomer(m.GetByLastName(), m.GetCId(), m.GetCLast())
	errs = append(errs, err)
	amount := m.GetHAmountCents()
	if amount <= 0 {
		errs = append(errs, fmt.Errorf("%w: payment amount %d cents", ErrInvalidInput, amount))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	byName, cid0, date := m.GetByLastName(), m.GetCId(), m.GetDateUnixMicros()

	return func(tx txn.Tx) error {
		c := cid0
		if byName {
			var err error
			if c, err = resolveCustomer(tx, cw, cd, lastNum); err != nil {
				return err
			}
		}
		locks := []txn.Ref{
			ref(TableWarehouse, WarehouseKey(w)),
			ref(TableDistrict, DistrictKey(w, d)),
			ref(TableCustomer, CustomerKey(cw, cd, c)),
		}
		lv, err := tx.GetForUpdateMany(locks)
		if err != nil {
			return err
		}
		for j, v := range lv {
			if v == nil {
				return missing(locks[j])
			}
		}
		var wh warehouse
		var ds district
		var cu customer
		for j, dec := range []interface{ decode([]byte) error }{&wh, &ds, &cu} {
			if err := dec.decode(lv[j]); err != nil {
				return err
			}
		}
		wh.ytd += amount
		ds.ytd += amount
		seq := ds.nextHID
		ds.nextHID++
		cu.balance -= amount
		cu.ytdPayment += amount
		cu.paymentCnt++
		if cu.credit == creditBad {
			// C_DATA = "C_ID C_D_ID C_W_ID D_ID W_ID H_AMOUNT|" + C_DATA,
			// truncated to the field's size.
			entry := strconv.AppendUint(nil, uint64(c), 10)
			for _, x := range []uint64{uint64(cd), uint64(cw), uint64(d), uint64(w)} {
				entry = append(entry, ' ')
				entry = strconv.AppendUint(entry, x, 10)
			}
			entry = append(entry, ' ')
			entry = strconv.AppendInt(entry, amount, 10)
			entry = append(entry, '|')
			var nd [cDataLen]byte
			k := copy(nd[:], entry)
			copy(nd[k:], cu.data[:])
			cu.data = nd
		}
		for j, v := range [][]byte{wh.encode(), ds.encode(), cu.encode()} {
			if err := tx.Put(locks[j], v); err != nil {
				return err
			}
		}
		h := history{amount: amount, date: date, cID: c, cW: cw, w: w, cD: uint8(cd), d: uint8(d)}
		// H_DATA = W_NAME + 4 spaces + D_NAME.
		hd := append(trimZero(wh.name[:]), "    "...)
		hd = append(hd, trimZero(ds.name[:])...)
		copy(h.data[:], hd)
		return tx.Insert(ref(TableHistory, HistoryKey(w, d, seq)), h.encode())
	}, nil
}

func trimZero(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return append([]byte(nil), b[:n]...)
}

// orderStatusProgram is clause 2.6.2.2 (read-only): the customer (by id or
// last name), its most recent order through CUSTOMER_LAST_ORDER, and that
// order's lines.
func (wl *Workload) orderStatusProgram(m *messages.TpccOrderStatus) (txn.Program, error) {
	w, d := m.GetWId(), m.GetDId()
	errs := []error{wl.validWD("home", w, d)}
	lastNum, err := wl.validCustomer(m.GetByLastName(), m.GetCId(), m.GetCLast())
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	byName, cid0 := m.GetByLastName(), m.GetCId()

	return func(tx txn.Tx) error {
		c := cid0
		if byName {
			var err error
			if c, err = resolveCustomer(tx, w, d, lastNum); err != nil {
				return err
			}
		}
		reads := []txn.Ref{ref(TableCustomer, CustomerKey(w, d, c)), ref(TableCustomerLastOrder, CustomerKey(w, d, c))}
		vals, err := tx.GetMany(reads)
		if err != nil {
			return err
		}
		for j, v := range vals {
			if v == nil {
				return missing(reads[j])
			}
		}
		var cu customer
		if err := cu.decode(vals[0]); err != nil {
			return err
		}
		o, err := decodeU64("CUSTOMER_LAST_ORDER", vals[1])
		if err != nil || o == 0 {
			return err // a customer without orders has nothing more to show
		}
		or := ref(TableOrder, OrderKey(w, d, o))
		ov, err := tx.Get(or)
		if err != nil {
			return err
		}
		var od order
		if err := od.decode(ov); err != nil {
			return err
		}
		lines := make([]txn.Ref, od.olCnt)
		for k := range lines {
			lines[k] = ref(TableOrderLine, OrderLineKey(w, d, o, uint32(k+1)))
		}
		lvals, err := tx.GetMany(lines)
		if err != nil {
			return err
		}
		for k, v := range lvals {
			if v == nil {
				return missing(lines[k])
			}
		}
		return nil
	}, nil
}

// deliveryProgram is clause 2.7.4.2 for all ten districts of the warehouse.
// Round trips: (1) read the ten DELIVERY_CURSORs; (2) lock the NEW_ORDER and
// ORDER rows they point at (a missing NEW_ORDER row means the district has no
// undelivered order and is skipped; missing rows take no lock); (3) lock the
// cursors, ORDER_LINEs and CUSTOMERs of the districts with an order to
// deliver; then delete, update and write back.
func (wl *Workload) deliveryProgram(m *messages.TpccDelivery) (txn.Program, error) {
	w, carrier := m.GetWId(), m.GetOCarrierId()
	errs := []error{wl.validWD("home", w, 1)}
	if carrier < 1 || carrier > 10 {
		errs = append(errs, fmt.Errorf("%w: carrier %d, want 1..10", ErrInvalidInput, carrier))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	date := max(m.GetDeliveryUnixMicros(), 1) // OL_DELIVERY_D is never null once delivered

	return func(tx txn.Tx) error {
		const D = DistrictsPerWarehouse
		cursors := make([]txn.Ref, D)
		for d := range cursors {
			cursors[d] = ref(TableDeliveryCursor, DistrictKey(w, uint32(d+1)))
		}
		cv, err := tx.GetMany(cursors)
		if err != nil {
			return err
		}
		oids := make([]uint64, D)
		probe := make([]txn.Ref, 0, 2*D)
		for d := range cursors {
			if cv[d] == nil {
				return missing(cursors[d])
			}
			if oids[d], err = decodeU64("DELIVERY_CURSOR", cv[d]); err != nil {
				return err
			}
			key := OrderKey(w, uint32(d+1), oids[d])
			probe = append(probe, ref(TableNewOrder, key), ref(TableOrder, key))
		}
		pv, err := tx.GetForUpdateMany(probe)
		if err != nil {
			return err
		}
		type job struct {
			d      uint32
			o      uint64
			order  order
			lines  int // index of the first line in locks
			custAt int
			curAt  int
		}
		var jobs []job
		var locks []txn.Ref
		for d := range cursors {
			if pv[2*d] == nil {
				continue // no undelivered order in this district
			}
			if pv[2*d+1] == nil {
				return missing(probe[2*d+1])
			}
			j := job{d: uint32(d + 1), o: oids[d]}
			if err := j.order.decode(pv[2*d+1]); err != nil {
				return err
			}
			j.curAt = len(locks)
			locks = append(locks, cursors[d])
			j.lines = len(locks)
			for ol := 1; ol <= int(j.order.olCnt); ol++ {
				locks = append(locks, ref(TableOrderLine, OrderLineKey(w, j.d, j.o, uint32(ol))))
			}
			j.custAt = len(locks)
			locks = append(locks, ref(TableCustomer, CustomerKey(w, j.d, j.order.cID)))
			jobs = append(jobs, j)
		}
		if len(jobs) == 0 {
			return nil
		}
		lv, err := tx.GetForUpdateMany(locks)
		if err != nil {
			return err
		}
		for k, v := range lv {
			if v == nil {
				return missing(locks[k])
			}
		}
		for _, j := range jobs {
			cur, err := decodeU64("DELIVERY_CURSOR", lv[j.curAt])
			if err != nil {
				return err
			}
			if cur != j.o {
				return fmt.Errorf("%w: delivery cursor of district %d moved from %d to %d", txn.ErrConflict, j.d, j.o, cur)
			}
			if err := tx.Delete(probe[2*(j.d-1)]); err != nil {
				return err
			}
			j.order.carrier = uint8(carrier)
			if err := tx.Put(probe[2*(j.d-1)+1], j.order.encode()); err != nil {
				return err
			}
			var sum int64
			for k := j.lines; k < j.custAt; k++ {
				var line orderLine
				if err := line.decode(lv[k]); err != nil {
					return err
				}
				line.deliveryD = date
				sum += line.amount
				if err := tx.Put(locks[k], line.encode()); err != nil {
					return err
				}
			}
			var cu customer
			if err := cu.decode(lv[j.custAt]); err != nil {
				return err
			}
			cu.balance += sum
			cu.deliveryCnt++
			if err := tx.Put(locks[j.custAt], cu.encode()); err != nil {
				return err
			}
			if err := tx.Put(locks[j.curAt], encodeU64(j.o+1)); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// stockLevelProgram is clause 2.8.2.2 (read-only): the lines of the
// district's last 20 orders and the distinct items among them whose home
// warehouse stock is below the threshold.
func (wl *Workload) stockLevelProgram(m *messages.TpccStockLevel) (txn.Program, error) {
	w, d, threshold := m.GetWId(), m.GetDId(), int32(m.GetThreshold())
	if err := wl.validWD("home", w, d); err != nil {
		return nil, err
	}
	return func(tx txn.Tx) error {
		dr := ref(TableDistrict, DistrictKey(w, d))
		dv, err := tx.Get(dr)
		if err != nil {
			return err
		}
		var ds district
		if err := ds.decode(dv); err != nil {
			return err
		}
		hi := uint64(ds.nextOID)
		lo := uint64(1)
		if hi > 20 {
			lo = hi - 20
		}
		orders := make([]txn.Ref, 0, 20)
		for o := lo; o < hi; o++ {
			orders = append(orders, ref(TableOrder, OrderKey(w, d, o)))
		}
		ov, err := tx.GetMany(orders)
		if err != nil {
			return err
		}
		var lines []txn.Ref
		for k, v := range ov {
			if v == nil {
				return missing(orders[k])
			}
			var od order
			if err := od.decode(v); err != nil {
				return err
			}
			for ol := 1; ol <= int(od.olCnt); ol++ {
				lines = append(lines, ref(TableOrderLine, OrderLineKey(w, d, lo+uint64(k), uint32(ol))))
			}
		}
		lv, err := tx.GetMany(lines)
		if err != nil {
			return err
		}
		seen := make(map[uint32]bool, len(lines))
		var stocks []txn.Ref
		for k, v := range lv {
			if v == nil {
				return missing(lines[k])
			}
			var line orderLine
			if err := line.decode(v); err != nil {
				return err
			}
			if !seen[line.iID] {
				seen[line.iID] = true
				stocks = append(stocks, ref(TableStock, StockKey(w, line.iID)))
			}
		}
		sv, err := tx.GetMany(stocks)
		if err != nil {
			return err
		}
		low := 0
		for k, v := range sv {
			if v == nil {
				return missing(stocks[k])
			}
			var s stock
			if err := s.decode(v); err != nil {
				return err
			}
			if s.quantity < threshold {
				low++
			}
		}
		_ = low // displayed, not returned
		return nil
	}, nil
}
