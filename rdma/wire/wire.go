package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/aura-runtime/aura/rdma"
)

// Magic opens every Hello: the bytes "AURA" read as a little-endian uint32.
const Magic uint32 = 'A' | 'U'<<8 | 'R'<<16 | 'A'<<24

// Version is the protocol version this package speaks.
const Version uint16 = 1

// Sizes of the fixed parts of frames.
const (
	// LengthSize is the size of the length prefix.
	LengthSize = 4
	// HeaderSize is the length prefix, kind and request id.
	HeaderSize = LengthSize + 1 + 8

	// wrFixedMax is the largest fixed part of one encoded work request (a CAS:
	// op, rkey, addr, compare, swap); wrFixedMin the smallest (a READ, or an empty WRITE).
	wrFixedMax = 1 + 4 + 8 + 16
	wrFixedMin = 1 + 4 + 8 + 4
	// resultFixedMax is the largest fixed part of one result (op, status, value).
	resultFixedMax = 1 + 1 + 8
	resultFixedMin = 1 + 1
	// regionFixed is an encoded region without its name.
	regionFixed = 1 + 4 + 8 + 8
)

// Limits of the protocol. They are constants of the protocol, not settings:
// both sides check them, and a frame that breaks one is malformed.
const (
	// MaxFrameSize caps a whole frame, length prefix included: a doorbell batch
	// of rdma.MaxBatch work requests carrying rdma.MaxBatchBytes of payload,
	// plus headers. It is the largest frame either side can legitimately send.
	MaxFrameSize = HeaderSize + 2 + rdma.MaxBatch*wrFixedMax + rdma.MaxBatchBytes
	// MaxRegions caps the regions a Regions reply may list (and so the regions a
	// memory node served by rdma/tcp registers): 4096 regions of at most
	// rdma.MaxRegionNameLen-byte names fit in about 600 KiB.
	MaxRegions = 4096
	// MaxErrorMessageLen caps the message of an Error reply, in bytes.
	MaxErrorMessageLen = 1024
)

// Kind is a frame's type.
type Kind uint8

// Request kinds have the high bit clear, response kinds have it set.
const (
	KindHello       Kind = 0x01
	KindRegister    Kind = 0x02
	KindListRegions Kind = 0x03
	KindBatch       Kind = 0x04

	KindHelloOK     Kind = 0x81
	KindRegion      Kind = 0x82
	KindRegions     Kind = 0x83
	KindBatchResult Kind = 0x84
	KindError       Kind = 0x85
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindRegister:
		return "register"
	case KindListRegions:
		return "list-regions"
	case KindBatch:
		return "batch"
	case KindHelloOK:
		return "hello-ok"
	case KindRegion:
		return "region"
	case KindRegions:
		return "regions"
	case KindBatchResult:
		return "batch-result"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("kind(0x%02x)", uint8(k))
}

// WorkRequest is a work request as it travels: fields that the op does not use
// are not encoded and decode as zero.
type WorkRequest struct {
	Op         rdma.Opcode
	RKey       uint32
	RemoteAddr uint64
	// ReadLen is the length of a READ.
	ReadLen uint32
	// Data is the payload of a WRITE (nil when empty after decoding).
	Data    []byte
	Compare uint64 // CAS
	Swap    uint64 // CAS
	Add     uint64 // FAA
}

// FromRDMA converts a verbs work request to its wire form without copying data.
func FromRDMA(wr *rdma.WorkRequest) WorkRequest {
	w := WorkRequest{Op: wr.Op, RKey: wr.RKey, RemoteAddr: wr.RemoteAddr}
	switch wr.Op {
	case rdma.OpRead:
		w.ReadLen = uint32(min(len(wr.Local), rdma.MaxTransferBytes+1))
	case rdma.OpWrite:
		w.Data = wr.Local
	case rdma.OpCompareAndSwap:
		w.Compare, w.Swap = wr.Compare, wr.Swap
	case rdma.OpFetchAndAdd:
		w.Add = wr.Add
	}
	return w
}

// Request is a decoded client frame; which fields are meaningful depends on Kind.
type Request struct {
	Kind Kind
	ID   uint64
	// Hello
	Magic   uint32
	Version uint16
	// Token authenticates the client to a memory node that requires one
	// (at most MaxTokenLen bytes; encoded after the version only when
	// set, so a Hello without one is the version-1 Hello unchanged).
	Token []byte
	// Register
	Name   string
	Length uint64
	// Batch
	WRs []WorkRequest
}

// Limits is what a memory node announces in its HelloOK.
type Limits struct {
	// Version is the protocol version the server speaks on this connection.
	Version uint16
	// MaxFrameSize is the largest frame the server accepts (≤ the protocol's).
	MaxFrameSize uint32
	// MaxInFlight is how many request frames the server handles at once per
	// connection; a client that sends more waits on TCP flow control.
	MaxInFlight uint32
	// MaxBatch, MaxBatchBytes and MaxTransferBytes are the server's verb limits.
	MaxBatch         uint32
	MaxBatchBytes    uint32
	MaxTransferBytes uint32
	// Capacity is the bytes the memory node may register in total.
	Capacity uint64
	// MaxRegions is how many regions the memory node registers at most.
	MaxRegions uint32
}

