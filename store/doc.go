// Package store places a workload's tables in memory-node memory so that a
// compute node reaches every record with one-sided verbs: the memory node's
// CPU runs no transaction logic.
//
// Each table is one registered region holding a hash index with records
// inline. A key has two candidate buckets (two-choice hashing) of
// SlotsPerBucket slots each; a compute node computes both bucket addresses
// itself and reads them in one doorbell. A slot is
//
//	meta (8 B: version<<1 | present) | lock word (8 B) | key (8 B) | value
//
// The lock word is 0 when free; a memory-node CAS lock stores the holder's
// tag (CASTag), and owner sentinels (IsOwnerSentinel) are reserved for the
// ownership paths. Meta precedes the lock word so that one 16-byte WRITE of
// [meta, lock] stores the new version before it releases the lock.
//
// Inserts claim a free slot (not present, not locked) by CAS on its lock word,
// deletes clear the present bit, and both bump the version: the occ package
// holds the protocol and its argument.
//
// Key groups. A table may split its buckets into equal ranges, one per
// partition (txn.Table.Partitions): both of a key's candidate buckets lie in
// its partition's range. TPC-C, the workload that inserts, partitions its
// tables by key group, so that a slot only ever holds records of one key
// group. Beside the tables, the
// layout may hold one 8-byte fence word per key group (Layout.Fences,
// Schema.KeyGroupFences). Together they let an owner that fenced a key group
// grant its records, and claim its empty slots for inserts, without an
// atomic (package actors/owner, "Key-group fences"). Loader fills empty tables with batched
// WRITEs; Reader reads committed records for consistency checks.
//
// Limits: a table holds at most its Capacity at LoadFactor (an insert whose
// two buckets are full fails with txn.ErrTableFull); a partitioned table
// holds its Capacity spread evenly over its partitions, each at LoadFactor
// plus one bucket (a partition fuller than its share fails sooner); a value
// is at most txn.MaxValueSize bytes.
package store
