package tpcc

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
)

// loadDate is O_ENTRY_D, H_DATE and the delivered OL_DELIVERY_D of the
// initial population: 2024-01-01T00:00:00Z in microseconds.
const loadDate uint64 = 1_704_067_200_000_000

// Initial balances (clause 4.3.3.1), in cents. D_YTD starts at
// CustomersPerDistrict × H_AMOUNT (30,000.00 at 3000 customers) and W_YTD at
// ten times that (300,000.00), so that conditions 8 and 9 hold at any scale.
const (
	initBalance    = -1_000    // C_BALANCE -10.00
	initYTDPayment = 1_000     // C_YTD_PAYMENT 10.00
	initHistory    = 1_000     // H_AMOUNT 10.00
	initCreditLim  = 5_000_000 // C_CREDIT_LIM 50,000.00
)

// Load populates empty tables as clause 4.3.3.1 describes (with the scale
// overrides and shortened fields of doc.go), deterministically from
// Config.Seed, plus the auxiliary tables. It inserts items first, then one
// warehouse at a time.
func (wl *Workload) Load(ctx context.Context, ins workload.Inserter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	put := func(t txn.TableID, key uint64, v []byte) error {
		if err := ins.Insert(ctx, ref(t, key), v); err != nil {
			return fmt.Errorf("tpcc: load %s key %#x: %w", TableName(t), key, err)
		}
		return nil
	}
	r := wl.stream(streamItem, 0, 0)
	for i := 1; i <= wl.cfg.ItemCount; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		it := item{price: int64(100 + r.IntN(10_000-100+1)), imID: uint32(1 + r.IntN(10_000))}
		if r.IntN(10) == 0 {
			it.original = 1
		}
		if err := put(TableItem, ItemKey(uint32(i)), it.encode()); err != nil {
			return err
		}
	}
	for w := uint32(1); w <= uint32(wl.cfg.Warehouses); w++ {
		if err := wl.loadWarehouse(ctx, w, put); err != nil {
			return err
		}
	}
	return nil
}

func (wl *Workload) loadWarehouse(ctx context.Context, w uint32, put func(txn.TableID, uint64, []byte) error) error {
	r := wl.stream(streamWarehouse, uint64(w), 0)
	wh := warehouse{ytd: DistrictsPerWarehouse * initHistory * int64(wl.cfg.CustomersPerDistrict), tax: int32(r.IntN(2001))}
	randText(r, wh.name[:], 6)
	if err := put(TableWarehouse, WarehouseKey(w), wh.encode()); err != nil {
		return err
	}
	r = wl.stream(streamStock, uint64(w), 0)
	for i := 1; i <= wl.cfg.ItemCount; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := stock{quantity: int32(10 + r.IntN(91))}
		for d := range s.dist {
			randText(r, s.dist[d][:], distInfoLen)
		}
		if r.IntN(10) == 0 {
			s.original = 1
		}
		if err := put(TableStock, StockKey(w, uint32(i)), s.encode()); err != nil {
			return err
		}
	}
	for d := uint32(1); d <= DistrictsPerWarehouse; d++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := wl.loadDistrict(w, d, put); err != nil {
			return err
		}
	}
	return nil
}

