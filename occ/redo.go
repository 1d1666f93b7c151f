package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
//	[8:16)  tag ceiling: the node's transaction numbers (the seq of its CAS
//	        tags) below it may be in use; see RedoLog.nextSeq
//	record slot i at redoHeader + i·bytes, 2·slots+1 of them: one per
//	coordinator, as many spares for coordinators that gave up a
//	write-back, and the repair slot (see repairer):
//	  [0:8)   the attempt's CAS tag (store.CASTag)
//	  [8:12)  payload length n
//	  [12:16) CRC-32C of the tag, the length and the payload
//	  [16:16+n) entries, each:
//	    table id u32 | flags u32 | slot address u64 |
//	    new meta u64 | release word u64 | key u64 | value (ValueSize padded to 8, if present)
//	  flags: 1 = the record is present after the write; 2 = the commit
//	  ledger's word (Config.ExactlyOnce): address in the ledger region, the
//	  transaction id as key, no value — first, when there is one
const (
	redoRegionPrefix = "txn/redo/"
	redoHeader       = 16
	redoRecordHeader = 16
	redoEntryHeader  = 40
	redoRunning      = 1
	// tagBlock is how many transaction numbers an incarnation reserves at
	// a time (one WRITE of the ceiling per block).
	tagBlock = 1 << 20
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
	// 2·Slots+1 records: one per coordinator, a spare for each (a
	// coordinator whose commit gave up its write-back leaves its record for
	// the repair and takes a spare), and the repair slot.
	Slots int
	// RecordBytes caps one record (16 bytes of header, then 40 bytes per
	// written record plus its value, and 40 for the ledger word). Default
	// 256 KiB, far above the embedded workloads' largest write set (a
	// TPC-C delivery: about 130 records of at most a few hundred bytes).
	RecordBytes int
	// RepairAfter is how long a suspect lock word (RedoLog.Suspect) must
	// stay in place before Sweep ends it: longer than any transaction
	// attempt can hold a lock (its request timeout plus CleanupTimeout),
	// with a margin. Default 30 s (twice a compute node's 10 s request
	// timeout plus occ's 5 s CleanupTimeout).
	RepairAfter time.Duration
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
	if c.RepairAfter <= 0 {
		errs = append(errs, fmt.Errorf("occ: redo RepairAfter %v must be positive", c.RepairAfter))
	}
	return errors.Join(errs...)
}

// DefaultRedoRecordBytes is RedoConfig.RecordBytes's default.
const DefaultRedoRecordBytes = 256 << 10

// DefaultRepairAfter is RedoConfig.RepairAfter's default.
const DefaultRepairAfter = 30 * time.Second

// RedoLog is a node's redo region: each coordinator writes its committing
// transaction's record there before any of the write-back.
type RedoLog struct {
	cfg    RedoConfig
	region rdma.Region
	next   atomic.Int32
	// abandoned counts finishes and repairs given up: their locks may be
	// held. running counts transaction attempts in progress.
	abandoned atomic.Int32
	running   atomic.Int32
	dev       rdma.Device
	// repairMu serialises repairs: one repair slot; pending is a repair
	// to finish before the next (see pendingRepair).
	repairMu sync.Mutex
	pending  *pendingRepair

	// seq numbers this incarnation's transaction attempts and repairs
	// (the seq of their CAS tags); ceiling is the reserved limit, raised
	// under ceilMu before a number at or above it is used.
	seq     atomic.Uint64
	ceiling atomic.Uint64
	ceilMu  sync.Mutex

	suspectMu   sync.Mutex
	suspects    map[slotRef]suspect // at most maxSuspects
	repairStats RepairStats
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
	return fmt.Sprintf("%s%d/%dx%d", redoRegionPrefix, cfg.Node, cfg.records(), cfg.RecordBytes)
}

// records is the number of record slots of the region.
func (c RedoConfig) records() int { return 2*c.Slots + 1 }

