package tpcc

import (
	"encoding/binary"
	"fmt"
)

// Record layouts. Every value is fixed-size and little-endian; money is int64
// cents, rates (W_TAX, D_TAX, C_DISCOUNT) are int32 ten-thousandths, dates
// are uint64 microseconds since the Unix epoch with 0 meaning null, text
// fields are zero-padded bytes. Offsets are listed on each type's encode.

var le = binary.LittleEndian

// Shortened text fields (doc.go, "Simplifications").
const (
	nameLen     = 10 // W_NAME, D_NAME (spec 6..10)
	firstLen    = 16 // C_FIRST (spec 8..16)
	cDataLen    = 64 // C_DATA (spec 300..500)
	hDataLen    = 24 // H_DATA (spec 12..24)
	distInfoLen = 8  // S_DIST_xx and OL_DIST_INFO (spec 24)
)

// Value sizes.
const (
	warehouseSize = 24
	districtSize  = 40
	customerSize  = 120
	historySize   = 56
	newOrderSize  = 8
	orderSize     = 16
	orderLineSize = 32
	itemSize      = 16
	stockSize     = 104
	lastOrderSize = 8
	cursorSize    = 8
)

func sizeErr(table string, got, want int) error {
	return fmt.Errorf("tpcc: %s value of %d bytes, want %d", table, got, want)
}

type warehouse struct {
	ytd  int64 // W_YTD
	tax  int32 // W_TAX
	name [nameLen]byte
}

// [0:8] W_YTD, [8:12] W_TAX, [12:22] W_NAME.
func (r *warehouse) encode() []byte {
	b := make([]byte, warehouseSize)
	le.PutUint64(b[0:], uint64(r.ytd))
	le.PutUint32(b[8:], uint32(r.tax))
	copy(b[12:22], r.name[:])
	return b
}

func (r *warehouse) decode(b []byte) error {
	if len(b) != warehouseSize {
		return sizeErr("WAREHOUSE", len(b), warehouseSize)
	}
	r.ytd = int64(le.Uint64(b[0:]))
	r.tax = int32(le.Uint32(b[8:]))
	copy(r.name[:], b[12:22])
	return nil
}

type district struct {
	ytd     int64  // D_YTD
	tax     int32  // D_TAX
	nextOID uint32 // D_NEXT_O_ID
	nextHID uint64 // next HISTORY sequence number of this district (ours)
	name    [nameLen]byte
}

// [0:8] D_YTD, [8:12] D_TAX, [12:16] D_NEXT_O_ID, [16:24] next history
// sequence, [24:34] D_NAME.
func (r *district) encode() []byte {
	b := make([]byte, districtSize)
	le.PutUint64(b[0:], uint64(r.ytd))
	le.PutUint32(b[8:], uint32(r.tax))
	le.PutUint32(b[12:], r.nextOID)
	le.PutUint64(b[16:], r.nextHID)
	copy(b[24:34], r.name[:])
	return b
}

func (r *district) decode(b []byte) error {
	if len(b) != districtSize {
		return sizeErr("DISTRICT", len(b), districtSize)
	}
	r.ytd = int64(le.Uint64(b[0:]))
	r.tax = int32(le.Uint32(b[8:]))
	r.nextOID = le.Uint32(b[12:])
	r.nextHID = le.Uint64(b[16:])
	copy(r.name[:], b[24:34])
	return nil
}

const (
	creditGood = 0 // "GC"
	creditBad  = 1 // "BC"
)

type customer struct {
	balance     int64  // C_BALANCE
	ytdPayment  int64  // C_YTD_PAYMENT
	creditLim   int64  // C_CREDIT_LIM
	paymentCnt  uint32 // C_PAYMENT_CNT
	deliveryCnt uint32 // C_DELIVERY_CNT
	discount    int32  // C_DISCOUNT
	lastNum     uint16 // C_LAST as its number 0..999 (LastName renders it)
	credit      uint8  // C_CREDIT: creditGood or creditBad
	first       [firstLen]byte
	data        [cDataLen]byte
}

