package router

import (
	"errors"
	"fmt"
	"math"

	"github.com/aura-runtime/aura/control"
)

// FallbackFunc maps a transaction's partition value (its home: for TPC-C the
// home warehouse) to a node in [0, Nodes). It must be deterministic and
// cheap: it is called on every Route. A result outside [0, Nodes) is
// replaced by home % Nodes.
type FallbackFunc func(partition uint64) int

// Config configures a Router. Start from DefaultConfig: several zero values
// are meaningful (β = 0) and the others are invalid.
type Config struct {
	// Nodes is the number of compute nodes, in [1, control.MaxNodes]. No
	// default: DefaultConfig takes it. Owners of installed maps must be below
	// it, and Route scores nodes 0..Nodes-1.
	Nodes int
	// Beta (β) weighs read cohorts against write cohorts, ≥ 0. Default 0:
	// OCC reads take no locks, so owning a read key group saves no atomic
	// (seed 000 §4.3: 0.3–0.5 when reads take cheap locks, 1 for 2PL).
	Beta float64
	// WriteWeight is A(c) for cohorts without a SetWeights entry: what each
	// written key group of an owned cohort adds to its owner's score. > 0.
	// Default 1: the score counts the transaction's write key groups the node
	// owns, i.e. the locks it would take locally.
	WriteWeight float64
	// ReadWeight is R(c) for cohorts without a SetWeights entry, ≥ 0.
	// Default 1, for the same reason; it matters only when Beta > 0.
	ReadWeight float64
	// Fallback routes transactions the overlay has nothing to say about, and
	// partitions the installed map's fallback table does not cover. Default
	// (and when nil) ModuloFallback(Nodes): home % N, the tutorial's
	// RouteByWarehouse, which spreads TPC-C's dense warehouse ids evenly.
	Fallback FallbackFunc
}

// DefaultConfig returns the defaults documented on Config for nodes nodes.
func DefaultConfig(nodes int) Config {
	c := Config{Nodes: nodes, WriteWeight: 1, ReadWeight: 1}
	if nodes >= 1 {
		c.Fallback = ModuloFallback(nodes)
	}
	return c
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes < 1 || c.Nodes > control.MaxNodes {
		errs = append(errs, fmt.Errorf("router: Nodes %d must be in [1, %d]", c.Nodes, control.MaxNodes))
	}
	if !finite(c.Beta) || c.Beta < 0 {
		errs = append(errs, fmt.Errorf("router: Beta %v must be finite and non-negative", c.Beta))
	}
	if !finite(c.WriteWeight) || c.WriteWeight <= 0 {
		errs = append(errs, fmt.Errorf("router: WriteWeight %v must be finite and positive", c.WriteWeight))
	}
	if !finite(c.ReadWeight) || c.ReadWeight < 0 {
		errs = append(errs, fmt.Errorf("router: ReadWeight %v must be finite and non-negative", c.ReadWeight))
	}
	return errors.Join(errs...)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// ModuloFallback returns the fallback partition % n: the tutorial's
// RouteByWarehouse (home_wh % N_CN). It panics if n < 1.
func ModuloFallback(n int) FallbackFunc {
	if n < 1 {
		panic(fmt.Sprintf("router: ModuloFallback(%d): need at least one node", n))
	}
	un := uint64(n)
	return func(p uint64) int { return int(p % un) }
}

// RendezvousFallback returns highest-random-weight hashing of the partition
// value over nodes 0..n-1: each (partition, node) pair gets a pseudo-random
// weight and the partition goes to the node of the highest. Partitions
// spread evenly whatever their values, and growing the cluster from n to n+1
// nodes moves only the ≈1/(n+1) of them that the new node wins. It costs n
// hashes per call. It panics if n < 1.
func RendezvousFallback(n int) FallbackFunc {
	if n < 1 {
		panic(fmt.Sprintf("router: RendezvousFallback(%d): need at least one node", n))
	}
	salts := make([]uint64, n)
	for i := range salts {
		salts[i] = control.Mix64(uint64(i) + 0x5851F42D4C957F2D)
	}
	return func(p uint64) int {
		best, bestW := 0, uint64(0)
		for i, s := range salts {
			if w := control.Mix64(p ^ s); w > bestW || i == 0 {
				best, bestW = i, w
			}
		}
		return best
	}
}