// repairSlot is the index of the region's repair slot.
func (c RedoConfig) repairSlot() int { return 2 * c.Slots }

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
	base := uint64(0) // above every number an earlier incarnation may have used
	for _, r := range regions {
		if !strings.HasPrefix(r.Name, prefix) || r.Length < redoHeader {
			continue
		}
		hdr := make([]byte, redoHeader)
		if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: hdr}); err != nil {
			return nil, rec, err
		}
		base = max(base, binary.LittleEndian.Uint64(hdr[8:]))
		if binary.LittleEndian.Uint64(hdr) != 0 {
			logs = append(logs, r)
		}
	}
	size := uint64(redoHeader + cfg.records()*cfg.RecordBytes)
	r, err := dev.RegisterRegion(ctx, redoRegionName(cfg), size)
	if err != nil {
		return nil, rec, err
	}
	l := &RedoLog{cfg: cfg, region: r, dev: dev}
	// Numbers unique across incarnations: an earlier one's tag may still
	// be watched by another node's sweep, which must not mistake a new
	// lock for it.
	l.seq.Store(base)
	l.ceiling.Store(base)
	if err := l.reserve(ctx, qp, base+1); err != nil {
		return nil, rec, err
	}
	// Running before the recovery: its repairs' records (in this region's
	// repair slot) must be read by the next start if this one dies.
	running := rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: binary.LittleEndian.AppendUint64(nil, redoRunning)}
	if err := execOne(ctx, qp, running); err != nil {
		return nil, rec, err
	}
	if len(logs) > 0 {
		if rec, err = recoverLocks(ctx, qp, layout, l.repairer(qp, layout), logs); err != nil {
			return nil, rec, err
		}
		var done []rdma.WorkRequest
		for _, old := range logs {
			if old.Name != r.Name {
				done = append(done, rdma.WorkRequest{Op: rdma.OpWrite, RKey: old.RKey, RemoteAddr: old.Addr, Local: make([]byte, 8)})
			}
		}
		if err := execAll(ctx, qp, done); err != nil {
			return nil, rec, err
		}
	}
	// The earlier incarnations' records are done with (recovered above, or
	// of a clean close): clearing a record's tag invalidates it, so that a
	// later recovery or repair reads only this incarnation's.
	var wrs []rdma.WorkRequest
	for i := range cfg.records() {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + uint64(redoHeader+i*cfg.RecordBytes), Local: make([]byte, 8)})
	}
	if err := execAll(ctx, qp, wrs); err != nil {
		return nil, rec, err
	}
	return l, rec, nil
}

// Close marks the log closed, so that the next incarnation skips the scan
// and no repair reads its records — unless a transaction is still running
// (a coordinator its node could not stop), or one gave up its write-back
// or a repair gave up (their locks may still be held): then the log stays
// marked running. Call it once the node has stopped its coordinators.
func (l *RedoLog) Close(ctx context.Context, dev rdma.Device) error {
	if l.abandoned.Load() > 0 || l.running.Load() > 0 {
		return nil
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return err
	}
	defer qp.Close()
	return execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: l.region.RKey, RemoteAddr: l.region.Addr, Local: make([]byte, 8)})
}

// nextSeq returns the next number for a CAS tag of this node (a
// transaction attempt's or a repair's), reserving a block first when it
// reaches the ceiling.
func (l *RedoLog) nextSeq(ctx context.Context) (uint64, error) {
	seq := l.seq.Add(1)
	if seq < l.ceiling.Load() {
		return seq, nil
	}
	qp, err := l.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return 0, err
	}
	defer qp.Close()
	return seq, l.reserve(ctx, qp, seq)
}