// [0:8] C_BALANCE, [8:16] C_YTD_PAYMENT, [16:24] C_CREDIT_LIM,
// [24:28] C_PAYMENT_CNT, [28:32] C_DELIVERY_CNT, [32:36] C_DISCOUNT,
// [36:38] C_LAST number, [38] C_CREDIT, [40:56] C_FIRST, [56:120] C_DATA.
func (r *customer) encode() []byte {
	b := make([]byte, customerSize)
	le.PutUint64(b[0:], uint64(r.balance))
	le.PutUint64(b[8:], uint64(r.ytdPayment))
	le.PutUint64(b[16:], uint64(r.creditLim))
	le.PutUint32(b[24:], r.paymentCnt)
	le.PutUint32(b[28:], r.deliveryCnt)
	le.PutUint32(b[32:], uint32(r.discount))
	le.PutUint16(b[36:], r.lastNum)
	b[38] = r.credit
	copy(b[40:56], r.first[:])
	copy(b[56:120], r.data[:])
	return b
}

func (r *customer) decode(b []byte) error {
	if len(b) != customerSize {
		return sizeErr("CUSTOMER", len(b), customerSize)
	}
	r.balance = int64(le.Uint64(b[0:]))
	r.ytdPayment = int64(le.Uint64(b[8:]))
	r.creditLim = int64(le.Uint64(b[16:]))
	r.paymentCnt = le.Uint32(b[24:])
	r.deliveryCnt = le.Uint32(b[28:])
	r.discount = int32(le.Uint32(b[32:]))
	r.lastNum = le.Uint16(b[36:])
	r.credit = b[38]
	copy(r.first[:], b[40:56])
	copy(r.data[:], b[56:120])
	return nil
}

type history struct {
	amount int64  // H_AMOUNT
	date   uint64 // H_DATE
	cID    uint32 // H_C_ID
	cW     uint32 // H_C_W_ID
	w      uint32 // H_W_ID
	cD     uint8  // H_C_D_ID
	d      uint8  // H_D_ID
	data   [hDataLen]byte
}

// [0:8] H_AMOUNT, [8:16] H_DATE, [16:20] H_C_ID, [20:24] H_C_W_ID,
// [24:28] H_W_ID, [28] H_C_D_ID, [29] H_D_ID, [32:56] H_DATA.
func (r *history) encode() []byte {
	b := make([]byte, historySize)
	le.PutUint64(b[0:], uint64(r.amount))
	le.PutUint64(b[8:], r.date)
	le.PutUint32(b[16:], r.cID)
	le.PutUint32(b[20:], r.cW)
	le.PutUint32(b[24:], r.w)
	b[28], b[29] = r.cD, r.d
	copy(b[32:56], r.data[:])
	return b
}

func (r *history) decode(b []byte) error {
	if len(b) != historySize {
		return sizeErr("HISTORY", len(b), historySize)
	}
	r.amount = int64(le.Uint64(b[0:]))
	r.date = le.Uint64(b[8:])
	r.cID = le.Uint32(b[16:])
	r.cW = le.Uint32(b[20:])
	r.w = le.Uint32(b[24:])
	r.cD, r.d = b[28], b[29]
	copy(r.data[:], b[32:56])
	return nil
}

// NEW_ORDER: [0:8] NO_O_ID (redundant with the key; a value must be
// non-empty).
func encodeU64(v uint64) []byte {
	b := make([]byte, 8)
	le.PutUint64(b, v)
	return b
}

func decodeU64(table string, b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, sizeErr(table, len(b), 8)
	}
	return le.Uint64(b), nil
}

type order struct {
	entryD   uint64 // O_ENTRY_D
	cID      uint32 // O_C_ID
	carrier  uint8  // O_CARRIER_ID, 0 = null
	olCnt    uint8  // O_OL_CNT
	allLocal uint8  // O_ALL_LOCAL
}

// [0:8] O_ENTRY_D, [8:12] O_C_ID, [12] O_CARRIER_ID, [13] O_OL_CNT,
// [14] O_ALL_LOCAL.
func (r *order) encode() []byte {
	b := make([]byte, orderSize)
	le.PutUint64(b[0:], r.entryD)
	le.PutUint32(b[8:], r.cID)
	b[12], b[13], b[14] = r.carrier, r.olCnt, r.allLocal
	return b
}

func (r *order) decode(b []byte) error {
	if len(b) != orderSize {
		return sizeErr("ORDER", len(b), orderSize)
	}
	r.entryD = le.Uint64(b[0:])
	r.cID = le.Uint32(b[8:])
	r.carrier, r.olCnt, r.allLocal = b[12], b[13], b[14]
	return nil
}

type orderLine struct {
	amount    int64  // OL_AMOUNT
	deliveryD uint64 // OL_DELIVERY_D, 0 = null
	iID       uint32 // OL_I_ID
	supplyW   uint16 // OL_SUPPLY_W_ID
	quantity  uint8  // OL_QUANTITY
	distInfo  [distInfoLen]byte
}

