package sim

import (
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
)

// manifestSize is the size of m's full encoding: v2, or v1 when it has no
// cohorts.
func manifestSize(m *control.OwnerMap) uint64 {
	v := 2
	if len(m.Cohorts) == 0 {
		v = 1
	}
	return uint64(manifest.Size(m, v))
}
