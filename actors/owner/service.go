package owner

import (
	"fmt"
	"sync"
	"time"

	"github.com/aura-runtime/aura/control"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
)

// Service is a node's owner table shared by its coordinators (the LOCAL
// path) and its owner RPC handler (requests from other nodes): a Table
// behind a mutex, with the clock the Table does not have.
type Service struct {
	mu      sync.Mutex
	t       *Table
	now     func() int64
	granted func(cohort, epoch uint64) // see ObserveGrants
	lease   *Lease                     // see UseLease
}

// UseLease makes HandleLock report fence ages only while l, the node's
// owner lease, is valid (nil, the default: a node whose cohorts are never
// moved without its acknowledgement). Set it before the service is used.
func (s *Service) UseLease(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lease = l
}

// ObserveGrants makes the service call f for every Acquire that grants
// locks, with the granting activation's cohort and epoch, inside the
// table's critical section (so f sees grants in their true order relative
// to installs and freezes made through Do). f must be fast and must not
// call back into the service. Set it before the service is used.
func (s *Service) ObserveGrants(f func(cohort, epoch uint64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.granted = f
}

// NewService wraps t; nowMicros is the clock stamped on requests.
func NewService(t *Table, nowMicros func() int64) *Service {
	return &Service{t: t, now: nowMicros}
}

// Do runs f with the table locked (install, freeze, drain, fence, retire),
// then notes the fences the change made untrusted (Table.NoteFenceLoss).
func (s *Service) Do(f func(t *Table) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := f(s.t)
	s.t.NoteFenceLoss(s.now())
	return err
}

// Acquire runs Table.Acquire at the current time.
func (s *Service) Acquire(req AcquireRequest) (AcquireReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.NowMicros = s.now()
	rep, err := s.t.Acquire(req)
	if err == nil && s.granted != nil && rep.Status == StatusOK && len(rep.Granted) > 0 {
		s.granted(req.Cohort, rep.Epoch)
	}
	return rep, err
}

// Release runs Table.Release.
func (s *Service) Release(req ReleaseRequest) (ReleaseReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Release(req)
}

// StaleLocks runs Table.StaleLocks for locks granted more than age
// microseconds ago by the service's clock.
func (s *Service) StaleLocks(ageMicros int64, max int) []StaleLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.StaleLocks(s.now()-ageMicros, max)
}

// Unpin runs Table.Unpin.
func (s *Service) Unpin(keys []Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.Unpin(keys)
}

// Fenced runs Table.Fenced at the current time.
func (s *Service) Fenced(c control.CohortID, epoch uint64, kg control.KeyGroup, rkey uint32, addr uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Fenced(c, epoch, kg, rkey, addr, s.now())
}

// FenceSince runs Table.FenceSince.
func (s *Service) FenceSince(c control.CohortID, epoch uint64, kg control.KeyGroup) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.FenceSince(c, epoch, kg)
}

// DueUnfences runs Table.DueUnfences at the current time.
func (s *Service) DueUnfences(max int) []Unfence {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.DueUnfences(s.now(), max)
}

// FenceQuery asks about the fence of KeyGroup for activation (Cohort,
// Epoch), and whether a READ posted at SeenAt came after it was set.
type FenceQuery struct {
	Cohort   control.CohortID
	Epoch    uint64
	KeyGroup control.KeyGroup
	SeenAt   time.Time
}

// FenceState answers a FenceQuery: Holds, the key group is in the active
// activation; Trusted, the table holds its fence and may trust it;
// SeenAfter, SeenAt (rounded down to the service's clock) is after the
// fence was known set.
type FenceState struct {
	Holds, Trusted, SeenAfter bool
}

// FenceStates answers queries in one step of the table.
func (s *Service) FenceStates(qs []FenceQuery) []FenceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]FenceState, len(qs))
	for i, q := range qs {
		st := FenceState{Holds: s.t.holdsFence(q.Cohort, q.Epoch, q.KeyGroup)}
		if at, ok := s.t.FenceSince(q.Cohort, q.Epoch, q.KeyGroup); ok {
			st.Trusted = true
			st.SeenAfter = !q.SeenAt.IsZero() && now-time.Since(q.SeenAt).Microseconds()-1 > at
		}
		out[i] = st
	}
	return out
}

// Mark runs Table.Mark.
func (s *Service) Mark(c uint64, epoch uint64, holder Holder, keys []Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Mark(c, epoch, holder, keys)
}

// InstalledSentinel runs Table.InstalledSentinel.
func (s *Service) InstalledSentinel(w uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.InstalledSentinel(w)
}

// Config returns the table's bounds.
func (s *Service) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Config()
}

func keysOf(rs []*messages.RecordRef) ([]Key, error) {
	keys := make([]Key, len(rs))
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("%w: record %d is nil", ErrBadRequest, i)
		}
		keys[i] = Key{Table: txn.TableID(r.GetTable()), Key: r.GetKey()}
	}
	return keys, nil
}

