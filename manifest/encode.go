package manifest

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// Format constants.
const (
	// Magic opens every manifest.
	Magic = "AURA"
	// HeaderSize is the size of the common header: magic, version, epoch,
	// reserved.
	HeaderSize = 16
	// Version1 carries the fallback table only.
	Version1 = 1
	// Version2 adds the cohort section.
	Version2 = 2
	// VersionDelta is a delta against a base epoch (EncodeDelta, ApplyDelta).
	VersionDelta = 3
	// LatestVersion is the newest full-manifest version.
	LatestVersion = Version2

	// DefaultMaxBytes is the default cap on a manifest's size: 900 KiB, the
	// tutorial's assert (seed 001 §2.2). A typical map (1024 cohorts × 16 key
	// groups) takes about 150 KB and 1024 × 64 about 535 KB; the cap leaves
	// room for growth while keeping one push well under the transport's 4 MB
	// message limit.
	DefaultMaxBytes = 900 << 10

	// MaxCohortKeyGroups is the most key groups one cohort can have on the
	// wire (num_kgs is 2 bytes).
	MaxCohortKeyGroups = math.MaxUint16

	cohortFixedSize = 8 + 1 + 2 // cohort_id, owner_cn, num_kgs
	moveSize        = 8 + 1     // cohort_id, owner_cn
	changeSize      = 4 + 1     // index, owner
)

var le = binary.LittleEndian

// Size returns the size in bytes of m's encoding at version (1 or 2),
// without checking m. It returns -1 for another version.
func Size(m *control.OwnerMap, version int) int {
	if version != Version1 && version != Version2 {
		return -1
	}
	n := HeaderSize + 4 + len(m.Fallback)
	if version == Version2 {
		n += 4
		for _, p := range m.Cohorts {
			n += cohortFixedSize + 8*len(p.KeyGroups)
		}
	}
	return n
}

// Encode returns m's encoding at version (Version1 or Version2). Version 1
// carries the fallback table only: m's cohorts are left out, which is what a
// version 1 reader would see of the version 2 encoding. maxBytes caps the
// encoding's size (0: DefaultMaxBytes); the size is computed and checked
// before the buffer is allocated. Encode refuses, with a *FormatError
// wrapping ErrInvalid, ErrTooManyKeyGroups or ErrTooLarge, a map that does not
// satisfy control.OwnerMap.Validate, a cohort of more than
// MaxCohortKeyGroups key groups, and an encoding above the cap. Cohorts are
// written in ascending id order whatever their order in m.
func Encode(m *control.OwnerMap, version int, maxBytes int) ([]byte, error) {
	const op = "encode"
	if m == nil {
		return nil, errorf(op, -1, ErrInvalid, "nil OwnerMap")
	}
	if version != Version1 && version != Version2 {
		return nil, errorf(op, -1, ErrUnsupportedVersion, "cannot encode version %d (want %d or %d)", version, Version1, Version2)
	}
	limit, err := capOf(op, maxBytes)
	if err != nil {
		return nil, err
	}
	if uint64(len(m.Fallback)) > math.MaxUint32 {
		return nil, errorf(op, -1, ErrTooLarge, "fallback table of %d entries", len(m.Fallback))
	}
	var order []int
	if version == Version2 {
		if uint64(len(m.Cohorts)) > math.MaxUint32 {
			return nil, errorf(op, -1, ErrTooLarge, "%d cohorts", len(m.Cohorts))
		}
		if order, err = checkMap(op, m, 0); err != nil {
			return nil, err
		}
	}
	if n := Size(m, version); n > limit {
		return nil, errorf(op, -1, ErrTooLarge, "encoding of %d bytes exceeds the cap of %d", n, limit)
	}
	b := make([]byte, 0, Size(m, version))
	b = appendHeader(b, uint16(version), m.Epoch)
	b = appendFallback(b, m.Fallback)
	if version == Version2 {
		b = le.AppendUint32(b, uint32(len(order)))
		for _, i := range order {
			b = appendCohort(b, m.Cohorts[i])
		}
	}
	return b, nil
}

func capOf(op string, maxBytes int) (int, error) {
	if maxBytes < 0 {
		return 0, errorf(op, -1, ErrInvalid, "negative size cap %d", maxBytes)
	}
	if maxBytes == 0 {
		return DefaultMaxBytes, nil
	}
	return maxBytes, nil
}

