package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/kvrec"
)

// Name is the workload's name.
const Name = "trace"

// Limits of the configuration.
const (
	// MaxTables is the most tables a trace may name (table ids 1..255 fit
	// the key-group packing).
	MaxTables = 255
	// HardMaxLineBytes, HardMaxOpsPerLine, HardMaxTransactions and
	// HardMaxTotalOps bound the corresponding Config fields.
	HardMaxLineBytes    = 16 << 20
	HardMaxOpsPerLine   = kvrec.MaxOps
	HardMaxTransactions = 1 << 26
	HardMaxTotalOps     = 1 << 28
	// MaxKeysPerKG bounds a range rule's key-group size.
	MaxKeysPerKG = 1 << 40
	// maxReportedErrors is how many bad lines New reports before giving up.
	maxReportedErrors = 10
	// kgLocalBits is the width of the per-table part of a key group id.
	kgLocalBits = 56
)

// Config configures the trace workload.
type Config struct {
	// Path is the JSON-lines trace New reads (NewFromReader ignores it).
	Path string
	// KeysPerKG is the default range rule: key group = (table, key /
	// KeysPerKG). 1..MaxKeysPerKG. Default 64.
	KeysPerKG uint64
	// TableKeysPerKG overrides KeysPerKG per table name; naming a table the
	// trace does not use is an error.
	TableKeysPerKG map[string]uint64
	// ValueSize is the size of every record, kvrec.MinValueSize ..
	// txn.MaxValueSize. Default 32.
	ValueSize int
	// Clients is the number of replaying clients the trace is divided
	// among: client c replays lines c, c+Clients, c+2·Clients, … (in
	// transaction order, blank lines excluded). ≥ 1; default 1. Clients
	// numbered ≥ Clients replay the share of client c mod Clients.
	Clients int
	// Loop replays a client's share again from its start once exhausted;
	// without it Next returns nil at the end.
	Loop bool
	// MaxLineBytes bounds a line's length (without its newline),
	// 1..HardMaxLineBytes. Default 1 MiB.
	MaxLineBytes int
	// MaxOpsPerLine bounds a line's operations (reads plus writes),
	// 1..HardMaxOpsPerLine. Default 1024.
	MaxOpsPerLine int
	// MaxTransactions bounds the trace's non-blank lines,
	// 1..HardMaxTransactions. Default 2^22.
	MaxTransactions int
	// MaxTotalOps bounds the operations of the whole trace (the memory it
	// takes: 16 bytes each, twice while loading), 1..HardMaxTotalOps.
	// Default 2^24.
	MaxTotalOps int
}

// DefaultConfig returns the default configuration (without a Path).
func DefaultConfig() Config {
	return Config{
		KeysPerKG:       64,
		ValueSize:       kvrec.MinValueSize,
		Clients:         1,
		MaxLineBytes:    1 << 20,
		MaxOpsPerLine:   1024,
		MaxTransactions: 1 << 22,
		MaxTotalOps:     1 << 24,
	}
}

// Validate reports every problem with the configuration (the Path is
// checked by New).
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("trace: "+format, args...)) }
	if c.KeysPerKG < 1 || c.KeysPerKG > MaxKeysPerKG {
		add("keys per key group %d, want 1..%d", c.KeysPerKG, uint64(MaxKeysPerKG))
	}
	for _, name := range slices.Sorted(mapKeys(c.TableKeysPerKG)) {
		if n := c.TableKeysPerKG[name]; n < 1 || n > MaxKeysPerKG {
			add("keys per key group of table %q: %d, want 1..%d", name, n, uint64(MaxKeysPerKG))
		}
	}
	if c.ValueSize < kvrec.MinValueSize || c.ValueSize > txn.MaxValueSize {
		add("value size %d, want %d..%d", c.ValueSize, kvrec.MinValueSize, txn.MaxValueSize)
	}
	if c.Clients < 1 {
		add("clients %d, want ≥ 1", c.Clients)
	}
	if c.MaxLineBytes < 1 || c.MaxLineBytes > HardMaxLineBytes {
		add("max line bytes %d, want 1..%d", c.MaxLineBytes, HardMaxLineBytes)
	}
	if c.MaxOpsPerLine < 1 || c.MaxOpsPerLine > HardMaxOpsPerLine {
		add("max ops per line %d, want 1..%d", c.MaxOpsPerLine, HardMaxOpsPerLine)
	}
	if c.MaxTransactions < 1 || c.MaxTransactions > HardMaxTransactions {
		add("max transactions %d, want 1..%d", c.MaxTransactions, HardMaxTransactions)
	}
	if c.MaxTotalOps < 1 || c.MaxTotalOps > HardMaxTotalOps {
		add("max total ops %d, want 1..%d", c.MaxTotalOps, HardMaxTotalOps)
	}
	return errors.Join(errs...)
}

