package manifest

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// evolve returns a random successor of base: a later epoch, some fallback
// entries changed and the table maybe resized, some cohorts moved, reshaped
// or removed, some added.
func evolve(rng *rand.Rand, base *control.OwnerMap, nodes int, kgSpace uint64) *control.OwnerMap {
	next := base.Clone()
	next.Epoch += 1 + rng.Uint64N(3)
	for i := range next.Fallback {
		if rng.IntN(4) == 0 {
			next.Fallback[i] = uint8(rng.IntN(nodes))
		}
	}
	switch rng.IntN(4) {
	case 0:
		next.Fallback = next.Fallback[:rng.IntN(len(next.Fallback)+1)]
	case 1:
		for range rng.IntN(5) {
			o := uint8(rng.IntN(nodes))
			if rng.IntN(2) == 0 {
				o = control.Unowned
			}
			next.Fallback = append(next.Fallback, o)
		}
	}
	used := map[uint64]bool{}
	ids := map[uint64]bool{}
	for _, p := range next.Cohorts {
		ids[p.ID] = true
		for _, kg := range p.KeyGroups {
			used[kg] = true
		}
	}
	fresh := func() (uint64, bool) {
		for range 10 {
			if kg := rng.Uint64N(kgSpace); !used[kg] {
				used[kg] = true
				return kg, true
			}
		}
		return 0, false
	}
	kept := next.Cohorts[:0]
	for _, p := range next.Cohorts {
		switch rng.IntN(6) {
		case 0: // removed
			for _, kg := range p.KeyGroups {
				delete(used, kg)
			}
			continue
		case 1: // moved
			p.Owner = rng.IntN(nodes)
		case 2: // reshaped, maybe moved too
			if len(p.KeyGroups) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(p.KeyGroups))
				delete(used, p.KeyGroups[i])
				p.KeyGroups = slices.Delete(p.KeyGroups, i, i+1)
			}
			if kg, ok := fresh(); ok {
				p.KeyGroups = append(p.KeyGroups, kg)
				slices.Sort(p.KeyGroups)
			}
			if rng.IntN(2) == 0 {
				p.Owner = rng.IntN(nodes)
			}
		}
		kept = append(kept, p)
	}
	next.Cohorts = kept
	for range rng.IntN(4) {
		id := rng.Uint64N(1000)
		if ids[id] {
			continue
		}
		ids[id] = true
		p := control.Placement{Cohort: control.Cohort{ID: id}, Owner: rng.IntN(nodes)}
		for range rng.IntN(5) {
			if kg, ok := fresh(); ok {
				p.KeyGroups = append(p.KeyGroups, kg)
			}
		}
		slices.Sort(p.KeyGroups)
		next.Cohorts = append(next.Cohorts, p)
	}
	rng.Shuffle(len(next.Cohorts), func(a, b int) { next.Cohorts[a], next.Cohorts[b] = next.Cohorts[b], next.Cohorts[a] })
	if err := next.Validate(); err != nil {
		panic(err)
	}
	return next
}

func TestDeltaProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 2000 {
		nodes := 1 + rng.IntN(16)
		base := randomMap(rng, 30, 10, nodes, 20, 1000)
		var next *control.OwnerMap
		if i%5 == 0 {
			// An unrelated map: everything may change.
			next = randomMap(rng, 30, 10, nodes, 20, 1000)
			next.Epoch = base.Epoch + 1 + rng.Uint64N(100)
		} else {
			next = evolve(rng, base, nodes, 1000)
		}
		baseCopy := base.Clone()
		d, err := EncodeDelta(base, next, 0)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got, err := ApplyDelta(base, d, DecodeOptions{Nodes: nodes})
		if err != nil {
			t.Fatalf("case %d: %v\nbase %+v\nnext %+v", i, err, base, next)
		}
		if !Equal(got, next) {
			t.Fatalf("case %d: ApplyDelta(base, EncodeDelta(base, next)) ≠ next:\n got %+v\nwant %+v", i, got, next)
		}
		if !slices.IsSortedFunc(got.Cohorts, byID) {
			t.Fatalf("case %d: result not in id order", i)
		}
		if !Equal(base, baseCopy) || !slices.EqualFunc(base.Cohorts, baseCopy.Cohorts, func(a, b control.Placement) bool { return a.ID == b.ID }) {
			t.Fatalf("case %d: ApplyDelta modified its base", i)
		}
		// The result shares no memory with the base.
		for _, p := range got.Cohorts {
			if len(p.KeyGroups) > 0 {
				p.KeyGroups[0] = ^uint64(0)
			}
		}
		if !Equal(base, baseCopy) {
			t.Fatalf("case %d: the result aliases the base", i)
		}
	}
}

