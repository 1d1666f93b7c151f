package owner

import (
	"context"
	"time"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/store"
)

// Key-group fences, the Locker's half (see "Key-group fences" in the
// package documentation).

// fenceOf names a request's fence word.
func fenceOf(q *occ.LockRequest) wordKey { return wordKey{q.FenceRKey, q.Fence} }

// fenceState is what the local table says of a grant's key-group fence.
type fenceState struct {
	// trusted: the table holds the fence for the grant's activation and
	// may trust it; seenAfter: the coordinator's READ (LockRequest.SeenAt)
	// was posted after the fence was known set; want: the key group is in
	// the activation but the table holds no trusted fence for it.
	trusted, seenAfter, want bool
}

// fenceStates asks the local table, in one step, about the fences of the
// local grants whose record has a fence word.
func (l *Locker) fenceStates(reqs []occ.LockRequest, gs []ownerGrant) []fenceState {
	out := make([]fenceState, len(gs))
	if l.n.svc == nil {
		return out
	}
	var qs []FenceQuery
	var idx []int
	for k, g := range gs {
		q := &reqs[g.i]
		if !g.route.Local || q.Fence == 0 {
			continue
		}
		qs = append(qs, FenceQuery{Cohort: g.route.Cohort, Epoch: g.epoch, KeyGroup: control.KeyGroup(q.KeyGroup), SeenAt: q.SeenAt})
		idx = append(idx, k)
	}
	if len(qs) == 0 {
		return out
	}
	for j, st := range l.n.svc.FenceStates(qs) {
		out[idx[j]] = fenceState{trusted: st.Trusted, seenAfter: st.SeenAfter, want: st.Holds && !st.Trusted}
	}
	return out
}

// fenceable reports whether a fenced WRITE of grant g may replace the word
// seen (F4): 0, the free sentinel of an activation retired for g (an older
// activation of g's cohort, or a cohort its map does not place), or, for a
// local grant, that of another activation installed in g's table (a
// re-cut: the table grants the slot to one holder across its cohorts and
// has dropped that activation's mark of it). Every other locker that takes
// such a word reads the fence after it (F2).
func (l *Locker) fenceable(seen uint64, g ownerGrant) bool {
	if seen == 0 {
		return true
	}
	if !store.IsFreeSentinel(seen) || seen == Sentinel(g.route.Cohort, g.epoch, false) {
		return false
	}
	if ok, _ := l.retired(seen, g.route, g.epoch); ok {
		return true
	}
	return g.route.Local && l.n.svc != nil && l.n.svc.InstalledSentinel(seen)
}

// fenceExpect returns the value a claim of q's fence word for grant g
// expects (the node's last sight of the word), and false when that value
// is the fence of an activation the grant may not take it from: only 0,
// g's own activation's fence, or a retired activation's (see retired: it
// was drained, so none of its fenced WRITEs is still on its way) are taken.
// Not even another activation of the same table's: its grantees' fenced
// WRITEs are excluded from g's slots only while they hold them, and that
// activation may be drained and retired before such a WRITE lands; its
// fence is given back a drain deadline after the key group left it
// (Table.DueUnfences), and then claimed from 0.
func (l *Locker) fenceExpect(q *occ.LockRequest, g ownerGrant) (uint64, bool) {
	h := l.n.hint(fenceOf(q))
	if h == 0 || h == Sentinel(g.route.Cohort, g.epoch, false) {
		return h, true
	}
	if !store.IsFreeSentinel(h) {
		return 0, false
	}
	ok, _ := l.retired(h, g.route, g.epoch)
	return h, ok
}

// fenceClaimed records the outcome of a fence claim that expected compare
// and found v.
func (l *Locker) fenceClaimed(q *occ.LockRequest, g ownerGrant, compare, v uint64) {
	own := Sentinel(g.route.Cohort, g.epoch, false)
	if v != compare && v != own {
		l.n.setHint(fenceOf(q), v)
		return
	}
	if v == compare && compare != own {
		l.n.Stats.FenceClaims.Add(1)
	}
	l.n.setHint(fenceOf(q), own)
	l.n.svc.Fenced(g.route.Cohort, g.epoch, control.KeyGroup(q.KeyGroup), q.FenceRKey, q.Fence)
}