// reserve raises the ceiling above seq (by tagBlock) on the memory node
// before seq is used.
func (l *RedoLog) reserve(ctx context.Context, qp rdma.QueuePair, seq uint64) error {
	l.ceilMu.Lock()
	defer l.ceilMu.Unlock()
	if seq < l.ceiling.Load() {
		return nil
	}
	c := seq + tagBlock
	if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: l.region.RKey, RemoteAddr: l.region.Addr + 8,
		Local: binary.LittleEndian.AppendUint64(nil, c)}); err != nil {
		return err
	}
	l.ceiling.Store(c)
	return nil
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

// execAll runs verbs in doorbells of at most rdma.MaxBatch, in order, and
// returns the first error.
func execAll(ctx context.Context, qp rdma.QueuePair, wrs []rdma.WorkRequest) error {
	for len(wrs) > 0 {
		n := min(rdma.MaxBatch, len(wrs))
		cs, err := rdma.Exec(ctx, qp, wrs[:n]...)
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			return err
		}
		wrs = wrs[n:]
	}
	return nil
}

func execOne(ctx context.Context, qp rdma.QueuePair, wr rdma.WorkRequest) error {
	cs, err := rdma.Exec(ctx, qp, wr)
	if err == nil {
		err = rdma.FirstError(cs)
	}
	return err
}

// Entry flags.
const (
	redoPresent = 1
	redoLedger  = 2
)

// redoEntry is one written record of a committing transaction, or its
// commit ledger word (ledger: addr in the ledger region, key the
// transaction id).
type redoEntry struct {
	table   txn.TableID
	present bool
	ledger  bool
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
		return nil, redoTooLarge(len(entries), n, max)
	}
	b := beginRedo(tag, n)
	for _, e := range entries {
		if e.ledger {
			b = appendLedgerEntry(b, e.addr, e.key)
			continue
		}
		b = appendRedoEntry(b, e.table, e.present, e.addr, e.meta, e.release, e.key, e.value, len(e.value))
	}
	return finishRedo(b), nil
}

func redoTooLarge(records, n, max int) error {
	return fmt.Errorf("%w: a record of %d written records needs %d bytes, the slot holds %d", ErrRedo, records, n, max)
}

// beginRedo starts a record of n bytes in all (header included).
func beginRedo(tag uint64, n int) []byte {
	b := make([]byte, redoRecordHeader, n)
	binary.LittleEndian.PutUint64(b, tag)
	return b
}

// appendRedoEntry appends one entry; a present record's value is written
// padded to paddedSize bytes.
func appendRedoEntry(b []byte, table txn.TableID, present bool, addr uint64, meta store.Meta, release, key uint64, value []byte, paddedSize int) []byte {
	flags := uint32(0)
	if present {
		flags = 1
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(table))
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint64(b, addr)
	b = binary.LittleEndian.AppendUint64(b, uint64(meta))
	b = binary.LittleEndian.AppendUint64(b, release)
	b = binary.LittleEndian.AppendUint64(b, key)
	if present {
		b = append(b, value...)
		for range paddedSize - len(value) {
			b = append(b, 0)
		}
	}
	return b
}

// appendLedgerEntry appends the commit ledger's entry: the transaction id
// goes to ledger word addr before any lock is released.
func appendLedgerEntry(b []byte, addr, txnID uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, redoLedger)
	b = binary.LittleEndian.AppendUint64(b, addr)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, 0)
	return binary.LittleEndian.AppendUint64(b, txnID)
}

// finishRedo stores the payload length and the checksum.
func finishRedo(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-redoRecordHeader))
	binary.LittleEndian.PutUint32(b[12:], redoChecksum(b))
	return b
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
		if flags > redoLedger {
			return 0, nil, false
		}
		e := redoEntry{
			table:   txn.TableID(binary.LittleEndian.Uint32(p)),
			present: flags == redoPresent,
			ledger:  flags == redoLedger,
			addr:    binary.LittleEndian.Uint64(p[8:]),
			meta:    store.Meta(binary.LittleEndian.Uint64(p[16:])),
			release: binary.LittleEndian.Uint64(p[24:]),
			key:     binary.LittleEndian.Uint64(p[32:]),
		}
		p = p[redoEntryHeader:]
		if e.ledger && (e.table != 0 || e.meta != 0 || e.release != 0) {
			return 0, nil, false
		}
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

