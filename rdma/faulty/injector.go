package faulty

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aura-runtime/aura/rdma"
)

// Kind names a fault.
type Kind uint8

const (
	// None injects nothing.
	None Kind = iota
	// Delay delivers a work request's completion Fault.Delay late.
	Delay
	// Drop applies a work request and never delivers its completion.
	Drop
	// FailUnapplied completes a work request with StatusTransportError
	// without applying it. The rest of its doorbell is flushed (not applied,
	// StatusFlushed), as on a reliable-connected QP in the error state.
	FailUnapplied
	// FailApplied applies a work request, then completes it with
	// StatusTransportError; the rest of its doorbell is flushed.
	FailApplied
	// FailPost makes a Post fail with rdma.ErrConnectionLost; nothing runs.
	FailPost
	// Break fails the Post as FailPost does and breaks the connection until
	// Device.Heal.
	Break
)

var kindNames = [...]string{None: "none", Delay: "delay", Drop: "drop", FailUnapplied: "fail-unapplied",
	FailApplied: "fail-applied", FailPost: "fail-post", Break: "break"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Level is where a Kind applies: to a doorbell or to one work request.
func (k Kind) Level() Level {
	switch k {
	case Delay, Drop, FailUnapplied, FailApplied:
		return LevelWorkRequest
	case FailPost, Break:
		return LevelPost
	}
	return 0
}

// Fault is an Injector's decision.
type Fault struct {
	Kind  Kind
	Delay time.Duration // for Delay
}

// Level tells an Injector whether it is asked about a doorbell or a work request.
type Level uint8

const (
	// LevelPost: a Post (one doorbell). Only FailPost and Break apply.
	LevelPost Level = iota + 1
	// LevelWorkRequest: one work request of an accepted Post. Only Delay,
	// Drop, FailUnapplied and FailApplied apply.
	LevelWorkRequest
)

// Event describes what an Injector is asked about.
type Event struct {
	Level Level
	// QP numbers the device's queue pairs from 1 in creation order.
	QP uint64
	// Seq counts the device's events of this Level from 1: the nth Post, or
	// the nth work request. Posts rejected before injection (invalid batch,
	// full send queue, closed or broken) are not counted.
	Seq uint64
	// Batch is the number of work requests of the Post (both levels).
	Batch int
	// Op, RKey, Addr and Len describe the work request (LevelWorkRequest).
	Op   rdma.Opcode
	RKey uint32
	Addr uint64
	Len  int
}

// Injector decides the fault for each event. A fault whose Kind does not
// apply at the event's Level is ignored. Implementations must be safe for
// concurrent use (queue pairs post from their own goroutines) and must not
// call back into the Device.
type Injector interface {
	Inject(ev Event) Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(ev Event) Fault

// Inject calls f.
func (f InjectorFunc) Inject(ev Event) Fault { return f(ev) }

// NoFaults injects nothing; a Device wrapped with it is transparent.
var NoFaults Injector = InjectorFunc(func(Event) Fault { return Fault{} })

// Nth injects f on the nth event (from 1) of f's level on the device, and
// nothing else: Nth(3, Fault{Kind: Drop}) drops the third work request's
// completion, Nth(2, Fault{Kind: FailPost}) fails the second Post.
func Nth(n uint64, f Fault) Injector {
	return InjectorFunc(func(ev Event) Fault {
		if ev.Level == f.Kind.Level() && ev.Seq == n {
			return f
		}
		return Fault{}
	})
}

// When injects f on every event of f's level for which pred holds, for
// example on CAS to one address:
//
//	When(func(ev Event) bool { return ev.Op == rdma.OpCompareAndSwap && ev.Addr == lock }, Fault{Kind: Drop})
func When(pred func(Event) bool, f Fault) Injector {
	return InjectorFunc(func(ev Event) Fault {
		if ev.Level == f.Kind.Level() && pred(ev) {
			return f
		}
		return Fault{}
	})
}

// Chain asks each injector in turn and returns the first fault that is not None.
func Chain(injs ...Injector) Injector {
	return InjectorFunc(func(ev Event) Fault {
		for _, inj := range injs {
			if f := inj.Inject(ev); f.Kind != None {
				return f
			}
		}
		return Fault{}
	})
}

// Probabilities are Random's per-event fault probabilities. Per work request:
// Delay, Drop, FailUnapplied, FailApplied (at most one fault per work request;
// their sum must not exceed 1). Per Post: FailPost and Break (likewise).
type Probabilities struct {
	Delay         float64
	MinDelay      time.Duration // a delay is drawn uniformly from [MinDelay, MaxDelay]
	MaxDelay      time.Duration
	Drop          float64
	FailUnapplied float64
	FailApplied   float64
	FailPost      float64
	Break         float64
}

// Validate reports every problem at once.
func (p Probabilities) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"Delay", p.Delay}, {"Drop", p.Drop}, {"FailUnapplied", p.FailUnapplied}, {"FailApplied", p.FailApplied},
		{"FailPost", p.FailPost}, {"Break", p.Break}} {
		if !(f.v >= 0 && f.v <= 1) {
			errs = append(errs, fmt.Errorf("faulty: probability %s = %v, want 0..1", f.name, f.v))
		}
	}
	if s := p.Delay + p.Drop + p.FailUnapplied + p.FailApplied; s > 1 {
		errs = append(errs, fmt.Errorf("faulty: work-request fault probabilities sum to %v > 1", s))
	}
	if s := p.FailPost + p.Break; s > 1 {
		errs = append(errs, fmt.Errorf("faulty: post fault probabilities sum to %v > 1", s))
	}
	if p.MinDelay < 0 || p.MaxDelay < p.MinDelay {
		errs = append(errs, fmt.Errorf("faulty: delay range [%v, %v] is empty or negative", p.MinDelay, p.MaxDelay))
	}
	return errors.Join(errs...)
}

type random struct {
	mu  sync.Mutex
	rng *rand.Rand
	p   Probabilities
}

// Random returns an injector that draws faults from a PCG generator seeded
// with seed, with the given probabilities. For the same sequence of events it
// makes the same decisions; when several goroutines post at once, the order
// of events (and so which one gets a fault) depends on scheduling. It panics
// if p is invalid (see Probabilities.Validate).
func Random(seed uint64, p Probabilities) Injector {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return &random{rng: rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)), p: p}
}

func (r *random) Inject(ev Event) Fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.rng.Float64()
	p := &r.p
	switch ev.Level {
	case LevelPost:
		switch {
		case u < p.FailPost:
			return Fault{Kind: FailPost}
		case u < p.FailPost+p.Break:
			return Fault{Kind: Break}
		}
	case LevelWorkRequest:
		switch {
		case u < p.Delay:
			d := p.MinDelay
			if span := p.MaxDelay - p.MinDelay; span > 0 {
				d += time.Duration(r.rng.Int64N(int64(span) + 1))
			}
			return Fault{Kind: Delay, Delay: d}
		case u < p.Delay+p.Drop:
			return Fault{Kind: Drop}
		case u < p.Delay+p.Drop+p.FailUnapplied:
			return Fault{Kind: FailUnapplied}
		case u < p.Delay+p.Drop+p.FailUnapplied+p.FailApplied:
			return Fault{Kind: FailApplied}
		}
	}
	return Fault{}
}
