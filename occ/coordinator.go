package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// Outcome is how a transaction ended.
type Outcome uint8

const (
	// Committed: validated and written back.
	Committed Outcome = iota + 1
	// Aborted: a conflict or a lost connection ended it; nothing it wrote is
	// visible and it may be retried.
	Aborted
	// RolledBack: the program asked to roll back (txn.ErrRollback).
	RolledBack
	// Failed: the program returned another error, or cleanup could not reach
	// the memory node before CleanupTimeout (locks may then stay held).
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case RolledBack:
		return "rolled_back"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Counters describe what one transaction attempt did.
type Counters struct {
	Reads, Writes, Inserts, Deletes uint64
	// LocksLocal, LocksOwnerRPC and LocksMNCAS count granted locks by path.
	LocksLocal, LocksOwnerRPC, LocksMNCAS uint64
	// MNCAS and MNCASFailed count memory-node CAS issued by lock paths and by
	// cleanup; MNFAA counts FAA (none in the current protocol).
	MNCAS, MNCASFailed, MNFAA uint64
	// RDMAReads and RDMAWrites count the coordinator's own READ and WRITE verbs.
	RDMAReads, RDMAWrites uint64
	// Redirects counts locks refused because an owner holds the record.
	Redirects uint64
}

// Add accumulates o into c.
func (c *Counters) Add(o Counters) {
	c.Reads += o.Reads
	c.Writes += o.Writes
	c.Inserts += o.Inserts
	c.Deletes += o.Deletes
	c.LocksLocal += o.LocksLocal
	c.LocksOwnerRPC += o.LocksOwnerRPC
	c.LocksMNCAS += o.LocksMNCAS
	c.MNCAS += o.MNCAS
	c.MNCASFailed += o.MNCASFailed
	c.MNFAA += o.MNFAA
	c.RDMAReads += o.RDMAReads
	c.RDMAWrites += o.RDMAWrites
	c.Redirects += o.Redirects
}

// Result is the outcome of one transaction attempt.
type Result struct {
	Outcome  Outcome
	Err      error // nil when committed
	Counters Counters
	// Replayed: Outcome is Committed because another attempt of the same
	// transaction id committed it (found in the commit ledger); this
	// attempt wrote nothing and its program's outputs are not the
	// committed attempt's.
	Replayed bool
}

// errReplayed ends an attempt whose transaction the commit ledger shows
// committed by another attempt.
var errReplayed = errors.New("occ: transaction committed by another attempt")

// maxInsertCandidates bounds the free slots an Insert tries to lock when
// the locker refuses one (a free owner sentinel of a cohort owned elsewhere).
const maxInsertCandidates = 4

// Coordinator runs transactions one at a time on its own queue pair.
type Coordinator struct {
	e      *Engine
	qp     rdma.QueuePair
	locker Locker
	redo   int // record slot in e.redo, or -1
}

// NewCoordinator returns a coordinator posting on qp (which it then owns).
// With a redo log (Engine.UseRedoLog) it takes the next record slot; a
// coordinator beyond the log's slots cannot commit writes (ErrRedo).
func (e *Engine) NewCoordinator(qp rdma.QueuePair) *Coordinator {
	c := &Coordinator{e: e, qp: qp, locker: e.locker(), redo: -1}
	if e.redo != nil {
		c.redo = e.redo.slot(false)
	}
	return c
}

// Close releases the coordinator's queue pair.
func (c *Coordinator) Close() error { return c.qp.Close() }

type readEntry struct {
	t      *store.TableLayout
	addr   uint64 // slot address when present
	meta   store.Meta
	absent bool
	value  []byte
}

type lockEntry struct {
	t        *store.TableLayout
	req      LockRequest
	res      LockResult
	meta     store.Meta // meta found when locked
	ours     bool       // the slot held the requested record when locked
	present  bool       // record exists in the transaction's view
	inserted bool       // slot claimed by this transaction's Insert
	dirty    bool
	value    []byte
}

type tx struct {
	c        *Coordinator
	ctx      context.Context
	id       uint64
	tag      uint64
	reads    map[txn.Ref]*readEntry
	locks    map[txn.Ref]*lockEntry
	order    []txn.Ref // lock order, for deterministic write-back
	unknown  []LockRequest
	claimed  map[uint64]bool // slot addresses claimed by inserts
	cnt      Counters
	redo     []byte // the redo record of a commit, written before its write-back
	redoSlot int    // where it is written
	// keepGrants: a commit's write-back gave up after its record was
	// posted; its owner-path grants are not released (see keepRedo).
	keepGrants bool
}

// Run executes prog as one transaction attempt.
func (c *Coordinator) Run(ctx context.Context, txnID uint64, prog txn.Program) Result {
	seq := c.e.seq.Add(1)
	if l := c.e.redo; l != nil {
		l.running.Add(1)
		defer l.running.Add(-1)
		// Numbered by the log: unique across the node's incarnations.
		var err error
		if seq, err = l.nextSeq(ctx); err != nil {
			return Result{Outcome: Aborted, Err: fmt.Errorf("occ: reserving transaction numbers: %w", err)}
		}
	}
	t := &tx{c: c, ctx: ctx, id: txnID, tag: store.CASTag(c.e.cfg.Node, seq),
		reads: map[txn.Ref]*readEntry{}, locks: map[txn.Ref]*lockEntry{}, claimed: map[uint64]bool{}}
	before := c.qp.Stats()
	res := t.run(prog)
	d := c.qp.Stats().Sub(before)
	t.cnt.RDMAReads, t.cnt.RDMAWrites = d.Reads, d.Writes
	t.cnt.MNCAS += d.CAS
	t.cnt.MNCASFailed += d.CASFailed
	t.cnt.MNFAA += d.FAA
	res.Counters = t.cnt
	return res
}

func (t *tx) run(prog txn.Program) Result {
	err := prog(t)
	if err == nil {
		err = t.commit()
		if err == nil {
			return Result{Outcome: Committed}
		}
	}
	cleanupErr := t.abort()
	switch {
	case cleanupErr != nil:
		return Result{Outcome: Failed, Err: errors.Join(err, cleanupErr)}
	case errors.Is(err, errReplayed):
		return Result{Outcome: Committed, Replayed: true}
	case errors.Is(err, txn.ErrRollback):
		return Result{Outcome: RolledBack, Err: err}
	case errors.Is(err, txn.ErrConflict), errors.Is(err, rdma.ErrConnectionLost), errors.Is(err, rdma.ErrFlushed):
		return Result{Outcome: Aborted, Err: err}
	}
	return Result{Outcome: Failed, Err: err}
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{txn.ErrConflict}, args...)...)
}

