package bench

import "testing"

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for v := uint64(1); v <= 10000; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want uint64
	}{{0.5, 5000}, {0.99, 9900}, {0, 1}} {
		got := h.Quantile(c.q)
		if got > c.want || float64(got) < float64(c.want)*0.93 {
			t.Errorf("quantile(%v) = %d, want within 7%% below %d", c.q, got, c.want)
		}
	}
	for b := 16; b < 59*16; b++ {
		if bucketOf(bucketLow(b)) != b {
			t.Fatalf("bucket %d: low %d maps to %d", b, bucketLow(b), bucketOf(bucketLow(b)))
		}
	}
}
