package bank

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

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
	// MaxDriftEpoch bounds Drift's epoch.
	MaxDriftEpoch = 1 << 16
)

// ErrNoBranches is returned by Drift when branch locality is off
// (BranchKGs = 0): without branches the pattern has nothing that can move.
var ErrNoBranches = errors.New("bank: drift needs branch locality (BranchKGs > 0)")

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
	// BranchKGs turns branch locality on: the key groups, in the order of
	// the current drift epoch's permutation, form branches of BranchKGs key
	// groups each (the last may be shorter), and a transfer picks a branch
	// and mostly stays inside it. It must leave at least two branches, and
	// BranchKGs × AccountsPerKG must be ≥ 2. 0 (the default) is off:
	// accounts are drawn independently (HotTheta) and the workload cannot
	// drift. HotTheta must be 0 with branches (BranchTheta skews them).
	BranchKGs uint64
	// LocalFraction is, with branches, the share of transfers that credit
	// an account of the debited account's branch, in [0, 1]; the others
	// credit any other account, uniformly. Default 0.9.
	LocalFraction float64
	// BranchTheta is, with branches, the Zipfian skew over branch numbers:
	// 0 is uniform, otherwise 0 < θ < 1 (branch 0 is the hottest). Default
	// 0.8.
	BranchTheta float64
	// LayoutSeed seeds the key-group permutation of every drift epoch ≥ 1.
	// It is part of the workload's definition, not of a client: every
	// process must use the same. Default 1.
	LayoutSeed uint64
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
		LocalFraction:         0.9,
		BranchTheta:           0.8,
		LayoutSeed:            1,
	}
}

// KeyGroups is the number of key groups the accounts fill,
// ⌈Accounts / AccountsPerKG⌉ (0 when AccountsPerKG is 0).
func (c Config) KeyGroups() uint64 {
	if c.AccountsPerKG == 0 {
		return 0
	}
	return (c.Accounts + c.AccountsPerKG - 1) / c.AccountsPerKG
}

// Branches is the number of branches, ⌈KeyGroups / BranchKGs⌉ (0 when
// branch locality is off).
func (c Config) Branches() uint64 {
	if c.BranchKGs == 0 {
		return 0
	}
	return (c.KeyGroups() + c.BranchKGs - 1) / c.BranchKGs
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
	if !(c.LocalFraction >= 0 && c.LocalFraction <= 1) {
		errs = append(errs, fmt.Errorf("bank: local fraction %v, want 0..1", c.LocalFraction))
	}
	if !(c.BranchTheta >= 0 && c.BranchTheta < 1) {
		errs = append(errs, fmt.Errorf("bank: branch theta %v, want 0 (uniform) or 0 < θ < 1", c.BranchTheta))
	}
	if c.BranchKGs > 0 {
		if c.HotTheta != 0 {
			errs = append(errs, fmt.Errorf("bank: hot theta %v with branches, want 0 (branch theta skews the branches)", c.HotTheta))
		}
		accountsOK := c.Accounts >= 2 && c.Accounts <= MaxAccounts
		kgOK := c.AccountsPerKG >= 1 && c.AccountsPerKG <= MaxAccountsPerKG
		if kgs := c.KeyGroups(); accountsOK && kgOK && kgs < 2 {
			errs = append(errs, fmt.Errorf("bank: branches need at least two key groups, the %d accounts fill %d", c.Accounts, kgs))
		} else if accountsOK && kgOK && c.BranchKGs >= kgs {
			errs = append(errs, fmt.Errorf("bank: branch key groups %d, want 1..%d (at least two branches of the %d key groups)", c.BranchKGs, kgs-1, kgs))
		}
		if kgOK && c.BranchKGs <= MaxAccounts && c.BranchKGs*c.AccountsPerKG < 2 {
			errs = append(errs, fmt.Errorf("bank: a branch of %d key group(s) of %d account(s) cannot hold a transfer, want ≥ 2 accounts", c.BranchKGs, c.AccountsPerKG))
		}
	}
	return errors.Join(errs...)
}

