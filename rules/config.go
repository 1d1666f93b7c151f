package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
)

// FileConfig is a rules file, JSON (unknown fields are errors):
//
//	{"rules": [
//	  {"name": "r_account_branch",
//	   "table": "account",
//	   "columns": [{"name": "branch", "max": 1023}, {"name": "account"}],
//	   "key_group": {"kind": "range", "columns": ["account"], "divisor": 64},
//	   "partition": {"kind": "hash", "columns": ["branch"], "modulus": 16},
//	   "table_shift": 0,
//	   "partitions": 16}
//	]}
//
// A key tuple has one value per column, in order, each within the column's
// inclusive [min, max] (defaults 0 and 2^64−1). key_group and partition are
// each a Mapping of the tuple; with table_shift S in 1..63 the key group is
// the table id shifted left by S bits with the mapping's value in the low
// S bits (folded by a hash when it does not fit: key groups may then be
// shared, which costs locality, not correctness), as the trace workload
// (S = 56) and TPC-C (S = 40) tag their key groups; 0 (the default) takes
// the value as the key group, as bank and YCSB do. partitions N > 0 says
// the partition values 0..N−1 exist: a tuple mapping elsewhere is
// ErrNoSuchPartition.
type FileConfig struct {
	Rules []RuleConfig `json:"rules"`
}

// RuleConfig is one rule of a FileConfig.
type RuleConfig struct {
	Name       string         `json:"name"`
	Table      string         `json:"table"`
	Columns    []ColumnConfig `json:"columns"`
	KeyGroup   *Mapping       `json:"key_group"`
	Partition  *Mapping       `json:"partition"`
	TableShift int            `json:"table_shift"`
	Partitions uint64         `json:"partitions"`
}

// ColumnConfig is one key column; Min and Max are optional.
type ColumnConfig struct {
	Name string  `json:"name"`
	Min  *uint64 `json:"min"`
	Max  *uint64 `json:"max"`
}

// Mapping computes a value from some of the tuple's columns:
//
//   - "range": one column, value = column / divisor (divisor ≥ 1);
//   - "hash": one or more columns, value = a 64-bit mix of them in order
//     (control.Mix64 folded over the columns).
//
// With modulus M > 0 the value is then taken mod M.
type Mapping struct {
	Kind    string   `json:"kind"`
	Columns []string `json:"columns"`
	Divisor uint64   `json:"divisor"`
	Modulus uint64   `json:"modulus"`
}

// Load reads and parses a rules file (Parse), refusing files above
// MaxConfigBytes before reading them whole.
func Load(path string, schema txn.Schema) ([]*Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", path, err)
	}
	return Parse(path, data, schema)
}