// recoverLocks ends the locks an earlier incarnation of the repairer's
// node left held. It reads that incarnation's records, then:
//
//   - scans every table for CAS tags of the node: a word whose (slot, tag)
//     a record names is ended with the record (its transaction committed:
//     a record is written only after validation); any other is released
//     untouched (its transaction never began its write-back);
//   - for every record entry whose slot is still locked by a held owner
//     sentinel at the version just before the entry's: the entry's
//     transaction committed and did not write that slot yet, and it is the
//     slot's holder (no one else can have locked the slot at that version
//     since), so the slot is ended with the entry.
//
// With no logs (a test's recovery without records) every tag is released.
func recoverLocks(ctx context.Context, qp rdma.QueuePair, layout *store.Layout, rp *repairer, logs []rdma.Region) (Recovery, error) {
	rec := Recovery{Scanned: true}
	logged := map[redoKey]redoEntry{}
	ledgerOf := map[uint64]*redoEntry{} // by tag
	var repairs []record
	for _, r := range logs {
		recs, err := readRecords(ctx, qp, layout, r)
		if err != nil {
			return rec, err
		}
		for _, rr := range recs {
			if !store.IsCASTag(rr.tag) || store.TagNode(rr.tag) != rp.node {
				continue
			}
			if rr.repair {
				repairs = append(repairs, rr)
			}
			for _, e := range rr.entries {
				if e.ledger {
					ledgerOf[rr.tag] = &e
					continue
				}
				logged[redoKey{e.table, e.addr, rr.tag}] = e
			}
		}
	}
	// A repair the earlier incarnation left half done first: this one's
	// repairs will overwrite the repair slot that holds its entry.
	for _, rr := range repairs {
		for i := range rr.entries {
			e := &rr.entries[i]
			if e.ledger {
				continue
			}
			tl, err := layout.Table(e.table)
			if err != nil {
				return rec, err
			}
			if _, w, err := readHeader(ctx, qp, tl, e.addr); err != nil {
				return rec, err
			} else if w == rr.tag {
				ended, err := rp.end(ctx, tl, e.addr, w, e, ledgerEntry(rr.entries))
				if err != nil {
					return rec, err
				}
				if ended {
					rec.Redone++
				}
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
				if !store.IsCASTag(w) || store.TagNode(w) != rp.node {
					continue
				}
				addr := tl.BucketAddr(b) + off
				var e *redoEntry
				if le, ok := logged[redoKey{t.ID, addr, w}]; ok {
					e = &le
				}
				ended, err := rp.end(ctx, tl, addr, w, e, ledgerOf[w])
				if err != nil {
					return rec, err
				}
				switch {
				case ended && e != nil:
					rec.Redone++
				case ended:
					rec.Released++
				}
			}
		}
	}
	for k, e := range logged {
		tl, err := layout.Table(k.table)
		if err != nil {
			return rec, err
		}
		meta, w, err := readHeader(ctx, qp, tl, k.addr)
		if err != nil {
			return rec, err
		}
		if !store.IsOwnerSentinel(w) || !store.SentinelHeld(w) || meta.Version()+1 != e.meta.Version() {
			continue
		}
		if ended, err := rp.end(ctx, tl, k.addr, w, &e, ledgerOf[k.tag]); err != nil {
			return rec, err
		} else if ended {
			rec.Redone++
		}
	}
	return rec, nil
}

// readHeader reads a slot's meta and lock word.
func readHeader(ctx context.Context, qp rdma.QueuePair, tl *store.TableLayout, addr uint64) (store.Meta, uint64, error) {
	b := make([]byte, 16)
	if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: addr + store.MetaOffset, Local: b}); err != nil {
		return 0, 0, err
	}
	return store.Meta(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:]), nil
}

