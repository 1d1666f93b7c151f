package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/aura-runtime/aura/rdma"
)

var le = binary.LittleEndian

// beginFrame appends a header with a placeholder length and returns the new
// slice and the offset of the frame's start.
func beginFrame(dst []byte, kind Kind, id uint64) ([]byte, int) {
	start := len(dst)
	dst = le.AppendUint32(dst, 0)
	dst = append(dst, byte(kind))
	dst = le.AppendUint64(dst, id)
	return dst, start
}

// endFrame patches the length prefix of the frame that starts at start.
func endFrame(dst []byte, start int) ([]byte, error) {
	n := len(dst) - start
	if n > MaxFrameSize {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrEncode, n, MaxFrameSize)
	}
	le.PutUint32(dst[start:], uint32(n-LengthSize))
	return dst, nil
}

func validOp(op rdma.Opcode) bool { return op >= rdma.OpRead && op <= rdma.OpFetchAndAdd }

// checkBatch enforces the batch limits that DecodeRequest enforces.
func checkBatch(wrs []WorkRequest) error {
	if len(wrs) > rdma.MaxBatch {
		return fmt.Errorf("%w: %d work requests (max %d): %w", ErrEncode, len(wrs), rdma.MaxBatch, rdma.ErrBatchTooLarge)
	}
	total := 0
	for i := range wrs {
		w := &wrs[i]
		var n int
		switch w.Op {
		case rdma.OpRead:
			n = int(w.ReadLen)
		case rdma.OpWrite:
			n = len(w.Data)
		case rdma.OpCompareAndSwap, rdma.OpFetchAndAdd:
		default:
			return fmt.Errorf("%w: work request %d: %w %d", ErrEncode, i, rdma.ErrBadOpcode, uint8(w.Op))
		}
		if n > rdma.MaxTransferBytes {
			return fmt.Errorf("%w: work request %d: %s of %d bytes (max %d): %w", ErrEncode, i, w.Op, n, rdma.MaxTransferBytes, rdma.ErrLength)
		}
		total += n
	}
	if total > rdma.MaxBatchBytes {
		return fmt.Errorf("%w: %d payload bytes (max %d): %w", ErrEncode, total, rdma.MaxBatchBytes, rdma.ErrBatchTooLarge)
	}
	return nil
}

// AppendRequest appends the encoding of r to dst. It fails, leaving dst as it
// was, if r breaks a protocol limit or has an unknown kind or opcode.
func AppendRequest(dst []byte, r *Request) ([]byte, error) {
	orig := dst
	switch r.Kind {
	case KindHello:
		if len(r.Token) > MaxTokenLen {
			return orig, fmt.Errorf("%w: token of %d bytes (max %d)", ErrEncode, len(r.Token), MaxTokenLen)
		}
	case KindListRegions:
	case KindRegister:
		if len(r.Name) > rdma.MaxRegionNameLen {
			return orig, fmt.Errorf("%w: region name of %d bytes (max %d)", ErrEncode, len(r.Name), rdma.MaxRegionNameLen)
		}
	case KindBatch:
		if err := checkBatch(r.WRs); err != nil {
			return orig, err
		}
	default:
		return orig, fmt.Errorf("%w: request kind %s", ErrEncode, r.Kind)
	}
	dst, start := beginFrame(dst, r.Kind, r.ID)
	switch r.Kind {
	case KindHello:
		dst = le.AppendUint32(dst, r.Magic)
		dst = le.AppendUint16(dst, r.Version)
		if len(r.Token) > 0 {
			dst = append(dst, byte(len(r.Token)))
			dst = append(dst, r.Token...)
		}
	case KindRegister:
		dst = append(dst, byte(len(r.Name)))
		dst = append(dst, r.Name...)
		dst = le.AppendUint64(dst, r.Length)
	case KindBatch:
		dst = le.AppendUint16(dst, uint16(len(r.WRs)))
		for i := range r.WRs {
			dst = appendWR(dst, &r.WRs[i])
		}
	}
	out, err := endFrame(dst, start)
	if err != nil {
		return orig, err
	}
	return out, nil
}