// exec runs verbs on the coordinator's queue pair and turns any failed
// completion into an error.
func (t *tx) exec(wrs []rdma.WorkRequest) ([]rdma.Completion, error) {
	var out []rdma.Completion
	for start := 0; start < len(wrs); start += rdma.MaxBatch {
		end := min(start+rdma.MaxBatch, len(wrs))
		cs, err := rdma.Exec(t.ctx, t.c.qp, wrs[start:end]...)
		if err != nil {
			return nil, err
		}
		if err := rdma.FirstError(cs); err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

func (t *tx) table(r txn.Ref) (*store.TableLayout, error) { return t.c.e.layout.Table(r.Table) }

// located is where a record was found.
type located struct {
	t     *store.TableLayout
	addr  uint64 // slot address; 0 when absent
	slot  store.Slot
	raw   []byte // slot bytes
	found bool
	at    time.Time // when the READ that found it was posted
}

// locate finds records with one doorbell: a READ of the cached slot, or of
// both candidate buckets. Cached addresses that no longer hold the record are
// looked up again in a second doorbell.
func (t *tx) locate(rs []txn.Ref) ([]located, error) {
	out := make([]located, len(rs))
	pending := make([]int, 0, len(rs))
	for i, r := range rs {
		tl, err := t.table(r)
		if err != nil {
			return nil, err
		}
		out[i].t = tl
		pending = append(pending, i)
	}
	for round := 0; round < 2 && len(pending) > 0; round++ {
		var wrs []rdma.WorkRequest
		type probe struct {
			idx    int
			cached bool
			first  int // index into wrs
		}
		probes := make([]probe, 0, len(pending))
		for _, i := range pending {
			r, tl := rs[i], out[i].t
			if addr, ok := t.c.e.cache.get(r); ok && round == 0 {
				probes = append(probes, probe{i, true, len(wrs)})
				wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: addr, Local: make([]byte, tl.SlotSize)})
				continue
			}
			b1, b2 := tl.CandidateBuckets(r.Key)
			probes = append(probes, probe{i, false, len(wrs)})
			wrs = append(wrs,
				rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b1), Local: make([]byte, tl.BucketSize)},
				rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b2), Local: make([]byte, tl.BucketSize)})
		}
		posted := time.Now()
		if _, err := t.exec(wrs); err != nil {
			return nil, err
		}
		pending = pending[:0]
		for _, p := range probes {
			r, tl := rs[p.idx], out[p.idx].t
			if p.cached {
				w := wrs[p.first]
				s := tl.DecodeSlot(w.Local)
				if s.Meta.Present() && s.Key == r.Key {
					out[p.idx] = located{t: tl, addr: w.RemoteAddr, slot: s, raw: w.Local, found: true, at: posted}
				} else {
					t.c.e.cache.drop(r)
					pending = append(pending, p.idx)
				}
				continue
			}
			for _, w := range wrs[p.first : p.first+2] {
				for s := 0; s < store.SlotsPerBucket; s++ {
					raw := w.Local[uint64(s)*tl.SlotSize : uint64(s+1)*tl.SlotSize]
					slot := tl.DecodeSlot(raw)
					if slot.Meta.Present() && slot.Key == r.Key {
						addr := w.RemoteAddr + uint64(s)*tl.SlotSize
						out[p.idx] = located{t: tl, addr: addr, slot: slot, raw: raw, found: true, at: posted}
						t.c.e.cache.put(r, addr)
					}
				}
			}
		}
	}
	return out, nil
}

