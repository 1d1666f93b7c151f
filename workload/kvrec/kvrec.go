package kvrec

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"slices"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
)

// MinValueSize is the smallest value the format fits in.
const MinValueSize = 32

// MaxOps bounds the reads plus writes of one KVTxn a program accepts.
const MaxOps = 1024

const (
	offTable   = 0
	offKey     = 4
	offVersion = 12
	offBalance = 20
	offFiller  = 28
	crcSize    = 4
)

// ErrMalformed is wrapped by every decoding failure of a value.
var ErrMalformed = errors.New("kvrec: malformed record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is a decoded value.
type Record struct {
	Ref     txn.Ref
	Version uint64
	Balance int64
}

// Mix64 is the splitmix64 finalizer: a fast bijective 64-bit mix.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Encode writes rec into dst, whose length (≥ MinValueSize) is the value size.
func Encode(dst []byte, rec Record) {
	n := len(dst)
	if n < MinValueSize {
		panic(fmt.Sprintf("kvrec: value size %d < %d", n, MinValueSize))
	}
	binary.LittleEndian.PutUint32(dst[offTable:], uint32(rec.Ref.Table))
	binary.LittleEndian.PutUint64(dst[offKey:], rec.Ref.Key)
	binary.LittleEndian.PutUint64(dst[offVersion:], rec.Version)
	binary.LittleEndian.PutUint64(dst[offBalance:], uint64(rec.Balance))
	s := Mix64(uint64(rec.Ref.Table)<<32^rec.Ref.Key) ^ rec.Version*0x9e3779b97f4a7c15
	fill := dst[offFiller : n-crcSize]
	for len(fill) >= 8 {
		s += 0x9e3779b97f4a7c15
		binary.LittleEndian.PutUint64(fill, Mix64(s))
		fill = fill[8:]
	}
	if len(fill) > 0 {
		s += 0x9e3779b97f4a7c15
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], Mix64(s))
		copy(fill, b[:])
	}
	binary.LittleEndian.PutUint32(dst[n-crcSize:], crc32.Checksum(dst[:n-crcSize], castagnoli))
}

// New returns a fresh value of the given size holding rec.
func New(size int, rec Record) []byte {
	v := make([]byte, size)
	Encode(v, rec)
	return v
}

// Decode parses and checksums a value.
func Decode(v []byte) (Record, error) {
	n := len(v)
	if n < MinValueSize {
		return Record{}, fmt.Errorf("%w: %d bytes, want ≥ %d", ErrMalformed, n, MinValueSize)
	}
	if got, want := binary.LittleEndian.Uint32(v[n-crcSize:]), crc32.Checksum(v[:n-crcSize], castagnoli); got != want {
		return Record{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrMalformed, got, want)
	}
	return Record{
		Ref: txn.Ref{
			Table: txn.TableID(binary.LittleEndian.Uint32(v[offTable:])),
			Key:   binary.LittleEndian.Uint64(v[offKey:]),
		},
		Version: binary.LittleEndian.Uint64(v[offVersion:]),
		Balance: int64(binary.LittleEndian.Uint64(v[offBalance:])),
	}, nil
}

// Verify decodes v and checks that it is the value of record r.
func Verify(r txn.Ref, v []byte) (Record, error) {
	rec, err := Decode(v)
	if err != nil {
		return rec, err
	}
	if rec.Ref != r {
		return rec, fmt.Errorf("%w: value of record %v stored under %v", ErrMalformed, rec.Ref, r)
	}
	return rec, nil
}

// Spec tells the program and the checks about a workload's data.
type Spec struct {
	// Name prefixes errors and check names ("ycsb").
	Name string
	// ValueSize returns a table's value size; ok is false for an unknown table.
	ValueSize func(t txn.TableID) (size int, ok bool)
	// Valid reports whether a record is part of the workload's loaded data;
	// nil means every record of a known table is.
	Valid func(r txn.Ref) error
}

type plan struct {
	writes  []txn.Ref // distinct, ascending
	reads   []txn.Ref // distinct, ascending, none of them written
	readSrc []int     // per KVTxn.reads: index into writes (≥ 0) or ^index into reads
	sizes   []int     // per write: value size
}

