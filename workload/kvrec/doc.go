// Package kvrec is the record format and the transaction program shared by
// the key/value workloads (ycsb, tenant, trace), which all run
// messages.KVTxn bodies.
//
// # Record format
//
// Every value is self-describing so that consistency checks can tell a
// well-formed record from a torn, misplaced or corrupted one (little-endian):
//
//	[0:4)    table id (uint32)
//	[4:12)   key (uint64)
//	[12:20)  version: how many committed writes the record has seen
//	[20:28)  balance (int64), see "Conservation" below
//	[28:n-4) filler, a deterministic function of (table, key, version)
//	[n-4:n)  CRC-32C of bytes [0, n-4)
//
// A value is at least MinValueSize (32) bytes.
//
// # Program
//
// A KVTxn write is a read-modify-write: the program locks every written
// record with one GetForUpdateMany (in ascending (table, key) order, so the
// lock order is fixed), checks that the value read is well formed, and puts
// the record back with version + 1 and its balance adjusted. Reads are one
// GetMany. KVWrite.value must be empty and KVWrite.delete false: these
// workloads never insert or delete, and a write of a missing record fails
// (wrapping txn.ErrNotFound) instead of inserting, so that a lost record is
// an error rather than silently recreated. A committed program fills
// TxnResult.output with a KVTxnOutput: one entry per KVTxn.reads, in order,
// with the value read (for a record the transaction also writes, the value
// before the write). KVReadResult.version is left 0: the MN version word is
// not visible through txn.Tx.
//
// Duplicate references are folded: a record listed twice is read or written
// once, and a record both read and written is only locked.
//
// # Conservation
//
// The writes of a transaction move "balance" between its records so that
// the sum over the transaction is zero: with m written records in ascending
// order, the first gets −(m−1) and each other +1 (a single write gets 0).
// The balance of every record starts at 0, so the sum of all balances is 0
// after any serializable history; a lost update or a partially applied
// transaction breaks it. CheckRecords verifies it next to well-formedness.
package kvrec