func (t *tx) Get(r txn.Ref) ([]byte, error) {
	vs, err := t.GetMany([]txn.Ref{r})
	if err != nil {
		return nil, err
	}
	if vs[0] == nil {
		return nil, fmt.Errorf("%w: %v", txn.ErrNotFound, r)
	}
	return vs[0], nil
}

func (t *tx) GetMany(rs []txn.Ref) ([][]byte, error) {
	out := make([][]byte, len(rs))
	var need []txn.Ref
	var needIdx []int
	for i, r := range rs {
		if l, ok := t.locks[r]; ok {
			if l.present {
				out[i] = clone(l.value)
			}
			continue
		}
		if e, ok := t.reads[r]; ok {
			if !e.absent {
				out[i] = clone(e.value)
			}
			continue
		}
		need = append(need, r)
		needIdx = append(needIdx, i)
	}
	if len(need) == 0 {
		return out, nil
	}
	locs, err := t.locate(need)
	if err != nil {
		return nil, err
	}
	for j, loc := range locs {
		r := need[j]
		t.cnt.Reads++
		if !loc.found {
			t.reads[r] = &readEntry{t: loc.t, absent: true}
			continue
		}
		if IsLocked(loc.slot.Lock) {
			t.suspect(loc.t, loc.addr, loc.slot.Lock, false)
			return nil, conflict("read of %v locked by another transaction", r)
		}
		v := clone(loc.slot.Value)
		t.reads[r] = &readEntry{t: loc.t, addr: loc.addr, meta: loc.slot.Meta, value: v}
		out[needIdx[j]] = clone(v)
	}
	return out, nil
}

func (t *tx) GetForUpdate(r txn.Ref) ([]byte, error) {
	vs, err := t.GetForUpdateMany([]txn.Ref{r})
	if err != nil {
		return nil, err
	}
	if vs[0] == nil {
		return nil, fmt.Errorf("%w: %v", txn.ErrNotFound, r)
	}
	return vs[0], nil
}

func (t *tx) GetForUpdateMany(rs []txn.Ref) ([][]byte, error) {
	out := make([][]byte, len(rs))
	var need []txn.Ref
	var needIdx []int
	for i, r := range rs {
		if l, ok := t.locks[r]; ok {
			if l.present {
				out[i] = clone(l.value)
			}
			continue
		}
		if e, ok := t.reads[r]; ok && e.absent {
			continue // validated as absent at commit
		}
		need = append(need, r)
		needIdx = append(needIdx, i)
	}
	if len(need) == 0 {
		return out, nil
	}
	locs, err := t.locate(need)
	if err != nil {
		return nil, err
	}
	var reqs []LockRequest
	var reqIdx []int
	for j, loc := range locs {
		r := need[j]
		if !loc.found {
			t.reads[r] = &readEntry{t: loc.t, absent: true}
			continue
		}
		req := t.lockRequest(r, loc.t, loc.addr)
		// The slot held r when read: only lockers of r's key group may
		// change its word while it does (see LockRequest.SeenKG).
		req.Seen, req.SeenAt, req.SeenKG = loc.slot.Lock, loc.at, true
		reqs = append(reqs, req)
		reqIdx = append(reqIdx, j)
	}
	if len(reqs) == 0 {
		return out, nil
	}
	res := make([]LockResult, len(reqs))
	failure := t.acquire(reqs, res)
	for k := range reqs {
		j := reqIdx[k]
		r := need[j]
		e, ok := t.locks[r]
		if !ok || res[k].Status != LockGranted || res[k].Slot == nil {
			continue
		}
		s := locs[j].t.DecodeSlot(res[k].Slot)
		if !s.Meta.Present() || s.Key != r.Key {
			t.c.e.cache.drop(r)
			e.present = false
			failure = conflict("record %v moved while being locked", r)
			continue
		}
		if prev, ok := t.reads[r]; ok {
			delete(t.reads, r)
			if prev.meta != s.Meta {
				failure = conflict("record %v changed between read and lock", r)
				continue
			}
		}
		t.cnt.Reads++
		out[needIdx[j]] = clone(e.value)
	}
	if failure != nil {
		return nil, failure
	}
	return out, nil
}

