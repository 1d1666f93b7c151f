package invariants

import "testing"

func TestCheckerAcceptsAMigration(t *testing.T) {
	c := New()
	c.Activated("a", 7, 1)
	c.Granted("a", 7, 1)
	c.Deactivated("a", 7, 1) // freeze
	c.Activated("b", 7, 3)   // handoff
	c.Granted("b", 7, 3)
	c.Deactivated("b", 7, 3)
	c.Activated("b", 7, 3) // thaw after a rolled-back move
	if r := c.Result(); !r.Pass() || r.Events != 7 || r.String() != "pass" {
		t.Fatalf("%+v %s", r, r)
	}
}

func TestCheckerFindsViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events func(c *Checker)
		i1, i4 uint64
	}{
		{"two active", func(c *Checker) { c.Activated("a", 1, 1); c.Activated("b", 1, 2) }, 1, 0},
		{"grant while frozen", func(c *Checker) { c.Activated("a", 1, 1); c.Deactivated("a", 1, 1); c.Granted("a", 1, 1) }, 1, 0},
		{"grant at another epoch", func(c *Checker) { c.Activated("a", 1, 2); c.Granted("a", 1, 1) }, 1, 1},
		{"older epoch later", func(c *Checker) {
			c.Activated("a", 1, 5)
			c.Deactivated("a", 1, 5)
			c.Activated("b", 1, 4)
		}, 0, 1},
		{"grant by a non-owner", func(c *Checker) { c.Activated("a", 1, 1); c.Granted("b", 1, 1) }, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			tc.events(c)
			r := c.Result()
			if r.I1 != tc.i1 || r.I4 != tc.i4 || r.Pass() || len(r.Samples) == 0 {
				t.Fatalf("got I1 %d I4 %d samples %v, want I1 %d I4 %d", r.I1, r.I4, r.Samples, tc.i1, tc.i4)
			}
		})
	}
}

func TestCheckerBoundsSamples(t *testing.T) {
	c := New()
	c.Activated("a", 1, 1)
	for range 100 {
		c.Granted("b", 1, 1)
	}
	if r := c.Result(); r.I1 != 100 || len(r.Samples) != MaxSamples {
		t.Fatalf("I1 %d, %d samples", r.I1, len(r.Samples))
	}
}

func TestCheckerNodeDown(t *testing.T) {
	c := New()
	c.Activated("a", 1, 1)
	c.NodeDown("a")
	c.Activated("b", 1, 2)
	c.Granted("b", 1, 2)
	if r := c.Result(); !r.Pass() {
		t.Fatal(r)
	}
}

func TestCheckerBoundsCohorts(t *testing.T) {
	c := New()
	for id := range uint64(MaxCohorts) {
		c.Activated("a", id, 1)
	}
	c.Activated("b", 0, 2) // tracked: still checked
	c.Activated("a", MaxCohorts, 1)
	c.Granted("b", MaxCohorts, 1)
	if r := c.Result(); r.Untracked != 2 || r.I1 != 1 {
		t.Fatalf("untracked %d, I1 %d", r.Untracked, r.I1)
	}
}
