package tpcc

import (
	"errors"
	"fmt"
)

// Fixed scale factors of the TPC-C specification (clause 1.2 and 4.3.3.1).
const (
	// DistrictsPerWarehouse is fixed by the specification.
	DistrictsPerWarehouse = 10
	// SpecCustomersPerDistrict is the specification's number of customers
	// (and of initial orders) per district.
	SpecCustomersPerDistrict = 3000
	// SpecItems is the specification's number of items.
	SpecItems = 100000
	// MaxOrderLines is the largest O_OL_CNT (clause 2.4.1.3).
	MaxOrderLines = 15
	// MinOrderLines is the smallest O_OL_CNT.
	MinOrderLines = 5
	// LastNames is the number of distinct C_LAST values (clause 4.3.2.3).
	LastNames = 1000
)

// Profile names.
const (
	// ProfileSpec is the standard mix of clause 5.2.3: NewOrder 45%, Payment
	// 43%, OrderStatus 4%, Delivery 4%, StockLevel 4%; 1% of order lines are
	// supplied by a remote warehouse; 15% of Payments pay for a customer of a
	// remote warehouse.
	ProfileSpec = "spec"
	// ProfileCrest is the mix of the CREST code the tutorial measured:
	// NewOrder 50%, Payment 46%, OrderStatus 0%, Delivery 4%, StockLevel 0%;
	// 15% of order lines remote; 15% of Payments remote.
	ProfileCrest = "crest"
)

// Key encodings (see doc.go, "Key groups").
const (
	// EncodingReshaped: key group = (table, warehouse, bucket); a key group
	// never holds records of two warehouses.
	EncodingReshaped = "reshaped"
	// EncodingLegacy: key group = (table, record_key_legacy % LegacyKeyGroups)
	// with record_key_legacy = w_id × C + id, as in CREST: every key group
	// mixes records of all warehouses (the tutorial's negative result).
	EncodingLegacy = "legacy"
)

