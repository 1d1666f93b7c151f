package plannerlease

import (
	"errors"
	"fmt"
)

// Config configures a Lease. DefaultConfig gives the defaults.
type Config struct {
	// Holder is this Lease's id in the word's high 32 bits: non-zero, and
	// different for every planner incarnation (NewHolder draws one at
	// random). It names the holder in logs and metrics too.
	Holder uint32
	// LeaseMicros is how long a contender waits, after first reading a
	// value, for it to stay unchanged before taking the word over. Default
	// 1 s: ten renewals of a live holder fit in it, and it is what a
	// planner failover adds.
	LeaseMicros int64
	// RenewMicros is how often the holder renews (and a contender reads).
	// Default 100 ms, the planner's tick. At most a quarter of
	// LeaseMicros, so that a holder renews several times within its
	// validity (LeaseMicros/2) and a slow renewal does not cost it.
	RenewMicros int64
}

// DefaultConfig returns the defaults for holder.
func DefaultConfig(holder uint32) Config {
	return Config{Holder: holder, LeaseMicros: 1_000_000, RenewMicros: 100_000}
}

// Validate reports every problem with the config.
func (c Config) Validate() error {
	var errs []error
	if c.Holder == 0 {
		errs = append(errs, errors.New("plannerlease: Holder must be non-zero"))
	}
	if c.LeaseMicros <= 0 {
		errs = append(errs, fmt.Errorf("plannerlease: LeaseMicros %d must be positive", c.LeaseMicros))
	}
	if c.RenewMicros <= 0 || c.RenewMicros > c.LeaseMicros/4 {
		errs = append(errs, fmt.Errorf("plannerlease: RenewMicros %d must be positive and at most LeaseMicros/4 (%d)",
			c.RenewMicros, c.LeaseMicros/4))
	}
	return errors.Join(errs...)
}

// ValidMicros is how long after sending a successful CAS the holder may
// act: half the lease (see the package doc's argument).
func (c Config) ValidMicros() int64 { return c.LeaseMicros / 2 }

// OpKind says what an Op does to the word.
type OpKind uint8

