// Package tpcc is the TPC-C workload (TPC-C standard specification rev 5.11,
// clauses 1–2 and the consistency conditions of clause 3.3.2) over the
// fixed-size-record, hash-indexed transactional interface of package txn:
// the nine tables and their initial population, the five transactions as
// txn.Programs, a deterministic terminal generator for two profiles, the rule
// "tpcc_warehouse" that maps records to key groups under the legacy or the
// reshaped key encoding (SPEC §5, "Lever B and collapse"), footprint
// prediction for routers, and the consistency checks.
//
// # Profiles
//
//	profile  NewOrder Payment OrderStatus Delivery StockLevel  remote line  remote Payment
//	spec        45      43        4          4         4           1%           15%
//	crest       50      46        0          4         0          15%           15%
//
// 1% of NewOrders carry an unused item and roll back (clause 2.4.1.4);
// Payment and OrderStatus select the customer by last name 60% of the time.
// Client i's home warehouse is (i mod W) + 1; the district is drawn per
// transaction. Customer ids, item ids and last names use NURand (clause
// 2.1.6) with C constants drawn from Config.Seed (the run C_LAST differs from
// the load one by 65..119, not 96 or 112); the mix is a weighted draw.
//
// # Tables and records
//
// Twelve tables: the nine of TPC-C and three auxiliary ones. Values are
// fixed-size little-endian records (layouts in records.go): money is int64
// cents, rates are int32 ten-thousandths, dates are µs since the Unix epoch
// with 0 for null.
//
//	id table               value  key tuple
//	 1 WAREHOUSE              24  (w)
//	 2 DISTRICT               40  (w, d)          + D_NEXT_H_ID (ours, see HISTORY)
//	 3 CUSTOMER              120  (w, d, c)
//	 4 HISTORY                56  (w, d, seq)     H_W_ID, H_D_ID, per-district sequence
//	 5 NEW_ORDER               8  (w, d, o)
//	 6 ORDER                  16  (w, d, o)
//	 7 ORDER_LINE             32  (w, d, o, ol)
//	 8 ITEM                   16  (i)
//	 9 STOCK                 104  (w, i)
//	10 CUSTOMER_NAME_IDX  4+4·m   (w, d, last)    auxiliary
//	11 CUSTOMER_LAST_ORDER     8  (w, d, c)       auxiliary
//	12 DELIVERY_CURSOR         8  (w, d)          auxiliary
//
// Record keys pack the tuple into 64 bits as w<<44 | d<<40 | id (w < 2^16,
// d < 16, id < 2^40), with d = 0 for STOCK and WAREHOUSE, w = 0 for ITEM,
// id = O_ID<<4 | OL_NUMBER for ORDER_LINE, and id = the last-name number
// 0..999 for the name index (WarehouseKey, DistrictKey, … in keys.go). Keys
// are unique per table and every record's warehouse and district can be read
// off its key.
//
// HISTORY has no primary key in TPC-C; ours is (H_W_ID, H_D_ID, seq) with seq
// taken from a counter in the DISTRICT row, which Payment locks and writes
// anyway, so the unique key costs no extra lock.
//
// # Auxiliary tables
//
// The store has hash indexes only (no range scans, no secondary indexes), so
// three small tables stand in for the scans TPC-C's transactions do:
//
//   - CUSTOMER_NAME_IDX (w, d, C_LAST) → the C_IDs with that last name sorted
//     by (C_FIRST, C_ID). Built at load and read-only afterwards (C_LAST and
//     C_FIRST never change). Payment and OrderStatus by last name read it and
//     take the customer at position ceil(n/2) (clause 2.5.2.2): one extra
//     READ round trip, no lock. Its value size is 4 + 4·m, m the largest
//     number of customers sharing a last name in a district of the
//     deterministic population (New computes it: 84 at the defaults, since
//     NURand(255,0,999) piles customers onto the few names whose low eight
//     bits of the OR are all ones).
//   - CUSTOMER_LAST_ORDER (w, d, c) → the customer's most recent O_ID, which
//     OrderStatus needs. NewOrder locks and writes it: one more lock (one more
//     MN CAS on the fallback path) per NewOrder. Kept out of the CUSTOMER row
//     so that NewOrder does not lock CUSTOMER and conflict with Payment.
//   - DELIVERY_CURSOR (w, d) → the oldest undelivered O_ID (D_NEXT_O_ID when
//     none). NEW_ORDER rows of a district always form the contiguous range
//     [cursor, D_NEXT_O_ID−1], so Delivery finds "the lowest NO_O_ID" by one
//     probe and skips the district when the probe finds no row. Delivery locks
//     and advances it: one more lock per delivered district (10 per Delivery,
//     about 7% of its locks). NewOrder does not touch it.
//
// # Key groups (Rule "tpcc_warehouse")
//
// Partition(ref) is the record's warehouse (ITEM: 0); Home(msg) is the
// transaction's home W_ID. KeyGroup depends on Config.KeyEncoding:
//
// Reshaped (default): kg = table<<40 | w<<20 | bucket, so a key group never
// holds two warehouses' records. B = Config.BucketsPerWarehouse (default 64):
//
//	WAREHOUSE                                      bucket 0
//	DISTRICT, DELIVERY_CURSOR                      d−1
//	ORDER, NEW_ORDER, ORDER_LINE, HISTORY          d−1   (one key group per district)
//	CUSTOMER, CUSTOMER_LAST_ORDER                  ((d−1)·CPD + c−1) mod B
//	CUSTOMER_NAME_IDX                              ((d−1)·1000 + last) mod B
//	STOCK                                          (i−1) mod B
//	ITEM (w = 0, read-only)                        (i−1) mod B
//
// The order-family and HISTORY tables are bucketed by district so that the
// key group of a row a transaction inserts (whose O_ID or sequence number is
// decided during execution) is known from the parameters: Footprint names it
// by a placeholder key with id 0 in the same district. At the defaults (16
// warehouses, B = 64, 3000 customers) CUSTOMER and STOCK have 16·64 = 1024 key
// groups each, as under the legacy encoding; the nine TPC-C tables have 2,928
// key groups in all (179 per warehouse + 64 for ITEM), the auxiliary tables
// 2,208 more.
//
// Legacy (--key-encoding legacy): kg = table<<40 | record_key_legacy mod
// Config.LegacyKeyGroups (default 1024), with CREST's record_key_legacy =
// w × C + id:
//
//	WAREHOUSE                        w
//	DISTRICT, DELIVERY_CURSOR        w × 10 + d
//	CUSTOMER, CUSTOMER_LAST_ORDER    w × (10·CPD) + (d−1)·CPD + c
//	CUSTOMER_NAME_IDX                w × 10000 + (d−1)·1000 + last
//	ORDER, NEW_ORDER, HISTORY        w × 10^8 + (d−1)·10^7 + o (or seq)
//	ORDER_LINE                       (w × 10^8 + (d−1)·10^7 + o) × 16 + ol
//	STOCK                            w × ItemCount + i     (w × 100000 + i by default)
//	ITEM                             i
//
// Consecutive ids spread over all 1024 key groups of a table and every
// warehouse's rows land in every key group, so key groups of CUSTOMER,
// STOCK and the order tables mix all warehouses: cohort ownership then
// carries no information beyond warehouse routing, which is the tutorial's
// negative result (SPEC §5). Footprint predicts no key group for rows whose
// key is decided during execution under this encoding.
//
// # Transactions
//
// Programs batch reads and locks with GetMany/GetForUpdateMany where the
// specification allows and lock (GetForUpdate) only what they write:
//
//   - NewOrder (2.4.2): read WAREHOUSE, CUSTOMER and all ITEMs; lock
//     DISTRICT, the distinct STOCK rows and CUSTOMER_LAST_ORDER; insert
//     ORDER, NEW_ORDER and one ORDER_LINE per line; update stock per clause
//     2.4.2.2 (repeated items apply line by line). An unused item returns
//     txn.ErrRollback after the reads and the locks of the lines before it
//     (2.4.2.3).
//   - Payment (2.5.2): by last name, read the name index; lock WAREHOUSE,
//     DISTRICT, CUSTOMER; update the YTDs, the balance and counters, C_DATA
//     for "BC" credit; insert HISTORY.
//   - OrderStatus (2.6.2): read-only; customer (by id or name index),
//     CUSTOMER_LAST_ORDER, the ORDER and its lines.
//   - Delivery (2.7.4): all ten districts in one transaction: read the
//     cursors, lock the NEW_ORDER and ORDER rows they point at (skipping
//     districts without one), lock cursor, ORDER_LINEs and CUSTOMER, delete
//     NEW_ORDER, set O_CARRIER_ID and OL_DELIVERY_D, add Σ OL_AMOUNT to
//     C_BALANCE, C_DELIVERY_CNT+1, advance the cursor.
//   - StockLevel (2.8.2): read-only; D_NEXT_O_ID, the last 20 orders and
//     their lines, the distinct items' home STOCK rows.
//
// # Expected MN CAS atomics
//
// Every locked or inserted record costs one CAS on the memory-node path
// (deletes lock the row first). Per committed transaction, with 10 lines per
// order on average and every district holding an undelivered order (true in
// steady state: 900 per district at load, and NewOrder adds them faster than
// Delivery removes them in both profiles):
//
//	NewOrder     1 DISTRICT + ~10 STOCK + 1 ORDER + 1 NEW_ORDER + ~10 ORDER_LINE + 1 LAST_ORDER ≈ 24
//	             (rolled back: DISTRICT + ~9 STOCK ≈ 10, for no commit)
//	Payment      WAREHOUSE + DISTRICT + CUSTOMER + HISTORY insert = 4
//	Delivery     10 × (cursor + NEW_ORDER + ORDER + ~10 ORDER_LINE + CUSTOMER) ≈ 140
//	OrderStatus  0
//	StockLevel   0
//
// Expected atomics per committed transaction, before aborts and retries
// (which add the locks of failed attempts):
//
//	spec   0.4455·24 + 0.0045·10 + 0.43·4 + 0.04·140 = 18.06 per issued, ≈ 18.1 per committed
//	crest  0.495·24  + 0.005·10  + 0.46·4 + 0.04·140 = 19.37 per issued, ≈ 19.5 per committed
//
// The tutorial's ≈ 13.5 for CREST counts CREST's own lock set; this
// package charges one CAS per inserted row and per delivered order line.
// The auxiliary tables account for 1 of NewOrder's 24 and 10 of Delivery's
// 140.
//
// # Simplifications
//
//   - Text fields are shortened: C_DATA 64 bytes (spec 300..500), S_DIST_xx
//     and OL_DIST_INFO 8 (spec 24), C_FIRST 16, W_NAME/D_NAME 10, H_DATA 24;
//     I_DATA and S_DATA are reduced to their "contains ORIGINAL" flag (all
//     brand-generic needs); C_LAST is stored as its number 0..999 (LastName
//     renders it). This keeps STOCK at 104 and ORDER_LINE at 32 bytes.
//   - Display-only fields no transaction logic or consistency condition uses
//     are dropped: street/city/state/zip, C_PHONE, C_SINCE, C_MIDDLE, I_NAME.
//     The displayed outputs (NewOrder total, brand-generic, StockLevel count)
//     are computed and discarded: TxnResult carries no TPC-C output.
//   - A by-last-name selection reads the name index and then only the chosen
//     customer row, instead of every matching row.
//   - Delivery runs synchronously as one transaction (the specification
//     allows deferred execution).
//   - Each generated transaction draws its district; the specification fixes
//     a StockLevel terminal's district. There are no keying or think times
//     (the driver decides pacing); dates come from a per-generator virtual
//     clock (1 ms per transaction).
//   - Scale overrides for tests: ItemCount and CustomersPerDistrict. The
//     initial population scales with them: 30% of each district's orders are
//     undelivered, D_YTD starts at CPD × 10.00 and W_YTD at ten times that
//     (30,000.00 and 300,000.00 at 3000 customers), names repeat only beyond
//     the first 1000 customers, and NURand ranges use the configured counts.
//
// # Consistency checks
//
// Check runs conditions 1–10 and 12 of clause 3.3.2 (tpcc.c1 … tpcc.c12) and
// tpcc.aux (cursors, last orders and the name index agree with the base
// tables); CheckAfterLoad adds condition 11, which holds only right after
// load. With no range scans, rows are found by probing every key they can
// have: per district O_ID 1 .. D_NEXT_O_ID−1+16 in ORDER and NEW_ORDER, OL 1..15
// of each in ORDER_LINE, history sequence 1 .. counter−1+16, every customer.
// About 17 reads per order; linear overall (≈ 2 s on memtx for 4 warehouses
// at full scale after 50,000 transactions).
//
// # Sizing
//
// Schema capacities are the loaded rows (exact: New replays the population's
// order-line counts and last names) plus growth for
// Config.ExpectedNewOrders = N committed NewOrders: ORDER and NEW_ORDER +N,
// ORDER_LINE +10.05·N, HISTORY + N·Payment/NewOrder·1.07. At 16 warehouses
// and N = 2,000,000, ORDER_LINE holds about 25 million rows (56-byte slots at
// the store's 50% load factor: about 2.8 GB of memory-node memory); lower N
// for shorter runs.
package tpcc
