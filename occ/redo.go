package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync/atomic"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// Redo log: how a restarted compute node frees the memory-node locks its
// previous incarnation left held (see "Crash recovery" in the package
// documentation).
//
// Region "txn/redo/<node>/<slots>x<bytes>" on the memory node:
//
//	[0:8)   state: redoRunning while an incarnation runs, 0 after a clean close
//	[8:16)  reserved
//	slot i at redoHeader + i·bytes (2·slots of them: one per coordinator,
//	and as many spares for coordinators that gave up a write-back):
//	  [0:8)   the attempt's CAS tag (store.CASTag)
//	  [8:12)  payload length n
//	  [12:16) CRC-32C of the tag, the length and the payload
//	  [16:16+n) entries, each:
//	    table id u32 | flags u32 (1 = present) | slot address u64 |
//	    new meta u64 | release word u64 | key u64 | value (ValueSize padded to 8, if present)
const (
	redoRegionPrefix = "txn/redo/"
	redoHeader       = 16
	redoRecordHeader = 16
	redoEntryHeader  = 40
	redoRunning      = 1
	// MaxRedoRecordBytes bounds one coordinator's record: the largest
	// write set a transaction may commit under a redo log.
	MaxRedoRecordBytes = rdma.MaxTransferBytes
)

var redoCRC = crc32.MakeTable(crc32.Castagnoli)

// ErrRedo reports a transaction that cannot commit under the redo log: its
// coordinator has no record slot, or its write set does not fit one.
var ErrRedo = errors.New("occ: redo log")

// RedoConfig configures a node's redo log.
type RedoConfig struct {
	// Node is the compute node's lock-tag number (Config.Node).
	Node uint32
	// Slots is the number of coordinators of the node; the region holds
	// twice as many records: a coordinator whose write-back gave up
	// (memory node unreachable past Config.CleanupTimeout) leaves its record
	// for the next incarnation's recovery and takes a spare.
	Slots int
	// RecordBytes caps one record (16 bytes of header, then 40 bytes per
	// written record plus its value). Default 256 KiB: a TPC-C delivery
	// writes about 130 records, some 20 KiB.
	RecordBytes int
}

// Validate reports every problem with the config at once.
func (c RedoConfig) Validate() error {
	var errs []error
	if c.Node >= 1<<22 {
		errs = append(errs, fmt.Errorf("occ: redo Node %d must be below 2^22", c.Node))
	}
	if c.Slots < 1 || c.Slots > 4096 {
		errs = append(errs, fmt.Errorf("occ: redo Slots %d, want 1..4096", c.Slots))
	}
	if c.RecordBytes < 1024 || c.RecordBytes > MaxRedoRecordBytes || c.RecordBytes%8 != 0 {
		errs = append(errs, fmt.Errorf("occ: redo RecordBytes %d, want a multiple of 8 in [1024, %d]", c.RecordBytes, MaxRedoRecordBytes))
	}
	return errors.Join(errs...)
}

// DefaultRedoRecordBytes is RedoConfig.RecordBytes's default.
const DefaultRedoRecordBytes = 256 << 10

// RedoLog is a node's redo region: each coordinator writes its committing
// transaction's record there before any of the write-back.
type RedoLog struct {
	cfg    RedoConfig
	region rdma.Region
	next   atomic.Int32
	// abandoned counts finishes given up: their locks may be held.
	abandoned atomic.Int32
}

// Recovery reports what OpenRedoLog did to the previous incarnation's
// locks.
type Recovery struct {
	// Scanned: a previous incarnation did not close cleanly, so every
	// table was scanned.
	Scanned bool
	// Slots is the number of table slots read.
	Slots uint64
	// Redone are locks of committed transactions whose write-back was
	// finished from the log; Released are locks of transactions that had
	// not committed, released untouched.
	Redone, Released int
}

func redoRegionName(cfg RedoConfig) string {
	return fmt.Sprintf("%s%d/%dx%d", redoRegionPrefix, cfg.Node, 2*cfg.Slots, cfg.RecordBytes)
}