func appendWR(dst []byte, w *WorkRequest) []byte {
	dst = append(dst, byte(w.Op))
	dst = le.AppendUint32(dst, w.RKey)
	dst = le.AppendUint64(dst, w.RemoteAddr)
	switch w.Op {
	case rdma.OpRead:
		dst = le.AppendUint32(dst, w.ReadLen)
	case rdma.OpWrite:
		dst = le.AppendUint32(dst, uint32(len(w.Data)))
		dst = append(dst, w.Data...)
	case rdma.OpCompareAndSwap:
		dst = le.AppendUint64(dst, w.Compare)
		dst = le.AppendUint64(dst, w.Swap)
	case rdma.OpFetchAndAdd:
		dst = le.AppendUint64(dst, w.Add)
	}
	return dst
}

// RequestSize returns the encoded size of a valid request, for sizing buffers.
func RequestSize(r *Request) int {
	n := HeaderSize
	switch r.Kind {
	case KindHello:
		n += 6
		if len(r.Token) > 0 {
			n += 1 + len(r.Token)
		}
	case KindRegister:
		n += 1 + len(r.Name) + 8
	case KindBatch:
		n += 2
		for i := range r.WRs {
			n += wrSize(&r.WRs[i])
		}
	}
	return n
}

func wrSize(w *WorkRequest) int {
	n := 1 + 4 + 8
	switch w.Op {
	case rdma.OpRead:
		n += 4
	case rdma.OpWrite:
		n += 4 + len(w.Data)
	case rdma.OpCompareAndSwap:
		n += 16
	case rdma.OpFetchAndAdd:
		n += 8
	}
	return n
}

func checkRegion(r *rdma.Region) error {
	if len(r.Name) > rdma.MaxRegionNameLen {
		return fmt.Errorf("%w: region name of %d bytes (max %d)", ErrEncode, len(r.Name), rdma.MaxRegionNameLen)
	}
	return nil
}

func appendRegion(dst []byte, r *rdma.Region) []byte {
	dst = append(dst, byte(len(r.Name)))
	dst = append(dst, r.Name...)
	dst = le.AppendUint32(dst, r.RKey)
	dst = le.AppendUint64(dst, r.Addr)
	dst = le.AppendUint64(dst, r.Length)
	return dst
}

// resultCarries reports whether a result's payload is encoded: the value of a
// successful atomic, the data of a successful READ.
func resultCarries(op rdma.Opcode, st rdma.Status) (value, data bool) {
	if st != rdma.StatusSuccess {
		return false, false
	}
	return op.IsAtomic(), op == rdma.OpRead
}

func checkResults(rs []Result) error {
	if len(rs) > rdma.MaxBatch {
		return fmt.Errorf("%w: %d results (max %d)", ErrEncode, len(rs), rdma.MaxBatch)
	}
	total := 0
	for i := range rs {
		r := &rs[i]
		if !validOp(r.Op) {
			return fmt.Errorf("%w: result %d: %w %d", ErrEncode, i, rdma.ErrBadOpcode, uint8(r.Op))
		}
		if r.Status > rdma.StatusFlushed {
			return fmt.Errorf("%w: result %d: status %d", ErrEncode, i, uint8(r.Status))
		}
		if _, data := resultCarries(r.Op, r.Status); data {
			if len(r.Data) == 0 || len(r.Data) > rdma.MaxTransferBytes {
				return fmt.Errorf("%w: result %d: READ data of %d bytes (allowed 1..%d)", ErrEncode, i, len(r.Data), rdma.MaxTransferBytes)
			}
			total += len(r.Data)
		}
	}
	if total > rdma.MaxBatchBytes {
		return fmt.Errorf("%w: %d bytes of READ data (max %d)", ErrEncode, total, rdma.MaxBatchBytes)
	}
	return nil
}

