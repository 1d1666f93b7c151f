package owner

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/aura-runtime/aura/occ"
	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
	"github.com/aura-runtime/aura/txn"
)

// The four accounts of the history test lie on every lock path of the
// three-node map: key 0 in cohort 1 (cn-0), key 2 in cohort 2 (cn-1), keys
// 4 and 6 unowned (MN CAS). Audits and skews read without locks, so they
// validate against owner-held locks through the held sentinel.
var historyKeys = [...]uint64{0, 2, 4, 6}

type bankState [len(historyKeys)]int64

type bankInput struct {
	audit bool
	// skew: read account to without locking it, lock account from, and
	// set from to skewed(from, to). With owner locks invisible to
	// validation, two crossed skews would both commit (write skew).
	skew     bool
	from, to int
	amount   int64
}

func skewed(from, to int64) int64 { return from + to%5 - 2 }

type bankOutput struct {
	rolledBack bool
	balances   bankState
	read       [2]int64 // skew: the values read of from and to
}

var bankModel = porcupine.Model{
	Init: func() any { return bankState{100, 100, 100, 100} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(bankState), input.(bankInput), output.(bankOutput)
		if in.audit {
			return out.balances == s, s
		}
		if in.skew {
			if out.read != [2]int64{s[in.from], s[in.to]} {
				return false, s
			}
			s[in.from] = skewed(s[in.from], s[in.to])
			return true, s
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
		if in.skew {
			return fmt.Sprintf("skew(%d, %d) read %v", in.from, in.to, out.read)
		}
		return fmt.Sprintf("transfer(%d→%d, %d) rolledBack=%v", in.from, in.to, in.amount, out.rolledBack)
	},
}

// TestBankHistoryStrictlySerializable runs transfers, audits and skews from
// all three nodes, over LOCAL, owner-RPC and MN CAS locks, and checks the
// history with porcupine.
func TestBankHistoryStrictlySerializable(t *testing.T) {
	bothLayouts(t, testBankHistoryStrictlySerializable)
}

func testBankHistoryStrictlySerializable(t *testing.T, fenced bool) {
	for seed := range uint64(2) {
		c := newClusterWith(t, 3, threeNodeMap(1), nil, fenced)
		c.tr.failEvery = 23
		history := runBankHistory(t, c, seed, 60)
		if res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second); res != porcupine.Ok {
			t.Fatalf("seed %d: history of %d transactions is %s, want ok", seed, len(history), res)
		}
		if fenced {
			claims, writes, refusals, unfenced := c.fenceStats()
			t.Logf("fences: %d claimed, %d fenced writes, %d refusals, %d given back", claims, writes, refusals, unfenced)
		}
	}
}

// TestConnectionLossAcrossPaths injects memory-node connection failures
// (posts that fail, work requests that fail before or after being applied)
// under the same workload: owner-path lock-word CASes whose outcome is lost
// are resolved by re-reading, coordinators clean up, the history stays
// strictly serializable and nothing stays locked.
func TestConnectionLossAcrossPaths(t *testing.T) { bothLayouts(t, testConnectionLossAcrossPaths) }

func testConnectionLossAcrossPaths(t *testing.T, fenced bool) {
	var fdev *faulty.Device
	c := newClusterWith(t, 3, threeNodeMap(1), func(d rdma.Device) rdma.Device {
		fdev = faulty.Wrap(d, faulty.Random(5, faulty.Probabilities{FailUnapplied: 0.02, FailApplied: 0.02, FailPost: 0.02}))
		return fdev
	}, fenced)
	history := runBankHistory(t, c, 9, 60)
	if n := fdev.Faults().Total(); n < 20 {
		t.Fatalf("only %d faults injected", n)
	}
	if res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second); res != porcupine.Ok {
		t.Fatalf("history under faults is %s", res)
	}
	c.assertNothingHeld(t)
	var resolved, unresolved uint64
	for _, n := range c.nodes {
		resolved += n.Stats.Resolved.Load()
		unresolved += n.Stats.Unresolved.Load()
	}
	t.Logf("%d transactions, faults %+v, lock words resolved %d, unresolved %d", len(history), fdev.Faults(), resolved, unresolved)
	if resolved == 0 {
		t.Fatal("no owner-path lock word was resolved after a lost CAS")
	}
	if fenced {
		claims, writes, refusals, unfenced := c.fenceStats()
		t.Logf("fences: %d claimed, %d fenced writes, %d refusals, %d given back", claims, writes, refusals, unfenced)
	}
}

// runBankHistory runs transfers, audits and skews from two clients on each
// of the three nodes and returns the history of the transactions that
// completed.
func runBankHistory(t *testing.T, c *cluster, seed uint64, opsPerClient int) []porcupine.Operation {
	t.Helper()
	co := c.coordinator(0)
	for _, k := range historyKeys {
		mustRun(t, co, func(tx txn.Tx) error { return tx.Insert(acct(k), u64(100)) })
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	client := 0
	for node := range 3 {
		for range 2 {
			id := client
			client++
			wg.Add(1)
			go func() {
				defer wg.Done()
				co := c.coordinator(node)
				rng := rand.New(rand.NewPCG(seed, uint64(id)))
				for range opsPerClient {
					in := bankInput{audit: rng.IntN(4) == 0, skew: rng.IntN(3) == 0, from: rng.IntN(len(historyKeys)), amount: 1 + rng.Int64N(40)}
					in.to = (in.from + 1 + rng.IntN(len(historyKeys)-1)) % len(historyKeys)
					for {
						var out bankOutput
						call := time.Now().UnixNano()
						r := co.Run(context.Background(), uint64(id), func(tx txn.Tx) error {
							out = bankOutput{}
							if in.audit {
								refs := make([]txn.Ref, len(historyKeys))
								for i, k := range historyKeys {
									refs[i] = acct(k)
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
							from, to := acct(historyKeys[in.from]), acct(historyKeys[in.to])
							if in.skew {
								tv, err := tx.Get(to)
								if err != nil {
									return err
								}
								fv, err := tx.GetForUpdate(from)
								if err != nil {
									return err
								}
								a, b := int64(binary.LittleEndian.Uint64(fv)), int64(binary.LittleEndian.Uint64(tv))
								out.read = [2]int64{a, b}
								return tx.Put(from, u64(uint64(skewed(a, b))))
							}
							vs, err := tx.GetForUpdateMany([]txn.Ref{from, to})
							if err != nil {
								return err
							}
							a, b := int64(binary.LittleEndian.Uint64(vs[0])), int64(binary.LittleEndian.Uint64(vs[1]))
							if a < in.amount {
								out.rolledBack = true
								return txn.ErrRollback
							}
							if err := tx.Put(from, u64(uint64(a-in.amount))); err != nil {
								return err
							}
							return tx.Put(to, u64(uint64(b+in.amount)))
						})
						ret := time.Now().UnixNano()
						if r.Outcome == occ.Aborted {
							continue
						}
						if r.Outcome != occ.Committed && r.Outcome != occ.RolledBack {
							t.Errorf("outcome %v: %v", r.Outcome, r.Err)
							return
						}
						mu.Lock()
						history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
						mu.Unlock()
						break
					}
				}
			}()
		}
	}
	wg.Wait()
	return history
}
