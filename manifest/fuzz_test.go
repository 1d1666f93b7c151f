package manifest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aura-runtime/aura/control"
)

// FuzzDecode: Decode never panics; it fails only with a *FormatError; what it
// accepts is a valid map that re-encodes to the same bytes (a version 1
// reader's skipped section aside) and decodes again to an equal map. The
// seed corpus is testdata/fuzz/FuzzDecode (see TestFuzzCorpus).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mv := range []int{LatestVersion, Version1} {
			m, info, err := Decode(data, DecodeOptions{MaxVersion: mv})
			if err != nil {
				var fe *FormatError
				if !errors.As(err, &fe) || fe.Err == nil {
					t.Fatalf("error %v (%T) is not a *FormatError with a sentinel", err, err)
				}
				continue
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("decoded an invalid map: %v", err)
			}
			h, err := Peek(data)
			if err != nil || h.Version != info.Version || h.Epoch != m.Epoch {
				t.Fatalf("Peek %+v, %v disagrees with Decode %+v", h, err, info)
			}
			version := min(info.Version, mv)
			b, err := Encode(m, version, 0)
			if err != nil {
				t.Fatalf("decoded map does not encode: %v", err)
			}
			// Canonical, unless a version 1 reader read version 2 (whose
			// version field and skipped section it does not reproduce).
			if version == info.Version && !bytes.Equal(b, data) {
				t.Fatalf("not canonical: decoded %x, re-encoded %x", data, b)
			}
			again, _, err := Decode(b, DecodeOptions{MaxVersion: mv})
			if err != nil || !Equal(again, m) {
				t.Fatalf("re-encoding decodes to %+v, %v; want %+v", again, err, m)
			}
		}
	})
}