// OpenRedoLog recovers the locks that an earlier incarnation of node
// cfg.Node left held (from any of its redo regions that is not marked
// closed), then registers this incarnation's region and marks it running.
// It must run before the node runs any transaction, and only once the
// previous incarnation is gone: every CAS tag of the node's number found on
// the memory node is taken for that incarnation's.
func OpenRedoLog(ctx context.Context, dev rdma.Device, layout *store.Layout, cfg RedoConfig) (*RedoLog, Recovery, error) {
	var rec Recovery
	if err := cfg.Validate(); err != nil {
		return nil, rec, err
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return nil, rec, err
	}
	defer qp.Close()
	regions, err := dev.Regions(ctx)
	if err != nil {
		return nil, rec, err
	}
	prefix := fmt.Sprintf("%s%d/", redoRegionPrefix, cfg.Node)
	var logs []rdma.Region
	for _, r := range regions {
		if !strings.HasPrefix(r.Name, prefix) || r.Length < redoHeader {
			continue
		}
		state := make([]byte, 8)
		if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: state}); err != nil {
			return nil, rec, err
		}
		if binary.LittleEndian.Uint64(state) != 0 {
			logs = append(logs, r)
		}
	}
	if len(logs) > 0 {
		if rec, err = recoverLocks(ctx, qp, layout, cfg.Node, logs); err != nil {
			return nil, rec, err
		}
		for _, r := range logs {
			if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, 8)}); err != nil {
				return nil, rec, err
			}
		}
	}
	size := uint64(redoHeader + 2*cfg.Slots*cfg.RecordBytes)
	r, err := dev.RegisterRegion(ctx, redoRegionName(cfg), size)
	if err != nil {
		return nil, rec, err
	}
	// Records left by an earlier incarnation must not outlive it: this one
	// numbers its transactions from 1 again, so an old record could carry
	// the tag of a new lock. Clearing its tag invalidates a record.
	wrs := []rdma.WorkRequest{}
	for i := range 2 * cfg.Slots {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + uint64(redoHeader+i*cfg.RecordBytes), Local: make([]byte, 8)})
	}
	wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: binary.LittleEndian.AppendUint64(nil, redoRunning)})
	for len(wrs) > 0 {
		n := min(len(wrs), rdma.MaxBatch)
		cs, err := rdma.Exec(ctx, qp, wrs[:n]...)
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			return nil, rec, err
		}
		wrs = wrs[n:]
	}
	return &RedoLog{cfg: cfg, region: r}, rec, nil
}

// Close marks the log closed, so the next incarnation skips the scan,
// unless a coordinator gave up a write-back (its locks may still be held:
// the log stays marked running). Call it only once no coordinator of the
// node runs a transaction.
func (l *RedoLog) Close(ctx context.Context, dev rdma.Device) error {
	if l.abandoned.Load() > 0 {
		return nil
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return err
	}
	defer qp.Close()
	return execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: l.region.RKey, RemoteAddr: l.region.Addr, Local: make([]byte, 8)})
}

// slot hands out record slots: the first Slots to coordinators as they are
// created, the spares to those that give up a write-back; -1 when none is
// left.
func (l *RedoLog) slot(spare bool) int {
	i := int(l.next.Add(1)) - 1
	if i < l.cfg.Slots || (spare && i < 2*l.cfg.Slots) {
		return i
	}
	return -1
}

func execOne(ctx context.Context, qp rdma.QueuePair, wr rdma.WorkRequest) error {
	cs, err := rdma.Exec(ctx, qp, wr)
	if err == nil {
		err = rdma.FirstError(cs)
	}
	return err
}

// redoEntry is one written record of a committing transaction.
type redoEntry struct {
	table   txn.TableID
	present bool
	addr    uint64
	meta    store.Meta
	release uint64
	key     uint64
	value   []byte // ValueSize padded to 8, when present
}

// encodeRedo builds a record; it fails if the record exceeds max bytes.
func encodeRedo(tag uint64, entries []redoEntry, max int) ([]byte, error) {
	n := redoRecordHeader
	for _, e := range entries {
		n += redoEntryHeader + len(e.value)
	}
	if n > max {
		return nil, fmt.Errorf("%w: a record of %d written records needs %d bytes, the slot holds %d", ErrRedo, len(entries), n, max)
	}
	b := make([]byte, redoRecordHeader, n)
	binary.LittleEndian.PutUint64(b, tag)
	binary.LittleEndian.PutUint32(b[8:], uint32(n-redoRecordHeader))
	for _, e := range entries {
		flags := uint32(0)
		if e.present {
			flags = 1
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(e.table))
		b = binary.LittleEndian.AppendUint32(b, flags)
		b = binary.LittleEndian.AppendUint64(b, e.addr)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.meta))
		b = binary.LittleEndian.AppendUint64(b, e.release)
		b = binary.LittleEndian.AppendUint64(b, e.key)
		b = append(b, e.value...)
	}
	binary.LittleEndian.PutUint32(b[12:], redoChecksum(b))
	return b, nil
}

func redoChecksum(b []byte) uint32 {
	c := crc32.Update(0, redoCRC, b[:12])
	return crc32.Update(c, redoCRC, b[redoRecordHeader:])
}

