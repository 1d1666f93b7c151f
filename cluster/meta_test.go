package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestMetaRoundTrip(t *testing.T) {
	cases := []Meta{
		{},
		{Incarnation: 1},
		{RemoteAddr: "127.0.0.1:8090", Roles: []string{"cn"}, Incarnation: 1764444444000000000},
		{RemoteAddr: "[::1]:1", Roles: []string{"planner", "cn", "mn"}, Incarnation: ^uint64(0)},
		{RemoteAddr: "cn-7.aura.internal:65535", Roles: []string{"a_b-1"}},
	}
	for _, m := range cases {
		b, err := EncodeMeta(m)
		if err != nil {
			t.Fatalf("EncodeMeta(%+v): %v", m, err)
		}
		if len(b) != m.EncodedLen() {
			t.Errorf("EncodeMeta(%+v): %d bytes, EncodedLen says %d", m, len(b), m.EncodedLen())
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatalf("DecodeMeta(EncodeMeta(%+v)): %v", m, err)
		}
		if !got.Equal(m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
		// Roles come back sorted: the encoding is canonical.
		b2, err := EncodeMeta(got)
		if err != nil || !bytes.Equal(b, b2) {
			t.Errorf("re-encoding differs: %x vs %x (%v)", b, b2, err)
		}
	}
}

func TestMetaTooLargeRefused(t *testing.T) {
	big := Meta{RemoteAddr: "h:1"}
	for i := 0; i < MaxRoles; i++ {
		big.Roles = append(big.Roles, strings.Repeat(string(rune('a'+i)), MaxRoleLen))
	}
	if n := big.EncodedLen(); n <= MaxMetaSize {
		t.Fatalf("test meta is only %d bytes", n)
	}
	_, err := EncodeMeta(big)
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("EncodeMeta(big) = %v, want ErrMetaTooLarge", err)
	}
	if !strings.Contains(err.Error(), "512") {
		t.Errorf("error does not name the limit: %v", err)
	}

	// Config validation and New refuse it too, naming the field.
	cfg := DefaultTestConfig()
	cfg.NodeName = "big"
	cfg.Meta = big
	_, err = New(cfg)
	if !errors.Is(err, ErrMetaTooLarge) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Meta") {
		t.Fatalf("New with big meta = %v, want ErrInvalidConfig+ErrMetaTooLarge naming Meta", err)
	}

	// The decoder refuses oversized input before looking at it.
	if _, err := DecodeMeta(make([]byte, MaxMetaSize+1)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("DecodeMeta(513 bytes) = %v, want ErrMetaTooLarge", err)
	}
}

func TestMetaInvalidFieldsRefused(t *testing.T) {
	bad := []Meta{
		{RemoteAddr: "no-port"},
		{RemoteAddr: ":80"},
		{RemoteAddr: "h:0"},
		{RemoteAddr: "h:99999"},
		{RemoteAddr: "h :80"},
		{RemoteAddr: strings.Repeat("h", 300) + ":1"},
		{Roles: []string{""}},
		{Roles: []string{"CN"}},
		{Roles: []string{"cn", "cn"}},
		{Roles: []string{strings.Repeat("r", MaxRoleLen+1)}},
		{Roles: make([]string, MaxRoles+1)},
	}
	for _, m := range bad {
		if _, err := EncodeMeta(m); !errors.Is(err, ErrBadMeta) {
			t.Errorf("EncodeMeta(%+v) = %v, want ErrBadMeta", m, err)
		}
	}
}

func TestDecodeMetaVersions(t *testing.T) {
	v1, err := EncodeMeta(Meta{RemoteAddr: "10.0.0.1:9000", Roles: []string{"cn", "planner"}, Incarnation: 42})
	if err != nil {
		t.Fatal(err)
	}
	// A later version appends fields; a v1 reader skips them.
	v2 := append([]byte{2}, v1[1:]...)
	v2 = append(v2, 0xde, 0xad, 0xbe, 0xef)
	m, err := DecodeMeta(v2)
	if err != nil || m.RemoteAddr != "10.0.0.1:9000" || m.Incarnation != 42 || !m.HasRole("planner") {
		t.Fatalf("DecodeMeta(v2) = %+v, %v", m, err)
	}
	// Trailing bytes on v1 are corruption.
	if _, err := DecodeMeta(append(bytes.Clone(v1), 0)); !errors.Is(err, ErrBadMeta) {
		t.Errorf("v1 with trailing byte: %v, want ErrBadMeta", err)
	}
	// Version 0, empty, truncated, unsorted roles.
	v0 := bytes.Clone(v1)
	v0[0] = 0
	unsorted, _ := EncodeMeta(Meta{Roles: []string{"a", "b"}})
	unsorted[len(unsorted)-1], unsorted[len(unsorted)-3] = 'a', 'b'
	for name, in := range map[string][]byte{
		"version0": v0, "empty": nil, "unsorted": unsorted,
	} {
		if _, err := DecodeMeta(in); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: %v, want ErrBadMeta", name, err)
		}
	}
	for i := 0; i < len(v1); i++ {
		if _, err := DecodeMeta(v1[:i]); !errors.Is(err, ErrBadMeta) {
			t.Errorf("truncated to %d bytes: %v, want ErrBadMeta", i, err)
		}
	}
}