func (t *tx) lockRequest(r txn.Ref, tl *store.TableLayout, addr uint64) LockRequest {
	kg := t.c.e.kg(r)
	req := LockRequest{Ref: r, KeyGroup: kg, Table: tl, SlotAddr: addr, Tag: t.tag, TxnID: t.id}
	if a := t.c.e.fenceAddr(kg); a != 0 {
		req.Fence, req.FenceRKey = a, t.c.e.layout.Fences.RKey
	}
	return req
}

// suspect hands the redo log a lock word that refused this transaction if
// no live transaction can be using it past RepairAfter: a CAS tag (unique
// to one attempt), or a held owner sentinel of a retired activation.
func (t *tx) suspect(tl *store.TableLayout, addr, w uint64, retired bool) {
	l := t.c.e.redo
	if l == nil || w == 0 || tl == nil {
		return
	}
	if store.IsCASTag(w) || (retired && store.IsOwnerSentinel(w) && store.SentinelHeld(w)) {
		l.Suspect(tl.Table.ID, addr, w, time.Now())
	}
}

// acquire runs the locker and accounts for its results. Granted locks and
// unknown outcomes are remembered for release; any refusal is a conflict.
func (t *tx) acquire(reqs []LockRequest, res []LockResult) error {
	if err := t.c.locker.Acquire(t.ctx, reqs, res); err != nil {
		return err
	}
	var failure error
	for k := range res {
		t.cnt.MNCAS += uint64(res[k].CAS)
		t.cnt.MNCASFailed += uint64(res[k].CASFailed)
		switch res[k].Status {
		case LockGranted:
			switch res[k].Path {
			case PathLocal:
				t.cnt.LocksLocal++
			case PathOwnerRPC:
				t.cnt.LocksOwnerRPC++
			case PathMNCAS:
				t.cnt.LocksMNCAS++
			}
			// Every granted lock is recorded at once, so that whatever fails
			// next, the abort releases it.
			e := &lockEntry{t: reqs[k].Table, req: reqs[k], res: res[k]}
			if res[k].Slot != nil {
				s := reqs[k].Table.DecodeSlot(res[k].Slot)
				e.meta, e.present, e.value = s.Meta, s.Meta.Present(), clone(s.Value)
				e.ours = s.Meta.Present() && s.Key == reqs[k].Ref.Key
			} else {
				failure = fmt.Errorf("lock of %v: record read failed: %w", reqs[k].Ref, rdma.ErrConnectionLost)
			}
			t.locks[reqs[k].Ref] = e
			t.order = append(t.order, reqs[k].Ref)
		case LockUnknown:
			t.unknown = append(t.unknown, reqs[k])
			failure = fmt.Errorf("lock of %v: %w", reqs[k].Ref, rdma.ErrConnectionLost)
		case LockRedirect:
			t.cnt.Redirects++
			t.suspect(reqs[k].Table, reqs[k].SlotAddr, res[k].LockWord, res[k].Retired)
			if failure == nil {
				failure = conflict("%v is owned by another node (lock word %#x)", reqs[k].Ref, res[k].LockWord)
			}
		default:
			t.suspect(reqs[k].Table, reqs[k].SlotAddr, res[k].LockWord, res[k].Retired)
			if failure == nil {
				failure = conflict("%v locked by another transaction", reqs[k].Ref)
			}
		}
	}
	return failure
}

func (t *tx) Put(r txn.Ref, value []byte) error {
	l, ok := t.locks[r]
	if !ok || !l.present {
		return fmt.Errorf("%w: %v", txn.ErrNotLocked, r)
	}
	if len(value) != l.t.Table.ValueSize {
		return fmt.Errorf("%w: table %s wants %d bytes, got %d", txn.ErrValueSize, l.t.Table.Name, l.t.Table.ValueSize, len(value))
	}
	l.value = clone(value)
	l.dirty = true
	t.cnt.Writes++
	return nil
}

func (t *tx) Delete(r txn.Ref) error {
	l, ok := t.locks[r]
	if !ok || !l.present {
		return fmt.Errorf("%w: %v", txn.ErrNotLocked, r)
	}
	l.present = false
	l.dirty = true
	t.cnt.Deletes++
	return nil
}

