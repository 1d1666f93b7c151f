// Package trace replays a JSON-lines trace, one transaction per line:
//
//	{"reads":[["TABLE",KEY],…],"writes":[["TABLE",KEY],…]}
//
// KEY is an unsigned 64-bit integer written as a plain JSON integer (the
// whole range 0..18446744073709551615 is accepted; keys are never decoded
// through float64). TABLE is 1..64 bytes of printable, non-space
// characters. Either list may be absent, empty or null, but a line needs at
// least one operation. Blank lines are skipped (they still count for line
// numbers). Unknown fields, duplicate fields, trailing data, lines longer
// than MaxLineBytes (1 MiB) and lines with more than MaxOpsPerLine (1024)
// operations are errors; New reports bad lines as *LineError{Line, Err}
// (up to 10 of them, joined; errors.As finds the first), with Err wrapping
// one of the Err* sentinels.
//
// # Schema and data
//
// New scans the whole trace first. Tables get ids 1, 2, … in the order the
// trace first names them (id 0 is never used: it is the unset value on the
// wire). Every key the trace references is loaded once with a small value
// (ValueSize, default 32 bytes, in the kvrec format); a table's capacity is
// its number of distinct keys. Memory: 16 bytes per operation, bounded by
// MaxTotalOps and MaxTransactions.
//
// # Transactions
//
// A line becomes a messages.KVTxn: writes are read-modify-writes of the
// record's version counter (package kvrec; GetForUpdate in a fixed order),
// reads are one GetMany. Within a line, duplicate references are folded and
// a record both read and written is only written (the message lists each
// record once, writes and reads each in ascending (table, key) order).
// Programs accept only records of the trace.
//
// # Replay
//
// Replay order is the trace's and does not depend on the seed. The trace is
// divided among Config.Clients clients by striding: client c replays
// transactions c, c+Clients, c+2·Clients, … (0-based, blank lines
// excluded); a client numbered ≥ Clients replays the share of c mod Clients,
// so the driver sets Clients to its number of clients. When a share is
// exhausted Next returns nil, unless Loop is set, in which case the share
// starts over. Len() is the trace's length, for a driver that paces an
// open-loop replay (--rate belongs to the bench); Message(i) returns any
// transaction directly.
//
// # Rule "trace_range"
//
// Key group = (table id, key / KeysPerKG) packed as table id << 56 | range
// index (default 64 keys per range; TableKeysPerKG overrides it per table).
// Range indexes that do not fit 56 bits are folded by a hash. Partition =
// the key group. Home = the partition of the first written record, else of
// the first read one.
//
// # Checks
//
//   - "trace.records": every key of the trace present and well formed.
//   - "trace.conservation": the kvrec balances sum to zero.
package trace
