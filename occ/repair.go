package occ

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
)

// Repair of locks whose holder is gone, on contact (see "Crash recovery"
// in the package documentation): a coordinator refused by a lock word that
// no live transaction can still be using reports it (Suspect); a word still
// unchanged RepairAfter later is ended by Sweep — finished from the redo
// record of its transaction if that transaction committed, else released.

// maxSuspects bounds the lock words a node watches; more are dropped (and
// counted) until a sweep makes room. Every sweep forgets the watched words
// that changed (their holder was alive), so the list holds stuck words and
// the contention of the last sweep period only.
const maxSuspects = 1024

// suspect is a lock word seen refusing a lock, and when it was first seen.
type suspect struct {
	word  uint64
	first time.Time
}

type slotRef struct {
	table txn.TableID
	addr  uint64
}

// RepairStats counts what the sweep did.
type RepairStats struct {
	// Redone: locks of committed transactions finished from their record;
	// Released: locks of transactions that never began their write-back;
	// Moot: words that changed before they were ended (their holder was
	// alive after all, or the lock's verb never applied); Dropped: suspects
	// not watched (the watch list was full).
	Redone, Released, Moot, Dropped uint64
}

func (st *RepairStats) add(o RepairStats) {
	st.Redone += o.Redone
	st.Released += o.Released
	st.Moot += o.Moot
	st.Dropped += o.Dropped
}

// Suspect reports that word w of a slot refused a lock and no live
// transaction can be using it after RepairAfter: a CAS tag (unique to one
// transaction attempt, which ends within its request timeout and
// CleanupTimeout), or a held owner sentinel of an activation the locker
// knows is retired (its grants all predate the retirement;
// LockResult.Retired). The first sighting starts the clock; a different
// word restarts it.
func (l *RedoLog) Suspect(table txn.TableID, addr, w uint64, now time.Time) {
	k := slotRef{table, addr}
	l.suspectMu.Lock()
	defer l.suspectMu.Unlock()
	if s, ok := l.suspects[k]; ok && s.word == w {
		return
	}
	if _, ok := l.suspects[k]; !ok && len(l.suspects) >= maxSuspects {
		l.repairStats.Dropped++
		return
	}
	if l.suspects == nil {
		l.suspects = map[slotRef]suspect{}
	}
	l.suspects[k] = suspect{word: w, first: now}
}

// RepairStats returns the counters of every repair so far.
func (l *RedoLog) RepairStats() RepairStats {
	l.suspectMu.Lock()
	defer l.suspectMu.Unlock()
	return l.repairStats
}

func (l *RedoLog) count(st RepairStats) {
	l.suspectMu.Lock()
	l.repairStats.add(st)
	l.suspectMu.Unlock()
}

// HeldWord names a slot whose lock a gone holder may have left as Word.
type HeldWord struct {
	Table txn.TableID
	Addr  uint64
	Word  uint64
}

// Sweep ends every suspect word first seen RepairAfter or more before now
// that is still in place, and forgets the suspects whose word changed. It
// returns what it did in this call.
func (l *RedoLog) Sweep(ctx context.Context, layout *store.Layout, now time.Time) (RepairStats, error) {
	l.suspectMu.Lock()
	all := make([]HeldWord, 0, len(l.suspects))
	due := map[slotRef]bool{}
	for k, s := range l.suspects {
		all = append(all, HeldWord{k.table, k.addr, s.word})
		if now.Sub(s.first) >= l.cfg.RepairAfter {
			due[k] = true
		}
	}
	l.suspectMu.Unlock()
	if len(all) == 0 {
		return RepairStats{}, nil
	}
	l.repairMu.Lock()
	defer l.repairMu.Unlock()
	qp, err := l.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return RepairStats{}, err
	}
	defer qp.Close()
	rp := l.repairer(qp, layout)
	if err := rp.resume(ctx); err != nil {
		return RepairStats{}, err
	}
	cur, err := readHeaders(ctx, qp, layout, all)
	if err != nil {
		return RepairStats{}, err
	}
	var ends []HeldWord
	var gone []HeldWord
	for i, h := range all {
		switch {
		case cur[i].word != h.Word:
			gone = append(gone, h) // its holder moved on: not stuck
		case due[slotRef{h.Table, h.Addr}]:
			ends = append(ends, h)
		}
	}
	st, _, err := rp.endAll(ctx, layout, ends)
	l.suspectMu.Lock()
	for _, h := range append(gone, ends...) {
		if s, ok := l.suspects[slotRef{h.Table, h.Addr}]; ok && s.word == h.Word {
			delete(l.suspects, slotRef{h.Table, h.Addr})
		}
	}
	l.repairStats.add(st)
	l.suspectMu.Unlock()
	return st, err
}

