package manifest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aura-runtime/aura/control"
)

// DecodeOptions configures Decode and ApplyDelta. The zero value is the
// default (DefaultDecodeOptions).
type DecodeOptions struct {
	// MaxVersion is the newest full-manifest version the reader understands:
	// Version1 (a reader that predates cohorts: given version 2 it reads the
	// fallback table and skips the rest) or Version2. Default 0, meaning
	// LatestVersion: a reader takes everything it can. Decode never accepts
	// a delta, whatever MaxVersion says; ApplyDelta ignores MaxVersion.
	MaxVersion int
	// MaxBytes caps the input's size; larger inputs are refused before
	// anything is read. Default 0, meaning DefaultMaxBytes (900 KiB, the
	// tutorial's cap): it bounds what a corrupt or hostile push can make a
	// node allocate.
	MaxBytes int
	// Nodes, when positive, is the cluster's node count: a cohort owner or a
	// fallback entry (other than control.Unowned) at or above it is
	// ErrInvalid. Default 0: only the format's range, [0, control.MaxNodes),
	// is checked, because a manifest is self-contained and the reader may not
	// know the cluster's size.
	Nodes int
}

// DefaultDecodeOptions returns the defaults documented on DecodeOptions.
func DefaultDecodeOptions() DecodeOptions { return DecodeOptions{} }

// Validate reports every problem with the options at once.
func (o DecodeOptions) Validate() error {
	var errs []error
	if o.MaxVersion < 0 || o.MaxVersion > LatestVersion {
		errs = append(errs, fmt.Errorf("manifest: MaxVersion %d must be 0 (latest), %d or %d", o.MaxVersion, Version1, Version2))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("manifest: MaxBytes %d must not be negative (0 means %d)", o.MaxBytes, DefaultMaxBytes))
	}
	if o.Nodes < 0 || o.Nodes > control.MaxNodes {
		errs = append(errs, fmt.Errorf("manifest: Nodes %d must be in [0, %d]", o.Nodes, control.MaxNodes))
	}
	return errors.Join(errs...)
}

func (o DecodeOptions) maxBytes() int {
	if o.MaxBytes == 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

func (o DecodeOptions) maxVersion() int {
	if o.MaxVersion == 0 {
		return LatestVersion
	}
	return o.MaxVersion
}

// Info describes a decoded manifest.
type Info struct {
	// Version is the manifest_version on the wire (which may be newer than
	// the reader's MaxVersion).
	Version int
	// Epoch is the OwnerMap epoch.
	Epoch uint64
	// Bytes is the input's size.
	Bytes int
	// Skipped is the number of bytes the reader skipped unread: the cohort
	// section of a version 2 manifest given to a version 1 reader.
	Skipped int
	// Cohorts and KeyGroups count what was decoded.
	Cohorts   int
	KeyGroups int
}

// Header is a manifest's header, as Peek reads it.
type Header struct {
	// Version is the manifest_version: 1, 2 or VersionDelta.
	Version int
	// Epoch is the OwnerMap epoch the manifest describes.
	Epoch uint64
	// BaseEpoch is, for a delta, the epoch it applies to; 0 otherwise.
	BaseEpoch uint64
}

// Delta reports whether the manifest is a delta.
func (h Header) Delta() bool { return h.Version == VersionDelta }

// Peek reads a manifest's header (and a delta's base epoch) without decoding
// the rest, so that a receiver can tell a delta from a full manifest and
// check the base before applying it. It checks the magic, the version and the
// reserved field.
func Peek(b []byte) (Header, error) {
	r := reader{op: "peek", b: b}
	v, epoch := r.header()
	h := Header{Version: v, Epoch: epoch}
	if r.err == nil && v != Version1 && v != Version2 && v != VersionDelta {
		r.fail(4, ErrUnsupportedVersion, "version %d", v)
	}
	if v == VersionDelta {
		h.BaseEpoch = r.u64("base_epoch")
	}
	return h, r.errOrNil()
}

// Decode decodes a full manifest (version 1 or 2) into an OwnerMap,
// following the cross-version rules of the package doc. A delta is
// ErrWrongKind (use ApplyDelta). The map's cohorts are in ascending id order;
// an empty fallback table or cohort list is nil. Every error is a
// *FormatError, except invalid options.
func Decode(b []byte, opts DecodeOptions) (*control.OwnerMap, Info, error) {
	if err := opts.Validate(); err != nil {
		return nil, Info{}, err
	}
	info := Info{Bytes: len(b)}
	if limit := opts.maxBytes(); len(b) > limit {
		return nil, info, errorf("decode", 0, ErrTooLarge, "input of %d bytes exceeds the cap of %d", len(b), limit)
	}
	r := reader{op: "decode", b: b}
	v, epoch := r.header()
	info.Version, info.Epoch = v, epoch
	if r.err != nil {
		return nil, info, r.err
	}
	switch v {
	case Version1, Version2:
	case VersionDelta:
		return nil, info, errorf("decode", 4, ErrWrongKind, "version %d is a delta; apply it with ApplyDelta", v)
	default:
		return nil, info, errorf("decode", 4, ErrUnsupportedVersion, "version %d (this reader knows %d and %d)", v, Version1, Version2)
	}
	m := &control.OwnerMap{Epoch: epoch}
	m.Fallback = r.fallback(opts.Nodes)
	if r.err != nil {
		return nil, info, r.err
	}
	if v == Version1 || opts.maxVersion() == Version1 {
		// A version 1 reader stops after the fallback section: what follows
		// in a newer version is not its to check.
		if v == Version1 {
			if err := r.end(); err != nil {
				return nil, info, err
			}
		}
		info.Skipped = len(b) - r.off
		return m, info, nil
	}
	n := r.u32("num_cohorts")
	m.Cohorts, info.KeyGroups = r.cohorts(int64(n), true, opts.Nodes)
	if err := r.end(); err != nil {
		return nil, info, err
	}
	info.Cohorts = len(m.Cohorts)
	if kg, ok := duplicateKeyGroup(m.Cohorts, info.KeyGroups); ok {
		a, c := cohortsOf(m.Cohorts, kg)
		return nil, info, errorf("decode", -1, ErrInvalid, "key group %d in cohorts %d and %d", kg, a, c)
	}
	return m, info, nil
}

// reader reads a manifest front to back; the first error sticks.
type reader struct {
	op  string
	b   []byte
	off int
	err *FormatError
}

func (r *reader) fail(off int, sentinel error, format string, args ...any) {
	if r.err == nil {
		r.err = errorf(r.op, off, sentinel, format, args...)
	}
}

func (r *reader) errOrNil() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

func (r *reader) left() int { return len(r.b) - r.off }

// take returns the next n bytes, or nil (and a sticky ErrTruncated).
func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail(r.off, ErrTruncated, "%s needs %d bytes, %d left", what, n, r.left())
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8(what string) uint8 {
	if p := r.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return le.Uint64(p)
	}
	return 0
}