func TestDeltaIsSmallForAMigration(t *testing.T) {
	base := gridMap(10, 1024, 16, 8, 1024)
	next := base.Clone()
	next.Epoch++
	next.Cohorts[17].Owner = (next.Cohorts[17].Owner + 1) % 8
	d, err := EncodeDelta(base, next, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != deltaFixedSize+moveSize {
		t.Fatalf("one migration: %d-byte delta, want %d", len(d), deltaFixedSize+moveSize)
	}
	// An unchanged map (but for the epoch) is a delta of no changes.
	same := base.Clone()
	same.Epoch = 11
	if d, err = EncodeDelta(base, same, 0); err != nil || len(d) != deltaFixedSize {
		t.Fatalf("empty delta: %d bytes, %v", len(d), err)
	}
}

var goldenDelta = strings.Join([]string{
	"41555241",         // magic "AURA"
	"0300",             // manifest_version 3: delta
	"0900000000000000", // epoch 9
	"0000",             // reserved
	"0700000000000000", // base_epoch 7
	"04000000",         // num_warehouses 4
	"02000000",         // num_fallback_changes 2
	"01000000",         //   index 1
	"02",               //   → node 2
	"03000000",         //   index 3 (new)
	"01",               //   → node 1
	"01000000",         // num_upserts 1
	"0400000000000000", //   cohort_id 4
	"00",               //   owner_cn 0
	"0200",             //   num_kgs 2
	"0300000000000000", //   kg 3
	"0400000000000000", //   kg 4
	"01000000",         // num_moves 1
	"0201000000000000", //   cohort_id 0x0102
	"02",               //   owner_cn 2
	"01000000",         // num_removed 1
	"0100000000000000", //   cohort_id 1
}, "")

func goldenNext() *control.OwnerMap {
	return &control.OwnerMap{Epoch: 9, Fallback: []uint8{0, 2, control.Unowned, 1}, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 0x0102, KeyGroups: []uint64{5, 0x0A0B}}, Owner: 2},
		{Cohort: control.Cohort{ID: 4, KeyGroups: []uint64{3, 4}}, Owner: 0},
	}}
}

func TestGoldenDelta(t *testing.T) {
	d, err := EncodeDelta(goldenMap(), goldenNext(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(d); got != goldenDelta {
		t.Fatalf("delta encoding drifted:\n got %s\nwant %s", got, goldenDelta)
	}
	got, err := ApplyDelta(goldenMap(), d, DecodeOptions{})
	if err != nil || !Equal(got, goldenNext()) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestEncodeDeltaErrors(t *testing.T) {
	bad := &control.OwnerMap{Epoch: 9, Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1}}, {Cohort: control.Cohort{ID: 1}}}}
	for _, tc := range []struct {
		name       string
		base, next *control.OwnerMap
		maxBytes   int
		want       error
	}{
		{"nil base", nil, goldenNext(), 0, ErrInvalid},
		{"nil next", goldenMap(), nil, 0, ErrInvalid},
		{"same epoch", goldenMap(), goldenMap(), 0, ErrInvalid},
		{"older epoch", goldenNext(), goldenMap(), 0, ErrInvalid},
		{"invalid next", goldenMap(), bad, 0, ErrInvalid},
		{"invalid base", &control.OwnerMap{Cohorts: bad.Cohorts}, goldenNext(), 0, ErrInvalid},
		{"negative cap", goldenMap(), goldenNext(), -1, ErrInvalid},
		{"over the cap", goldenMap(), goldenNext(), 60, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeDelta(tc.base, tc.next, tc.maxBytes)
			if fe := wantFormatError(t, err, tc.want); fe.Op != "encode delta" {
				t.Fatalf("op %q", fe.Op)
			}
		})
	}
}

