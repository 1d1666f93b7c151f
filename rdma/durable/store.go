package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aura-runtime/aura/rdma"
)

// DefaultSnapshotEveryBytes is how many log bytes trigger a snapshot by
// default. Recovery replays at most about this much log (plus a segment),
// which takes well under a second at disk speed, and the log's disk use
// stays near this size; a smaller value snapshots large memories too often.
const DefaultSnapshotEveryBytes = 256 << 20

// Options configure Open.
type Options struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// Capacity is the memory node's capacity (rdma.NewMemory); a snapshot
	// or log that registered more does not open.
	Capacity uint64
	// SegmentBytes is the log segment size (default DefaultSegmentBytes; at
	// least MinSegmentBytes).
	SegmentBytes int64
	// SnapshotEveryBytes is how many log bytes trigger a snapshot (default
	// DefaultSnapshotEveryBytes; negative: never, except by Store.Snapshot).
	SnapshotEveryBytes int64
	// FS is the file system (default OSFS{}); tests inject failures here.
	FS FS
	// Logger receives recovery and snapshot events (default slog.Default()).
	Logger *slog.Logger
}

// Stats are a store's counters.
type Stats struct {
	// LogBytes, LogRecords: bytes and records written to the log (framing
	// included) since Open.
	LogBytes, LogRecords uint64
	// Fsyncs is the number of log fsyncs; LogRecords/Fsyncs is the mean
	// group-commit batch. FsyncSeconds is the time spent in them.
	Fsyncs       uint64
	FsyncSeconds float64
	// MaxGroupRecords is the largest group commit, in records.
	MaxGroupRecords uint64
	// Appended and Durable are the last sequence numbers appended and
	// fsynced.
	Appended, Durable uint64
	// Snapshots counts snapshots taken since Open; SnapshotSeconds and
	// SnapshotBytes describe the last one; SnapshotErrors counts failed ones.
	Snapshots, SnapshotErrors uint64
	SnapshotSeconds           float64
	SnapshotBytes             uint64
	// RecoverySeconds is how long Open took to rebuild memory; Recovered
	// counts the log records it replayed and TornBytes the half-written
	// tail it cut off.
	RecoverySeconds float64
	Recovered       uint64
	TornBytes       int64
}

// Store is a durable memory node's state: the memory, rebuilt by Open from
// the newest snapshot and the log after it, and the log that keeps it
// durable. It implements the journal the rdma/tcp server writes through.
type Store struct {
	opts Options
	fs   FS
	log  *slog.Logger
	mem  *rdma.Memory
	lock *os.File
	wal  *wal

	lstats                    logStats
	snapshots, snapshotErrors atomic.Uint64
	snapNanos, snapBytes      atomic.Uint64
	recovery                  time.Duration
	recovered                 uint64
	torn                      int64

	snapMu sync.Mutex // one snapshot at a time
	// barrier, when set, returns once every mutation of memory that has
	// started is appended (SetMutationBarrier).
	barrier   atomic.Pointer[func()]
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open locks dir, rebuilds the memory from the newest intact snapshot and
// the log after it (cutting off a torn tail), and starts logging. Damage it
// cannot repair is a *CorruptError (errors.Is ErrCorrupt); another node
// holding dir is ErrLocked.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("durable: no data directory")
	}
	if opts.Capacity == 0 {
		return nil, errors.New("durable: zero capacity")
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.SegmentBytes < MinSegmentBytes {
		return nil, fmt.Errorf("durable: segment size %d below the minimum %d (one full record)", opts.SegmentBytes, MinSegmentBytes)
	}
	if opts.SnapshotEveryBytes == 0 {
		opts.SnapshotEveryBytes = DefaultSnapshotEveryBytes
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	_, statErr := os.Stat(opts.Dir)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new directory's entry must reach the disk too, or a power
		// loss right after the first acknowledged writes can lose them all.
		if err := opts.FS.SyncDir(filepath.Dir(filepath.Clean(opts.Dir))); err != nil {
			return nil, fmt.Errorf("durable: %w", err)
		}
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, fs: opts.FS, log: opts.Logger, lock: lock, stop: make(chan struct{}), done: make(chan struct{})}
	t0 := time.Now()
	if err := s.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	s.recovery = time.Since(t0)
	s.log.Info("durable memory recovered", "dir", opts.Dir, "records_replayed", s.recovered, "torn_bytes", s.torn,
		"last_seq", s.wal.appended.Load(), "regions", len(s.mem.Regions()), "took", s.recovery)
	go s.snapshotLoop()
	return s, nil
}

