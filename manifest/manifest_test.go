package manifest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// goldenMap is the small map of the golden tests. Its cohorts are listed out
// of id order on purpose: the encoding sorts them.
func goldenMap() *control.OwnerMap {
	return &control.OwnerMap{Epoch: 7, Fallback: []uint8{0, 1, control.Unowned}, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 0x0102, KeyGroups: []uint64{5, 0x0A0B}}, Owner: 1},
		{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{3}}, Owner: 0},
	}}
}

// The golden encodings, field by field. A change here is a wire format
// change: it needs a new manifest_version, not an edit of these strings.
var (
	goldenV1 = strings.Join([]string{
		"41555241",         // magic "AURA"
		"0100",             // manifest_version 1
		"0700000000000000", // epoch 7
		"0000",             // reserved
		"03000000",         // num_warehouses 3
		"0001ff",           // owners: 0, 1, unowned
	}, "")
	goldenV2 = strings.Join([]string{
		"41555241",         // magic "AURA"
		"0200",             // manifest_version 2
		"0700000000000000", // epoch 7
		"0000",             // reserved
		"03000000",         // num_warehouses 3
		"0001ff",           // owners: 0, 1, unowned
		"02000000",         // num_cohorts 2
		"0100000000000000", // cohort_id 1
		"00",               //   owner_cn 0
		"0100",             //   num_kgs 1
		"0300000000000000", //   kg 3
		"0201000000000000", // cohort_id 0x0102
		"01",               //   owner_cn 1
		"0200",             //   num_kgs 2
		"0500000000000000", //   kg 5
		"0b0a000000000000", //   kg 0x0a0b
	}, "")
)

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		version int
		hex     string
	}{{Version1, goldenV1}, {Version2, goldenV2}} {
		b := mustEncode(t, goldenMap(), tc.version)
		if got := hex.EncodeToString(b); got != tc.hex {
			t.Errorf("v%d encoding drifted:\n got %s\nwant %s", tc.version, got, tc.hex)
		}
		if len(b) != Size(goldenMap(), tc.version) {
			t.Errorf("v%d: Size %d, encoding %d bytes", tc.version, Size(goldenMap(), tc.version), len(b))
		}
		want, _ := hex.DecodeString(tc.hex)
		m, info, err := Decode(want, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exp := goldenMap()
		if tc.version == Version1 {
			exp.Cohorts = nil
		}
		if !Equal(m, exp) {
			t.Errorf("v%d decoded %+v, want %+v", tc.version, m, exp)
		}
		if info.Version != tc.version || info.Epoch != 7 || info.Bytes != len(want) || info.Skipped != 0 {
			t.Errorf("v%d info %+v", tc.version, info)
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		m := randomMap(rng, 40, 20, 1+rng.IntN(control.MaxNodes), 64, 2000)
		for _, v := range []int{Version1, Version2} {
			b, err := Encode(m, v, 0)
			if err != nil {
				t.Fatalf("map %d v%d: %v", i, v, err)
			}
			got, info, err := Decode(b, DecodeOptions{})
			if err != nil {
				t.Fatalf("map %d v%d: %v", i, v, err)
			}
			want := m
			if v == Version1 {
				want = &control.OwnerMap{Epoch: m.Epoch, Fallback: m.Fallback}
			}
			if !Equal(got, want) {
				t.Fatalf("map %d v%d: round trip changed the map:\n got %+v\nwant %+v", i, v, got, want)
			}
			if !slices.IsSortedFunc(got.Cohorts, byID) {
				t.Fatalf("map %d: decoded cohorts not in id order", i)
			}
			if info.Cohorts != len(got.Cohorts) {
				t.Fatalf("map %d: info.Cohorts %d, decoded %d", i, info.Cohorts, len(got.Cohorts))
			}
			// Canonical: the decoded map (in id order) re-encodes to the same
			// bytes, and so does any permutation of the input's cohorts.
			if again := mustEncode(t, got, v); !bytes.Equal(again, b) {
				t.Fatalf("map %d v%d: re-encoding differs", i, v)
			}
			shuffled := m.Clone()
			rng.Shuffle(len(shuffled.Cohorts), func(a, b int) {
				shuffled.Cohorts[a], shuffled.Cohorts[b] = shuffled.Cohorts[b], shuffled.Cohorts[a]
			})
			if again := mustEncode(t, shuffled, v); !bytes.Equal(again, b) {
				t.Fatalf("map %d v%d: encoding depends on cohort order", i, v)
			}
		}
	}
}

func TestEncodeDoesNotModifyInput(t *testing.T) {
	m := goldenMap()
	before := m.Clone()
	mustEncode(t, m, Version2)
	if m.Cohorts[0].ID != before.Cohorts[0].ID || !Equal(m, before) {
		t.Fatal("Encode modified its input")
	}
}

func TestDecodedMapDoesNotAliasInput(t *testing.T) {
	b := mustEncode(t, goldenMap(), Version2)
	m, _, err := Decode(b, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xEE
	}
	if !Equal(m, goldenMap()) {
		t.Fatal("decoded map changed with its input bytes")
	}
}

func TestCrossVersion(t *testing.T) {
	m := goldenMap()
	v1, v2 := mustEncode(t, m, Version1), mustEncode(t, m, Version2)
	fallbackOnly := &control.OwnerMap{Epoch: m.Epoch, Fallback: m.Fallback}

	t.Run("v1 reader given v2 reads the fallback and skips the rest", func(t *testing.T) {
		got, info, err := Decode(v2, DecodeOptions{MaxVersion: Version1})
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(got, fallbackOnly) {
			t.Fatalf("got %+v, want %+v", got, fallbackOnly)
		}
		if info.Version != Version2 || info.Skipped != len(v2)-len(v1) {
			t.Fatalf("info %+v: want version 2, %d bytes skipped", info, len(v2)-len(v1))
		}
		// The skipped section is not the v1 reader's to check.
		garbage := append(slices.Clone(v2[:len(v1)]), 0xDE, 0xAD)
		if _, _, err := Decode(garbage, DecodeOptions{MaxVersion: Version1}); err != nil {
			t.Fatalf("v1 reader checked a section it does not know: %v", err)
		}
	})
	t.Run("v2 reader given v1 uses the fallback only", func(t *testing.T) {
		got, info, err := Decode(v1, DecodeOptions{MaxVersion: Version2})
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(got, fallbackOnly) || got.Cohorts != nil {
			t.Fatalf("got %+v, want %+v", got, fallbackOnly)
		}
		if info.Version != Version1 || info.Skipped != 0 {
			t.Fatalf("info %+v", info)
		}
	})
	t.Run("v1 reader given v1", func(t *testing.T) {
		got, _, err := Decode(v1, DecodeOptions{MaxVersion: Version1})
		if err != nil || !Equal(got, fallbackOnly) {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("no reader decodes a delta", func(t *testing.T) {
		d, err := EncodeDelta(m, &control.OwnerMap{Epoch: 8}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, mv := range []int{0, Version1, Version2} {
			_, _, err := Decode(d, DecodeOptions{MaxVersion: mv})
			wantFormatError(t, err, ErrWrongKind)
		}
	})
}

func TestSizes(t *testing.T) {
	// The tutorial's typical map, 1024 cohorts × 64 key groups, with a
	// 1024-warehouse fallback table: well under the 900 KiB cap.
	m := gridMap(1, 1024, 64, 8, 1024)
	b := mustEncode(t, m, Version2)
	const want = HeaderSize + 4 + 1024 + 4 + 1024*(cohortFixedSize+64*8)
	if len(b) != want || want != 536_600 {
		t.Fatalf("1024 × 64 map: %d bytes, want %d", len(b), want)
	}
	if len(b) > DefaultMaxBytes*6/10 {
		t.Fatalf("1024 × 64 map takes %d bytes, over 60%% of the %d cap", len(b), DefaultMaxBytes)
	}
	// 1024 × 16 is the tutorial's "~150 KB typical".
	if n := len(mustEncode(t, gridMap(1, 1024, 16, 8, 1024), Version2)); n < 130_000 || n > 160_000 {
		t.Fatalf("1024 × 16 map: %d bytes", n)
	}
	// The tutorial's full expansion: 9 tables × 1024 buckets, one key group
	// per cohort (seed 001 §3).
	full := gridMap(1, 9216, 1, 8, 1024)
	b = mustEncode(t, full, Version2)
	if len(b) != HeaderSize+4+1024+4+9216*(cohortFixedSize+8) {
		t.Fatalf("9216 × 1 map: %d bytes", len(b))
	}
	if got, _, err := Decode(b, DecodeOptions{}); err != nil || !Equal(got, full) {
		t.Fatalf("9216 × 1 map did not round-trip: %v", err)
	}
	// The cap is a real limit: 1024 × 128 does not fit by default.
	_, err := Encode(gridMap(1, 1024, 128, 8, 0), Version2, 0)
	wantFormatError(t, err, ErrTooLarge)
}

func TestCap(t *testing.T) {
	m := goldenMap()
	b := mustEncode(t, m, Version2)
	if _, err := Encode(m, Version2, len(b)); err != nil {
		t.Fatalf("encoding of exactly the cap refused: %v", err)
	}
	_, err := Encode(m, Version2, len(b)-1)
	wantFormatError(t, err, ErrTooLarge)
	if _, _, err := Decode(b, DecodeOptions{MaxBytes: len(b)}); err != nil {
		t.Fatalf("input of exactly the cap refused: %v", err)
	}
	_, _, err = Decode(b, DecodeOptions{MaxBytes: len(b) - 1})
	fe := wantFormatError(t, err, ErrTooLarge)
	if fe.Offset != 0 {
		t.Fatalf("offset %d", fe.Offset)
	}
	// The default cap applies to input bigger than it, whatever it holds.
	_, _, err = Decode(make([]byte, DefaultMaxBytes+1), DecodeOptions{})
	wantFormatError(t, err, ErrTooLarge)
}

func TestEncodeErrors(t *testing.T) {
	big := make([]uint64, MaxCohortKeyGroups+1)
	for i := range big {
		big[i] = uint64(i)
	}
	for _, tc := range []struct {
		name     string
		m        *control.OwnerMap
		version  int
		maxBytes int
		want     error
	}{
		{"nil map", nil, Version2, 0, ErrInvalid},
		{"version 0", goldenMap(), 0, 0, ErrUnsupportedVersion},
		{"delta version", goldenMap(), VersionDelta, 0, ErrUnsupportedVersion},
		{"negative cap", goldenMap(), Version2, -1, ErrInvalid},
		{"owner out of range", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1}, Owner: control.MaxNodes}}}, Version2, 0, ErrInvalid},
		{"negative owner", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1}, Owner: -1}}}, Version2, 0, ErrInvalid},
		{"duplicate cohort", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1}}, {Cohort: control.Cohort{ID: 1}}}}, Version2, 0, ErrInvalid},
		{"key group in two cohorts", &control.OwnerMap{Cohorts: []control.Placement{
			{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{1, 5, 9}}},
			{Cohort: control.Cohort{ID: 2, KeyGroups: []uint64{2, 9}}, Owner: 1},
		}}, Version2, 0, ErrInvalid},
		{"unsorted key groups", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{2, 1}}}}}, Version2, 0, ErrInvalid},
		{"repeated key group", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{2, 2}}}}}, Version2, 0, ErrInvalid},
		{"65536 key groups", &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: big}}}}, Version2, 0, ErrTooManyKeyGroups},
		{"over the cap", goldenMap(), Version2, 20, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.m, tc.version, tc.maxBytes)
			fe := wantFormatError(t, err, tc.want)
			if fe.Op != "encode" || fe.Offset != -1 {
				t.Fatalf("error %+v", fe)
			}
		})
	}
	// 65535 key groups is the most that fits, and it round-trips.
	m := &control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1, KeyGroups: big[:MaxCohortKeyGroups]}}}}
	b := mustEncode(t, m, Version2)
	if got, _, err := Decode(b, DecodeOptions{}); err != nil || !Equal(got, m) {
		t.Fatalf("65535-kg cohort: %v", err)
	}
	// Version 1 carries no cohorts, so it does not check them.
	if _, err := Encode(&control.OwnerMap{Cohorts: []control.Placement{{Cohort: control.Cohort{ID: 1}, Owner: 300}}}, Version1, 0); err != nil {
		t.Fatalf("v1 encoding checked cohorts it leaves out: %v", err)
	}
}

