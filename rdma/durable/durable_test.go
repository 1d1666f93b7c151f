package durable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/rdma"

	"github.com/aura-runtime/aura/internal/crashdir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const testCapacity = 16 << 20

func open(t testing.TB, dir string, mod ...func(*Options)) *Store {
	t.Helper()
	o := Options{Dir: dir, Capacity: testCapacity, Logger: quiet(), SnapshotEveryBytes: -1}
	for _, f := range mod {
		f(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open %s: %v", dir, err)
	}
	return s
}

// node is what the memory-node server does with a store: apply a request
// and log its post-images in one critical section, so that the log's order
// is the order of effect.
type node struct {
	s  *Store
	mu sync.Mutex
}

func (n *node) register(t testing.TB, name string, length uint64) rdma.Region {
	t.Helper()
	n.mu.Lock()
	r, err := n.s.Memory().Register(name, length)
	var seq uint64
	if err == nil {
		seq, err = n.s.AppendRegion(r)
	}
	n.mu.Unlock()
	if err == nil {
		err = n.s.WaitDurable(seq, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// write applies ws and logs them; it returns the record's sequence number.
func (n *node) write(ws ...Write) (uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range ws {
		c := n.s.Memory().Execute(&rdma.WorkRequest{Op: rdma.OpWrite, RKey: ws[i].RKey, RemoteAddr: ws[i].Addr, Local: ws[i].Data})
		if c.Status != rdma.StatusSuccess {
			return 0, errors.New(c.Status.String())
		}
	}
	return n.s.AppendWrites(ws)
}

func (n *node) mustWrite(t testing.TB, ws ...Write) uint64 {
	t.Helper()
	seq, err := n.write(ws...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.s.WaitDurable(seq, nil); err != nil {
		t.Fatal(err)
	}
	return seq
}

// dump returns every region and its contents.
func dump(t testing.TB, mem *rdma.Memory) map[rdma.Region][]byte {
	t.Helper()
	out := map[rdma.Region][]byte{}
	for _, r := range mem.Regions() {
		b := make([]byte, r.Length)
		for off := uint64(0); off < r.Length; off += rdma.MaxTransferBytes {
			chunk := b[off:min(r.Length, off+rdma.MaxTransferBytes)]
			if c := mem.Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + off, Local: chunk}); c.Status != rdma.StatusSuccess {
				t.Fatal(c.Status)
			}
		}
		out[r] = b
	}
	return out
}

func sameMemory(t testing.TB, got, want map[rdma.Region][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d regions, want %d", len(got), len(want))
	}
	for r, w := range want {
		g, ok := got[r]
		if !ok {
			t.Fatalf("region %+v missing", r)
		}
		if !bytes.Equal(g, w) {
			i := 0
			for i < len(g) && g[i] == w[i] {
				i++
			}
			t.Fatalf("region %q differs from byte %d", r.Name, i)
		}
	}
}

func randomWrite(rng *rand.Rand, r rdma.Region) Write {
	n := 1 + rng.IntN(64)
	if rng.IntN(10) == 0 {
		n = 1 + rng.IntN(8000)
	}
	n = min(n, int(r.Length))
	off := rng.Uint64N(r.Length - uint64(n) + 1)
	if rng.IntN(2) == 0 { // an aligned word, as CAS and FAA leave
		n, off = 8, rng.Uint64N(r.Length/8)*8
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return Write{RKey: r.RKey, Addr: r.Addr + off, Data: b}
}

// TestRecoveryEqualsLiveMemory: after random writes across snapshots and
// segment rotations, a store opened on a crash copy of the directory holds
// exactly the live memory: same regions (rkeys, addresses) and bytes.
func TestRecoveryEqualsLiveMemory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, func(o *Options) { o.SegmentBytes = MinSegmentBytes })
	defer s.Close()
	n := &node{s: s}
	rng := rand.New(rand.NewPCG(1, 2))
	var regions []rdma.Region
	for i := range 3 {
		regions = append(regions, n.register(t, "r"+string(rune('a'+i)), uint64(100000+i*4099)))
	}
	for round := range 4 {
		for range 300 {
			ws := make([]Write, 1+rng.IntN(5))
			for i := range ws {
				ws[i] = randomWrite(rng, regions[rng.IntN(len(regions))])
			}
			n.mustWrite(t, ws...)
		}
		if round == 1 {
			regions = append(regions, n.register(t, "late", 5000))
		}
		if round%2 == 0 {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		live := dump(t, s.Memory())
		r := open(t, crashdir.Copy(t, dir))
		sameMemory(t, dump(t, r.Memory()), live)
		if got := r.Stats().Appended; got != s.Stats().Appended {
			t.Errorf("recovered up to record %d, live at %d", got, s.Stats().Appended)
		}
		r.Close()
	}
	if st := s.Stats(); st.Snapshots != 2 || st.Fsyncs == 0 || st.LogRecords < 1200 {
		t.Errorf("stats %+v", st)
	}
	// A clean close and reopen on the same directory, and the log goes on.
	want := dump(t, s.Memory())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir)
	sameMemory(t, dump(t, s2.Memory()), want)
	n2 := &node{s: s2}
	n2.mustWrite(t, Write{RKey: regions[0].RKey, Addr: regions[0].Addr, Data: []byte("after reopen")})
	want = dump(t, s2.Memory())
	s2.Close()
	s3 := open(t, dir)
	sameMemory(t, dump(t, s3.Memory()), want)
	s3.Close()
}

// lastSegment returns the path of the newest segment in dir.
func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	var last string
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if _, ok := parseSeq(e.Name(), segmentPrefix, segmentSuffix); ok {
			last = filepath.Join(dir, e.Name())
		}
	}
	if last == "" {
		t.Fatal("no segment")
	}
	return last
}

