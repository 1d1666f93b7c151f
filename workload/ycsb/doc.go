// Package ycsb is a YCSB-style key/value workload with multi-key
// transactions.
//
// # Data
//
// One table, "usertable" (table id 1), of RecordCount records with keys
// 0..RecordCount-1 and values of ValueSize bytes in the kvrec format (the
// value embeds its table, key, a version counter, a balance and a CRC-32C,
// so a check can tell well-formed records from damaged ones).
//
// # Transactions
//
// Each transaction is a messages.KVTxn of OpsPerTxn operations on distinct
// keys; each operation is a read with probability ReadProportion, else a
// write. Writes are read-modify-writes under GetForUpdate (see package
// kvrec: the version is bumped and the balances of the written records move
// by a zero-sum amount). Keys follow Distribution:
//
//   - "zipfian" (default): YCSB's scrambled Zipfian with skew Theta (0.99):
//     hot keys scattered over the key space, as YCSB's default.
//   - "zipfian_ordered": YCSB's plain Zipfian: key 0 is the hottest, so hot
//     keys sit in the first key groups.
//   - "uniform".
//
// The generators draw from a PCG seeded by (seed, client) and are
// deterministic.
//
// # Rule "ycsb_range"
//
// Key group = key / KeysPerKG (default 64); partition = key group /
// KeyGroupsPerPartition (default 1). Home = the partition of the first
// written key, else of the first read key. The footprint is exactly the
// message's keys.
//
// # Checks
//
//   - "ycsb.records": every record present and well formed.
//   - "ycsb.conservation": the balances sum to zero (no lost update, no
//     partially applied transaction).
package ycsb
