package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/memberlist"
)

// Node metadata wire format.
//
// memberlist gossips an opaque byte string per node (at most
// memberlist.MetaMaxSize = 512 bytes) with every alive message. Ours is:
//
//	v1: version      1 B  (= 1)
//	    incarnation  8 B  little-endian uint64
//	    remote_len   1 B  then remote_len bytes of RemoteAddr
//	    num_roles    1 B  then per role: role_len 1 B, role_len bytes
//
// Roles are written sorted and without duplicates, so every valid Meta has
// exactly one v1 encoding and DecodeMeta(EncodeMeta(m)) == m.
//
// Evolution is append-only: a later version starts with the v1 layout and
// appends fields, so a v1 decoder given version >= 2 reads the v1 prefix and
// skips the rest. Version 0 is invalid; a version-1 encoding with trailing
// bytes is rejected (it can only be corruption).
const (
	// MetaVersion is the metadata encoding version EncodeMeta writes.
	MetaVersion = 1
	// MaxMetaSize is the hard cap on encoded metadata, memberlist's own limit
	// (it panics past it, so we refuse before handing bytes over).
	MaxMetaSize = memberlist.MetaMaxSize
	// MaxRemoteAddrLen caps Meta.RemoteAddr (one length byte on the wire).
	MaxRemoteAddrLen = 255
	// MaxRoles caps the number of roles a node advertises.
	MaxRoles = 16
	// MaxRoleLen caps the length of one role name.
	MaxRoleLen = 32

	metaV1FixedLen = 1 + 8 + 1 + 1 // version, incarnation, remote_len, num_roles
)

// Well-known roles. Roles are free-form lowercase tokens; these are the ones
// the runtime itself looks for.
const (
	RoleCN      = "cn"      // compute node: runs transaction and owner actors
	RolePlanner = "planner" // may host the planner singleton
	RoleMN      = "mn"      // memory node
	// RoleLeaving marks a compute node that is leaving gracefully: the
	// planner moves its cohorts to the others (with the migration
	// protocol) before it leaves the membership.
	RoleLeaving = "leaving"
)

var (
	// ErrMetaTooLarge is returned when encoded metadata would exceed MaxMetaSize.
	ErrMetaTooLarge = errors.New("cluster: node metadata too large")
	// ErrBadMeta is returned for metadata that is malformed or violates the
	// limits on roles and addresses.
	ErrBadMeta = errors.New("cluster: bad node metadata")
)

// Meta is what a node advertises about itself through membership gossip.
type Meta struct {
	// RemoteAddr is the node's protoactor remote address (host:port) that
	// other nodes send actor messages to. Empty if the node hosts no actors.
	RemoteAddr string
	// Roles the node plays ("cn", "planner", ...). Encoded sorted.
	Roles []string
	// Incarnation identifies one run of the node process. Membership.Start
	// sets it from the wall clock (Unix nanoseconds) when it is zero, so a
	// node restarted under the same name advertises a larger incarnation and
	// the planner can tell a restart (state lost) from a flap (state kept).
	Incarnation uint64
}

// HasRole reports whether r is among m.Roles.
func (m Meta) HasRole(r string) bool { return slices.Contains(m.Roles, r) }

// Clone returns a deep copy of m.
func (m Meta) Clone() Meta {
	m.Roles = slices.Clone(m.Roles)
	return m
}

