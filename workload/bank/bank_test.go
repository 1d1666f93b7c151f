package bank

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
)

func setup(t *testing.T, cfg Config) (*Workload, *memtx.Store) {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := memtx.New(w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return w, s
}

func checks(t *testing.T, w *Workload, s *memtx.Store) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, c := range w.Check(context.Background(), s) {
		out[c.Name] = c.Err
	}
	if len(out) != 2 {
		t.Fatalf("checks %v", out)
	}
	return out
}

// tracingTx counts GetMany batch sizes.
type tracingTx struct {
	txn.Tx
	maxBatch int
}

func (t *tracingTx) GetMany(rs []txn.Ref) ([][]byte, error) {
	t.maxBatch = max(t.maxBatch, len(rs))
	return t.Tx.GetMany(rs)
}

func run(t *testing.T, w *Workload, s *memtx.Store, msg *messages.TxnSubmit) (*messages.TxnResult, int, error) {
	t.Helper()
	res := &messages.TxnResult{}
	prog, err := w.Program(msg, res)
	if err != nil {
		t.Fatalf("program: %v", err)
	}
	var maxBatch int
	err = s.Run(func(tx txn.Tx) error {
		tt := &tracingTx{Tx: tx}
		err := prog(tt)
		maxBatch = tt.maxBatch
		return err
	})
	return res, maxBatch, err
}

func TestSerialRunConservesTotal(t *testing.T) {
	for _, theta := range []float64{0, 0.99} {
		cfg := DefaultConfig()
		cfg.Accounts = 1000
		cfg.InitialCents = 5_000
		cfg.MaxTransferCents = 3_000 // rollbacks happen
		cfg.AuditFraction = 0.05
		cfg.HotTheta = theta
		w, s := setup(t, cfg)
		g := w.NewGenerator(42, 3)
		var committed, rolledBack, audits int
		for range 5000 {
			msg := g.Next()
			res, batch, err := run(t, w, s, msg)
			switch {
			case err == nil:
				committed++
				if a := msg.GetBankAudit(); a != nil {
					audits++
					out := res.GetBankAudit()
					if out.GetTotalCents() != w.TotalCents() || out.GetAccounts() != cfg.Accounts {
						t.Fatalf("audit output %v, want total %d over %d accounts", out, w.TotalCents(), cfg.Accounts)
					}
					if batch > MaxAuditBatch || batch == 0 {
						t.Fatalf("audit GetMany batch of %d", batch)
					}
				}
			case errors.Is(err, txn.ErrRollback):
				rolledBack++
			default:
				t.Fatalf("%v: %v", msg, err)
			}
		}
		if committed < 4000 || rolledBack == 0 || audits < 150 {
			t.Errorf("θ=%v: committed %d, rolled back %d, audits %d", theta, committed, rolledBack, audits)
		}
		for name, err := range checks(t, w, s) {
			if err != nil {
				t.Errorf("θ=%v %s: %v", theta, name, err)
			}
		}
	}
}

func TestOverdraftAllowed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Accounts = 10
	cfg.InitialCents = 100
	cfg.AllowOverdraft = true
	w, s := setup(t, cfg)
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 7, ToAccount: 2, AmountCents: 250}}}
	if _, _, err := run(t, w, s, msg); err != nil {
		t.Fatal(err)
	}
	v, _, _ := s.Get(context.Background(), Ref(7))
	if b, _ := DecodeAccount(7, v); b != -150 {
		t.Fatalf("balance %d", b)
	}
	v, _, _ = s.Get(context.Background(), Ref(2))
	if b, _ := DecodeAccount(2, v); b != 350 {
		t.Fatalf("balance %d", b)
	}
	for name, err := range checks(t, w, s) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestOverdraftRollsBack(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Accounts = 10
	cfg.InitialCents = 100
	w, s := setup(t, cfg)
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 0, AmountCents: 101}}}
	if _, _, err := run(t, w, s, msg); !errors.Is(err, txn.ErrRollback) {
		t.Fatalf("got %v, want a rollback", err)
	}
	msg.GetBankTransfer().AmountCents = 100
	if _, _, err := run(t, w, s, msg); err != nil {
		t.Fatal(err)
	}
}

func TestAuditRanges(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Accounts = 1234
	cfg.InitialCents = 10
	cfg.AuditBatch = 7
	w, s := setup(t, cfg)
	for _, c := range []struct{ first, count, want uint64 }{{0, 0, 1234}, {0, 1234, 1234}, {1000, 0, 234}, {5, 100, 100}, {1233, 1, 1}} {
		msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{FirstAccount: c.first, AccountCount: c.count}}}
		res, batch, err := run(t, w, s, msg)
		if err != nil {
			t.Fatal(err)
		}
		out := res.GetBankAudit()
		if out.GetAccounts() != c.want || out.GetTotalCents() != int64(c.want)*10 {
			t.Errorf("audit %d+%d: %v", c.first, c.count, out)
		}
		if batch > 7 {
			t.Errorf("audit batch %d > 7", batch)
		}
		if fp := w.Footprint(msg); uint64(len(fp.Reads)) != c.want || len(fp.Writes) != 0 || fp.Reads[0] != Ref(c.first) {
			t.Errorf("footprint of audit %d+%d: %d reads", c.first, c.count, len(fp.Reads))
		}
	}
	// A corrupted balance shows in the audit's total.
	_ = s.Load(Ref(3), EncodeAccount(3, 11))
	res, _, err := run(t, w, s, &messages.TxnSubmit{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{}}})
	if err != nil || res.GetBankAudit().GetTotalCents() != 12341 {
		t.Fatalf("audit after corruption: %v %v", res.GetBankAudit(), err)
	}
}

