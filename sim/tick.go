package sim

import (
	"slices"
	"time"

	"github.com/aura-runtime/aura/bench"
)

// migration is a cohort whose ownership changed at a tick: its key groups
// are frozen (served by MN CAS) for Freeze + drain + Handoff.
type migration struct {
	kgs []uint64
}

func (s *sim) tick() error {
	wall := time.Now()
	migs, err := s.pol.tick(s.now)
	s.out.TickWall = append(s.out.TickWall, time.Since(wall))
	if err != nil {
		return err
	}
	// Expire finished migration windows.
	for kg, until := range s.frozen {
		if until <= s.now {
			delete(s.frozen, kg)
		}
	}
	if len(migs) > 0 {
		// The drain waits for the locks already granted on the cohort.
		held := map[uint64]int64{}
		for _, e := range s.locks {
			held[e.kg] = max(held[e.kg], e.release)
		}
		for _, m := range migs {
			drain := int64(0)
			for _, kg := range m.kgs {
				if r, ok := held[kg]; ok {
					drain = max(drain, r-s.now)
				}
			}
			window := int64(s.costs.Freeze) + drain + int64(s.costs.Handoff)
			for _, kg := range m.kgs {
				s.frozen[kg] = max(s.frozen[kg], s.now+window)
			}
			s.migrations++
			if s.now >= s.warmEnd {
				s.freezeHist.Record(uint64(window / 1000))
			}
		}
	}
	cohorts := s.pol.cohorts()
	s.out.Cohorts = append(s.out.Cohorts, cohorts)
	s.out.TickCNCommitted = append(s.out.TickCNCommitted, slices.Clone(s.tickCnt))
	sm := bench.Sample{TS: float64(s.now) / 1e9, Cohorts: cohorts, Migrations: s.migrations,
		CNTPS: make([]float64, len(s.tickCnt))}
	for i, n := range s.tickCnt {
		sm.CNTPS[i] = float64(n) / s.cfg.Tick.Seconds()
	}
	clear(s.tickCnt)
	d := s.c.sub(s.prev)
	s.prev = s.c
	sm.ThroughputTPS = float64(d.committed) / s.cfg.Tick.Seconds()
	if d.committed > 0 {
		sm.AtomicPerTxn = float64(d.cas+d.faa) / float64(d.committed)
		sm.RemoteLockOps = float64(d.rpc+d.mnCAS) / float64(d.committed)
	}
	if a, ok := s.pol.(*aura); ok {
		sm.Owners = bench.NextOwnerSample(s.res.Timeline, a.cur)
	}
	if l := d.local + d.rpc + d.mnCAS; l > 0 {
		sm.LocalHit = float64(d.local) / float64(l)
	}
	s.res.Timeline = append(s.res.Timeline, sm)
	return nil
}

// freeze serves kgs by MN CAS for Freeze + drain + Handoff (an eviction's
// window, not counted as a migration).
func (s *sim) freeze(kgs []uint64) {
	set := map[uint64]bool{}
	for _, kg := range kgs {
		set[kg] = true
	}
	drain := int64(0)
	for _, e := range s.locks {
		if set[e.kg] {
			drain = max(drain, e.release-s.now)
		}
	}
	until := s.now + int64(s.costs.Freeze) + drain + int64(s.costs.Handoff)
	for _, kg := range kgs {
		s.frozen[kg] = max(s.frozen[kg], until)
	}
}

func (s *sim) finish() {
	res := s.res
	t := s.c.sub(s.warm)
	res.DurationS = s.cfg.Duration.Seconds()
	res.Committed, res.Aborted, res.Failed = t.committed, t.aborted, t.failed
	if a := t.committed + t.aborted; a > 0 {
		res.AbortRate = float64(t.aborted) / float64(a)
	}
	res.ThroughputTPS = float64(t.committed) / s.cfg.Duration.Seconds()
	res.LatencyUs = bench.Latency{P50: s.lat.Quantile(0.5), P99: s.lat.Quantile(0.99)}
	res.Locks = bench.Locks{Total: t.local + t.rpc + t.mnCAS, Local: t.local, OwnerRPC: t.rpc, MNCAS: t.mnCAS}
	if t.committed > 0 {
		n := float64(t.committed)
		res.AtomicPerTxn = float64(t.cas+t.faa) / n
		res.OwnerRPCPer = float64(t.rpc) / n
		res.RemoteLockOps = float64(t.rpc+t.mnCAS) / n
	}
	if res.Locks.Total > 0 {
		res.LocalHit = float64(t.local) / float64(res.Locks.Total)
	}
	res.RDMA = bench.RDMA{Read: t.read, Write: t.write, CAS: t.cas, FAA: t.faa}
	// Cohorts over the run.
	warmTicks := int(s.cfg.Warmup / s.cfg.Tick)
	for i, n := range s.out.Cohorts {
		res.Cohorts.Max = max(res.Cohorts.Max, n)
		if i+1 > warmTicks && (i+1 == warmTicks+1 || n < res.Cohorts.MinAfterWarmup) {
			res.Cohorts.MinAfterWarmup = n
		}
	}
	res.Cohorts.Final = s.pol.cohorts()
	res.Migrations = bench.Migrations{Count: s.migrations, FreezeP99Us: s.freezeHist.Quantile(0.99)}
	res.Manifest = s.pol.manifest()
	for _, kind := range slices.Sorted(mapKeys(s.byType)) {
		ta := s.byType[kind]
		ts := &bench.TypeStats{Committed: ta.committed, Aborted: ta.aborted}
		if ta.committed > 0 {
			ts.AtomicPerTxn = float64(ta.atomics) / float64(ta.committed)
			ts.LocksPerTxn = float64(ta.locks) / float64(ta.committed)
			ts.LocksPerCommit = float64(ta.commitLocks) / float64(ta.committed)
		}
		res.ByType[kind] = ts
	}
	measured := float64(s.cfg.Duration)
	s.out.CNBusy = make([]float64, s.cfg.CNs)
	for i, b := range s.busy {
		s.out.CNBusy[i] = float64(b) / measured
	}
	s.out.CNCommitted = append([]uint64(nil), s.homeCnt...)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