// Workload is the bank workload. It is safe for concurrent use; Drift may
// be called while generators run.
type Workload struct {
	cfg       Config
	hot       *zipf.Scrambled // nil when uniform
	branchHot *zipf.Zipfian   // with branches, nil when uniform
	rule      rule

	cur atomic.Pointer[layout]
	mu  sync.Mutex // serialises Drift
}

// layout is one drift epoch's branch layout: branch b is the key groups at
// positions b×BranchKGs … of the epoch's permutation.
type layout struct {
	epoch int
	// perm[i] is the key group at position i, inv[kg] its position; both
	// nil at epoch 0 (the identity: branches of consecutive key groups).
	perm, inv []uint32
}

var (
	_ workload.Workload = (*Workload)(nil)
	_ workload.Drifter  = (*Workload)(nil)
)

// New returns a bank workload for a valid configuration.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, rule: rule{perKG: cfg.AccountsPerKG, kgPerPart: cfg.KeyGroupsPerPartition,
		kgs: (cfg.Accounts + cfg.AccountsPerKG - 1) / cfg.AccountsPerKG}}
	if cfg.HotTheta > 0 {
		z, err := zipf.NewScrambled(0, cfg.Accounts-1, cfg.HotTheta)
		if err != nil {
			return nil, err
		}
		w.hot = z
	}
	if cfg.BranchKGs > 0 && cfg.BranchTheta > 0 {
		z, err := zipf.NewZipfian(0, cfg.Branches()-1, cfg.BranchTheta)
		if err != nil {
			return nil, err
		}
		w.branchHot = z
	}
	w.cur.Store(&layout{})
	return w, nil
}

// Epoch is the current drift epoch.
func (w *Workload) Epoch() int { return w.cur.Load().epoch }

