package sim

import (
	"math/rand/v2"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// tpccShape completes TPC-C footprints with what execution decides, so that
// the simulated access set is the engine's under either key encoding:
// NewOrder inserts ORDER, NEW_ORDER and its ORDER_LINEs at the district's
// next order id; Payment inserts HISTORY at the district's next sequence
// number; Delivery locks, per district, the oldest undelivered order's
// NEW_ORDER, ORDER, ten ORDER_LINEs (the mean) and a customer. The footprint's
// placeholder refs are replaced. Order ids are drawn when the transaction is
// generated (aborted attempts keep theirs, committed or not: ids may skip,
// which changes nothing the simulator measures).
type tpccShape struct {
	wl       *tpcc.Workload
	cpd      int
	nextO    []uint64 // per (w, d): next order id
	cursor   []uint64 // per (w, d): oldest undelivered order id
	nextH    []uint64 // per (w, d): next history sequence number
	inserted map[txn.Ref]bool
}

func newTPCCShape(wl workload.Workload) *tpccShape {
	w, ok := wl.(*tpcc.Workload)
	if !ok {
		return nil
	}
	cfg := w.Config()
	n := (cfg.Warehouses + 1) * (tpcc.DistrictsPerWarehouse + 1)
	t := &tpccShape{wl: w, cpd: cfg.CustomersPerDistrict, nextO: make([]uint64, n), cursor: make([]uint64, n), nextH: make([]uint64, n)}
	undelivered := uint64(cfg.CustomersPerDistrict * 900 / tpcc.SpecCustomersPerDistrict)
	for i := range n {
		t.nextO[i] = uint64(cfg.CustomersPerDistrict) + 1
		t.cursor[i] = t.nextO[i] - undelivered
		t.nextH[i] = uint64(cfg.CustomersPerDistrict) + 1
	}
	return t
}

func (t *tpccShape) idx(w, d uint32) int { return int(w)*(tpcc.DistrictsPerWarehouse+1) + int(d) }

const keyIDMask = 1<<40 - 1

// isPlaceholder reports a footprint's placeholder ref (order id or sequence
// number 0).
func isPlaceholder(r txn.Ref) bool {
	id := r.Key & keyIDMask
	switch r.Table {
	case tpcc.TableOrder, tpcc.TableNewOrder, tpcc.TableHistory:
		return id == 0
	case tpcc.TableOrderLine:
		return id>>4 == 0
	}
	return false
}

func (t *tpccShape) valid(w, d uint32) bool {
	return w >= 1 && int(w) <= t.wl.Config().Warehouses && d >= 1 && d <= tpcc.DistrictsPerWarehouse
}

// expand returns the completed write set and which of its records are
// inserted (they count as locks but never conflict: the DISTRICT or
// DELIVERY_CURSOR lock serialises their writers).
func (t *tpccShape) expand(msg *messages.TxnSubmit, fp workload.Footprint, rng *rand.Rand) (writes []txn.Ref, insert []bool) {
	for _, r := range fp.Writes {
		if !isPlaceholder(r) {
			writes = append(writes, r)
			insert = append(insert, false)
		}
	}
	add := func(r txn.Ref, ins bool) {
		writes = append(writes, r)
		insert = append(insert, ins)
	}
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		m := b.NewOrder
		w, d := m.GetWId(), m.GetDId()
		if len(writes) == 0 || !t.valid(w, d) {
			break
		}
		i := t.idx(w, d)
		o := t.nextO[i]
		t.nextO[i]++
		add(txn.Ref{Table: tpcc.TableOrder, Key: tpcc.OrderKey(w, d, o)}, true)
		add(txn.Ref{Table: tpcc.TableNewOrder, Key: tpcc.OrderKey(w, d, o)}, true)
		for k := range m.GetLines() {
			add(txn.Ref{Table: tpcc.TableOrderLine, Key: tpcc.OrderLineKey(w, d, o, uint32(k+1))}, true)
		}
	case *messages.TxnSubmit_Payment:
		m := b.Payment
		w, d := m.GetWId(), m.GetDId()
		if len(writes) == 0 || !t.valid(w, d) {
			break
		}
		i := t.idx(w, d)
		add(txn.Ref{Table: tpcc.TableHistory, Key: tpcc.HistoryKey(w, d, t.nextH[i])}, true)
		t.nextH[i]++
	case *messages.TxnSubmit_Delivery:
		w := b.Delivery.GetWId()
		if len(writes) == 0 || !t.valid(w, 1) {
			break
		}
		for d := uint32(1); d <= tpcc.DistrictsPerWarehouse; d++ {
			i := t.idx(w, d)
			if t.cursor[i] >= t.nextO[i] {
				continue // nothing to deliver in this district
			}
			o := t.cursor[i]
			t.cursor[i]++
			add(txn.Ref{Table: tpcc.TableNewOrder, Key: tpcc.OrderKey(w, d, o)}, false)
			add(txn.Ref{Table: tpcc.TableOrder, Key: tpcc.OrderKey(w, d, o)}, false)
			for ol := uint32(1); ol <= 10; ol++ {
				add(txn.Ref{Table: tpcc.TableOrderLine, Key: tpcc.OrderLineKey(w, d, o, ol)}, false)
			}
			add(txn.Ref{Table: tpcc.TableCustomer, Key: tpcc.CustomerKey(w, d, uint32(1+rng.IntN(t.cpd)))}, false)
		}
	}
	return writes, insert
}

// warehouses is the configured scale.
func (t *tpccShape) warehouses() int { return t.wl.Config().Warehouses }
