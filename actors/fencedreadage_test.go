package actors

import (
	"testing"
	"time"

	"github.com/aura-runtime/aura/actors/owner"
)

// TestFencedReadAge: a node's owner lockers accept a fenced WRITE's READ for
// the configured age (owner.DefaultFencedReadAge by default), never for
// more than a quarter of the repair sweep's RepairAfter.
func TestFencedReadAge(t *testing.T) {
	def := DefaultNodeConfig("cn-0")
	repair := def.redoConfig().RepairAfter
	for _, c := range []struct {
		configured, repairAfter, want time.Duration
	}{
		{0, repair, owner.DefaultFencedReadAge},
		{300 * time.Millisecond, repair, 300 * time.Millisecond},
		{time.Minute, repair, repair / 4},
		{0, 2 * time.Second, 500 * time.Millisecond},
	} {
		if got := fencedReadAge(c.configured, c.repairAfter); got != c.want {
			t.Errorf("fencedReadAge(%v, %v) = %v, want %v", c.configured, c.repairAfter, got, c.want)
		}
	}
	if repair/4 < owner.DefaultFencedReadAge {
		t.Errorf("the default RepairAfter %v caps the default FencedReadAge", repair)
	}
}
