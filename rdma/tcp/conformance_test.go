package tcp

import (
	"testing"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/rdmatest"
)

// The TCP backend passes the suite every rdma.Device must pass.
func TestConformance(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
		ts := startServer(t, rdma.NewMemory(rdmatest.ConformanceCapacity), ServerConfig{})
		return dial(t, ts.addr, ClientConfig{})
	})
}

// With the server applying the cost model, responses are held back and may
// leave out of request order; every promise must still hold.
func TestConformanceCostModel(t *testing.T) {
	rdmatest.RunConformance(t, func(t *testing.T) rdma.Device {
		m := rdma.DefaultCostModel()
		ts := startServer(t, rdma.NewMemory(rdmatest.ConformanceCapacity), ServerConfig{Cost: &m})
		return dial(t, ts.addr, ClientConfig{})
	})
}
