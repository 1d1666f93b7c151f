package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseLineGood(t *testing.T) {
	cases := []struct {
		in   string
		want Line
	}{
		{`{"reads":[["A",1],["B",2]],"writes":[["A",3]]}`, Line{Reads: []Op{{"A", 1}, {"B", 2}}, Writes: []Op{{"A", 3}}}},
		{`{"writes":[["t",0]]}`, Line{Writes: []Op{{"t", 0}}}},
		{` { "writes" : [ [ "t" , 18446744073709551615 ] ] , "reads" : null } `, Line{Writes: []Op{{"t", math.MaxUint64}}}},
		{`{"reads":[["t",9007199254740993]],"writes":[]}`, Line{Reads: []Op{{"t", 9007199254740993}}}}, // 2^53+1: not a float
		{`{"reads":[["t",1],["t",1]]}`, Line{Reads: []Op{{"t", 1}, {"t", 1}}}},
		{`{"reads":[["ORDER_LINE",12345678901234567890]]}`, Line{Reads: []Op{{"ORDER_LINE", 12345678901234567890}}}},
		{`{"reads":[["t\u00e9",1]]}`, Line{Reads: []Op{{"té", 1}}}},
	}
	for _, c := range cases {
		got, err := ParseLine([]byte(c.in), 1024)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseLineBad(t *testing.T) {
	cases := []struct {
		in   string
		want error
	}{
		{``, ErrSyntax},
		{`[]`, ErrSyntax},
		{`null`, ErrSyntax},
		{`{}`, ErrNoOps},
		{`{"reads":[],"writes":null}`, ErrNoOps},
		{`{"reads":[["t",1]]`, ErrSyntax},
		{`{"reads":[["t",1]],}`, ErrSyntax},
		{`{"reads":[["t",1]]} {}`, ErrSyntax},
		{`{"reads":[["t",1]]}x`, ErrSyntax},
		{`{"reads":[["t",1]],"reads":[["t",2]]}`, ErrSyntax},
		{`{"read":[["t",1]]}`, ErrSyntax},
		{`{"reads":{"t":1}}`, ErrSyntax},
		{`{"reads":[["t",1,2]]}`, ErrSyntax},
		{`{"reads":[["t"]]}`, ErrBadKey},
		{`{"reads":[[1,"t"]]}`, ErrBadTable},
		{`{"reads":[["",1]]}`, ErrBadTable},
		{`{"reads":[["a b",1]]}`, ErrBadTable},
		{`{"reads":[["a\n",1]]}`, ErrBadTable},
		{`{"reads":[["` + strings.Repeat("x", 65) + `",1]]}`, ErrBadTable},
		{"{\"reads\":[[\"\xff\",1]]}", ErrBadTable},
		{`{"reads":[["t",-1]]}`, ErrBadKey},
		{`{"reads":[["t",1.0]]}`, ErrBadKey},
		{`{"reads":[["t",1e3]]}`, ErrBadKey},
		{`{"reads":[["t",18446744073709551616]]}`, ErrBadKey},
		{`{"reads":[["t","1"]]}`, ErrBadKey},
		{`{"reads":[["t",null]]}`, ErrBadKey},
		{`{"reads":[["t",01]]}`, ErrSyntax},
		{`{"reads":[["t",1],["t",2],["t",3]]}`, ErrTooManyOps},
		{`{"reads":[["t",1],["t",2]],"writes":[["t",3]]}`, ErrTooManyOps},
	}
	for _, c := range cases {
		_, err := ParseLine([]byte(c.in), 2)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: got %v, want %v", c.in, err, c.want)
		}
	}
}

// encodeLine renders a Line in the trace format.
func encodeLine(l Line) []byte {
	var b strings.Builder
	list := func(ops []Op) {
		b.WriteByte('[')
		for i, op := range ops {
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(op.Table)
			fmt.Fprintf(&b, "[%s,%d]", name, op.Key)
		}
		b.WriteByte(']')
	}
	b.WriteString(`{"reads":`)
	list(l.Reads)
	b.WriteString(`,"writes":`)
	list(l.Writes)
	b.WriteByte('}')
	return []byte(b.String())
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"reads":[["A",1]],"writes":[["B",18446744073709551615]]}`,
		`{"writes":[["t",0]]}`,
		`{"reads":null}`,
		`{"reads":[["t",1e3]]}`,
		`{"reads":[["t",-0]]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxOps = 8
		l, err := ParseLine(data, maxOps)
		if err != nil {
			for _, sentinel := range []error{ErrSyntax, ErrNoOps, ErrTooManyOps, ErrBadKey, ErrBadTable} {
				if errors.Is(err, sentinel) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		n := len(l.Reads) + len(l.Writes)
		if n == 0 || n > maxOps {
			t.Fatalf("%d operations accepted", n)
		}
		for _, op := range append(cloneOps(l.Reads), l.Writes...) {
			if checkTable(op.Table) != nil || !utf8.ValidString(op.Table) {
				t.Fatalf("bad table %q accepted", op.Table)
			}
		}
		// Round trip: re-encoding parses to the same line.
		again, err := ParseLine(encodeLine(l), maxOps)
		if err != nil {
			t.Fatalf("re-encoded line %s: %v", encodeLine(l), err)
		}
		if !reflect.DeepEqual(norm(again), norm(l)) {
			t.Fatalf("round trip: %+v became %+v", l, again)
		}
	})
}

func cloneOps(ops []Op) []Op { return append([]Op(nil), ops...) }

// norm makes empty lists nil for comparison.
func norm(l Line) Line {
	if len(l.Reads) == 0 {
		l.Reads = nil
	}
	if len(l.Writes) == 0 {
		l.Writes = nil
	}
	return l
}
