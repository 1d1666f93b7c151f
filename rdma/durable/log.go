package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/rdma"
)

// Bounds of the log. They are constants, not settings, where a wrong value
// would break recovery or memory use; the segment and snapshot sizes are
// options because they trade disk space against recovery time.
const (
	// MaxPendingBytes caps the records appended but not yet handed to the
	// file (one group commit). An appender that finds the buffer this full
	// waits for the flusher, so a burst of writes costs at most this much
	// memory, and one flush writes at most MaxPendingBytes+MaxRecordBytes
	// bytes — which also bounds how much of the log's tail a crash can tear
	// (maxTornBytes). 32 MiB: four full doorbell records, far more than one
	// fsync's worth of traffic on any disk, so it never throttles a healthy
	// node.
	MaxPendingBytes = 32 << 20
	// maxTornBytes is the most a crash can leave half-written at the end of
	// the log: one flush. A damaged record further from the end than that
	// cannot be a torn write and is reported as corruption.
	maxTornBytes = MaxPendingBytes + frameHeaderSize + MaxRecordBytes
	// DefaultSegmentBytes is the size at which the log moves to a new segment
	// file. 64 MiB keeps segments few (one open file, a handful of
	// directory entries) while a snapshot can drop whole old ones.
	DefaultSegmentBytes = 64 << 20
	// MinSegmentBytes is the smallest segment size accepted: one full record.
	MinSegmentBytes = frameHeaderSize + MaxRecordBytes
)

// segment and snapshot file names: the sequence number in fixed-width hex,
// so that names sort in sequence order.
const (
	segmentPrefix  = "wal-"
	segmentSuffix  = ".log"
	snapshotPrefix = "snap-"
	snapshotSuffix = ".snap"
	tmpSuffix      = ".tmp"
)

func segmentName(start uint64) string {
	return fmt.Sprintf("%s%016x%s", segmentPrefix, start, segmentSuffix)
}
func snapshotName(seq uint64) string {
	return fmt.Sprintf("%s%016x%s", snapshotPrefix, seq, snapshotSuffix)
}
func parseSeq(name, prefix, suffix string) (uint64, bool) {
	var v uint64
	if len(name) != len(prefix)+16+len(suffix) || name[:len(prefix)] != prefix || name[len(name)-len(suffix):] != suffix {
		return 0, false
	}
	if _, err := fmt.Sscanf(name[len(prefix):len(prefix)+16], "%016x", &v); err != nil {
		return 0, false
	}
	return v, true
}

// segmentMagic opens every segment, followed by the segment's first sequence
// number (u64): a file that does not start so is not a segment of this
// format.
var segmentMagic = [8]byte{'A', 'U', 'R', 'A', 'W', 'A', 'L', 1}

const segmentHeaderSize = 8 + 8

// ErrLogFailed is returned by every append and wait after the log could not
// write or fsync: the node can no longer promise durability, so it stops
// acknowledging anything (fail-stop; a restart recovers what was durable).
var ErrLogFailed = errors.New("durable: log failed")

// ErrClosed is returned by appends and waits after Close.
var ErrClosed = errors.New("durable: log closed")

// logStats are the log's counters, read by Store.Stats.
type logStats struct {
	bytes, records, fsyncs, fsyncNanos, maxGroup atomic.Uint64
}

// wal is the write-ahead log: segment files in one directory, appended by
// one flusher goroutine that writes everything appended since its last
// write and fsyncs it once (group commit).
type wal struct {
	fs           FS
	dir          string
	segmentBytes int64
	stats        *logStats
	// snapshotDue is signalled (without blocking) when the bytes written
	// since the last snapshot pass snapshotEvery.
	snapshotEvery int64
	snapshotDue   chan struct{}

	mu       sync.Mutex
	cond     *sync.Cond // the flusher waits for work, appenders for room
	buf      []byte     // records appended, not yet written
	spare    []byte     // the flusher's buffer, swapped with buf
	bufRecs  uint64
	next     uint64 // sequence number of the next record
	notify   chan struct{}
	err      error
	closing  bool
	rotating []chan rotation
	sinceSnp int64

	appended atomic.Uint64 // last sequence number appended (applied to memory)
	durable  atomic.Uint64 // last sequence number written and fsynced

	// flusher-owned
	seg      File
	segStart uint64
	segSize  int64
	done     chan struct{}
}

