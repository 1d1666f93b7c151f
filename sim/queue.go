package sim

// Event kinds.
const (
	evStart  uint8 = iota // a client starts an attempt (routing, CPU queue)
	evExec                // the attempt's CPU is done: locks, reads
	evCommit              // the attempt's commit writes completed
	evTick                // planner tick and timeline sample
	evWarm                // end of the warm-up
	evDrift               // workload drift
)

type event struct {
	t    int64 // virtual time, ns
	seq  uint64
	kind uint8
	c    int32 // client, for client events
}

func (a event) less(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// queue is a binary min-heap of events keyed by (t, seq).
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) push(t int64, kind uint8, c int32) {
	q.seq++
	q.h = append(q.h, event{t: t, seq: q.seq, kind: kind, c: c})
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].less(q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) len() int { return len(q.h) }

func (q *queue) top() event { return q.h[0] }

func (q *queue) pop() event {
	e := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.h[l].less(q.h[m]) {
			m = l
		}
		if r < n && q.h[r].less(q.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return e
}
