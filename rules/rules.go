package rules

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aura-runtime/aura/txn"
)

// Bounds on rules and their inputs.
const (
	// MaxConfigBytes bounds a rules file: 1 MiB holds thousands of rules,
	// far more than a schema has tables.
	MaxConfigBytes = 1 << 20
	// MaxRules bounds the rules of a file, and of a Registry.
	MaxRules = 1024
	// MaxArity bounds a rule's key columns: 8 is above every TPC-C
	// primary key (ORDER_LINE has 4).
	MaxArity = 8
	// MaxNameBytes bounds rule, column and table names, in bytes.
	MaxNameBytes = 64
	// MaxKeyBytes bounds a textual key tuple: MaxArity values of at most
	// 20 digits with their commas.
	MaxKeyBytes = MaxArity*21 - 1
)

// Sentinel errors of Resolve and ParseKey; errors.Is matches them.
var (
	// ErrBadKey: the tuple does not fit the rule (arity, column bounds,
	// syntax).
	ErrBadKey = errors.New("bad key")
	// ErrNoSuchPartition: the tuple is well formed but names a partition
	// the workload does not have.
	ErrNoSuchPartition = errors.New("no such partition")
)

// Column is one key column of a rule, with its inclusive bounds.
type Column struct {
	Name     string
	Min, Max uint64
}

// Resolution is where a key tuple lands.
type Resolution struct {
	// Table is the record's table.
	Table txn.TableID
	// KeyGroup is the record's key group, looked up in the OwnerMap's
	// cohorts.
	KeyGroup uint64
	// Partition is the record's partition value, routed by the static
	// fallback when the key group is in no cohort.
	Partition uint64
}

// Rule is a named partition rule. Build one with NewRule, ForWorkload or
// Parse.
type Rule struct {
	name    string
	table   string
	columns []Column
	source  string
	resolve func(key []uint64) (Resolution, error)
}

// NewRule makes a rule over the given columns; resolve is called with a
// tuple of exactly len(columns) values within their bounds.
func NewRule(name, table, source string, columns []Column, resolve func(key []uint64) (Resolution, error)) (*Rule, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("rules: rule name: %w", err)
	}
	if len(columns) == 0 || len(columns) > MaxArity {
		return nil, fmt.Errorf("rules: rule %q: %d columns, want 1..%d", name, len(columns), MaxArity)
	}
	for _, c := range columns {
		if c.Min > c.Max {
			return nil, fmt.Errorf("rules: rule %q: column %q: min %d above max %d", name, c.Name, c.Min, c.Max)
		}
	}
	if resolve == nil {
		return nil, fmt.Errorf("rules: rule %q: no resolver", name)
	}
	return &Rule{name: name, table: table, columns: slices.Clone(columns), source: source, resolve: resolve}, nil
}

// Name is the rule's name.
func (r *Rule) Name() string { return r.name }

// Table is the name of the rule's table ("*" when the tuple's first column
// names the table).
func (r *Rule) Table() string { return r.table }

// Columns are the rule's key columns, in tuple order.
func (r *Rule) Columns() []Column { return slices.Clone(r.columns) }

// Arity is the number of key columns.
func (r *Rule) Arity() int { return len(r.columns) }

// Source says where the rule comes from: "workload", "builtin" or the
// file it was loaded from.
func (r *Rule) Source() string { return r.source }

// Resolve maps a key tuple to its table, key group and partition value.
func (r *Rule) Resolve(key []uint64) (Resolution, error) {
	if len(key) != len(r.columns) {
		return Resolution{}, fmt.Errorf("%w: rule %q takes %d key columns (%s), got %d", ErrBadKey, r.name,
			len(r.columns), r.columnList(), len(key))
	}
	for i, c := range r.columns {
		if key[i] < c.Min || key[i] > c.Max {
			return Resolution{}, fmt.Errorf("%w: rule %q: column %s = %d outside [%d, %d]", ErrBadKey, r.name, c.Name, key[i], c.Min, c.Max)
		}
	}
	return r.resolve(key)
}

func (r *Rule) columnList() string {
	names := make([]string, len(r.columns))
	for i, c := range r.columns {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

// ParseKey parses a key tuple "K1,K2,…": 1..MaxArity unsigned decimal
// 64-bit integers separated by commas, no signs, spaces or empty values,
// at most MaxKeyBytes bytes. It never panics.
func ParseKey(s string) ([]uint64, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty key tuple", ErrBadKey)
	}
	if len(s) > MaxKeyBytes {
		return nil, fmt.Errorf("%w: key tuple of %d bytes, at most %d", ErrBadKey, len(s), MaxKeyBytes)
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxArity {
		return nil, fmt.Errorf("%w: %d key values, at most %d", ErrBadKey, len(parts), MaxArity)
	}
	out := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: key value %d is empty", ErrBadKey, i+1)
		}
		for _, c := range []byte(p) {
			if c < '0' || c > '9' {
				return nil, fmt.Errorf("%w: key value %d %q is not an unsigned decimal integer", ErrBadKey, i+1, clip(p))
			}
		}
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: key value %d %q is above %d", ErrBadKey, i+1, clip(p), uint64(math.MaxUint64))
		}
		out[i] = v
	}
	return out, nil
}

// FormatKey is ParseKey's inverse.
func FormatKey(key []uint64) string {
	parts := make([]string, len(key))
	for i, v := range key {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, ",")
}

// clip shortens untrusted text quoted in errors to 32 bytes.
func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// checkName accepts 1..MaxNameBytes bytes of [A-Za-z0-9_.-].
func checkName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > MaxNameBytes {
		return fmt.Errorf("%d bytes, at most %d", len(s), MaxNameBytes)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%q: only letters, digits, '_', '.' and '-' allowed", clip(s))
		}
	}
	return nil
}

// Registry holds rules by name.
type Registry struct {
	byName map[string]*Rule
	names  []string
}

// NewRegistry makes a registry of rules; two rules of one name, or more
// than MaxRules rules, are an error.
func NewRegistry(rs ...*Rule) (*Registry, error) {
	if len(rs) > MaxRules {
		return nil, fmt.Errorf("rules: %d rules, at most %d", len(rs), MaxRules)
	}
	g := &Registry{byName: make(map[string]*Rule, len(rs))}
	var errs []error
	for _, r := range rs {
		if prev, dup := g.byName[r.name]; dup {
			errs = append(errs, fmt.Errorf("rules: rule %q defined twice (%s and %s)", r.name, prev.source, r.source))
			continue
		}
		g.byName[r.name] = r
		g.names = append(g.names, r.name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.Sort(g.names)
	return g, nil
}

// Lookup returns the rule of that name.
func (g *Registry) Lookup(name string) (*Rule, bool) {
	if g == nil {
		return nil, false
	}
	r, ok := g.byName[name]
	return r, ok
}

// Names returns the rule names, sorted.
func (g *Registry) Names() []string {
	if g == nil {
		return nil
	}
	return slices.Clone(g.names)
}

// Len is the number of rules.
func (g *Registry) Len() int {
	if g == nil {
		return 0
	}
	return len(g.names)
}
