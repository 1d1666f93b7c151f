package tpcc

import (
	"context"
	"fmt"
	"strings"

	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
)

// Check names. c1..c12 are the consistency conditions of clause 3.3.2;
// CheckAux verifies the auxiliary tables against the base tables.
const (
	CheckC1  = "tpcc.c1"  // W_YTD = Σ D_YTD
	CheckC2  = "tpcc.c2"  // D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID)
	CheckC3  = "tpcc.c3"  // max(NO_O_ID) − min(NO_O_ID) + 1 = #NEW_ORDER
	CheckC4  = "tpcc.c4"  // Σ O_OL_CNT = #ORDER_LINE per district
	CheckC5  = "tpcc.c5"  // O_CARRIER_ID null ⇔ NEW_ORDER row exists
	CheckC6  = "tpcc.c6"  // O_OL_CNT = #ORDER_LINE per order
	CheckC7  = "tpcc.c7"  // OL_DELIVERY_D null ⇔ O_CARRIER_ID null
	CheckC8  = "tpcc.c8"  // W_YTD = Σ H_AMOUNT per warehouse
	CheckC9  = "tpcc.c9"  // D_YTD = Σ H_AMOUNT per district
	CheckC10 = "tpcc.c10" // C_BALANCE = Σ delivered OL_AMOUNT − Σ H_AMOUNT
	CheckC11 = "tpcc.c11" // #ORDER − #NEW_ORDER = 2100 per district (after load)
	CheckC12 = "tpcc.c12" // C_BALANCE + C_YTD_PAYMENT = Σ delivered OL_AMOUNT
	CheckAux = "tpcc.aux" // cursors, last orders and the name index agree with the base tables
)

// probeMargin is how far past a district's D_NEXT_O_ID (and history
// counter) the checks probe for rows that should not exist: a hash index has
// no range scan, so rows are found only under keys the checks try.
const probeMargin = 16

// Check runs consistency conditions 1–10 and 12 of clause 3.3.2 (and the
// auxiliary-table check) on a quiesced store. Condition 11 holds only right
// after load; CheckAfterLoad includes it.
//
// Rows are found by probing every key they can have: for each district,
// O_ID 1 .. D_NEXT_O_ID−1+16 in ORDER and NEW_ORDER, OL_NUMBER 1..15 of each
// of those in ORDER_LINE, history sequence numbers 1 .. counter−1+16, and
// every customer. The work is linear in the number of orders, history rows
// and customers (about 17 reads per order).
func (wl *Workload) Check(ctx context.Context, r workload.Reader) []workload.CheckResult {
	return wl.check(ctx, r, false)
}

// CheckAfterLoad is Check plus condition 11, for a freshly loaded store.
func (wl *Workload) CheckAfterLoad(ctx context.Context, r workload.Reader) []workload.CheckResult {
	return wl.check(ctx, r, true)
}

type violations struct {
	names  []string
	count  map[string]int
	sample map[string][]string
}

const maxSamples = 5

func (v *violations) add(name, format string, args ...any) {
	v.count[name]++
	if len(v.sample[name]) < maxSamples {
		v.sample[name] = append(v.sample[name], fmt.Sprintf(format, args...))
	}
}

func (v *violations) results(err error) []workload.CheckResult {
	out := make([]workload.CheckResult, 0, len(v.names))
	for _, n := range v.names {
		res := workload.CheckResult{Name: n}
		switch {
		case err != nil:
			res.Err = fmt.Errorf("%s not evaluated: %w", n, err)
		case v.count[n] > 0:
			res.Err = fmt.Errorf("%s: %d violation(s): %s", n, v.count[n], strings.Join(v.sample[n], "; "))
		}
		out = append(out, res)
	}
	return out
}

type checker struct {
	wl  *Workload
	ctx context.Context
	r   workload.Reader
	err error
}

// get reads one record; a read error is kept and ends the check.
func (c *checker) get(t txn.TableID, key uint64) ([]byte, bool) {
	if c.err != nil {
		return nil, false
	}
	v, ok, err := c.r.Get(c.ctx, ref(t, key))
	if err != nil {
		c.err = fmt.Errorf("read %s key %#x: %w", TableName(t), key, err)
		return nil, false
	}
	return v, ok
}