type rotation struct {
	last uint64
	err  error
}

// openWAL continues the log in seg (positioned at its end, segSize bytes
// long, starting at segStart); next is the next sequence number.
func openWAL(fs FS, dir string, seg File, segStart uint64, segSize int64, next uint64, segmentBytes, snapshotEvery int64, stats *logStats) *wal {
	l := &wal{fs: fs, dir: dir, segmentBytes: segmentBytes, stats: stats, snapshotEvery: snapshotEvery,
		snapshotDue: make(chan struct{}, 1), next: next, notify: make(chan struct{}),
		seg: seg, segStart: segStart, segSize: segSize, done: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	l.appended.Store(next - 1)
	l.durable.Store(next - 1)
	go l.flushLoop()
	return l
}

// stoppedLocked is why the log takes no more work: its first I/O error,
// ErrClosed once closing, else nil. l.mu must be held.
func (l *wal) stoppedLocked() error {
	if l.err != nil {
		return l.err
	}
	if l.closing {
		return ErrClosed
	}
	return nil
}

// reserve waits for room for n bytes and returns the record's sequence
// number, with l.mu held.
func (l *wal) reserve(n int) (uint64, error) {
	l.mu.Lock()
	for l.err == nil && !l.closing && len(l.buf) > 0 && len(l.buf)+n > MaxPendingBytes {
		l.cond.Wait()
	}
	if err := l.stoppedLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	seq := l.next
	l.next++
	return seq, nil
}

// committed finishes an append begun by reserve and releases l.mu.
func (l *wal) committed(seq uint64) {
	l.bufRecs++
	l.appended.Store(seq)
	l.mu.Unlock()
	l.cond.Broadcast()
}

// appendRegion appends a region registration.
func (l *wal) appendRegion(r rdma.Region) (uint64, error) {
	if r.Name == "" || len(r.Name) > rdma.MaxRegionNameLen || r.RKey == 0 || r.Length == 0 {
		return 0, fmt.Errorf("durable: cannot log region %+v", r)
	}
	seq, err := l.reserve(frameHeaderSize + payloadHeaderSize + 1 + len(r.Name) + 20)
	if err != nil {
		return 0, err
	}
	l.buf = appendRegion(l.buf, seq, r)
	l.committed(seq)
	return seq, nil
}

// appendWrites appends the post-images of one request.
func (l *wal) appendWrites(ws []Write) (uint64, error) {
	if err := checkWrites(ws); err != nil {
		return 0, err
	}
	seq, err := l.reserve(writesSize(ws))
	if err != nil {
		return 0, err
	}
	l.buf = appendWrites(l.buf, seq, ws)
	l.committed(seq)
	return seq, nil
}

// waitDurable waits until every record up to seq is on disk, the log fails,
// or cancel is closed (then it returns ErrClosed).
func (l *wal) waitDurable(seq uint64, cancel <-chan struct{}) error {
	for {
		if l.durable.Load() >= seq {
			return nil
		}
		l.mu.Lock()
		ch, err := l.notify, l.err
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if l.durable.Load() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-cancel:
			return ErrClosed
		}
	}
}

// rotate closes the current segment after flushing it and starts a new one;
// it returns the last sequence number of the closed segment: every record
// up to it is durable and applied, every later one is in the new segment.
func (l *wal) rotate() (uint64, error) {
	ch := make(chan rotation, 1)
	l.mu.Lock()
	if err := l.stoppedLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.rotating = append(l.rotating, ch)
	l.mu.Unlock()
	l.cond.Broadcast()
	r := <-ch
	return r.last, r.err
}

// fail makes err sticky and wakes everyone.
func (l *wal) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	close(l.notify)
	l.notify = make(chan struct{})
	rot := l.rotating
	l.rotating = nil
	ferr := l.err
	l.mu.Unlock()
	l.cond.Broadcast()
	for _, ch := range rot {
		ch <- rotation{err: ferr}
	}
}