func (wl *Workload) loadDistrict(w, d uint32, put func(txn.TableID, uint64, []byte) error) error {
	cpd := wl.cfg.CustomersPerDistrict
	r := wl.stream(streamDistrict, uint64(w), uint64(d))
	ds := district{ytd: initHistory * int64(cpd), tax: int32(r.IntN(2001)), nextOID: uint32(cpd) + 1, nextHID: uint64(cpd) + 1}
	randText(r, ds.name[:], 6)
	if err := put(TableDistrict, DistrictKey(w, d), ds.encode()); err != nil {
		return err
	}
	firstNew := wl.firstUndelivered()
	if err := put(TableDeliveryCursor, DistrictKey(w, d), encodeU64(uint64(firstNew))); err != nil {
		return err
	}

	// CUSTOMER, and the last-name index sorted by (C_FIRST, C_ID).
	lasts := wl.lastNums(w, d)
	firsts := make([][firstLen]byte, cpd+1)
	r = wl.stream(streamCustomer, uint64(w), uint64(d))
	for c := 1; c <= cpd; c++ {
		cu := customer{
			balance: initBalance, ytdPayment: initYTDPayment, creditLim: initCreditLim,
			paymentCnt: 1, discount: int32(r.IntN(5001)), lastNum: lasts[c-1],
		}
		randText(r, cu.first[:], 8)
		firsts[c] = cu.first
		if r.IntN(10) == 0 {
			cu.credit = creditBad
		}
		randText(r, cu.data[:], cDataLen/2)
		if err := put(TableCustomer, CustomerKey(w, d, uint32(c)), cu.encode()); err != nil {
			return err
		}
	}
	byName := make(map[uint16][]uint32)
	for c := 1; c <= cpd; c++ {
		byName[lasts[c-1]] = append(byName[lasts[c-1]], uint32(c))
	}
	nums := make([]uint16, 0, len(byName))
	for n := range byName {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	for _, n := range nums {
		ids := byName[n]
		slices.SortFunc(ids, func(a, b uint32) int {
			if c := bytes.Compare(firsts[a][:], firsts[b][:]); c != 0 {
				return c
			}
			return int(a) - int(b)
		})
		if err := put(TableCustomerName, CustomerNameKey(w, d, uint32(n)), encodeNameIndex(wl.nameIdxSize, ids)); err != nil {
			return err
		}
	}

	// HISTORY: one row per customer, sequence number = C_ID.
	r = wl.stream(streamHistory, uint64(w), uint64(d))
	for c := 1; c <= cpd; c++ {
		h := history{amount: initHistory, date: loadDate, cID: uint32(c), cW: w, w: w, cD: uint8(d), d: uint8(d)}
		randText(r, h.data[:], 12)
		if err := put(TableHistory, HistoryKey(w, d, uint64(c)), h.encode()); err != nil {
			return err
		}
	}

	// ORDER (O_C_ID a random permutation), ORDER_LINE, NEW_ORDER for the
	// last 30%, and each customer's last order.
	cnts := wl.olCnts(w, d)
	r = wl.stream(streamOrder, uint64(w), uint64(d))
	perm := r.Perm(cpd)
	lastOrder := make([]uint64, cpd+1)
	for o := 1; o <= cpd; o++ {
		delivered := uint32(o) < firstNew
		or := order{entryD: loadDate, cID: uint32(perm[o-1] + 1), olCnt: cnts[o-1], allLocal: 1}
		if delivered {
			or.carrier = uint8(1 + r.IntN(10))
		}
		lastOrder[or.cID] = uint64(o)
		if err := put(TableOrder, OrderKey(w, d, uint64(o)), or.encode()); err != nil {
			return err
		}
		for ol := 1; ol <= int(or.olCnt); ol++ {
			line := orderLine{iID: uint32(1 + r.IntN(wl.cfg.ItemCount)), supplyW: uint16(w), quantity: 5}
			if delivered {
				line.deliveryD = loadDate
			} else {
				line.amount = int64(1 + r.IntN(999_999))
			}
			randText(r, line.distInfo[:], distInfoLen)
			if err := put(TableOrderLine, OrderLineKey(w, d, uint64(o), uint32(ol)), line.encode()); err != nil {
				return err
			}
		}
		if !delivered {
			if err := put(TableNewOrder, OrderKey(w, d, uint64(o)), encodeU64(uint64(o))); err != nil {
				return err
			}
		}
	}
	for c := 1; c <= cpd; c++ {
		if err := put(TableCustomerLastOrder, CustomerKey(w, d, uint32(c)), encodeU64(lastOrder[c])); err != nil {
			return err
		}
	}
	return nil
}