// need fails unless count records of size bytes each fit in what is left:
// the check that comes before any allocation sized by count.
func (r *reader) need(count int64, size int, what string) bool {
	if r.err != nil {
		return false
	}
	if count < 0 || count > int64(r.left())/int64(size) {
		r.fail(r.off, ErrTruncated, "%d %s of at least %d bytes each do not fit in the %d bytes left", count, what, size, r.left())
		return false
	}
	return true
}

// end fails if bytes are left: every manifest has exactly one encoding.
func (r *reader) end() error {
	if r.err == nil && r.left() != 0 {
		r.fail(r.off, ErrTrailingBytes, "%d bytes after the last section", r.left())
	}
	return r.errOrNil()
}

// header reads the common header and returns the version and epoch.
func (r *reader) header() (int, uint64) {
	if p := r.b[:min(len(r.b), len(Magic))]; string(p) != Magic[:len(p)] {
		r.fail(0, ErrBadMagic, "input starts with %q, want %q", p, Magic)
		return 0, 0
	}
	if len(r.b) < HeaderSize {
		r.fail(0, ErrTruncated, "%d bytes is shorter than the %d-byte header", len(r.b), HeaderSize)
		return 0, 0
	}
	r.take(len(Magic), "magic")
	v := int(r.u16("manifest_version"))
	epoch := r.u64("epoch")
	if res := r.u16("reserved"); res != 0 {
		r.fail(14, ErrInvalid, "reserved field is %#04x, want 0", res)
	}
	return v, epoch
}

// fallback reads num_warehouses and the owner bytes.
func (r *reader) fallback(nodes int) []uint8 {
	n := r.u32("num_warehouses")
	if !r.need(int64(n), 1, "warehouse owners") {
		return nil
	}
	start := r.off
	p := r.take(int(n), "warehouse owners")
	if nodes > 0 {
		for i, o := range p {
			if o != control.Unowned && int(o) >= nodes {
				r.fail(start+i, ErrInvalid, "warehouse %d: owner %d of a %d-node cluster", i, o, nodes)
				return nil
			}
		}
	}
	if n == 0 {
		return nil
	}
	return slices.Clone(p)
}

// cohorts reads n cohort records (as in version 2 and delta upserts): a
// first pass checks every bound, order and owner without allocating, a
// second fills the placements, whose key groups share one backing array.
// ascending requires strictly ascending cohort ids. It returns the
// placements (nil when n is 0) and the total number of key groups.
func (r *reader) cohorts(n int64, ascending bool, nodes int) ([]control.Placement, int) {
	if !r.need(n, cohortFixedSize, "cohorts") {
		return nil, 0
	}
	maxOwner := control.MaxNodes
	if nodes > 0 {
		maxOwner = nodes
	}
	start := r.off
	total := 0
	var prev uint64
	for i := int64(0); i < n && r.err == nil; i++ {
		at := r.off
		id := r.u64("cohort_id")
		owner := int(r.u8("owner_cn"))
		k := int(r.u16("num_kgs"))
		if r.err != nil {
			break
		}
		if ascending && i > 0 && id <= prev {
			r.fail(at, ErrInvalid, "cohort %d follows cohort %d: ids not strictly ascending", id, prev)
			break
		}
		prev = id
		if owner >= maxOwner {
			r.fail(at+8, ErrInvalid, "cohort %d: owner %d out of range [0, %d)", id, owner, maxOwner)
			break
		}
		kgs := r.take(8*k, "key groups")
		for j := 1; j < k && r.err == nil; j++ {
			if le.Uint64(kgs[8*j:]) <= le.Uint64(kgs[8*(j-1):]) {
				r.fail(at+cohortFixedSize+8*j, ErrInvalid, "cohort %d: key groups not strictly ascending at %d", id, j)
			}
		}
		total += k
	}
	if r.err != nil || n == 0 {
		return nil, 0
	}
	// Second pass: everything is in bounds and checked.
	out := make([]control.Placement, n)
	backing := make([]uint64, total)
	off := start
	for i := range out {
		id := le.Uint64(r.b[off:])
		owner := int(r.b[off+8])
		k := int(le.Uint16(r.b[off+9:]))
		off += cohortFixedSize
		var kgs []uint64
		if k > 0 {
			kgs = backing[:k:k]
			backing = backing[k:]
			for j := range kgs {
				kgs[j] = le.Uint64(r.b[off+8*j:])
			}
			off += 8 * k
		}
		out[i] = control.Placement{Cohort: control.Cohort{ID: id, KeyGroups: kgs}, Owner: owner}
	}
	return out, total
}