// Config configures the TPC-C workload. The zero value is not valid; start
// from DefaultConfig.
type Config struct {
	// Warehouses is the scale factor W, 1..65535. Default 16.
	Warehouses int
	// Profile selects the transaction mix and remote rates: ProfileSpec
	// (default) or ProfileCrest.
	Profile string
	// KeyEncoding selects how records map to key groups: EncodingReshaped
	// (default) or EncodingLegacy.
	KeyEncoding string
	// BucketsPerWarehouse is the number of key groups per (table, warehouse)
	// under the reshaped encoding, 1..2^20. Tables with fewer natural units
	// per warehouse use fewer (WAREHOUSE 1; the district-scoped tables 10).
	// Default 64: at 16 warehouses CUSTOMER and STOCK then have 16 × 64 =
	// 1024 key groups each, as under the legacy encoding.
	BucketsPerWarehouse int
	// LegacyKeyGroups is the number of key groups per table under the legacy
	// encoding (record_key_legacy % LegacyKeyGroups), ≥ 1. Default 1024.
	LegacyKeyGroups int
	// ExpectedNewOrders sizes the growing tables: the number of NewOrders the
	// run may commit. ORDER and NEW_ORDER get that many rows beyond the loaded
	// ones, ORDER_LINE ten per order (plus slack) and HISTORY the Payments the
	// profile issues alongside (plus slack). ≥ 0. Default 2,000,000.
	ExpectedNewOrders int
	// ItemCount is the number of items (and of stock rows per warehouse),
	// 10..2^24. Default 100,000 (the specification); smaller for fast tests.
	ItemCount int
	// CustomersPerDistrict is the number of customers and of initial orders
	// per district, 10..3000. Default 3000 (the specification); smaller for
	// fast tests. The initial undelivered orders are the last 30% of them
	// (900 of 3000).
	CustomersPerDistrict int
	// Seed drives the initial population and the NURand C constants shared by
	// every generator of the run (clause 2.1.6). Default 1.
	Seed uint64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Warehouses:           16,
		Profile:              ProfileSpec,
		KeyEncoding:          EncodingReshaped,
		BucketsPerWarehouse:  64,
		LegacyKeyGroups:      1024,
		ExpectedNewOrders:    2_000_000,
		ItemCount:            SpecItems,
		CustomersPerDistrict: SpecCustomersPerDistrict,
		Seed:                 1,
	}
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Warehouses < 1 || c.Warehouses > maxWarehouses {
		errs = append(errs, fmt.Errorf("tpcc: Warehouses %d, want 1..%d", c.Warehouses, maxWarehouses))
	}
	if _, ok := profiles[c.Profile]; !ok {
		errs = append(errs, fmt.Errorf("tpcc: Profile %q, want %q or %q", c.Profile, ProfileSpec, ProfileCrest))
	}
	if c.KeyEncoding != EncodingReshaped && c.KeyEncoding != EncodingLegacy {
		errs = append(errs, fmt.Errorf("tpcc: KeyEncoding %q, want %q or %q", c.KeyEncoding, EncodingReshaped, EncodingLegacy))
	}
	if c.BucketsPerWarehouse < 1 || c.BucketsPerWarehouse > maxBuckets {
		errs = append(errs, fmt.Errorf("tpcc: BucketsPerWarehouse %d, want 1..%d", c.BucketsPerWarehouse, maxBuckets))
	}
	if c.LegacyKeyGroups < 1 || c.LegacyKeyGroups > maxBuckets {
		errs = append(errs, fmt.Errorf("tpcc: LegacyKeyGroups %d, want 1..%d", c.LegacyKeyGroups, maxBuckets))
	}
	if c.ExpectedNewOrders < 0 || c.ExpectedNewOrders > maxExpectedNewOrders {
		errs = append(errs, fmt.Errorf("tpcc: ExpectedNewOrders %d, want 0..%d", c.ExpectedNewOrders, maxExpectedNewOrders))
	}
	if c.ItemCount < 10 || c.ItemCount > maxItems {
		errs = append(errs, fmt.Errorf("tpcc: ItemCount %d, want 10..%d", c.ItemCount, maxItems))
	}
	if c.CustomersPerDistrict < 10 || c.CustomersPerDistrict > SpecCustomersPerDistrict {
		errs = append(errs, fmt.Errorf("tpcc: CustomersPerDistrict %d, want 10..%d", c.CustomersPerDistrict, SpecCustomersPerDistrict))
	}
	return errors.Join(errs...)
}

// Limits of the key packing (see keys.go).
const (
	maxWarehouses        = 1<<16 - 1
	maxBuckets           = 1 << 20
	maxItems             = 1 << 24
	maxExpectedNewOrders = 1 << 34
)

// Mix is a profile's transaction mix, in percent (the weights sum to 100),
// and its remote rates.
type Mix struct {
	NewOrder, Payment, OrderStatus, Delivery, StockLevel int
	// RemoteLinePct is the percentage of order lines supplied by a warehouse
	// other than the home one (when W > 1).
	RemoteLinePct int
	// RemotePaymentPct is the percentage of Payments for a customer of
	// another warehouse (when W > 1).
	RemotePaymentPct int
	// RollbackPct is the percentage of NewOrders with an unused item, which
	// roll back (clause 2.4.1.4).
	RollbackPct int
}

var profiles = map[string]Mix{
	ProfileSpec:  {NewOrder: 45, Payment: 43, OrderStatus: 4, Delivery: 4, StockLevel: 4, RemoteLinePct: 1, RemotePaymentPct: 15, RollbackPct: 1},
	ProfileCrest: {NewOrder: 50, Payment: 46, OrderStatus: 0, Delivery: 4, StockLevel: 0, RemoteLinePct: 15, RemotePaymentPct: 15, RollbackPct: 1},
}

// ProfileMix returns the mix of a named profile.
func ProfileMix(profile string) (Mix, bool) {
	m, ok := profiles[profile]
	return m, ok
}
