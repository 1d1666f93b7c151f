package wire

import (
	"fmt"
	"io"
	"slices"

	"github.com/aura-runtime/aura/rdma"
)

// cursor reads a frame body front to back; the first failure sticks.
type cursor struct {
	b    []byte
	kind Kind
	err  error
}

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = &DecodeError{Kind: c.kind, Reason: fmt.Sprintf(format, args...)}
	}
}

// take returns the next n bytes, or nil (and a sticky error) if fewer remain.
func (c *cursor) take(n int, what string) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b) {
		c.fail("truncated %s: need %d bytes, %d left", what, n, len(c.b))
		return nil
	}
	p := c.b[:n:n]
	c.b = c.b[n:]
	return p
}

func (c *cursor) u8(what string) uint8 {
	if p := c.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (c *cursor) u16(what string) uint16 {
	if p := c.take(2, what); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (c *cursor) u32(what string) uint32 {
	if p := c.take(4, what); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (c *cursor) u64(what string) uint64 {
	if p := c.take(8, what); p != nil {
		return le.Uint64(p)
	}
	return 0
}

// bytes returns n bytes aliasing the frame, nil when n is 0.
func (c *cursor) bytes(n int, what string) []byte {
	p := c.take(n, what)
	if len(p) == 0 {
		return nil
	}
	return p
}

// done fails if bytes are left over: every frame has exactly one encoding.
func (c *cursor) done() error {
	if c.err == nil && len(c.b) != 0 {
		c.fail("%d trailing bytes", len(c.b))
	}
	return c.err
}

// header checks a whole frame's length prefix and reads its kind and id.
func header(frame []byte) (Kind, uint64, []byte, error) {
	if len(frame) < HeaderSize {
		return 0, 0, nil, &DecodeError{Reason: fmt.Sprintf("frame of %d bytes is shorter than the %d-byte header", len(frame), HeaderSize)}
	}
	if len(frame) > MaxFrameSize {
		return 0, 0, nil, &DecodeError{Reason: fmt.Sprintf("frame of %d bytes exceeds %d", len(frame), MaxFrameSize)}
	}
	if n := le.Uint32(frame); int(n) != len(frame)-LengthSize {
		return 0, 0, nil, &DecodeError{Reason: fmt.Sprintf("length prefix %d does not match the %d bytes after it", n, len(frame)-LengthSize)}
	}
	return Kind(frame[LengthSize]), le.Uint64(frame[LengthSize+1:]), frame[HeaderSize:], nil
}

// DecodeRequest decodes one whole request frame (length prefix included) into
// into, reusing into.WRs' storage. Kind and ID are set as soon as the header
// has been read, even if the body then turns out malformed, so that a server
// can answer the request id it could not serve. WRITE data aliases frame.
func DecodeRequest(frame []byte, into *Request) error {
	wrs := into.WRs[:0]
	*into = Request{}
	kind, id, body, err := header(frame)
	if err != nil {
		return err
	}
	into.Kind, into.ID = kind, id
	c := cursor{b: body, kind: kind}
	switch kind {
	case KindHello:
		into.Magic = c.u32("magic")
		into.Version = c.u16("version")
		if len(c.b) > 0 {
			n := int(c.u8("token length"))
			if n == 0 {
				c.fail("empty token")
			}
			into.Token = c.take(n, "token")
		}
	case KindRegister:
		n := int(c.u8("name length"))
		if n > rdma.MaxRegionNameLen {
			c.fail("region name of %d bytes exceeds %d", n, rdma.MaxRegionNameLen)
		}
		into.Name = string(c.take(n, "region name"))
		into.Length = c.u64("region length")
	case KindListRegions:
	case KindBatch:
		into.WRs = decodeWRs(&c, wrs)
	default:
		c.fail("unknown request kind")
	}
	if err := c.done(); err != nil {
		into.WRs = into.WRs[:0]
		return err
	}
	return nil
}

func decodeWRs(c *cursor, wrs []WorkRequest) []WorkRequest {
	n := int(c.u16("work request count"))
	if c.err != nil {
		return wrs
	}
	if n > rdma.MaxBatch {
		c.fail("%d work requests exceed %d", n, rdma.MaxBatch)
		return wrs
	}
	if n*wrFixedMin > len(c.b) {
		c.fail("%d work requests cannot fit in %d bytes", n, len(c.b))
		return wrs
	}
	if cap(wrs) < n {
		wrs = make([]WorkRequest, 0, n)
	}
	total := 0
	for i := 0; i < n && c.err == nil; i++ {
		w := WorkRequest{Op: rdma.Opcode(c.u8("opcode"))}
		w.RKey = c.u32("rkey")
		w.RemoteAddr = c.u64("remote address")
		switch w.Op {
		case rdma.OpRead:
			w.ReadLen = c.u32("read length")
			if w.ReadLen > rdma.MaxTransferBytes {
				c.fail("work request %d: READ of %d bytes exceeds %d", i, w.ReadLen, rdma.MaxTransferBytes)
			}
			total += int(w.ReadLen)
		case rdma.OpWrite:
			l := c.u32("write length")
			if l > rdma.MaxTransferBytes {
				c.fail("work request %d: WRITE of %d bytes exceeds %d", i, l, rdma.MaxTransferBytes)
			}
			w.Data = c.bytes(int(l), "write data")
			total += int(l)
		case rdma.OpCompareAndSwap:
			w.Compare = c.u64("compare")
			w.Swap = c.u64("swap")
		case rdma.OpFetchAndAdd:
			w.Add = c.u64("add")
		default:
			c.fail("work request %d: unknown opcode %d", i, uint8(w.Op))
		}
		if total > rdma.MaxBatchBytes {
			c.fail("batch payload of %d bytes exceeds %d", total, rdma.MaxBatchBytes)
		}
		wrs = append(wrs, w)
	}
	return wrs
}

func decodeRegion(c *cursor) rdma.Region {
	n := int(c.u8("name length"))
	if n > rdma.MaxRegionNameLen {
		c.fail("region name of %d bytes exceeds %d", n, rdma.MaxRegionNameLen)
	}
	r := rdma.Region{Name: string(c.take(n, "region name"))}
	r.RKey = c.u32("rkey")
	r.Addr = c.u64("region address")
	r.Length = c.u64("region length")
	return r
}

// DecodeResponse decodes one whole response frame (length prefix included)
// into into, reusing into's slices. Kind and ID are set as soon as the header
// has been read. READ data aliases frame.
func DecodeResponse(frame []byte, into *Response) error {
	regions, results := into.Regions[:0], into.Results[:0]
	*into = Response{}
	kind, id, body, err := header(frame)
	if err != nil {
		return err
	}
	into.Kind, into.ID = kind, id
	c := cursor{b: body, kind: kind}
	switch kind {
	case KindHelloOK:
		h := &into.Hello
		h.Version = c.u16("version")
		h.MaxFrameSize = c.u32("max frame size")
		h.MaxInFlight = c.u32("max in flight")
		h.MaxBatch = c.u32("max batch")
		h.MaxBatchBytes = c.u32("max batch bytes")
		h.MaxTransferBytes = c.u32("max transfer bytes")
		h.Capacity = c.u64("capacity")
		h.MaxRegions = c.u32("max regions")
	case KindRegion:
		into.Region = decodeRegion(&c)
	case KindRegions:
		n := c.u32("region count")
		switch {
		case c.err != nil:
		case n > MaxRegions:
			c.fail("%d regions exceed %d", n, MaxRegions)
		case int(n)*regionFixed > len(c.b):
			c.fail("%d regions cannot fit in %d bytes", n, len(c.b))
		default:
			if cap(regions) < int(n) {
				regions = make([]rdma.Region, 0, n)
			}
			for i := 0; i < int(n) && c.err == nil; i++ {
				regions = append(regions, decodeRegion(&c))
			}
			into.Regions = regions
		}
	case KindBatchResult:
		into.Results = decodeResults(&c, results)
	case KindError:
		into.Err.Code = Code(c.u16("error code"))
		n := int(c.u16("message length"))
		if n > MaxErrorMessageLen {
			c.fail("error message of %d bytes exceeds %d", n, MaxErrorMessageLen)
		}
		into.Err.Message = string(c.take(n, "error message"))
	default:
		c.fail("unknown response kind")
	}
	if err := c.done(); err != nil {
		into.Regions, into.Results = into.Regions[:0], into.Results[:0]
		return err
	}
	return nil
}

func decodeResults(c *cursor, rs []Result) []Result {
	n := int(c.u16("result count"))
	if c.err != nil {
		return rs
	}
	if n > rdma.MaxBatch {
		c.fail("%d results exceed %d", n, rdma.MaxBatch)
		return rs
	}
	if n*resultFixedMin > len(c.b) {
		c.fail("%d results cannot fit in %d bytes", n, len(c.b))
		return rs
	}
	if cap(rs) < n {
		rs = make([]Result, 0, n)
	}
	total := 0
	for i := 0; i < n && c.err == nil; i++ {
		r := Result{Op: rdma.Opcode(c.u8("opcode")), Status: rdma.Status(c.u8("status"))}
		if c.err != nil {
			break
		}
		if !validOp(r.Op) {
			c.fail("result %d: unknown opcode %d", i, uint8(r.Op))
			break
		}
		if r.Status > rdma.StatusFlushed {
			c.fail("result %d: unknown status %d", i, uint8(r.Status))
			break
		}
		value, data := resultCarries(r.Op, r.Status)
		if value {
			r.Value = c.u64("value")
		}
		if data {
			l := c.u32("read length")
			if l == 0 || l > rdma.MaxTransferBytes {
				c.fail("result %d: READ data of %d bytes (allowed 1..%d)", i, l, rdma.MaxTransferBytes)
			}
			total += int(l)
			if total > rdma.MaxBatchBytes {
				c.fail("READ data of %d bytes exceeds %d", total, rdma.MaxBatchBytes)
			}
			r.Data = c.bytes(int(l), "read data")
		}
		rs = append(rs, r)
	}
	return rs
}

// readChunk is how far ReadFrame grows its buffer ahead of the bytes that have
// actually arrived.
const readChunk = 64 << 10

// ReadFrame reads one frame from r into buf (reusing its storage when large
// enough) and returns the whole frame, length prefix included. The announced
// length is checked against maxFrame (at most MaxFrameSize; ≤ 0 means
// MaxFrameSize) before anything is read, and beyond the reused buffer the
// frame grows only as bytes arrive. It returns io.EOF at a clean end of
// stream, io.ErrUnexpectedEOF for a frame cut short, and a *DecodeError for a
// bad length.
func ReadFrame(r io.Reader, buf []byte, maxFrame int) ([]byte, error) {
	if maxFrame <= 0 || maxFrame > MaxFrameSize {
		maxFrame = MaxFrameSize
	}
	var prefix [LengthSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return buf[:0], err
	}
	n := int(le.Uint32(prefix[:]))
	total := LengthSize + n
	if n < HeaderSize-LengthSize || total > maxFrame || total < n {
		return buf[:0], &DecodeError{Reason: fmt.Sprintf("announced frame of %d bytes (allowed %d..%d)", total, HeaderSize, maxFrame)}
	}
	frame := append(buf[:0], prefix[:]...)
	for len(frame) < total {
		if len(frame) == cap(frame) {
			frame = slices.Grow(frame, min(total-len(frame), max(readChunk, len(frame))))
		}
		end := min(total, cap(frame))
		m, err := io.ReadFull(r, frame[len(frame):end])
		frame = frame[:len(frame)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return frame, err
		}
	}
	return frame, nil
}