// FuzzDecodeMeta: the decoder never panics, and whatever it accepts is valid
// metadata whose canonical encoding is exactly the v1 prefix it consumed.
// Seed corpus: testdata/fuzz/FuzzDecodeMeta.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{},
		{RemoteAddr: "127.0.0.1:8090", Roles: []string{"cn", "planner"}, Incarnation: 7},
	} {
		b, err := EncodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, n, err := decodeMeta(data)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if data[0] == 1 && n != len(data) {
			t.Fatalf("v1 accepted with %d trailing bytes", len(data)-n)
		}
		b, err := EncodeMeta(m)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(b[1:], data[1:n]) {
			t.Fatalf("re-encoding %x differs from input prefix %x", b, data[:n])
		}
		m2, err := DecodeMeta(b)
		if err != nil || !m2.Equal(m) {
			t.Fatalf("second round trip: %+v, %v (want %+v)", m2, err, m)
		}
	})
}

func TestLeaveMsgCodec(t *testing.T) {
	for _, l := range []leaveMsg{
		{kind: msgLeaveIntent, incarnation: 9, leaver: "cn-1"},
		{kind: msgLeaveAck, incarnation: ^uint64(0), leaver: "cn-1", acker: "cn-2"},
	} {
		b := l.encode()
		got, ok := decodeLeaveMsg(b)
		if !ok || got != l {
			t.Errorf("round trip %+v: %+v, %v", l, got, ok)
		}
		for i := 0; i < len(b); i++ {
			if _, ok := decodeLeaveMsg(b[:i]); ok {
				t.Errorf("%+v truncated to %d bytes accepted", l, i)
			}
		}
		if _, ok := decodeLeaveMsg(append(b, 0)); ok {
			t.Errorf("%+v with a trailing byte accepted", l)
		}
	}
	if _, ok := decodeLeaveMsg([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}); ok {
		t.Error("unknown kind accepted")
	}
}

// FuzzDecodeLeaveMsg: a gossip user message (leave intents and their
// acknowledgements, from any peer that passes memberlist's checks) never
// panics the decoder, and what it accepts is exactly the encoding of what
// it decoded: nothing trailing, no name longer than a node name.
func FuzzDecodeLeaveMsg(f *testing.F) {
	f.Add(leaveMsg{kind: msgLeaveIntent, incarnation: 9, leaver: "cn-1"}.encode())
	f.Add(leaveMsg{kind: msgLeaveAck, incarnation: ^uint64(0), leaver: "cn-1", acker: "cn-2"}.encode())
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		l, ok := decodeLeaveMsg(data)
		if !ok {
			return
		}
		if !bytes.Equal(l.encode(), data) {
			t.Fatalf("accepted %x as %+v, which encodes as %x", data, l, l.encode())
		}
		if len(l.leaver) > MaxNodeNameLen || len(l.acker) > MaxNodeNameLen {
			t.Fatalf("name above %d bytes accepted: %+v", MaxNodeNameLen, l)
		}
	})
}

func TestLeaveIntentsBounded(t *testing.T) {
	m, err := New(testConfig("bounded"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < 2*maxLeaveIntents; i++ {
		m.recordIntentLocked(fmt.Sprintf("n%d", i), 1, now)
	}
	if len(m.intents) != maxLeaveIntents {
		t.Fatalf("%d intents kept, cap %d", len(m.intents), maxLeaveIntents)
	}
	// Expired intents make room; a matching one turns a removal into a leave
	// exactly once, a stale incarnation does not.
	m.recordIntentLocked("late", 7, now.Add(m.leaveIntentTTL()+time.Second))
	if _, ok := m.intents["late"]; !ok {
		t.Fatal("expired intents were not evicted")
	}
	later := now.Add(m.leaveIntentTTL() + 2*time.Second)
	if !m.takeIntentLocked(Member{Name: "late", Meta: Meta{Incarnation: 7}}, later) {
		t.Error("matching intent not taken")
	}
	if m.takeIntentLocked(Member{Name: "late", Meta: Meta{Incarnation: 7}}, later) {
		t.Error("intent taken twice")
	}
	m.recordIntentLocked("old", 1, later)
	if m.takeIntentLocked(Member{Name: "old", Meta: Meta{Incarnation: 2}}, later) {
		t.Error("intent of another incarnation taken")
	}
}
