package rdma

import (
	"errors"
	"fmt"
)

// Opcode names a one-sided verb, as IBV_WR_* does in libibverbs.
type Opcode uint8

const (
	// OpRead copies len(WorkRequest.Local) bytes from remote memory (IBV_WR_RDMA_READ).
	OpRead Opcode = iota + 1
	// OpWrite copies WorkRequest.Local to remote memory (IBV_WR_RDMA_WRITE).
	OpWrite
	// OpCompareAndSwap swaps an aligned 8-byte word if it equals Compare and returns
	// the word's prior value (IBV_WR_ATOMIC_CMP_AND_SWP).
	OpCompareAndSwap
	// OpFetchAndAdd adds Add to an aligned 8-byte word and returns its prior value
	// (IBV_WR_ATOMIC_FETCH_AND_ADD).
	OpFetchAndAdd
)

// String names the opcode the way metrics and logs spell it.
func (o Opcode) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpCompareAndSwap:
		return "cas"
	case OpFetchAndAdd:
		return "faa"
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// IsAtomic reports whether the opcode is an 8-byte atomic, which NICs serialise.
func (o Opcode) IsAtomic() bool { return o == OpCompareAndSwap || o == OpFetchAndAdd }

// Limits that every backend enforces. They exist so that no request, batch or
// reply can grow without bound; the TCP protocol relies on them to size frames.
const (
	// AtomicSize is the width of CAS and FAA operands, in bytes, as on every RDMA NIC.
	AtomicSize = 8
	// MaxTransferBytes caps one READ or WRITE. Real NICs allow up to 2 GiB per
	// work request; records here are at most a few KiB, and a 1 MiB cap keeps a
	// doorbell batch (MaxBatch of them) inside the TCP protocol's frame limit.
	MaxTransferBytes = 1 << 20
	// MaxBatch caps the work requests rung with one doorbell. The transaction
	// engine batches at most a few dozen (one TPC-C NewOrder locks ≤ 32 records).
	MaxBatch = 256
	// MaxBatchBytes caps the payload bytes (READ lengths plus WRITE data) of one
	// doorbell batch, so that one batch fits one protocol frame.
	MaxBatchBytes = 8 << 20
	// DefaultSendQueueDepth is the default cap on posted but not yet polled work
	// requests per queue pair (ibv_qp_cap.max_send_wr); 1024 is a common setting.
	DefaultSendQueueDepth = 1024
)

// WorkRequest is one verb to run on the memory node (struct ibv_send_wr).
type WorkRequest struct {
	// ID is returned unchanged in the work request's Completion (wr_id).
	ID uint64
	// Op is the verb.
	Op Opcode
	// RKey names the remote memory region; it must match a registered region.
	RKey uint32
	// RemoteAddr is the remote virtual address; it must lie inside the region
	// named by RKey and, for atomics, be 8-byte aligned.
	RemoteAddr uint64
	// Local is the local buffer: READ fills it (its length is the read length),
	// WRITE sends it. Atomics ignore it. The buffer must not be touched until the
	// work request's completion has been polled, as with registered local memory.
	Local []byte
	// Compare is the value a CAS expects at RemoteAddr.
	Compare uint64
	// Swap is the value a CAS stores when the comparison succeeds.
	Swap uint64
	// Add is the addend of a FAA (wrapping, unsigned).
	Add uint64
}

// Status is the outcome of a work request, mirroring enum ibv_wc_status.
type Status uint8

const (
	// StatusSuccess is IBV_WC_SUCCESS.
	StatusSuccess Status = iota
	// StatusRemoteAccessError is IBV_WC_REM_ACCESS_ERR: unknown rkey, or an
	// address range outside the region.
	StatusRemoteAccessError
	// StatusRemoteInvalidRequest is IBV_WC_REM_INV_REQ_ERR: a misaligned atomic
	// or a request the memory node cannot parse.
	StatusRemoteInvalidRequest
	// StatusLocalLengthError is IBV_WC_LOC_LEN_ERR: a READ or WRITE length of zero
	// or above MaxTransferBytes.
	StatusLocalLengthError
	// StatusTransportError is IBV_WC_RETRY_EXC_ERR: the connection to the memory
	// node was lost while the request was outstanding. Its effect is unknown: it
	// may or may not have been applied.
	StatusTransportError
	// StatusFlushed is IBV_WC_WR_FLUSH_ERR: the queue pair was closed or entered
	// the error state before the request ran. It was not applied.
	StatusFlushed
)