// Memory returns the memory the store keeps durable.
func (s *Store) Memory() *rdma.Memory { return s.mem }

// AppendRegion logs a region registration and returns its sequence number.
func (s *Store) AppendRegion(r rdma.Region) (uint64, error) { return s.wal.appendRegion(r) }

// AppendWrites logs the post-images of one request and returns the
// record's sequence number. The data is copied before it returns.
func (s *Store) AppendWrites(ws []Write) (uint64, error) { return s.wal.appendWrites(ws) }

// Appended returns the last sequence number appended.
func (s *Store) Appended() uint64 { return s.wal.appended.Load() }

// Durable returns the last sequence number on disk.
func (s *Store) Durable() uint64 { return s.wal.durable.Load() }

// WaitDurable waits until every record up to seq is on disk. It returns an
// ErrLogFailed error if the log failed, ErrClosed if cancel was closed or
// the store closed first.
func (s *Store) WaitDurable(seq uint64, cancel <-chan struct{}) error {
	return s.wal.waitDurable(seq, cancel)
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	ls := &s.lstats
	return Stats{
		LogBytes: ls.bytes.Load(), LogRecords: ls.records.Load(), Fsyncs: ls.fsyncs.Load(),
		FsyncSeconds: float64(ls.fsyncNanos.Load()) / 1e9, MaxGroupRecords: ls.maxGroup.Load(),
		Appended: s.wal.appended.Load(), Durable: s.wal.durable.Load(),
		Snapshots: s.snapshots.Load(), SnapshotErrors: s.snapshotErrors.Load(),
		SnapshotSeconds: float64(s.snapNanos.Load()) / 1e9, SnapshotBytes: s.snapBytes.Load(),
		RecoverySeconds: s.recovery.Seconds(), Recovered: s.recovered, TornBytes: s.torn,
	}
}

// Close flushes and fsyncs what is appended, stops the snapshotter and
// releases the directory. It does not take a snapshot: the log is complete.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.closeErr = s.wal.close()
		if err := s.lock.Close(); s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

func (s *Store) snapshotLoop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wal.snapshotDue:
			if err := s.Snapshot(); err != nil && !errors.Is(err, ErrClosed) {
				// A failed snapshot costs only disk space and replay time:
				// the log still holds everything. Try again at the next
				// trigger.
				s.log.Error("durable: snapshot failed", "err", err)
			}
		}
	}
}

// SetMutationBarrier gives the store the caller's ordering of mutations:
// barrier must return only once every mutation of the memory that has
// begun is appended to the log. A caller that changes memory before
// appending its record (a memory node executes a request, then logs its
// post-images) must set it: a snapshot's copy may include such a
// mutation, and must not be published before its record is durable.
func (s *Store) SetMutationBarrier(barrier func()) { s.barrier.Store(&barrier) }

