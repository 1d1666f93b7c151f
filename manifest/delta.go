package manifest

import (
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// deltaFixedSize is a delta's size with no changes: header, base_epoch,
// num_warehouses and the four counts.
const deltaFixedSize = HeaderSize + 8 + 4 + 4*4

// EncodeDelta returns the delta (version VersionDelta, layout in the package
// doc) that turns base into next: the fallback entries that changed, the
// cohorts added or whose key groups changed (upserts), the cohorts whose
// owner alone changed (moves), and the cohorts removed. Both maps must be
// valid (as for Encode) and next's epoch must be above base's (ErrInvalid).
// maxBytes caps the delta's size (0: DefaultMaxBytes; ErrTooLarge above it,
// checked before allocating). A delta is not always smaller than the full
// manifest: a publisher compares it with Size(next, Version2) and sends the
// smaller.
func EncodeDelta(base, next *control.OwnerMap, maxBytes int) ([]byte, error) {
	const op = "encode delta"
	if base == nil || next == nil {
		return nil, errorf(op, -1, ErrInvalid, "nil OwnerMap")
	}
	limit, err := capOf(op, maxBytes)
	if err != nil {
		return nil, err
	}
	if next.Epoch <= base.Epoch {
		return nil, errorf(op, -1, ErrInvalid, "next epoch %d is not above base epoch %d", next.Epoch, base.Epoch)
	}
	if uint64(len(next.Fallback)) > math.MaxUint32 || uint64(len(next.Cohorts)) > math.MaxUint32 {
		return nil, errorf(op, -1, ErrTooLarge, "%d fallback entries, %d cohorts", len(next.Fallback), len(next.Cohorts))
	}
	baseOrder, err := checkMap(op, base, 0)
	if err != nil {
		return nil, err
	}
	nextOrder, err := checkMap(op, next, 0)
	if err != nil {
		return nil, err
	}

	var changes []int // indices into next.Fallback
	for i, o := range next.Fallback {
		if i < len(base.Fallback) && base.Fallback[i] != o || i >= len(base.Fallback) && o != control.Unowned {
			changes = append(changes, i)
		}
	}
	// Walk both maps in id order, like a merge.
	var upserts, moves []int // indices into next.Cohorts
	var removed []int        // indices into base.Cohorts
	bi := 0
	for _, ni := range nextOrder {
		n := &next.Cohorts[ni]
		for bi < len(baseOrder) && base.Cohorts[baseOrder[bi]].ID < n.ID {
			removed = append(removed, baseOrder[bi])
			bi++
		}
		if bi < len(baseOrder) && base.Cohorts[baseOrder[bi]].ID == n.ID {
			b := &base.Cohorts[baseOrder[bi]]
			bi++
			switch {
			case !slices.Equal(b.KeyGroups, n.KeyGroups):
				upserts = append(upserts, ni)
			case b.Owner != n.Owner:
				moves = append(moves, ni)
			}
			continue
		}
		upserts = append(upserts, ni)
	}
	removed = append(removed, baseOrder[bi:]...)

	size := deltaFixedSize + changeSize*len(changes) + moveSize*len(moves) + 8*len(removed)
	for _, i := range upserts {
		size += cohortFixedSize + 8*len(next.Cohorts[i].KeyGroups)
	}
	if size > limit {
		return nil, errorf(op, -1, ErrTooLarge, "delta of %d bytes exceeds the cap of %d", size, limit)
	}
	b := make([]byte, 0, size)
	b = appendHeader(b, VersionDelta, next.Epoch)
	b = le.AppendUint64(b, base.Epoch)
	b = le.AppendUint32(b, uint32(len(next.Fallback)))
	b = le.AppendUint32(b, uint32(len(changes)))
	for _, i := range changes {
		b = le.AppendUint32(b, uint32(i))
		b = append(b, next.Fallback[i])
	}
	b = le.AppendUint32(b, uint32(len(upserts)))
	for _, i := range upserts {
		b = appendCohort(b, next.Cohorts[i])
	}
	b = le.AppendUint32(b, uint32(len(moves)))
	for _, i := range moves {
		b = le.AppendUint64(b, next.Cohorts[i].ID)
		b = append(b, uint8(next.Cohorts[i].Owner))
	}
	b = le.AppendUint32(b, uint32(len(removed)))
	for _, i := range removed {
		b = le.AppendUint64(b, base.Cohorts[i].ID)
	}
	return b, nil
}

// ApplyDelta returns the OwnerMap that delta (made by EncodeDelta) turns base
// into. base is not modified and the result shares no memory with it or with
// delta; its cohorts are in ascending id order. A delta whose base_epoch is
// not base's epoch is ErrBaseMismatch: the receiver needs a full manifest.
// opts.MaxBytes caps the delta's size and the size of the result's full
// (version 2) encoding, so that a delta cannot build a map no full manifest
// could carry; opts.Nodes bounds owners as for Decode; opts.MaxVersion is
// ignored. Every error is a *FormatError, except invalid options.
func ApplyDelta(base *control.OwnerMap, delta []byte, opts DecodeOptions) (*control.OwnerMap, error) {
	const op = "apply delta"
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if base == nil {
		return nil, errorf(op, -1, ErrBaseMismatch, "no base OwnerMap")
	}
	limit := opts.maxBytes()
	if len(delta) > limit {
		return nil, errorf(op, 0, ErrTooLarge, "input of %d bytes exceeds the cap of %d", len(delta), limit)
	}
	r := reader{op: op, b: delta}
	v, epoch := r.header()
	if r.err != nil {
		return nil, r.err
	}
	switch v {
	case VersionDelta:
	case Version1, Version2:
		return nil, errorf(op, 4, ErrWrongKind, "version %d is a full manifest; decode it with Decode", v)
	default:
		return nil, errorf(op, 4, ErrUnsupportedVersion, "version %d (want delta version %d)", v, VersionDelta)
	}
	baseEpoch := r.u64("base_epoch")
	if r.err == nil && baseEpoch != base.Epoch {
		return nil, errorf(op, HeaderSize, ErrBaseMismatch, "delta applies to epoch %d, base is at epoch %d", baseEpoch, base.Epoch)
	}
	if r.err == nil && epoch <= baseEpoch {
		return nil, errorf(op, 6, ErrInvalid, "epoch %d is not above base epoch %d", epoch, baseEpoch)
	}

	// Fallback: the new length is not backed by bytes (entries past the
	// base's are unowned unless changed), so bound it by the cap on the
	// result's encoding before allocating.
	whAt := r.off
	w := int64(r.u32("num_warehouses"))
	if r.err == nil && w > int64(limit-(HeaderSize+4+4)) {
		r.fail(whAt, ErrTooLarge, "fallback table of %d entries cannot fit a manifest under the cap of %d", w, limit)
	}
	nc := int64(r.u32("num_fallback_changes"))
	changesAt := r.off
	if r.need(nc, changeSize, "fallback changes") {
		prev := int64(-1)
		for i := int64(0); i < nc && r.err == nil; i++ {
			at := r.off
			idx := int64(r.u32("fallback index"))
			o := r.u8("fallback owner")
			switch {
			case r.err != nil:
			case idx <= prev:
				r.fail(at, ErrInvalid, "fallback change for index %d follows index %d: not strictly ascending", idx, prev)
			case idx >= w:
				r.fail(at, ErrInvalid, "fallback change for index %d of a %d-entry table", idx, w)
			case opts.Nodes > 0 && o != control.Unowned && int(o) >= opts.Nodes:
				r.fail(at+4, ErrInvalid, "warehouse %d: owner %d of a %d-node cluster", idx, o, opts.Nodes)
			}
			prev = idx
		}
	}
	upserts, _ := r.cohorts(int64(r.u32("num_upserts")), true, opts.Nodes)
	nm := int64(r.u32("num_moves"))
	movesAt := r.off
	maxOwner := control.MaxNodes
	if opts.Nodes > 0 {
		maxOwner = opts.Nodes
	}
	if r.need(nm, moveSize, "moves") {
		for i := int64(0); i < nm && r.err == nil; i++ {
			at := r.off
			id := r.u64("move cohort_id")
			o := int(r.u8("move owner_cn"))
			switch {
			case r.err != nil:
			case i > 0 && id <= le.Uint64(delta[at-moveSize:]):
				r.fail(at, ErrInvalid, "move of cohort %d: ids not strictly ascending", id)
			case o >= maxOwner:
				r.fail(at+8, ErrInvalid, "move of cohort %d: owner %d out of range [0, %d)", id, o, maxOwner)
			}
		}
	}
	nr := int64(r.u32("num_removed"))
	removedAt := r.off
	if r.need(nr, 8, "removals") {
		for i := int64(0); i < nr && r.err == nil; i++ {
			at := r.off
			id := r.u64("removed cohort_id")
			if r.err == nil && i > 0 && id <= le.Uint64(delta[at-8:]) {
				r.fail(at, ErrInvalid, "removal of cohort %d: ids not strictly ascending", id)
			}
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}

	// Everything is in bounds; build the result.
	out := &control.OwnerMap{Epoch: epoch}
	if w > 0 {
		out.Fallback = make([]uint8, w)
		n := copy(out.Fallback, base.Fallback)
		for i := n; i < len(out.Fallback); i++ {
			out.Fallback[i] = control.Unowned
		}
		for i := int64(0); i < nc; i++ {
			at := changesAt + int(i)*changeSize
			out.Fallback[le.Uint32(delta[at:])] = delta[at+4]
		}
	}
	index := make(map[control.CohortID]int, len(base.Cohorts))
	for i, p := range base.Cohorts {
		index[p.ID] = i
	}
	// fate[i] is what happens to base cohort i: 0 kept, 1 upserted, 2 moved
	// (newOwner[i] holds the owner), 3 removed.
	fate := make([]uint8, len(base.Cohorts))
	newOwner := make(map[int]int, nm)
	mark := func(id control.CohortID, f uint8, at int, must bool) bool {
		i, ok := index[id]
		if !ok {
			if must {
				r.fail(at, ErrInvalid, "cohort %d is not in the base at epoch %d", id, base.Epoch)
			}
			return false
		}
		if fate[i] != 0 {
			r.fail(at, ErrInvalid, "cohort %d changed twice", id)
			return false
		}
		fate[i] = f
		return true
	}
	for _, p := range upserts {
		mark(p.ID, 1, -1, false)
	}
	for i := int64(0); i < nm && r.err == nil; i++ {
		at := movesAt + int(i)*moveSize
		if id := le.Uint64(delta[at:]); mark(id, 2, at, true) {
			newOwner[index[id]] = int(delta[at+8])
		}
	}
	for i := int64(0); i < nr && r.err == nil; i++ {
		at := removedAt + int(i)*8
		mark(le.Uint64(delta[at:]), 3, at, true)
	}
	if r.err != nil {
		return nil, r.err
	}
	kept, keptKGs := 0, 0
	for i, p := range base.Cohorts {
		if fate[i] == 0 || fate[i] == 2 {
			kept++
			keptKGs += len(p.KeyGroups)
		}
	}
	if kept+len(upserts) > 0 {
		out.Cohorts = make([]control.Placement, 0, kept+len(upserts))
	}
	backing := make([]uint64, keptKGs)
	for i, p := range base.Cohorts {
		if fate[i] != 0 && fate[i] != 2 {
			continue
		}
		q := control.Placement{Cohort: control.Cohort{ID: p.ID}, Owner: p.Owner}
		if fate[i] == 2 {
			q.Owner = newOwner[i]
		}
		if k := len(p.KeyGroups); k > 0 {
			q.KeyGroups = backing[:k:k]
			backing = backing[k:]
			copy(q.KeyGroups, p.KeyGroups)
		}
		out.Cohorts = append(out.Cohorts, q)
	}
	out.Cohorts = append(out.Cohorts, upserts...)
	slices.SortFunc(out.Cohorts, byID)
	if n := Size(out, Version2); n > limit {
		return nil, errorf(op, -1, ErrTooLarge, "the result's encoding of %d bytes would exceed the cap of %d", n, limit)
	}
	if _, err := checkMap(op, out, opts.Nodes); err != nil {
		return nil, err
	}
	return out, nil
}
