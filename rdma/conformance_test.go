package rdma_test

import (
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

// newMemDevice returns a MemDevice on a fresh memory node of the given
// capacity, closed at cleanup.
func newMemDevice(t testing.TB, capacity uint64, cost *rdma.CostModel) *rdma.MemDevice {
	t.Helper()
	dev, err := rdma.NewMemDevice(rdma.NewMemory(capacity), rdma.MemConfig{Cost: cost})
	if err != nil {
		t.Fatalf("NewMemDevice: %v", err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

func TestConformanceMemDevice(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
		return newMemDevice(t, rdmatest.ConformanceCapacity, nil)
	})
}

// With the cost model on, completions arrive later than Post returns; every
// semantic promise must still hold.
func TestConformanceMemDeviceCostModel(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
		m := rdma.DefaultCostModel()
		return newMemDevice(t, rdmatest.ConformanceCapacity, &m)
	})
}
