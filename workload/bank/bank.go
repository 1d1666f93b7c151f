package bank

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload"
	"github.com/aura-runtime/aura/workload/kvrec"
	"github.com/aura-runtime/aura/workload/zipf"
)

// Name is the workload's name.
const Name = "bank"

// AccountTable is the id of the account table.
const AccountTable txn.TableID = 1

// ValueSize is the size of an account record: balance then account number.
const ValueSize = 16

// Limits of the configuration.
const (
	MaxAccounts      = 1 << 24
	MaxAuditBatch    = 100
	MaxAccountsPerKG = 1 << 20
)

// Config configures the bank workload.
type Config struct {
	// Accounts is the number of accounts, 2..MaxAccounts. Default 10,000.
	Accounts uint64
	// InitialCents is every account's opening balance, > 0; Accounts ×
	// InitialCents must fit in an int64. Default 1,000,000 (10,000.00).
	InitialCents int64
	// MaxTransferCents bounds a transfer's amount, drawn uniformly in
	// [1, MaxTransferCents]. Default 10,000 (100.00).
	MaxTransferCents int64
	// AllowOverdraft lets balances go negative; when false (the default) a
	// transfer of more than the debited balance rolls back.
	AllowOverdraft bool
	// AuditFraction is the share of audits in the mix, in [0, 1]. Default 0.05.
	AuditFraction float64
	// AuditAccounts is how many accounts a generated audit reads: 0 (the
	// default) reads all of them, otherwise a range of that many accounts
	// starting at a uniform position (≤ Accounts).
	AuditAccounts uint64
	// AuditBatch is how many accounts one GetMany of an audit reads,
	// 1..MaxAuditBatch (100). Default 100.
	AuditBatch int
	// HotTheta is the Zipfian skew of account choice: 0 (the default) is
	// uniform, otherwise 0 < θ < 1 (YCSB's scrambled Zipfian).
	HotTheta float64
	// AccountsPerKG is the range rule's key-group size, 1..MaxAccountsPerKG.
	// Default 64.
	AccountsPerKG uint64
	// KeyGroupsPerPartition groups consecutive key groups into one partition
	// value, ≥ 1. Default 1.
	KeyGroupsPerPartition uint64
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		Accounts:              10_000,
		InitialCents:          1_000_000,
		MaxTransferCents:      10_000,
		AuditFraction:         0.05,
		AuditBatch:            MaxAuditBatch,
		AccountsPerKG:         64,
		KeyGroupsPerPartition: 1,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Accounts < 2 || c.Accounts > MaxAccounts {
		errs = append(errs, fmt.Errorf("bank: accounts %d, want 2..%d", c.Accounts, MaxAccounts))
	}
	if c.InitialCents <= 0 {
		errs = append(errs, fmt.Errorf("bank: initial balance %d cents, want > 0", c.InitialCents))
	} else if c.Accounts > 0 && c.Accounts <= MaxAccounts && c.InitialCents > math.MaxInt64/int64(c.Accounts)/2 {
		errs = append(errs, fmt.Errorf("bank: %d accounts × %d cents overflows the total (keep it below 2^62)", c.Accounts, c.InitialCents))
	}
	if c.MaxTransferCents <= 0 || c.MaxTransferCents > 1<<40 {
		errs = append(errs, fmt.Errorf("bank: max transfer %d cents, want 1..2^40", c.MaxTransferCents))
	}
	if !(c.AuditFraction >= 0 && c.AuditFraction <= 1) {
		errs = append(errs, fmt.Errorf("bank: audit fraction %v, want 0..1", c.AuditFraction))
	}
	if c.AuditAccounts > c.Accounts {
		errs = append(errs, fmt.Errorf("bank: audit accounts %d > accounts %d", c.AuditAccounts, c.Accounts))
	}
	if c.AuditBatch < 1 || c.AuditBatch > MaxAuditBatch {
		errs = append(errs, fmt.Errorf("bank: audit batch %d, want 1..%d", c.AuditBatch, MaxAuditBatch))
	}
	if !(c.HotTheta >= 0 && c.HotTheta < 1) {
		errs = append(errs, fmt.Errorf("bank: hot theta %v, want 0 (uniform) or 0 < θ < 1", c.HotTheta))
	}
	if c.AccountsPerKG < 1 || c.AccountsPerKG > MaxAccountsPerKG {
		errs = append(errs, fmt.Errorf("bank: accounts per key group %d, want 1..%d", c.AccountsPerKG, MaxAccountsPerKG))
	}
	if c.KeyGroupsPerPartition < 1 {
		errs = append(errs, errors.New("bank: key groups per partition must be ≥ 1"))
	}
	return errors.Join(errs...)
}

