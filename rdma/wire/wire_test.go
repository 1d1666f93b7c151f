package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/rdma"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// randBytes returns n random bytes, nil when n is 0 (the decoded form).
func randBytes(rng *rand.Rand, n int) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randName(rng *rand.Rand, max int) string {
	return string(randBytes(rng, rng.IntN(max+1)))
}

func randLen(rng *rand.Rand) int {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return 8
	case 2:
		return rng.IntN(100)
	}
	return rng.IntN(4096)
}

// randRequest returns a random valid request in decoded (canonical) form.
func randRequest(rng *rand.Rand) Request {
	r := Request{ID: rng.Uint64()}
	switch rng.IntN(4) {
	case 0:
		r.Kind, r.Magic, r.Version = KindHello, rng.Uint32(), uint16(rng.Uint32())
		if rng.IntN(2) == 0 {
			r.Token = []byte(randName(rng, MaxTokenLen))
			if len(r.Token) == 0 {
				r.Token = nil // an empty token is not encoded
			}
		}
	case 1:
		r.Kind, r.Name, r.Length = KindRegister, randName(rng, rdma.MaxRegionNameLen), rng.Uint64()
	case 2:
		r.Kind = KindListRegions
	case 3:
		r.Kind = KindBatch
		n := rng.IntN(20)
		if rng.IntN(10) == 0 {
			n = rdma.MaxBatch
		}
		for range n {
			w := WorkRequest{Op: rdma.Opcode(1 + rng.IntN(4)), RKey: rng.Uint32(), RemoteAddr: rng.Uint64()}
			switch w.Op {
			case rdma.OpRead:
				w.ReadLen = uint32(randLen(rng))
			case rdma.OpWrite:
				w.Data = randBytes(rng, randLen(rng))
			case rdma.OpCompareAndSwap:
				w.Compare, w.Swap = rng.Uint64(), rng.Uint64()
			case rdma.OpFetchAndAdd:
				w.Add = rng.Uint64()
			}
			r.WRs = append(r.WRs, w)
		}
	}
	return r
}

func randRegion(rng *rand.Rand) rdma.Region {
	return rdma.Region{Name: randName(rng, rdma.MaxRegionNameLen), RKey: rng.Uint32(), Addr: rng.Uint64(), Length: rng.Uint64()}
}

// randResponse returns a random valid response in decoded (canonical) form.
func randResponse(rng *rand.Rand) Response {
	r := Response{ID: rng.Uint64()}
	switch rng.IntN(5) {
	case 0:
		r.Kind = KindHelloOK
		r.Hello = Limits{Version: uint16(rng.Uint32()), MaxFrameSize: rng.Uint32(), MaxInFlight: rng.Uint32(),
			MaxBatch: rng.Uint32(), MaxBatchBytes: rng.Uint32(), MaxTransferBytes: rng.Uint32(),
			Capacity: rng.Uint64(), MaxRegions: rng.Uint32()}
	case 1:
		r.Kind, r.Region = KindRegion, randRegion(rng)
	case 2:
		r.Kind = KindRegions
		for range rng.IntN(10) {
			r.Regions = append(r.Regions, randRegion(rng))
		}
	case 3:
		r.Kind = KindBatchResult
		for range rng.IntN(20) {
			res := Result{Op: rdma.Opcode(1 + rng.IntN(4)), Status: rdma.Status(rng.IntN(6))}
			if rng.IntN(2) == 0 {
				res.Status = rdma.StatusSuccess
			}
			value, data := resultCarries(res.Op, res.Status)
			if value {
				res.Value = rng.Uint64()
			}
			if data {
				res.Data = randBytes(rng, 1+randLen(rng))
			}
			r.Results = append(r.Results, res)
		}
	case 4:
		r.Kind, r.Err = KindError, NewError(Code(rng.IntN(12)), randName(rng, 100))
	}
	return r
}

