// Package wire is the binary protocol between AURA compute nodes and a memory
// node served over TCP (rdma/tcp, `aura mn`). It holds pure encoders and
// decoders over byte slices and one framing helper over an io.Reader; it does
// no I/O of its own and keeps no state.
//
// # Frames
//
// Every frame, in both directions, is
//
//	length u32 | kind u8 | request id u64 | body
//
// little-endian, where length counts the bytes after itself (kind, id and
// body, so at least HeaderSize-4). A request carries an id chosen by the
// client; the response to it carries the same id, so a connection pipelines:
// many requests are outstanding at once and responses may come back in any
// order. Id 0 is reserved for connection-level errors sent by the server
// before it closes a connection (too many connections, a malformed frame whose
// id could not be read).
//
// Requests (client → memory node):
//
//	Hello        magic u32 ("AURA") | version u16              → HelloOK or Error
//	Register     name_len u8 | name | length u64               → Region or Error
//	ListRegions  (empty)                                       → Regions or Error
//	Batch        count u16 | count × work request              → BatchResult or Error
//
// A work request is op u8 | rkey u32 | remote_addr u64 followed by
//
//	READ   length u32
//	WRITE  length u32 | data
//	CAS    compare u64 | swap u64
//	FAA    add u64
//
// Work-request ids do not travel: results come back in the batch's order.
//
// Responses (memory node → client):
//
//	HelloOK      version u16 | max_frame u32 | max_in_flight u32 | max_batch u32 |
//	             max_batch_bytes u32 | max_transfer u32 | capacity u64 | max_regions u32
//	Region       region
//	Regions      count u32 | count × region
//	BatchResult  count u16 | count × (op u8 | status u8 | payload)
//	Error        code u16 | message_len u16 | message
//
// where a region is name_len u8 | name | rkey u32 | addr u64 | length u64, and
// a result's payload is the prior value u64 of a successful CAS or FAA, the
// length u32 and data of a successful READ, and nothing otherwise.
//
// # Promises
//
//   - Decoders never panic and never trust a size: the frame length is checked
//     against MaxFrameSize, every count against its cap (MaxBatch, MaxRegions)
//     and against the bytes actually present, every length against
//     rdma.MaxTransferBytes, rdma.MaxBatchBytes, rdma.MaxRegionNameLen or
//     MaxErrorMessageLen, all before anything is allocated. ReadFrame grows its
//     buffer only as bytes arrive, so a peer that announces a large frame and
//     sends nothing costs no memory. Malformed input yields a *DecodeError
//     (errors.Is(err, ErrMalformed)).
//   - Encoders refuse what decoders would reject, so encode → decode is the
//     identity on every value an encoder accepts (tested, and fuzzed with
//     FuzzDecodeRequest and FuzzDecodeResponse: decode → encode → decode).
//   - Decoded WRITE and READ data alias the frame buffer (no copy); copy it
//     before reusing the buffer.
//   - The largest frame of either direction is a full doorbell batch: MaxBatch
//     work requests with MaxBatchBytes of payload, plus headers (MaxFrameSize).
//
// Error replies carry a Code; *Error unwraps to the matching rdma sentinel
// (rdma.ErrNoSuchRegion, rdma.ErrOutOfMemory, rdma.ErrBatchTooLarge) or to one
// of this package's (ErrProtocol, ErrVersion, ErrBusy, ErrShuttingDown,
// ErrInvalidArgument, ErrInternal), so callers match them with errors.Is.
//
// Versioning: the Hello exchange carries Version; a memory node refuses a
// client whose version it does not speak with CodeVersion. Any change to a
// frame layout bumps Version.
package wire