func (t *tx) Insert(r txn.Ref, value []byte) error {
	tl, err := t.table(r)
	if err != nil {
		return err
	}
	if len(value) != tl.Table.ValueSize {
		return fmt.Errorf("%w: table %s wants %d bytes, got %d", txn.ErrValueSize, tl.Table.Name, tl.Table.ValueSize, len(value))
	}
	if l, ok := t.locks[r]; ok {
		if l.present {
			return fmt.Errorf("%w: %v", txn.ErrExists, r)
		}
		l.present, l.dirty, l.value = true, true, clone(value)
		t.cnt.Inserts++
		return nil
	}
	if e, ok := t.reads[r]; ok && !e.absent {
		return fmt.Errorf("%w: %v", txn.ErrExists, r)
	}
	// Read both candidate buckets: the key must be absent, and a free slot
	// (not present, not locked, not claimed by this transaction) is needed.
	b1, b2 := tl.CandidateBuckets(r.Key)
	wrs := []rdma.WorkRequest{
		{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b1), Local: make([]byte, tl.BucketSize)},
		{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b2), Local: make([]byte, tl.BucketSize)},
	}
	posted := time.Now()
	if _, err := t.exec(wrs); err != nil {
		return err
	}
	var free []uint64
	words := map[uint64]uint64{}
	used := [2]int{}
	for bi, w := range wrs {
		for s := 0; s < store.SlotsPerBucket; s++ {
			slot := tl.DecodeSlot(w.Local[uint64(s)*tl.SlotSize:])
			addr := w.RemoteAddr + uint64(s)*tl.SlotSize
			if slot.Meta.Present() {
				used[bi]++
				if slot.Key == r.Key {
					return fmt.Errorf("%w: %v", txn.ErrExists, r)
				}
				continue
			}
			if !IsLocked(slot.Lock) && !t.claimed[addr] {
				free = append(free, addr)
				words[addr] = slot.Lock
			}
		}
	}
	if len(free) == 0 {
		return fmt.Errorf("%w: table %s, key %d", txn.ErrTableFull, tl.Table.Name, r.Key)
	}
	// Candidates: slots whose word is 0 first, then slots with a free owner
	// sentinel (left by an owner-path release; the locker may refuse one
	// whose cohort is still owned by someone else); within each, the
	// emptier bucket first, as the loader does.
	inSecond := func(a uint64) bool { return a >= wrs[1].RemoteAddr && a < wrs[1].RemoteAddr+tl.BucketSize }
	slices.SortStableFunc(free, func(a, b uint64) int {
		if (words[a] == 0) != (words[b] == 0) {
			if words[a] == 0 {
				return -1
			}
			return 1
		}
		if used[1] < used[0] && inSecond(a) != inSecond(b) {
			if inSecond(a) {
				return -1
			}
			return 1
		}
		return 0
	})
	var lockErr error
	for n, addr := range free {
		if n == maxInsertCandidates {
			break
		}
		req := t.lockRequest(r, tl, addr)
		// An empty slot may be claimed by an insert of any key group whose
		// candidate buckets hold it: only one, r's, when the table's
		// buckets are partitioned by key group.
		req.Seen, req.SeenAt, req.SeenKG = words[addr], posted, tl.KeyGroupAligned()
		res := make([]LockResult, 1)
		if lockErr = t.acquire([]LockRequest{req}, res); lockErr == nil {
			break
		}
		if s := res[0].Status; s != LockRedirect && s != LockConflict {
			return lockErr
		}
		// Refused, nothing held: try the next free slot.
	}
	if lockErr != nil {
		return lockErr
	}
	e := t.locks[r]
	addr := e.req.SlotAddr
	t.claimed[addr] = true
	if e.present {
		e.present = false // someone else's record: release it untouched
		return conflict("slot for %v filled concurrently", r)
	}
	e.inserted, e.present, e.dirty, e.value = true, true, true, clone(value)
	delete(t.reads, r)
	t.cnt.Inserts++
	return nil
}

// commit validates the read set and inserts, then writes back.
func (t *tx) commit() error {
	if err := t.redoRecord(); err != nil {
		return err
	}
	if err := t.validate(); err != nil {
		return err
	}
	return t.finish(true)
}