// TestRoundTrip is the property encode → decode = identity, on random values.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var req Request
	var resp Response
	for i := range 3000 {
		want := randRequest(rng)
		b, err := AppendRequest([]byte("junk"), &want)
		if err != nil {
			t.Fatalf("request %d: encode: %v", i, err)
		}
		if len(b)-4 != RequestSize(&want) {
			t.Fatalf("request %d: RequestSize = %d, encoded %d", i, RequestSize(&want), len(b)-4)
		}
		if err := DecodeRequest(b[4:], &req); err != nil {
			t.Fatalf("request %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(normReq(req), normReq(want)) {
			t.Fatalf("request %d: round trip:\n got %+v\nwant %+v", i, req, want)
		}

		wantR := randResponse(rng)
		b, err = AppendResponse(nil, &wantR)
		if err != nil {
			t.Fatalf("response %d: encode: %v", i, err)
		}
		if len(b) != ResponseSize(&wantR) {
			t.Fatalf("response %d: ResponseSize = %d, encoded %d", i, ResponseSize(&wantR), len(b))
		}
		if err := DecodeResponse(b, &resp); err != nil {
			t.Fatalf("response %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(normResp(resp), normResp(wantR)) {
			t.Fatalf("response %d: round trip:\n got %+v\nwant %+v", i, resp, wantR)
		}
	}
}

// normReq and normResp treat nil and empty slices alike (decoders reuse storage).
func normReq(r Request) Request {
	if len(r.WRs) == 0 {
		r.WRs = nil
	}
	return r
}

func normResp(r Response) Response {
	if len(r.Regions) == 0 {
		r.Regions = nil
	}
	if len(r.Results) == 0 {
		r.Results = nil
	}
	return r
}

func TestMaxBatchFits(t *testing.T) {
	// The largest legal batch: MaxBatch CAS work requests would be largest per
	// WR, but payload must go somewhere; mix one big WRITE set with CAS.
	wrs := make([]WorkRequest, rdma.MaxBatch)
	per := rdma.MaxBatchBytes / 8
	for i := range wrs {
		if i < 8 {
			wrs[i] = WorkRequest{Op: rdma.OpWrite, Data: make([]byte, per)}
		} else {
			wrs[i] = WorkRequest{Op: rdma.OpCompareAndSwap}
		}
	}
	req := Request{Kind: KindBatch, ID: 1, WRs: wrs}
	b, err := AppendRequest(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxFrameSize {
		t.Fatalf("%d > MaxFrameSize", len(b))
	}
	var got Request
	if err := DecodeRequest(b, &got); err != nil {
		t.Fatal(err)
	}
	// A full READ response.
	rs := make([]Result, 8)
	for i := range rs {
		rs[i] = Result{Op: rdma.OpRead, Data: make([]byte, per)}
	}
	resp := Response{Kind: KindBatchResult, ID: 1, Results: rs}
	if b, err = AppendResponse(nil, &resp); err != nil || len(b) > MaxFrameSize {
		t.Fatalf("full READ response: %d bytes, %v", len(b), err)
	}
}

func TestEncodeRejects(t *testing.T) {
	big := make([]byte, rdma.MaxTransferBytes+1)
	cases := []struct {
		name string
		req  Request
		want error
	}{
		{"unknown kind", Request{Kind: 0x7f}, ErrEncode},
		{"response kind", Request{Kind: KindBatchResult}, ErrEncode},
		{"long name", Request{Kind: KindRegister, Name: strings.Repeat("x", rdma.MaxRegionNameLen+1)}, ErrEncode},
		{"too many", Request{Kind: KindBatch, WRs: make([]WorkRequest, rdma.MaxBatch+1)}, rdma.ErrBatchTooLarge},
		{"bad op", Request{Kind: KindBatch, WRs: []WorkRequest{{Op: 9}}}, rdma.ErrBadOpcode},
		{"big write", Request{Kind: KindBatch, WRs: []WorkRequest{{Op: rdma.OpWrite, Data: big}}}, rdma.ErrLength},
		{"big read", Request{Kind: KindBatch, WRs: []WorkRequest{{Op: rdma.OpRead, ReadLen: rdma.MaxTransferBytes + 1}}}, rdma.ErrLength},
		{"big batch", Request{Kind: KindBatch, WRs: func() []WorkRequest {
			w := make([]WorkRequest, 9)
			for i := range w {
				w[i] = WorkRequest{Op: rdma.OpRead, ReadLen: rdma.MaxTransferBytes}
			}
			return w
		}()}, rdma.ErrBatchTooLarge},
	}
	for _, tc := range cases {
		dst := []byte("keep")
		out, err := AppendRequest(dst, &tc.req)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrEncode) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", tc.name, out)
		}
	}
	respCases := []Response{
		{Kind: KindBatch},
		{Kind: KindRegion, Region: rdma.Region{Name: strings.Repeat("x", 200)}},
		{Kind: KindRegions, Regions: make([]rdma.Region, MaxRegions+1)},
		{Kind: KindBatchResult, Results: []Result{{Op: 0}}},
		{Kind: KindBatchResult, Results: []Result{{Op: rdma.OpRead, Status: 9}}},
		{Kind: KindBatchResult, Results: []Result{{Op: rdma.OpRead}}}, // successful READ without data
		{Kind: KindBatchResult, Results: make([]Result, rdma.MaxBatch+1)},
		{Kind: KindError, Err: Error{Message: strings.Repeat("e", MaxErrorMessageLen+1)}},
	}
	for i, r := range respCases {
		if _, err := AppendResponse(nil, &r); !errors.Is(err, ErrEncode) {
			t.Errorf("response case %d: err = %v, want ErrEncode", i, err)
		}
	}
}