// TestTornTailAtEveryOffset: cut the log at every byte offset inside its
// last three records; recovery keeps exactly the records wholly before the
// cut, reports the rest as torn, and the log goes on from there.
func TestTornTailAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	n := &node{s: s}
	r := n.register(t, "r", 4096)
	var states []map[rdma.Region][]byte // memory after each record
	var ends []int64                    // segment size after each record
	seg := lastSegment(t, dir)
	size := func() int64 {
		st, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	for i := range 5 {
		ws := []Write{{RKey: r.RKey, Addr: r.Addr + uint64(i*16), Data: bytes.Repeat([]byte{byte(i + 1)}, 10+i*7)}}
		if i%2 == 1 {
			ws = append(ws, Write{RKey: r.RKey, Addr: r.Addr + 1000, Data: binary.LittleEndian.AppendUint64(nil, uint64(i))})
		}
		n.mustWrite(t, ws...)
		states = append(states, dump(t, s.Memory()))
		ends = append(ends, size())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	from := ends[len(ends)-4] // the end of the second record: cut inside the last three
	for cut := from; cut <= int64(len(full)); cut++ {
		d := crashdir.Copy(t, dir)
		if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		// Records wholly before the cut survive.
		kept := -1
		for i, e := range ends {
			if e <= cut {
				kept = i
			}
		}
		s := open(t, d)
		sameMemory(t, dump(t, s.Memory()), states[kept])
		if torn := cut - ends[kept]; s.Stats().TornBytes != torn {
			t.Fatalf("cut at %d: torn %d, want %d", cut, s.Stats().TornBytes, torn)
		}
		// The log goes on after the cut, and that survives too.
		n := &node{s: s}
		n.mustWrite(t, Write{RKey: r.RKey, Addr: r.Addr + 2000, Data: []byte("next")})
		want := dump(t, s.Memory())
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := open(t, d)
		sameMemory(t, dump(t, s2.Memory()), want)
		if s2.Stats().TornBytes != 0 {
			t.Fatalf("cut at %d: torn bytes after the repair", cut)
		}
		s2.Close()
		os.RemoveAll(d)
	}
	// A tail of zeros (space allocated for a write that never landed) is torn too.
	d := crashdir.Copy(t, dir)
	if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), append(append([]byte{}, full...), make([]byte, 3000)...), 0o644); err != nil {
		t.Fatal(err)
	}
	s = open(t, d)
	sameMemory(t, dump(t, s.Memory()), states[len(states)-1])
	s.Close()
}