// Equal reports whether m and o describe the same metadata (role order
// ignored).
func (m Meta) Equal(o Meta) bool {
	if m.RemoteAddr != o.RemoteAddr || m.Incarnation != o.Incarnation || len(m.Roles) != len(o.Roles) {
		return false
	}
	a, b := slices.Clone(m.Roles), slices.Clone(o.Roles)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// validRole reports whether r is 1..MaxRoleLen bytes of [a-z0-9_-].
func validRole(r string) bool {
	if len(r) == 0 || len(r) > MaxRoleLen {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validateRemoteAddr accepts "" or host:port with a numeric port in 1..65535
// and printable ASCII only.
func validateRemoteAddr(a string) error {
	if a == "" {
		return nil
	}
	if len(a) > MaxRemoteAddrLen {
		return fmt.Errorf("remote address is %d bytes, limit %d", len(a), MaxRemoteAddrLen)
	}
	for i := 0; i < len(a); i++ {
		if a[i] <= ' ' || a[i] > '~' {
			return fmt.Errorf("remote address %q has a non-printable or space byte", a)
		}
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("remote address %q: %v", a, err)
	}
	if host == "" {
		return fmt.Errorf("remote address %q has an empty host", a)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 || strconv.FormatUint(p, 10) != port {
		return fmt.Errorf("remote address %q: port must be a decimal number in 1..65535", a)
	}
	return nil
}

// validate checks the limits every encodable Meta obeys; it returns all
// problems at once.
func (m Meta) validate() error {
	var errs []error
	if err := validateRemoteAddr(m.RemoteAddr); err != nil {
		errs = append(errs, err)
	}
	if len(m.Roles) > MaxRoles {
		errs = append(errs, fmt.Errorf("%d roles, limit %d", len(m.Roles), MaxRoles))
	}
	seen := make(map[string]bool, len(m.Roles))
	for _, r := range m.Roles {
		if !validRole(r) {
			errs = append(errs, fmt.Errorf("role %q: want 1..%d bytes of [a-z0-9_-]", r, MaxRoleLen))
		}
		if seen[r] {
			errs = append(errs, fmt.Errorf("role %q listed twice", r))
		}
		seen[r] = true
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrBadMeta, errors.Join(errs...))
}

// EncodedLen is the size of m's v1 encoding (whether or not it is valid).
func (m Meta) EncodedLen() int {
	n := metaV1FixedLen + len(m.RemoteAddr)
	for _, r := range m.Roles {
		n += 1 + len(r)
	}
	return n
}

// EncodeMeta returns the v1 encoding of m. It fails with ErrBadMeta if a
// field violates its limits and with ErrMetaTooLarge if the encoding would
// exceed MaxMetaSize.
func EncodeMeta(m Meta) ([]byte, error) {
	var errs []error
	if err := m.validate(); err != nil {
		errs = append(errs, err)
	}
	if n := m.EncodedLen(); n > MaxMetaSize {
		errs = append(errs, fmt.Errorf("%w: encoding is %d bytes, memberlist allows at most %d (shorten RemoteAddr or drop roles)",
			ErrMetaTooLarge, n, MaxMetaSize))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	roles := slices.Clone(m.Roles)
	slices.Sort(roles)
	buf := make([]byte, 0, m.EncodedLen())
	buf = append(buf, MetaVersion)
	buf = binary.LittleEndian.AppendUint64(buf, m.Incarnation)
	buf = append(buf, byte(len(m.RemoteAddr)))
	buf = append(buf, m.RemoteAddr...)
	buf = append(buf, byte(len(roles)))
	for _, r := range roles {
		buf = append(buf, byte(len(r)))
		buf = append(buf, r...)
	}
	return buf, nil
}

// DecodeMeta parses metadata written by EncodeMeta (any version >= 1; fields
// appended by later versions are skipped). Malformed input yields an error
// wrapping ErrBadMeta or ErrMetaTooLarge, never a panic. The result is always
// re-encodable.
func DecodeMeta(b []byte) (Meta, error) {
	m, _, err := decodeMeta(b)
	return m, err
}

// decodeMeta also returns the length of the v1 prefix it consumed.
func decodeMeta(b []byte) (Meta, int, error) {
	var m Meta
	if len(b) > MaxMetaSize {
		return m, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(b), MaxMetaSize)
	}
	if len(b) == 0 {
		return m, 0, fmt.Errorf("%w: empty", ErrBadMeta)
	}
	version := b[0]
	if version == 0 {
		return m, 0, fmt.Errorf("%w: version 0", ErrBadMeta)
	}
	short := func(what string) (Meta, int, error) {
		return Meta{}, 0, fmt.Errorf("%w: truncated in %s (%d bytes)", ErrBadMeta, what, len(b))
	}
	p := 1
	if len(b) < p+8 {
		return short("incarnation")
	}
	m.Incarnation = binary.LittleEndian.Uint64(b[p:])
	p += 8
	if len(b) < p+1 {
		return short("remote address length")
	}
	n := int(b[p])
	p++
	if len(b) < p+n {
		return short("remote address")
	}
	m.RemoteAddr = string(b[p : p+n])
	p += n
	if len(b) < p+1 {
		return short("role count")
	}
	nr := int(b[p])
	p++
	if nr > MaxRoles {
		return Meta{}, 0, fmt.Errorf("%w: %d roles, limit %d", ErrBadMeta, nr, MaxRoles)
	}
	if nr > 0 {
		m.Roles = make([]string, 0, nr)
	}
	for i := 0; i < nr; i++ {
		if len(b) < p+1 {
			return short("role length")
		}
		rl := int(b[p])
		p++
		if len(b) < p+rl {
			return short("role")
		}
		r := string(b[p : p+rl])
		p += rl
		if len(m.Roles) > 0 && strings.Compare(m.Roles[len(m.Roles)-1], r) >= 0 {
			return Meta{}, 0, fmt.Errorf("%w: roles not strictly sorted at %q", ErrBadMeta, r)
		}
		m.Roles = append(m.Roles, r)
	}
	if version == 1 && p != len(b) {
		return Meta{}, 0, fmt.Errorf("%w: %d trailing bytes after version-1 metadata", ErrBadMeta, len(b)-p)
	}
	if err := m.validate(); err != nil {
		return Meta{}, 0, err
	}
	return m, p, nil
}