// Workload is the bank workload. It is safe for concurrent use.
type Workload struct {
	cfg  Config
	hot  *zipf.Scrambled // nil when uniform
	rule rule
}

var _ workload.Workload = (*Workload)(nil)

// New returns a bank workload for a valid configuration.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, rule: rule{perKG: cfg.AccountsPerKG, kgPerPart: cfg.KeyGroupsPerPartition}}
	if cfg.HotTheta > 0 {
		z, err := zipf.NewScrambled(0, cfg.Accounts-1, cfg.HotTheta)
		if err != nil {
			return nil, err
		}
		w.hot = z
	}
	return w, nil
}

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// TotalCents is the conserved total, Accounts × InitialCents.
func (w *Workload) TotalCents() int64 { return int64(w.cfg.Accounts) * w.cfg.InitialCents }

// Schema implements workload.Workload.
func (w *Workload) Schema() txn.Schema {
	return txn.Schema{Tables: []txn.Table{{ID: AccountTable, Name: "account", ValueSize: ValueSize, Capacity: w.cfg.Accounts}}}
}

// Ref is the record of an account.
func Ref(account uint64) txn.Ref { return txn.Ref{Table: AccountTable, Key: account} }

// EncodeAccount is an account's value.
func EncodeAccount(account uint64, balance int64) []byte {
	v := make([]byte, ValueSize)
	binary.LittleEndian.PutUint64(v, uint64(balance))
	binary.LittleEndian.PutUint64(v[8:], account)
	return v
}

// ErrMalformed is wrapped by decoding failures of account values.
var ErrMalformed = errors.New("bank: malformed account record")

// DecodeAccount returns the balance in an account's value, checking that
// the value is the account's.
func DecodeAccount(account uint64, v []byte) (int64, error) {
	if len(v) != ValueSize {
		return 0, fmt.Errorf("%w: account %d: %d bytes, want %d", ErrMalformed, account, len(v), ValueSize)
	}
	if got := binary.LittleEndian.Uint64(v[8:]); got != account {
		return 0, fmt.Errorf("%w: account %d holds the value of account %d", ErrMalformed, account, got)
	}
	return int64(binary.LittleEndian.Uint64(v)), nil
}

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, ins workload.Inserter) error {
	for a := range w.cfg.Accounts {
		if a%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := ins.Insert(ctx, Ref(a), EncodeAccount(a, w.cfg.InitialCents)); err != nil {
			return fmt.Errorf("bank: load account %d: %w", a, err)
		}
	}
	return nil
}

// Generator is a client's deterministic transaction generator.
type Generator struct {
	w   *Workload
	rng *rand.Rand
}

// NewGenerator implements workload.Workload.
func (w *Workload) NewGenerator(seed uint64, client int) workload.Generator {
	return &Generator{w: w, rng: rand.New(rand.NewPCG(seed, kvrec.Mix64(uint64(client)^0xba2c)))}
}

func (g *Generator) account() uint64 {
	if g.w.hot != nil {
		return g.w.hot.Next(g.rng)
	}
	return g.rng.Uint64N(g.w.cfg.Accounts)
}