// FuzzApplyDelta: for any base (decoded from a full manifest) and any delta,
// ApplyDelta never panics, fails only with a *FormatError, and what it
// returns is a valid map at a later epoch that EncodeDelta/ApplyDelta and
// Encode/Decode reproduce. The seed corpus is testdata/fuzz/FuzzApplyDelta.
func FuzzApplyDelta(f *testing.F) {
	f.Fuzz(func(t *testing.T, baseBytes, delta []byte) {
		base, _, err := Decode(baseBytes, DecodeOptions{})
		if err != nil {
			return
		}
		baseCopy := base.Clone()
		got, err := ApplyDelta(base, delta, DecodeOptions{})
		if !Equal(base, baseCopy) {
			t.Fatal("ApplyDelta modified its base")
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Err == nil {
				t.Fatalf("error %v (%T) is not a *FormatError with a sentinel", err, err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("applied an invalid map: %v", err)
		}
		if got.Epoch <= base.Epoch {
			t.Fatalf("epoch went from %d to %d", base.Epoch, got.Epoch)
		}
		// A delta listing everything can be larger than the full manifest.
		const roomy = 4 * DefaultMaxBytes
		d, err := EncodeDelta(base, got, roomy)
		if err != nil {
			t.Fatalf("EncodeDelta(base, result): %v", err)
		}
		again, err := ApplyDelta(base, d, DecodeOptions{MaxBytes: roomy})
		if err != nil || !Equal(again, got) {
			t.Fatalf("re-encoded delta applies to %+v, %v; want %+v", again, err, got)
		}
		full, err := Encode(got, Version2, 0)
		if err != nil {
			t.Fatalf("result does not encode under the cap: %v", err)
		}
		if dec, _, err := Decode(full, DecodeOptions{}); err != nil || !Equal(dec, got) {
			t.Fatalf("result's full encoding decodes to %+v, %v", dec, err)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// TestFuzzCorpus keeps the committed seed corpora equal to what
// fuzzSeeds generates: valid encodings of every kind plus corruptions of
// them. Regenerate with go test ./manifest -run TestFuzzCorpus -update-corpus.
// Files the fuzzer added (regressions) are left alone.
func TestFuzzCorpus(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, args := range seeds {
			var buf bytes.Buffer
			buf.WriteString("go test fuzz v1\n")
			for _, a := range args {
				fmt.Fprintf(&buf, "[]byte(%q)\n", a)
			}
			path := filepath.Join(dir, "seed-"+name)
			if *updateCorpus {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(have, buf.Bytes()) {
				t.Errorf("%s is missing or stale; run go test ./manifest -run TestFuzzCorpus -update-corpus", path)
			}
		}
	}
}

// fuzzSeeds returns, per fuzz target, named argument lists.
func fuzzSeeds() map[string]map[string][][]byte {
	rng := rand.New(rand.NewPCG(42, 7))
	dec := map[string][][]byte{}
	add := func(name string, b []byte) { dec[name] = [][]byte{slices.Clone(b)} }
	var maps []*control.OwnerMap
	maps = append(maps, goldenMap(), &control.OwnerMap{}, gridMap(3, 8, 4, 4, 16))
	for range 5 {
		maps = append(maps, randomMap(rng, 8, 6, 8, 10, 200))
	}
	for i, m := range maps {
		for _, v := range []int{Version1, Version2} {
			b, err := Encode(m, v, 0)
			if err != nil {
				panic(err)
			}
			name := fmt.Sprintf("map%d-v%d", i, v)
			add(name, b)
			if len(b) > HeaderSize {
				add(name+"-cut", b[:HeaderSize+rng.IntN(len(b)-HeaderSize)])
				flipped := slices.Clone(b)
				flipped[HeaderSize+rng.IntN(len(b)-HeaderSize)] ^= 1 << rng.IntN(8)
				add(name+"-flip", flipped)
			}
			add(name+"-trailing", append(slices.Clone(b), 0))
		}
	}
	v2 := mustEncodeSeed(goldenMap(), Version2)
	add("empty", nil)
	add("magic-only", []byte(Magic))
	add("bad-magic", patch(v2, 0, 'X'))
	add("version-9", patch(v2, 4, 9))
	add("reserved", patch(v2, 14, 1))
	add("huge-warehouses", patch(v2, 16, 0xFF, 0xFF, 0xFF, 0xFF))
	add("huge-cohorts", patch(v2, 23, 0xFF, 0xFF, 0xFF, 0xFF))
	add("huge-kgs", patch(v2, 36, 0xFF, 0xFF))
	add("unsorted-cohorts", patch(v2, 27, 3, 2))
	add("owner-unowned", patch(v2, 35, 0xFF))

	app := map[string][][]byte{}
	pair := func(name string, base *control.OwnerMap, d []byte) {
		app[name] = [][]byte{mustEncodeSeed(base, Version2), slices.Clone(d)}
	}
	golden := mustDelta(goldenMap(), goldenNext())
	pair("golden", goldenMap(), golden)
	pair("golden-wrong-base", goldenNext(), golden)
	pair("golden-cut", goldenMap(), golden[:50])
	pair("golden-huge-fallback", goldenMap(), patch(golden, 24, 0xFF, 0xFF, 0xFF, 0xFF))
	pair("golden-full-manifest", goldenMap(), v2)
	for i := range 8 {
		base := randomMap(rng, 8, 6, 8, 10, 200)
		next := evolve(rng, base, 8, 200)
		d := mustDelta(base, next)
		name := fmt.Sprintf("evolve%d", i)
		pair(name, base, d)
		flipped := slices.Clone(d)
		flipped[HeaderSize+8+rng.IntN(len(d)-HeaderSize-8)] ^= 1 << rng.IntN(8)
		pair(name+"-flip", base, flipped)
	}
	return map[string]map[string][][]byte{"FuzzDecode": dec, "FuzzApplyDelta": app}
}

func mustEncodeSeed(m *control.OwnerMap, v int) []byte {
	b, err := Encode(m, v, 0)
	if err != nil {
		panic(err)
	}
	return b
}

func mustDelta(base, next *control.OwnerMap) []byte {
	d, err := EncodeDelta(base, next, 0)
	if err != nil {
		panic(err)
	}
	return d
}