// Result is the outcome of one work request of a batch: Value for a
// successful atomic, Data for a successful READ.
type Result struct {
	Op     rdma.Opcode
	Status rdma.Status
	Value  uint64
	Data   []byte
}

// Response is a decoded server frame; which fields are meaningful depends on Kind.
type Response struct {
	Kind    Kind
	ID      uint64
	Hello   Limits        // HelloOK
	Region  rdma.Region   // Region
	Regions []rdma.Region // Regions
	Results []Result      // BatchResult
	Err     Error         // Error
}

// Code is the type of an Error reply.
type Code uint16

const (
	// CodeMalformed: the server could not decode a frame; it closes the connection.
	CodeMalformed Code = 1
	// CodeVersion: bad magic or a protocol version the server does not speak.
	CodeVersion Code = 2
	// CodeBusy: the server is at its connection limit.
	CodeBusy Code = 3
	// CodeShuttingDown: the server is shutting down.
	CodeShuttingDown Code = 4
	// CodeInvalidArgument: a well-formed request with bad arguments (empty
	// region name, zero length, a name registered with another length).
	CodeInvalidArgument Code = 5
	// CodeNoSuchRegion: the named region is not registered.
	CodeNoSuchRegion Code = 6
	// CodeOutOfMemory: the memory node cannot register that much memory or
	// that many regions.
	CodeOutOfMemory Code = 7
	// CodeBatchTooLarge: a batch over the server's limits.
	CodeBatchTooLarge Code = 8
	// CodeInternal: a server-side failure unrelated to the request.
	CodeInternal Code = 9
	// CodeUnauthorized: the memory node requires a token and the Hello
	// carried none or another one; it closes the connection.
	CodeUnauthorized Code = 10
)

// MaxTokenLen bounds a Hello's token.
const MaxTokenLen = 255

var codeNames = map[Code]string{
	CodeMalformed: "malformed frame", CodeVersion: "protocol version mismatch", CodeBusy: "server busy",
	CodeShuttingDown: "shutting down", CodeInvalidArgument: "invalid argument", CodeNoSuchRegion: "no such region",
	CodeOutOfMemory: "out of memory", CodeBatchTooLarge: "batch too large", CodeInternal: "internal error",
	CodeUnauthorized: "unauthorized",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Sentinel errors for codes that have no rdma counterpart.
var (
	ErrProtocol        = errors.New("wire: protocol error")
	ErrVersion         = errors.New("wire: protocol version mismatch")
	ErrBusy            = errors.New("wire: memory node busy")
	ErrShuttingDown    = errors.New("wire: memory node shutting down")
	ErrInvalidArgument = errors.New("wire: invalid argument")
	ErrInternal        = errors.New("wire: memory node internal error")
	// ErrUnauthorized: the memory node refused the client's token.
	ErrUnauthorized = errors.New("wire: memory node refused the client's token")
)

// Sentinel returns the error that an Error with this code unwraps to.
func (c Code) Sentinel() error {
	switch c {
	case CodeMalformed:
		return ErrProtocol
	case CodeVersion:
		return ErrVersion
	case CodeBusy:
		return ErrBusy
	case CodeShuttingDown:
		return ErrShuttingDown
	case CodeInvalidArgument:
		return ErrInvalidArgument
	case CodeNoSuchRegion:
		return rdma.ErrNoSuchRegion
	case CodeOutOfMemory:
		return rdma.ErrOutOfMemory
	case CodeBatchTooLarge:
		return rdma.ErrBatchTooLarge
	case CodeUnauthorized:
		return ErrUnauthorized
	}
	return ErrInternal
}

// Error is an error reply from the memory node.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("memory node: %s: %s", e.Code, e.Message) }

// Unwrap returns the code's sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Code.Sentinel() }

// NewError returns an Error whose message is cut to MaxErrorMessageLen bytes
// (at a UTF-8 boundary), so that it always encodes.
func NewError(code Code, msg string) Error {
	if len(msg) > MaxErrorMessageLen {
		cut := MaxErrorMessageLen
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return Error{Code: code, Message: msg}
}

// ErrMalformed is matched (errors.Is) by every decoding error.
var ErrMalformed = errors.New("wire: malformed frame")

// DecodeError reports malformed input: which frame kind (if the header could
// be read) and what was wrong.
type DecodeError struct {
	Kind   Kind
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Kind == 0 {
		return "wire: malformed frame: " + e.Reason
	}
	return fmt.Sprintf("wire: malformed %s frame: %s", e.Kind, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *DecodeError) Unwrap() error { return ErrMalformed }

// ErrEncode is matched by encoders' errors: the value breaks a protocol limit.
var ErrEncode = errors.New("wire: value cannot be encoded")
