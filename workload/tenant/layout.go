package tenant

import (
	"math/rand/v2"
	"slices"

	"github.com/aura-runtime/aura/workload/kvrec"
)

// layout is the tenant → key group assignment and the rank → tenant
// permutation of one epoch. Immutable once built.
type layout struct {
	epoch int
	// byTenant holds tenant t's key groups at [t·K, (t+1)·K).
	byTenant []uint64
	// owner[i] is the tenant owning populated[i].
	owner []int32
	// hot maps a Zipfian rank (0-based) to a tenant; nil = identity.
	hot []int32
}

// populate draws n distinct key groups of [0, space) and returns them in
// draw order.
func populate(seed, space uint64, n int) []uint64 {
	rng := rand.New(rand.NewPCG(seed, 0x7e4a47))
	seen := make(map[uint64]struct{}, n)
	out := make([]uint64, 0, n)
	for len(out) < n {
		kg := rng.Uint64N(space)
		if _, dup := seen[kg]; dup {
			continue
		}
		seen[kg] = struct{}{}
		out = append(out, kg)
	}
	return out
}

func (w *Workload) initialLayout(drawn []uint64) *layout {
	l := &layout{byTenant: drawn, owner: make([]int32, len(drawn))}
	for i, kg := range drawn {
		l.owner[w.index(kg)] = int32(i / w.cfg.KGsPerTenant)
	}
	return l
}

// next derives the layout of epoch prev.epoch+1.
func (w *Workload) next(prev *layout) *layout {
	e := prev.epoch + 1
	rng := rand.New(rand.NewPCG(w.cfg.LayoutSeed, kvrec.Mix64(uint64(e))))
	l := &layout{epoch: e, byTenant: prev.byTenant, owner: prev.owner, hot: prev.hot}
	T, K := w.cfg.Tenants, w.cfg.KGsPerTenant
	switch w.cfg.DriftMode {
	case DriftHot:
		perm := make([]int32, T)
		for i := range perm {
			perm[i] = int32(i)
		}
		rng.Shuffle(T, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		l.hot = perm
	default: // DriftRemap
		m := w.driftTenants()
		tenants := make([]int, T)
		for i := range tenants {
			tenants[i] = i
		}
		for i := range m { // partial Fisher–Yates: the first m are the chosen
			j := i + rng.IntN(T-i)
			tenants[i], tenants[j] = tenants[j], tenants[i]
		}
		chosen := tenants[:m]
		pool := make([]uint64, 0, m*K)
		for _, t := range chosen {
			pool = append(pool, prev.byTenant[t*K:(t+1)*K]...)
		}
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		l.byTenant = slices.Clone(prev.byTenant)
		l.owner = slices.Clone(prev.owner)
		for n, t := range chosen {
			copy(l.byTenant[t*K:(t+1)*K], pool[n*K:(n+1)*K])
			for _, kg := range pool[n*K : (n+1)*K] {
				l.owner[w.index(kg)] = int32(t)
			}
		}
	}
	return l
}

// driftTenants is how many tenants a remap drift reshuffles.
func (w *Workload) driftTenants() int {
	T := w.cfg.Tenants
	m := int(w.cfg.DriftFraction*float64(T) + 0.5)
	return min(T, max(m, 2))
}

// tenantOfRank maps a Zipfian rank to a tenant.
func (l *layout) tenantOfRank(rank int) int {
	if l.hot == nil {
		return rank
	}
	return int(l.hot[rank])
}