// Drift implements workload.Drifter: it switches the branch layout to
// epoch's (0..MaxDriftEpoch), which generators use from their next
// transaction on. Epoch 0 is the identity (branches of consecutive key
// groups); epoch e ≥ 1 is a permutation of the key groups drawn from
// (LayoutSeed, e) alone, so which key groups share a branch — which
// accounts transfer to each other — and which branch is hot both change.
// It costs O(KeyGroups). Without branches the workload cannot drift: every
// call fails with ErrNoBranches, so that a run meant to drift fails before
// it starts rather than at its first drift.
func (w *Workload) Drift(epoch int) error {
	if epoch < 0 || epoch > MaxDriftEpoch {
		return fmt.Errorf("bank: drift epoch %d, want 0..%d", epoch, MaxDriftEpoch)
	}
	if w.cfg.BranchKGs == 0 {
		return fmt.Errorf("%w: cannot drift to epoch %d", ErrNoBranches, epoch)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur.Load().epoch != epoch {
		w.cur.Store(w.layoutAt(epoch))
	}
	return nil
}

func (w *Workload) layoutAt(epoch int) *layout {
	if epoch == 0 {
		return &layout{}
	}
	n := w.cfg.KeyGroups()
	perm, inv := make([]uint32, n), make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	// Fisher–Yates written out rather than rand.Shuffle, so that the layout
	// of an epoch depends on the PCG stream only.
	rng := rand.New(rand.NewPCG(w.cfg.LayoutSeed, kvrec.Mix64(uint64(epoch)^0xd21f7b)))
	for i := n - 1; i > 0; i-- {
		j := rng.Uint64N(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	for i, kg := range perm {
		inv[kg] = uint32(i)
	}
	return &layout{epoch: epoch, perm: perm, inv: inv}
}

// BranchOf returns the branch holding account at the current epoch; ok is
// false without branches or for no such account.
func (w *Workload) BranchOf(account uint64) (branch uint64, ok bool) {
	if w.cfg.BranchKGs == 0 || account >= w.cfg.Accounts {
		return 0, false
	}
	pos := account / w.cfg.AccountsPerKG
	if l := w.cur.Load(); l.inv != nil {
		pos = uint64(l.inv[pos])
	}
	return pos / w.cfg.BranchKGs, true
}

// BranchKeyGroups returns the key groups of branch at the current epoch,
// ascending (nil without branches or for no such branch).
func (w *Workload) BranchKeyGroups(branch uint64) []uint64 {
	if w.cfg.BranchKGs == 0 || branch >= w.cfg.Branches() {
		return nil
	}
	l := w.cur.Load()
	lo := branch * w.cfg.BranchKGs
	hi := min(lo+w.cfg.BranchKGs, w.cfg.KeyGroups())
	out := make([]uint64, 0, hi-lo)
	for pos := lo; pos < hi; pos++ {
		kg := pos
		if l.perm != nil {
			kg = uint64(l.perm[pos])
		}
		out = append(out, kg)
	}
	slices.Sort(out)
	return out
}

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// TotalCents is the conserved total, Accounts × InitialCents.
func (w *Workload) TotalCents() int64 { return int64(w.cfg.Accounts) * w.cfg.InitialCents }

// Schema implements workload.Workload.
func (w *Workload) Schema() txn.Schema {
	return txn.Schema{Tables: []txn.Table{{ID: AccountTable, Name: "account", ValueSize: ValueSize, Capacity: w.cfg.Accounts}},
		KeyGroupFences: w.rule.kgs}
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
	var from, to uint64
	if cfg.BranchKGs > 0 {
		from, to = g.branchTransfer()
	} else {
		from, to = g.independentTransfer()
	}
	return &messages.TxnSubmit{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{
		FromAccount: from,
		ToAccount:   to,
		AmountCents: 1 + g.rng.Int64N(cfg.MaxTransferCents),
	}}}
}

// independentTransfer draws both accounts independently (no branches).
func (g *Generator) independentTransfer() (from, to uint64) {
	cfg := &g.w.cfg
	from = g.account()
	to = from
	for range 32 {
		if to = g.account(); to != from {
			break
		}
	}
	if to == from { // extreme skew: pick any other account
		to = (from + 1 + g.rng.Uint64N(cfg.Accounts-1)) % cfg.Accounts
	}
	return from, to
}

// branchTransfer draws a branch, the debited account in it and, with
// probability LocalFraction, the credited account in it too.
func (g *Generator) branchTransfer() (from, to uint64) {
	cfg := &g.w.cfg
	l := g.w.cur.Load()
	var b uint64
	if g.w.branchHot != nil {
		b = g.w.branchHot.Next(g.rng)
	} else {
		b = g.rng.Uint64N(cfg.Branches())
	}
	from = g.inBranch(l, b)
	if g.rng.Float64() < cfg.LocalFraction {
		for range 32 { // a branch holds ≥ 2 accounts except perhaps the last
			if to = g.inBranch(l, b); to != from {
				return from, to
			}
		}
	}
	return from, (from + 1 + g.rng.Uint64N(cfg.Accounts-1)) % cfg.Accounts
}

// inBranch draws a uniform key group of branch b in layout l, then a
// uniform account of that key group.
func (g *Generator) inBranch(l *layout, b uint64) uint64 {
	cfg := &g.w.cfg
	lo := b * cfg.BranchKGs
	pos := lo + g.rng.Uint64N(min(cfg.BranchKGs, cfg.KeyGroups()-lo))
	kg := pos
	if l.perm != nil {
		kg = uint64(l.perm[pos])
	}
	first := kg * cfg.AccountsPerKG
	return first + g.rng.Uint64N(min(cfg.AccountsPerKG, cfg.Accounts-first))
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
	kgs              uint64 // key groups: ⌈records / perKG⌉
}

func (r rule) Name() string                { return "bank_range" }
func (r rule) KeyGroup(ref txn.Ref) uint64 { return ref.Key / r.perKG }

// KeyGroupIndex implements workload.KeyGroupIndexer: key groups are dense
// already (key / keys per key group).
func (r rule) KeyGroupIndex(kg uint64) (uint64, bool) { return kg, kg < r.kgs }

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
