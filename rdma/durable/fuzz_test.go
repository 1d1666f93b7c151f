package durable

import (
	"bytes"
	"testing"

	"github.com/aura-runtime/aura/rdma"
)

// FuzzDecodeRecord: the record decoder reads bytes from disk, which a bad
// disk or a hostile hand can change: it must never panic, never accept
// what breaks a limit, and what it accepts re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRegion(nil, 1, rdma.Region{Name: "txn/ledger", RKey: 0x1234, Addr: 1 << 20, Length: 2 << 20})[frameHeaderSize:])
	f.Add(appendWrites(nil, 2, []Write{{RKey: 9, Addr: 1 << 20, Data: []byte("record")}, {RKey: 9, Addr: 1<<20 + 64, Data: make([]byte, 8)}})[frameHeaderSize:])
	f.Add([]byte{KindWrites, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		var rec Record
		if err := DecodeRecord(p, &rec); err != nil {
			return
		}
		var again []byte
		switch rec.Kind {
		case KindRegion:
			again = appendRegion(nil, rec.Seq, rec.Region)
		case KindWrites:
			if err := checkWrites(rec.Writes); err != nil {
				t.Fatalf("decoded writes the encoder refuses: %v", err)
			}
			again = appendWrites(nil, rec.Seq, rec.Writes)
		default:
			t.Fatalf("decoded kind %d", rec.Kind)
		}
		if !bytes.Equal(again[frameHeaderSize:], p) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again[frameHeaderSize:], p)
		}
	})
}

// FuzzScanSegment: a whole segment file from disk — framing, checksums,
// the torn-tail rule — must never panic, and records it delivers have
// increasing sequence numbers as written.
func FuzzScanSegment(f *testing.F) {
	seg := func(recs ...[]byte) []byte {
		b := append(append([]byte{}, segmentMagic[:]...), 1, 0, 0, 0, 0, 0, 0, 0)
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	r1 := appendRegion(nil, 1, rdma.Region{Name: "r", RKey: 5, Addr: 1 << 20, Length: 64})
	w2 := appendWrites(nil, 2, []Write{{RKey: 5, Addr: 1 << 20, Data: []byte("x")}})
	f.Add(seg(r1, w2), true)
	f.Add(seg(r1, w2[:len(w2)-3]), true)
	f.Add(seg(r1, make([]byte, 40)), false)
	f.Add(seg(), true)
	f.Fuzz(func(t *testing.T, b []byte, last bool) {
		_, _ = scanSegment(bytes.NewReader(b), int64(len(b)), "fuzz", last, func(rec *Record) error {
			if rec.Seq == 0 {
				t.Fatal("record with sequence number 0")
			}
			return nil
		})
	})
}
