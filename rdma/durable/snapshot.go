package durable

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// A snapshot file is
//
//	magic "AURASNP\x01" | seq u64 | count u32 |
//	count × (name_len u8 | name | rkey u32 | addr u64 | length u64 | length bytes) |
//	crc u32
//
// where crc is the CRC32-C of every byte before it. It holds every region
// registered by record seq and contents that are at least as new as record
// seq: it is copied while verbs keep running (a fuzzy snapshot), so a word
// may already hold a later value. That is harmless because log records are
// post-images applied in the order the node applied them: replaying every
// record after seq over the copy leaves each word with the value of the
// last write to it, exactly as in the live memory. Before the file is
// published, the log is made durable up to the last record the copy may
// contain, so a snapshot never holds a write the log could lose.

var snapshotMagic = [8]byte{'A', 'U', 'R', 'A', 'S', 'N', 'P', 1}

// snapshotChunk is how much memory a snapshot copies per READ: the largest
// transfer a verb allows.
const snapshotChunk = rdma.MaxTransferBytes

// crcWriter hashes what it writes.
type crcWriter struct {
	w io.Writer
	h hash.Hash32
	n int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// writeSnapshot writes mem's regions and contents to w (see above).
func writeSnapshot(w io.Writer, mem *rdma.Memory, seq uint64) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &crcWriter{w: bw, h: crc32.New(castagnoli)}
	regions := mem.Regions()
	var hdr []byte
	hdr = append(hdr, snapshotMagic[:]...)
	hdr = binary.LittleEndian.AppendUint64(hdr, seq)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(regions)))
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, err
	}
	chunk := make([]byte, snapshotChunk)
	for _, r := range regions {
		hdr = hdr[:0]
		hdr = append(hdr, byte(len(r.Name)))
		hdr = append(hdr, r.Name...)
		hdr = binary.LittleEndian.AppendUint32(hdr, r.RKey)
		hdr = binary.LittleEndian.AppendUint64(hdr, r.Addr)
		hdr = binary.LittleEndian.AppendUint64(hdr, r.Length)
		if _, err := cw.Write(hdr); err != nil {
			return cw.n, err
		}
		for off := uint64(0); off < r.Length; off += snapshotChunk {
			b := chunk[:min(snapshotChunk, r.Length-off)]
			c := mem.Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + off, Local: b})
			if c.Status != rdma.StatusSuccess {
				return cw.n, fmt.Errorf("durable: snapshot read of region %q at %d: %v", r.Name, off, c.Status)
			}
			if _, err := cw.Write(b); err != nil {
				return cw.n, err
			}
		}
	}
	sum := binary.LittleEndian.AppendUint32(nil, cw.h.Sum32())
	if _, err := bw.Write(sum); err != nil {
		return cw.n, err
	}
	return cw.n + 4, bw.Flush()
}

// crcReader hashes what it reads.
type crcReader struct {
	r io.Reader
	h hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

// loadSnapshot restores the regions and contents of the snapshot in r into
// mem, which must be empty, and returns its sequence number. Damage is a
// *CorruptError; a snapshot that does not fit mem's capacity is an
// rdma.ErrOutOfMemory error.
func loadSnapshot(r io.Reader, name string, mem *rdma.Memory) (uint64, error) {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<20), h: crc32.New(castagnoli)}
	var off int64
	corrupt := func(format string, args ...any) error {
		return &CorruptError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	read := func(b []byte) error {
		if _, err := io.ReadFull(cr, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return corrupt("snapshot cut short")
			}
			return fmt.Errorf("durable: reading %s: %w", name, err)
		}
		off += int64(len(b))
		return nil
	}
	var hdr [8 + 8 + 4]byte
	if err := read(hdr[:]); err != nil {
		return 0, err
	}
	if !bytes.Equal(hdr[:8], snapshotMagic[:]) {
		return 0, corrupt("not a snapshot (bad magic %q)", hdr[:8])
	}
	seq := binary.LittleEndian.Uint64(hdr[8:])
	count := binary.LittleEndian.Uint32(hdr[16:])
	if count > wire.MaxRegions {
		return 0, corrupt("%d regions (max %d)", count, wire.MaxRegions)
	}
	chunk := make([]byte, snapshotChunk)
	var nameBuf [1 + rdma.MaxRegionNameLen]byte
	for i := uint32(0); i < count; i++ {
		if err := read(nameBuf[:1]); err != nil {
			return 0, err
		}
		n := int(nameBuf[0])
		if n == 0 || n > rdma.MaxRegionNameLen {
			return 0, corrupt("region %d: name of %d bytes", i, n)
		}
		if err := read(nameBuf[1 : 1+n]); err != nil {
			return 0, err
		}
		var rh [4 + 8 + 8]byte
		if err := read(rh[:]); err != nil {
			return 0, err
		}
		reg := rdma.Region{Name: string(nameBuf[1 : 1+n]), RKey: binary.LittleEndian.Uint32(rh[:]),
			Addr: binary.LittleEndian.Uint64(rh[4:]), Length: binary.LittleEndian.Uint64(rh[12:])}
		if err := mem.Restore(reg); err != nil {
			if errors.Is(err, rdma.ErrOutOfMemory) {
				return 0, fmt.Errorf("durable: %s: %w (start with at least the size the node had)", name, err)
			}
			return 0, corrupt("region %d: %v", i, err)
		}
		for o := uint64(0); o < reg.Length; o += snapshotChunk {
			b := chunk[:min(snapshotChunk, reg.Length-o)]
			if err := read(b); err != nil {
				return 0, err
			}
			if bytes.Count(b, []byte{0}) == len(b) {
				continue // fresh memory is zero: skip the write
			}
			c := mem.Execute(&rdma.WorkRequest{Op: rdma.OpWrite, RKey: reg.RKey, RemoteAddr: reg.Addr + o, Local: b})
			if c.Status != rdma.StatusSuccess {
				return 0, corrupt("region %q: restoring %d bytes at %d: %v", reg.Name, len(b), o, c.Status)
			}
		}
	}
	want := cr.h.Sum32()
	var tail [4]byte
	if err := read(tail[:]); err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(tail[:]) != want {
		return 0, corrupt("checksum mismatch")
	}
	if n, _ := cr.r.Read(tail[:1]); n != 0 {
		return 0, corrupt("bytes after the checksum")
	}
	return seq, nil
}

// takeSnapshot writes a snapshot of mem as of record seq to dir atomically:
// a temporary file, fsynced, renamed, and the directory fsynced. beforePublish
// runs after the file is complete and before the rename (the log waits for
// durability there).
func takeSnapshot(fs FS, dir string, mem *rdma.Memory, seq uint64, beforePublish func() error) (int64, error) {
	final := filepath.Join(dir, snapshotName(seq))
	tmp := final + tmpSuffix
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("durable: creating %s: %w", tmp, err)
	}
	n, err := writeSnapshot(f, mem, seq)
	if err == nil {
		err = beforePublish()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, final)
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return n, fmt.Errorf("durable: snapshot %s: %w", final, err)
	}
	return n, nil
}
