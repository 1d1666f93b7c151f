package tpcc

import (
	"math/rand/v2"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
)

// Workload is the TPC-C workload. It is immutable after New and safe for
// concurrent use; its generators are not.
type Workload struct {
	cfg    Config
	mix    Mix
	legacy bool

	// NURand C constants (clause 2.1.6), shared by every generator.
	cLastLoad, cLastRun, cCID, cIID int

	// nameIdxSize is CUSTOMER_NAME_IDX's value size.
	nameIdxSize int
	schema      txn.Schema
}

var _ workload.Workload = (*Workload)(nil)

// New returns the workload for a valid config. It replays the deterministic
// population's last names and order-line counts (a few milliseconds at the
// default scale) to size CUSTOMER_NAME_IDX and ORDER_LINE exactly.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wl := &Workload{cfg: cfg, mix: profiles[cfg.Profile], legacy: cfg.KeyEncoding == EncodingLegacy}
	r := wl.stream(streamConstants, 0, 0)
	wl.cLastLoad = r.IntN(256)
	for {
		wl.cLastRun = r.IntN(256)
		delta := wl.cLastRun - wl.cLastLoad
		if delta < 0 {
			delta = -delta
		}
		if delta >= 65 && delta <= 119 && delta != 96 && delta != 112 {
			break
		}
	}
	wl.cCID = r.IntN(1024)
	wl.cIID = r.IntN(8192)

	// Replay the population's last names and order-line counts.
	maxPerName, names := 0, 0
	loadedLines := uint64(0)
	var counts [LastNames]int
	for w := 1; w <= cfg.Warehouses; w++ {
		for d := 1; d <= DistrictsPerWarehouse; d++ {
			counts = [LastNames]int{}
			for _, n := range wl.lastNums(uint32(w), uint32(d)) {
				if counts[n] == 0 {
					names++
				}
				counts[n]++
				maxPerName = max(maxPerName, counts[n])
			}
			for _, c := range wl.olCnts(uint32(w), uint32(d)) {
				loadedLines += uint64(c)
			}
		}
	}
	wl.nameIdxSize = 4 + 4*maxPerName

	W := uint64(cfg.Warehouses)
	dists := W * DistrictsPerWarehouse
	custs := dists * uint64(cfg.CustomersPerDistrict)
	n := uint64(cfg.ExpectedNewOrders)
	m := wl.mix
	payments := uint64(0)
	if m.NewOrder > 0 {
		// Payments issued alongside n committed NewOrders (1% of NewOrders
		// roll back), with 6% slack.
		payments = n * uint64(m.Payment) * 106 / (uint64(m.NewOrder) * 99)
	}
	wl.schema = txn.Schema{Tables: []txn.Table{
		{ID: TableWarehouse, Name: TableName(TableWarehouse), ValueSize: warehouseSize, Capacity: W},
		{ID: TableDistrict, Name: TableName(TableDistrict), ValueSize: districtSize, Capacity: dists},
		{ID: TableCustomer, Name: TableName(TableCustomer), ValueSize: customerSize, Capacity: custs},
		{ID: TableHistory, Name: TableName(TableHistory), ValueSize: historySize, Capacity: custs + payments + 1024},
		{ID: TableNewOrder, Name: TableName(TableNewOrder), ValueSize: newOrderSize, Capacity: dists*uint64(wl.newOrdersPerDistrict()) + n + 16},
		{ID: TableOrder, Name: TableName(TableOrder), ValueSize: orderSize, Capacity: custs + n + 16},
		{ID: TableOrderLine, Name: TableName(TableOrderLine), ValueSize: orderLineSize, Capacity: loadedLines + 10*n + n/20 + 1024},
		{ID: TableItem, Name: TableName(TableItem), ValueSize: itemSize, Capacity: uint64(cfg.ItemCount)},
		{ID: TableStock, Name: TableName(TableStock), ValueSize: stockSize, Capacity: W * uint64(cfg.ItemCount)},
		{ID: TableCustomerName, Name: TableName(TableCustomerName), ValueSize: wl.nameIdxSize, Capacity: uint64(names)},
		{ID: TableCustomerLastOrder, Name: TableName(TableCustomerLastOrder), ValueSize: lastOrderSize, Capacity: custs},
		{ID: TableDeliveryCursor, Name: TableName(TableDeliveryCursor), ValueSize: cursorSize, Capacity: dists},
	}}
	return wl, nil
}

// Name returns "tpcc".
func (wl *Workload) Name() string { return "tpcc" }

// Config returns the workload's configuration.
func (wl *Workload) Config() Config { return wl.cfg }

// Mix returns the configured profile's mix.
func (wl *Workload) Mix() Mix { return wl.mix }