func TestNewErrorTruncates(t *testing.T) {
	e := NewError(CodeInternal, strings.Repeat("é", MaxErrorMessageLen))
	if len(e.Message) > MaxErrorMessageLen || !strings.HasPrefix(strings.Repeat("é", MaxErrorMessageLen), e.Message) {
		t.Fatalf("bad truncation: %d bytes", len(e.Message))
	}
	r := Response{Kind: KindError, Err: e}
	if _, err := AppendResponse(nil, &r); err != nil {
		t.Fatal(err)
	}
}

func TestErrorUnwrap(t *testing.T) {
	cases := map[Code]error{
		CodeMalformed: ErrProtocol, CodeVersion: ErrVersion, CodeBusy: ErrBusy, CodeShuttingDown: ErrShuttingDown,
		CodeInvalidArgument: ErrInvalidArgument, CodeNoSuchRegion: rdma.ErrNoSuchRegion,
		CodeOutOfMemory: rdma.ErrOutOfMemory, CodeBatchTooLarge: rdma.ErrBatchTooLarge, CodeInternal: ErrInternal,
		Code(999): ErrInternal,
	}
	for code, want := range cases {
		var err error = &Error{Code: code, Message: "m"}
		if !errors.Is(err, want) {
			t.Errorf("code %v: %v does not match %v", code, err, want)
		}
		var we *Error
		if !errors.As(fmt.Errorf("wrapped: %w", err), &we) || we.Code != code {
			t.Errorf("code %v: errors.As failed", code)
		}
	}
}

// frame builds a request frame by hand: header then body.
func frame(kind Kind, id uint64, body ...[]byte) []byte {
	b, start := beginFrame(nil, kind, id)
	for _, p := range body {
		b = append(b, p...)
	}
	le.PutUint32(b[start:], uint32(len(b)-LengthSize))
	return b
}

func u16(v uint16) []byte { return le.AppendUint16(nil, v) }
func u32(v uint32) []byte { return le.AppendUint32(nil, v) }
func u64(v uint64) []byte { return le.AppendUint64(nil, v) }

func wrHead(op rdma.Opcode) []byte {
	b := []byte{byte(op)}
	b = append(b, u32(7)...)
	return append(b, u64(4096)...)
}