func (l *wal) flushLoop() {
	defer close(l.done)
	for {
		l.mu.Lock()
		for len(l.buf) == 0 && !l.closing && len(l.rotating) == 0 && l.err == nil {
			l.cond.Wait()
		}
		if l.err != nil {
			l.mu.Unlock()
			return
		}
		b, recs, last := l.buf, l.bufRecs, l.next-1
		l.buf, l.spare, l.bufRecs = l.spare[:0], nil, 0
		rot, closing := l.rotating, l.closing
		l.rotating = nil
		l.mu.Unlock()
		l.cond.Broadcast() // room for appenders

		if len(b) > 0 {
			if err := l.writeAndSync(b, recs); err != nil {
				l.fail(err)
				return
			}
			l.publish(last, int64(len(b)))
		}
		l.mu.Lock()
		if cap(b) <= 2*MaxPendingBytes {
			l.spare = b[:0]
		}
		l.mu.Unlock()
		// A rotation onto an empty segment has nothing to close.
		if (len(rot) > 0 || l.segSize >= l.segmentBytes) && l.segStart != last+1 {
			if err := l.newSegment(last + 1); err != nil {
				l.fail(err)
				return
			}
		}
		for _, ch := range rot {
			ch <- rotation{last: last}
		}
		if closing {
			l.mu.Lock()
			empty := len(l.buf) == 0
			l.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

func (l *wal) writeAndSync(b []byte, recs uint64) error {
	if _, err := l.seg.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", segmentName(l.segStart), err)
	}
	t := time.Now()
	// Sync is fsync: on Linux Go's File.Sync is fsync(2), which also
	// persists the file size that the appended bytes changed.
	if err := l.seg.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", segmentName(l.segStart), err)
	}
	l.stats.fsyncNanos.Add(uint64(time.Since(t)))
	l.stats.fsyncs.Add(1)
	l.stats.records.Add(recs)
	l.stats.bytes.Add(uint64(len(b)))
	for {
		m := l.stats.maxGroup.Load()
		if recs <= m || l.stats.maxGroup.CompareAndSwap(m, recs) {
			break
		}
	}
	l.segSize += int64(len(b))
	return nil
}

// publish makes records up to last visible as durable and wakes waiters.
func (l *wal) publish(last uint64, n int64) {
	l.durable.Store(last)
	l.mu.Lock()
	close(l.notify)
	l.notify = make(chan struct{})
	l.sinceSnp += n
	due := l.snapshotEvery > 0 && l.sinceSnp >= l.snapshotEvery
	if due {
		l.sinceSnp = 0
	}
	l.mu.Unlock()
	if due {
		select {
		case l.snapshotDue <- struct{}{}:
		default:
		}
	}
}

// newSegment starts the segment whose first record is start; the current
// one is complete and fsynced.
func (l *wal) newSegment(start uint64) error {
	f, err := createSegment(l.fs, l.dir, start)
	if err != nil {
		return err
	}
	if err := l.seg.Close(); err != nil {
		f.Close()
		return fmt.Errorf("closing %s: %w", segmentName(l.segStart), err)
	}
	l.seg, l.segStart, l.segSize = f, start, segmentHeaderSize
	return nil
}

// createSegment creates a segment file with its header and makes it and
// its directory entry durable.
func createSegment(fs FS, dir string, start uint64) (File, error) {
	name := filepath.Join(dir, segmentName(start))
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	var h [segmentHeaderSize]byte
	copy(h[:], segmentMagic[:])
	binary.LittleEndian.PutUint64(h[8:], start)
	if _, err := f.Write(h[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("fsync %s: %w", dir, err)
	}
	return f, nil
}

// close flushes what is appended, stops the flusher and closes the segment.
func (l *wal) close() error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.cond.Broadcast()
	<-l.done
	l.mu.Lock()
	err := l.err
	l.err = ErrClosed
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
	l.cond.Broadcast()
	if cerr := l.seg.Close(); err == nil {
		err = cerr
	}
	return err
}
