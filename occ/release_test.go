package occ

import (
	"testing"

	"github.com/aura-runtime/aura/store"
)

// TestReleaseWord: a path's Release word is stored unless the path asked
// for 0 when the slot is left without the requested record.
func TestReleaseWord(t *testing.T) {
	const s = uint64(1)<<63 | 7 // a free owner sentinel
	present := store.Meta(0).NextMeta(true)
	for _, tc := range []struct {
		name   string
		e      lockEntry
		commit bool
		want   uint64
	}{
		{"no clear: kept", lockEntry{res: LockResult{Release: s}}, true, s},
		{"own record, abort", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, meta: present, ours: true}, false, s},
		{"own record, committed update", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, meta: present, ours: true, dirty: true, present: true}, true, s},
		{"committed delete", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, meta: present, ours: true, dirty: true}, true, 0},
		{"delete without clear", lockEntry{res: LockResult{Release: s}, meta: present, ours: true, dirty: true}, true, s},
		{"insert aborted", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, inserted: true, dirty: true, present: true}, false, 0},
		{"insert committed", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, inserted: true, dirty: true, present: true}, true, s},
		{"another record in the slot", lockEntry{res: LockResult{Release: s, ClearWhenEmpty: true}, meta: present}, false, 0},
	} {
		if got := tc.e.releaseWord(tc.commit); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
