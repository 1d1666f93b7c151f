package rules

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse: no input makes Parse panic, and every rule it accepts
// resolves any tuple of its arity without panicking.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/rules.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"rules":[{"name":"r","table":"account","columns":[{"name":"a"}],"key_group":{"kind":"hash","columns":["a"],"modulus":7},"partition":{"kind":"range","columns":["a"],"divisor":3},"table_shift":63}]}`))
	f.Add([]byte(`{"rules":[{}]}`))
	f.Add([]byte(`[]`))
	schema := bankSchema()
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Parse("fuzz.json", data, schema)
		if err != nil {
			if rs != nil {
				t.Fatal("rules returned with an error")
			}
			return
		}
		for _, r := range rs {
			key := make([]uint64, r.Arity())
			for i, c := range r.Columns() {
				key[i] = c.Max
			}
			if _, err := r.Resolve(key); err != nil && !errors.Is(err, ErrNoSuchPartition) {
				t.Fatalf("%s %v: %v", r.Name(), key, err)
			}
		}
	})
}

// FuzzParseKey: ParseKey never panics, accepts only what FormatKey
// writes back identically, and stays within its bounds.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"1001,50001", "1,2,3,4", "", ",", "-1", "18446744073709551616", "1,2,3,4,5,6,7,8,9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("%q: %v does not wrap ErrBadKey", s, err)
			}
			return
		}
		if len(key) == 0 || len(key) > MaxArity || len(s) > MaxKeyBytes {
			t.Fatalf("%q: accepted %d values", s, len(key))
		}
		if back := FormatKey(key); back != s && !leadingZeros(s) {
			t.Fatalf("%q: formats back as %q", s, back)
		}
	})
}

// leadingZeros reports whether some value of s has a redundant leading 0.
func leadingZeros(s string) bool {
	prev := byte(',')
	for i := 0; i < len(s); i++ {
		if prev == ',' && s[i] == '0' && i+1 < len(s) && s[i+1] != ',' {
			return true
		}
		prev = s[i]
	}
	return false
}
