package faulty_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/faulty"
)

func wrEvent(seq uint64, op rdma.Opcode, addr uint64) faulty.Event {
	return faulty.Event{Level: faulty.LevelWorkRequest, QP: 1, Seq: seq, Batch: 1, Op: op, Addr: addr}
}

func postEvent(seq uint64) faulty.Event {
	return faulty.Event{Level: faulty.LevelPost, QP: 1, Seq: seq, Batch: 1}
}

func TestNth(t *testing.T) {
	inj := faulty.Nth(3, faulty.Fault{Kind: faulty.FailApplied})
	for seq := uint64(1); seq <= 5; seq++ {
		got := inj.Inject(wrEvent(seq, rdma.OpRead, 0)).Kind
		if want := map[bool]faulty.Kind{true: faulty.FailApplied, false: faulty.None}[seq == 3]; got != want {
			t.Errorf("work request %d: %s, want %s", seq, got, want)
		}
		// A work-request fault never fires on a Post event.
		if k := inj.Inject(postEvent(seq)).Kind; k != faulty.None {
			t.Errorf("post %d: %s", seq, k)
		}
	}
	post := faulty.Nth(2, faulty.Fault{Kind: faulty.FailPost})
	if post.Inject(postEvent(2)).Kind != faulty.FailPost || post.Inject(wrEvent(2, rdma.OpRead, 0)).Kind != faulty.None {
		t.Error("Nth with a post fault fires on the wrong level")
	}
}

func TestWhenAndChain(t *testing.T) {
	const lock = 0x100008
	onLock := faulty.When(func(ev faulty.Event) bool { return ev.Op == rdma.OpCompareAndSwap && ev.Addr == lock },
		faulty.Fault{Kind: faulty.Drop})
	if onLock.Inject(wrEvent(1, rdma.OpCompareAndSwap, lock)).Kind != faulty.Drop {
		t.Error("When did not fire on its predicate")
	}
	if onLock.Inject(wrEvent(2, rdma.OpCompareAndSwap, lock+8)).Kind != faulty.None ||
		onLock.Inject(wrEvent(3, rdma.OpRead, lock)).Kind != faulty.None {
		t.Error("When fired outside its predicate")
	}
	chain := faulty.Chain(faulty.NoFaults, onLock, faulty.Nth(2, faulty.Fault{Kind: faulty.Delay, Delay: time.Second}))
	if chain.Inject(wrEvent(1, rdma.OpCompareAndSwap, lock)).Kind != faulty.Drop {
		t.Error("Chain did not use the first injector that fired")
	}
	if f := chain.Inject(wrEvent(2, rdma.OpRead, 0)); f.Kind != faulty.Delay || f.Delay != time.Second {
		t.Errorf("Chain fell through to %+v, want the delay", f)
	}
	if chain.Inject(wrEvent(3, rdma.OpRead, 0)).Kind != faulty.None {
		t.Error("Chain injected when nothing fired")
	}
}

func TestRandomIsDeterministicAndCalibrated(t *testing.T) {
	p := faulty.Probabilities{Delay: 0.2, MinDelay: time.Microsecond, MaxDelay: 5 * time.Microsecond,
		Drop: 0.1, FailUnapplied: 0.05, FailApplied: 0.05, FailPost: 0.1, Break: 0.02}
	draw := func(seed uint64) []faulty.Fault {
		inj := faulty.Random(seed, p)
		out := make([]faulty.Fault, 0, 20000)
		for i := range uint64(10000) {
			out = append(out, inj.Inject(wrEvent(i+1, rdma.OpFetchAndAdd, 0)), inj.Inject(postEvent(i+1)))
		}
		return out
	}
	a, b, c := draw(1), draw(1), draw(2)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, event %d: %+v vs %+v", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave the same faults")
	}
	counts := map[faulty.Kind]int{}
	for i, f := range a {
		counts[f.Kind]++
		if f.Kind == faulty.Delay && (f.Delay < p.MinDelay || f.Delay > p.MaxDelay) {
			t.Fatalf("delay %v outside [%v, %v]", f.Delay, p.MinDelay, p.MaxDelay)
		}
		if lvl := f.Kind.Level(); f.Kind != faulty.None && lvl != []faulty.Level{faulty.LevelWorkRequest, faulty.LevelPost}[i%2] {
			t.Fatalf("fault %s drawn for the wrong level", f.Kind)
		}
	}
	for kind, prob := range map[faulty.Kind]float64{faulty.Delay: p.Delay, faulty.Drop: p.Drop, faulty.FailUnapplied: p.FailUnapplied,
		faulty.FailApplied: p.FailApplied, faulty.FailPost: p.FailPost, faulty.Break: p.Break} {
		want := prob * 10000
		if got := float64(counts[kind]); got < 0.7*want || got > 1.3*want {
			t.Errorf("%s fired %v times in 10000 events, want about %v", kind, got, want)
		}
	}
}

func TestProbabilitiesValidate(t *testing.T) {
	bad := faulty.Probabilities{Delay: 0.8, Drop: 0.5, FailPost: -1, MinDelay: 2, MaxDelay: 1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid probabilities validated")
	}
	for _, want := range []string{"FailPost", "sum to", "delay range"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Random accepted invalid probabilities")
		}
	}()
	faulty.Random(1, bad)
}

func TestKindNames(t *testing.T) {
	for k, want := range map[faulty.Kind]string{faulty.None: "none", faulty.Drop: "drop", faulty.Break: "break", 99: "kind(99)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), want)
		}
	}
	if (faulty.Counts{Delayed: 1, Dropped: 2, FailedPosts: 3, Breaks: 1, BrokenWRs: 9}).Total() != 7 {
		t.Error("Counts.Total")
	}
}