// decodeRedo parses a record read from a slot of max bytes. ok is false for
// an empty, torn or foreign slot (a record whose write did not complete:
// nothing after it in its doorbell ran, so its transaction wrote nothing).
func decodeRedo(b []byte, layout *store.Layout) (tag uint64, entries []redoEntry, ok bool) {
	if len(b) < redoRecordHeader {
		return 0, nil, false
	}
	tag = binary.LittleEndian.Uint64(b)
	n := int(binary.LittleEndian.Uint32(b[8:]))
	if tag == 0 || n > len(b)-redoRecordHeader {
		return 0, nil, false
	}
	b = b[:redoRecordHeader+n]
	if redoChecksum(b) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, nil, false
	}
	p := b[redoRecordHeader:]
	for len(p) > 0 {
		if len(p) < redoEntryHeader {
			return 0, nil, false
		}
		flags := binary.LittleEndian.Uint32(p[4:])
		if flags > 1 {
			return 0, nil, false
		}
		e := redoEntry{
			table:   txn.TableID(binary.LittleEndian.Uint32(p)),
			present: flags == 1,
			addr:    binary.LittleEndian.Uint64(p[8:]),
			meta:    store.Meta(binary.LittleEndian.Uint64(p[16:])),
			release: binary.LittleEndian.Uint64(p[24:]),
			key:     binary.LittleEndian.Uint64(p[32:]),
		}
		p = p[redoEntryHeader:]
		if e.present {
			tl, err := layout.Table(e.table)
			if err != nil {
				return 0, nil, false
			}
			vs := (tl.Table.ValueSize + 7) &^ 7
			if len(p) < vs {
				return 0, nil, false
			}
			e.value, p = p[:vs], p[vs:]
		}
		entries = append(entries, e)
	}
	return tag, entries, true
}

// redoKey names a record's entry: several records (of transactions that
// ended, and of the one holding the lock) can name one slot.
type redoKey struct {
	table txn.TableID
	addr  uint64
	tag   uint64
}

// recoverLocks scans every table for CAS tags of node and ends each held
// lock as its transaction ended: a lock of a logged (committed) transaction
// gets its record's value, meta and release word; any other is released
// untouched (its transaction never reached its write-back).
func recoverLocks(ctx context.Context, qp rdma.QueuePair, layout *store.Layout, node uint32, logs []rdma.Region) (Recovery, error) {
	rec := Recovery{Scanned: true}
	logged := map[redoKey]redoEntry{}
	for _, r := range logs {
		var slots, bytes int
		if _, err := fmt.Sscanf(r.Name[strings.LastIndexByte(r.Name, '/')+1:], "%dx%d", &slots, &bytes); err != nil || bytes <= 0 ||
			uint64(redoHeader+slots*bytes) != r.Length {
			return rec, fmt.Errorf("%w: region %q: name does not give its record layout", ErrRedo, r.Name)
		}
		for i := range slots {
			buf := make([]byte, bytes)
			if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + uint64(redoHeader+i*bytes), Local: buf}); err != nil {
				return rec, err
			}
			tag, entries, ok := decodeRedo(buf, layout)
			if !ok || !store.IsCASTag(tag) || store.TagNode(tag) != node {
				continue
			}
			for _, e := range entries {
				logged[redoKey{e.table, e.addr, tag}] = e
			}
		}
	}
	const chunkBytes = 256 << 10
	for _, t := range layout.Schema.Tables {
		tl, err := layout.Table(t.ID)
		if err != nil {
			return rec, err
		}
		perChunk := max(1, chunkBytes/tl.BucketSize)
		buf := make([]byte, perChunk*tl.BucketSize)
		for b := uint64(0); b < tl.Buckets; b += perChunk {
			n := min(perChunk, tl.Buckets-b)
			chunk := buf[:n*tl.BucketSize]
			if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b), Local: chunk}); err != nil {
				return rec, err
			}
			for off := uint64(0); off+tl.SlotSize <= uint64(len(chunk)); off += tl.SlotSize {
				rec.Slots++
				w := binary.LittleEndian.Uint64(chunk[off+store.LockOffset:])
				if !store.IsCASTag(w) || store.TagNode(w) != node {
					continue
				}
				addr := tl.BucketAddr(b) + off
				var wrs []rdma.WorkRequest
				release := uint64(0)
				if e, ok := logged[redoKey{t.ID, addr, w}]; ok {
					body := binary.LittleEndian.AppendUint64(nil, e.key)
					body = append(body, e.value...)
					wrs = append(wrs,
						rdma.WorkRequest{Op: rdma.OpWrite, RKey: tl.Region.RKey, RemoteAddr: addr + store.KeyOffset, Local: body},
						rdma.WorkRequest{Op: rdma.OpWrite, RKey: tl.Region.RKey, RemoteAddr: addr + store.MetaOffset, Local: binary.LittleEndian.AppendUint64(nil, uint64(e.meta))})
					release = e.release
					rec.Redone++
				} else {
					rec.Released++
				}
				wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: tl.Region.RKey, RemoteAddr: addr + store.LockOffset, Compare: w, Swap: release})
				cs, err := rdma.Exec(ctx, qp, wrs...)
				if err == nil {
					err = rdma.FirstError(cs)
				}
				if err != nil {
					return rec, err
				}
			}
		}
	}
	return rec, nil
}
