package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// On disk a record is
//
//	length u32 | length_crc u32 | crc u32 | payload
//
// little-endian, where length counts the payload's bytes, length_crc is the
// CRC32-C (Castagnoli) of the four length bytes and crc the CRC32-C of the
// payload. The length has its own checksum so that a damaged length is
// recognised as damage before it is used: without it, a flipped bit that
// made a record seem to run past the end of the file would look exactly
// like a write cut short by a crash, and recovery would silently drop every
// record after it. The payload is
//
//	kind u8 | seq u64 | body
//
// with the body of a region record
//
//	name_len u8 | name | rkey u32 | addr u64 | length u64
//
// and of a writes record
//
//	count u16 | count × (rkey u32 | addr u64 | len u32 | data)
//
// Sequence numbers start at 1 and increase by one per record, so a replay
// that finds a gap knows the log is damaged.

// Record kinds.
const (
	KindRegion byte = 1
	KindWrites byte = 2
)

const (
	// frameHeaderSize is the length and the two CRCs in front of every payload.
	frameHeaderSize = 12
	// payloadHeaderSize is the kind and sequence number.
	payloadHeaderSize = 1 + 8
	// writeHeaderSize is one write's rkey, address and length.
	writeHeaderSize = 4 + 8 + 4
)

// MaxRecordBytes caps a record's payload. A record holds the effects of one
// request, and the largest request a memory node accepts is a full doorbell
// frame (wire.MaxFrameSize: rdma.MaxBatch work requests carrying
// rdma.MaxBatchBytes of data), whose post-images are never larger than the
// frame itself; so every record a live node writes fits, and a decoder can
// refuse anything larger before allocating for it.
const MaxRecordBytes = wire.MaxFrameSize

// castagnoli is the CRC32-C table: hardware-accelerated on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Write is the post-image of one mutation: after it, the bytes at Addr in
// the region of RKey are Data. A successful CAS is logged as the 8 bytes it
// swapped in and an FAA as the 8-byte sum it left, so that replaying writes
// in log order rebuilds memory exactly, whatever the operations were.
type Write struct {
	RKey uint32
	Addr uint64
	Data []byte
}

// Record is one decoded log record.
type Record struct {
	Kind   byte
	Seq    uint64
	Region rdma.Region // KindRegion
	Writes []Write     // KindWrites; Data aliases the decoded buffer
}

// ErrBadRecord is matched (errors.Is) by every record decoding error.
var ErrBadRecord = errors.New("durable: malformed log record")

func badRecord(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRecord}, args...)...)
}

// sealFrame fills in the frame header reserved at b[start:] for the
// payload that follows it to the end of b.
func sealFrame(b []byte, start int) {
	p := b[start+frameHeaderSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start:start+4], castagnoli))
	binary.LittleEndian.PutUint32(b[start+8:], crc32.Checksum(p, castagnoli))
}

// appendRegion appends a framed region record to b.
func appendRegion(b []byte, seq uint64, r rdma.Region) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeaderSize)...)
	b = append(b, KindRegion)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, byte(len(r.Name)))
	b = append(b, r.Name...)
	b = binary.LittleEndian.AppendUint32(b, r.RKey)
	b = binary.LittleEndian.AppendUint64(b, r.Addr)
	b = binary.LittleEndian.AppendUint64(b, r.Length)
	sealFrame(b, start)
	return b
}

// writesSize is the framed size of a writes record.
func writesSize(ws []Write) int {
	n := frameHeaderSize + payloadHeaderSize + 2
	for i := range ws {
		n += writeHeaderSize + len(ws[i].Data)
	}
	return n
}

// appendWrites appends a framed writes record to b.
func appendWrites(b []byte, seq uint64, ws []Write) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeaderSize)...)
	b = append(b, KindWrites)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ws)))
	for i := range ws {
		b = binary.LittleEndian.AppendUint32(b, ws[i].RKey)
		b = binary.LittleEndian.AppendUint64(b, ws[i].Addr)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(ws[i].Data)))
		b = append(b, ws[i].Data...)
	}
	sealFrame(b, start)
	return b
}