// abort releases every lock the transaction took (and, by CAS on its tag,
// those whose acquisition outcome is unknown).
func (t *tx) abort() error { return t.finish(false) }
func (t *tx) validate() error {
	var wrs []rdma.WorkRequest
	type check struct {
		ref    txn.Ref
		kind   int // 0 present read, 1 absent read, 2 insert
		first  int
		ignore uint64 // the insert's own slot
	}
	var checks []check
	// The commit ledger's word of this transaction (see "Exactly once" in
	// the package documentation): read with the validation, only by
	// transactions that write.
	ledger := -1
	if t.c.e.cfg.ExactlyOnce && t.writes() {
		ledger = len(wrs)
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpRead, RKey: t.c.e.layout.Ledger.RKey,
			RemoteAddr: store.LedgerAddr(t.c.e.layout.Ledger, t.id), Local: make([]byte, 8)})
	}
	// Inserts publish their key before validating, so that two concurrent
	// inserts of one key cannot both validate (each sees the other's claim).
	for _, r := range t.order {
		l := t.locks[r]
		if !l.inserted {
			continue
		}
		key := make([]byte, 8)
		binary.LittleEndian.PutUint64(key, r.Key)
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, RKey: l.t.Region.RKey, RemoteAddr: l.req.SlotAddr + store.KeyOffset, Local: key})
	}
	bucketReads := func(tl *store.TableLayout, key uint64) {
		b1, b2 := tl.CandidateBuckets(key)
		wrs = append(wrs,
			rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b1), Local: make([]byte, tl.BucketSize)},
			rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: tl.BucketAddr(b2), Local: make([]byte, tl.BucketSize)})
	}
	for r, e := range t.reads {
		if e.absent {
			checks = append(checks, check{ref: r, kind: 1, first: len(wrs)})
			bucketReads(e.t, r.Key)
			continue
		}
		checks = append(checks, check{ref: r, kind: 0, first: len(wrs)})
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpRead, RKey: e.t.Region.RKey, RemoteAddr: e.addr, Local: make([]byte, 16)})
	}
	for _, r := range t.order {
		l := t.locks[r]
		if !l.inserted {
			continue
		}
		checks = append(checks, check{ref: r, kind: 2, first: len(wrs), ignore: l.req.SlotAddr})
		bucketReads(l.t, r.Key)
	}
	if len(wrs) == 0 {
		return nil
	}
	if _, err := t.exec(wrs); err != nil {
		return err
	}
	if ledger >= 0 && binary.LittleEndian.Uint64(wrs[ledger].Local) == t.id {
		return errReplayed
	}
	for _, c := range checks {
		switch c.kind {
		case 0:
			e := t.reads[c.ref]
			b := wrs[c.first].Local
			meta := store.Meta(binary.LittleEndian.Uint64(b[store.MetaOffset:]))
			lock := binary.LittleEndian.Uint64(b[store.LockOffset:])
			if meta != e.meta || IsLocked(lock) {
				return conflict("read of %v invalidated", c.ref)
			}
		default:
			tl := t.tableOf(c.ref)
			for _, w := range wrs[c.first : c.first+2] {
				for s := 0; s < store.SlotsPerBucket; s++ {
					slot := tl.DecodeSlot(w.Local[uint64(s)*tl.SlotSize:])
					addr := w.RemoteAddr + uint64(s)*tl.SlotSize
					if addr == c.ignore || slot.Key != c.ref.Key {
						continue
					}
					if slot.Meta.Present() || IsLocked(slot.Lock) {
						return conflict("absence of %v invalidated", c.ref)
					}
				}
			}
		}
	}
	return nil
}

// writes reports whether the transaction writes (updates, inserts or
// deletes a record): only those go through the commit ledger, as running a
// read-only transaction twice changes nothing.
func (t *tx) writes() bool {
	for _, r := range t.order {
		if t.locks[r].dirty {
			return true
		}
	}
	return false
}

func (t *tx) tableOf(r txn.Ref) *store.TableLayout {
	tl, _ := t.table(r)
	return tl
}

// finish ends the transaction on the memory node: at commit it writes every
// value first, then every header (new meta and release word), so that no lock
// is released before all of the transaction's values are in place; at abort
// it only releases. Locks whose acquisition outcome is unknown are released
// by CAS from this transaction's tag.
//
// If the memory-node connection drops midway, part of the verbs may have run,
// and a blind retry could overwrite a lock that a later transaction took after
// ours was released. So retries first read the lock words of memory-node
// locks and redo only those still holding this transaction's tag, releasing
// them by CAS(tag → release). Locks of ownership paths stay held in their
// owner's table until Released is called after finish, so nobody else can
// have taken them and they are redone unconditionally. Retries go on, with
// backoff, until CleanupTimeout; the caller's context is not consulted,
// because locks left held would block every later transaction on them.
func (t *tx) finish(commit bool) error {
	defer t.released(commit)
	if len(t.order) == 0 && len(t.unknown) == 0 {
		return nil
	}
	cfg := t.c.e.cfg
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), cfg.CleanupTimeout)
	defer cancel()
	err := t.execAll(ctx, t.finishVerbs(commit, nil))
	backoff := cfg.CleanupBackoff
	for err != nil {
		if !errors.Is(err, rdma.ErrConnectionLost) && !errors.Is(err, rdma.ErrFlushed) {
			t.keepRedo(commit)
			return fmt.Errorf("occ: finishing transaction: %w", err)
		}
		select {
		case <-ctx.Done():
			t.keepRedo(commit)
			return fmt.Errorf("occ: could not finish transaction within %v (its locks may stay held): %w", cfg.CleanupTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cfg.CleanupTimeout/4)
		var held map[uint64]bool
		if held, err = t.heldByTag(ctx); err == nil {
			err = t.execAll(ctx, t.finishVerbs(commit, held))
		}
	}
	if commit {
		for _, r := range t.order {
			if l := t.locks[r]; l.dirty && l.present {
				t.c.e.cache.put(r, l.req.SlotAddr)
			} else if l.dirty {
				t.c.e.cache.drop(r)
			}
		}
	}
	return nil
}