// EndHeld ends the locks of slots whose holders are known to be gone and
// whose words, if the holders' lock verbs applied, are the given ones:
// each finished from its transaction's record if that committed, else
// released to the free word. It is for the owner of a lock table whose
// grants outlived any transaction; the caller keeps every other grantee
// off those slots meanwhile (owner.Table.StaleLocks pins them), so a word
// cannot be someone else's. words are the slots' lock words afterwards.
func (l *RedoLog) EndHeld(ctx context.Context, layout *store.Layout, held []HeldWord) (st RepairStats, words []uint64, err error) {
	if len(held) == 0 {
		return st, nil, nil
	}
	l.repairMu.Lock()
	defer l.repairMu.Unlock()
	qp, err := l.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return st, nil, err
	}
	defer qp.Close()
	rp := l.repairer(qp, layout)
	if err := rp.resume(ctx); err != nil {
		return st, nil, err
	}
	st, words, err = rp.endAll(ctx, layout, held)
	l.count(st)
	return st, words, err
}

// endAll ends each held word still in place (the records are read once,
// after the words were found stuck: a gone holder's record predates that)
// and returns the words afterwards.
func (rp *repairer) endAll(ctx context.Context, layout *store.Layout, held []HeldWord) (st RepairStats, words []uint64, err error) {
	if len(held) == 0 {
		return st, nil, nil
	}
	recs, err := rp.log.allRecords(ctx, rp.qp, layout)
	if err != nil {
		return st, nil, err
	}
	cur, err := readHeaders(ctx, rp.qp, layout, held)
	if err != nil {
		return st, nil, err
	}
	words = make([]uint64, len(held))
	for i, h := range held {
		words[i] = cur[i].word
		if cur[i].word != h.Word {
			st.Moot++
			continue
		}
		tl, err := layout.Table(h.Table)
		if err != nil {
			return st, words, err
		}
		e, led := committedEntry(recs, slotRef{h.Table, h.Addr}, cur[i].meta)
		ended, err := rp.end(ctx, tl, h.Addr, h.Word, e, led)
		switch {
		case err != nil:
			return st, words, err
		case !ended:
			st.Moot++
		case e != nil:
			st.Redone++
		default:
			st.Released++
		}
		if _, words[i], err = readHeader(ctx, rp.qp, tl, h.Addr); err != nil {
			return st, words, err
		}
	}
	return st, words, nil
}

type header struct {
	meta store.Meta
	word uint64
}

// readHeaders reads the meta and lock word of each slot, in doorbells.
func readHeaders(ctx context.Context, qp rdma.QueuePair, layout *store.Layout, slots []HeldWord) ([]header, error) {
	out := make([]header, len(slots))
	for first := 0; first < len(slots); first += rdma.MaxBatch {
		n := min(rdma.MaxBatch, len(slots)-first)
		wrs := make([]rdma.WorkRequest, n)
		for i := range n {
			tl, err := layout.Table(slots[first+i].Table)
			if err != nil {
				return nil, err
			}
			wrs[i] = rdma.WorkRequest{Op: rdma.OpRead, RKey: tl.Region.RKey, RemoteAddr: slots[first+i].Addr + store.MetaOffset, Local: make([]byte, 16)}
		}
		if err := execAll(ctx, qp, wrs); err != nil {
			return nil, err
		}
		for i, wr := range wrs {
			out[first+i] = header{store.Meta(binary.LittleEndian.Uint64(wr.Local)), binary.LittleEndian.Uint64(wr.Local[8:])}
		}
	}
	return out, nil
}

// allRecords reads the valid records of the redo regions that are marked
// running: a cleanly closed log (or one its next incarnation recovered)
// has no transaction left to finish.
func (l *RedoLog) allRecords(ctx context.Context, qp rdma.QueuePair, layout *store.Layout) ([]record, error) {
	regions, err := l.dev.Regions(ctx)
	if err != nil {
		return nil, err
	}
	var out []record
	for _, r := range regions {
		if !strings.HasPrefix(r.Name, redoRegionPrefix) || r.Length < redoHeader {
			continue
		}
		state := make([]byte, 8)
		if err := execOne(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr, Local: state}); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint64(state) == 0 {
			continue
		}
		recs, err := readRecords(ctx, qp, layout, r)
		if err != nil {
			return nil, fmt.Errorf("redo region %q: %w", r.Name, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// committedEntry returns the entry, among recs, of the transaction that
// committed a write of slot k and did not write it back — the one whose
// new meta is the version after the slot's (meta) — with its record's
// ledger entry, if any. At most one exists: its transaction locked the
// slot at that version and holds it still (a transaction that wrote the
// slot back moved its version past), and a record is written only after
// validation, so that transaction committed. (A transaction whose
// write-back gave up keeps its owner-table grants, so no second one can
// lock the slot at that version; package occ, "Crash recovery".)
func committedEntry(recs []record, k slotRef, meta store.Meta) (e, led *redoEntry) {
	for _, r := range recs {
		for i := range r.entries {
			x := &r.entries[i]
			if !x.ledger && x.table == k.table && x.addr == k.addr && x.meta.Version() == meta.Version()+1 {
				return x, ledgerEntry(r.entries)
			}
		}
	}
	return nil, nil
}

// ledgerEntry returns a record's commit ledger entry, if it has one.
func ledgerEntry(entries []redoEntry) *redoEntry {
	for i := range entries {
		if entries[i].ledger {
			return &entries[i]
		}
	}
	return nil
}
