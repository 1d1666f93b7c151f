package owner

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
)

// Holder identifies the transaction attempt that holds a lock. The Locker
// uses the attempt's CAS tag (store.CASTag(node, seq)): it is unique per
// attempt cluster-wide and the same on every retransmission of that attempt's
// requests, so it gives both idempotency — (transaction, attempt) — and
// exclusion between two attempts that share a transaction id. On the owner
// RPC it travels in LockRequest.txn_id. 0 is not a valid holder.
type Holder = uint64

// Key is a record: its table and its 64-bit key.
type Key = txn.Ref

// Status is the outcome of an Acquire or a Release.
type Status uint8

const (
	// StatusOK: Acquire — every key is held by the holder; Release — done.
	StatusOK Status = iota + 1
	// StatusConflict: a key is held by another holder (Acquire only). The
	// keys before it stay granted (AcquireReply.Granted).
	StatusConflict
	// StatusMoved: the cohort was retired here; AcquireReply.Moved says
	// where it went (an empty owner: it is not owned at all, use the MN CAS
	// path). Never a grant.
	StatusMoved
	// StatusStaleEpoch: the request's epoch is older than the epoch the
	// cohort was installed at here (Acquire), or differs from the epoch the
	// locks were granted at (Release). Refresh the OwnerMap and retry.
	StatusStaleEpoch
	// StatusRetry: the cohort is frozen for a migration, or the requester
	// knows a newer OwnerMap than this table and the cohort is not installed
	// yet. Retryable: retry after RetryAfterMicros (at Epoch or later);
	// never buffered.
	StatusRetry
	// StatusNotOwner: the cohort is neither installed nor tombstoned here
	// and the requester's epoch is not newer than this table's: its map is
	// wrong or stale. Refresh past Epoch and retry.
	StatusNotOwner
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusConflict:
		return "conflict"
	case StatusMoved:
		return "moved"
	case StatusStaleEpoch:
		return "stale-epoch"
	case StatusRetry:
		return "retry"
	case StatusNotOwner:
		return "not-owner"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Moved is the typed redirect of invariant I4.
type Moved struct {
	// Owner is the membership name of the node that owns the cohort at
	// Epoch, or "" when the cohort is not owned (MN CAS path).
	Owner string
	// Epoch is the OwnerMap epoch at which Owner became authoritative.
	Epoch uint64
}

// AcquireRequest asks for exclusive locks on records of one cohort.
type AcquireRequest struct {
	Cohort control.CohortID
	// Epoch is the requester's OwnerMap epoch; it must not be older than
	// the epoch the cohort was installed at here.
	Epoch  uint64
	Holder Holder
	// Keys are tried in order; the first conflict stops the request.
	Keys []Key
	// Requester and RequestID are the idempotency key: a request repeating
	// a remembered (Requester, RequestID) gets the remembered reply and
	// changes nothing. RequestID 0 means no idempotency key.
	Requester string
	RequestID uint64
	// NowMicros is the time of the request (recorded with each grant).
	NowMicros int64
}

// AcquireReply answers an AcquireRequest.
type AcquireReply struct {
	Status Status
	// Epoch is the cohort's install epoch here (OK, Conflict, StaleEpoch,
	// Retry), the epoch every grant is stamped with and releases must name;
	// for NotOwner and a Retry of an unknown cohort, the newest epoch this
	// table has seen.
	Epoch uint64
	// Granted are the indexes into Keys the holder holds after this request:
	// all of them for OK, those before ConflictIndex for Conflict.
	Granted []int
	// Already are the indexes of Granted the holder already held before
	// this request (a retried Acquire is granted again, not a conflict).
	Already []int
	// Marked are the indexes of Granted whose key is marked (see Mark): the
	// key's memory-node lock word is known to be the cohort's owner
	// sentinel at Epoch, so the grantee may set it held by a plain WRITE.
	Marked []int
	// Taken are the new grants of keys another cohort installed in this
	// table had marked: the table dropped that mark in the same step (see
	// "Re-cut cohorts" in the package documentation), and the key's lock
	// word is expected to be that cohort's free sentinel, Word. The grantee
	// takes it over by CAS(Word → its held sentinel).
	Taken []TakenWord
	// ConflictIndex is the key that conflicted, and ConflictHolder its
	// holder (Conflict only).
	ConflictIndex  int
	ConflictHolder Holder
	// Moved is set for StatusMoved.
	Moved Moved
	// RetryAfterMicros is set for StatusRetry.
	RetryAfterMicros int64
	// FenceAgeMicros, parallel to Granted, is set only on replies of the
	// owner RPC (Locker.lockRPC): messages.LockReply.fence_age_micros.
	FenceAgeMicros []uint64
}

// TakenWord is a grant of a key whose mark the table took from another
// installed cohort: Index into the request's Keys, and Word, that cohort's
// free sentinel.
type TakenWord struct {
	Index int
	Word  uint64
}

func (r AcquireReply) clone() AcquireReply {
	r.Granted, r.Already, r.Marked = slices.Clone(r.Granted), slices.Clone(r.Already), slices.Clone(r.Marked)
	r.Taken, r.FenceAgeMicros = slices.Clone(r.Taken), slices.Clone(r.FenceAgeMicros)
	return r
}

// ReleaseRequest releases locks of one holder in one cohort.
type ReleaseRequest struct {
	Cohort control.CohortID
	// Epoch is the epoch the locks were granted at (AcquireReply.Epoch).
	Epoch  uint64
	Holder Holder
	// Keys to release; keys the holder does not hold are ignored.
	Keys []Key
	// All releases every lock the holder has in the cohort (Keys ignored).
	All bool
	// Cleared are keys among Keys whose lock word the holder left 0 rather
	// than the cohort's free sentinel (a slot left empty): they are no
	// longer marked.
	Cleared []Key
}

// ReleaseReply answers a ReleaseRequest.
type ReleaseReply struct {
	// Status is OK, StaleEpoch, Moved or NotOwner (a frozen cohort accepts
	// releases).
	Status   Status
	Released int
	Epoch    uint64
	Moved    Moved
}

// Config bounds a Table. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// MaxCohorts caps the installed cohorts (default 1024, the planner's cap).
	MaxCohorts int
	// MaxKeyGroupsPerCohort caps a cohort's key groups (default 4096).
	MaxKeyGroupsPerCohort int
	// MaxLocks caps the locks held in the whole table (default 1<<20).
	MaxLocks int
	// MaxKeysPerRequest caps the keys of one Acquire or Release (default 1024).
	MaxKeysPerRequest int
	// MaxIdempotencyKeys caps the remembered (requester, request id) replies;
	// the oldest is forgotten first (default 1<<14).
	MaxIdempotencyKeys int
	// MaxTombstones caps the remembered retired cohorts; the oldest is
	// forgotten first, after which a late request gets NotOwner (still
	// never a grant) (default 1<<14).
	MaxTombstones int
	// DrainDeadlineMicros is how long after a freeze Fence waits before it
	// may fence the remaining holders (default 50 ms; SPEC §6 drain ≈ 10 ms).
	DrainDeadlineMicros int64
	// RetryAfterMicros is the wait suggested with StatusRetry (default 1 ms).
	RetryAfterMicros int64
	// MaxMarks caps the marked keys of the whole table (default 1<<20);
	// past it Mark marks nothing more (grants of unmarked keys cost a CAS).
	MaxMarks int
	// MaxFences caps the key-group fences the table remembers (default
	// 1<<18, more key groups than the planner places: 1024 cohorts of at
	// most 64); past it Fenced records nothing more, and grants of records
	// of unrecorded key groups cost a CAS.
	MaxFences int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{MaxCohorts: 1024, MaxKeyGroupsPerCohort: 4096, MaxLocks: 1 << 20, MaxKeysPerRequest: 1024,
		MaxIdempotencyKeys: 1 << 14, MaxTombstones: 1 << 14, DrainDeadlineMicros: 50_000, RetryAfterMicros: 1000,
		MaxMarks: 1 << 20, MaxFences: 1 << 18}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.MaxCohorts, d.MaxCohorts)
	set(&c.MaxKeyGroupsPerCohort, d.MaxKeyGroupsPerCohort)
	set(&c.MaxLocks, d.MaxLocks)
	set(&c.MaxKeysPerRequest, d.MaxKeysPerRequest)
	set(&c.MaxIdempotencyKeys, d.MaxIdempotencyKeys)
	set(&c.MaxTombstones, d.MaxTombstones)
	set(&c.MaxMarks, d.MaxMarks)
	set(&c.MaxFences, d.MaxFences)
	if c.DrainDeadlineMicros == 0 {
		c.DrainDeadlineMicros = d.DrainDeadlineMicros
	}
	if c.RetryAfterMicros == 0 {
		c.RetryAfterMicros = d.RetryAfterMicros
	}
	return c
}