const (
	// OpRead reads the word (a fetch-and-add of zero on the memory node).
	OpRead OpKind = iota + 1
	// OpCAS compares the word with Compare and, if equal, stores Swap.
	OpCAS
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "read"
	case OpCAS:
		return "cas"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation on the word the caller runs and reports with Done.
type Op struct {
	Kind    OpKind
	Compare uint64
	Swap    uint64
	// SentMicros is the caller's clock when Tick issued the op: the
	// holder's validity counts from it, never from the answer.
	SentMicros int64
}

// Event is what a Done changed.
type Event uint8

const (
	// None: nothing a caller acts on.
	None Event = iota
	// Acquired: this Lease now holds the word (a takeover, not a renewal).
	Acquired
	// Deposed: this Lease held the word and another value replaced it; the
	// caller's state derived while holding is stale.
	Deposed
)

func (e Event) String() string {
	switch e {
	case None:
		return "none"
	case Acquired:
		return "acquired"
	case Deposed:
		return "deposed"
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// Word composes a word from its holder and counter.
func Word(holder, counter uint32) uint64 { return uint64(holder)<<32 | uint64(counter) }

// Released reports whether w was written by a holder's Release: holder 0
// with a non-zero counter. (A wiped word, 0:0, is not released: its holder
// may still believe in its lease.)
func Released(w uint64) bool {
	h, c := Split(w)
	return h == 0 && c != 0
}

// Split returns a word's holder and counter.
func Split(w uint64) (holder, counter uint32) { return uint32(w >> 32), uint32(w) }

// next is the value this Lease's CAS writes over w: one above both w's
// counter and the last counter it issued, so that its values never recur
// in the word, even after the word was wiped (only this Lease writes its
// id; the package doc has why that matters).
func (l *Lease) next(w uint64) uint64 {
	_, c := Split(w)
	c = max(c, l.lastCounter) + 1
	l.lastCounter = c
	return Word(l.cfg.Holder, c)
}

// Lease is one planner's view of the lease word. Not safe for concurrent
// use: the planner actor owns it.
type Lease struct {
	cfg Config
	// holding: cur is the value this Lease last wrote and saw land, and
	// renewedAt when it sent that CAS.
	holding   bool
	cur       uint64
	renewedAt int64
	// acquiredAt is when the CAS that took the word over was sent (0:
	// never held).
	acquiredAt int64
	// contending: seen is the last value read and seenAt when the answer
	// with it arrived (known false: nothing read yet).
	known  bool
	seen   uint64
	seenAt int64
	// uncertain is the value of a CAS of ours whose outcome is unknown (0:
	// none): finding it in the word later means the CAS landed.
	uncertain uint64
	inflight  bool
	// lastCounter is the counter of the last CAS issued.
	lastCounter uint32
	lastOp      int64 // when the last op was issued
	issued      bool  // an op was ever issued
	stats       Stats
}

// Stats counts a Lease's work.
type Stats struct {
	Reads, CASes, Failures uint64 // ops issued; ops that failed (err)
	Acquired, Deposed      uint64 // events
}

// New returns a contending Lease.
func New(cfg Config) (*Lease, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Lease{cfg: cfg}, nil
}

// Config returns the Lease's config.
func (l *Lease) Config() Config { return l.cfg }

// Tick returns the op to run now, if any: at most one is in flight, and at
// most one is issued every RenewMicros (the first at once).
func (l *Lease) Tick(now int64) (Op, bool) {
	if l.inflight {
		return Op{}, false
	}
	if l.issued && now-l.lastOp < l.cfg.RenewMicros {
		return Op{}, false
	}
	var op Op
	switch {
	case l.holding:
		op = Op{Kind: OpCAS, Compare: l.cur, Swap: l.next(l.cur)}
	case l.known && (now-l.seenAt >= l.cfg.LeaseMicros || Released(l.seen)):
		op = Op{Kind: OpCAS, Compare: l.seen, Swap: l.next(l.seen)}
	default:
		op = Op{Kind: OpRead}
	}
	op.SentMicros = now
	l.inflight, l.issued, l.lastOp = true, true, now
	if op.Kind == OpRead {
		l.stats.Reads++
	} else {
		l.stats.CASes++
	}
	return op, true
}

// Done reports op's outcome: old is the word's value before op (what the
// memory node returned), err non-nil if the outcome is unknown; now is the
// caller's clock when the answer arrived.
func (l *Lease) Done(op Op, old uint64, err error, now int64) Event {
	l.inflight = false
	if op.Kind == OpCAS && Released(op.Swap) {
		// A Release: this Lease is a contender whatever happened.
		switch {
		case err != nil:
			l.stats.Failures++
		case old == op.Compare:
			l.seen, l.seenAt = op.Swap, now
		default:
			l.seen, l.seenAt = old, now
		}
		return None
	}
	if err != nil {
		l.stats.Failures++
		if op.Kind == OpCAS {
			l.uncertain = op.Swap
		}
		return None
	}
	if op.Kind == OpCAS && old == op.Compare {
		l.uncertain = 0
		l.cur, l.renewedAt = op.Swap, op.SentMicros
		if !l.holding {
			l.holding, l.acquiredAt, l.known = true, op.SentMicros, false
			l.stats.Acquired++
			return Acquired
		}
		return None
	}
	// A read, or a CAS that found another value.
	if l.uncertain != 0 && old == l.uncertain {
		// Our CAS of unknown outcome landed: the word is ours. Validity
		// still counts from the last CAS known to have landed; as a
		// contender, the takeover's send time is not known either, so
		// validity starts with the next renewal.
		l.uncertain = 0
		if l.holding {
			l.cur = old
			return None
		}
		l.holding, l.cur, l.renewedAt, l.acquiredAt, l.known = true, old, -l.cfg.LeaseMicros, now, false
		l.lastOp = now - l.cfg.RenewMicros // renew at the next Tick
		l.stats.Acquired++
		return Acquired
	}
	if l.holding {
		l.holding, l.uncertain = false, 0
		l.known, l.seen, l.seenAt = true, old, now
		l.stats.Deposed++
		return Deposed
	}
	if !l.known || old != l.seen {
		l.known, l.seen, l.seenAt = true, old, now
	}
	return None
}

// Release returns the CAS that gives the word up, if this Lease holds it:
// the caller runs it (and reports it with Done) only once it has stopped
// acting for good, since a contender that reads the released value takes
// the word at once. It ends this Lease's validity at once, whatever the
// outcome; a release that does not land costs the next holder a lease.
func (l *Lease) Release(now int64) (Op, bool) {
	if !l.holding || l.inflight {
		return Op{}, false
	}
	_, c := Split(l.cur)
	c = max(c, l.lastCounter) + 1
	if c == 0 {
		c = 1 // 0:0 is a wiped word, not a released one
	}
	l.lastCounter = c
	l.holding, l.known, l.seen, l.seenAt = false, true, l.cur, now
	l.inflight = true
	l.stats.CASes++
	return Op{Kind: OpCAS, Compare: l.cur, Swap: Word(0, c), SentMicros: now}, true
}

// Valid reports whether this Lease may act as the planner at now.
func (l *Lease) Valid(now int64) bool {
	return l.holding && now < l.renewedAt+l.cfg.ValidMicros()
}

// Holding reports whether this Lease holds the word (valid or not: a
// holder whose renewals do not land stays the holder until another value
// is seen).
func (l *Lease) Holding() bool { return l.holding }

// AcquiredAt is when the CAS that took the word over was sent; leases
// granted by a previous holder are counted from it.
func (l *Lease) AcquiredAt() int64 { return l.acquiredAt }

// Seen returns the last value the Lease knows the word held: its own while
// holding, the last one read otherwise (false: none yet).
func (l *Lease) Seen() (uint64, bool) {
	if l.holding {
		return l.cur, true
	}
	return l.seen, l.known
}

// Stats returns the Lease's counters.
func (l *Lease) Stats() Stats { return l.stats }