// AppendResponse appends the encoding of r to dst. It fails, leaving dst as it
// was, if r breaks a protocol limit or has an unknown kind.
func AppendResponse(dst []byte, r *Response) ([]byte, error) {
	orig := dst
	switch r.Kind {
	case KindHelloOK:
	case KindRegion:
		if err := checkRegion(&r.Region); err != nil {
			return orig, err
		}
	case KindRegions:
		if len(r.Regions) > MaxRegions {
			return orig, fmt.Errorf("%w: %d regions (max %d)", ErrEncode, len(r.Regions), MaxRegions)
		}
		for i := range r.Regions {
			if err := checkRegion(&r.Regions[i]); err != nil {
				return orig, err
			}
		}
	case KindBatchResult:
		if err := checkResults(r.Results); err != nil {
			return orig, err
		}
	case KindError:
		if len(r.Err.Message) > MaxErrorMessageLen {
			return orig, fmt.Errorf("%w: error message of %d bytes (max %d)", ErrEncode, len(r.Err.Message), MaxErrorMessageLen)
		}
	default:
		return orig, fmt.Errorf("%w: response kind %s", ErrEncode, r.Kind)
	}
	dst, start := beginFrame(dst, r.Kind, r.ID)
	switch r.Kind {
	case KindHelloOK:
		h := &r.Hello
		dst = le.AppendUint16(dst, h.Version)
		dst = le.AppendUint32(dst, h.MaxFrameSize)
		dst = le.AppendUint32(dst, h.MaxInFlight)
		dst = le.AppendUint32(dst, h.MaxBatch)
		dst = le.AppendUint32(dst, h.MaxBatchBytes)
		dst = le.AppendUint32(dst, h.MaxTransferBytes)
		dst = le.AppendUint64(dst, h.Capacity)
		dst = le.AppendUint32(dst, h.MaxRegions)
	case KindRegion:
		dst = appendRegion(dst, &r.Region)
	case KindRegions:
		dst = le.AppendUint32(dst, uint32(len(r.Regions)))
		for i := range r.Regions {
			dst = appendRegion(dst, &r.Regions[i])
		}
	case KindBatchResult:
		dst = le.AppendUint16(dst, uint16(len(r.Results)))
		for i := range r.Results {
			res := &r.Results[i]
			dst = append(dst, byte(res.Op), byte(res.Status))
			value, data := resultCarries(res.Op, res.Status)
			if value {
				dst = le.AppendUint64(dst, res.Value)
			}
			if data {
				dst = le.AppendUint32(dst, uint32(len(res.Data)))
				dst = append(dst, res.Data...)
			}
		}
	case KindError:
		dst = le.AppendUint16(dst, uint16(r.Err.Code))
		dst = le.AppendUint16(dst, uint16(len(r.Err.Message)))
		dst = append(dst, r.Err.Message...)
	}
	out, err := endFrame(dst, start)
	if err != nil {
		return orig, err
	}
	return out, nil
}

// ResponseSize returns the encoded size of a valid response, for sizing buffers.
func ResponseSize(r *Response) int {
	n := HeaderSize
	switch r.Kind {
	case KindHelloOK:
		n += 2 + 5*4 + 8 + 4
	case KindRegion:
		n += regionFixed + len(r.Region.Name)
	case KindRegions:
		n += 4
		for i := range r.Regions {
			n += regionFixed + len(r.Regions[i].Name)
		}
	case KindBatchResult:
		n += 2
		for i := range r.Results {
			res := &r.Results[i]
			n += resultFixedMin
			value, data := resultCarries(res.Op, res.Status)
			if value {
				n += 8
			}
			if data {
				n += 4 + len(res.Data)
			}
		}
	case KindError:
		n += 4 + len(r.Err.Message)
	}
	return n
}
