// Package durable keeps a memory node's memory on disk: a write-ahead log
// of every mutation plus periodic snapshots, in one data directory, so that
// a memory node that crashes (kill -9, power loss) restarts with every
// write it acknowledged (`aura mn --data-dir`; docs/durability.md).
//
// # Why a log and not a backup memory node
//
// The other way to survive a memory-node failure is replication: clients
// write to a primary and a backup. It keeps serving through the failure,
// but every client verb path must learn to write twice and to fail over,
// atomics (CAS/FAA) must be ordered identically on both nodes — which
// one-sided verbs cannot do without the primary forwarding them — and a
// crash of both loses everything. A log keeps the client protocol
// untouched (the node restarts at the same address with the same rkeys and
// addresses; clients redial and the OCC engine's in-doubt handling does the
// rest), survives losing every process at once, and costs an fsync that
// group commit shares between concurrent requests. Replication can later be
// layered on the same log (ship it to a standby).
//
// # What is logged
//
// The rdma/tcp server calls the store through its Journal interface. For
// every request that changed memory it appends one record: a region
// registration, or the post-images of a doorbell's successful WRITEs (the
// bytes), CASes (the 8 bytes swapped in) and FAAs (the 8-byte sum). A
// request that changed nothing (only READs, only failed CASes) appends
// nothing. Post-images make replay a sequence of plain writes whose result
// does not depend on what the operation was; they are correct because the
// server executes and appends each mutating request in one critical
// section, so the log's order is the order in which mutations took effect.
//
// # When a reply may leave
//
// No response leaves the server before the log is durable up to the last
// record appended when the request ran — its own record for a mutation, and
// for a read every mutation it could have seen. So a client never
// observes, let alone builds on, memory that a crash could take back: in
// particular the commit ledger and every write-back a client saw committed
// are on disk. Requests that depend on nothing pending are answered at
// once.
//
// # Group commit
//
// Appends copy the record into an in-memory buffer; one flusher goroutine
// repeatedly takes everything buffered, writes it with one write(2) and
// makes it durable with one fsync, then wakes the waiters. While it is in
// fsync, new records accumulate and form the next batch, so concurrent
// requests share fsyncs without an artificial delay: under load the batch
// grows, at idle a lone request waits for one fsync only. The buffer is
// capped (MaxPendingBytes); appenders wait when it is full.
//
// # Files
//
// Segments wal-<first seq>.log hold records framed as
// length | CRC32-C(length) | CRC32-C(payload) | payload (see record.go),
// with contiguous sequence numbers. Every snapshot-every bytes, the
// snapshotter rotates the log (so records after the snapshot point start a
// new segment), copies memory while verbs keep running, waits until the
// log covers everything the copy may contain (a caller that changes memory
// before appending its record — the memory-node server — gives the store a
// barrier, SetMutationBarrier, that waits for mutations already begun to
// append, and the store then waits for the log to be durable up to there), writes it as
// snap-<seq>.snap.tmp, fsyncs it, renames it to snap-<seq>.snap, fsyncs the
// directory and only then removes older snapshots and segments. The copy
// is fuzzy — a word may already hold a value written after seq — which is
// harmless because replaying the post-images after seq, in order, leaves
// every word with its last written value. The directory is held with an
// exclusive flock on LOCK, which the kernel releases when the process dies.
//
// # Recovery
//
// Open removes unfinished snapshot files, loads the newest intact snapshot
// (an older one only if the log from it is complete), then replays the
// segments after it, checking that sequence numbers are contiguous. A
// record that is damaged at the very end of the last segment — cut short,
// zero-filled, or with a bad checksum and nothing after it, within one
// flush of the end — is the write a crash interrupted: it is cut off (it
// was never acknowledged). Any other damage is a *CorruptError and Open
// fails: a node that silently served memory missing acknowledged writes
// would break every transaction guarantee above it.
//
// # Failure
//
// A failed write or fsync makes the log fail permanently (ErrLogFailed):
// nothing is acknowledged after it and the server stops, because after a
// failed fsync the kernel may have dropped the dirty pages and retrying
// cannot promise they reach the disk. A restart recovers what was durable.
package durable