// malformedRequests are frames every decoder must reject.
func malformedRequests() map[string][]byte {
	ok := frame(KindHello, 1, u32(Magic), u16(Version))
	badPrefix := bytes.Clone(ok)
	le.PutUint32(badPrefix, 100)
	return map[string][]byte{
		"empty":            nil,
		"short header":     ok[:HeaderSize-1],
		"prefix mismatch":  badPrefix,
		"truncated hello":  ok[:len(ok)-1],
		"trailing":         frame(KindHello, 1, u32(Magic), u16(Version), []byte{0}),
		"token truncated":  frame(KindHello, 1, u32(Magic), u16(Version), []byte{5}, []byte("ab")),
		"unknown kind":     frame(0x42, 1),
		"response kind":    frame(KindHelloOK, 1),
		"long name":        frame(KindRegister, 1, []byte{rdma.MaxRegionNameLen + 1}, make([]byte, rdma.MaxRegionNameLen+1), u64(1)),
		"name truncated":   frame(KindRegister, 1, []byte{10}, []byte("abc")),
		"count too big":    frame(KindBatch, 1, u16(rdma.MaxBatch+1)),
		"count vs bytes":   frame(KindBatch, 1, u16(200), wrHead(rdma.OpFetchAndAdd), u64(1)),
		"bad opcode":       frame(KindBatch, 1, u16(1), wrHead(9), u64(1)),
		"opcode zero":      frame(KindBatch, 1, u16(1), wrHead(0), u64(1)),
		"huge read":        frame(KindBatch, 1, u16(1), wrHead(rdma.OpRead), u32(rdma.MaxTransferBytes+1), u64(0)),
		"huge write len":   frame(KindBatch, 1, u16(1), wrHead(rdma.OpWrite), u32(0xFFFFFFFF), u64(0)),
		"write truncated":  frame(KindBatch, 1, u16(1), wrHead(rdma.OpWrite), u32(100), make([]byte, 10)),
		"list with body":   frame(KindListRegions, 1, []byte{1}),
		"batch payload":    frame(KindBatch, 1, append(u16(9), bytes.Repeat(append(wrHead(rdma.OpRead), u32(rdma.MaxTransferBytes)...), 9)...)),
		"cas truncated":    frame(KindBatch, 1, u16(1), wrHead(rdma.OpCompareAndSwap), u64(1)),
		"max uint32 frame": append(u32(0xFFFFFFFF), make([]byte, 20)...),
	}
}

