package accessgraph

import (
	"errors"
	"fmt"
	"math"

	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// Summary schema versions Profiler.Summary can emit (AccessSummary.version).
const (
	// SummaryV1 carries untyped edges (AccessSummary.edges) whose weight is
	// ww + AlphaWR·wr.
	SummaryV1 = 1
	// SummaryV2 carries typed edges (AccessSummary.typed_edges).
	SummaryV2 = 2
)

// ProfilerConfig configures a Profiler. Start from DefaultProfilerConfig.
type ProfilerConfig struct {
	// Node is the CN's membership name, copied into every summary. Default
	// "" (must be set before Summary is sent to a Graph, which rejects an
	// empty name).
	Node string
	// NodeIndex is the CN's index in the OwnerMap numbering (owner_cn),
	// copied into every summary and used for the home counts. Must be below
	// control.MaxNodes. Default 0.
	NodeIndex uint32
	// SampleEvery is the mean sampling interval: one committed transaction
	// in SampleEvery is recorded (gaps drawn uniformly from
	// [1, 2·SampleEvery−1] by an xorshift generator, so the rate is exact on
	// average and cannot alias with periodic workloads such as a client
	// cycling through transaction types). 1 records every transaction.
	// Default 8: Record then costs ~15–40 ns per transaction amortised (a
	// sampled TPC-C transaction is a copy of its 14 key groups into a
	// buffer), and the per-window aggregation in Summary ~0.1 µs per sampled
	// pair (~90 per TPC-C transaction); a 100 ms window at 10k txn/s per CN
	// still holds ~125 samples and the planner's EWMA (λ = 0.95, ~20
	// windows of memory) averages ~2,500. MaxSamplesPerWindow raises the
	// interval at higher rates.
	SampleEvery uint32
	// MaxSamplesPerWindow bounds the transactions sampled per window: each
	// Summary sets the next window's mean interval to
	// max(SampleEvery, ⌈total/MaxSamplesPerWindow⌉) from the window just
	// closed, so a CN running faster samples more sparsely. This bounds the
	// profiler's CPU per window, the summary's size and the planner's
	// ingest (about 90 pair updates per sampled TPC-C transaction) whatever
	// the throughput, and costs nothing in bias (weights are scaled by each
	// window's own total/sampled). 0 disables the bound. Default 256: over
	// the planner's EWMA memory (~20 windows) that is ~5,000 samples per CN,
	// and the planner ingests ≤ ~16,000 edge updates per CN per tick. With
	// many CNs (64 in the simulator) a smaller bound keeps the planner's
	// ingest, N_CN · MaxSamplesPerWindow · ~60 pairs, within its tick.
	MaxSamplesPerWindow int
	// Seed seeds the sampling generator; two profilers with the same seed and
	// input produce the same summaries. 0 is replaced by a fixed constant.
	// Default 1.
	Seed uint64
	// MaxPairKGs caps the distinct key groups of one transaction that take
	// part in edges: the first MaxPairKGs distinct written key groups, then
	// read key groups while room remains. At 32, one transaction adds at most
	// 32·31/2 = 496 pairs. Every key group still gets its node weight (up to
	// 65,535 written and 65,535 read per transaction); only edges beyond the
	// cap are dropped, so a huge transaction (a scan, a bulk
	// load) cannot glue hundreds of key groups into one cohort nor blow up
	// the window's edge table. Default 32 (TPC-C NewOrder writes ≤ ~20).
	MaxPairKGs int
	// MaxNodes caps the distinct key groups tracked in one window. When the
	// table is full, key groups first seen later in the window are not
	// tracked (their weights and edges are dropped and counted in
	// ProfilerStats.DroppedNodes). Entries are never evicted within a window:
	// a hot key group is, in expectation, among the first seen, and every
	// window starts empty, so a key group missed in one window is counted in
	// the next. Default 65,536 (1.5 MB of tables).
	MaxNodes int
	// MaxEdges caps the distinct edges kept in one window. Pairs are
	// aggregated in batches (see MaxBufferedKGs); when a batch leaves more
	// than MaxEdges distinct edges, the lightest (by ww + AlphaWR·wr) are
	// dropped and counted in ProfilerStats.DroppedEdges, so the heavy
	// structure survives a flood of one-off pairs. Default 131,072 (2 MB).
	MaxEdges int
	// MaxBufferedKGs is the capacity, in key group ids, of the buffer that
	// holds sampled transactions until their pairs are aggregated. Record
	// only appends ids (sequential writes); Summary sorts and counts the
	// pairs (a radix sort, sequential memory access). If the buffer fills
	// within a window, the Record call that finds it full aggregates it
	// (a pause of ~10 ns per pair: ~2 ms for a full default buffer of TPC-C
	// transactions). Default 32,768 (128 KB, ~2,000 sampled TPC-C
	// transactions: a 100 ms window at 1 in 8 fills it only above ~160k
	// txn/s on the CN). Scratch for the sort is at most 16 B per pair, ≤
	// MaxPairKGs/2 pairs per buffered id.
	MaxBufferedKGs int
	// MaxSummaryEdges caps the edges one summary carries: when more are
	// tracked, only the heaviest (by ww + AlphaWR·wr) are sent and the rest
	// are counted in ProfilerStats.TrimmedEdges. A typed edge costs ~30 bytes
	// on the wire, so the default 65,536 keeps a summary under ~2 MB, below
	// the 4 MB gRPC default. Default 65,536.
	MaxSummaryEdges int
	// AlphaWR weighs write–read edges against write–write ones when they are
	// folded into one weight: the v1 edge weight and the ranking for
	// MaxSummaryEdges. Default 0.3 (SPEC §5): a read takes no lock under OCC,
	// so co-reading matters less than co-writing for lock ownership.
	AlphaWR float64
	// WindowMicros is copied into AccessSummary.window_micros: the length of
	// the window one Summary call closes. Default 100,000 (the planner tick).
	WindowMicros uint64
	// EmitHomes adds AccessSummary.homes: for each key group, the estimated
	// number of transactions touching it that were homed on this CN. A
	// profiler only sees the transactions executed on its own CN, so these
	// counts equal write_weight + read_weight and the planner derives
	// P(home(v)=i) from the node weights when homes are absent; the field
	// costs NodeIndex+1 varints per key group. Default false.
	EmitHomes bool
}

// DefaultProfilerConfig returns the defaults documented on ProfilerConfig.
func DefaultProfilerConfig() ProfilerConfig {
	return ProfilerConfig{
		SampleEvery:         8,
		MaxSamplesPerWindow: 256,
		Seed:                1,
		MaxPairKGs:          32,
		MaxNodes:            1 << 16,
		MaxEdges:            1 << 17,
		MaxBufferedKGs:      1 << 15,
		MaxSummaryEdges:     1 << 16,
		AlphaWR:             0.3,
		WindowMicros:        100_000,
	}
}

// Validate reports every invalid field.
func (c ProfilerConfig) Validate() error {
	var errs []error
	if c.NodeIndex >= control.MaxNodes {
		errs = append(errs, fmt.Errorf("NodeIndex %d must be below %d", c.NodeIndex, control.MaxNodes))
	}
	if c.SampleEvery < 1 || c.SampleEvery > 1<<20 {
		errs = append(errs, fmt.Errorf("SampleEvery %d must be in [1, %d]", c.SampleEvery, 1<<20))
	}
	if c.MaxSamplesPerWindow < 0 {
		errs = append(errs, fmt.Errorf("MaxSamplesPerWindow %d must not be negative", c.MaxSamplesPerWindow))
	}
	if c.MaxPairKGs < 2 || c.MaxPairKGs > 1024 {
		errs = append(errs, fmt.Errorf("MaxPairKGs %d must be in [2, 1024]", c.MaxPairKGs))
	}
	if c.MaxNodes < 1 || c.MaxNodes > 1<<26 {
		errs = append(errs, fmt.Errorf("MaxNodes %d must be in [1, %d]", c.MaxNodes, 1<<26))
	}
	if c.MaxEdges < 1 || c.MaxEdges > 1<<26 {
		errs = append(errs, fmt.Errorf("MaxEdges %d must be in [1, %d]", c.MaxEdges, 1<<26))
	}
	if c.MaxBufferedKGs < c.MaxPairKGs+2 || c.MaxBufferedKGs > 1<<24 {
		errs = append(errs, fmt.Errorf("MaxBufferedKGs %d must be in [MaxPairKGs+2, %d]", c.MaxBufferedKGs, 1<<24))
	}
	if c.MaxSummaryEdges < 0 {
		errs = append(errs, fmt.Errorf("MaxSummaryEdges %d must not be negative", c.MaxSummaryEdges))
	}
	if !(c.AlphaWR >= 0 && c.AlphaWR <= 1) {
		errs = append(errs, fmt.Errorf("AlphaWR %v must be in [0, 1]", c.AlphaWR))
	}
	if len(errs) > 0 {
		return fmt.Errorf("accessgraph: invalid profiler config: %w", errors.Join(errs...))
	}
	return nil
}

// LockCounts are lock acquisitions by path (AccessSummary.locks).
type LockCounts struct {
	// Local counts locks granted by this CN's own owner table.
	Local uint64
	// OwnerRPC counts locks granted by a remote owner over owner RPC.
	OwnerRPC uint64
	// MNCAS counts locks taken by MN CAS (once per lock).
	MNCAS uint64
	// MNCASFailed counts failed MN CAS verbs.
	MNCASFailed uint64
	// Redirected counts fallback CAS that met an owner sentinel.
	Redirected uint64
}

// ProfilerStats are a profiler's lifetime counters.
type ProfilerStats struct {
	// Txns and Sampled count recorded and sampled transactions.
	Txns, Sampled uint64
	// DroppedNodes counts key group occurrences not tracked because the
	// window's node table was full (MaxNodes).
	DroppedNodes uint64
	// DroppedEdges counts edge increments not tracked because the window's
	// edge table was full (MaxEdges).
	DroppedEdges uint64
	// TruncatedTxns counts sampled transactions with more than MaxPairKGs
	// distinct key groups.
	TruncatedTxns uint64
	// TrimmedEdges counts tracked edges left out of summaries by
	// MaxSummaryEdges.
	TrimmedEdges uint64
	// Summaries counts Summary calls.
	Summaries uint64
}

const golden = 0x9E3779B97F4A7C15

// maxTxnKGs bounds the written and the read key groups Record looks at in
// one transaction (the buffer header stores each count in 16 bits); the
// rest are ignored and the transaction counts as truncated.
const maxTxnKGs = 1<<16 - 1

type nodeSlot struct {
	kg uint64
	id uint32 // dense id + 1; 0 = empty
}

type edgeSlot struct {
	key    uint64 // lo<<32 | hi of dense ids, lo < hi
	ww, wr uint32
}

// Profiler is one CN's AccessGraphProfiler: it samples committed
// transactions into per-window counters and turns a window into an
// AccessSummary heartbeat. It is not safe for concurrent use; give each
// recording goroutine or actor its own profiler (summaries of several
// profilers of one CN may all be sent: the planner adds them up, provided
// each has its own Node name or they are merged by the caller).
//
// Memory is bounded by MaxNodes and MaxEdges (about 24 bytes per node slot
// and 16 per edge slot, tables doubling from small up to twice the cap);
// nothing in the hot path allocates once the tables have grown.
type Profiler struct {
	cfg ProfilerConfig

	total, sampled uint64 // this window
	countdown      uint32
	interval       uint32 // this window's mean sampling interval
	rng            uint64

	nodeIdx   []nodeSlot
	nodeShift uint
	kgs       []uint64
	wcnt      []uint32
	rcnt      []uint32
	fb        []uint64
	stamp     []uint32
	curStamp  uint32

	agg   []edgeSlot // the window's edges so far, sorted by key, unique
	runs  []edgeSlot // scratch: one batch's edges
	merge []edgeSlot // scratch: agg ∪ runs
	pairs []uint64   // scratch: one batch's pair keys
	tmp   []uint64   // scratch: radix sort

	buf []uint64 // sampled transactions awaiting flush (see flushRecords)

	locks                LockCounts
	queueDepth           uint64
	cpuLoad              float64
	memEpoch, ownerEpoch uint64

	stats ProfilerStats

	scratchW []float64
}

// NewProfiler returns a profiler, or the configuration's validation error.
func NewProfiler(cfg ProfilerConfig) (*Profiler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Profiler{cfg: cfg, rng: cfg.Seed, curStamp: 1, interval: cfg.SampleEvery}
	if p.rng == 0 {
		p.rng = 0x2545F4914F6CDD1D
	}
	p.initNodes(256)
	p.buf = make([]uint64, 0, cfg.MaxBufferedKGs)
	p.countdown = p.nextGap()
	return p, nil
}

// Config returns the profiler's configuration.
func (p *Profiler) Config() ProfilerConfig { return p.cfg }

// Stats returns the lifetime counters.
func (p *Profiler) Stats() ProfilerStats { return p.stats }

func (p *Profiler) nextGap() uint32 {
	s := p.interval
	if s <= 1 {
		return 1
	}
	// xorshift64*
	x := p.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	p.rng = x
	r := x * 0x2545F4914F6CDD1D
	return 1 + uint32((r>>32)%uint64(2*s-1))
}

// Record notes one committed transaction with its distinct written and read
// key groups (duplicates are ignored; a key group both written and read
// counts as written). Only one call in SampleEvery is sampled into the
// window; the others cost a counter decrement.
func (p *Profiler) Record(writes, reads []control.KeyGroup) {
	p.total++
	if p.countdown > 1 {
		p.countdown--
		return
	}
	p.countdown = p.nextGap()
	p.sample(writes, reads)
}

func (p *Profiler) sample(writes, reads []control.KeyGroup) {
	p.sampled++
	if len(writes) > maxTxnKGs || len(reads) > maxTxnKGs {
		p.stats.TruncatedTxns++
		writes, reads = writes[:min(len(writes), maxTxnKGs)], reads[:min(len(reads), maxTxnKGs)]
	}
	need := 1 + len(writes) + len(reads)
	if len(p.buf)+need > cap(p.buf) {
		p.flush()
		if need > cap(p.buf) { // a huge transaction: aggregate it on its own
			rec := make([]uint64, 0, need)
			rec = append(rec, uint64(len(writes))<<48|uint64(len(reads))<<32)
			rec = append(rec, writes...)
			rec = append(rec, reads...)
			p.flushRecords(rec)
			return
		}
	}
	// The hot path only copies: resolving ids, deduplicating, counting and
	// pairing happen in flush, off the transaction's path.
	p.buf = append(p.buf, uint64(len(writes))<<48|uint64(len(reads))<<32)
	p.buf = append(p.buf, writes...)
	p.buf = append(p.buf, reads...)
}

// flush aggregates the buffered sampled transactions.
func (p *Profiler) flush() {
	p.flushRecords(p.buf)
	p.buf = p.buf[:0]
}

// flushRecords aggregates records (header nw<<48 | nr<<32, then nw written
// and nr read key groups) into the node counters and p.agg: it resolves and
// deduplicates the key groups, expands the pairs into keys
// lo·2^(b+1) | hi·2 | isWR, radix-sorts them, counts the runs and merges
// the result into the window's sorted edges.
func (p *Profiler) flushRecords(b []uint64) {
	if len(b) == 0 {
		return
	}
	// Phase 1: resolve ids in place; the header's low 32 bits become the
	// number of written and read ids taking part in pairs (16 bits each).
	limit := p.cfg.MaxPairKGs
	for i := 0; i < len(b); {
		nw, nr := int(b[i]>>48), int(b[i]>>32&0xFFFF)
		rec := b[i+1 : i+1+nw+nr]
		p.curStamp++
		if p.curStamp == 0 { // wrapped: old stamps may collide
			clear(p.stamp)
			p.curStamp = 1
		}
		st := p.curStamp
		pw, pr := 0, 0
		truncated := false
		for k, kg := range rec {
			id, ok := p.nodeID(kg, true)
			if !ok || p.stamp[id] == st {
				continue
			}
			p.stamp[id] = st
			if k < nw {
				p.wcnt[id]++
				if pw < limit {
					rec[pw] = uint64(id)
					pw++
				} else {
					truncated = true
				}
			} else {
				p.rcnt[id]++
				if pw+pr < limit {
					rec[pw+pr] = uint64(id)
					pr++
				} else {
					truncated = true
				}
			}
		}
		if truncated {
			p.stats.TruncatedTxns++
		}
		if pw == 0 || pw+pr < 2 {
			pw, pr = 0, 0
		}
		b[i] = b[i]&^0xFFFFFFFF | uint64(pw)<<16 | uint64(pr)
		i += 1 + nw + nr
	}

	// Phase 2: pairs.
	bits := uint(log2(len(p.kgs)))
	if bits == 0 {
		bits = 1
	}
	pairs := p.pairs[:0]
	for i := 0; i < len(b); {
		nw, nr := int(b[i]>>48), int(b[i]>>32&0xFFFF)
		pw, pr := int(b[i]>>16&0xFFFF), int(b[i]&0xFFFF)
		wids := b[i+1 : i+1+pw]
		rids := b[i+1+pw : i+1+pw+pr]
		i += 1 + nw + nr
		for j, x := range wids {
			for _, y := range wids[j+1:] {
				lo, hi := min(x, y), max(x, y)
				pairs = append(pairs, (lo<<bits|hi)<<1)
			}
			for _, y := range rids {
				lo, hi := min(x, y), max(x, y)
				pairs = append(pairs, (lo<<bits|hi)<<1|1)
			}
		}
	}
	if cap(p.tmp) < len(pairs) {
		p.tmp = make([]uint64, len(pairs), cap(pairs))
	}
	sorted, other := radixSortFrom(pairs, p.tmp[:len(pairs)], 0, 2*bits+1)
	p.pairs, p.tmp = sorted[:0], other[:0]

	runs := p.runs[:0]
	mask := uint64(1)<<bits - 1
	for i := 0; i < len(sorted); {
		k := sorted[i] >> 1
		var ww, wr uint32
		for ; i < len(sorted) && sorted[i]>>1 == k; i++ {
			if sorted[i]&1 == 0 {
				ww++
			} else {
				wr++
			}
		}
		runs = append(runs, edgeSlot{key: (k>>bits)<<32 | k&mask, ww: ww, wr: wr})
	}
	if len(p.agg) == 0 {
		p.agg, runs = runs, p.agg
	} else {
		m := p.merge[:0]
		a := p.agg
		i, j := 0, 0
		for i < len(a) && j < len(runs) {
			switch {
			case a[i].key < runs[j].key:
				m = append(m, a[i])
				i++
			case a[i].key > runs[j].key:
				m = append(m, runs[j])
				j++
			default:
				m = append(m, edgeSlot{key: a[i].key, ww: a[i].ww + runs[j].ww, wr: a[i].wr + runs[j].wr})
				i++
				j++
			}
		}
		m = append(m, a[i:]...)
		m = append(m, runs[j:]...)
		p.merge, p.agg = a[:0], m
	}
	p.runs = runs[:0]
	if len(p.agg) > p.cfg.MaxEdges {
		p.stats.DroppedEdges += uint64(len(p.agg) - p.cfg.MaxEdges)
		p.agg = p.keepHeaviest(p.agg, p.cfg.MaxEdges)
	}
}

// keepHeaviest filters es in place to its keep heaviest entries (by
// ww + AlphaWR·wr; ties broken by position), preserving order.
func (p *Profiler) keepHeaviest(es []edgeSlot, keep int) []edgeSlot {
	if len(es) <= keep {
		return es
	}
	if keep <= 0 {
		return es[:0]
	}
	alpha := p.cfg.AlphaWR
	ws := p.scratchW[:0]
	for _, e := range es {
		ws = append(ws, float64(e.ww)+alpha*float64(e.wr))
	}
	p.scratchW = ws
	threshold := KthLargest(ws, keep)
	above := 0
	for _, e := range es {
		if float64(e.ww)+alpha*float64(e.wr) > threshold {
			above++
		}
	}
	ties := keep - above
	j := 0
	for _, e := range es {
		w := float64(e.ww) + alpha*float64(e.wr)
		if w < threshold {
			continue
		}
		if w == threshold {
			if ties == 0 {
				continue
			}
			ties--
		}
		es[j] = e
		j++
	}
	return es[:j]
}

// RecordLocks adds one transaction's (or any batch's) lock acquisitions by
// path, and the key groups of the locks taken by MN CAS, one entry per lock.
// Unlike Record it is not sampled: lock counts are exact, and the per key
// group fallback count costs one table lookup per MN CAS (an RDMA round trip
// dwarfs it). Key groups that do not fit the node table are counted in the
// totals only.
func (p *Profiler) RecordLocks(c LockCounts, fallbackKGs []control.KeyGroup) {
	p.locks.Local += c.Local
	p.locks.OwnerRPC += c.OwnerRPC
	p.locks.MNCAS += c.MNCAS
	p.locks.MNCASFailed += c.MNCASFailed
	p.locks.Redirected += c.Redirected
	for _, kg := range fallbackKGs {
		if id, ok := p.nodeID(kg, true); ok {
			p.fb[id]++
		}
	}
}

// SetLoad records the queue depth and CPU load reported by the next
// Summary. Non-finite or negative CPU loads are reported as 0.
func (p *Profiler) SetLoad(queueDepth uint64, cpuLoad float64) {
	if !(cpuLoad >= 0) || math.IsInf(cpuLoad, 0) {
		cpuLoad = 0
	}
	p.queueDepth, p.cpuLoad = queueDepth, cpuLoad
}

// SetEpochs records the membership and OwnerMap epochs reported by the next
// Summary.
func (p *Profiler) SetEpochs(membership, ownerMap uint64) {
	p.memEpoch, p.ownerEpoch = membership, ownerMap
}

// Interval returns the open window's mean sampling interval.
func (p *Profiler) Interval() uint32 { return p.interval }

// Window returns the transactions recorded and sampled in the open window.
func (p *Profiler) Window() (total, sampled uint64) { return p.total, p.sampled }

// Summary closes the window: it returns the window's AccessSummary with
// weights scaled by total/sampled (unbiased estimates of the full counts)
// and resets the window (counters, tables, lock counts; the load and epochs
// set by SetLoad and SetEpochs are kept). version is SummaryV1 (untyped
// edges, weight ww + AlphaWR·wr) or SummaryV2 (typed edges); any other value
// panics. The output depends only on the configuration and the calls made,
// so it is deterministic.
func (p *Profiler) Summary(tick uint64, version int) *messages.AccessSummary {
	if version != SummaryV1 && version != SummaryV2 {
		panic(fmt.Sprintf("accessgraph: Summary version %d (want %d or %d)", version, SummaryV1, SummaryV2))
	}
	p.flush()
	p.stats.Summaries++
	p.stats.Txns += p.total
	p.stats.Sampled += p.sampled
	// est scales a sample count to an estimate of the full count
	// (multiplying first, so that divisible cases are exact).
	tot, smp := float64(p.total), float64(max(p.sampled, 1))
	est := func(c float64) float64 { return c * tot / smp }
	s := &messages.AccessSummary{
		Version:         uint32(version),
		Node:            p.cfg.Node,
		MembershipEpoch: p.memEpoch,
		Tick:            tick,
		WindowMicros:    p.cfg.WindowMicros,
		SampledTxns:     p.sampled,
		TotalTxns:       p.total,
		QueueDepth:      p.queueDepth,
		CpuLoad:         p.cpuLoad,
		OwnermapEpoch:   p.ownerEpoch,
		NodeIndex:       p.cfg.NodeIndex,
	}

	// Nodes (and homes).
	n := 0
	for id := range p.kgs {
		if p.wcnt[id] != 0 || p.rcnt[id] != 0 {
			n++
		}
	}
	if n > 0 {
		nodes := make([]messages.NodeWeight, n)
		s.Nodes = make([]*messages.NodeWeight, n)
		var homes []messages.KgHome
		var counts []uint64
		if p.cfg.EmitHomes {
			homes = make([]messages.KgHome, n)
			s.Homes = make([]*messages.KgHome, n)
			counts = make([]uint64, n*(int(p.cfg.NodeIndex)+1))
		}
		j := 0
		for id, kg := range p.kgs {
			w, r := p.wcnt[id], p.rcnt[id]
			if w == 0 && r == 0 {
				continue
			}
			nw := &nodes[j]
			nw.Kg = kg
			nw.WriteWeight = est(float64(w))
			nw.ReadWeight = est(float64(r))
			s.Nodes[j] = nw
			if homes != nil {
				k := int(p.cfg.NodeIndex) + 1
				hc := counts[j*k : (j+1)*k : (j+1)*k]
				hc[k-1] = uint64(math.Round(est(float64(w + r))))
				homes[j].Kg = kg
				homes[j].HomeCounts = hc
				s.Homes[j] = &homes[j]
			}
			j++
		}
	}

	// Edges, the heaviest MaxSummaryEdges, in (lo, hi) id order.
	if len(p.agg) > 0 {
		alpha := p.cfg.AlphaWR
		dense := p.agg
		if keep := p.cfg.MaxSummaryEdges; len(dense) > keep {
			p.stats.TrimmedEdges += uint64(len(dense) - keep)
			dense = p.keepHeaviest(dense, keep)
		}
		ends := func(e edgeSlot) (uint64, uint64) {
			a, b := p.kgs[e.key>>32], p.kgs[uint32(e.key)]
			if a > b {
				a, b = b, a
			}
			return a, b
		}
		if n := len(dense); n > 0 && version == SummaryV1 {
			edges := make([]messages.Edge, n)
			s.Edges = make([]*messages.Edge, n)
			for i, e := range dense {
				a, b := ends(e)
				edges[i] = messages.Edge{A: a, B: b, Weight: est(float64(e.ww) + alpha*float64(e.wr))}
				s.Edges[i] = &edges[i]
			}
		} else if n > 0 {
			edges := make([]messages.TypedEdge, n)
			s.TypedEdges = make([]*messages.TypedEdge, n)
			for i, e := range dense {
				a, b := ends(e)
				edges[i] = messages.TypedEdge{A: a, B: b, Ww: est(float64(e.ww)), Wr: est(float64(e.wr))}
				s.TypedEdges[i] = &edges[i]
			}
		}
	}

	// Locks.
	ls := &messages.LockStats{
		Local:       p.locks.Local,
		OwnerRpc:    p.locks.OwnerRPC,
		MnCas:       p.locks.MNCAS,
		MnCasFailed: p.locks.MNCASFailed,
		Redirected:  p.locks.Redirected,
	}
	nfb := 0
	for _, c := range p.fb {
		if c != 0 {
			nfb++
		}
	}
	if nfb > 0 {
		kc := make([]messages.KgCount, nfb)
		ls.FallbackCas = make([]*messages.KgCount, nfb)
		j := 0
		for id, c := range p.fb {
			if c != 0 {
				kc[j] = messages.KgCount{Kg: p.kgs[id], Count: c}
				ls.FallbackCas[j] = &kc[j]
				j++
			}
		}
	}
	s.Locks = ls

	p.resetWindow()
	return s
}

func (p *Profiler) resetWindow() {
	if m := uint64(p.cfg.MaxSamplesPerWindow); m > 0 {
		iv := max(uint64(p.cfg.SampleEvery), (p.total+m-1)/m)
		p.interval = uint32(min(iv, 1<<20))
		if p.countdown > p.interval {
			p.countdown = p.nextGap()
		}
	}
	p.total, p.sampled = 0, 0
	p.locks = LockCounts{}
	clear(p.nodeIdx)
	p.kgs = p.kgs[:0]
	p.wcnt = p.wcnt[:0]
	p.rcnt = p.rcnt[:0]
	p.fb = p.fb[:0]
	p.stamp = p.stamp[:0]
	p.agg = p.agg[:0]
	p.buf = p.buf[:0]
}

// nodeID returns the window's dense id of kg, inserting it when insert is
// set and the table has room.
func (p *Profiler) nodeID(kg uint64, insert bool) (uint32, bool) {
	mask := uint64(len(p.nodeIdx) - 1)
	h := (kg * golden) >> p.nodeShift
	for {
		s := &p.nodeIdx[h]
		if s.id == 0 {
			break
		}
		if s.kg == kg {
			return s.id - 1, true
		}
		h = (h + 1) & mask
	}
	if !insert {
		return 0, false
	}
	if len(p.kgs) >= p.cfg.MaxNodes {
		p.stats.DroppedNodes++
		return 0, false
	}
	if 2*(len(p.kgs)+1) > len(p.nodeIdx) {
		p.initNodes(2 * len(p.nodeIdx))
		return p.nodeID(kg, insert)
	}
	id := uint32(len(p.kgs))
	p.kgs = append(p.kgs, kg)
	p.wcnt = append(p.wcnt, 0)
	p.rcnt = append(p.rcnt, 0)
	p.fb = append(p.fb, 0)
	p.stamp = append(p.stamp, 0)
	p.nodeIdx[h] = nodeSlot{kg: kg, id: id + 1}
	return id, true
}

// initNodes (re)builds the node index with size slots (a power of two).
func (p *Profiler) initNodes(size int) {
	p.nodeIdx = make([]nodeSlot, size)
	p.nodeShift = uint(64 - log2(size))
	mask := uint64(size - 1)
	for id, kg := range p.kgs {
		h := (kg * golden) >> p.nodeShift
		for p.nodeIdx[h].id != 0 {
			h = (h + 1) & mask
		}
		p.nodeIdx[h] = nodeSlot{kg: kg, id: uint32(id) + 1}
	}
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

// KthLargest returns the k-th largest value of vs (1 ≤ k ≤ len(vs)),
// reordering vs.
func KthLargest(vs []float64, k int) float64 {
	lo, hi := 0, len(vs)-1
	target := k - 1
	for lo < hi {
		// median of three, descending partition
		mid := lo + (hi-lo)/2
		a, b, c := vs[lo], vs[mid], vs[hi]
		pivot := b
		if (a >= b) == (b >= c) {
			pivot = b
		} else if (b >= a) == (a >= c) {
			pivot = a
		} else {
			pivot = c
		}
		i, j := lo, hi
		for i <= j {
			for vs[i] > pivot {
				i++
			}
			for vs[j] < pivot {
				j--
			}
			if i <= j {
				vs[i], vs[j] = vs[j], vs[i]
				i++
				j--
			}
		}
		switch {
		case target <= j:
			hi = j
		case target >= i:
			lo = i
		default:
			return vs[target]
		}
	}
	return vs[target]
}