// fenceBlocks says whether fence word fw, read right after grant g took a
// free lock word by CAS, refuses the grant: another activation may hold the
// fence and WRITE over the word it saw free. It does not when the fence is 0,
// g's own, retired for g (see retired), or another activation of g's
// owner (then viaOwner: the owner's table excludes both activations'
// grantees of the slot, and the word must be released to 0, never to a
// sentinel of g's cohort, see "Key-group fences").
func (l *Locker) fenceBlocks(fw uint64, g ownerGrant) (blocks, viaOwner bool) {
	if fw == 0 || fw == Sentinel(g.route.Cohort, g.epoch, false) {
		return false, false
	}
	if !store.IsOwnerSentinel(fw) {
		return true, false
	}
	fw = store.FreeSentinel(fw)
	if ok, _ := l.retired(fw, g.route, g.epoch); ok {
		return false, false
	}
	if g.route.Local {
		if l.n.svc != nil && l.n.svc.InstalledSentinel(fw) {
			return false, true
		}
		return true, false
	}
	cp, ok := l.n.res.(CohortPlacer)
	if !ok {
		return true, false
	}
	owner, owned, m := cp.CohortOwner(control.CohortID(SentinelCohort(fw)))
	if owned && owner == g.route.Owner && SentinelEpoch(fw) <= m&epochMask {
		return false, true
	}
	return true, false
}

// giveBack returns lock words that grants took by CAS but may not keep (a
// fence refused them, or the fence could not be read): CAS(H(c,e) → 0),
// and the grants are released in the table. A word found otherwise was
// overwritten by the fence's holder and is not ours. A CAS whose outcome
// is lost is settled as resolve settles lock words: the word is re-read
// (while this grantee holds the table grant nobody else sets H(c,e)) and
// the CAS posted again, until NodeConfig.ResolveTimeout; past it the grant
// is reported occ.LockUnknown and kept in the table, whose stale-grant
// sweep ends the word (see "Limits").
func (l *Locker) giveBack(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, gs []ownerGrant, ks []int,
	follow map[int]Route) []ownerGrant {
	var undo []ownerGrant
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.n.cfg.ResolveTimeout)
	defer cancel()
	backoff := time.Millisecond
	for len(ks) > 0 {
		var again []int
		for start := 0; start < len(ks); start += rdma.MaxBatch / 2 {
			chunk := ks[start:min(start+rdma.MaxBatch/2, len(ks))]
			wrs := make([]rdma.WorkRequest, 0, 2*len(chunk))
			for _, k := range chunk {
				g, q := gs[k], &reqs[gs[k].i]
				wrs = append(wrs, rdma.WorkRequest{ID: uint64(k), Op: rdma.OpCompareAndSwap, RKey: q.Table.Region.RKey,
					RemoteAddr: q.SlotAddr + store.LockOffset, Compare: Sentinel(g.route.Cohort, g.epoch, true)})
			}
			cs, _ := rdma.Exec(c, l.qp, wrs...)
			for j, k := range chunk {
				g := gs[k]
				out := &res[g.i]
				out.Path = pathOf(g.route)
				out.CAS++
				if j >= len(cs) || cs[j].Status != rdma.StatusSuccess {
					again = append(again, k)
					continue
				}
				if cs[j].Value != wrs[j].Compare {
					out.CASFailed++
				}
				l.n.Stats.FenceRefusals.Add(1)
				out.Status, out.Slot = occ.LockRedirect, nil
				undo = append(undo, g)
			}
		}
		if len(again) == 0 {
			break
		}
		select {
		case <-c.Done():
			for _, k := range again {
				g := gs[k]
				out := &res[g.i]
				*out = occ.LockResult{Status: occ.LockUnknown, Path: pathOf(g.route), CAS: out.CAS, CASFailed: out.CASFailed}
				l.n.Stats.Unresolved.Add(1)
				delete(follow, g.i)
			}
			return undo
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
		ks = again
	}
	return undo
}

