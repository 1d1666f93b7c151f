package manifest

import "testing"

// benchmarks use the tutorial's typical map: 1024 cohorts × 16 key groups,
// 1024 warehouses (≈ 150 KB).

func BenchmarkEncode(b *testing.B) {
	m := gridMap(1, 1024, 16, 8, 1024)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		out, err := Encode(m, Version2, 0)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.SetBytes(int64(n))
}

func BenchmarkDecode(b *testing.B) {
	enc, err := Encode(gridMap(1, 1024, 16, 8, 1024), Version2, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, _, err := Decode(enc, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeInterleaved decodes a map whose cohorts' key group ranges
// overlap (key group k of cohort c is k·1024 + c), which takes the full
// duplicate check (a sort of every key group).
func BenchmarkDecodeInterleaved(b *testing.B) {
	m := gridMap(1, 1024, 16, 8, 1024)
	for c := range m.Cohorts {
		for k := range m.Cohorts[c].KeyGroups {
			m.Cohorts[c].KeyGroups[k] = uint64(k*1024 + c)
		}
	}
	enc, err := Encode(m, Version2, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, _, err := Decode(enc, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDelta encodes and applies a steady-state delta of the 1024 × 16
// map: 8 migrations.
func BenchmarkDelta(b *testing.B) {
	base := gridMap(1, 1024, 16, 8, 1024)
	next := base.Clone()
	next.Epoch++
	for i := range 8 {
		next.Cohorts[i*100].Owner = (next.Cohorts[i*100].Owner + 1) % 8
	}
	d, err := EncodeDelta(base, next, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeDelta(base, next, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ApplyDelta(base, d, DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