// Snapshot takes a snapshot now and drops the log segments and snapshots it
// makes unnecessary. Verbs keep running meanwhile.
func (s *Store) Snapshot() error {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	t0 := time.Now()
	seq, err := s.wal.rotate()
	if err != nil {
		return err
	}
	n, err := takeSnapshot(s.fs, s.opts.Dir, s.mem, seq, func() error {
		// The copy may hold writes of every mutation begun before it
		// ended: once those are appended (the barrier), make the log up to
		// there durable before the snapshot can be used.
		if b := s.barrier.Load(); b != nil {
			(*b)()
		}
		return s.wal.waitDurable(s.wal.appended.Load(), s.stop)
	})
	if err != nil {
		s.snapshotErrors.Add(1)
		return err
	}
	s.snapshots.Add(1)
	s.snapNanos.Store(uint64(time.Since(t0)))
	s.snapBytes.Store(uint64(n))
	s.log.Info("durable: snapshot taken", "seq", seq, "bytes", n, "took", time.Since(t0))
	return s.dropBefore(seq)
}

// dropBefore removes snapshots older than seq and segments whose records
// are all at or below seq.
func (s *Store) dropBefore(seq uint64) error {
	names, err := s.fs.ReadDir(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	var errs []error
	removed := false
	for _, n := range names {
		start, isSeg := parseSeq(n, segmentPrefix, segmentSuffix)
		snap, isSnap := parseSeq(n, snapshotPrefix, snapshotSuffix)
		if isSeg && start <= seq || isSnap && snap < seq {
			if err := s.fs.Remove(filepath.Join(s.opts.Dir, n)); err != nil {
				errs = append(errs, err)
			}
			removed = true
		}
	}
	if removed {
		if err := s.fs.SyncDir(s.opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recover rebuilds s.mem and opens the log.
func (s *Store) recover() error {
	dir := s.opts.Dir
	names, err := s.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	var snaps, segs []uint64
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			// An unfinished snapshot: never published, never needed.
			if err := s.fs.Remove(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("durable: removing %s: %w", n, err)
			}
			continue
		}
		if v, ok := parseSeq(n, snapshotPrefix, snapshotSuffix); ok {
			snaps = append(snaps, v)
		} else if v, ok := parseSeq(n, segmentPrefix, segmentSuffix); ok {
			segs = append(segs, v)
		}
	}
	slices.Sort(segs)
	slices.Sort(snaps)
	slices.Reverse(snaps)

	// The newest intact snapshot. An older one is a fallback only if the
	// log from it is complete, which the replay checks.
	var base uint64
	var snapErrs []error
	loaded := false
	for _, seq := range snaps {
		mem := rdma.NewMemory(s.opts.Capacity)
		got, err := s.loadSnapshotFile(seq, mem)
		if err == nil && got != seq {
			err = &CorruptError{File: snapshotName(seq), Reason: fmt.Sprintf("holds sequence number %d", got)}
		}
		if err == nil {
			s.mem, base, loaded = mem, seq, true
			break
		}
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
		s.log.Error("durable: damaged snapshot; trying an older one", "err", err)
		snapErrs = append(snapErrs, err)
	}
	if !loaded {
		if len(snaps) > 0 {
			return errors.Join(snapErrs...)
		}
		s.mem = rdma.NewMemory(s.opts.Capacity)
	}

	// Segments wholly covered by the snapshot are skipped (a crash during
	// the clean-up after a snapshot can leave them behind).
	first := 0
	for first+1 < len(segs) && segs[first+1] <= base+1 {
		first++
	}
	segs = segs[first:]
	if len(segs) > 0 && segs[0] > base+1 {
		return &CorruptError{File: segmentName(segs[0]), Reason: fmt.Sprintf("log starts at record %d but the snapshot ends at %d: records are missing", segs[0], base)}
	}
	next := base + 1
	if len(segs) > 0 {
		next = segs[0]
	}
	var lastFile File
	var lastSize int64
	lastStart := next
	for i, start := range segs {
		last := i == len(segs)-1
		name := segmentName(start)
		if start != next {
			return &CorruptError{File: name, Reason: fmt.Sprintf("segment starts at record %d, want %d", start, next)}
		}
		f, err := s.fs.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("durable: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("durable: %w", err)
		}
		sc, err := scanSegment(f, st.Size(), name, last, func(rec *Record) error {
			if rec.Seq != next {
				return &CorruptError{Reason: fmt.Sprintf("record %d where %d was due", rec.Seq, next)}
			}
			next++
			if rec.Seq <= base {
				return nil
			}
			s.recovered++
			return applyRecord(s.mem, rec)
		})
		if err == nil && sc.validEnd >= segmentHeaderSize && sc.start != start {
			err = &CorruptError{File: name, Reason: fmt.Sprintf("header says record %d", sc.start)}
		}
		if err != nil {
			f.Close()
			return err
		}
		if !last {
			f.Close()
			continue
		}
		if sc.torn > 0 {
			s.torn = sc.torn
			s.log.Warn("durable: cutting off a torn write at the end of the log", "segment", name, "at", sc.validEnd, "bytes", sc.torn)
			if sc.validEnd < segmentHeaderSize {
				// Rewrite the whole segment: it never got its header.
				f.Close()
				if f, err = createSegment(s.fs, dir, start); err != nil {
					return fmt.Errorf("durable: %w", err)
				}
				sc.validEnd = segmentHeaderSize
			} else if err := f.Truncate(sc.validEnd); err != nil {
				f.Close()
				return fmt.Errorf("durable: truncating %s: %w", name, err)
			} else if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("durable: fsync %s: %w", name, err)
			}
		}
		if _, err := f.Seek(sc.validEnd, io.SeekStart); err != nil {
			f.Close()
			return fmt.Errorf("durable: %w", err)
		}
		lastFile, lastSize, lastStart = f, sc.validEnd, start
	}
	if next <= base {
		return &CorruptError{File: dir, Reason: fmt.Sprintf("log ends at record %d, before the snapshot's %d", next-1, base)}
	}
	if lastFile == nil {
		if lastFile, err = createSegment(s.fs, dir, next); err != nil {
			return fmt.Errorf("durable: %w", err)
		}
		lastSize, lastStart = segmentHeaderSize, next
	}
	s.wal = openWAL(s.fs, dir, lastFile, lastStart, lastSize, next, s.opts.SegmentBytes, s.opts.SnapshotEveryBytes, &s.lstats)
	if loaded {
		if err := s.dropBefore(base); err != nil {
			s.log.Warn("durable: removing files older than the snapshot", "err", err)
		}
	}
	return nil
}

func (s *Store) loadSnapshotFile(seq uint64, mem *rdma.Memory) (uint64, error) {
	name := snapshotName(seq)
	f, err := s.fs.OpenFile(filepath.Join(s.opts.Dir, name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("durable: %w", err)
	}
	defer f.Close()
	return loadSnapshot(f, name, mem)
}

// applyRecord replays one record onto mem. A record that does not apply —
// a region that clashes, a write outside every region — means the log does
// not describe this memory: corruption.
func applyRecord(mem *rdma.Memory, rec *Record) error {
	switch rec.Kind {
	case KindRegion:
		if r, ok := mem.Lookup(rec.Region.Name); ok {
			if r == rec.Region {
				return nil // already in the snapshot
			}
			return &CorruptError{Reason: fmt.Sprintf("region %q logged as %+v, known as %+v", r.Name, rec.Region, r)}
		}
		if err := mem.Restore(rec.Region); err != nil {
			if errors.Is(err, rdma.ErrOutOfMemory) {
				return fmt.Errorf("durable: %w (start with at least the size the node had)", err)
			}
			return &CorruptError{Reason: err.Error()}
		}
	case KindWrites:
		for i := range rec.Writes {
			w := &rec.Writes[i]
			c := mem.Execute(&rdma.WorkRequest{Op: rdma.OpWrite, RKey: w.RKey, RemoteAddr: w.Addr, Local: w.Data})
			if c.Status != rdma.StatusSuccess {
				return &CorruptError{Reason: fmt.Sprintf("record %d: write of %d bytes at %#x (rkey %#x): %v", rec.Seq, len(w.Data), w.Addr, w.RKey, c.Status)}
			}
		}
	}
	return nil
}