// Validate reports every negative bound at once.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxCohorts", int64(c.MaxCohorts)}, {"MaxKeyGroupsPerCohort", int64(c.MaxKeyGroupsPerCohort)},
		{"MaxLocks", int64(c.MaxLocks)}, {"MaxKeysPerRequest", int64(c.MaxKeysPerRequest)},
		{"MaxIdempotencyKeys", int64(c.MaxIdempotencyKeys)}, {"MaxTombstones", int64(c.MaxTombstones)},
		{"DrainDeadlineMicros", c.DrainDeadlineMicros}, {"RetryAfterMicros", c.RetryAfterMicros},
		{"MaxMarks", int64(c.MaxMarks)}, {"MaxFences", int64(c.MaxFences)}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("owner: %s %d must not be negative", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Errors. Every error a Table returns wraps one of these.
var (
	// ErrLimit: a bound of Config was exceeded (see LimitError).
	ErrLimit = errors.New("owner: limit exceeded")
	// ErrUnknownCohort: the cohort is not installed here.
	ErrUnknownCohort = errors.New("owner: cohort not installed")
	// ErrEpochMismatch: an admin call named another epoch than the cohort's.
	ErrEpochMismatch = errors.New("owner: epoch mismatch")
	// ErrInstalled: Install of a cohort installed at another epoch or with
	// other key groups (retire it first).
	ErrInstalled = errors.New("owner: cohort already installed")
	// ErrStaleInstall: Install at an epoch not newer than the cohort's
	// tombstone (a retired activation never reactivates).
	ErrStaleInstall = errors.New("owner: install at a retired epoch")
	// ErrKeyGroupTaken: a key group is in another installed, active cohort.
	ErrKeyGroupTaken = errors.New("owner: key group in another cohort")
	// ErrNotFrozen: Fence or Retire of a cohort that is not frozen.
	ErrNotFrozen = errors.New("owner: cohort not frozen")
	// ErrDrainPending: Fence before the drain deadline.
	ErrDrainPending = errors.New("owner: drain deadline not reached")
	// ErrHoldersRemain: Retire of a cohort that still has holders (I3:
	// drain or fence first).
	ErrHoldersRemain = errors.New("owner: cohort still has lock holders")
	// ErrBadRequest: a malformed request (holder 0, key groups unsorted,
	// idempotency key reused for another request, …).
	ErrBadRequest = errors.New("owner: bad request")
)

// LimitError is the typed error of an exceeded bound.
type LimitError struct {
	What string
	N    int
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("owner: %s: %d exceeds the limit %d", e.What, e.N, e.Max)
}

// Is makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Phase is a cohort activation's phase in this table.
type Phase uint8

const (
	// PhaseActive grants locks.
	PhaseActive Phase = iota + 1
	// PhaseFrozen grants nothing (StatusRetry) but accepts releases.
	PhaseFrozen
)

func (p Phase) String() string {
	switch p {
	case PhaseActive:
		return "active"
	case PhaseFrozen:
		return "frozen"
	}
	return "none"
}

type lock struct {
	holder    Holder
	grantedAt int64
}

type cohortState struct {
	id       control.CohortID
	kgs      []control.KeyGroup
	epoch    uint64
	phase    Phase
	frozenAt int64
	locks    map[Key]lock
	holders  map[Holder]map[Key]struct{}
	// marked are the keys whose memory-node lock word is known to be this
	// activation's owner sentinel (free, or held by the key's holder).
	marked map[Key]struct{}
}

type tombstone struct {
	epoch uint64
	moved Moved
}

type idemKey struct {
	requester string
	id        uint64
}

type idemEntry struct {
	cohort control.CohortID
	holder Holder
	reply  AcquireReply
}

// Table is the owner lock table of one compute node: the locks of the
// cohorts it owns, each at the epoch it was installed at. It is a pure state
// machine — no goroutines, clock or I/O; time comes in as microseconds — and
// not safe for concurrent use (Service serialises it). See the package
// documentation for its invariants.
type Table struct {
	cfg     Config
	cohorts map[control.CohortID]*cohortState
	kgs     map[control.KeyGroup]control.CohortID
	tombs   map[control.CohortID]tombstone
	tombQ   []control.CohortID
	idem    map[idemKey]idemEntry
	idemQ   []idemKey
	locks   int
	marks   int
	epoch   uint64
	// slots: the cohort whose holder holds a key, whatever cohort asks for
	// it (one holder per key in the whole table, across cohorts); markOf:
	// the cohort that has a key marked (at most one per key).
	slots  map[Key]control.CohortID
	markOf map[Key]control.CohortID
	// pinned: keys whose stale grant is being ended (StaleLocks to Unpin);
	// Acquire refuses them, so their word cannot become a new grantee's.
	pinned map[Key]struct{}
	// fences: the key-group fences this node set (fence.go); lost: those
	// it no longer trusts, waiting to be given back.
	fences map[control.KeyGroup]fenceRec
	lost   map[control.KeyGroup]struct{}
	// fencesDirty: a cohort's key groups or phase changed since
	// NoteFenceLoss last looked (Install, Reconfigure, Freeze, Thaw,
	// Retire set it), so that it scans the fences only then.
	fencesDirty bool
}

// NewTable returns an empty table.
func NewTable(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Table{cfg: cfg.withDefaults(), cohorts: map[control.CohortID]*cohortState{},
		kgs: map[control.KeyGroup]control.CohortID{}, tombs: map[control.CohortID]tombstone{},
		idem: map[idemKey]idemEntry{}, slots: map[Key]control.CohortID{}, markOf: map[Key]control.CohortID{},
		pinned: map[Key]struct{}{}, fences: map[control.KeyGroup]fenceRec{}, lost: map[control.KeyGroup]struct{}{}}, nil
}

// Config returns the table's bounds with defaults applied.
func (t *Table) Config() Config { return t.cfg }

// Epoch returns the newest OwnerMap epoch the table has seen.
func (t *Table) Epoch() uint64 { return t.epoch }

// ObserveEpoch tells the table the node's OwnerMap reached epoch e (it
// decides Retry versus NotOwner for cohorts it does not know).
func (t *Table) ObserveEpoch(e uint64) { t.epoch = max(t.epoch, e) }

// Locks returns the number of locks held in the table.
func (t *Table) Locks() int { return t.locks }

// CohortOf returns the installed cohort holding key group kg, its install
// epoch and phase.
func (t *Table) CohortOf(kg control.KeyGroup) (control.CohortID, uint64, Phase, bool) {
	id, ok := t.kgs[kg]
	if !ok {
		return 0, 0, 0, false
	}
	c := t.cohorts[id]
	return id, c.epoch, c.phase, true
}

// HolderOf returns the holder of a record's lock in cohort c.
func (t *Table) HolderOf(c control.CohortID, k Key) (Holder, bool) {
	cs, ok := t.cohorts[c]
	if !ok {
		return 0, false
	}
	l, ok := cs.locks[k]
	return l.holder, ok
}

// Install activates cohort c with key groups kgs (sorted, distinct) at
// epoch: from now on the table grants its locks to requests at epoch or
// newer. Installing the same cohort again at the same epoch with the same
// key groups is a no-op (late acknowledgements are idempotent).
func (t *Table) Install(c control.CohortID, kgs []control.KeyGroup, epoch uint64) error {
	t.fencesDirty = true
	if err := (control.Cohort{ID: c, KeyGroups: kgs}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if len(kgs) > t.cfg.MaxKeyGroupsPerCohort {
		return &LimitError{What: fmt.Sprintf("cohort %d key groups", c), N: len(kgs), Max: t.cfg.MaxKeyGroupsPerCohort}
	}
	if cs, ok := t.cohorts[c]; ok {
		if cs.epoch == epoch && slices.Equal(cs.kgs, kgs) {
			return nil
		}
		return fmt.Errorf("%w: cohort %d at epoch %d (asked: epoch %d)", ErrInstalled, c, cs.epoch, epoch)
	}
	if tb, ok := t.tombs[c]; ok && epoch <= tb.epoch {
		return fmt.Errorf("%w: cohort %d retired at epoch %d, install at %d", ErrStaleInstall, c, tb.epoch, epoch)
	}
	if len(t.cohorts) >= t.cfg.MaxCohorts {
		return &LimitError{What: "installed cohorts", N: len(t.cohorts) + 1, Max: t.cfg.MaxCohorts}
	}
	if err := t.kgsFree(c, kgs); err != nil {
		return err
	}
	for _, kg := range kgs {
		t.kgs[kg] = c
	}
	t.cohorts[c] = &cohortState{id: c, kgs: slices.Clone(kgs), epoch: epoch, phase: PhaseActive,
		locks: map[Key]lock{}, holders: map[Holder]map[Key]struct{}{}, marked: map[Key]struct{}{}}
	t.dropTombstone(c)
	t.ObserveEpoch(epoch)
	return nil
}

// kgsFree checks that no other active cohort has one of kgs. Key groups of
// a frozen cohort (leaving this node, waiting to drain) may be given to
// another cohort: the frozen one grants nothing more, and the table's
// per-key exclusion spans cohorts, so both activations' holders still
// exclude each other (see "Re-cut cohorts" in the package documentation).
func (t *Table) kgsFree(c control.CohortID, kgs []control.KeyGroup) error {
	for _, kg := range kgs {
		if other, ok := t.kgs[kg]; ok && other != c && t.cohorts[other].phase == PhaseActive {
			return fmt.Errorf("%w: key group %d of cohort %d is in cohort %d", ErrKeyGroupTaken, kg, c, other)
		}
	}
	return nil
}

// Reconfigure changes the key groups of cohort c, installed and active at
// epoch, to kgs (sorted, distinct), as of OwnerMap epoch at (not older than
// the install epoch). The activation keeps its install epoch — the epoch of
// its sentinels — so its marks stay valid: key groups that leave it keep
// their marks until another cohort of this table is granted their keys
// (which takes the mark over, see Acquire) or another owner takes their
// words by the rules of Locker.retired; key groups that join it have no
// marks yet. Holders are kept. Key groups may not be in another active
// cohort (shrink that one first).
func (t *Table) Reconfigure(c control.CohortID, epoch uint64, kgs []control.KeyGroup, at uint64) error {
	t.fencesDirty = true
	if err := (control.Cohort{ID: c, KeyGroups: kgs}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if len(kgs) > t.cfg.MaxKeyGroupsPerCohort {
		return &LimitError{What: fmt.Sprintf("cohort %d key groups", c), N: len(kgs), Max: t.cfg.MaxKeyGroupsPerCohort}
	}
	cs, err := t.cohortAt(c, epoch)
	if err != nil {
		return err
	}
	if cs.phase != PhaseActive {
		return fmt.Errorf("%w: cohort %d is %s", ErrBadRequest, c, cs.phase)
	}
	if at < epoch {
		return fmt.Errorf("%w: cohort %d installed at epoch %d reconfigured at %d", ErrBadRequest, c, epoch, at)
	}
	if err := t.kgsFree(c, kgs); err != nil {
		return err
	}
	for _, kg := range cs.kgs {
		if t.kgs[kg] == c {
			delete(t.kgs, kg)
		}
	}
	for _, kg := range kgs {
		t.kgs[kg] = c
	}
	cs.kgs = slices.Clone(kgs)
	t.ObserveEpoch(at)
	return nil
}

// InstalledSentinel reports whether the owner sentinel w (free or held)
// belongs to an activation installed in this table, in any phase: its
// cohort is installed here at an install epoch equal to w's epoch field.
func (t *Table) InstalledSentinel(w uint64) bool {
	cs, ok := t.cohorts[control.CohortID(SentinelCohort(w))]
	return ok && cs.epoch&epochMask == SentinelEpoch(w)
}

// Acquire tries to lock req.Keys for req.Holder. It never waits: a key held
// by another holder is a conflict. It returns an error (and changes nothing)
// for a malformed request or an exceeded bound.
func (t *Table) Acquire(req AcquireRequest) (AcquireReply, error) {
	if len(req.Keys) > t.cfg.MaxKeysPerRequest {
		return AcquireReply{}, &LimitError{What: "keys per request", N: len(req.Keys), Max: t.cfg.MaxKeysPerRequest}
	}
	if req.Holder == 0 {
		return AcquireReply{}, fmt.Errorf("%w: holder 0", ErrBadRequest)
	}
	ik := idemKey{req.Requester, req.RequestID}
	if req.RequestID != 0 {
		if e, ok := t.idem[ik]; ok {
			if e.cohort != req.Cohort || e.holder != req.Holder {
				return AcquireReply{}, fmt.Errorf("%w: idempotency key (%q, %d) reused for another request", ErrBadRequest, req.Requester, req.RequestID)
			}
			return e.reply.clone(), nil
		}
	}
	rep, err := t.acquire(req)
	if err != nil {
		return AcquireReply{}, err
	}
	if req.RequestID != 0 && t.cfg.MaxIdempotencyKeys > 0 {
		if len(t.idemQ) >= t.cfg.MaxIdempotencyKeys {
			delete(t.idem, t.idemQ[0])
			t.idemQ = t.idemQ[1:]
		}
		t.idem[ik] = idemEntry{cohort: req.Cohort, holder: req.Holder, reply: rep.clone()}
		t.idemQ = append(t.idemQ, ik)
	}
	return rep, nil
}

func (t *Table) acquire(req AcquireRequest) (AcquireReply, error) {
	cs, ok := t.cohorts[req.Cohort]
	if !ok {
		return t.notHere(req.Cohort, req.Epoch), nil
	}
	switch {
	case req.Epoch < cs.epoch:
		return AcquireReply{Status: StatusStaleEpoch, Epoch: cs.epoch}, nil
	case cs.phase != PhaseActive:
		return AcquireReply{Status: StatusRetry, Epoch: cs.epoch, RetryAfterMicros: t.cfg.RetryAfterMicros}, nil
	}
	mine := cs.holders[req.Holder]
	fresh := 0
	seen := make(map[Key]struct{}, len(req.Keys))
	for _, k := range req.Keys {
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		if _, held := mine[k]; !held {
			fresh++
		}
	}
	if t.locks+fresh > t.cfg.MaxLocks {
		return AcquireReply{}, &LimitError{What: "locks held", N: t.locks + fresh, Max: t.cfg.MaxLocks}
	}
	rep := AcquireReply{Status: StatusOK, Epoch: cs.epoch}
	for i, k := range req.Keys {
		if _, p := t.pinned[k]; p {
			// Its stale grant is being ended: the word on the memory node
			// may be the gone holder's.
			rep.Status, rep.ConflictIndex = StatusConflict, i
			if oc, held := t.slots[k]; held {
				rep.ConflictHolder = t.cohorts[oc].locks[k].holder
			}
			return rep, nil
		}
		if oc, held := t.slots[k]; held && oc != req.Cohort {
			// Held through another cohort of this table: one holder per key
			// in the whole table.
			rep.Status, rep.ConflictIndex, rep.ConflictHolder = StatusConflict, i, t.cohorts[oc].locks[k].holder
			return rep, nil
		}
		if l, held := cs.locks[k]; held {
			if l.holder != req.Holder {
				rep.Status, rep.ConflictIndex, rep.ConflictHolder = StatusConflict, i, l.holder
				return rep, nil
			}
			rep.Granted = append(rep.Granted, i)
			rep.Already = append(rep.Already, i)
			if _, m := cs.marked[k]; m {
				rep.Marked = append(rep.Marked, i)
			}
			continue
		}
		cs.locks[k] = lock{holder: req.Holder, grantedAt: req.NowMicros}
		if mine == nil {
			mine = map[Key]struct{}{}
			cs.holders[req.Holder] = mine
		}
		mine[k] = struct{}{}
		t.locks++
		t.slots[k] = req.Cohort
		if mc, m := t.markOf[k]; m && mc != req.Cohort {
			// Another cohort of this table marked the key and holds it not:
			// its word is that cohort's free sentinel. The mark moves with
			// the grant: dropped now, so no grantee of that cohort WRITEs
			// the word again before one CASes it from its sentinel.
			o := t.cohorts[mc]
			t.unmark(o, k)
			rep.Taken = append(rep.Taken, TakenWord{Index: i, Word: Sentinel(mc, o.epoch, false)})
		}
		rep.Granted = append(rep.Granted, i)
		if _, m := cs.marked[k]; m {
			rep.Marked = append(rep.Marked, i)
		}
	}
	return rep, nil
}

// Mark records that the memory-node lock words of keys, which holder
// holds in cohort c at epoch, are the cohort's owner sentinel at epoch
// (the holder set them by CAS). Later grants of those keys at that epoch
// report them in AcquireReply.Marked until a release clears them
// (ReleaseRequest.Cleared), the cohort is fenced or it is retired. Keys the
// holder does not hold are ignored. It returns the number of keys marked.
func (t *Table) Mark(c control.CohortID, epoch uint64, holder Holder, keys []Key) int {
	cs, ok := t.cohorts[c]
	if !ok || cs.epoch != epoch {
		return 0
	}
	n := 0
	for _, k := range keys {
		if l, held := cs.locks[k]; !held || l.holder != holder {
			continue
		}
		if _, m := cs.marked[k]; m {
			continue
		}
		if mc, m := t.markOf[k]; m {
			t.unmark(t.cohorts[mc], k) // the holder's CAS replaced that word
		}
		if t.marks >= t.cfg.MaxMarks {
			break
		}
		cs.marked[k] = struct{}{}
		t.markOf[k] = c
		t.marks++
		n++
	}
	return n
}

// unmark drops cs's mark of k, if any.
func (t *Table) unmark(cs *cohortState, k Key) {
	if _, m := cs.marked[k]; m {
		delete(cs.marked, k)
		t.marks--
	}
	if t.markOf[k] == cs.id {
		delete(t.markOf, k)
	}
}

// Marked reports whether key k of cohort c is marked.
func (t *Table) Marked(c control.CohortID, k Key) bool {
	cs, ok := t.cohorts[c]
	if !ok {
		return false
	}
	_, m := cs.marked[k]
	return m
}

// Marks returns the number of marked keys in the table.
func (t *Table) Marks() int { return t.marks }

// notHere answers a request for a cohort that is not installed.
func (t *Table) notHere(c control.CohortID, epoch uint64) AcquireReply {
	if tb, ok := t.tombs[c]; ok {
		if epoch < tb.moved.Epoch {
			return AcquireReply{Status: StatusMoved, Epoch: tb.moved.Epoch, Moved: tb.moved}
		}
		// The requester's map is at least as new as the move and still
		// names this node: the cohort is coming back; not installed yet.
		return AcquireReply{Status: StatusRetry, Epoch: t.epoch, RetryAfterMicros: t.cfg.RetryAfterMicros}
	}
	if epoch > t.epoch {
		return AcquireReply{Status: StatusRetry, Epoch: t.epoch, RetryAfterMicros: t.cfg.RetryAfterMicros}
	}
	return AcquireReply{Status: StatusNotOwner, Epoch: t.epoch}
}

// Release drops locks of req.Holder. Releasing a key the holder does not
// hold (a duplicate release, or a holder that was fenced) is a no-op.
func (t *Table) Release(req ReleaseRequest) (ReleaseReply, error) {
	if !req.All && len(req.Keys) > t.cfg.MaxKeysPerRequest {
		return ReleaseReply{}, &LimitError{What: "keys per request", N: len(req.Keys), Max: t.cfg.MaxKeysPerRequest}
	}
	cs, ok := t.cohorts[req.Cohort]
	if !ok {
		r := t.notHere(req.Cohort, 0)
		if r.Status != StatusMoved {
			return ReleaseReply{Status: StatusNotOwner, Epoch: t.epoch}, nil
		}
		return ReleaseReply{Status: StatusMoved, Epoch: r.Epoch, Moved: r.Moved}, nil
	}
	if req.Epoch != cs.epoch {
		return ReleaseReply{Status: StatusStaleEpoch, Epoch: cs.epoch}, nil
	}
	mine := cs.holders[req.Holder]
	rep := ReleaseReply{Status: StatusOK, Epoch: cs.epoch}
	for _, k := range req.Cleared {
		if _, held := mine[k]; !held {
			continue
		}
		t.unmark(cs, k)
	}
	drop := func(k Key) {
		if _, held := mine[k]; held {
			delete(mine, k)
			delete(cs.locks, k)
			delete(t.slots, k)
			t.locks--
			rep.Released++
		}
	}
	if req.All {
		for k := range mine {
			drop(k)
		}
	} else {
		for _, k := range req.Keys {
			drop(k)
		}
	}
	if mine != nil && len(mine) == 0 {
		delete(cs.holders, req.Holder)
	}
	return rep, nil
}

// StaleLock is a lock held in the table since before some time.
type StaleLock struct {
	Cohort control.CohortID
	Epoch  uint64
	Key    Key
	Holder Holder
}

// StaleLocks returns up to max locks granted before beforeMicros and not
// pinned yet, in no particular order, and pins their keys: Acquire refuses
// a pinned key until Unpin. A lock held longer than any transaction attempt
// can live is a gone holder's (a crashed grantee whose unlock never came,
// or a write-back given up): its owner ends the word and releases the
// grant (package actors, the node's repair sweep) while the pin keeps
// every other grantee off the slot, even if the grant is released
// meanwhile.
func (t *Table) StaleLocks(beforeMicros int64, max int) []StaleLock {
	var out []StaleLock
	for id, cs := range t.cohorts {
		for k, l := range cs.locks {
			if len(out) >= max {
				return out
			}
			if _, p := t.pinned[k]; !p && l.grantedAt < beforeMicros {
				out = append(out, StaleLock{Cohort: id, Epoch: cs.epoch, Key: k, Holder: l.holder})
				t.pinned[k] = struct{}{}
			}
		}
	}
	return out
}

// Unpin lets Acquire grant keys pinned by StaleLocks again.
func (t *Table) Unpin(keys []Key) {
	for _, k := range keys {
		delete(t.pinned, k)
	}
}

func (t *Table) cohortAt(c control.CohortID, epoch uint64) (*cohortState, error) {
	cs, ok := t.cohorts[c]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownCohort, c)
	}
	if cs.epoch != epoch {
		return nil, fmt.Errorf("%w: cohort %d is at epoch %d, not %d", ErrEpochMismatch, c, cs.epoch, epoch)
	}
	return cs, nil
}

// Freeze stops granting cohort c's locks (migration step 1): new requests
// get StatusRetry; releases are still accepted. Idempotent.
func (t *Table) Freeze(c control.CohortID, epoch uint64, nowMicros int64) error {
	t.fencesDirty = true
	cs, err := t.cohortAt(c, epoch)
	if err != nil {
		return err
	}
	if cs.phase != PhaseFrozen {
		cs.phase, cs.frozenAt = PhaseFrozen, nowMicros
	}
	return nil
}

// Thaw reactivates a frozen cohort (a migration rolled back). Idempotent.
func (t *Table) Thaw(c control.CohortID, epoch uint64) error {
	t.fencesDirty = true
	cs, err := t.cohortAt(c, epoch)
	if err != nil {
		return err
	}
	if cs.phase != PhaseActive {
		if err := t.kgsFree(c, cs.kgs); err != nil {
			return err
		}
		for _, kg := range cs.kgs {
			t.kgs[kg] = c
		}
	}
	cs.phase = PhaseActive
	return nil
}

// DrainStatus is the lock state of one cohort (migration step 2).
type DrainStatus struct {
	Cohort   control.CohortID
	Epoch    uint64
	Phase    Phase
	Locks    int
	Holders  int
	FrozenAt int64
	// Drained: frozen and no lock is held; the cohort may be handed off.
	Drained bool
}

// Drain reports the cohort's held locks.
func (t *Table) Drain(c control.CohortID) (DrainStatus, error) {
	cs, ok := t.cohorts[c]
	if !ok {
		return DrainStatus{}, fmt.Errorf("%w: %d", ErrUnknownCohort, c)
	}
	return DrainStatus{Cohort: c, Epoch: cs.epoch, Phase: cs.phase, Locks: len(cs.locks), Holders: len(cs.holders),
		FrozenAt: cs.frozenAt, Drained: cs.phase == PhaseFrozen && len(cs.locks) == 0}, nil
}

// Fence forgets every remaining holder of a frozen cohort once the drain
// deadline has passed (nowMicros ≥ frozen at + DrainDeadlineMicros) and
// returns them, sorted, so the runtime can abort those transactions. Their
// later releases are no-ops. The memory-node lock words they hold stay held
// (see the package documentation: a successor never overwrites a held
// sentinel), so fencing cannot break I2. Fence also forgets the cohort's
// marks, so grants after a Thaw set lock words by CAS again.
func (t *Table) Fence(c control.CohortID, epoch uint64, nowMicros int64) ([]Holder, error) {
	cs, err := t.cohortAt(c, epoch)
	if err != nil {
		return nil, err
	}
	if cs.phase != PhaseFrozen {
		return nil, fmt.Errorf("%w: %d", ErrNotFrozen, c)
	}
	if nowMicros < cs.frozenAt+t.cfg.DrainDeadlineMicros {
		return nil, fmt.Errorf("%w: cohort %d frozen at %d µs, deadline %d µs, now %d µs", ErrDrainPending, c,
			cs.frozenAt, cs.frozenAt+t.cfg.DrainDeadlineMicros, nowMicros)
	}
	fenced := slices.Sorted(maps.Keys(cs.holders))
	t.locks -= len(cs.locks)
	for k := range cs.locks {
		delete(t.slots, k)
	}
	clear(cs.locks)
	clear(cs.holders)
	// The fenced holders' words may stay held (or their WRITEs may still be
	// on their way): no later grant at this epoch may trust a mark, nor a
	// fence until it is seen set again.
	for k := range cs.marked {
		t.unmark(cs, k)
	}
	t.distrustFences(c, cs.epoch)
	return fenced, nil
}

// Retire removes a frozen, drained cohort and leaves a tombstone (migration
// step 4): later requests for it at an epoch older than moved.Epoch get
// StatusMoved(moved) and never a grant; it can only be installed again at a
// newer epoch. Retiring a cohort already retired at epoch is a no-op.
func (t *Table) Retire(c control.CohortID, epoch uint64, moved Moved) error {
	t.fencesDirty = true
	if tb, ok := t.tombs[c]; ok && tb.epoch == epoch {
		if _, installed := t.cohorts[c]; !installed {
			return nil
		}
	}
	cs, err := t.cohortAt(c, epoch)
	if err != nil {
		return err
	}
	if moved.Epoch <= epoch {
		return fmt.Errorf("%w: cohort %d at epoch %d cannot move at epoch %d", ErrBadRequest, c, epoch, moved.Epoch)
	}
	if cs.phase != PhaseFrozen {
		return fmt.Errorf("%w: %d", ErrNotFrozen, c)
	}
	if len(cs.locks) > 0 {
		return fmt.Errorf("%w: cohort %d: %d locks of %d holders", ErrHoldersRemain, c, len(cs.locks), len(cs.holders))
	}
	for _, kg := range cs.kgs {
		if t.kgs[kg] == c {
			delete(t.kgs, kg)
		}
	}
	for k := range cs.marked {
		t.unmark(cs, k)
	}
	delete(t.cohorts, c)
	t.dropTombstone(c)
	if t.cfg.MaxTombstones > 0 {
		if len(t.tombQ) >= t.cfg.MaxTombstones {
			delete(t.tombs, t.tombQ[0])
			t.tombQ = t.tombQ[1:]
		}
		t.tombs[c] = tombstone{epoch: epoch, moved: moved}
		t.tombQ = append(t.tombQ, c)
	}
	t.ObserveEpoch(moved.Epoch)
	return nil
}

func (t *Table) dropTombstone(c control.CohortID) {
	if _, ok := t.tombs[c]; !ok {
		return
	}
	delete(t.tombs, c)
	t.tombQ = slices.DeleteFunc(t.tombQ, func(x control.CohortID) bool { return x == c })
}

// String dumps the table deterministically (tests, debugging).
func (t *Table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d, %d locks\n", t.epoch, t.locks)
	for _, id := range slices.Sorted(maps.Keys(t.cohorts)) {
		cs := t.cohorts[id]
		fmt.Fprintf(&b, "cohort %d epoch %d %s kgs %v\n", id, cs.epoch, cs.phase, cs.kgs)
		keys := slices.SortedFunc(maps.Keys(cs.locks), func(a, b Key) int {
			return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Key, b.Key))
		})
		for _, k := range keys {
			fmt.Fprintf(&b, "  %d/%d held by %d\n", k.Table, k.Key, cs.locks[k].holder)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(t.tombs)) {
		tb := t.tombs[id]
		owner := tb.moved.Owner
		if owner == "" {
			owner = "(unowned)"
		}
		fmt.Fprintf(&b, "tombstone %d epoch %d moved to %s at %d\n", id, tb.epoch, owner, tb.moved.Epoch)
	}
	return b.String()
}
