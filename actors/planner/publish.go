package planner

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
)

// DefaultChunkBytes is the manifest bytes per OwnerMapPush. 256 KiB keeps a
// push far below gRPC's default 4 MiB receive limit (protoactor remote does
// not raise it), so the largest manifest the planner can publish (1,024
// cohorts × 64 key groups ≈ 537 KB) takes three pushes and no transport
// limit needs changing.
const DefaultChunkBytes = 256 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaxRosterNameLen caps one roster name: the membership's own cap on node
// names (cluster.MaxNodeNameLen), so any member fits and a hostile push
// cannot make a node keep long strings.
const MaxRosterNameLen = 64

// ErrBadRoster wraps every reason ValidateRoster refuses a roster.
var ErrBadRoster = errors.New("planner: bad roster")

// ValidateRoster checks a roster published with map m (see
// OwnerMapPush.roster): fewer than control.MaxNodes entries (one owner byte
// value means unowned), non-empty names of at most MaxRosterNameLen bytes
// unique, and every cohort's owner index naming a roster entry. An empty
// roster is valid (a push without one: the receiver keeps its static
// roster); m may be nil to check the roster alone.
func ValidateRoster(m *control.OwnerMap, roster []string) error {
	if len(roster) == 0 {
		return nil
	}
	if len(roster) >= control.MaxNodes {
		return fmt.Errorf("%w: %d entries, at most %d", ErrBadRoster, len(roster), control.MaxNodes-1)
	}
	seen := make(map[string]bool, len(roster))
	for i, n := range roster {
		if n == "" {
			continue
		}
		if len(n) > MaxRosterNameLen {
			return fmt.Errorf("%w: entry %d is %d bytes, at most %d", ErrBadRoster, i, len(n), MaxRosterNameLen)
		}
		if seen[n] {
			return fmt.Errorf("%w: %q listed twice", ErrBadRoster, n)
		}
		seen[n] = true
	}
	if m != nil {
		for _, p := range m.Cohorts {
			if p.Owner < 0 || p.Owner >= len(roster) || roster[p.Owner] == "" {
				return fmt.Errorf("%w: epoch %d: cohort %d has owner index %d, which names no node of the roster", ErrBadRoster, m.Epoch, p.ID, p.Owner)
			}
		}
	}
	return nil
}

// Pushes encodes next for nodes that have base installed: a delta when base
// is not nil and the delta is smaller than the full manifest, the full
// version-2 manifest otherwise; split into chunks of at most chunkBytes.
// The pushes carry no roster (receivers use their static one); see
// PushesWithRoster.
func Pushes(base, next *control.OwnerMap, chunkBytes int, planner string, membershipEpoch uint64) ([]*messages.OwnerMapPush, error) {
	return PushesWithRoster(base, next, nil, chunkBytes, planner, membershipEpoch)
}

// PushesWithRoster is Pushes with next's roster (owner index i is node
// roster[i]) in every chunk. The roster is checked with ValidateRoster.
func PushesWithRoster(base, next *control.OwnerMap, roster []string, chunkBytes int, planner string, membershipEpoch uint64) ([]*messages.OwnerMapPush, error) {
	if chunkBytes < 1 {
		return nil, fmt.Errorf("planner: chunk size %d must be positive", chunkBytes)
	}
	if err := ValidateRoster(next, roster); err != nil {
		return nil, err
	}
	full, err := manifest.Encode(next, manifest.Version2, 0)
	if err != nil {
		return nil, err
	}
	body, baseEpoch := full, uint64(0)
	if base != nil && base.Epoch > 0 && base.Epoch < next.Epoch {
		if d, err := manifest.EncodeDelta(base, next, 0); err == nil && len(d) < len(full) {
			body, baseEpoch = d, base.Epoch
		}
	}
	ps := chunk(body, next.Epoch, baseEpoch, chunkBytes, planner, membershipEpoch)
	if len(roster) > 0 {
		r := slices.Clone(roster)
		for _, p := range ps {
			p.Roster = r // shared, read-only: the pushes are only marshalled
		}
	}
	return ps, nil
}

func chunk(body []byte, epoch, base uint64, chunkBytes int, planner string, membershipEpoch uint64) []*messages.OwnerMapPush {
	n := max(1, (len(body)+chunkBytes-1)/chunkBytes)
	sum := crc32.Checksum(body, castagnoli)
	out := make([]*messages.OwnerMapPush, 0, n)
	for i := range n {
		lo, hi := i*chunkBytes, min(len(body), (i+1)*chunkBytes)
		out = append(out, &messages.OwnerMapPush{Epoch: epoch, BaseEpoch: base, Manifest: body[lo:hi],
			ChunkIndex: uint32(i), ChunkCount: uint32(n), MembershipEpoch: membershipEpoch, Planner: planner,
			TotalBytes: uint64(len(body)), Crc32C: sum})
	}
	return out
}

// ErrNeedFull is returned by Assembler.Offer for a delta whose base is not
// the installed epoch: the node acknowledges with need_full.
var ErrNeedFull = errors.New("planner: delta against an epoch not installed")