// deltaBytes assembles a delta from hex fields.
func deltaBytes(t *testing.T, fields ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(fields, ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestApplyDeltaErrors(t *testing.T) {
	good, _ := hex.DecodeString(goldenDelta)
	const hdr = "41555241" + "0300" + "0900000000000000" + "0000" + "0700000000000000"
	const none = "00000000"
	// Offsets into goldenDelta: base_epoch 16, num_warehouses 24, changes at
	// 32 (count 28), num_upserts 42, upsert 46, num_moves 73, move 77,
	// num_removed 86, removal 90, end 98.
	for _, tc := range []struct {
		name   string
		base   *control.OwnerMap
		delta  []byte
		opts   DecodeOptions
		want   error
		offset int
	}{
		{"nil base", nil, good, DecodeOptions{}, ErrBaseMismatch, -1},
		{"wrong base epoch", goldenNext(), good, DecodeOptions{}, ErrBaseMismatch, 16},
		{"full manifest", goldenMap(), mustEncode(t, goldenMap(), Version2), DecodeOptions{}, ErrWrongKind, 4},
		{"version 5", goldenMap(), patch(good, 4, 5), DecodeOptions{}, ErrUnsupportedVersion, 4},
		{"bad magic", goldenMap(), patch(good, 0, 'a'), DecodeOptions{}, ErrBadMagic, 0},
		{"reserved set", goldenMap(), patch(good, 15, 1), DecodeOptions{}, ErrInvalid, 14},
		{"epoch not above base", goldenMap(), patch(good, 6, 7), DecodeOptions{}, ErrInvalid, 6},
		{"over the cap", goldenMap(), good, DecodeOptions{MaxBytes: len(good) - 1}, ErrTooLarge, 0},
		{"trailing byte", goldenMap(), append(slices.Clone(good), 0), DecodeOptions{}, ErrTrailingBytes, 98},
		{"huge fallback table", goldenMap(), patch(good, 24, 0xFF, 0xFF, 0xFF, 0xFF), DecodeOptions{}, ErrTooLarge, 24},
		{"change count beyond the input", goldenMap(), patch(good, 28, 0xFF, 0xFF, 0xFF, 0x0F), DecodeOptions{}, ErrTruncated, 32},
		{"change index past the table", goldenMap(), patch(good, 37, 4), DecodeOptions{}, ErrInvalid, 37},
		{"changes out of order", goldenMap(), patch(good, 32, 3), DecodeOptions{}, ErrInvalid, 37},
		{"change owner beyond Nodes", goldenMap(), good, DecodeOptions{Nodes: 2}, ErrInvalid, 36},
		{"upsert count beyond the input", goldenMap(), patch(good, 42, 0xFF, 0xFF), DecodeOptions{}, ErrTruncated, 46},
		{"upsert key groups out of order", goldenMap(), patch(good, 65, 3), DecodeOptions{}, ErrInvalid, 65},
		{"upsert owner out of range", goldenMap(), patch(good, 54, 0xFF), DecodeOptions{}, ErrInvalid, 54},
		{"move count beyond the input", goldenMap(), patch(good, 73, 9), DecodeOptions{}, ErrTruncated, 77},
		{"move owner out of range", goldenMap(), patch(good, 85, 0xFF), DecodeOptions{}, ErrInvalid, 85},
		{"move of a cohort not in the base", goldenMap(), patch(good, 77, 9), DecodeOptions{}, ErrInvalid, 77},
		{"removal of a cohort not in the base", goldenMap(), patch(good, 90, 9), DecodeOptions{}, ErrInvalid, 90},
		{"removal count beyond the input", goldenMap(), patch(good, 86, 2), DecodeOptions{}, ErrTruncated, 90},
		{"cohort moved and removed", goldenMap(), deltaBytes(t, hdr, none, none, none,
			"01000000", "0100000000000000", "02", // move cohort 1
			"01000000", "0100000000000000"), // remove cohort 1
			DecodeOptions{}, ErrInvalid, 53},
		{"cohort upserted and moved", goldenMap(), deltaBytes(t, hdr, none, none,
			"01000000", "0100000000000000", "00", "0000", // upsert cohort 1, no kgs
			"01000000", "0100000000000000", "02", // move cohort 1
			none), DecodeOptions{}, ErrInvalid, 51},
		{"moves out of order", goldenMap(), deltaBytes(t, hdr, none, none, none,
			"02000000", "0201000000000000", "02", "0100000000000000", "01", none), DecodeOptions{}, ErrInvalid, 49},
		{"removals out of order", goldenMap(), deltaBytes(t, hdr, none, none, none, none,
			"02000000", "0201000000000000", "0100000000000000"), DecodeOptions{}, ErrInvalid, 52},
		{"upsert takes a key group a kept cohort has", goldenMap(), deltaBytes(t, hdr, none, none,
			"01000000", "0900000000000000", "00", "0100", "0300000000000000", // cohort 9 with kg 3, which cohort 1 keeps
			none, none), DecodeOptions{}, ErrInvalid, -1},
		{"result over the cap", goldenMap(), deltaBytes(t, hdr, "e8ff0000", none, none, none, none), DecodeOptions{MaxBytes: 1 << 16}, ErrTooLarge, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ApplyDelta(tc.base, tc.delta, tc.opts)
			if m != nil {
				t.Fatal("a map came with the error")
			}
			fe := wantFormatError(t, err, tc.want)
			if fe.Offset != tc.offset || fe.Op != "apply delta" {
				t.Fatalf("error %v: offset %d, want %d", err, fe.Offset, tc.offset)
			}
		})
	}
	// Every prefix of a valid delta is truncated.
	for n := range len(good) {
		_, err := ApplyDelta(goldenMap(), good[:n], DecodeOptions{})
		wantFormatError(t, err, ErrTruncated)
	}
	if _, err := ApplyDelta(goldenMap(), good, DecodeOptions{Nodes: -1}); err == nil {
		t.Fatal("invalid options accepted")
	}
}

func TestApplyDeltaExtendsFallbackWithUnowned(t *testing.T) {
	base := &control.OwnerMap{Epoch: 1, Fallback: []uint8{3}}
	next := &control.OwnerMap{Epoch: 2, Fallback: []uint8{3, control.Unowned, control.Unowned, 0}}
	d, err := EncodeDelta(base, next, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != deltaFixedSize+changeSize {
		t.Fatalf("%d bytes: only warehouse 3 should be listed", len(d))
	}
	got, err := ApplyDelta(base, d, DecodeOptions{})
	if err != nil || !Equal(got, next) {
		t.Fatalf("got %+v, %v", got, err)
	}
}
