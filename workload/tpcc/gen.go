package tpcc

import (
	"math/rand/v2"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/workload"
)

// runDate is the first transaction date generators use: 2024-06-01T00:00:00Z
// in microseconds. Each generator advances its own clock by 1 ms per
// transaction, so generated dates are deterministic and never null.
const runDate uint64 = 1_717_200_000_000_000

// Generator produces one client's (terminal's) transactions: the profile's
// mix by weighted draw, input data per clause 2.4.1, 2.5.1, 2.6.1, 2.7.1 and
// 2.8.1, from a PCG stream seeded by (seed, client).
type Generator struct {
	wl    *Workload
	rng   *rand.Rand
	home  uint32
	clock uint64
}

var _ workload.Generator = (*Generator)(nil)

// NewGenerator returns client's generator. Client i's home warehouse is
// (i mod W) + 1; its district is drawn per transaction.
func (wl *Workload) NewGenerator(seed uint64, client int) workload.Generator {
	return wl.Generator(seed, client)
}

// Generator is NewGenerator with the concrete type.
func (wl *Workload) Generator(seed uint64, client int) *Generator {
	W := wl.cfg.Warehouses
	home := ((client%W)+W)%W + 1
	return &Generator{
		wl:    wl,
		rng:   rand.New(rand.NewPCG(seed, splitmix(uint64(int64(client))))),
		home:  uint32(home),
		clock: runDate,
	}
}

// Home returns the generator's home warehouse.
func (g *Generator) Home() uint32 { return g.home }

// Next returns the next transaction; its TxnID is left 0.
func (g *Generator) Next() *messages.TxnSubmit {
	g.clock += 1000
	m := g.wl.mix
	x := g.rng.IntN(m.NewOrder + m.Payment + m.OrderStatus + m.Delivery + m.StockLevel)
	switch {
	case x < m.NewOrder:
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_NewOrder{NewOrder: g.newOrder()}}
	case x < m.NewOrder+m.Payment:
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_Payment{Payment: g.payment()}}
	case x < m.NewOrder+m.Payment+m.OrderStatus:
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_OrderStatus{OrderStatus: g.orderStatus()}}
	case x < m.NewOrder+m.Payment+m.OrderStatus+m.Delivery:
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_Delivery{Delivery: g.delivery()}}
	default:
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_StockLevel{StockLevel: g.stockLevel()}}
	}
}

func (g *Generator) district() uint32 { return uint32(1 + g.rng.IntN(DistrictsPerWarehouse)) }

func (g *Generator) customerID() uint32 {
	return uint32(nurand(g.rng, 1023, 1, g.wl.cfg.CustomersPerDistrict, g.wl.cCID))
}

func (g *Generator) lastName() string {
	return LastName(nurand(g.rng, 255, 0, g.wl.maxLastName(), g.wl.cLastRun))
}

// remoteWarehouse returns a warehouse other than home, uniformly (home when
// W = 1).
func (g *Generator) remoteWarehouse() uint32 {
	W := g.wl.cfg.Warehouses
	if W == 1 {
		return g.home
	}
	x := uint32(1 + g.rng.IntN(W-1))
	if x >= g.home {
		x++
	}
	return x
}

// newOrder follows clause 2.4.1.
func (g *Generator) newOrder() *messages.TpccNewOrder {
	cfg, m := g.wl.cfg, g.wl.mix
	no := &messages.TpccNewOrder{WId: g.home, DId: g.district(), CId: g.customerID(), EntryUnixMicros: g.clock}
	n := MinOrderLines + g.rng.IntN(MaxOrderLines-MinOrderLines+1)
	no.Rollback = g.rng.IntN(100) < m.RollbackPct
	no.Lines = make([]*messages.TpccOrderLine, n)
	for k := range no.Lines {
		l := &messages.TpccOrderLine{
			IId:       uint32(nurand(g.rng, 8191, 1, cfg.ItemCount, g.wl.cIID)),
			SupplyWId: g.home,
		}
		if no.Rollback && k == n-1 {
			l.IId = uint32(cfg.ItemCount + 1) // an unused item number
		}
		if g.rng.IntN(100) < m.RemoteLinePct && cfg.Warehouses > 1 {
			l.SupplyWId = g.remoteWarehouse()
		}
		l.Quantity = uint32(1 + g.rng.IntN(10))
		no.Lines[k] = l
	}
	return no
}

// payment follows clause 2.5.1.
func (g *Generator) payment() *messages.TpccPayment {
	p := &messages.TpccPayment{WId: g.home, DId: g.district(), DateUnixMicros: g.clock}
	if g.rng.IntN(100) < g.wl.mix.RemotePaymentPct && g.wl.cfg.Warehouses > 1 {
		p.CWId, p.CDId = g.remoteWarehouse(), g.district()
	} else {
		p.CWId, p.CDId = p.WId, p.DId
	}
	if g.rng.IntN(100) < 60 {
		p.ByLastName, p.CLast = true, g.lastName()
	} else {
		p.CId = g.customerID()
	}
	p.HAmountCents = int64(100 + g.rng.IntN(500_000-100+1))
	return p
}

// orderStatus follows clause 2.6.1.
func (g *Generator) orderStatus() *messages.TpccOrderStatus {
	os := &messages.TpccOrderStatus{WId: g.home, DId: g.district()}
	if g.rng.IntN(100) < 60 {
		os.ByLastName, os.CLast = true, g.lastName()
	} else {
		os.CId = g.customerID()
	}
	return os
}

// delivery follows clause 2.7.1.
func (g *Generator) delivery() *messages.TpccDelivery {
	return &messages.TpccDelivery{WId: g.home, OCarrierId: uint32(1 + g.rng.IntN(10)), DeliveryUnixMicros: g.clock}
}

// stockLevel follows clause 2.8.1.
func (g *Generator) stockLevel() *messages.TpccStockLevel {
	return &messages.TpccStockLevel{WId: g.home, DId: g.district(), Threshold: uint32(10 + g.rng.IntN(11))}
}