// Parse decodes a rules file (FileConfig) and builds its rules over
// schema's tables. file names the source in errors and in Rule.Source.
// Every problem found is reported, joined, each as "file: rule I "NAME":
// field: problem". It never panics.
func Parse(file string, data []byte, schema txn.Schema) ([]*Rule, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("rules: %s: above %d bytes", file, MaxConfigBytes)
	}
	var fc FileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("rules: %s: %s", file, describeJSONError(data, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("rules: %s: data after the top-level object", file)
	}
	if len(fc.Rules) == 0 {
		return nil, fmt.Errorf("rules: %s: rules: none given", file)
	}
	if len(fc.Rules) > MaxRules {
		return nil, fmt.Errorf("rules: %s: rules: %d rules, at most %d", file, len(fc.Rules), MaxRules)
	}
	var errs []error
	var out []*Rule
	seen := map[string]int{}
	for i, rc := range fc.Rules {
		fail := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("rules: %s: rule %d %q: %s: %s", file, i+1, clip(rc.Name), field, fmt.Sprintf(format, args...)))
		}
		if err := checkName(rc.Name); err != nil {
			fail("name", "%v", err)
		} else if j, dup := seen[rc.Name]; dup {
			fail("name", "also the name of rule %d", j+1)
		} else {
			seen[rc.Name] = i
		}
		r, ok := buildRule(file, rc, schema, fail)
		if ok {
			out = append(out, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// buildRule checks rc, reporting each problem through fail, and builds the
// rule when there is none.
func buildRule(file string, rc RuleConfig, schema txn.Schema, fail func(field, format string, args ...any)) (*Rule, bool) {
	ok := true
	bad := func(field, format string, args ...any) { ok = false; fail(field, format, args...) }
	var table txn.Table
	found := false
	for _, t := range schema.Tables {
		if t.Name == rc.Table {
			table, found = t, true
		}
	}
	if !found {
		names := make([]string, len(schema.Tables))
		for i, t := range schema.Tables {
			names[i] = t.Name
		}
		bad("table", "%q is not a table of the schema (tables: %v)", clip(rc.Table), names)
	}
	if len(rc.Columns) == 0 || len(rc.Columns) > MaxArity {
		bad("columns", "%d columns, want 1..%d", len(rc.Columns), MaxArity)
	}
	cols := make([]Column, 0, len(rc.Columns))
	pos := map[string]int{}
	for j, c := range rc.Columns {
		if j >= MaxArity {
			break
		}
		field := fmt.Sprintf("columns[%d]", j)
		if err := checkName(c.Name); err != nil {
			bad(field+".name", "%v", err)
		} else if _, dup := pos[c.Name]; dup {
			bad(field+".name", "%q given twice", c.Name)
		} else {
			pos[c.Name] = j
		}
		col := Column{Name: c.Name, Max: math.MaxUint64}
		if c.Min != nil {
			col.Min = *c.Min
		}
		if c.Max != nil {
			col.Max = *c.Max
		}
		if col.Min > col.Max {
			bad(field, "min %d above max %d", col.Min, col.Max)
		}
		cols = append(cols, col)
	}
	kg := checkMapping("key_group", rc.KeyGroup, pos, bad)
	part := checkMapping("partition", rc.Partition, pos, bad)
	if rc.TableShift < 0 || rc.TableShift > 63 {
		bad("table_shift", "%d, want 0..63", rc.TableShift)
	} else if rc.TableShift > 0 && rc.TableShift < 64 && uint64(table.ID) >= 1<<(64-rc.TableShift) {
		bad("table_shift", "%d leaves %d bits, too few for table id %d", rc.TableShift, 64-rc.TableShift, table.ID)
	}
	if !ok {
		return nil, false
	}
	shift, tid, limit := uint(rc.TableShift), table.ID, rc.Partitions
	name := rc.Name
	r, err := NewRule(rc.Name, rc.Table, file, cols, func(key []uint64) (Resolution, error) {
		v := kg(key)
		if shift > 0 {
			mask := uint64(1)<<shift - 1
			if v > mask {
				v = control.Mix64(v) & mask
			}
			v |= uint64(tid) << shift
		}
		p := part(key)
		if limit > 0 && p >= limit {
			return Resolution{}, fmt.Errorf("%w: rule %q: partition %d, the rule has partitions 0..%d", ErrNoSuchPartition, name, p, limit-1)
		}
		return Resolution{Table: tid, KeyGroup: v, Partition: p}, nil
	})
	if err != nil {
		fail("rule", "%v", err)
		return nil, false
	}
	return r, true
}

// checkMapping checks one Mapping and returns its evaluator (nil when it
// is invalid).
func checkMapping(field string, m *Mapping, pos map[string]int, bad func(field, format string, args ...any)) func([]uint64) uint64 {
	if m == nil {
		bad(field, "missing")
		return nil
	}
	ok := true
	fail := func(sub, format string, args ...any) { ok = false; bad(field+"."+sub, format, args...) }
	if len(m.Columns) == 0 || len(m.Columns) > MaxArity {
		fail("columns", "%d columns, want 1..%d", len(m.Columns), MaxArity)
	}
	idx := make([]int, 0, len(m.Columns))
	for j, c := range m.Columns {
		if j >= MaxArity {
			break
		}
		p, found := pos[c]
		if !found {
			fail(fmt.Sprintf("columns[%d]", j), "%q is not a column of the rule", clip(c))
			continue
		}
		if slices.Contains(idx, p) {
			fail(fmt.Sprintf("columns[%d]", j), "%q given twice", c)
		}
		idx = append(idx, p)
	}
	switch m.Kind {
	case "range":
		if len(m.Columns) != 1 {
			fail("columns", "a range takes one column, got %d", len(m.Columns))
		}
		if m.Divisor == 0 {
			fail("divisor", "must be at least 1")
		}
	case "hash":
		if m.Divisor != 0 {
			fail("divisor", "only a range takes a divisor")
		}
	default:
		fail("kind", "%q, want \"range\" or \"hash\"", clip(m.Kind))
	}
	if !ok {
		return nil
	}
	kind, div, mod := m.Kind, m.Divisor, m.Modulus
	return func(key []uint64) uint64 {
		var v uint64
		if kind == "range" {
			v = key[idx[0]] / div
		} else {
			for _, i := range idx {
				v = control.Mix64(v ^ control.Mix64(key[i]))
			}
		}
		if mod > 0 {
			v %= mod
		}
		return v
	}
}

// describeJSONError adds the line and column (1-based, in bytes) of a
// syntax or type error.
func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.EOF):
		return "empty file, want a JSON object {\"rules\": [...]}"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of file"
	}
	if off < 1 || off > int64(len(data)) {
		return err.Error()
	}
	off-- // the offset is just past the offending byte
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}