// patch returns a copy of b with b[off:] overwritten by p.
func patch(b []byte, off int, p ...byte) []byte {
	out := slices.Clone(b)
	copy(out[off:], p)
	return out
}

func TestDecodeErrors(t *testing.T) {
	v2 := mustEncode(t, goldenMap(), Version2)
	// Offsets into goldenV2: header 0–15, num_warehouses 16, owners 20–22,
	// num_cohorts 23, cohort 1 at 27 (owner 35, num_kgs 36, kg 38), cohort
	// 0x0102 at 46 (owner 54, num_kgs 55, kgs 57 and 65), end 73.
	overlapping := &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 1, KeyGroups: []uint64{1, 5}}},
		{Cohort: control.Cohort{ID: 2, KeyGroups: []uint64{2, 6}}, Owner: 1},
	}}
	dupKG := mustEncode(t, overlapping, Version2)
	dupKG = patch(dupKG, 24+cohortFixedSize+16+cohortFixedSize+8, 5) // cohort 2's second kg: 6 → 5

	for _, tc := range []struct {
		name   string
		b      []byte
		opts   DecodeOptions
		want   error
		offset int
	}{
		{"empty", nil, DecodeOptions{}, ErrTruncated, 0},
		{"prefix of the magic", []byte("AUR"), DecodeOptions{}, ErrTruncated, 0},
		{"short garbage", []byte("xy"), DecodeOptions{}, ErrBadMagic, 0},
		{"bad magic", patch(v2, 0, 'A', 'U', 'R', 'O'), DecodeOptions{}, ErrBadMagic, 0},
		{"header cut", v2[:15], DecodeOptions{}, ErrTruncated, 0},
		{"version 0", patch(v2, 4, 0, 0), DecodeOptions{}, ErrUnsupportedVersion, 4},
		{"version 4", patch(v2, 4, 4, 0), DecodeOptions{}, ErrUnsupportedVersion, 4},
		{"version 0x0100", patch(v2, 4, 0, 1), DecodeOptions{}, ErrUnsupportedVersion, 4},
		{"reserved set", patch(v2, 14, 0, 1), DecodeOptions{}, ErrInvalid, 14},
		{"num_warehouses beyond the input", patch(v2, 16, 0xFF, 0xFF, 0xFF, 0xFF), DecodeOptions{}, ErrTruncated, 20},
		{"fallback owner beyond Nodes", v2, DecodeOptions{Nodes: 1}, ErrInvalid, 21},
		{"num_cohorts beyond the input", patch(v2, 23, 0xFF, 0xFF, 0xFF, 0xFF), DecodeOptions{}, ErrTruncated, 27},
		{"num_cohorts one too many", patch(v2, 23, 3), DecodeOptions{}, ErrTruncated, 73},
		{"num_cohorts one too few", patch(v2, 23, 1), DecodeOptions{}, ErrTrailingBytes, 46},
		{"num_kgs beyond the input", patch(v2, 36, 0xFF, 0xFF), DecodeOptions{}, ErrTruncated, 38},
		{"owner unowned", patch(v2, 35, 0xFF), DecodeOptions{}, ErrInvalid, 35},
		{"owner beyond Nodes", patch(v2, 54, 2), DecodeOptions{Nodes: 2}, ErrInvalid, 54},
		{"cohorts out of order", patch(v2, 27, 0x03, 0x02), DecodeOptions{}, ErrInvalid, 46},
		{"cohort listed twice", patch(v2, 27, 0x02, 0x01), DecodeOptions{}, ErrInvalid, 46},
		{"key groups out of order", patch(v2, 65, 4, 0), DecodeOptions{}, ErrInvalid, 65},
		{"key group repeated in a cohort", patch(v2, 65, 5, 0), DecodeOptions{}, ErrInvalid, 65},
		{"key group in two cohorts", dupKG, DecodeOptions{}, ErrInvalid, -1},
		{"trailing byte", append(slices.Clone(v2), 0), DecodeOptions{}, ErrTrailingBytes, 73},
		{"v1 trailing byte", append(mustEncode(t, goldenMap(), Version1), 0), DecodeOptions{}, ErrTrailingBytes, 23},
		{"over the cap", v2, DecodeOptions{MaxBytes: 72}, ErrTooLarge, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, err := Decode(tc.b, tc.opts)
			if m != nil {
				t.Fatal("a map came with the error")
			}
			fe := wantFormatError(t, err, tc.want)
			if fe.Offset != tc.offset || fe.Op != "decode" {
				t.Fatalf("error %v: offset %d, want %d", err, fe.Offset, tc.offset)
			}
		})
	}
}

func TestEveryPrefixIsTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		m := randomMap(rng, 6, 5, 4, 6, 100)
		for _, v := range []int{Version1, Version2} {
			b := mustEncode(t, m, v)
			for n := range len(b) {
				_, _, err := Decode(b[:n], DecodeOptions{})
				wantFormatError(t, err, ErrTruncated)
			}
			_, _, err := Decode(append(slices.Clone(b), 1), DecodeOptions{})
			wantFormatError(t, err, ErrTrailingBytes)
		}
	}
}

func TestDecodeChecksCountsBeforeAllocating(t *testing.T) {
	// Headers claiming 2^32−1 warehouses, cohorts or key groups in a few
	// bytes fail without allocating what they claim.
	hdr := mustEncode(t, &control.OwnerMap{Epoch: 1}, Version2) // 24 bytes, no warehouses, no cohorts
	for _, b := range [][]byte{
		patch(hdr, 16, 0xFF, 0xFF, 0xFF, 0xFF),
		patch(hdr, 20, 0xFF, 0xFF, 0xFF, 0xFF),
		append(patch(hdr, 20, 1), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}...),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			if _, _, err := Decode(b, DecodeOptions{}); !errors.Is(err, ErrTruncated) {
				t.Fatalf("got %v", err)
			}
		}
		runtime.ReadMemStats(&after)
		if perRun := (after.TotalAlloc - before.TotalAlloc) / 100; perRun > 1024 {
			t.Fatalf("%d bytes allocated to refuse %x", perRun, b)
		}
	}
}