// keepRedo is called when finish gives up: locks may stay held, so the log
// stays marked running at Close; and a commit's record may be all that
// finishes its write-back (in the next incarnation's recovery), so the
// coordinator moves to a spare slot rather than overwrite it.
func (t *tx) keepRedo(commit bool) {
	l := t.c.e.redo
	if l == nil {
		return
	}
	l.abandoned.Add(1)
	if commit && t.redo != nil {
		t.c.redo = l.slot(true)
		// Its owner-table grants stay held: released, the slots could be
		// locked again at the versions the record names, and a second
		// record would then name them too. The owner ends them from the
		// record once they are stale.
		t.keepGrants = true
	}
}

// heldByTag reads the lock words of this transaction's memory-node locks
// (and unknown acquisitions) and returns the slot addresses still holding
// its tag.
func (t *tx) heldByTag(ctx context.Context) (map[uint64]bool, error) {
	var wrs []rdma.WorkRequest
	add := func(tl *store.TableLayout, addr uint64) {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: addr + store.LockOffset, Local: make([]byte, 8)})
	}
	for _, r := range t.order {
		if l := t.locks[r]; l.res.Path == PathMNCAS {
			add(l.t, l.req.SlotAddr)
		}
	}
	for _, q := range t.unknown {
		add(q.Table, q.SlotAddr)
	}
	if err := t.execAll(ctx, wrs); err != nil {
		return nil, err
	}
	held := make(map[uint64]bool, len(wrs))
	for _, w := range wrs {
		if binary.LittleEndian.Uint64(w.Local) == t.tag {
			held[w.RemoteAddr-store.LockOffset] = true
		}
	}
	return held, nil
}

// finishVerbs builds the verbs of finish. held == nil means the first
// attempt, where every lock is known to be held; otherwise memory-node locks
// not in held are skipped and the others are released by CAS.
func (t *tx) finishVerbs(commit bool, held map[uint64]bool) []rdma.WorkRequest {
	var values, headers []rdma.WorkRequest
	if commit && t.redo != nil {
		// Before anything of the write-back: a doorbell runs a prefix of
		// its work requests, so a record is complete whenever any of them
		// ran (see "Crash recovery").
		r := t.c.e.redo.region
		values = append(values, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey,
			RemoteAddr: r.Addr + uint64(redoHeader+t.redoSlot*t.c.e.redo.cfg.RecordBytes), Local: t.redo})
	}
	if commit && t.c.e.cfg.ExactlyOnce && t.writes() {
		// First, so that it lands before any lock is released.
		id := make([]byte, 8)
		binary.LittleEndian.PutUint64(id, t.id)
		values = append(values, rdma.WorkRequest{Op: rdma.OpWrite, RKey: t.c.e.layout.Ledger.RKey,
			RemoteAddr: store.LedgerAddr(t.c.e.layout.Ledger, t.id), Local: id})
	}
	for _, r := range t.order {
		l := t.locks[r]
		rkey, addr := l.t.Region.RKey, l.req.SlotAddr
		retryMN := held != nil && l.res.Path == PathMNCAS
		if retryMN && !held[addr] {
			continue // released by an earlier attempt
		}
		release := l.releaseWord(commit)
		if commit && l.dirty {
			if l.present {
				buf := make([]byte, (uint64(l.t.Table.ValueSize)+7)&^7)
				copy(buf, l.value)
				values = append(values, rdma.WorkRequest{Op: rdma.OpWrite, RKey: rkey, RemoteAddr: addr + store.ValueOffset, Local: buf})
			}
			if !retryMN {
				hdr := make([]byte, 16)
				binary.LittleEndian.PutUint64(hdr[store.MetaOffset:], uint64(l.meta.NextMeta(l.present)))
				binary.LittleEndian.PutUint64(hdr[store.LockOffset:], release)
				headers = append(headers, rdma.WorkRequest{Op: rdma.OpWrite, RKey: rkey, RemoteAddr: addr, Local: hdr})
				continue
			}
			meta := make([]byte, 8)
			binary.LittleEndian.PutUint64(meta, uint64(l.meta.NextMeta(l.present)))
			values = append(values, rdma.WorkRequest{Op: rdma.OpWrite, RKey: rkey, RemoteAddr: addr + store.MetaOffset, Local: meta})
		}
		if retryMN {
			headers = append(headers, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: rkey,
				RemoteAddr: addr + store.LockOffset, Compare: t.tag, Swap: release})
			continue
		}
		w := make([]byte, 8)
		binary.LittleEndian.PutUint64(w, release)
		headers = append(headers, rdma.WorkRequest{Op: rdma.OpWrite, RKey: rkey, RemoteAddr: addr + store.LockOffset, Local: w})
	}
	for _, q := range t.unknown {
		if held != nil && !held[q.SlotAddr] {
			continue
		}
		headers = append(headers, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: q.Table.Region.RKey,
			RemoteAddr: q.SlotAddr + store.LockOffset, Compare: q.Tag, Swap: 0})
	}
	return append(values, headers...)
}