func malformedResponses() map[string][]byte {
	return map[string][]byte{
		"empty":           nil,
		"unknown kind":    frame(0x99, 1),
		"request kind":    frame(KindHello, 1, u32(Magic), u16(Version)),
		"hello short":     frame(KindHelloOK, 1, u16(1)),
		"regions count":   frame(KindRegions, 1, u32(MaxRegions+1)),
		"regions vs size": frame(KindRegions, 1, u32(1000)),
		"region name":     frame(KindRegion, 1, []byte{200}),
		"results count":   frame(KindBatchResult, 1, u16(rdma.MaxBatch+1)),
		"results size":    frame(KindBatchResult, 1, u16(100), []byte{1, 0}),
		"result op":       frame(KindBatchResult, 1, u16(1), []byte{0, 0}),
		"result status":   frame(KindBatchResult, 1, u16(1), []byte{byte(rdma.OpWrite), 42}),
		"read zero":       frame(KindBatchResult, 1, u16(1), []byte{byte(rdma.OpRead), 0}, u32(0)),
		"read huge":       frame(KindBatchResult, 1, u16(1), []byte{byte(rdma.OpRead), 0}, u32(rdma.MaxTransferBytes+1)),
		"read truncated":  frame(KindBatchResult, 1, u16(1), []byte{byte(rdma.OpRead), 0}, u32(64), make([]byte, 3)),
		"cas no value":    frame(KindBatchResult, 1, u16(1), []byte{byte(rdma.OpCompareAndSwap), 0}),
		"error long":      frame(KindError, 1, u16(1), u16(MaxErrorMessageLen+1), make([]byte, MaxErrorMessageLen+1)),
		"error trailing":  frame(KindError, 1, u16(1), u16(1), []byte("ab")),
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, b := range malformedRequests() {
		var r Request
		if err := DecodeRequest(b, &r); !errors.Is(err, ErrMalformed) {
			t.Errorf("request %q: err = %v, want ErrMalformed", name, err)
		} else {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("request %q: %T is not a *DecodeError", name, err)
			}
		}
		if len(r.WRs) != 0 {
			t.Errorf("request %q: %d WRs left after error", name, len(r.WRs))
		}
	}
	for name, b := range malformedResponses() {
		var r Response
		if err := DecodeResponse(b, &r); !errors.Is(err, ErrMalformed) {
			t.Errorf("response %q: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecodeKeepsHeaderOnBodyError(t *testing.T) {
	var r Request
	err := DecodeRequest(frame(KindBatch, 77, u16(1), wrHead(9)), &r)
	if err == nil || r.Kind != KindBatch || r.ID != 77 {
		t.Fatalf("err=%v kind=%v id=%d", err, r.Kind, r.ID)
	}
}

func TestDecodeReusesStorage(t *testing.T) {
	req := Request{Kind: KindBatch, ID: 3, WRs: []WorkRequest{{Op: rdma.OpFetchAndAdd, Add: 1}, {Op: rdma.OpRead, ReadLen: 8}}}
	b, err := AppendRequest(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := DecodeRequest(b, &r); err != nil {
		t.Fatal(err)
	}
	p := &r.WRs[0]
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeRequest(b, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || &r.WRs[0] != p {
		t.Fatalf("decode allocates %v times per run (storage reused: %v)", allocs, &r.WRs[0] == p)
	}
}

func TestReadFrame(t *testing.T) {
	req := Request{Kind: KindBatch, ID: 9, WRs: []WorkRequest{{Op: rdma.OpWrite, Data: bytes.Repeat([]byte{7}, 200_000)}}}
	one, _ := AppendRequest(nil, &req)
	two, _ := AppendRequest(nil, &Request{Kind: KindListRegions, ID: 10})
	stream := append(bytes.Clone(one), two...)
	br := bufio.NewReader(bytes.NewReader(stream))
	buf := make([]byte, 0, 16)
	f, err := ReadFrame(br, buf, 0)
	if err != nil || !bytes.Equal(f, one) {
		t.Fatalf("first frame: %v (len %d)", err, len(f))
	}
	f, err = ReadFrame(br, f, 0)
	if err != nil || !bytes.Equal(f, two) {
		t.Fatalf("second frame: %v", err)
	}
	if _, err := ReadFrame(br, f, 0); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
	// Cut short.
	if _, err := ReadFrame(bytes.NewReader(one[:1000]), nil, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(one[:2]), nil, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut prefix: %v", err)
	}
	// Over the caller's cap, and under the header size.
	if _, err := ReadFrame(bytes.NewReader(one), nil, 1000); !errors.Is(err, ErrMalformed) {
		t.Fatalf("over cap: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(u32(3)), nil, 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("under header: %v", err)
	}
}

// TestReadFrameGrowsWithData checks that announcing a huge frame and sending
// a few bytes does not allocate the announced size.
func TestReadFrameGrowsWithData(t *testing.T) {
	announced := u32(MaxFrameSize - LengthSize)
	stream := append(announced, make([]byte, 100)...)
	f, err := ReadFrame(bytes.NewReader(stream), nil, 0)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err = %v", err)
	}
	if cap(f) > 2*readChunk {
		t.Fatalf("buffer grew to %d bytes for 104 bytes received", cap(f))
	}
}

// seedRequests and seedResponses are valid encodings for the fuzz corpora.
func seedRequests() [][]byte {
	var out [][]byte
	add := func(r Request) {
		b, err := AppendRequest(nil, &r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	add(Request{Kind: KindHello, ID: 0, Magic: Magic, Version: Version})
	add(Request{Kind: KindHello, ID: 1, Magic: Magic, Version: Version, Token: []byte("s3cret")})
	add(Request{Kind: KindRegister, ID: 1, Name: "records", Length: 1 << 20})
	add(Request{Kind: KindListRegions, ID: 2})
	add(Request{Kind: KindBatch, ID: 3, WRs: []WorkRequest{
		{Op: rdma.OpRead, RKey: 5, RemoteAddr: 1 << 20, ReadLen: 64},
		{Op: rdma.OpWrite, RKey: 5, RemoteAddr: 1<<20 + 8, Data: []byte("0123456789abcdef")},
		{Op: rdma.OpCompareAndSwap, RKey: 5, RemoteAddr: 1 << 20, Compare: 0, Swap: 1},
		{Op: rdma.OpFetchAndAdd, RKey: 5, RemoteAddr: 1<<20 + 16, Add: 3},
	}})
	add(Request{Kind: KindBatch, ID: 4})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 4 {
		add(randRequest(rng))
	}
	return out
}

func seedResponses() [][]byte {
	var out [][]byte
	add := func(r Response) {
		b, err := AppendResponse(nil, &r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	add(Response{Kind: KindHelloOK, Hello: Limits{Version: Version, MaxFrameSize: MaxFrameSize, MaxInFlight: 128,
		MaxBatch: rdma.MaxBatch, MaxBatchBytes: rdma.MaxBatchBytes, MaxTransferBytes: rdma.MaxTransferBytes, Capacity: 1 << 30, MaxRegions: MaxRegions}})
	add(Response{Kind: KindRegion, ID: 1, Region: rdma.Region{Name: "locks", RKey: 9, Addr: 1 << 20, Length: 4096}})
	add(Response{Kind: KindRegions, ID: 2, Regions: []rdma.Region{{Name: "a", RKey: 1, Addr: 1 << 20, Length: 8}, {Name: "b", RKey: 2, Addr: 1<<20 + 4096, Length: 16}}})
	add(Response{Kind: KindBatchResult, ID: 3, Results: []Result{
		{Op: rdma.OpRead, Data: []byte("record")},
		{Op: rdma.OpWrite},
		{Op: rdma.OpCompareAndSwap, Value: 1},
		{Op: rdma.OpFetchAndAdd, Value: 41},
		{Op: rdma.OpRead, Status: rdma.StatusRemoteAccessError},
		{Op: rdma.OpCompareAndSwap, Status: rdma.StatusRemoteInvalidRequest},
	}})
	add(Response{Kind: KindError, ID: 4, Err: Error{Code: CodeNoSuchRegion, Message: "no region \"x\""}})
	rng := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		add(randResponse(rng))
	}
	return out
}

// corrupt returns a few damaged copies of b: truncated, a flipped length,
// an inflated count.
func corrupt(b []byte) [][]byte {
	var out [][]byte
	if len(b) > HeaderSize {
		out = append(out, b[:len(b)-1])
	}
	c := bytes.Clone(b)
	if len(c) > HeaderSize+1 {
		c[HeaderSize] ^= 0xFF
		out = append(out, c)
	}
	c = bytes.Clone(b)
	le.PutUint32(c, le.Uint32(c)+1)
	out = append(out, c)
	return out
}

// TestWriteSeedCorpus regenerates testdata/fuzz/... when AURA_WRITE_CORPUS=1.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("AURA_WRITE_CORPUS") != "1" {
		t.Skip("set AURA_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	write := func(target string, seeds [][]byte, bad map[string][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var all [][]byte
		for i, s := range seeds {
			all = append(all, s)
			if i%2 == 0 {
				all = append(all, corrupt(s)...)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(bad)) {
			all = append(all, bad[name])
		}
		for i, s := range all {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzDecodeRequest", seedRequests(), malformedRequests())
	write("FuzzDecodeResponse", seedResponses(), malformedResponses())
}