type record struct {
	tag     uint64
	entries []redoEntry
	repair  bool // from a repair slot
}

// readRecords reads the valid records of a redo region (its name gives
// its record layout): every slot's header first, then the payloads.
func readRecords(ctx context.Context, qp rdma.QueuePair, layout *store.Layout, r rdma.Region) ([]record, error) {
	var slots, bytes int
	if _, err := fmt.Sscanf(r.Name[strings.LastIndexByte(r.Name, '/')+1:], "%dx%d", &slots, &bytes); err != nil ||
		slots <= 0 || bytes < redoRecordHeader || uint64(redoHeader+slots*bytes) != r.Length {
		return nil, fmt.Errorf("%w: region %q: name does not give its record layout", ErrRedo, r.Name)
	}
	var out []record
	for first := 0; first < slots; first += rdma.MaxBatch {
		n := min(rdma.MaxBatch, slots-first)
		wrs := make([]rdma.WorkRequest, n)
		for i := range n {
			wrs[i] = rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + uint64(redoHeader+(first+i)*bytes), Local: make([]byte, redoRecordHeader)}
		}
		cs, err := rdma.Exec(ctx, qp, wrs...)
		if err == nil {
			err = rdma.FirstError(cs)
		}
		if err != nil {
			return nil, err
		}
		for i, wr := range wrs {
			tag, n := binary.LittleEndian.Uint64(wr.Local), int(binary.LittleEndian.Uint32(wr.Local[8:]))
			if tag == 0 || n > bytes-redoRecordHeader {
				continue
			}
			buf := make([]byte, redoRecordHeader+n)
			if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + uint64(redoHeader+(first+i)*bytes), Local: buf}); err != nil {
				return nil, err
			}
			if tag, entries, ok := decodeRedo(buf, layout); ok {
				out = append(out, record{tag: tag, entries: entries, repair: first+i == slots-1})
			}
		}
	}
	return out, nil
}

// repairer ends locks whose holder is gone, one at a time, through its
// node's repair slot. Ending a lock with a record entry takes it first:
// the entry is written to the repair slot under a repair tag of the node
// (numbered like its transactions, RedoLog.nextSeq) and the word is
// CASed from the dead holder's to that tag, in one doorbell; only then
// are the key, value, meta and release word written. So two repairers
// (or a repairer and a recovery) never both write a slot: the CAS admits
// one, and a write that lands after a release cannot happen. If the
// repairer dies in between, the word holds its node's repair tag and the
// repair slot the entry: its next incarnation's recovery finishes it like
// any other tag of its number. A lock with no entry is released by one CAS
// from the dead holder's word.
type repairer struct {
	log    *RedoLog // numbers its repair tags
	qp     rdma.QueuePair
	node   uint32
	ledger rdma.Region // the commit ledger's
	region rdma.Region
	slot   uint64 // the repair slot's address
	bytes  int
}

func (l *RedoLog) repairer(qp rdma.QueuePair, layout *store.Layout) *repairer {
	return &repairer{log: l, qp: qp, node: l.cfg.Node, ledger: layout.Ledger, region: l.region,
		slot: l.region.Addr + uint64(redoHeader+l.cfg.repairSlot()*l.cfg.RecordBytes), bytes: l.cfg.RecordBytes}
}

