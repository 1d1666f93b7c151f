package rdmatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/aura-runtime/aura/rdma"
)

// WordOpKind is the kind of one operation on an 8-byte word in a history.
type WordOpKind uint8

const (
	// WordRead is an 8-byte aligned READ; its output is the value read.
	WordRead WordOpKind = iota + 1
	// WordWrite is an 8-byte aligned WRITE of Arg1; its output is ignored.
	WordWrite
	// WordCAS is a CAS(expected Arg1, new Arg2); its output is the prior value.
	WordCAS
	// WordFAA is a FAA(add Arg1); its output is the prior value.
	WordFAA
)

// WordInput is the input of an operation in a history checked with WordModel.
type WordInput struct {
	Word int // which word (the model is partitioned by it)
	Kind WordOpKind
	Arg1 uint64 // value written, CAS expected value, or FAA addend
	Arg2 uint64 // CAS new value
}

func (in WordInput) String() string {
	switch in.Kind {
	case WordRead:
		return fmt.Sprintf("w%d.read()", in.Word)
	case WordWrite:
		return fmt.Sprintf("w%d.write(%d)", in.Word, in.Arg1)
	case WordCAS:
		return fmt.Sprintf("w%d.cas(%d,%d)", in.Word, in.Arg1, in.Arg2)
	case WordFAA:
		return fmt.Sprintf("w%d.faa(%d)", in.Word, in.Arg1)
	}
	return fmt.Sprintf("w%d.op(%d)", in.Word, in.Kind)
}

