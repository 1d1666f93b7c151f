package rdma

import (
	"errors"
	"testing"
)

// TestMemoryRestore: a region restored at its recorded rkey and address
// serves verbs there; clashes and bad regions are refused; later
// registrations are placed after it.
func TestMemoryRestore(t *testing.T) {
	m := NewMemory(1 << 20)
	r := Region{Name: "records", RKey: 0xabcd, Addr: firstRegionAddr + 8*regionAlign, Length: 100}
	if err := m.Restore(r); err != nil {
		t.Fatal(err)
	}
	if got, ok := m.Lookup("records"); !ok || got != r {
		t.Fatalf("Lookup = %+v %v", got, ok)
	}
	if c := m.Execute(&WorkRequest{Op: OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr + 8, Add: 5}); c.Status != StatusSuccess {
		t.Fatal(c.Status)
	}
	for name, bad := range map[string]Region{
		"same name":   {Name: "records", RKey: 1, Addr: firstRegionAddr, Length: 8},
		"same rkey":   {Name: "other", RKey: r.RKey, Addr: firstRegionAddr, Length: 8},
		"overlap":     {Name: "other", RKey: 2, Addr: r.Addr, Length: 8},
		"zero rkey":   {Name: "other", RKey: 0, Addr: firstRegionAddr, Length: 8},
		"unaligned":   {Name: "other", RKey: 3, Addr: firstRegionAddr + 1, Length: 8},
		"below first": {Name: "other", RKey: 4, Addr: 4096, Length: 8},
		"zero length": {Name: "other", RKey: 5, Addr: firstRegionAddr, Length: 0},
		"empty name":  {Name: "", RKey: 6, Addr: firstRegionAddr, Length: 8},
		"too large":   {Name: "other", RKey: 7, Addr: firstRegionAddr + 1<<30, Length: 2 << 20},
	} {
		if err := m.Restore(bad); err == nil {
			t.Errorf("%s: restored %+v", name, bad)
		} else if name == "too large" && !errors.Is(err, ErrOutOfMemory) {
			t.Errorf("too large: %v, want ErrOutOfMemory", err)
		}
	}
	n, err := m.Register("next", 64)
	if err != nil {
		t.Fatal(err)
	}
	if n.Addr <= r.Addr {
		t.Fatalf("registered at %#x, inside or before the restored region at %#x", n.Addr, r.Addr)
	}
}
