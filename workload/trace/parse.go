package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Errors wrapped by LineError (and by ParseLine).
var (
	ErrSyntax         = errors.New("malformed JSON line")
	ErrLineTooLong    = errors.New("line too long")
	ErrTooManyOps     = errors.New("too many operations")
	ErrNoOps          = errors.New("no operations")
	ErrBadKey         = errors.New("key is not an unsigned 64-bit integer")
	ErrBadTable       = errors.New("bad table name")
	ErrTooManyTables  = errors.New("too many tables")
	ErrTooManyLines   = errors.New("too many transactions")
	ErrTooManyOpsFile = errors.New("too many operations in the trace")
)

// MaxTableName is the longest table name, in bytes.
const MaxTableName = 64

// LineError is a problem with one line of a trace.
type LineError struct {
	// Line is the 1-based physical line number (blank lines count).
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("trace: line %d: %v", e.Line, e.Err) }

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// Op is one record reference of a trace line.
type Op struct {
	Table string
	Key   uint64
}

// Line is one parsed trace line: a transaction's reads and writes, in the
// order of the line (duplicates kept).
type Line struct {
	Reads  []Op
	Writes []Op
}

// ParseLine parses one JSON line,
//
//	{"reads":[["TABLE",KEY],…],"writes":[["TABLE",KEY],…]}
//
// Either list may be missing, empty or null, but the line must hold at least
// one operation and at most maxOps. KEY is a JSON integer in [0, 2^64-1]
// (no sign, fraction or exponent); TABLE is 1..MaxTableName bytes of
// printable, non-space characters. Other fields, duplicate fields and
// trailing data are errors. The line must not be blank.
func ParseLine(line []byte, maxOps int) (Line, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	p := parser{dec: dec, maxOps: maxOps}
	l, err := p.line()
	if err != nil {
		return Line{}, err
	}
	return l, nil
}

type parser struct {
	dec    *json.Decoder
	maxOps int
	ops    int
}

func syntaxErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %v", ErrSyntax, err)
}

func (p *parser) delim(want json.Delim) error {
	tok, err := p.dec.Token()
	if err != nil {
		return syntaxErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: got %s, want %q", ErrSyntax, describe(tok), string(want))
	}
	return nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return strconv.Quote(string(v))
	case string:
		return "string " + strconv.Quote(truncate(v))
	case json.Number:
		return "number " + truncate(string(v))
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

func (p *parser) line() (Line, error) {
	var l Line
	if err := p.delim('{'); err != nil {
		return l, err
	}
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return l, syntaxErr(err)
		}
		name, _ := tok.(string)
		if name != "reads" && name != "writes" {
			return l, fmt.Errorf("%w: unknown field %s (want \"reads\" and \"writes\")", ErrSyntax, describe(tok))
		}
		if seen[name] {
			return l, fmt.Errorf("%w: duplicate field %q", ErrSyntax, name)
		}
		seen[name] = true
		ops, err := p.list()
		if err != nil {
			return l, fmt.Errorf("%s: %w", name, err)
		}
		if name == "reads" {
			l.Reads = ops
		} else {
			l.Writes = ops
		}
	}
	if err := p.delim('}'); err != nil {
		return l, err
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return l, syntaxErr(err)
		}
		return l, fmt.Errorf("%w: trailing data after the object: %s", ErrSyntax, describe(tok))
	}
	if p.ops == 0 {
		return l, ErrNoOps
	}
	return l, nil
}

// list parses null or [op, …].
func (p *parser) list() ([]Op, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, syntaxErr(err)
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("%w: got %s, want a list of [\"TABLE\", KEY] pairs", ErrSyntax, describe(tok))
	}
	var ops []Op
	for i := 0; p.dec.More(); i++ {
		if p.ops++; p.ops > p.maxOps {
			return nil, fmt.Errorf("%w: more than %d in the line", ErrTooManyOps, p.maxOps)
		}
		op, err := p.op()
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", i, err)
		}
		ops = append(ops, op)
	}
	if err := p.delim(']'); err != nil {
		return nil, err
	}
	return ops, nil
}

// op parses ["TABLE", KEY].
func (p *parser) op() (Op, error) {
	var op Op
	if err := p.delim('['); err != nil {
		return op, err
	}
	tok, err := p.dec.Token()
	if err != nil {
		return op, syntaxErr(err)
	}
	name, ok := tok.(string)
	if !ok {
		return op, fmt.Errorf("%w: got %s, want a table name string", ErrBadTable, describe(tok))
	}
	if err := checkTable(name); err != nil {
		return op, err
	}
	op.Table = name
	tok, err = p.dec.Token()
	if err != nil {
		return op, syntaxErr(err)
	}
	num, ok := tok.(json.Number)
	if !ok {
		return op, fmt.Errorf("%w: got %s", ErrBadKey, describe(tok))
	}
	op.Key, err = strconv.ParseUint(string(num), 10, 64)
	if err != nil {
		return op, fmt.Errorf("%w: %s", ErrBadKey, truncate(string(num)))
	}
	if err := p.delim(']'); err != nil {
		return op, err
	}
	return op, nil
}

func checkTable(name string) error {
	if name == "" || len(name) > MaxTableName {
		return fmt.Errorf("%w: %q: want 1..%d bytes", ErrBadTable, truncate(name), MaxTableName)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q: invalid UTF-8", ErrBadTable, name)
	}
	for _, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q: want printable characters without spaces", ErrBadTable, name)
		}
	}
	return nil
}

// isBlank reports whether a line holds only JSON whitespace.
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