// Schema returns the twelve tables (nine TPC-C tables and three auxiliary
// ones), sized for the loaded population plus ExpectedNewOrders.
func (wl *Workload) Schema() txn.Schema {
	ts := make([]txn.Table, len(wl.schema.Tables))
	copy(ts, wl.schema.Tables)
	if !wl.legacy {
		for i := range ts {
			ts[i].Partitions, ts[i].Partition = wl.tablePartitions(ts[i].ID)
		}
	}
	return txn.Schema{Tables: ts, KeyGroupFences: wl.keyGroupCount()}
}

// Rule returns the rule "tpcc_warehouse": key groups under the configured
// encoding, partition = warehouse.
func (wl *Workload) Rule() workload.Rule { return rule{wl} }

// newOrdersPerDistrict is the number of undelivered orders per district
// after load: 900 of 3000 (the last 30%).
func (wl *Workload) newOrdersPerDistrict() int {
	return wl.cfg.CustomersPerDistrict * 900 / SpecCustomersPerDistrict
}

// firstUndelivered is the smallest O_ID without a carrier after load (2101).
func (wl *Workload) firstUndelivered() uint32 {
	return uint32(wl.cfg.CustomersPerDistrict-wl.newOrdersPerDistrict()) + 1
}

// maxLastName is the largest last-name number the population holds in every
// district: 999, or CustomersPerDistrict-1 when there are fewer than 1000
// customers (the first 1000 customers take names 0..999 in order).
func (wl *Workload) maxLastName() int {
	return min(LastNames, wl.cfg.CustomersPerDistrict) - 1
}

type rule struct{ wl *Workload }

// Name returns "tpcc_warehouse".
func (rule) Name() string { return "tpcc_warehouse" }

// KeyGroup returns the record's key group under the configured encoding.
func (r rule) KeyGroup(ref txn.Ref) uint64 { return r.wl.keyGroup(ref) }

// KeyGroupIndex implements workload.KeyGroupIndexer.
func (r rule) KeyGroupIndex(kg uint64) (uint64, bool) { return r.wl.keyGroupIndex(kg) }

// Partition returns the record's warehouse (0 for ITEM).
func (rule) Partition(ref txn.Ref) uint64 { return partition(ref) }

// Home returns the transaction's home warehouse (0 for a non-TPC-C body).
func (rule) Home(msg *messages.TxnSubmit) uint64 { return uint64(homeWarehouse(msg)) }

func homeWarehouse(msg *messages.TxnSubmit) uint32 {
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		return b.NewOrder.GetWId()
	case *messages.TxnSubmit_Payment:
		return b.Payment.GetWId()
	case *messages.TxnSubmit_OrderStatus:
		return b.OrderStatus.GetWId()
	case *messages.TxnSubmit_Delivery:
		return b.Delivery.GetWId()
	case *messages.TxnSubmit_StockLevel:
		return b.StockLevel.GetWId()
	}
	return 0
}

// Deterministic random streams. Every piece of the population comes from a
// stream named by (kind, a, b), so that New can replay the parts it needs for
// sizing and Load produces the same data in any process.
const (
	streamConstants = iota + 1
	streamItem
	streamWarehouse
	streamStock
	streamDistrict
	streamLastName
	streamOlCnt
	streamCustomer
	streamHistory
	streamOrder
)

func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

func (wl *Workload) stream(kind, a, b uint64) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix(wl.cfg.Seed^splitmix(kind)), splitmix(a<<32^b^kind<<56)))
}

// nurand is NURand(A, x, y) of clause 2.1.6 with run-time constant c.
func nurand(r *rand.Rand, a, x, y, c int) int {
	return ((r.IntN(a+1)|(x+r.IntN(y-x+1)))+c)%(y-x+1) + x
}

// lastNums returns the C_LAST numbers of district (w, d)'s customers, in
// C_ID order (clause 4.3.3.1: 0..999 for the first 1000, NURand(255,0,999)
// with C_LOAD for the rest).
func (wl *Workload) lastNums(w, d uint32) []uint16 {
	r := wl.stream(streamLastName, uint64(w), uint64(d))
	out := make([]uint16, wl.cfg.CustomersPerDistrict)
	for i := range out {
		if i < LastNames {
			out[i] = uint16(i)
		} else {
			out[i] = uint16(nurand(r, 255, 0, LastNames-1, wl.cLastLoad))
		}
	}
	return out
}

// olCnts returns the O_OL_CNT of district (w, d)'s initial orders, in O_ID
// order (uniform 5..15).
func (wl *Workload) olCnts(w, d uint32) []uint8 {
	r := wl.stream(streamOlCnt, uint64(w), uint64(d))
	out := make([]uint8, wl.cfg.CustomersPerDistrict)
	for i := range out {
		out[i] = uint8(MinOrderLines + r.IntN(MaxOrderLines-MinOrderLines+1))
	}
	return out
}
