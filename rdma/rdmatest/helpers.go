package rdmatest

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
)

// opTimeout bounds every single Exec in the suite, so that a broken backend
// fails a test instead of hanging it.
const opTimeout = 30 * time.Second

func putWord(buf []byte, v uint64) []byte {
	binary.LittleEndian.PutUint64(buf[:rdma.AtomicSize], v)
	return buf[:rdma.AtomicSize]
}

func getWord(buf []byte) uint64 { return binary.LittleEndian.Uint64(buf) }

// Register registers a region on dev or fails the test.
func Register(t testing.TB, dev rdma.Device, name string, length uint64) rdma.Region {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := dev.RegisterRegion(ctx, name, length)
	if err != nil {
		t.Fatalf("RegisterRegion(%q, %d): %v", name, length, err)
	}
	return r
}

// NewQP opens a queue pair on dev or fails the test; it is closed at cleanup.
func NewQP(t testing.TB, dev rdma.Device, cfg rdma.QPConfig) rdma.QueuePair {
	t.Helper()
	qp, err := dev.CreateQP(cfg)
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

// Exec runs a batch with rdma.Exec under a generous timeout and fails the test
// if posting or waiting fails. Completions with an error status are returned,
// not treated as failures.
func Exec(t testing.TB, qp rdma.QueuePair, wrs ...rdma.WorkRequest) []rdma.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cs, err := rdma.Exec(ctx, qp, wrs...)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	for i, c := range cs {
		if c.ID != wrs[i].ID || c.Op != wrs[i].Op {
			t.Fatalf("completion %d is (id %d, %s), want (id %d, %s)", i, c.ID, c.Op, wrs[i].ID, wrs[i].Op)
		}
	}
	return cs
}

// MustExec is Exec that also fails the test on any completion error.
func MustExec(t testing.TB, qp rdma.QueuePair, wrs ...rdma.WorkRequest) []rdma.Completion {
	t.Helper()
	cs := Exec(t, qp, wrs...)
	if err := rdma.FirstError(cs); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	return cs
}

// Read reads n bytes at addr of region r.
func Read(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr uint64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	MustExec(t, qp, rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: addr, Local: buf})
	return buf
}

// Write writes data at addr of region r.
func Write(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr uint64, data []byte) {
	t.Helper()
	MustExec(t, qp, rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: addr, Local: data})
}

// ReadWord reads the 8-byte little-endian word at addr.
func ReadWord(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr uint64) uint64 {
	t.Helper()
	return getWord(Read(t, qp, r, addr, rdma.AtomicSize))
}

// WriteWord writes the 8-byte little-endian word v at addr.
func WriteWord(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr, v uint64) {
	t.Helper()
	Write(t, qp, r, addr, putWord(make([]byte, rdma.AtomicSize), v))
}

// CAS runs one compare-and-swap and returns its completion.
func CAS(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr, compare, swap uint64) rdma.Completion {
	t.Helper()
	return MustExec(t, qp, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: addr, Compare: compare, Swap: swap})[0]
}

// FAA runs one fetch-and-add and returns its completion.
func FAA(t testing.TB, qp rdma.QueuePair, r rdma.Region, addr, add uint64) rdma.Completion {
	t.Helper()
	return MustExec(t, qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: addr, Add: add})[0]
}

// DeviceStats returns the device-wide counters when the device offers them
// (a Stats() rdma.Stats method, as MemDevice has).
func DeviceStats(dev rdma.Device) (rdma.Stats, bool) {
	s, ok := dev.(interface{ Stats() rdma.Stats })
	if !ok {
		return rdma.Stats{}, false
	}
	return s.Stats(), true
}