var statusNames = [...]string{
	StatusSuccess:              "success",
	StatusRemoteAccessError:    "remote access error",
	StatusRemoteInvalidRequest: "remote invalid request",
	StatusLocalLengthError:     "local length error",
	StatusTransportError:       "transport error",
	StatusFlushed:              "flushed",
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Sentinel errors, one per failing Status; match them with errors.Is.
var (
	ErrRemoteAccess   = errors.New("rdma: remote access error (bad rkey or out of region bounds)")
	ErrInvalidRequest = errors.New("rdma: remote invalid request (misaligned atomic or malformed request)")
	ErrLength         = errors.New("rdma: local length error")
	ErrConnectionLost = errors.New("rdma: connection to memory node lost; outcome unknown")
	ErrFlushed        = errors.New("rdma: work request flushed; not applied")
)

// Errors returned when posting, before any work request runs.
var (
	// ErrQPClosed: the queue pair (or its device) was closed.
	ErrQPClosed = errors.New("rdma: queue pair closed")
	// ErrSendQueueFull: posting would exceed the send queue depth; poll completions first.
	ErrSendQueueFull = errors.New("rdma: send queue full")
	// ErrBatchTooLarge: more than MaxBatch work requests or MaxBatchBytes of payload in one doorbell.
	ErrBatchTooLarge = errors.New("rdma: doorbell batch too large")
	// ErrBadOpcode: a work request with an unknown opcode.
	ErrBadOpcode = errors.New("rdma: unknown opcode")
	// ErrNoSuchRegion: a region name that the memory node has not registered.
	ErrNoSuchRegion = errors.New("rdma: no such region")
	// ErrOutOfMemory: the memory node cannot register a region that large.
	ErrOutOfMemory = errors.New("rdma: memory node out of memory")
)

func (s Status) sentinel() error {
	switch s {
	case StatusSuccess:
		return nil
	case StatusRemoteAccessError:
		return ErrRemoteAccess
	case StatusRemoteInvalidRequest:
		return ErrInvalidRequest
	case StatusLocalLengthError:
		return ErrLength
	case StatusTransportError:
		return ErrConnectionLost
	case StatusFlushed:
		return ErrFlushed
	}
	return fmt.Errorf("rdma: unknown completion status %d", uint8(s))
}

// Completion reports one finished work request (struct ibv_wc).
type Completion struct {
	// ID is the work request's ID.
	ID uint64
	// Op is the work request's verb.
	Op Opcode
	// Status is the outcome; anything but StatusSuccess is an error (see Err).
	Status Status
	// Value is, for CAS and FAA, the word's value before the operation. A CAS
	// succeeded exactly when Value equals the request's Compare.
	Value uint64
}

// Err returns nil for a successful completion and a *CompletionError otherwise.
func (c Completion) Err() error {
	if c.Status == StatusSuccess {
		return nil
	}
	return &CompletionError{ID: c.ID, Op: c.Op, Status: c.Status}
}

// CompletionError is the typed error of a failed work request.
type CompletionError struct {
	ID     uint64
	Op     Opcode
	Status Status
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("rdma: %s work request %d failed: %s", e.Op, e.ID, e.Status)
}

// Unwrap lets errors.Is match the sentinel of the status (ErrRemoteAccess, …).
func (e *CompletionError) Unwrap() error { return e.Status.sentinel() }

// Region describes registered memory on a memory node (the address and rkey a
// memory node hands out after ibv_reg_mr).
type Region struct {
	// Name identifies the region among those of one memory node ("records", "locks", …).
	Name string
	// RKey authorises remote access to the region.
	RKey uint32
	// Addr is the region's first remote address.
	Addr uint64
	// Length is the region's size in bytes.
	Length uint64
}

// Contains reports whether [addr, addr+n) lies inside the region.
func (r Region) Contains(addr, n uint64) bool {
	return addr >= r.Addr && n <= r.Length && addr-r.Addr <= r.Length-n
}

// ValidateLocal checks what a NIC checks before a work request leaves the host:
// a known opcode and a local length within bounds. Remote checks (rkey, bounds,
// alignment) belong to the memory node.
func ValidateLocal(wr *WorkRequest) error {
	switch wr.Op {
	case OpRead, OpWrite:
		if len(wr.Local) == 0 || len(wr.Local) > MaxTransferBytes {
			return fmt.Errorf("%w: %s of %d bytes (allowed 1..%d)", ErrLength, wr.Op, len(wr.Local), MaxTransferBytes)
		}
	case OpCompareAndSwap, OpFetchAndAdd:
	default:
		return fmt.Errorf("%w %d", ErrBadOpcode, uint8(wr.Op))
	}
	return nil
}

// ValidateBatch checks a doorbell batch against MaxBatch and MaxBatchBytes and
// every work request with ValidateLocal.
func ValidateBatch(wrs []WorkRequest) error {
	if len(wrs) > MaxBatch {
		return fmt.Errorf("%w: %d work requests (max %d)", ErrBatchTooLarge, len(wrs), MaxBatch)
	}
	total := 0
	for i := range wrs {
		if err := ValidateLocal(&wrs[i]); err != nil {
			return fmt.Errorf("work request %d: %w", i, err)
		}
		total += len(wrs[i].Local)
	}
	if total > MaxBatchBytes {
		return fmt.Errorf("%w: %d payload bytes (max %d)", ErrBatchTooLarge, total, MaxBatchBytes)
	}
	return nil
}