func appendHeader(b []byte, version uint16, epoch uint64) []byte {
	b = append(b, Magic...)
	b = le.AppendUint16(b, version)
	b = le.AppendUint64(b, epoch)
	return le.AppendUint16(b, 0)
}

func appendFallback(b []byte, fb []uint8) []byte {
	b = le.AppendUint32(b, uint32(len(fb)))
	return append(b, fb...)
}

func appendCohort(b []byte, p control.Placement) []byte {
	b = le.AppendUint64(b, p.ID)
	b = append(b, uint8(p.Owner))
	b = le.AppendUint16(b, uint16(len(p.KeyGroups)))
	for _, kg := range p.KeyGroups {
		b = le.AppendUint64(b, kg)
	}
	return b
}

// checkMap checks m's cohorts as control.OwnerMap.Validate does, plus the
// wire's limits, with typed errors; nodes > 0 also bounds owners. It returns
// the cohorts' indices in ascending id order.
func checkMap(op string, m *control.OwnerMap, nodes int) ([]int, error) {
	if nodes > 0 {
		for i, o := range m.Fallback {
			if o != control.Unowned && int(o) >= nodes {
				return nil, errorf(op, -1, ErrInvalid, "fallback entry %d: owner %d of a %d-node cluster", i, o, nodes)
			}
		}
	}
	maxOwner := control.MaxNodes
	if nodes > 0 {
		maxOwner = nodes
	}
	total := 0
	for _, p := range m.Cohorts {
		if p.Owner < 0 || p.Owner >= maxOwner {
			return nil, errorf(op, -1, ErrInvalid, "cohort %d: owner %d out of range [0, %d)", p.ID, p.Owner, maxOwner)
		}
		if len(p.KeyGroups) > MaxCohortKeyGroups {
			return nil, errorf(op, -1, ErrTooManyKeyGroups, "cohort %d has %d key groups, at most %d fit", p.ID, len(p.KeyGroups), MaxCohortKeyGroups)
		}
		for j := 1; j < len(p.KeyGroups); j++ {
			if p.KeyGroups[j] <= p.KeyGroups[j-1] {
				return nil, errorf(op, -1, ErrInvalid, "cohort %d: key groups not strictly ascending at %d", p.ID, j)
			}
		}
		total += len(p.KeyGroups)
	}
	order := make([]int, len(m.Cohorts))
	for i := range order {
		order[i] = i
	}
	if !slices.IsSortedFunc(m.Cohorts, byID) {
		slices.SortFunc(order, func(a, b int) int { return cmpU64(m.Cohorts[a].ID, m.Cohorts[b].ID) })
	}
	for k := 1; k < len(order); k++ {
		if id := m.Cohorts[order[k]].ID; id == m.Cohorts[order[k-1]].ID {
			return nil, errorf(op, -1, ErrInvalid, "cohort %d listed twice", id)
		}
	}
	if kg, ok := duplicateKeyGroup(m.Cohorts, total); ok {
		a, b := cohortsOf(m.Cohorts, kg)
		return nil, errorf(op, -1, ErrInvalid, "key group %d in cohorts %d and %d", kg, a, b)
	}
	return order, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// duplicateKeyGroup reports a key group that is in two of cs (each cs's key
// groups being strictly ascending already). total is the number of key
// groups. Cohorts whose [first, last] ranges do not overlap cannot share one,
// which avoids sorting every key group in the common case of range-like
// cohorts.
func duplicateKeyGroup(cs []control.Placement, total int) (uint64, bool) {
	type span struct{ lo, hi uint64 }
	spans := make([]span, 0, len(cs))
	for _, p := range cs {
		if n := len(p.KeyGroups); n > 0 {
			spans = append(spans, span{p.KeyGroups[0], p.KeyGroups[n-1]})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmpU64(a.lo, b.lo) })
	overlap := false
	for i := 1; i < len(spans); i++ {
		if spans[i].lo <= spans[i-1].hi {
			overlap = true
			break
		}
	}
	if !overlap {
		return 0, false
	}
	all := make([]uint64, 0, total)
	for _, p := range cs {
		all = append(all, p.KeyGroups...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return all[i], true
		}
	}
	return 0, false
}

// cohortsOf returns the ids of the first two cohorts holding kg.
func cohortsOf(cs []control.Placement, kg uint64) (first, second uint64) {
	found := 0
	for _, p := range cs {
		if _, ok := slices.BinarySearch(p.KeyGroups, kg); ok {
			if found == 0 {
				first = p.ID
			} else {
				return first, p.ID
			}
			found++
		}
	}
	return first, second
}
