package durable

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("durable: data directory is corrupt")

// CorruptError reports damage that recovery refuses to repair: a bad record
// before the log's tail, a gap in the sequence numbers, a damaged snapshot
// with no intact one to fall back on. A memory node that meets one does
// not start: serving memory that silently lost acknowledged writes would be
// worse than not serving. (A half-written record at the very end of the
// log is not corruption: it is the write a crash interrupted, and recovery
// cuts it off.)
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("durable: %s at byte %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// segmentScan is the outcome of reading one segment.
type segmentScan struct {
	start    uint64 // first sequence number, from the header
	validEnd int64  // bytes up to the end of the last intact record
	torn     int64  // bytes after validEnd that a crash left half-written
	records  int
}

// scanSegment reads the segment in r (size bytes, named name) and calls fn
// for each intact record in order. In the last segment a damaged record
// within maxTornBytes of the end, reaching to the end, is a torn write: the
// scan stops there and reports it. Anything else damaged is a
// *CorruptError. fn's errors are returned as they are.
func scanSegment(r io.Reader, size int64, name string, last bool, fn func(rec *Record) error) (segmentScan, error) {
	var sc segmentScan
	corrupt := func(off int64, format string, args ...any) error {
		return &CorruptError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	br := bufio.NewReaderSize(r, int(max(min(size, 1<<20), 16)))
	var h [segmentHeaderSize]byte
	if size < segmentHeaderSize {
		if last {
			// Created, not yet fully written: the crash came right after a
			// rotation. The caller rewrites the header.
			sc.torn = size
			return sc, nil
		}
		return sc, corrupt(0, "segment of %d bytes has no header", size)
	}
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return sc, fmt.Errorf("durable: reading %s: %w", name, err)
	}
	if !bytes.Equal(h[:8], segmentMagic[:]) {
		return sc, corrupt(0, "not a log segment (bad magic %q)", h[:8])
	}
	sc.start = binary.LittleEndian.Uint64(h[8:])
	off := int64(segmentHeaderSize)
	sc.validEnd = off
	var payload []byte
	var rec Record
	// torn decides whether damage at off is the interrupted last write.
	torn := func(frameEnd int64, reason string) error {
		if last && size-off <= maxTornBytes && frameEnd >= size {
			sc.torn = size - off
			return nil
		}
		return corrupt(off, "%s", reason)
	}
	zeroTail := func() (bool, error) {
		// A tail of zeros is space the file system allocated for a write
		// that did not land.
		if !last || size-off > maxTornBytes {
			return false, nil
		}
		rest, err := io.ReadAll(br)
		if err != nil {
			return false, fmt.Errorf("durable: reading %s: %w", name, err)
		}
		return bytes.Count(rest, []byte{0}) == len(rest), nil
	}
	for off < size {
		var fh [frameHeaderSize]byte
		if size-off < frameHeaderSize {
			return sc, torn(size, "record header cut short")
		}
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			return sc, fmt.Errorf("durable: reading %s: %w", name, err)
		}
		n := int64(binary.LittleEndian.Uint32(fh[:]))
		sum := binary.LittleEndian.Uint32(fh[8:])
		frameEnd := off + frameHeaderSize + n
		if crc32.Checksum(fh[:4], castagnoli) != binary.LittleEndian.Uint32(fh[4:]) {
			// A damaged header is a torn write only if nothing was written
			// after it (power loss leaves unwritten sectors as zeros).
			ok, err := zeroTail()
			if err != nil {
				return sc, err
			}
			if ok {
				sc.torn = size - off
				return sc, nil
			}
			return sc, corrupt(off, "record header checksum mismatch")
		}
		if n == 0 || n > MaxRecordBytes {
			return sc, corrupt(off, "record of %d bytes (allowed 1..%d)", n, MaxRecordBytes)
		}
		if frameEnd > size {
			// The length is intact, so the file ends inside the record: a
			// write cut short.
			return sc, torn(frameEnd, fmt.Sprintf("record of %d bytes runs past the end of the file", n))
		}
		if int64(cap(payload)) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			return sc, fmt.Errorf("durable: reading %s: %w", name, err)
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			if frameEnd == size {
				return sc, torn(frameEnd, "checksum mismatch")
			}
			allZero := bytes.Count(payload, []byte{0}) == len(payload)
			if allZero {
				if ok, err := zeroTail(); err != nil {
					return sc, err
				} else if ok {
					sc.torn = size - off
					return sc, nil
				}
			}
			return sc, corrupt(off, "checksum mismatch")
		}
		if err := DecodeRecord(payload, &rec); err != nil {
			// The checksum matched, so these are the bytes that were
			// written: a record this version cannot read is not a torn
			// write.
			return sc, corrupt(off, "%v", err)
		}
		if err := fn(&rec); err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) && ce.File == "" {
				ce.File, ce.Offset = name, off
			}
			return sc, err
		}
		off = frameEnd
		sc.validEnd = off
		sc.records++
	}
	return sc, nil
}
