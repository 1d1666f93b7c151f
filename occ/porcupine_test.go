package occ

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/txn"
)

// The bank histories below are checked for strict serializability: every
// committed transaction is one operation with its real-time interval, and
// porcupine searches for a serial order of whole transactions, consistent
// with real time, that explains every output.

const nAccounts = 4

type bankState [nAccounts]int64

type bankInput struct {
	audit    bool
	from, to int
	amount   int64
}

type bankOutput struct {
	rolledBack bool      // transfer refused: the source balance was short
	balances   bankState // audit: the balances read
}

var bankModel = porcupine.Model{
	Init: func() any { return bankState{100, 100, 100, 100} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(bankState), input.(bankInput), output.(bankOutput)
		if in.audit {
			return out.balances == s, s
		}
		if s[in.from] < in.amount {
			return out.rolledBack, s
		}
		if out.rolledBack {
			return false, s
		}
		s[in.from] -= in.amount
		s[in.to] += in.amount
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(bankInput), output.(bankOutput)
		if in.audit {
			return fmt.Sprintf("audit() -> %v", out.balances)
		}
		return fmt.Sprintf("transfer(%d→%d, %d) rolledBack=%v", in.from, in.to, in.amount, out.rolledBack)
	},
}

// runBankHistory runs concurrent transfers and audits and returns the history
// of transactions that completed (committed or rolled back).
func runBankHistory(t *testing.T, f *fixture, workers, opsPerWorker int, seed uint64) []porcupine.Operation {
	t.Helper()
	c := f.coordinator(t)
	defer c.Close()
	for k := range uint64(nAccounts) {
		mustCommit(t, c, func(tx txn.Tx) error { return tx.Insert(ref(k), u64(100)) })
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.coordinator(t)
			defer c.Close()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range opsPerWorker {
				in := bankInput{audit: rng.IntN(5) == 0, from: rng.IntN(nAccounts), amount: 1 + rng.Int64N(40)}
				in.to = (in.from + 1 + rng.IntN(nAccounts-1)) % nAccounts
				for {
					var out bankOutput
					call := time.Now().UnixNano()
					r := c.Run(context.Background(), uint64(w), func(tx txn.Tx) error {
						out = bankOutput{}
						if in.audit {
							refs := make([]txn.Ref, nAccounts)
							for i := range refs {
								refs[i] = ref(uint64(i))
							}
							vs, err := tx.GetMany(refs)
							if err != nil {
								return err
							}
							for i, v := range vs {
								out.balances[i] = int64(binary.LittleEndian.Uint64(v))
							}
							return nil
						}
						vs, err := tx.GetForUpdateMany([]txn.Ref{ref(uint64(in.from)), ref(uint64(in.to))})
						if err != nil {
							return err
						}
						from, to := int64(binary.LittleEndian.Uint64(vs[0])), int64(binary.LittleEndian.Uint64(vs[1]))
						if from < in.amount {
							out.rolledBack = true
							return txn.ErrRollback
						}
						if err := tx.Put(ref(uint64(in.from)), u64(uint64(from-in.amount))); err != nil {
							return err
						}
						return tx.Put(ref(uint64(in.to)), u64(uint64(to+in.amount)))
					})
					ret := time.Now().UnixNano()
					if r.Outcome == Aborted {
						continue
					}
					if r.Outcome != Committed && r.Outcome != RolledBack {
						t.Errorf("outcome %v: %v", r.Outcome, r.Err)
						return
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	return history
}

func TestBankHistoryStrictlySerializable(t *testing.T) {
	for seed := range uint64(3) {
		f := newFixture(t, nil)
		history := runBankHistory(t, f, 4, 120, seed)
		res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second)
		if res != porcupine.Ok {
			t.Fatalf("seed %d: history of %d transactions is %s, want ok", seed, len(history), res)
		}
	}
}

// brokenLocker grants every lock without taking it: it only reads the slot.
// Two transfers on one account can then both "hold" its lock.
type brokenLocker struct{ qp rdma.QueuePair }

func (l *brokenLocker) Acquire(ctx context.Context, reqs []LockRequest, res []LockResult) error {
	for i, r := range reqs {
		buf := make([]byte, r.Table.SlotSize)
		cs, err := rdma.Exec(ctx, l.qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.Table.Region.RKey, RemoteAddr: r.SlotAddr, Local: buf})
		if err != nil {
			return err
		}
		if err := rdma.FirstError(cs); err != nil {
			return err
		}
		res[i] = LockResult{Status: LockGranted, Path: PathMNCAS, Slot: buf}
		runtime.Gosched() // widen the window a real race would have
	}
	return nil
}

func (l *brokenLocker) Released([]LockRequest, []LockResult) {}

// TestCheckerCatchesBrokenLockPath shows the test above can fail: with a lock
// path that does not exclude, porcupine finds the history illegal.
func TestCheckerCatchesBrokenLockPath(t *testing.T) {
	for round := range uint64(20) {
		f := newFixture(t, func(qp rdma.QueuePair) Locker { return &brokenLocker{qp: qp} })
		history := runBankHistory(t, f, 4, 120, round)
		if res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second); res == porcupine.Illegal {
			t.Logf("round %d: broken lock path caught (%d transactions)", round, len(history))
			return
		}
	}
	t.Fatal(errors.New("porcupine never caught the broken lock path in 20 rounds"))
}
