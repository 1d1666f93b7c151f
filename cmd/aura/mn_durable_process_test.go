package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload/bank"
)

// durableKillRestartMN kills the memory node with SIGKILL, waits for it to
// die, and starts a new one on the same address and data directory.
func durableKillRestartMN(t *testing.T, p *mnProcess, args ...string) *mnProcess {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	q := startMN(t, append([]string{"--listen", p.addr}, args...)...)
	if q.addr != p.addr {
		t.Fatalf("restarted on %s, not %s", q.addr, p.addr)
	}
	return q
}

// durableTransfer is a transfer the client saw committed.
type durableTransfer struct {
	id       uint64
	from, to uint64
	amount   int64
}

// durableTxnID gives the i-th transaction of the test an id whose commit
// ledger word no other transaction of the test shares (store.LedgerAddr:
// lane = client number, ring position = sequence mod LedgerRing), so that
// after the run the ledger names every committed transaction.
func durableTxnID(i uint64) uint64 {
	return (1+i/store.LedgerRing)<<40 | i%store.LedgerRing
}

// durableMaxTxns keeps durableTxnID within distinct ledger words.
const durableMaxTxns = (store.LedgerLanes - 1) * store.LedgerRing

// TestDurableMNKill9KeepsAcknowledgedTransactions: a bank workload runs
// against `aura mn --data-dir`; the memory node is killed with SIGKILL in
// the middle and restarted on the same directory while the clients keep
// going (retrying under the same transaction ids, exactly once through the
// commit ledger). Afterwards every transaction the clients saw committed —
// before the kill and after — is in the commit ledger, and every balance is
// exactly its initial value plus the acknowledged transfers: nothing
// acknowledged was lost, nothing applied twice, the bank total is conserved.
func TestDurableMNKill9KeepsAcknowledgedTransactions(t *testing.T) {
	dir := t.TempDir()
	// A small snapshot threshold so that the run crosses snapshots and the
	// restart recovers from a snapshot plus a log.
	mnArgs := []string{"--size", "64MiB", "--data-dir", dir, "--snapshot-every", "256KiB", "--log-segment-size", "9MiB"}
	mn := startMN(t, append([]string{"--listen", "127.0.0.1:0"}, mnArgs...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	// Redial for long enough to ride out the restart.
	dev, err := tcp.Dial(ctx, mn.addr, tcp.ClientConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RedialAttempts: 12, RedialBaseDelay: 20 * time.Millisecond, RedialMaxDelay: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	cfg := bank.DefaultConfig()
	cfg.Accounts, cfg.AllowOverdraft = 2000, true
	w, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	layout := loadTables(t, ctx, dev, w)
	ecfg := occ.DefaultConfig()
	ecfg.ExactlyOnce = true
	// Locks held when the node died are released once it is back; give
	// that the whole restart.
	ecfg.CleanupTimeout = 30 * time.Second
	engine, err := occ.NewEngine(layout, func() occ.Locker {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Error(err)
			return nil
		}
		return occ.NewCASLocker(qp)
	}, nil, ecfg)
	if err != nil {
		t.Fatal(err)
	}

	const workers = 4
	var (
		next, committed, retries atomic.Uint64
		stop                     atomic.Bool
		mu                       sync.Mutex
		acked                    []durableTransfer
		wg                       sync.WaitGroup
	)
	for k := range workers {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		c := engine.NewCoordinator(qp)
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 7))
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= durableMaxTxns {
					return
				}
				tr := durableTransfer{id: durableTxnID(i), from: rng.Uint64N(cfg.Accounts), amount: 1 + rng.Int64N(1000)}
				if tr.to = rng.Uint64N(cfg.Accounts - 1); tr.to >= tr.from {
					tr.to++
				}
				// Retry under the same id until the client knows the
				// outcome: an attempt whose reply was lost may have
				// committed, and the ledger then answers Replayed.
				for attempt := 0; ; attempt++ {
					res := c.Run(ctx, tr.id, durableTransferProgram(tr))
					if res.Outcome == occ.Committed {
						break
					}
					if res.Outcome != occ.Aborted || ctx.Err() != nil {
						t.Errorf("transaction %#x: %v: %v", tr.id, res.Outcome, res.Err)
						return
					}
					retries.Add(1)
					if errors.Is(res.Err, rdma.ErrConnectionLost) {
						time.Sleep(5 * time.Millisecond)
					}
				}
				committed.Add(1)
				mu.Lock()
				acked = append(acked, tr)
				mu.Unlock()
			}
		}()
	}
	waitFor := func(n uint64) {
		t.Helper()
		for committed.Load() < n {
			if ctx.Err() != nil || t.Failed() {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("only %d transactions committed", committed.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(1500)
	beforeKill := committed.Load()
	first := mn
	mn = durableKillRestartMN(t, mn, mnArgs...)
	waitFor(beforeKill + 1500)
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d transactions acknowledged (%d before the kill), %d aborted attempts retried", len(acked), beforeKill, retries.Load())
	if !strings.Contains(first.stderr.String(), "durable: snapshot taken") {
		t.Errorf("no snapshot before the kill: recovery did not start from one")
	}
	if !strings.Contains(mn.stderr.String(), "durable memory recovered") {
		t.Fatalf("the restarted node did not log its recovery:\n%s", mn.stderr.String())
	}

	// Every acknowledged transaction is in the commit ledger, and the
	// balances are exactly the acknowledged transfers applied once each.
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	ledger := make([]byte, store.LedgerBytes)
	for off := 0; off < len(ledger); off += rdma.MaxTransferBytes {
		if _, err := rdma.Exec(ctx, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: layout.Ledger.RKey,
			RemoteAddr: layout.Ledger.Addr + uint64(off), Local: ledger[off:min(len(ledger), off+rdma.MaxTransferBytes)]}); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]int64, cfg.Accounts)
	for i := range want {
		want[i] = cfg.InitialCents
	}
	missing := 0
	for _, tr := range acked {
		at := store.LedgerAddr(layout.Ledger, tr.id) - layout.Ledger.Addr
		if got := binary.LittleEndian.Uint64(ledger[at:]); got != tr.id {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged transaction %#x is not in the commit ledger (word holds %#x)", tr.id, got)
			}
		}
		want[tr.from] -= tr.amount
		want[tr.to] += tr.amount
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged transactions lost", missing, len(acked))
	}
	reader, err := store.NewReader(layout, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var total int64
	for a := range cfg.Accounts {
		v, ok, err := reader.Get(ctx, bank.Ref(a))
		if err != nil || !ok {
			t.Fatalf("account %d: %v (present %v)", a, err, ok)
		}
		bal, err := bank.DecodeAccount(a, v)
		if err != nil {
			t.Fatal(err)
		}
		total += bal
		if bal != want[a] {
			t.Errorf("account %d holds %d, the acknowledged transfers make %d", a, bal, want[a])
		}
	}
	if total != w.TotalCents() {
		t.Errorf("bank total %d, want %d", total, w.TotalCents())
	}
}

// durableTransferProgram moves tr.amount from tr.from to tr.to.
func durableTransferProgram(tr durableTransfer) txn.Program {
	return func(tx txn.Tx) error {
		lo, hi := min(tr.from, tr.to), max(tr.from, tr.to)
		vals, err := tx.GetForUpdateMany([]txn.Ref{bank.Ref(lo), bank.Ref(hi)})
		if err != nil {
			return err
		}
		for i, a := range []uint64{lo, hi} {
			if vals[i] == nil {
				return fmt.Errorf("account %d: %w", a, txn.ErrNotFound)
			}
			bal, err := bank.DecodeAccount(a, vals[i])
			if err != nil {
				return err
			}
			if a == tr.from {
				bal -= tr.amount
			} else {
				bal += tr.amount
			}
			if err := tx.Put(bank.Ref(a), bank.EncodeAccount(a, bal)); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestDurableMNKill9UnderAuraBench: `aura bench` runs the bank workload
// and TPC-C against `aura mn --data-dir`; the memory node is killed with
// SIGKILL in the measured part of each run and restarted on the same
// directory. Each run completes and its consistency checks pass (bank
// total conserved and every account intact; the TPC-C consistency
// conditions).
func TestDurableMNKill9UnderAuraBench(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		args        []string
	}{
		{"bank", "bank_total", []string{"--workload", "bank", "--accounts", "2000", "--clients", "4"}},
		{"tpcc", "tpcc_consistency", []string{"--workload", "tpcc", "--warehouses", "4", "--items", "2000", "--customers", "100",
			"--expected-new-orders", "50000", "--clients", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mnArgs := []string{"--size", "512MiB", "--data-dir", dir, "--snapshot-every", "8MiB"}
			mn := startMN(t, append([]string{"--listen", "127.0.0.1:0"}, mnArgs...)...)
			out := filepath.Join(t.TempDir(), "out.json")
			benchCmd := exec.Command(buildAura(t), append([]string{"bench", "--json", out, "--mn", mn.addr, "--cns", "2",
				"--duration", "4s", "--warmup", "500ms"}, tc.args...)...)
			// Progress lines ("[mode 2.0s] committed …") tell when the run is
			// well under way.
			pr, pw := io.Pipe()
			var benchOut syncBuffer
			benchCmd.Stdout, benchCmd.Stderr = pw, pw
			running := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(pr)
				seen := 0
				for sc.Scan() {
					benchOut.Write(append(sc.Bytes(), '\n'))
					if strings.Contains(sc.Text(), "] committed") {
						if seen++; seen == 2 {
							close(running)
						}
					}
				}
				// A line the scanner refused (over 64 KiB) ends the scan:
				// keep draining so that the bench never blocks writing.
				_, _ = io.Copy(io.Discard, pr)
			}()
			if err := benchCmd.Start(); err != nil {
				t.Fatal(err)
			}
			benchDone := make(chan error, 1)
			go func() { err := benchCmd.Wait(); pw.Close(); benchDone <- err }()
			t.Cleanup(func() {
				_ = benchCmd.Process.Kill()
				benchDone <- <-benchDone
			})
			select {
			case <-running:
			case err := <-benchDone:
				benchDone <- err
				t.Fatalf("aura bench ended before the kill: %v\n%s", err, benchOut.String())
			case <-time.After(40 * time.Second):
				t.Fatalf("aura bench did not get going\n%s", benchOut.String())
			}
			durableKillRestartMN(t, mn, mnArgs...)
			select {
			case err := <-benchDone:
				benchDone <- err
				if err != nil {
					t.Fatalf("aura bench: %v\n%s", err, benchOut.String())
				}
			case <-time.After(40 * time.Second):
				t.Fatalf("aura bench did not finish\n%s", benchOut.String())
			}
			res := readBenchJSON(t, out)
			if res.Checks[tc.check] != "pass" || res.Committed == 0 {
				t.Fatalf("after a memory-node kill: committed %d, failed %d, checks %v\n%s", res.Committed, res.Failed, res.Checks, benchOut.String())
			}
			t.Logf("aura bench %s: committed %d, failed %d, %s %v", tc.name, res.Committed, res.Failed, tc.check, res.Checks[tc.check])
		})
	}
}

// TestDurableMNFlags: the durability flags are explained in --help and,
// like every aura mn setting, come from a config file or AURA_MN_*; bad
// values and a directory another node holds are refused.
func TestDurableMNFlags(t *testing.T) {
	assertHelp(t, newMNCmd(), nil, "--data-dir", "--log-segment-size", "--snapshot-every", "kill -9")
	dir := t.TempDir()
	file := filepath.Join(dir, "mn.json")
	if err := os.WriteFile(file, []byte(`{"data-dir":"/from/file","snapshot-every":"1GiB"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AURA_MN_LOG_SEGMENT_SIZE", "16MiB")
	out, err := runAura("mn", "--config", file, "--snapshot-every", "2MiB", "--print-config")
	if !errors.Is(err, errPrinted) {
		t.Fatalf("%v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for k, want := range map[string]string{"data-dir": "/from/file", "log-segment-size": "16MiB", "snapshot-every": "2MiB"} {
		if got[k] != want {
			t.Errorf("%s = %v, want %s", k, got[k], want)
		}
	}
	// A segment smaller than one record is refused; so is a directory in use.
	if _, err := runAura("mn", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-segment-size", "1MiB"); err == nil ||
		!strings.Contains(err.Error(), "segment size") {
		t.Errorf("tiny segment: %v", err)
	}
	held := t.TempDir()
	startMN(t, "--listen", "127.0.0.1:0", "--size", "8MiB", "--data-dir", held)
	if _, err := runAura("mn", "--listen", "127.0.0.1:0", "--size", "8MiB", "--data-dir", held); !errors.Is(err, durable.ErrLocked) {
		t.Errorf("second node on one directory: %v, want durable.ErrLocked", err)
	}
}

// TestDurableMNRestartAfterSIGTERM: a graceful stop and a restart on the
// same directory keep regions (same rkeys and addresses) and contents.
func TestDurableMNRestartAfterSIGTERM(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--size", "16MiB", "--data-dir", dir}
	p := startMN(t, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := tcp.Dial(ctx, p.addr, tcp.ClientConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dev.RegisterRegion(ctx, "records", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rdma.Exec(ctx, qp,
		rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 100, Local: []byte("kept across restarts")},
		rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 41}); err != nil {
		t.Fatal(err)
	}
	dev.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	q := startMN(t, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	dev, err = tcp.Dial(ctx, q.addr, tcp.ClientConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	regions, err := dev.Regions(ctx)
	if err != nil || len(regions) != 1 || regions[0] != r {
		t.Fatalf("regions after restart: %+v %v, want [%+v]", regions, err, r)
	}
	qp, err = dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 20)
	cs, err := rdma.Exec(ctx, qp,
		rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 100, Local: got},
		rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "kept across restarts" || cs[1].Value != 41 {
		t.Fatalf("after restart: %q, counter %d", got, cs[1].Value)
	}
}