// Unfence gives back, on qp, the key-group fences the node's table no
// longer trusts since a drain deadline (Table.DueUnfences), up to max:
// CAS(S(c,e) → 0) on each. A CAS that fails or is lost leaves the fence in
// place: the key group's lockers then ask the fence's cohort (liveness,
// never safety), until the activation is retired. It returns the fences
// given back.
func (n *Node) Unfence(ctx context.Context, qp rdma.QueuePair, max int) int {
	if n.svc == nil {
		return 0
	}
	due := n.svc.DueUnfences(max)
	done := 0
	for start := 0; start < len(due); start += rdma.MaxBatch {
		chunk := due[start:min(start+rdma.MaxBatch, len(due))]
		wrs := make([]rdma.WorkRequest, len(chunk))
		for j, u := range chunk {
			wrs[j] = rdma.WorkRequest{ID: uint64(j), Op: rdma.OpCompareAndSwap, RKey: u.RKey, RemoteAddr: u.Addr, Compare: u.Word}
		}
		c, cancel := context.WithTimeout(ctx, time.Second)
		cs, _ := rdma.Exec(c, qp, wrs...)
		cancel()
		for j, u := range chunk {
			if j >= len(cs) || cs[j].Status != rdma.StatusSuccess {
				continue
			}
			if cs[j].Value != u.Word {
				n.setHint(wordKey{u.RKey, u.Addr}, cs[j].Value) // taken over meanwhile
				continue
			}
			n.setHint(wordKey{u.RKey, u.Addr}, 0)
			n.Stats.Unfenced.Add(1)
			done++
		}
	}
	return done
}

// mnFenceRefuses says whether fence word fw, read right after the MN CAS
// path took a free word, refuses that word (F2): any fence but 0 or a
// retired activation's. atLeast is the epoch to refresh the map to when
// the fence is newer than it.
func (l *Locker) mnFenceRefuses(fw uint64) (refuses bool, atLeast uint64) {
	if fw == 0 {
		return false, 0
	}
	if !store.IsFreeSentinel(fw) {
		return true, 0
	}
	ok, atLeast := l.retired(fw, Route{}, 0)
	return !ok, atLeast
}

// giveBackTags returns lock words the MN CAS path took (from 0, or from a
// retired activation's sentinel: the fallback's tag) while an owner may
// hold the key group's fence: CAS(tag → 0). A lost CAS leaves the lock unknown, so that the
// coordinator's abort releases it by tag.
func (l *Locker) giveBackTags(ctx context.Context, reqs []occ.LockRequest, res []occ.LockResult, idx []int, follow map[int]Route) {
	for start := 0; start < len(idx); start += rdma.MaxBatch {
		chunk := idx[start:min(start+rdma.MaxBatch, len(idx))]
		wrs := make([]rdma.WorkRequest, len(chunk))
		for j, i := range chunk {
			q := &reqs[i]
			wrs[j] = rdma.WorkRequest{ID: uint64(i), Op: rdma.OpCompareAndSwap, RKey: q.Table.Region.RKey,
				RemoteAddr: q.SlotAddr + store.LockOffset, Compare: q.Tag}
		}
		cs, _ := rdma.Exec(ctx, l.qp, wrs...)
		for j, i := range chunk {
			out := &res[i]
			out.CAS++
			if j >= len(cs) || cs[j].Status != rdma.StatusSuccess {
				*out = occ.LockResult{Status: occ.LockUnknown, Path: occ.PathMNCAS, CAS: out.CAS, CASFailed: out.CASFailed}
				delete(follow, i) // the abort must release the tag first
				continue
			}
			if cs[j].Value != wrs[j].Compare {
				out.CASFailed++
			}
			l.n.Stats.FenceRefusals.Add(1)
			out.Status, out.Slot, out.LockWord = occ.LockRedirect, nil, out.FenceWord
		}
	}
}