// TestCorruptionBeforeTheTailIsRefused: a damaged byte in any record but
// the last, a gap in the log, or a damaged snapshot with nothing to fall
// back on stops Open with a *CorruptError instead of serving wrong memory.
func TestCorruptionBeforeTheTailIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, func(o *Options) { o.SegmentBytes = MinSegmentBytes })
	n := &node{s: s}
	r := n.register(t, "r", 1<<16)
	for i := range 50 {
		n.mustWrite(t, Write{RKey: r.RKey, Addr: r.Addr + uint64(i*8), Data: bytes.Repeat([]byte{0xa5}, 8+i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := lastSegment(t, dir)
	full, _ := os.ReadFile(seg)
	refused := func(what string, d string) {
		t.Helper()
		_, err := Open(Options{Dir: d, Capacity: testCapacity, Logger: quiet()})
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
			t.Fatalf("%s: Open = %v, want a *CorruptError", what, err)
		}
	}
	// Every byte of every record but the last three (which sit within the
	// torn-write window only if they reach the end).
	for _, off := range []int64{segmentHeaderSize + 3, segmentHeaderSize + 9, int64(len(full)) / 2, int64(len(full)) - 200} {
		d := crashdir.Copy(t, dir)
		b := append([]byte{}, full...)
		b[off] ^= 0x40
		os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o644)
		refused(fmt.Sprintf("byte %d of %d flipped", off, len(full)), d)
	}
	// A bad segment header.
	d := crashdir.Copy(t, dir)
	b := append([]byte{}, full...)
	b[2] = 'X'
	os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o644)
	refused("bad magic", d)

	// A missing segment: take a snapshot, write more in a new segment,
	// then drop the segment between them.
	s = open(t, dir, func(o *Options) { o.SegmentBytes = MinSegmentBytes })
	n = &node{s: s}
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.mustWrite(t, Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("one")})
	if _, err := s.wal.rotate(); err != nil {
		t.Fatal(err)
	}
	n.mustWrite(t, Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("two")})
	s.Close()
	var segs []string
	var snap string
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if _, ok := parseSeq(e.Name(), segmentPrefix, segmentSuffix); ok {
			segs = append(segs, e.Name())
		}
		if _, ok := parseSeq(e.Name(), snapshotPrefix, snapshotSuffix); ok {
			snap = e.Name()
		}
	}
	if len(segs) != 2 || snap == "" {
		t.Fatalf("files %v %q", segs, snap)
	}
	d = crashdir.Copy(t, dir)
	os.Remove(filepath.Join(d, segs[0]))
	refused("missing segment", d)
	// A damaged snapshot, no older one.
	d = crashdir.Copy(t, dir)
	sb, _ := os.ReadFile(filepath.Join(d, snap))
	sb[len(sb)/2] ^= 1
	os.WriteFile(filepath.Join(d, snap), sb, 0o644)
	refused("damaged snapshot", d)
	// The intact directory still opens, with both writes.
	s = open(t, dir)
	got := make([]byte, 3)
	s.Memory().Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: got})
	if string(got) != "two" {
		t.Fatalf("read %q", got)
	}
	s.Close()
}