func (wl *Workload) check(ctx context.Context, r workload.Reader, afterLoad bool) []workload.CheckResult {
	v := &violations{count: map[string]int{}, sample: map[string][]string{}}
	v.names = []string{CheckC1, CheckC2, CheckC3, CheckC4, CheckC5, CheckC6, CheckC7, CheckC8, CheckC9, CheckC10}
	if afterLoad {
		v.names = append(v.names, CheckC11)
	}
	v.names = append(v.names, CheckC12, CheckAux)
	c := &checker{wl: wl, ctx: ctx, r: r}
	c.run(v, afterLoad)
	if c.err == nil {
		c.err = ctx.Err()
	}
	return v.results(c.err)
}

func (c *checker) run(v *violations, afterLoad bool) {
	cfg := c.wl.cfg
	W, D, CPD := cfg.Warehouses, DistrictsPerWarehouse, cfg.CustomersPerDistrict
	custIdx := func(w, d, cid uint32) (int, bool) {
		if w < 1 || int(w) > W || d < 1 || int(d) > D || cid < 1 || int(cid) > CPD {
			return 0, false
		}
		return ((int(w)-1)*D+int(d)-1)*CPD + int(cid) - 1, true
	}
	distIdx := func(w, d uint32) int { return (int(w)-1)*D + int(d) - 1 }

	// WAREHOUSE and DISTRICT rows.
	whs := make([]warehouse, W+1)
	whOK := make([]bool, W+1)
	dists := make([]district, W*D)
	distOK := make([]bool, W*D)
	for w := uint32(1); int(w) <= W; w++ {
		if b, ok := c.get(TableWarehouse, WarehouseKey(w)); ok {
			whOK[w] = true
			if err := whs[w].decode(b); err != nil {
				v.add(CheckC1, "warehouse %d: %v", w, err)
				whOK[w] = false
			}
		} else {
			v.add(CheckC1, "warehouse %d missing", w)
		}
		for d := uint32(1); int(d) <= D; d++ {
			i := distIdx(w, d)
			if b, ok := c.get(TableDistrict, DistrictKey(w, d)); ok {
				distOK[i] = true
				if err := dists[i].decode(b); err != nil {
					v.add(CheckC1, "district %d/%d: %v", w, d, err)
					distOK[i] = false
				}
			} else {
				v.add(CheckC1, "district %d/%d missing", w, d)
			}
		}
	}
	if c.err != nil {
		return
	}

	// HISTORY: sums per warehouse, district and customer (by the row's
	// H_W_ID, H_D_ID and H_C_* fields).
	histW := make([]int64, W+1)
	histD := make([]int64, W*D)
	histC := make([]int64, W*D*CPD)
	for w := uint32(1); int(w) <= W; w++ {
		for d := uint32(1); int(d) <= D; d++ {
			if err := c.ctx.Err(); err != nil {
				c.err = err
				return
			}
			i := distIdx(w, d)
			if !distOK[i] {
				continue
			}
			for seq := uint64(1); seq < dists[i].nextHID+probeMargin; seq++ {
				b, ok := c.get(TableHistory, HistoryKey(w, d, seq))
				if !ok {
					continue
				}
				var h history
				if err := h.decode(b); err != nil {
					v.add(CheckC8, "history %d/%d/%d: %v", w, d, seq, err)
					continue
				}
				if h.w >= 1 && int(h.w) <= W {
					histW[h.w] += h.amount
					if h.d >= 1 && int(h.d) <= D {
						histD[distIdx(h.w, uint32(h.d))] += h.amount
					}
				}
				if ci, ok := custIdx(h.cW, uint32(h.cD), h.cID); ok {
					histC[ci] += h.amount
				} else {
					v.add(CheckC10, "history %d/%d/%d names no customer (%d/%d/%d)", w, d, seq, h.cW, h.cD, h.cID)
				}
			}
		}
	}
	if c.err != nil {
		return
	}
	for w := uint32(1); int(w) <= W; w++ {
		if !whOK[w] {
			continue
		}
		var sum int64
		for d := uint32(1); int(d) <= D; d++ {
			i := distIdx(w, d)
			sum += dists[i].ytd
			if distOK[i] && dists[i].ytd != histD[i] {
				v.add(CheckC9, "district %d/%d: D_YTD %d ≠ Σ H_AMOUNT %d", w, d, dists[i].ytd, histD[i])
			}
		}
		if whs[w].ytd != sum {
			v.add(CheckC1, "warehouse %d: W_YTD %d ≠ Σ D_YTD %d", w, whs[w].ytd, sum)
		}
		if whs[w].ytd != histW[w] {
			v.add(CheckC8, "warehouse %d: W_YTD %d ≠ Σ H_AMOUNT %d", w, whs[w].ytd, histW[w])
		}
	}

	// ORDER, NEW_ORDER, ORDER_LINE per district.
	delivered := make([]int64, W*D*CPD)
	lastOrder := make([]uint64, W*D*CPD)
	wantAfterLoad := CPD - c.wl.newOrdersPerDistrict()
	var lines [MaxOrderLines + 1]orderLine
	var present [MaxOrderLines + 1]bool
	for w := uint32(1); int(w) <= W; w++ {
		for d := uint32(1); int(d) <= D; d++ {
			if err := c.ctx.Err(); err != nil {
				c.err = err
				return
			}
			i := distIdx(w, d)
			if !distOK[i] {
				continue
			}
			next := uint64(dists[i].nextOID)
			var maxO, cntO, minNO, maxNO, cntNO, sumOlCnt, cntOL uint64
			for o := uint64(1); o < next+probeMargin; o++ {
				ob, hasO := c.get(TableOrder, OrderKey(w, d, o))
				_, hasNO := c.get(TableNewOrder, OrderKey(w, d, o))
				nl := uint64(0)
				for ol := 1; ol <= MaxOrderLines; ol++ {
					b, ok := c.get(TableOrderLine, OrderLineKey(w, d, o, uint32(ol)))
					present[ol] = ok
					if ok {
						nl++
						if err := lines[ol].decode(b); err != nil {
							v.add(CheckC7, "order line %d/%d/%d/%d: %v", w, d, o, ol, err)
							present[ol] = false
						}
					}
				}
				if c.err != nil {
					return
				}
				cntOL += nl
				if hasNO {
					if cntNO == 0 || o < minNO {
						minNO = o
					}
					maxNO = max(maxNO, o)
					cntNO++
				}
				if !hasO {
					if hasNO {
						v.add(CheckC5, "new-order %d/%d/%d has no order", w, d, o)
					}
					if nl > 0 {
						v.add(CheckC7, "order %d/%d/%d has %d lines but no order row", w, d, o, nl)
					}
					continue
				}
				var od order
				if err := od.decode(ob); err != nil {
					v.add(CheckC6, "order %d/%d/%d: %v", w, d, o, err)
					continue
				}
				cntO++
				maxO = max(maxO, o)
				sumOlCnt += uint64(od.olCnt)
				if (od.carrier == 0) != hasNO {
					v.add(CheckC5, "order %d/%d/%d: O_CARRIER_ID %d but new-order row present=%v", w, d, o, od.carrier, hasNO)
				}
				if uint64(od.olCnt) != nl {
					v.add(CheckC6, "order %d/%d/%d: O_OL_CNT %d ≠ %d lines", w, d, o, od.olCnt, nl)
				}
				ci, custOK := custIdx(w, d, od.cID)
				if !custOK {
					v.add(CheckC12, "order %d/%d/%d: O_C_ID %d names no customer", w, d, o, od.cID)
				} else {
					lastOrder[ci] = max(lastOrder[ci], o)
				}
				for ol := 1; ol <= MaxOrderLines; ol++ {
					if !present[ol] {
						continue
					}
					if (lines[ol].deliveryD == 0) != (od.carrier == 0) {
						v.add(CheckC7, "order line %d/%d/%d/%d: OL_DELIVERY_D %d but O_CARRIER_ID %d", w, d, o, ol, lines[ol].deliveryD, od.carrier)
					}
					if lines[ol].deliveryD != 0 && custOK {
						delivered[ci] += lines[ol].amount
					}
				}
			}
			if maxO != next-1 {
				v.add(CheckC2, "district %d/%d: D_NEXT_O_ID−1 = %d ≠ max(O_ID) %d", w, d, next-1, maxO)
			}
			if cntNO > 0 && maxNO != next-1 {
				v.add(CheckC2, "district %d/%d: D_NEXT_O_ID−1 = %d ≠ max(NO_O_ID) %d", w, d, next-1, maxNO)
			}
			if cntNO > 0 && maxNO-minNO+1 != cntNO {
				v.add(CheckC3, "district %d/%d: max(NO_O_ID) %d − min(NO_O_ID) %d + 1 ≠ %d new-order rows", w, d, maxNO, minNO, cntNO)
			}
			if sumOlCnt != cntOL {
				v.add(CheckC4, "district %d/%d: Σ O_OL_CNT %d ≠ %d order lines", w, d, sumOlCnt, cntOL)
			}
			if afterLoad && cntO-cntNO != uint64(wantAfterLoad) {
				v.add(CheckC11, "district %d/%d: %d orders − %d new-orders ≠ %d", w, d, cntO, cntNO, wantAfterLoad)
			}
			// DELIVERY_CURSOR: the oldest undelivered order, or D_NEXT_O_ID.
			want := next
			if cntNO > 0 {
				want = minNO
			}
			if b, ok := c.get(TableDeliveryCursor, DistrictKey(w, d)); !ok {
				v.add(CheckAux, "delivery cursor %d/%d missing", w, d)
			} else if cur, err := decodeU64("DELIVERY_CURSOR", b); err != nil || cur != want {
				v.add(CheckAux, "delivery cursor %d/%d = %d, want %d (%v)", w, d, cur, want, err)
			}
		}
	}
	if c.err != nil {
		return
	}

	// CUSTOMER rows, their last orders, and the name index.
	for w := uint32(1); int(w) <= W; w++ {
		for d := uint32(1); int(d) <= D; d++ {
			if err := c.ctx.Err(); err != nil {
				c.err = err
				return
			}
			byName := make(map[uint16][]uint32)
			for cid := uint32(1); int(cid) <= CPD; cid++ {
				ci, _ := custIdx(w, d, cid)
				b, ok := c.get(TableCustomer, CustomerKey(w, d, cid))
				if !ok {
					v.add(CheckC10, "customer %d/%d/%d missing", w, d, cid)
					continue
				}
				var cu customer
				if err := cu.decode(b); err != nil {
					v.add(CheckC10, "customer %d/%d/%d: %v", w, d, cid, err)
					continue
				}
				byName[cu.lastNum] = append(byName[cu.lastNum], cid)
				if cu.balance != delivered[ci]-histC[ci] {
					v.add(CheckC10, "customer %d/%d/%d: C_BALANCE %d ≠ Σ delivered OL_AMOUNT %d − Σ H_AMOUNT %d", w, d, cid, cu.balance, delivered[ci], histC[ci])
				}
				if cu.balance+cu.ytdPayment != delivered[ci] {
					v.add(CheckC12, "customer %d/%d/%d: C_BALANCE %d + C_YTD_PAYMENT %d ≠ Σ delivered OL_AMOUNT %d", w, d, cid, cu.balance, cu.ytdPayment, delivered[ci])
				}
				if lb, ok := c.get(TableCustomerLastOrder, CustomerKey(w, d, cid)); !ok {
					v.add(CheckAux, "last order of customer %d/%d/%d missing", w, d, cid)
				} else if lo, err := decodeU64("CUSTOMER_LAST_ORDER", lb); err != nil || lo != lastOrder[ci] {
					v.add(CheckAux, "last order of customer %d/%d/%d = %d, want %d (%v)", w, d, cid, lo, lastOrder[ci], err)
				}
			}
			// The name index holds exactly the customers of each last name
			// (its order by C_FIRST is fixed at load and not re-checked).
			for n := uint32(0); n < LastNames; n++ {
				b, ok := c.get(TableCustomerName, CustomerNameKey(w, d, n))
				want := byName[uint16(n)]
				if !ok {
					if len(want) > 0 {
						v.add(CheckAux, "name index %d/%d/%s missing", w, d, LastName(int(n)))
					}
					continue
				}
				ids, err := decodeNameIndex(b)
				if err != nil || !sameSet(ids, want) {
					v.add(CheckAux, "name index %d/%d/%s = %v, want %v (%v)", w, d, LastName(int(n)), ids, want, err)
				}
			}
		}
	}
}

func sameSet(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[uint32]int, len(a))
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] == 0 {
			return false
		}
		m[x]--
	}
	return true
}