func mapKeys(m map[string]uint64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Workload replays a trace. It is safe for concurrent use.
type Workload struct {
	cfg    Config
	tables []string   // table id i+1 is tables[i]
	perKG  []uint64   // per table id-1
	keys   [][]uint64 // per table id-1: distinct keys, ascending
	// Transaction i is ops[start[i]:start[i+1]], its writes first (nw[i] of
	// them), each part distinct and ascending; line[i] is its line number.
	ops   []txn.Ref
	start []int
	nw    []uint32
	line  []int
	spec  *kvrec.Spec
}

var _ workload.Workload = (*Workload)(nil)

// New reads and indexes the trace at cfg.Path.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		return nil, errors.New("trace: no trace file (Path)")
	}
	f, err := os.Open(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	w, err := NewFromReader(cfg, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	return w, nil
}

// NewFromReader reads and indexes a trace from r (cfg.Path is ignored).
// Bad lines are reported as *LineError values (up to 10, joined); a read
// error is returned as is.
func NewFromReader(cfg Config, r io.Reader) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, start: []int{0}}
	tableID := map[string]txn.TableID{}
	var lineErrs []error
	fail := func(n int, err error) bool {
		lineErrs = append(lineErrs, &LineError{Line: n, Err: err})
		return len(lineErrs) < maxReportedErrors
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	var lineErr error
	n := 0
	var reads, writes []txn.Ref
scan:
	for {
		buf, lineErr = readLine(br, buf[:0], cfg.MaxLineBytes)
		if lineErr == io.EOF {
			break
		}
		n++
		if lineErr != nil {
			if !errors.Is(lineErr, ErrLineTooLong) {
				return nil, fmt.Errorf("trace: reading line %d: %w", n, lineErr)
			}
			if !fail(n, lineErr) {
				break
			}
			continue
		}
		if isBlank(buf) {
			continue
		}
		l, err := ParseLine(buf, cfg.MaxOpsPerLine)
		if err != nil {
			if !fail(n, err) {
				break
			}
			continue
		}
		if len(w.line) >= cfg.MaxTransactions {
			fail(n, fmt.Errorf("%w: more than %d", ErrTooManyLines, cfg.MaxTransactions))
			break
		}
		resolve := func(dst []txn.Ref, ops []Op) ([]txn.Ref, error) {
			for _, op := range ops {
				id, ok := tableID[op.Table]
				if !ok {
					if len(w.tables) >= MaxTables {
						return nil, fmt.Errorf("%w: table %q would be the %dth (max %d)", ErrTooManyTables, op.Table, MaxTables+1, MaxTables)
					}
					w.tables = append(w.tables, op.Table)
					id = txn.TableID(len(w.tables))
					tableID[op.Table] = id
				}
				dst = append(dst, txn.Ref{Table: id, Key: op.Key})
			}
			return dst, nil
		}
		if writes, err = resolve(writes[:0], l.Writes); err == nil {
			reads, err = resolve(reads[:0], l.Reads)
		}
		if err != nil {
			fail(n, err)
			break scan
		}
		writes = sortedDistinct(writes)
		reads = sortedDistinct(slices.DeleteFunc(reads, func(r txn.Ref) bool {
			_, found := slices.BinarySearchFunc(writes, r, cmpRef)
			return found
		}))
		if len(w.ops)+len(writes)+len(reads) > cfg.MaxTotalOps {
			fail(n, fmt.Errorf("%w: more than %d", ErrTooManyOpsFile, cfg.MaxTotalOps))
			break
		}
		w.ops = append(w.ops, writes...)
		w.ops = append(w.ops, reads...)
		w.start = append(w.start, len(w.ops))
		w.nw = append(w.nw, uint32(len(writes)))
		w.line = append(w.line, n)
	}
	if len(lineErrs) > 0 {
		return nil, errors.Join(lineErrs...)
	}
	if len(w.line) == 0 {
		return nil, errors.New("trace: no transactions")
	}
	// Key sets per table: sort a copy of every reference.
	all := slices.Clone(w.ops)
	slices.SortFunc(all, cmpRef)
	all = slices.Compact(all)
	w.keys = make([][]uint64, len(w.tables))
	for _, r := range all {
		w.keys[r.Table-1] = append(w.keys[r.Table-1], r.Key)
	}
	var errs []error
	w.perKG = make([]uint64, len(w.tables))
	for i, name := range w.tables {
		w.perKG[i] = cfg.KeysPerKG
		if n, ok := cfg.TableKeysPerKG[name]; ok {
			w.perKG[i] = n
		}
	}
	for _, name := range slices.Sorted(mapKeys(cfg.TableKeysPerKG)) {
		if _, ok := tableID[name]; !ok {
			errs = append(errs, fmt.Errorf("trace: keys per key group set for table %q, which the trace does not use", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	w.spec = &kvrec.Spec{
		Name: Name,
		ValueSize: func(t txn.TableID) (int, bool) {
			return cfg.ValueSize, t >= 1 && int(t) <= len(w.tables)
		},
		Valid: func(r txn.Ref) error {
			if _, found := slices.BinarySearch(w.keys[r.Table-1], r.Key); !found {
				return fmt.Errorf("key %d of table %q is not in the trace", r.Key, w.tables[r.Table-1])
			}
			return nil
		},
	}
	return w, nil
}

// readLine reads one line (without "\n" or "\r\n") into buf. A line longer
// than max is consumed and reported as ErrLineTooLong. At the end of input
// it returns io.EOF (a last line without a newline is returned first).
func readLine(br *bufio.Reader, buf []byte, max int) ([]byte, error) {
	tooLong := false
	got := false
	for {
		chunk, err := br.ReadSlice('\n')
		got = got || len(chunk) > 0
		if !tooLong {
			buf = append(buf, chunk...)
			if len(bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))) > max {
				tooLong, buf = true, buf[:0]
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if !got {
				return buf, io.EOF
			}
		case err != nil:
			return buf, err
		}
		if tooLong {
			return buf, fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, max)
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		return buf, nil
	}
}

func cmpRef(a, b txn.Ref) int {
	if c := cmp.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

func sortedDistinct(rs []txn.Ref) []txn.Ref {
	slices.SortFunc(rs, cmpRef)
	return slices.Compact(rs)
}

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// Len is the number of transactions in the trace (its non-blank lines).
func (w *Workload) Len() int { return len(w.line) }

// LineOf is the line number of transaction i (0-based) of the trace.
func (w *Workload) LineOf(i int) int { return w.line[i] }

// Tables lists the trace's table names; table id i+1 is Tables()[i].
func (w *Workload) Tables() []string { return slices.Clone(w.tables) }

// TableID returns the id of a table named by the trace.
func (w *Workload) TableID(name string) (txn.TableID, bool) {
	i := slices.Index(w.tables, name)
	return txn.TableID(i + 1), i >= 0
}

// Schema implements workload.Workload: one table per name in the trace, in
// first-seen order, each as large as its distinct keys.
func (w *Workload) Schema() txn.Schema {
	s := txn.Schema{Tables: make([]txn.Table, len(w.tables))}
	for i, name := range w.tables {
		s.Tables[i] = txn.Table{ID: txn.TableID(i + 1), Name: name, ValueSize: w.cfg.ValueSize, Capacity: uint64(len(w.keys[i]))}
	}
	return s
}

func (w *Workload) records() func(func(txn.Ref) bool) {
	return func(yield func(txn.Ref) bool) {
		for i, keys := range w.keys {
			for _, k := range keys {
				if !yield(txn.Ref{Table: txn.TableID(i + 1), Key: k}) {
					return
				}
			}
		}
	}
}

// Load implements workload.Workload: every key the trace references.
func (w *Workload) Load(ctx context.Context, ins workload.Inserter) error {
	n := 0
	for r := range w.records() {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		n++
		if err := ins.Insert(ctx, r, kvrec.New(w.cfg.ValueSize, kvrec.Record{Ref: r})); err != nil {
			return fmt.Errorf("trace: load %v: %w", r, err)
		}
	}
	return nil
}

// Message is transaction i (0-based) of the trace as a KVTxn.
func (w *Workload) Message(i int) *messages.TxnSubmit {
	ops := w.ops[w.start[i]:w.start[i+1]]
	nw := int(w.nw[i])
	kv := &messages.KVTxn{}
	if nw > 0 {
		kv.Writes = make([]*messages.KVWrite, nw)
		for j, r := range ops[:nw] {
			kv.Writes[j] = &messages.KVWrite{Record: &messages.RecordRef{Table: uint32(r.Table), Key: r.Key}}
		}
	}
	if len(ops) > nw {
		kv.Reads = make([]*messages.RecordRef, len(ops)-nw)
		for j, r := range ops[nw:] {
			kv.Reads[j] = &messages.RecordRef{Table: uint32(r.Table), Key: r.Key}
		}
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_Kv{Kv: kv}}
}

// Generator replays one client's share of the trace.
type Generator struct {
	w          *Workload
	first, pos int
	stride     int
}

// NewGenerator implements workload.Workload. Replay order is the trace's,
// so the seed is unused; client c replays transactions c mod Clients,
// + Clients, … (see Config.Clients).
func (w *Workload) NewGenerator(_ uint64, client int) workload.Generator {
	first := client % w.cfg.Clients
	if first < 0 {
		first += w.cfg.Clients
	}
	return &Generator{w: w, first: first, pos: first, stride: w.cfg.Clients}
}

// Next implements workload.Generator. It returns nil when the client's share
// is exhausted and Loop is off (or when the share is empty: a client
// number ≥ the trace's length).
func (g *Generator) Next() *messages.TxnSubmit {
	if g.pos >= g.w.Len() {
		if !g.w.cfg.Loop || g.first >= g.w.Len() {
			return nil
		}
		g.pos = g.first
	}
	msg := g.w.Message(g.pos)
	g.pos += g.stride
	return msg
}

// Remaining is how many transactions the generator returns before it is
// exhausted (or wraps, with Loop).
func (g *Generator) Remaining() int {
	if g.pos >= g.w.Len() {
		return 0
	}
	return (g.w.Len() - g.pos + g.stride - 1) / g.stride
}

// Program implements workload.Workload (see package kvrec). Only records of
// the trace are accepted.
func (w *Workload) Program(msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error) {
	return kvrec.Program(w.spec, msg, res)
}

// Footprint implements workload.Workload: exactly the message's records.
func (w *Workload) Footprint(msg *messages.TxnSubmit) workload.Footprint {
	return kvrec.Footprint(msg)
}

// Rule implements workload.Workload.
func (w *Workload) Rule() workload.Rule { return rule{w} }

type rule struct{ w *Workload }

func (r rule) Name() string { return "trace_range" }

// KeyGroup packs (table id, key / keys-per-kg): the table id in the top 8
// bits, the range index in the low 56. Range indexes ≥ 2^56 (keys near the
// top of the uint64 range with small ranges) are folded into 56 bits by a
// hash, so they may share key groups; a key group is only a unit of
// learning, so this costs precision, not correctness.
func (r rule) KeyGroup(ref txn.Ref) uint64 {
	per := r.w.cfg.KeysPerKG
	if ref.Table >= 1 && int(ref.Table) <= len(r.w.perKG) {
		per = r.w.perKG[ref.Table-1]
	}
	return PackKG(ref.Table, ref.Key/per)
}

func (r rule) Partition(ref txn.Ref) uint64 { return r.KeyGroup(ref) }

func (r rule) Home(msg *messages.TxnSubmit) uint64 { return kvrec.Home(msg, r.Partition) }

// PackKG is the trace rule's key-group id of range index local of a table.
func PackKG(table txn.TableID, local uint64) uint64 {
	const mask = 1<<kgLocalBits - 1
	if local > mask {
		local = kvrec.Mix64(local) & mask
	}
	return uint64(table&0xff)<<kgLocalBits | local
}

// Check implements workload.Workload: "trace.records" (every key of the
// trace present and well formed) and "trace.conservation".
func (w *Workload) Check(ctx context.Context, r workload.Reader) []workload.CheckResult {
	return kvrec.CheckRecords(ctx, w.spec, r, w.records())
}