// checkWrites refuses what a decoder would refuse, so that the log never
// holds a record it cannot read back.
func checkWrites(ws []Write) error {
	if len(ws) == 0 || len(ws) > rdma.MaxBatch {
		return fmt.Errorf("durable: %d writes in one record (allowed 1..%d)", len(ws), rdma.MaxBatch)
	}
	total := 0
	for i := range ws {
		if len(ws[i].Data) == 0 || len(ws[i].Data) > rdma.MaxTransferBytes {
			return fmt.Errorf("durable: write %d of %d bytes (allowed 1..%d)", i, len(ws[i].Data), rdma.MaxTransferBytes)
		}
		total += len(ws[i].Data)
	}
	if total > rdma.MaxBatchBytes {
		return fmt.Errorf("durable: %d bytes of writes in one record (max %d)", total, rdma.MaxBatchBytes)
	}
	return nil
}

// DecodeRecord decodes a record's payload (the bytes after the length and
// CRC). It never panics and checks every count and length against the
// bytes present and the protocol's limits before using it; decoded write
// data aliases p. Errors match ErrBadRecord.
func DecodeRecord(p []byte, rec *Record) error {
	*rec = Record{Writes: rec.Writes[:0]}
	if len(p) > MaxRecordBytes {
		return badRecord("payload of %d bytes (max %d)", len(p), MaxRecordBytes)
	}
	if len(p) < payloadHeaderSize {
		return badRecord("payload of %d bytes, shorter than its header", len(p))
	}
	rec.Kind, rec.Seq = p[0], binary.LittleEndian.Uint64(p[1:])
	if rec.Seq == 0 {
		return badRecord("sequence number 0")
	}
	b := p[payloadHeaderSize:]
	switch rec.Kind {
	case KindRegion:
		if len(b) < 1 {
			return badRecord("region record without a name length")
		}
		n := int(b[0])
		b = b[1:]
		if n == 0 || n > rdma.MaxRegionNameLen || len(b) != n+4+8+8 {
			return badRecord("region record: name of %d bytes in a body of %d", n, len(b))
		}
		rec.Region = rdma.Region{Name: string(b[:n]), RKey: binary.LittleEndian.Uint32(b[n:]),
			Addr: binary.LittleEndian.Uint64(b[n+4:]), Length: binary.LittleEndian.Uint64(b[n+12:])}
		if rec.Region.RKey == 0 || rec.Region.Length == 0 {
			return badRecord("region record %q: rkey %#x, length %d", rec.Region.Name, rec.Region.RKey, rec.Region.Length)
		}
		return nil
	case KindWrites:
		if len(b) < 2 {
			return badRecord("writes record without a count")
		}
		count := int(binary.LittleEndian.Uint16(b))
		b = b[2:]
		if count == 0 || count > rdma.MaxBatch || count*writeHeaderSize > len(b) {
			return badRecord("writes record: %d writes in %d bytes (allowed 1..%d)", count, len(b), rdma.MaxBatch)
		}
		total := 0
		for i := 0; i < count; i++ {
			if len(b) < writeHeaderSize {
				return badRecord("write %d: header cut short", i)
			}
			w := Write{RKey: binary.LittleEndian.Uint32(b), Addr: binary.LittleEndian.Uint64(b[4:])}
			n := binary.LittleEndian.Uint32(b[12:])
			b = b[writeHeaderSize:]
			if n == 0 || n > rdma.MaxTransferBytes || uint64(n) > uint64(len(b)) {
				return badRecord("write %d: %d bytes with %d left (allowed 1..%d)", i, n, len(b), rdma.MaxTransferBytes)
			}
			total += int(n)
			if total > rdma.MaxBatchBytes {
				return badRecord("writes record carries more than %d bytes", rdma.MaxBatchBytes)
			}
			w.Data, b = b[:n:n], b[n:]
			rec.Writes = append(rec.Writes, w)
		}
		if len(b) != 0 {
			return badRecord("writes record: %d trailing bytes", len(b))
		}
		return nil
	}
	return badRecord("unknown kind %d", rec.Kind)
}