// Assembler reassembles and decodes a node's OwnerMap pushes. It is a pure
// state machine (no goroutines, clock or I/O) and not safe for concurrent use.
type Assembler struct {
	maxBytes  int
	installed *control.OwnerMap
	roster    []string // installed with installed; nil: the push had none
	from      string   // OwnerMapPush.planner of the installed map
	// The push being assembled.
	epoch, base uint64
	count       uint32
	total       uint64
	sum         uint32
	pushRoster  []string
	parts       [][]byte
	have        int
}

// NewAssembler returns an assembler with nothing installed (epoch 0) that
// refuses manifests above maxBytes (0: the manifest package's default cap).
func NewAssembler(maxBytes int) *Assembler {
	if maxBytes <= 0 {
		maxBytes = manifest.DefaultMaxBytes
	}
	return &Assembler{maxBytes: maxBytes, installed: &control.OwnerMap{}}
}

// Installed returns the installed map (epoch 0 before the first).
func (a *Assembler) Installed() *control.OwnerMap { return a.installed }

// InstalledFrom returns the planner that published the installed map ("" before the first).
func (a *Assembler) InstalledFrom() string { return a.from }

// Roster returns the roster installed with the installed map (owner index i
// is node Roster()[i]), or nil when that map came without one. Callers must
// not modify it.
func (a *Assembler) Roster() []string { return a.roster }

// Offer takes one push. It returns the newly installed map when the push
// completed a manifest newer than the installed one, nil while chunks are
// missing or for a push not newer than the installed epoch (acknowledged and
// ignored: pushes are idempotent). Errors are typed enough for the ack:
// ErrNeedFull, or a malformed, oversized or corrupt manifest.
func (a *Assembler) Offer(p *messages.OwnerMapPush) (*control.OwnerMap, error) {
	if p.GetEpoch() <= a.installed.Epoch {
		return nil, nil
	}
	if p.GetChunkCount() == 0 || p.GetChunkIndex() >= p.GetChunkCount() {
		return nil, fmt.Errorf("planner: push chunk %d of %d", p.GetChunkIndex(), p.GetChunkCount())
	}
	if p.GetTotalBytes() > uint64(a.maxBytes) || uint64(p.GetChunkCount()) > p.GetTotalBytes()+1 {
		return nil, fmt.Errorf("planner: manifest of %d bytes in %d chunks over the %d-byte cap", p.GetTotalBytes(), p.GetChunkCount(), a.maxBytes)
	}
	if len(p.GetRoster()) >= control.MaxNodes {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrBadRoster, len(p.GetRoster()), control.MaxNodes-1)
	}
	if p.GetBaseEpoch() != 0 && p.GetBaseEpoch() != a.installed.Epoch {
		return nil, ErrNeedFull
	}
	if p.GetEpoch() != a.epoch || p.GetBaseEpoch() != a.base || p.GetChunkCount() != a.count ||
		p.GetTotalBytes() != a.total || p.GetCrc32C() != a.sum || !slices.Equal(p.GetRoster(), a.pushRoster) {
		// A new push (or a resend with other parameters) replaces the one
		// being assembled: at most one manifest is buffered.
		a.epoch, a.base, a.count, a.total, a.sum = p.GetEpoch(), p.GetBaseEpoch(), p.GetChunkCount(), p.GetTotalBytes(), p.GetCrc32C()
		a.pushRoster = slices.Clone(p.GetRoster())
		a.parts, a.have = make([][]byte, a.count), 0
	}
	if a.parts[p.GetChunkIndex()] == nil {
		a.parts[p.GetChunkIndex()] = append([]byte{}, p.GetManifest()...)
		a.have++
	}
	if a.have < int(a.count) {
		return nil, nil
	}
	body := make([]byte, 0, a.total)
	for _, part := range a.parts {
		body = append(body, part...)
	}
	roster := a.pushRoster
	a.parts, a.have, a.epoch, a.pushRoster = nil, 0, 0, nil
	if uint64(len(body)) != a.total || crc32.Checksum(body, castagnoli) != a.sum {
		return nil, fmt.Errorf("planner: manifest of epoch %d: length or checksum mismatch", p.GetEpoch())
	}
	opts := manifest.DecodeOptions{MaxBytes: a.maxBytes}
	var m *control.OwnerMap
	var err error
	if p.GetBaseEpoch() != 0 {
		m, err = manifest.ApplyDelta(a.installed, body, opts)
	} else {
		m, _, err = manifest.Decode(body, opts)
	}
	if err != nil {
		return nil, err
	}
	if m.Epoch != p.GetEpoch() {
		return nil, fmt.Errorf("planner: push of epoch %d carries a manifest of epoch %d", p.GetEpoch(), m.Epoch)
	}
	if err := ValidateRoster(m, roster); err != nil {
		return nil, err
	}
	a.installed, a.roster, a.from = m, roster, p.GetPlanner()
	return m, nil
}
