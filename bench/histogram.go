package bench

import (
	"math/bits"
	"sync"
)

// Histogram records latencies (or any non-negative quantity) in log-linear
// buckets: 16 sub-buckets per power of two, so a quantile is within about 6%
// of the exact value, in constant memory whatever the run length. It is safe
// for concurrent use; the zero value is ready.
type Histogram struct {
	mu     sync.Mutex
	counts [64 * 16]uint64
	total  uint64
}

func bucketOf(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 5 // v >> e is in [16, 32)
	return e*16 + int(v>>uint(e))
}

func bucketLow(b int) uint64 {
	if b < 32 {
		return uint64(b)
	}
	e := b/16 - 1
	return uint64(b-e*16) << uint(e)
}

// Record adds one value.
func (h *Histogram) Record(micros uint64) {
	h.mu.Lock()
	h.counts[bucketOf(micros)]++
	h.total++
	h.mu.Unlock()
}

// Quantile returns the lower bound of the bucket holding quantile q (0..1).
func (h *Histogram) Quantile(q float64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total-1))
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen > rank {
			return bucketLow(b)
		}
	}
	return 0
}