// Next implements workload.Generator.
func (g *Generator) Next() *messages.TxnSubmit {
	cfg := &g.w.cfg
	if cfg.AuditFraction > 0 && g.rng.Float64() < cfg.AuditFraction {
		a := &messages.BankAudit{}
		if cfg.AuditAccounts > 0 {
			a.FirstAccount = g.rng.Uint64N(cfg.Accounts - cfg.AuditAccounts + 1)
			a.AccountCount = cfg.AuditAccounts
		}
		return &messages.TxnSubmit{Body: &messages.TxnSubmit_BankAudit{BankAudit: a}}
	}
	from := g.account()
	to := from
	for range 32 {
		if to = g.account(); to != from {
			break
		}
	}
	if to == from { // extreme skew: pick any other account
		to = (from + 1 + g.rng.Uint64N(cfg.Accounts-1)) % cfg.Accounts
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{
		FromAccount: from,
		ToAccount:   to,
		AmountCents: 1 + g.rng.Int64N(cfg.MaxTransferCents),
	}}}
}

// Program implements workload.Workload.
func (w *Workload) Program(msg *messages.TxnSubmit, res *messages.TxnResult) (txn.Program, error) {
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_BankTransfer:
		return w.transfer(b.BankTransfer)
	case *messages.TxnSubmit_BankAudit:
		return w.audit(b.BankAudit, res)
	default:
		return nil, fmt.Errorf("bank: unsupported transaction body %T", msg.GetBody())
	}
}