func TestDecodeOptionsValidate(t *testing.T) {
	if err := DefaultDecodeOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	err := DecodeOptions{MaxVersion: 3, MaxBytes: -1, Nodes: 256}.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("want three problems reported, got %v", err)
	}
	if _, _, err := Decode(mustEncode(t, goldenMap(), 2), DecodeOptions{MaxVersion: -1}); err == nil {
		t.Fatal("Decode accepted invalid options")
	}
}

func TestPeek(t *testing.T) {
	m := goldenMap()
	h, err := Peek(mustEncode(t, m, Version2))
	if err != nil || h != (Header{Version: 2, Epoch: 7}) || h.Delta() {
		t.Fatalf("peek v2: %+v, %v", h, err)
	}
	d, err := EncodeDelta(m, &control.OwnerMap{Epoch: 9}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err = Peek(d)
	if err != nil || h != (Header{Version: VersionDelta, Epoch: 9, BaseEpoch: 7}) || !h.Delta() {
		t.Fatalf("peek delta: %+v, %v", h, err)
	}
	_, err = Peek(d[:20])
	wantFormatError(t, err, ErrTruncated)
	_, err = Peek(patch(d, 4, 9))
	wantFormatError(t, err, ErrUnsupportedVersion)
	_, err = Peek([]byte("nope, not a manifest"))
	wantFormatError(t, err, ErrBadMagic)
}

func TestEqual(t *testing.T) {
	a := goldenMap()
	b := a.Clone()
	slices.Reverse(b.Cohorts)
	if !Equal(a, b) {
		t.Fatal("cohort order matters to Equal")
	}
	for name, mutate := range map[string]func(m *control.OwnerMap){
		"epoch":    func(m *control.OwnerMap) { m.Epoch++ },
		"fallback": func(m *control.OwnerMap) { m.Fallback[0] = 3 },
		"owner":    func(m *control.OwnerMap) { m.Cohorts[0].Owner = 3 },
		"kgs":      func(m *control.OwnerMap) { m.Cohorts[1].KeyGroups = append(m.Cohorts[1].KeyGroups, 99) },
		"id":       func(m *control.OwnerMap) { m.Cohorts[1].ID = 77 },
		"cohorts":  func(m *control.OwnerMap) { m.Cohorts = m.Cohorts[:1] },
	} {
		c := a.Clone()
		mutate(c)
		if Equal(a, c) {
			t.Errorf("%s change not seen", name)
		}
	}
	if !Equal(&control.OwnerMap{Fallback: []uint8{}}, &control.OwnerMap{}) || Equal(a, nil) || !Equal(nil, nil) {
		t.Fatal("nil handling")
	}
}