// TestDirectoryIsLocked: a second store on the same directory is refused
// while the first is open, and allowed after it closes.
func TestDirectoryIsLocked(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := Open(Options{Dir: dir, Capacity: testCapacity, Logger: quiet()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	s.Close()
	open(t, dir).Close()
}

// TestGroupCommitConcurrentWriters: concurrent writers share fsyncs, every
// acknowledged write survives, and each record is applied once.
func TestGroupCommitConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	n := &node{s: s}
	const writers, each = 8, 200
	r := n.register(t, "counters", writers*8)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				seq, err := n.write(Write{RKey: r.RKey, Addr: r.Addr + uint64(w*8), Data: binary.LittleEndian.AppendUint64(nil, uint64(i))})
				if err == nil {
					err = s.WaitDurable(seq, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.LogRecords != writers*each+1 || st.Fsyncs >= st.LogRecords {
		t.Errorf("%d records in %d fsyncs: no group commit", st.LogRecords, st.Fsyncs)
	}
	t.Logf("%d records, %d fsyncs, mean batch %.1f, max %d", st.LogRecords, st.Fsyncs, float64(st.LogRecords)/float64(st.Fsyncs), st.MaxGroupRecords)
	r2 := open(t, crashdir.Copy(t, dir))
	defer r2.Close()
	got := dump(t, r2.Memory())[r]
	for w := range writers {
		if v := binary.LittleEndian.Uint64(got[w*8:]); v != each {
			t.Errorf("writer %d: %d, want %d", w, v, each)
		}
	}
	s.Close()
}

// TestSnapshotWhileWriting: snapshots taken while writers run (fuzzy
// copies) plus the log rebuild exactly the live memory.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, func(o *Options) { o.SnapshotEveryBytes = 64 << 10 })
	defer s.Close()
	n := &node{s: s}
	r := n.register(t, "r", 1<<18)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for !stop.Load() {
				seq, err := n.write(randomWrite(rng, r), randomWrite(rng, r))
				if err == nil {
					err = s.WaitDurable(seq, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for s.Stats().Snapshots < 3 {
		before := s.Appended()
		for s.Appended() < before+50 && !t.Failed() {
			time.Sleep(time.Millisecond) // let the writers run into the copy
		}
		if err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	live := dump(t, s.Memory())
	// The copy is file by file, not one instant: keep the snapshotter out
	// of it.
	s.snapMu.Lock()
	crashed := crashdir.Copy(t, dir)
	s.snapMu.Unlock()
	r2 := open(t, crashed)
	defer r2.Close()
	sameMemory(t, dump(t, r2.Memory()), live)
}

// failFS fails fsyncs once armed.
type failFS struct {
	OSFS
	armed atomic.Bool
}

type failFile struct {
	*os.File
	fs *failFS
}

func (f failFile) Sync() error {
	if f.fs.armed.Load() {
		return errors.New("injected fsync failure")
	}
	return f.File.Sync()
}

func (fs *failFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failFile{f, fs}, nil
}

// TestFsyncFailureStopsAcknowledging: once an fsync fails the store never
// reports anything durable again (fail-stop), and what was durable before
// recovers.
func TestFsyncFailureStopsAcknowledging(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	s := open(t, dir, func(o *Options) { o.FS = fs })
	n := &node{s: s}
	r := n.register(t, "r", 4096)
	n.mustWrite(t, Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("kept")})
	fs.armed.Store(true)
	seq, err := n.write(Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("lost")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(seq, nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("WaitDurable after a failed fsync: %v", err)
	}
	if _, err := n.write(Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("more")}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after a failed fsync: %v", err)
	}
	if s.Durable() >= seq {
		t.Fatalf("durable %d", s.Durable())
	}
	s.Close()
	fs.armed.Store(false)
	s = open(t, dir)
	got := make([]byte, 4)
	s.Memory().Execute(&rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: got})
	// "lost" reached the file without its fsync: it may or may not be
	// there after a crash, but "kept" must.
	if string(got) != "kept" && string(got) != "lost" {
		t.Fatalf("read %q", got)
	}
	s.Close()
}

// TestRecordRoundTrip: what the encoders write, DecodeRecord reads back.
func TestRecordRoundTrip(t *testing.T) {
	reg := rdma.Region{Name: "table/x", RKey: 7, Addr: 1 << 20, Length: 99}
	b := appendRegion(nil, 5, reg)
	var rec Record
	if err := DecodeRecord(b[frameHeaderSize:], &rec); err != nil || rec.Kind != KindRegion || rec.Seq != 5 || rec.Region != reg {
		t.Fatalf("%+v %v", rec, err)
	}
	ws := []Write{{RKey: 1, Addr: 8, Data: []byte("abc")}, {RKey: 2, Addr: 16, Data: make([]byte, 8)}}
	b = appendWrites(nil, 6, ws)
	if len(b) != writesSize(ws) {
		t.Fatalf("size %d, want %d", len(b), writesSize(ws))
	}
	if err := DecodeRecord(b[frameHeaderSize:], &rec); err != nil || rec.Seq != 6 || len(rec.Writes) != 2 || string(rec.Writes[0].Data) != "abc" {
		t.Fatalf("%+v %v", rec, err)
	}
	for _, bad := range []Write{{RKey: 1, Addr: 0}, {RKey: 1, Data: make([]byte, rdma.MaxTransferBytes+1)}} {
		if err := checkWrites([]Write{bad}); err == nil {
			t.Errorf("checkWrites accepted %d bytes", len(bad.Data))
		}
	}
}

// TestSnapshotWaitsForMutationsInFlight: a mutation applied to memory but
// not yet logged when the snapshot copies memory is in the copy, so the
// snapshot is not published until the barrier lets that mutation append,
// and then only once its record is durable.
func TestSnapshotWaitsForMutationsInFlight(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	n := &node{s: s}
	s.SetMutationBarrier(func() { n.mu.Lock(); n.mu.Unlock() })
	r := n.register(t, "r", 1<<16)

	w := Write{RKey: r.RKey, Addr: r.Addr, Data: []byte("in flight")}
	n.mu.Lock() // a mutation begins: applied, not yet appended
	if c := s.Memory().Execute(&rdma.WorkRequest{Op: rdma.OpWrite, RKey: w.RKey, RemoteAddr: w.Addr, Local: w.Data}); c.Status != rdma.StatusSuccess {
		t.Fatal(c.Status)
	}
	done := make(chan error, 1)
	go func() { done <- s.Snapshot() }()
	select {
	case err := <-done:
		n.mu.Unlock()
		t.Fatalf("snapshot published (%v) while a mutation it copied was not logged", err)
	case <-time.After(200 * time.Millisecond):
	}
	seq, err := s.AppendWrites([]Write{w})
	n.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Snapshots != 1 || st.Durable < seq {
		t.Fatalf("snapshots %d, durable %d; want 1 snapshot published after record %d was durable", st.Snapshots, st.Durable, seq)
	}
}

// syncedFS records the directories it fsyncs.
type syncedFS struct {
	OSFS
	mu   sync.Mutex
	dirs []string
}

func (f *syncedFS) SyncDir(dir string) error {
	f.mu.Lock()
	f.dirs = append(f.dirs, dir)
	f.mu.Unlock()
	return f.OSFS.SyncDir(dir)
}

// TestOpenSyncsANewDirectorysParent: a data directory Open creates is
// made durable in its parent (else a power loss could lose the whole
// directory with its acknowledged writes); an existing one is not synced
// again.
func TestOpenSyncsANewDirectorysParent(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	fs := &syncedFS{}
	open(t, dir, func(o *Options) { o.FS = fs }).Close()
	if !slices.Contains(fs.dirs, parent) {
		t.Fatalf("creating %s synced %v, not its parent", dir, fs.dirs)
	}
	fs2 := &syncedFS{}
	open(t, dir, func(o *Options) { o.FS = fs2 }).Close()
	if slices.Contains(fs2.dirs, parent) {
		t.Fatalf("reopening %s synced its parent again: %v", dir, fs2.dirs)
	}
}