// redoRecord encodes, when the engine keeps a redo log, the record of the
// transaction's writes (every path's: the recovery of memory-node CAS locks
// matches its entries by tag, the repair of a dead owner's held sentinels
// by version). It fails, before the commit point, when the coordinator has
// no slot or the record does not fit one.
func (t *tx) redoRecord() error {
	l := t.c.e.redo
	if l == nil {
		return nil
	}
	n, count := redoRecordHeader, 0
	ledger := t.c.e.cfg.ExactlyOnce && t.writes()
	if ledger {
		n += redoEntryHeader
	}
	for _, r := range t.order {
		if e := t.locks[r]; e.dirty {
			n += redoEntryHeader
			if e.present {
				n += (e.t.Table.ValueSize + 7) &^ 7
			}
			count++
		}
	}
	if count == 0 {
		return nil
	}
	if t.c.redo < 0 {
		return fmt.Errorf("%w: coordinator has no record slot (the log has %d)", ErrRedo, l.cfg.Slots)
	}
	if n > l.cfg.RecordBytes {
		return redoTooLarge(count, n, l.cfg.RecordBytes)
	}
	rec := beginRedo(t.tag, n)
	if ledger {
		// A repair writes the ledger word too, or a retry of this
		// transaction on another node would commit it a second time.
		rec = appendLedgerEntry(rec, store.LedgerAddr(t.c.e.layout.Ledger, t.id), t.id)
	}
	for _, r := range t.order {
		if e := t.locks[r]; e.dirty {
			rec = appendRedoEntry(rec, e.t.Table.ID, e.present, e.req.SlotAddr, e.meta.NextMeta(e.present),
				e.releaseWord(true), r.Key, e.value, (e.t.Table.ValueSize+7)&^7)
		}
	}
	rec = finishRedo(rec)
	t.redo, t.redoSlot = rec, t.c.redo
	return nil
}

// execAll runs verbs in doorbells of at most rdma.MaxBatch, in order.
func (t *tx) execAll(ctx context.Context, wrs []rdma.WorkRequest) error {
	return execAll(ctx, t.c.qp, wrs)
}

// releaseWord is the lock word that releases l: its path's Release word,
// or 0 when the path asked for it (ClearWhenEmpty) and the slot is left
// without the requested record: empty, or holding another record (a stale
// cached address, or an insert that met a concurrent one).
func (l *lockEntry) releaseWord(commit bool) uint64 {
	if !l.res.ClearWhenEmpty {
		return l.res.Release
	}
	ours := l.ours && !l.inserted
	if commit && l.dirty {
		ours = l.present
	}
	if ours {
		return l.res.Release
	}
	return 0
}

func (t *tx) released(commit bool) {
	if len(t.order) == 0 {
		return
	}
	reqs := make([]LockRequest, 0, len(t.order))
	res := make([]LockResult, 0, len(t.order))
	for _, r := range t.order {
		l := t.locks[r]
		if t.keepGrants && (l.res.Path == PathLocal || l.res.Path == PathOwnerRPC) {
			continue
		}
		reqs = append(reqs, l.req)
		lr := l.res
		lr.Release = l.releaseWord(commit)
		res = append(res, lr)
	}
	t.c.locker.Released(reqs, res)
	t.order = t.order[:0]
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
