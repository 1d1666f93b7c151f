// Package txn defines what a transaction program sees (Tx, Program, Ref) and
// the schema types shared by the workloads and the OCC engine, plus the
// transaction errors every layer agrees on.
//
// The engine that runs programs on disaggregated memory is in package occ;
// txn/memtx is a single-lock, obviously serializable reference implementation
// of Tx that workload tests use as an oracle.
package txn
