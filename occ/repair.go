package occ

import (
	"context"
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
// counted) until the sweep makes room.
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
	// Moot: words that changed before the sweep reached them (their holder
	// was alive after all); Dropped: suspects not watched (the watch list
	// was full).
	Redone, Released, Moot, Dropped uint64
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

// RepairStats returns the sweep's counters.
func (l *RedoLog) RepairStats() RepairStats {
	l.suspectMu.Lock()
	defer l.suspectMu.Unlock()
	return l.repairStats
}

// Sweep ends every suspect word first seen RepairAfter or more before now
// that is still in place. It returns what it did in this call.
func (l *RedoLog) Sweep(ctx context.Context, layout *store.Layout, now time.Time) (RepairStats, error) {
	l.suspectMu.Lock()
	var due []slotRef
	words := map[slotRef]uint64{}
	for k, s := range l.suspects {
		if now.Sub(s.first) >= l.cfg.RepairAfter {
			due = append(due, k)
			words[k] = s.word
		}
	}
	l.suspectMu.Unlock()
	var st RepairStats
	if len(due) == 0 {
		return st, nil
	}
	l.repairMu.Lock()
	defer l.repairMu.Unlock()
	qp, err := l.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return st, err
	}
	defer qp.Close()
	var recs []record // read once per sweep, after the words were due
	read := false
	rp := l.repairer(qp)
	for _, k := range due {
		tl, err := layout.Table(k.table)
		if err != nil {
			return st, err
		}
		w := words[k]
		meta, cur, err := readHeader(ctx, qp, tl, k.addr)
		if err != nil {
			return st, err
		}
		var e *redoEntry
		if cur == w && !read {
			if recs, err = l.allRecords(ctx, qp, layout); err != nil {
				return st, err
			}
			read = true
		}
		if cur == w {
			e = committedEntry(recs, k, meta)
		}
		ended := false
		if cur == w {
			if ended, err = rp.end(ctx, tl, k.addr, w, e); err != nil {
				return st, err
			}
		}
		switch {
		case !ended:
			st.Moot++
		case e != nil:
			st.Redone++
		default:
			st.Released++
		}
		l.suspectMu.Lock()
		if s, ok := l.suspects[k]; ok && s.word == w {
			delete(l.suspects, k)
		}
		l.suspectMu.Unlock()
	}
	l.suspectMu.Lock()
	l.repairStats.Redone += st.Redone
	l.repairStats.Released += st.Released
	l.repairStats.Moot += st.Moot
	l.suspectMu.Unlock()
	return st, nil
}

// EndHeld ends the lock of slot addr of table whose holder is known to be
// gone and whose word, if the holder's lock verb applied, is w: finished
// from its transaction's record if that committed, else released to the
// free word. It is for the owner of a lock table whose grant outlived any
// transaction (the grant keeps every other grantee off the slot meanwhile,
// so w cannot be someone else's). word is the lock word the slot has
// afterwards.
func (l *RedoLog) EndHeld(ctx context.Context, layout *store.Layout, table txn.TableID, addr, w uint64) (st RepairStats, word uint64, err error) {
	tl, err := layout.Table(table)
	if err != nil {
		return st, 0, err
	}
	l.repairMu.Lock()
	defer l.repairMu.Unlock()
	qp, err := l.dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return st, 0, err
	}
	defer qp.Close()
	meta, cur, err := readHeader(ctx, qp, tl, addr)
	if err != nil || cur != w {
		st.Moot++
		return st, cur, err
	}
	recs, err := l.allRecords(ctx, qp, layout)
	if err != nil {
		return st, cur, err
	}
	e := committedEntry(recs, slotRef{table, addr}, meta)
	ended, err := l.repairer(qp).end(ctx, tl, addr, w, e)
	switch {
	case err != nil:
		return st, cur, err
	case !ended:
		st.Moot++
	case e != nil:
		st.Redone++
	default:
		st.Released++
	}
	_, word, err = readHeader(ctx, qp, tl, addr)
	l.suspectMu.Lock()
	l.repairStats.Redone += st.Redone
	l.repairStats.Released += st.Released
	l.repairStats.Moot += st.Moot
	l.suspectMu.Unlock()
	return st, word, err
}

// allRecords reads the valid records of every node's redo region.
func (l *RedoLog) allRecords(ctx context.Context, qp rdma.QueuePair, layout *store.Layout) ([]record, error) {
	regions, err := l.dev.Regions(ctx)
	if err != nil {
		return nil, err
	}
	var out []record
	for _, r := range regions {
		if !strings.HasPrefix(r.Name, redoRegionPrefix) {
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
// committed a write of slot k and did not write it back: the one whose new
// meta is the version after the slot's (meta). At most one exists: its
// transaction locked the slot at that version and holds it still (a
// transaction that wrote the slot back moved its version past), and a
// record is written only after validation, so that transaction committed.
func committedEntry(recs []record, k slotRef, meta store.Meta) *redoEntry {
	for _, r := range recs {
		for i := range r.entries {
			e := &r.entries[i]
			if e.table == k.table && e.addr == k.addr && e.meta.Version() == meta.Version()+1 {
				return e
			}
		}
	}
	return nil
}