// WordModel is a porcupine model of independent 8-byte words that start at
// zero: each word is a register with read, write, cas(expected,new)->old and
// faa(add)->old (wrapping). Histories are partitioned by word. Inputs are
// WordInput values and outputs uint64 values.
var WordModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byWord := map[int][]porcupine.Operation{}
		var order []int
		for _, op := range history {
			w := op.Input.(WordInput).Word
			if _, ok := byWord[w]; !ok {
				order = append(order, w)
			}
			byWord[w] = append(byWord[w], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, w := range order {
			out = append(out, byWord[w])
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		s := state.(uint64)
		in := input.(WordInput)
		out, _ := output.(uint64)
		switch in.Kind {
		case WordRead:
			return out == s, s
		case WordWrite:
			return true, in.Arg1
		case WordCAS:
			if out != s {
				return false, s
			}
			if s == in.Arg1 {
				return true, in.Arg2
			}
			return true, s
		case WordFAA:
			return out == s, s + in.Arg1
		}
		return false, s
	},
	Equal: func(a, b any) bool { return a.(uint64) == b.(uint64) },
	DescribeOperation: func(input, output any) string {
		in := input.(WordInput)
		if in.Kind == WordWrite {
			return in.String()
		}
		return fmt.Sprintf("%s -> %v", in, output)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// CheckHistory checks a history against WordModel, giving up after timeout
// (porcupine.Unknown).
func CheckHistory(history []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(WordModel, history, timeout)
}

// LinearizabilityConfig sizes RunLinearizability.
type LinearizabilityConfig struct {
	Workers      int   // goroutines, each with its own queue pair; default 8
	OpsPerWorker int   // operations per goroutine; default 250
	Words        int   // distinct words operated on; default 4
	Seed         int64 // workload seed; default 1
}

func (c LinearizabilityConfig) withDefaults() LinearizabilityConfig {
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.OpsPerWorker <= 0 {
		c.OpsPerWorker = 250
	}
	if c.Words <= 0 {
		c.Words = 4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// RunLinearizability runs a random concurrent workload of 8-byte READ, WRITE,
// CAS and FAA on a few words of a fresh region of dev, one queue pair per
// worker goroutine, records each operation's call and return times, and checks
// the history with porcupine. Every work request must succeed.
func RunLinearizability(t *testing.T, dev rdma.Device, cfg LinearizabilityConfig) {
	t.Helper()
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	region, err := dev.RegisterRegion(ctx, fmt.Sprintf("rdmatest/linearizability/%d", cfg.Seed), uint64(cfg.Words)*rdma.AtomicSize)
	if err != nil {
		t.Fatalf("RegisterRegion: %v", err)
	}
	qps := make([]rdma.QueuePair, cfg.Workers)
	for i := range qps {
		qp, err := dev.CreateQP(rdma.QPConfig{})
		if err != nil {
			t.Fatalf("CreateQP: %v", err)
		}
		defer qp.Close()
		qps[i] = qp
	}
	var (
		mu      sync.Mutex
		history = make([]porcupine.Operation, 0, cfg.Workers*cfg.OpsPerWorker)
		wg      sync.WaitGroup
		errs    = make(chan error, cfg.Workers)
	)
	start := make(chan struct{})
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(w)))
			local := make([]porcupine.Operation, 0, cfg.OpsPerWorker)
			buf := make([]byte, rdma.AtomicSize)
			last := make([]uint64, cfg.Words) // last value this worker saw per word
			<-start
			for i := range cfg.OpsPerWorker {
				word := rng.IntN(cfg.Words)
				wr := rdma.WorkRequest{ID: uint64(i), RKey: region.RKey, RemoteAddr: region.Addr + uint64(word)*rdma.AtomicSize}
				in := WordInput{Word: word}
				switch r := rng.IntN(10); {
				case r < 3:
					in.Kind, wr.Op, wr.Local = WordRead, rdma.OpRead, buf
				case r < 5:
					// Values written are unique per worker and operation, so a
					// read that returns a stale or invented value cannot hide.
					in.Kind, wr.Op = WordWrite, rdma.OpWrite
					in.Arg1 = uint64(w+1)<<32 | uint64(i+1)
					wr.Local = putWord(buf, in.Arg1)
				case r < 8:
					in.Kind, wr.Op = WordCAS, rdma.OpCompareAndSwap
					in.Arg1 = last[word] // usually current: many CAS succeed
					if rng.IntN(4) == 0 {
						in.Arg1 = rng.Uint64N(4)
					}
					in.Arg2 = uint64(w+1)<<48 | uint64(i+1)
					wr.Compare, wr.Swap = in.Arg1, in.Arg2
				default:
					in.Kind, wr.Op = WordFAA, rdma.OpFetchAndAdd
					in.Arg1 = 1 + rng.Uint64N(3)
					wr.Add = in.Arg1
				}
				call := rdma.Now()
				cs, err := rdma.Exec(ctx, qps[w], wr)
				ret := rdma.Now()
				if err == nil {
					err = rdma.FirstError(cs)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d op %d (%s): %w", w, i, in, err)
					return
				}
				var out uint64
				if in.Kind == WordRead {
					out = getWord(buf)
				} else {
					out = cs[0].Value
				}
				switch in.Kind {
				case WordRead, WordCAS, WordFAA:
					last[word] = out
				}
				local = append(local, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
			}
			mu.Lock()
			history = append(history, local...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	res, info := porcupine.CheckOperationsVerbose(WordModel, history, time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizable: %d operations by %d queue pairs on %d words", len(history), cfg.Workers, cfg.Words)
	case porcupine.Illegal:
		t.Errorf("history of %d operations is not linearizable", len(history))
		for _, part := range info.PartialLinearizationsOperations() {
			if len(part) > 0 {
				longest := part[0]
				for _, p := range part {
					if len(p) > len(longest) {
						longest = p
					}
				}
				n := min(len(longest), 5)
				t.Logf("a longest partial linearization ends with %v", describe(longest[len(longest)-n:]))
				break
			}
		}
	default:
		t.Errorf("porcupine could not decide within its timeout (%d operations)", len(history))
	}
}

func describe(ops []porcupine.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = WordModel.DescribeOperation(op.Input, op.Output)
	}
	return out
}
