// Package messages holds every protobuf message that crosses a process
// boundary in AURA: between compute nodes (CNs), between CNs and the planner,
// and between clients and CNs. Each NAME.proto in this directory sits next to
// its generated NAME.pb.go; the generated code is committed and produced only
// by scripts/genproto.sh (never edit a .pb.go by hand).
//
// All files are proto3, proto package aura.v1, and are compiled as
// aura/v1/NAME.proto (the script maps that directory onto this one), so the
// paths they register in the global protobuf registry cannot collide with
// another module's "common.proto". Imports between them are written
// import "aura/v1/NAME.proto".
//
// # Files
//
//   - common.proto: shared vocabulary. LockPath (LOCAL, OWNER_RPC, MN_CAS),
//     RecordRef (table, key) and Moved, the typed MOVED(owner, epoch) redirect
//     of invariant I4 that lock replies and transaction results carry. It also
//     states the conventions every file follows: key group ids and epochs are
//     uint64, nodes are named by their membership name, durations and
//     instants carry their unit in the field name (_micros, _unix_micros),
//     money is int64 cents.
//   - heartbeat.proto: AccessSummary, the ACCESS_SUMMARY heartbeat a CN's
//     profiler sends to the planner each tick: per key group write/read
//     weights, v1 untyped edges or v2 typed (write–write, write–read) edges,
//     lock counts by path with the per key group fallback CAS, queue depth
//     and CPU load, and per CN home counts for P(home(v)=i). Weights are
//     per-window estimates; the planner owns the decay.
//   - owner.proto: the owner lock RPC between CNs. LockRequest/LockReply and
//     UnlockRequest/UnlockReply, with a LockStatus of OK, CONFLICT, MOVED,
//     RETRY, STALE_EPOCH or ERROR and an idempotency key (request_id) per
//     requester.
//   - ownermap.proto: OwnerMapPush and OwnerMapAck, the distribution of each
//     OwnerMap epoch to every node. The manifest travels as opaque bytes (its
//     binary format, SPEC §7, is encoded elsewhere), full or as a delta
//     against a base epoch, split into chunks with a total length and a
//     CRC-32C.
//   - migration.proto: the freeze → drain → handoff → publish protocol of
//     SPEC §6 (Freeze, Drain, Handoff, Publish, MigrationAbort and their
//     acknowledgements), every message keyed by (migration_id, cohort_id,
//     epoch) in fields 1–3, plus MigrationPhase and MigrationAckStatus.
//   - txn.proto: TxnSubmit, a transaction sent to its home CN's coordinator
//     (TPC-C's five transactions with their clause 2 input data, key/value,
//     bank transfer and audit) keyed by an idempotent txn_id, and TxnResult
//     with its TxnOutcome, per-transaction TxnCounters and optional output.
//
// # Versioning and compatibility rules
//
// Nodes of different builds meet during rolling upgrades, so every change
// must keep old readers and old writers working:
//
//   - Never change or reuse a field number, and never change a field's type
//     or cardinality (singular ↔ repeated, into or out of a oneof). When a
//     field is removed, add `reserved N;` and `reserved "name";` for it.
//   - Never renumber, reuse or remove an enum value; reserve it instead. The
//     zero value of every enum is *_UNSPECIFIED and means "not set"; readers
//     treat unknown enum values like UNSPECIFIED (usually as an error or the
//     most conservative choice), never as success.
//   - New fields are optional by construction (proto3 zero values). A reader
//     must behave sensibly when a field it knows is absent (zero) because the
//     writer is older.
//   - Unknown fields are ignored by readers and preserved by the Go runtime
//     when a message is decoded and re-encoded, so a node that relays a
//     message does not strip fields it does not know.
//   - Renaming a field or message is wire-compatible but breaks JSON and the
//     type name protoactor-go uses to route remote messages: rename messages
//     never, fields only with care.
//   - A semantic change that old readers would misinterpret gets a new field
//     (or a new message) and, where a whole schema shifts, an explicit
//     version field, as AccessSummary.version does (v1 untyped edges, v2
//     typed edges).
//   - Epochs only grow: every ownership-related message carries one, and
//     receivers refuse older epochs with a typed MOVED or STALE_EPOCH reply
//     rather than dropping the message.
//   - Decoding untrusted bytes must return an error, never panic; size caps
//     on byte payloads (e.g. the manifest) are enforced by their consumers
//     before allocating.
//
// protoactor-go's remote layer (the version this module pins) crashes a
// receiver that is sent a message type it does not know, so a new message
// type may be sent to a node only after every node's build includes it.
//
// The tests round-trip a populated instance of every message type (and fail
// when a message or field has no test case), check that unknown fields
// survive across schema versions, and fuzz decoding (FuzzUnmarshal, seed
// corpus in testdata/fuzz/FuzzUnmarshal, regenerated with
// go test ./messages -run TestSeedCorpus -update-corpus).
package messages

//go:generate bash ../scripts/genproto.sh
