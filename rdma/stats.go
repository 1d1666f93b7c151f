package rdma

import "sync/atomic"

// Stats counts verbs. Counts are of completed work requests, successful or not,
// except Doorbells (one per Post) and the failure counts.
type Stats struct {
	Reads        uint64 // READ work requests completed
	Writes       uint64 // WRITE work requests completed
	CAS          uint64 // CAS work requests completed
	CASFailed    uint64 // CAS that completed successfully but found Value != Compare
	FAA          uint64 // FAA work requests completed
	BytesRead    uint64 // payload bytes of successful READs
	BytesWritten uint64 // payload bytes of successful WRITEs
	Doorbells    uint64 // Post calls that were accepted (batches rung)
	Errors       uint64 // completions with a status other than success
}

// Atomics is the number of remote atomics (CAS + FAA), the figure AURA reduces.
func (s Stats) Atomics() uint64 { return s.CAS + s.FAA }

// Verbs is the number of completed work requests of every kind.
func (s Stats) Verbs() uint64 { return s.Reads + s.Writes + s.CAS + s.FAA }

// Sub returns s − o, field by field: the counts between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Reads: s.Reads - o.Reads, Writes: s.Writes - o.Writes, CAS: s.CAS - o.CAS,
		CASFailed: s.CASFailed - o.CASFailed, FAA: s.FAA - o.FAA,
		BytesRead: s.BytesRead - o.BytesRead, BytesWritten: s.BytesWritten - o.BytesWritten,
		Doorbells: s.Doorbells - o.Doorbells, Errors: s.Errors - o.Errors,
	}
}

// Add returns s + o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Reads: s.Reads + o.Reads, Writes: s.Writes + o.Writes, CAS: s.CAS + o.CAS,
		CASFailed: s.CASFailed + o.CASFailed, FAA: s.FAA + o.FAA,
		BytesRead: s.BytesRead + o.BytesRead, BytesWritten: s.BytesWritten + o.BytesWritten,
		Doorbells: s.Doorbells + o.Doorbells, Errors: s.Errors + o.Errors,
	}
}

// Counters accumulates Stats from concurrent goroutines. A Counters may have a
// parent (a device's totals) that receives every increment too.
type Counters struct {
	reads, writes, cas, casFailed, faa atomic.Uint64
	bytesRead, bytesWritten            atomic.Uint64
	doorbells, errors                  atomic.Uint64
	parent                             *Counters
}

// NewCounters returns counters that also feed parent (which may be nil).
func NewCounters(parent *Counters) *Counters { return &Counters{parent: parent} }

// Doorbell counts one accepted Post.
func (c *Counters) Doorbell() {
	for ; c != nil; c = c.parent {
		c.doorbells.Add(1)
	}
}

// Record counts one completion of wr.
func (c *Counters) Record(wr *WorkRequest, comp Completion) {
	for ; c != nil; c = c.parent {
		switch wr.Op {
		case OpRead:
			c.reads.Add(1)
			if comp.Status == StatusSuccess {
				c.bytesRead.Add(uint64(len(wr.Local)))
			}
		case OpWrite:
			c.writes.Add(1)
			if comp.Status == StatusSuccess {
				c.bytesWritten.Add(uint64(len(wr.Local)))
			}
		case OpCompareAndSwap:
			c.cas.Add(1)
			if comp.Status == StatusSuccess && comp.Value != wr.Compare {
				c.casFailed.Add(1)
			}
		case OpFetchAndAdd:
			c.faa.Add(1)
		}
		if comp.Status != StatusSuccess {
			c.errors.Add(1)
		}
	}
}

// Snapshot reads the counters.
func (c *Counters) Snapshot() Stats {
	return Stats{
		Reads: c.reads.Load(), Writes: c.writes.Load(), CAS: c.cas.Load(),
		CASFailed: c.casFailed.Load(), FAA: c.faa.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(),
		Doorbells: c.doorbells.Load(), Errors: c.errors.Load(),
	}
}
