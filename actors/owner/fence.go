package owner

import (
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// Key-group fences, the table's half (the protocol and its argument are in
// the package documentation, "Key-group fences"). The table remembers, per
// key group, the activation whose fence word this node set on the memory
// node and when, so that grants may trust it only while the key group is
// in that activation and the activation is active; once it is not, the
// fence is given back after a drain deadline (DueUnfences), by which time
// every WRITE a grant trusted it for has landed (assumption A3).

// fenceRec is one fence this node holds.
type fenceRec struct {
	cohort control.CohortID
	epoch  uint64
	rkey   uint32
	addr   uint64
	// atMicros: the fence word was known to be the activation's at this
	// time (after the CAS or READ that showed it completed).
	atMicros int64
	// lostMicros: when the table first saw the key group out of the
	// activation (or the activation not active); 0 while it is in.
	lostMicros int64
}

// Unfence is a fence word to give back: CAS(Word → 0) at (RKey, Addr).
type Unfence struct {
	KeyGroup control.KeyGroup
	RKey     uint32
	Addr     uint64
	Word     uint64
}

// holdsFence reports whether the fence of kg at (c, epoch) may be trusted
// now: kg is in the installed activation (c, epoch), and it is active.
func (t *Table) holdsFence(c control.CohortID, epoch uint64, kg control.KeyGroup) bool {
	cs, ok := t.cohorts[c]
	return ok && cs.epoch == epoch && cs.phase == PhaseActive && t.kgs[kg] == c
}

// Fenced records that the fence word of key group kg at (rkey, addr) is
// the free sentinel of activation (c, epoch) since atMicros. It records
// nothing (and returns false) unless kg is in that activation and the
// activation is active, or when MaxFences fences are held already. A fence
// recorded for the same activation keeps its earlier time.
func (t *Table) Fenced(c control.CohortID, epoch uint64, kg control.KeyGroup, rkey uint32, addr uint64, atMicros int64) bool {
	if !t.holdsFence(c, epoch, kg) {
		return false
	}
	if f, ok := t.fences[kg]; ok && f.cohort == c && f.epoch == epoch && f.addr == addr && f.rkey == rkey {
		if f.atMicros == untrusted {
			f.atMicros = atMicros
		}
		f.lostMicros = 0
		t.fences[kg] = f
		delete(t.lost, kg)
		return true
	}
	if _, ok := t.fences[kg]; !ok && len(t.fences) >= t.cfg.MaxFences {
		return false
	}
	t.fences[kg] = fenceRec{cohort: c, epoch: epoch, rkey: rkey, addr: addr, atMicros: atMicros}
	delete(t.lost, kg)
	return true
}

// FenceSince returns when the fence of kg at (c, epoch) was known set, if
// the table holds it and may trust it now (see holdsFence).
func (t *Table) FenceSince(c control.CohortID, epoch uint64, kg control.KeyGroup) (int64, bool) {
	f, ok := t.fences[kg]
	if !ok || f.cohort != c || f.epoch != epoch || f.atMicros == untrusted || !t.holdsFence(c, epoch, kg) {
		return 0, false
	}
	return f.atMicros, true
}

// Fences returns the number of fences the table holds (given back or not).
func (t *Table) Fences() int { return len(t.fences) }

// NoteFenceLoss records, at nowMicros, which fences the table stopped
// trusting (their key group left the activation, or the activation was
// frozen or retired) and which it trusts again (the key group came back).
// It scans the fences only if a cohort changed since it last did.
// Service.Do calls it after every change it makes; DueUnfences also notes
// what it has not.
func (t *Table) NoteFenceLoss(nowMicros int64) {
	if !t.fencesDirty {
		return
	}
	t.fencesDirty = false
	for kg, f := range t.fences {
		held := t.holdsFence(f.cohort, f.epoch, kg)
		switch {
		case !held && f.lostMicros == 0:
			f.lostMicros = nowMicros
			t.fences[kg] = f
			t.lost[kg] = struct{}{}
		case held && f.lostMicros != 0:
			f.lostMicros = 0
			t.fences[kg] = f
			delete(t.lost, kg)
		}
	}
}

// DueUnfences returns, and forgets, up to max fences the table may no
// longer trust since at least a drain deadline (NoteFenceLoss). A fence
// whose key group came back to its activation before then is kept; one of
// an activation evicted to the fallback path is forgotten without a
// give-back.
func (t *Table) DueUnfences(nowMicros int64, max int) []Unfence {
	t.NoteFenceLoss(nowMicros)
	var out []Unfence
	kgs := make([]control.KeyGroup, 0, len(t.lost))
	for kg := range t.lost {
		kgs = append(kgs, kg)
	}
	slices.Sort(kgs) // deterministic order
	for _, kg := range kgs {
		f := t.fences[kg]
		if t.evicted(f.cohort, f.epoch) {
			// Its map places the cohort nowhere: every locker with that
			// map or a newer one takes the fence as retired (Locker.retired),
			// and the next owner of the key group claims it from there. A
			// give-back would only cost a CAS.
			delete(t.fences, kg)
			delete(t.lost, kg)
			continue
		}
		if nowMicros-f.lostMicros < t.cfg.DrainDeadlineMicros || len(out) >= max {
			continue
		}
		delete(t.fences, kg)
		delete(t.lost, kg)
		out = append(out, Unfence{KeyGroup: kg, RKey: f.rkey, Addr: f.addr, Word: Sentinel(f.cohort, f.epoch, false)})
	}
	return out
}

// evicted reports whether activation (c, epoch) was retired here with its
// cohort going to the fallback path (a tombstone without an owner).
func (t *Table) evicted(c control.CohortID, epoch uint64) bool {
	if cs, ok := t.cohorts[c]; ok && cs.epoch == epoch {
		return false
	}
	tb, ok := t.tombs[c]
	return ok && tb.epoch == epoch && tb.moved.Owner == ""
}

// untrusted is the time of a fence no grant may trust until it is known
// set again (Fenced).
const untrusted = math.MaxInt64

// distrustFences makes the fences of activation (c, epoch) untrusted until
// each is seen set again, as Fence does with marks: the fenced holders'
// WRITEs may still be on their way. They are still given back when lost.
func (t *Table) distrustFences(c control.CohortID, epoch uint64) {
	for kg, f := range t.fences {
		if f.cohort == c && f.epoch == epoch {
			f.atMicros = untrusted
			t.fences[kg] = f
		}
	}
}
