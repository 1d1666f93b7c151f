package rdma_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

func TestRegisterOutOfMemory(t *testing.T) {
	mem := rdma.NewMemory(4096)
	if mem.Capacity() != 4096 {
		t.Fatalf("Capacity = %d", mem.Capacity())
	}
	a, err := mem.Register("a", 4000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Register("b", 200); !errors.Is(err, rdma.ErrOutOfMemory) {
		t.Fatalf("registering past capacity = %v, want ErrOutOfMemory", err)
	}
	if _, err := mem.Register("c", 96); err != nil {
		t.Fatalf("registering exactly the rest: %v", err)
	}
	if _, err := mem.Register("d", 1); !errors.Is(err, rdma.ErrOutOfMemory) {
		t.Fatalf("registering on a full node = %v, want ErrOutOfMemory", err)
	}
	for _, n := range []uint64{math.MaxUint64, math.MaxUint64 - 6, 1 << 63} {
		if _, err := rdma.NewMemory(math.MaxUint64).Register("huge", n); !errors.Is(err, rdma.ErrOutOfMemory) {
			t.Fatalf("registering %d bytes = %v, want ErrOutOfMemory (and no panic)", n, err)
		}
	}
	// Idempotent registration still works on a full node.
	if again, err := mem.Register("a", 4000); err != nil || again != a {
		t.Fatalf("re-registering on a full node = %+v, %v", again, err)
	}
	// A failed registration registers nothing.
	if _, ok := mem.Lookup("b"); ok {
		t.Fatal("a region that did not fit was registered")
	}
}

func TestRegisterValidation(t *testing.T) {
	mem := rdma.NewMemory(1 << 20)
	for _, name := range []string{"", strings.Repeat("x", rdma.MaxRegionNameLen+1)} {
		if _, err := mem.Register(name, 8); err == nil {
			t.Errorf("registering a region named %d bytes succeeded", len(name))
		}
	}
	if _, err := mem.Register(strings.Repeat("x", rdma.MaxRegionNameLen), 8); err != nil {
		t.Errorf("a name of MaxRegionNameLen bytes: %v", err)
	}
	if _, err := mem.Register("zero", 0); err == nil {
		t.Error("a zero-length region was registered")
	}
}

func TestRegionsDistinctAndAligned(t *testing.T) {
	mem := rdma.NewMemory(1 << 24)
	var regs []rdma.Region
	for i := range 200 {
		r, err := mem.Register(strings.Repeat("r", 1+i%50)+string(rune('a'+i/50)), uint64(1+i*37))
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	keys := map[uint32]bool{}
	for i, r := range regs {
		if r.RKey == 0 || keys[r.RKey] {
			t.Fatalf("rkey %#x of region %d is zero or reused", r.RKey, i)
		}
		keys[r.RKey] = true
		if r.Addr == 0 || r.Addr%4096 != 0 {
			t.Fatalf("region %d at %#x: want a non-zero, page-aligned address", i, r.Addr)
		}
	}
	listed := mem.Regions()
	if len(listed) != len(regs) {
		t.Fatalf("Regions lists %d, want %d", len(listed), len(regs))
	}
	for i := 1; i < len(listed); i++ {
		prev, cur := listed[i-1], listed[i]
		if prev.Addr+prev.Length > cur.Addr {
			t.Fatalf("regions %q and %q overlap", prev.Name, cur.Name)
		}
	}
	for _, r := range regs {
		if got, ok := mem.Lookup(r.Name); !ok || got != r {
			t.Fatalf("Lookup(%q) = %+v, %v", r.Name, got, ok)
		}
	}
	if _, ok := mem.Lookup("nope"); ok {
		t.Fatal("Lookup of an unknown name succeeded")
	}
}

// The memory node validates what it executes itself: the TCP server hands
// it requests that no client-side check has seen.
func TestMemoryExecuteValidatesUncheckedRequests(t *testing.T) {
	mem := rdma.NewMemory(1 << 20)
	r, err := mem.Register("x", 64)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		wr   rdma.WorkRequest
		want rdma.Status
	}{
		{rdma.WorkRequest{Op: 0, RKey: r.RKey, RemoteAddr: r.Addr}, rdma.StatusRemoteInvalidRequest},
		{rdma.WorkRequest{Op: 200, RKey: r.RKey, RemoteAddr: r.Addr}, rdma.StatusRemoteInvalidRequest},
		{rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr}, rdma.StatusLocalLengthError},
		{rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr, Local: make([]byte, rdma.MaxTransferBytes+1)}, rdma.StatusLocalLengthError},
		{rdma.WorkRequest{ID: 9, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 2}, rdma.StatusSuccess},
	}
	for _, tc := range cases {
		c := mem.Execute(&tc.wr)
		if c.Status != tc.want || c.ID != tc.wr.ID || c.Op != tc.wr.Op {
			t.Errorf("Execute(%s, %d bytes) = %+v, want status %s", tc.wr.Op, len(tc.wr.Local), c, tc.want)
		}
	}
}

func TestMemDeviceStatsSumQueuePairs(t *testing.T) {
	dev := newMemDevice(t, 1<<20, nil)
	r := rdmatest.Register(t, dev, "s", 64)
	var sum rdma.Stats
	for i := range 3 {
		qp := rdmatest.NewQP(t, dev, rdma.QPConfig{})
		for range i + 1 {
			rdmatest.CAS(t, qp, r, r.Addr, 0, 1)
			rdmatest.Read(t, qp, r, r.Addr, 5)
		}
		sum = sum.Add(qp.Stats())
	}
	if got := dev.Stats(); got != sum {
		t.Fatalf("device Stats = %+v, want the sum of its QPs %+v", got, sum)
	}
	want := rdma.Stats{Reads: 6, CAS: 6, CASFailed: 5, BytesRead: 30, Doorbells: 12}
	if sum != want {
		t.Fatalf("Stats = %+v, want %+v", sum, want)
	}
	// Counts outlive the queue pairs and the device.
	dev.Close()
	if got := dev.Stats(); got != sum {
		t.Fatalf("device Stats after Close = %+v", got)
	}
}

func TestMemDeviceControlPath(t *testing.T) {
	dev := newMemDevice(t, 1<<20, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dev.RegisterRegion(ctx, "x", 8); !errors.Is(err, context.Canceled) {
		t.Fatalf("RegisterRegion with a cancelled context = %v", err)
	}
	if _, err := dev.Regions(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Regions with a cancelled context = %v", err)
	}
	if _, err := dev.RegisterRegion(context.Background(), "big", 2<<20); !errors.Is(err, rdma.ErrOutOfMemory) {
		t.Fatalf("RegisterRegion past capacity = %v, want ErrOutOfMemory", err)
	}
	if dev.Memory() == nil {
		t.Fatal("Memory() is nil")
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := dev.Regions(context.Background()); !errors.Is(err, rdma.ErrQPClosed) {
		t.Fatalf("Regions on a closed device = %v", err)
	}
}
