package owner

import (
	"testing"

	"github.com/aura-runtime/aura/control"
)

// BenchmarkTableAcquireRelease measures the LOCAL path's table work for one
// lock: Acquire then Release of one key of an installed cohort (op = both).
//
//	go test ./actors/owner -run XXX -bench TableAcquireRelease
func BenchmarkTableAcquireRelease(b *testing.B) {
	t, err := NewTable(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	if err := t.Install(7, []control.KeyGroup{1, 2, 3}, 1); err != nil {
		b.Fatal(err)
	}
	keys := make([][]Key, 1024)
	for i := range keys {
		keys[i] = []Key{{Table: 1, Key: uint64(i)}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := keys[i%len(keys)]
		holder := Holder(i + 1)
		rep, err := t.Acquire(AcquireRequest{Cohort: 7, Epoch: 1, Holder: holder, Keys: k})
		if err != nil || rep.Status != StatusOK {
			b.Fatalf("acquire: %v %v", rep.Status, err)
		}
		if _, err := t.Release(ReleaseRequest{Cohort: 7, Epoch: 1, Holder: holder, Keys: k}); err != nil {
			b.Fatal(err)
		}
	}
}