// HandleLock serves an owner lock RPC (messages.LockRequest): txn_id is the
// holder (the attempt's CAS tag, see Holder).
func (s *Service) HandleLock(req *messages.LockRequest) *messages.LockReply {
	out := &messages.LockReply{RequestId: req.GetRequestId()}
	keys, err := keysOf(req.GetRecords())
	if err != nil {
		out.Status, out.Error = messages.LockStatus_LOCK_STATUS_ERROR, err.Error()
		return out
	}
	kgs := req.GetKeyGroups()
	if len(kgs) != 0 && len(kgs) != len(keys) {
		out.Status = messages.LockStatus_LOCK_STATUS_ERROR
		out.Error = fmt.Sprintf("owner: %d key groups for %d records", len(kgs), len(keys))
		return out
	}
	rep, err := s.Acquire(AcquireRequest{Cohort: req.GetCohortId(), Epoch: req.GetEpoch(), Holder: req.GetTxnId(),
		Keys: keys, Requester: req.GetRequester(), RequestID: req.GetRequestId()})
	if err != nil {
		out.Status, out.Error = messages.LockStatus_LOCK_STATUS_ERROR, err.Error()
		return out
	}
	out.Epoch = rep.Epoch
	for _, i := range rep.Granted {
		out.Granted = append(out.Granted, uint32(i))
	}
	if len(kgs) != 0 && len(rep.Granted) > 0 && (rep.Status == StatusOK || rep.Status == StatusConflict) {
		out.FenceAgeMicros = s.fenceAges(control.CohortID(req.GetCohortId()), rep, kgs)
	}
	switch rep.Status {
	case StatusOK:
		out.Status = messages.LockStatus_LOCK_STATUS_OK
	case StatusConflict:
		out.Status = messages.LockStatus_LOCK_STATUS_CONFLICT
		out.ConflictIndex, out.HolderTxnId = uint32(rep.ConflictIndex), rep.ConflictHolder
	case StatusMoved:
		out.Status = messages.LockStatus_LOCK_STATUS_MOVED
		out.Moved = &messages.Moved{Owner: rep.Moved.Owner, Epoch: rep.Moved.Epoch, CohortId: req.GetCohortId()}
	case StatusRetry:
		out.Status = messages.LockStatus_LOCK_STATUS_RETRY
		out.RetryAfterMicros = uint64(rep.RetryAfterMicros)
	default: // StatusStaleEpoch, StatusNotOwner
		out.Status = messages.LockStatus_LOCK_STATUS_STALE_EPOCH
	}
	return out
}

// fenceAges returns, parallel to rep.Granted, how long the table has
// trusted the fence of each granted record's key group (kgs, parallel to
// the request's keys) for the activation that granted it, in microseconds:
// 0 for a key the grantee held already, one marked in the table or whose
// mark was taken from another cohort (its word may be an owner sentinel
// the requester must CAS), and for all of them when the owner lease is not
// valid. Checked after the grant: the fence stays set until a drain
// deadline after the table stops trusting it (F5), which is after this
// check, so a WRITE the requester posts within the WRITE lease of sending
// its request (before this check) lands first (A3).
func (s *Service) fenceAges(c control.CohortID, rep AcquireReply, kgs []uint64) []uint64 {
	out := make([]uint64, len(rep.Granted))
	skip := map[int]bool{}
	for _, j := range rep.Already {
		skip[j] = true
	}
	for _, j := range rep.Marked {
		skip[j] = true
	}
	for _, tw := range rep.Taken {
		skip[tw.Index] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != nil && !s.lease.ValidAt(time.Now()) {
		return out
	}
	now := s.now()
	for i, j := range rep.Granted {
		if skip[j] || j < 0 || j >= len(kgs) {
			continue
		}
		if at, ok := s.t.FenceSince(c, rep.Epoch, control.KeyGroup(kgs[j])); ok && now > at {
			out[i] = uint64(now - at)
		}
	}
	return out
}

// HandleUnlock serves an owner unlock RPC (messages.UnlockRequest).
func (s *Service) HandleUnlock(req *messages.UnlockRequest) *messages.UnlockReply {
	out := &messages.UnlockReply{RequestId: req.GetRequestId()}
	keys, err := keysOf(req.GetRecords())
	if err != nil {
		out.Status, out.Error = messages.LockStatus_LOCK_STATUS_ERROR, err.Error()
		return out
	}
	rep, err := s.Release(ReleaseRequest{Cohort: req.GetCohortId(), Epoch: req.GetEpoch(), Holder: req.GetTxnId(),
		Keys: keys, All: req.GetAll()})
	if err != nil {
		out.Status, out.Error = messages.LockStatus_LOCK_STATUS_ERROR, err.Error()
		return out
	}
	out.Epoch, out.Released = rep.Epoch, uint32(rep.Released)
	switch rep.Status {
	case StatusOK:
		out.Status = messages.LockStatus_LOCK_STATUS_OK
	case StatusMoved:
		out.Status = messages.LockStatus_LOCK_STATUS_MOVED
		out.Moved = &messages.Moved{Owner: rep.Moved.Owner, Epoch: rep.Moved.Epoch, CohortId: req.GetCohortId()}
	default:
		out.Status = messages.LockStatus_LOCK_STATUS_STALE_EPOCH
	}
	return out
}