// [0:8] OL_AMOUNT, [8:16] OL_DELIVERY_D, [16:20] OL_I_ID,
// [20:22] OL_SUPPLY_W_ID, [22] OL_QUANTITY, [24:32] OL_DIST_INFO.
func (r *orderLine) encode() []byte {
	b := make([]byte, orderLineSize)
	le.PutUint64(b[0:], uint64(r.amount))
	le.PutUint64(b[8:], r.deliveryD)
	le.PutUint32(b[16:], r.iID)
	le.PutUint16(b[20:], r.supplyW)
	b[22] = r.quantity
	copy(b[24:32], r.distInfo[:])
	return b
}

func (r *orderLine) decode(b []byte) error {
	if len(b) != orderLineSize {
		return sizeErr("ORDER_LINE", len(b), orderLineSize)
	}
	r.amount = int64(le.Uint64(b[0:]))
	r.deliveryD = le.Uint64(b[8:])
	r.iID = le.Uint32(b[16:])
	r.supplyW = le.Uint16(b[20:])
	r.quantity = b[22]
	copy(r.distInfo[:], b[24:32])
	return nil
}

type item struct {
	price    int64  // I_PRICE
	imID     uint32 // I_IM_ID
	original uint8  // I_DATA contains "ORIGINAL"
}

// [0:8] I_PRICE, [8:12] I_IM_ID, [12] I_DATA has "ORIGINAL".
func (r *item) encode() []byte {
	b := make([]byte, itemSize)
	le.PutUint64(b[0:], uint64(r.price))
	le.PutUint32(b[8:], r.imID)
	b[12] = r.original
	return b
}

func (r *item) decode(b []byte) error {
	if len(b) != itemSize {
		return sizeErr("ITEM", len(b), itemSize)
	}
	r.price = int64(le.Uint64(b[0:]))
	r.imID = le.Uint32(b[8:])
	r.original = b[12]
	return nil
}

type stock struct {
	ytd       int64  // S_YTD
	quantity  int32  // S_QUANTITY
	orderCnt  uint32 // S_ORDER_CNT
	remoteCnt uint32 // S_REMOTE_CNT
	original  uint8  // S_DATA contains "ORIGINAL"
	dist      [DistrictsPerWarehouse][distInfoLen]byte
}

// [0:8] S_YTD, [8:12] S_QUANTITY, [12:16] S_ORDER_CNT, [16:20] S_REMOTE_CNT,
// [20] S_DATA has "ORIGINAL", [24+8(d-1):24+8d] S_DIST_d.
func (r *stock) encode() []byte {
	b := make([]byte, stockSize)
	le.PutUint64(b[0:], uint64(r.ytd))
	le.PutUint32(b[8:], uint32(r.quantity))
	le.PutUint32(b[12:], r.orderCnt)
	le.PutUint32(b[16:], r.remoteCnt)
	b[20] = r.original
	for i := range r.dist {
		copy(b[24+distInfoLen*i:], r.dist[i][:])
	}
	return b
}

func (r *stock) decode(b []byte) error {
	if len(b) != stockSize {
		return sizeErr("STOCK", len(b), stockSize)
	}
	r.ytd = int64(le.Uint64(b[0:]))
	r.quantity = int32(le.Uint32(b[8:]))
	r.orderCnt = le.Uint32(b[12:])
	r.remoteCnt = le.Uint32(b[16:])
	r.original = b[20]
	for i := range r.dist {
		copy(r.dist[i][:], b[24+distInfoLen*i:])
	}
	return nil
}

// CUSTOMER_NAME_IDX: [0:4] count n, then n C_IDs as uint32, sorted by
// (C_FIRST, C_ID); the rest zero. The value size is 4 + 4 × the largest
// number of customers sharing a last name in one district, computed from the
// deterministic population when the workload is constructed.
func encodeNameIndex(size int, ids []uint32) []byte {
	b := make([]byte, size)
	le.PutUint32(b[0:], uint32(len(ids)))
	for i, id := range ids {
		le.PutUint32(b[4+4*i:], id)
	}
	return b
}

func decodeNameIndex(b []byte) ([]uint32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("tpcc: CUSTOMER_NAME_IDX value of %d bytes", len(b))
	}
	n := int(le.Uint32(b[0:]))
	if 4+4*n > len(b) {
		return nil, fmt.Errorf("tpcc: CUSTOMER_NAME_IDX count %d does not fit %d bytes", n, len(b))
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = le.Uint32(b[4+4*i:])
	}
	return ids, nil
}