func less(a, b txn.Ref) int {
	if c := cmp.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

func toRef(r *messages.RecordRef) txn.Ref {
	return txn.Ref{Table: txn.TableID(r.GetTable()), Key: r.GetKey()}
}

func sortedDistinct(rs []txn.Ref) []txn.Ref {
	slices.SortFunc(rs, less)
	return slices.Compact(rs)
}

// makePlan validates kv against spec and folds its references.
func makePlan(spec *Spec, kv *messages.KVTxn) (*plan, error) {
	if kv == nil {
		return nil, fmt.Errorf("%s: not a KV transaction", spec.Name)
	}
	if n := len(kv.GetReads()) + len(kv.GetWrites()); n == 0 || n > MaxOps {
		return nil, fmt.Errorf("%s: %d operations, want 1..%d", spec.Name, n, MaxOps)
	}
	var errs []error
	check := func(what string, i int, rr *messages.RecordRef) txn.Ref {
		if rr == nil {
			errs = append(errs, fmt.Errorf("%s: %s %d: no record", spec.Name, what, i))
			return txn.Ref{}
		}
		r := toRef(rr)
		if _, ok := spec.ValueSize(r.Table); !ok {
			errs = append(errs, fmt.Errorf("%s: %s %d: %w: %d", spec.Name, what, i, txn.ErrNoSuchTable, r.Table))
		} else if spec.Valid != nil {
			if err := spec.Valid(r); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s %d: %w", spec.Name, what, i, err))
			}
		}
		return r
	}
	p := &plan{}
	for i, w := range kv.GetWrites() {
		if w.GetDelete() {
			errs = append(errs, fmt.Errorf("%s: write %d: deletes are not supported", spec.Name, i))
		}
		if len(w.GetValue()) != 0 {
			errs = append(errs, fmt.Errorf("%s: write %d: values are computed by the workload (read-modify-write); send none", spec.Name, i))
		}
		p.writes = append(p.writes, check("write", i, w.GetRecord()))
	}
	origReads := make([]txn.Ref, len(kv.GetReads()))
	for i, rr := range kv.GetReads() {
		origReads[i] = check("read", i, rr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.writes = sortedDistinct(p.writes)
	for _, r := range origReads {
		if _, found := slices.BinarySearchFunc(p.writes, r, less); !found {
			p.reads = append(p.reads, r)
		}
	}
	p.reads = sortedDistinct(p.reads)
	p.readSrc = make([]int, len(origReads))
	for i, r := range origReads {
		if j, found := slices.BinarySearchFunc(p.writes, r, less); found {
			p.readSrc[i] = j
		} else {
			j, _ := slices.BinarySearchFunc(p.reads, r, less)
			p.readSrc[i] = ^j
		}
	}
	p.sizes = make([]int, len(p.writes))
	for i, r := range p.writes {
		p.sizes[i], _ = spec.ValueSize(r.Table)
	}
	return p, nil
}

// Delta is the balance change of the i-th of m written records (ascending
// order) of a transaction: −(m−1) for the first, +1 for the others.
func Delta(i, m int) int64 {
	if i == 0 {
		return -int64(m - 1)
	}
	return 1
}

// Program returns the program executing msg's KVTxn (see the package doc);
// invalid input is an error. The program sets res's output when it commits
// (res may be nil).
func Program(spec *Spec, msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error) {
	kv := msg.GetKv()
	p, err := makePlan(spec, kv)
	if err != nil {
		return nil, err
	}
	name := spec.Name
	nreads := len(kv.GetReads())
	return func(tx txn.Tx) error {
		var old [][]byte
		if len(p.writes) > 0 {
			var err error
			old, err = tx.GetForUpdateMany(p.writes)
			if err != nil {
				return err
			}
			if len(old) != len(p.writes) {
				return fmt.Errorf("%s: GetForUpdateMany returned %d values for %d records", name, len(old), len(p.writes))
			}
			m := len(p.writes)
			for i, r := range p.writes {
				if old[i] == nil {
					return fmt.Errorf("%s: write of %v: %w", name, r, txn.ErrNotFound)
				}
				rec, err := Verify(r, old[i])
				if err != nil {
					return fmt.Errorf("%s: write of %v: %w", name, r, err)
				}
				rec.Version++
				rec.Balance += Delta(i, m)
				if err := tx.Put(r, New(p.sizes[i], rec)); err != nil {
					return err
				}
			}
		}
		var vals [][]byte
		if len(p.reads) > 0 {
			var err error
			vals, err = tx.GetMany(p.reads)
			if err != nil {
				return err
			}
			if len(vals) != len(p.reads) {
				return fmt.Errorf("%s: GetMany returned %d values for %d records", name, len(vals), len(p.reads))
			}
		}
		if res != nil && nreads > 0 {
			out := make([]*messages.KVReadResult, nreads)
			for i, rr := range kv.GetReads() {
				var v []byte
				if j := p.readSrc[i]; j >= 0 {
					v = old[j]
				} else {
					v = vals[^j]
				}
				out[i] = &messages.KVReadResult{
					Record: &messages.RecordRef{Table: rr.GetTable(), Key: rr.GetKey()},
					Found:  v != nil,
					Value:  v,
				}
			}
			res.Output = &messages.TxnResult_Kv{Kv: &messages.KVTxnOutput{Reads: out}}
		}
		return nil
	}, nil
}

// Footprint is a KVTxn's write set (distinct, ascending) and read set
// (distinct, ascending, without the written records). It is exact. Bodies
// other than KVTxn give an empty footprint.
func Footprint(msg *messages.TxnSubmit) workload.Footprint {
	kv := msg.GetKv()
	if kv == nil {
		return workload.Footprint{}
	}
	var fp workload.Footprint
	for _, w := range kv.GetWrites() {
		if w.GetRecord() != nil {
			fp.Writes = append(fp.Writes, toRef(w.GetRecord()))
		}
	}
	fp.Writes = sortedDistinct(fp.Writes)
	for _, rr := range kv.GetReads() {
		if rr == nil {
			continue
		}
		r := toRef(rr)
		if _, found := slices.BinarySearchFunc(fp.Writes, r, less); !found {
			fp.Reads = append(fp.Reads, r)
		}
	}
	fp.Reads = sortedDistinct(fp.Reads)
	return fp
}

// Home is the partition value of a KVTxn's first written record, else of its
// first read record, else 0.
func Home(msg *messages.TxnSubmit, partition func(txn.Ref) uint64) uint64 {
	kv := msg.GetKv()
	for _, w := range kv.GetWrites() {
		if w.GetRecord() != nil {
			return partition(toRef(w.GetRecord()))
		}
	}
	for _, rr := range kv.GetReads() {
		if rr != nil {
			return partition(toRef(rr))
		}
	}
	return 0
}

// maxExamples bounds the problems a check quotes.
const maxExamples = 5

// Problems collects a check's failures, quoting the first few.
type Problems struct {
	n        int
	examples []error
}

// Add records one problem.
func (p *Problems) Add(err error) {
	p.n++
	if len(p.examples) < maxExamples {
		p.examples = append(p.examples, err)
	}
}

// Err summarises the problems, nil when there were none.
func (p *Problems) Err() error {
	if p.n == 0 {
		return nil
	}
	if p.n > len(p.examples) {
		return fmt.Errorf("%d problems, first %d: %w", p.n, len(p.examples), errors.Join(p.examples...))
	}
	return errors.Join(p.examples...)
}

// CheckRecords reads every record of refs through r and returns two checks:
// "<name>.records" (every record present, well formed, stored under its own
// reference, with the table's value size) and "<name>.conservation" (the
// balances sum to zero). A read error or a cancelled context fails both.
func CheckRecords(ctx context.Context, spec *Spec, r workload.Reader, refs iter.Seq[txn.Ref]) []workload.CheckResult {
	var (
		recs    Problems
		sum     int64
		n       int
		readErr error
	)
	for ref := range refs {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				readErr = err
				break
			}
		}
		n++
		v, ok, err := r.Get(ctx, ref)
		if err != nil {
			readErr = fmt.Errorf("read %v: %w", ref, err)
			break
		}
		if !ok {
			recs.Add(fmt.Errorf("record %v missing", ref))
			continue
		}
		if size, _ := spec.ValueSize(ref.Table); len(v) != size {
			recs.Add(fmt.Errorf("record %v: %d bytes, want %d", ref, len(v), size))
			continue
		}
		rec, err := Verify(ref, v)
		if err != nil {
			recs.Add(fmt.Errorf("record %v: %w", ref, err))
			continue
		}
		sum += rec.Balance
	}
	records := CheckResult(spec.Name+".records", readErr, recs.Err())
	var consErr error
	if sum != 0 {
		consErr = fmt.Errorf("balances of the well-formed records (of %d read) sum to %d, want 0", n, sum)
	}
	return []workload.CheckResult{records, CheckResult(spec.Name+".conservation", readErr, consErr)}
}

// CheckResult names a check's outcome: readErr (the check could not run)
// wins over err (the check failed).
func CheckResult(name string, readErr, err error) workload.CheckResult {
	if readErr != nil {
		return workload.CheckResult{Name: name, Err: fmt.Errorf("%s: %w", name, readErr)}
	}
	if err != nil {
		return workload.CheckResult{Name: name, Err: fmt.Errorf("%s: %w", name, err)}
	}
	return workload.CheckResult{Name: name}
}