// end ends the lock of slot addr, whose word is w, with entry e (nil:
// released untouched, to 0 for a CAS tag, to the free sentinel for a held
// one). ended is false when the word was no longer w.
func (rp *repairer) end(ctx context.Context, tl *store.TableLayout, addr, w uint64, e, led *redoEntry) (ended bool, err error) {
	if e == nil {
		free := uint64(0)
		if store.IsOwnerSentinel(w) {
			free = store.FreeSentinel(w)
		}
		cs, err := rdma.Exec(ctx, rp.qp, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: tl.Region.RKey, RemoteAddr: addr + store.LockOffset, Compare: w, Swap: free})
		if err == nil {
			err = rdma.FirstError(cs)
		}
		return err == nil && cs[0].Value == w, err
	}
	seq, err := rp.log.nextSeq(ctx)
	if err != nil {
		return false, err
	}
	tag := store.CASTag(rp.node, seq)
	entries := []redoEntry{*e}
	if led != nil {
		entries = []redoEntry{*led, *e}
	}
	rec, err := encodeRedo(tag, entries, rp.bytes)
	if err != nil {
		return false, err
	}
	cs, err := rdma.Exec(ctx, rp.qp,
		rdma.WorkRequest{Op: rdma.OpWrite, RKey: rp.region.RKey, RemoteAddr: rp.slot, Local: rec},
		rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: tl.Region.RKey, RemoteAddr: addr + store.LockOffset, Compare: w, Swap: tag})
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err != nil {
		// The CAS may have applied: the word may be ours now, with the
		// entry only in the repair slot.
		rp.log.pending = &pendingRepair{tl: tl, addr: addr, tag: tag, e: *e, led: led}
		rp.log.abandoned.Add(1)
		return false, err
	}
	if cs[1].Value != w {
		return false, nil
	}
	p := &pendingRepair{tl: tl, addr: addr, tag: tag, e: *e, led: led}
	if err := rp.finish(ctx, p); err != nil {
		rp.log.pending = p
		rp.log.abandoned.Add(1)
		return false, err
	}
	return true, nil
}

// pendingRepair is a repair whose word was (or may have been) taken with
// the repairer's tag and whose writes did not complete. The repair slot
// holds the only copy of its entry, so it is finished before any other
// repair may overwrite that slot.
type pendingRepair struct {
	tl        *store.TableLayout
	addr, tag uint64
	e         redoEntry
	led       *redoEntry
}

// finish writes a taken repair: the commit ledger's word first (so that a
// retry of the transaction finds it committed), then the key and value,
// then the header (new meta and release word) in one WRITE — the order a
// write-back uses.
func (rp *repairer) finish(ctx context.Context, p *pendingRepair) error {
	var wrs []rdma.WorkRequest
	if p.led != nil {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, RKey: rp.ledger.RKey, RemoteAddr: p.led.addr,
			Local: binary.LittleEndian.AppendUint64(nil, p.led.key)})
	}
	body := binary.LittleEndian.AppendUint64(nil, p.e.key)
	body = append(body, p.e.value...)
	hdr := binary.LittleEndian.AppendUint64(nil, uint64(p.e.meta))
	hdr = binary.LittleEndian.AppendUint64(hdr, p.e.release)
	wrs = append(wrs,
		rdma.WorkRequest{Op: rdma.OpWrite, RKey: p.tl.Region.RKey, RemoteAddr: p.addr + store.KeyOffset, Local: body},
		rdma.WorkRequest{Op: rdma.OpWrite, RKey: p.tl.Region.RKey, RemoteAddr: p.addr + store.MetaOffset, Local: hdr})
	cs, err := rdma.Exec(ctx, rp.qp, wrs...)
	if err == nil {
		err = rdma.FirstError(cs)
	}
	return err
}

// resume finishes a pending repair, if the word still holds its tag (the
// CAS that failed may not have applied). Called with repairMu held before
// any other repair.
func (rp *repairer) resume(ctx context.Context) error {
	p := rp.log.pending
	if p == nil {
		return nil
	}
	_, w, err := readHeader(ctx, rp.qp, p.tl, p.addr)
	if err != nil {
		return err
	}
	if w == p.tag {
		if err := rp.finish(ctx, p); err != nil {
			return err
		}
	}
	rp.log.pending = nil
	return nil
}