func (w *Workload) transfer(t *messages.BankTransfer) (txn.Program, error) {
	from, to, amount := t.GetFromAccount(), t.GetToAccount(), t.GetAmountCents()
	var errs []error
	if from >= w.cfg.Accounts || to >= w.cfg.Accounts {
		errs = append(errs, fmt.Errorf("bank: transfer %d → %d: no such account (accounts 0..%d)", from, to, w.cfg.Accounts-1))
	}
	if from == to {
		errs = append(errs, fmt.Errorf("bank: transfer from account %d to itself", from))
	}
	if amount <= 0 || amount > 1<<40 {
		errs = append(errs, fmt.Errorf("bank: transfer amount %d cents, want 1..2^40", amount))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lo, hi := min(from, to), max(from, to)
	refs := []txn.Ref{Ref(lo), Ref(hi)}
	overdraft := w.cfg.AllowOverdraft
	return func(tx txn.Tx) error {
		vals, err := tx.GetForUpdateMany(refs)
		if err != nil {
			return err
		}
		if len(vals) != 2 {
			return fmt.Errorf("bank: GetForUpdateMany returned %d values for 2 records", len(vals))
		}
		var bal [2]int64
		for i, a := range []uint64{lo, hi} {
			if vals[i] == nil {
				return fmt.Errorf("bank: account %d: %w", a, txn.ErrNotFound)
			}
			if bal[i], err = DecodeAccount(a, vals[i]); err != nil {
				return err
			}
		}
		fi, ti := 0, 1
		if from != lo {
			fi, ti = 1, 0
		}
		if !overdraft && bal[fi] < amount {
			return fmt.Errorf("bank: account %d holds %d cents, cannot transfer %d: %w", from, bal[fi], amount, txn.ErrRollback)
		}
		bal[fi] -= amount
		bal[ti] += amount
		for i, a := range []uint64{lo, hi} {
			if err := tx.Put(refs[i], EncodeAccount(a, bal[i])); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (w *Workload) auditRange(a *messages.BankAudit) (first, count uint64, err error) {
	first, count = a.GetFirstAccount(), a.GetAccountCount()
	if first >= w.cfg.Accounts {
		return 0, 0, fmt.Errorf("bank: audit from account %d: no such account (accounts 0..%d)", first, w.cfg.Accounts-1)
	}
	if count == 0 {
		count = w.cfg.Accounts - first
	}
	if count > w.cfg.Accounts-first {
		return 0, 0, fmt.Errorf("bank: audit of %d accounts from %d runs past the last account %d", count, first, w.cfg.Accounts-1)
	}
	return first, count, nil
}

func (w *Workload) audit(a *messages.BankAudit, res *messages.TxnResult) (txn.Program, error) {
	first, count, err := w.auditRange(a)
	if err != nil {
		return nil, err
	}
	batch := uint64(w.cfg.AuditBatch)
	return func(tx txn.Tx) error {
		refs := make([]txn.Ref, 0, min(batch, count))
		var total int64
		for start := first; start < first+count; start += batch {
			refs = refs[:0]
			for k := start; k < min(start+batch, first+count); k++ {
				refs = append(refs, Ref(k))
			}
			vals, err := tx.GetMany(refs)
			if err != nil {
				return err
			}
			if len(vals) != len(refs) {
				return fmt.Errorf("bank: GetMany returned %d values for %d records", len(vals), len(refs))
			}
			for i, v := range vals {
				if v == nil {
					return fmt.Errorf("bank: audit: account %d: %w", refs[i].Key, txn.ErrNotFound)
				}
				// Unlocked reads: a value that fails to decode may be a read
				// racing a writer, which validation at commit will reject, so
				// only its size is trusted here.
				if len(v) != ValueSize {
					return fmt.Errorf("%w: account %d: %d bytes", ErrMalformed, refs[i].Key, len(v))
				}
				total += int64(binary.LittleEndian.Uint64(v))
			}
		}
		if res != nil {
			res.Output = &messages.TxnResult_BankAudit{BankAudit: &messages.BankAuditOutput{TotalCents: total, Accounts: count}}
		}
		return nil
	}, nil
}

// Footprint implements workload.Workload: a transfer writes both accounts;
// an audit reads its whole range (every account for a full audit).
func (w *Workload) Footprint(msg *messages.TxnSubmit) workload.Footprint {
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_BankTransfer:
		from, to := b.BankTransfer.GetFromAccount(), b.BankTransfer.GetToAccount()
		if from == to {
			return workload.Footprint{Writes: []txn.Ref{Ref(from)}}
		}
		return workload.Footprint{Writes: []txn.Ref{Ref(min(from, to)), Ref(max(from, to))}}
	case *messages.TxnSubmit_BankAudit:
		first, count, err := w.auditRange(b.BankAudit)
		if err != nil {
			return workload.Footprint{}
		}
		reads := make([]txn.Ref, count)
		for i := range reads {
			reads[i] = Ref(first + uint64(i))
		}
		return workload.Footprint{Reads: reads}
	}
	return workload.Footprint{}
}

// Rule implements workload.Workload.
func (w *Workload) Rule() workload.Rule { return w.rule }

type rule struct {
	perKG, kgPerPart uint64
}

func (r rule) Name() string                 { return "bank_range" }
func (r rule) KeyGroup(ref txn.Ref) uint64  { return ref.Key / r.perKG }
func (r rule) Partition(ref txn.Ref) uint64 { return ref.Key / r.perKG / r.kgPerPart }
func (r rule) Home(msg *messages.TxnSubmit) uint64 {
	switch b := msg.GetBody().(type) {
	case *messages.TxnSubmit_BankTransfer:
		return r.Partition(Ref(b.BankTransfer.GetFromAccount()))
	case *messages.TxnSubmit_BankAudit:
		return r.Partition(Ref(b.BankAudit.GetFirstAccount()))
	}
	return 0
}

// Check implements workload.Workload: "bank.accounts" and "bank.total".
func (w *Workload) Check(ctx context.Context, r workload.Reader) []workload.CheckResult {
	var (
		probs   kvrec.Problems
		total   int64
		readErr error
	)
	for a := range w.cfg.Accounts {
		if a%4096 == 0 {
			if err := ctx.Err(); err != nil {
				readErr = err
				break
			}
		}
		v, ok, err := r.Get(ctx, Ref(a))
		if err != nil {
			readErr = fmt.Errorf("read account %d: %w", a, err)
			break
		}
		if !ok {
			probs.Add(fmt.Errorf("account %d missing", a))
			continue
		}
		bal, err := DecodeAccount(a, v)
		if err != nil {
			probs.Add(err)
			continue
		}
		total += bal
	}
	var totalErr error
	if want := w.TotalCents(); total != want {
		totalErr = fmt.Errorf("balances sum to %d cents, want %d (%+d)", total, want, total-want)
	}
	return []workload.CheckResult{
		kvrec.CheckResult("bank.accounts", readErr, probs.Err()),
		kvrec.CheckResult("bank.total", readErr, totalErr),
	}
}