func TestChecksFailOnCorruption(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Accounts = 500
	// A changed balance breaks the total only.
	w, s := setup(t, cfg)
	_ = s.Load(Ref(17), EncodeAccount(17, cfg.InitialCents+1))
	c := checks(t, w, s)
	if c["bank.total"] == nil || c["bank.accounts"] != nil {
		t.Fatalf("changed balance: %v", c)
	}
	// A value stored under the wrong account breaks both (its balance is
	// not counted).
	w, s = setup(t, cfg)
	_ = s.Load(Ref(17), EncodeAccount(18, cfg.InitialCents))
	c = checks(t, w, s)
	if c["bank.total"] == nil || c["bank.accounts"] == nil || !strings.Contains(c["bank.accounts"].Error(), "account 17") {
		t.Fatalf("misplaced value: %v", c)
	}
	// A missing account breaks both.
	w, _ = setup(t, cfg)
	s2, _ := memtx.New(w.Schema())
	for a := range cfg.Accounts - 1 {
		_ = s2.Insert(ctx, Ref(a), EncodeAccount(a, cfg.InitialCents))
	}
	c = checks(t, w, s2)
	if c["bank.total"] == nil || c["bank.accounts"] == nil {
		t.Fatalf("missing account: %v", c)
	}
	// A conserving but malformed store: a balance moved without the
	// account number still fails accounts.
	w, s = setup(t, cfg)
	_ = s.Load(Ref(1), EncodeAccount(1, cfg.InitialCents-5))
	_ = s.Load(Ref(2), EncodeAccount(2, cfg.InitialCents+5))
	c = checks(t, w, s)
	if c["bank.total"] != nil || c["bank.accounts"] != nil {
		t.Fatalf("conserving move flagged: %v", c)
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HotTheta = 0.9
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := w.NewGenerator(1, 0), w.NewGenerator(1, 0), w.NewGenerator(1, 1)
	same := 0
	for range 1000 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(x.GetBody(), y.GetBody()) {
			t.Fatal("same seed and client, different transactions")
		}
		if reflect.DeepEqual(x.GetBody(), z.GetBody()) {
			same++
		}
		if tr := x.GetBankTransfer(); tr != nil {
			if tr.FromAccount == tr.ToAccount || tr.FromAccount >= cfg.Accounts || tr.ToAccount >= cfg.Accounts ||
				tr.AmountCents < 1 || tr.AmountCents > cfg.MaxTransferCents {
				t.Fatalf("bad transfer %v", tr)
			}
		}
	}
	if same > 100 {
		t.Errorf("clients 0 and 1 agree on %d of 1000 transactions", same)
	}
}

func TestRuleAndFootprint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.KeyGroupsPerPartition = 4
	w, _ := New(cfg)
	r := w.Rule()
	if r.Name() != "bank_range" {
		t.Fatal(r.Name())
	}
	if r.KeyGroup(Ref(63)) != 0 || r.KeyGroup(Ref(64)) != 1 || r.Partition(Ref(64*4)) != 1 || r.Partition(Ref(64*4-1)) != 0 {
		t.Fatal("range rule")
	}
	msg := &messages.TxnSubmit{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 900, ToAccount: 5, AmountCents: 1}}}
	if r.Home(msg) != 900/64/4 {
		t.Fatalf("home %d", r.Home(msg))
	}
	fp := w.Footprint(msg)
	if !reflect.DeepEqual(fp.Writes, []txn.Ref{Ref(5), Ref(900)}) || len(fp.Reads) != 0 {
		t.Fatalf("footprint %+v", fp)
	}
}

func TestProgramRejectsBadInput(t *testing.T) {
	w, _ := New(DefaultConfig())
	for _, m := range []*messages.TxnSubmit{
		{},
		{Body: &messages.TxnSubmit_Kv{Kv: &messages.KVTxn{}}},
		{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 1, AmountCents: 1}}},
		{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 10_000, AmountCents: 1}}},
		{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 2, AmountCents: 0}}},
		{Body: &messages.TxnSubmit_BankTransfer{BankTransfer: &messages.BankTransfer{FromAccount: 1, ToAccount: 2, AmountCents: -5}}},
		{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{FirstAccount: 10_000}}},
		{Body: &messages.TxnSubmit_BankAudit{BankAudit: &messages.BankAudit{FirstAccount: 9_000, AccountCount: 1001}}},
	} {
		if _, err := w.Program(m, nil); err == nil {
			t.Errorf("accepted %v", m)
		}
	}
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	bad := Config{Accounts: 1, InitialCents: -1, AuditFraction: 2, AuditAccounts: 5, AuditBatch: 101, HotTheta: 1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"accounts 1", "initial balance", "max transfer", "audit fraction", "audit accounts", "audit batch", "hot theta", "accounts per key group", "key groups per partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	over := DefaultConfig()
	over.InitialCents = 1 << 62
	if over.Validate() == nil {
		t.Error("overflowing total accepted")
	}
}
