package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigsValid(t *testing.T) {
	lan := DefaultLANConfig()
	lan.NodeName = "cn-1"
	if err := lan.Validate(); err != nil {
		t.Errorf("DefaultLANConfig: %v", err)
	}
	tc := DefaultTestConfig()
	tc.NodeName = "t1"
	if err := tc.Validate(); err != nil {
		t.Errorf("DefaultTestConfig: %v", err)
	}
	if tc.BindAddr != "127.0.0.1" || tc.BindPort != 0 {
		t.Errorf("test config binds %s:%d, want loopback port 0", tc.BindAddr, tc.BindPort)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := DefaultTestConfig()
	c.NodeName = "bad name!"
	c.BindAddr = "not-an-ip"
	c.BindPort = 70000
	c.AdvertiseAddr = "also-not"
	c.AdvertisePort = -1
	c.Seeds = []string{"no-port", "h:0", "127.0.0.1:7946", "127.0.0.1:7946"}
	c.Meta = Meta{Roles: []string{"Bad Role"}}
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.SuspicionMult = 0
	c.GossipInterval = 0
	c.GossipNodes = 0
	c.PushPullInterval = -1
	c.TCPTimeout = 0
	c.DeadNodeReclaimTime = -1
	c.JoinTimeout = 0
	c.JoinRetries = -1
	c.JoinBackoff = time.Second
	c.JoinBackoffMax = time.Millisecond
	c.LeaveTimeout = 0
	c.EventQueueLen = 0

	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken config")
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("error does not wrap ErrInvalidConfig: %v", err)
	}
	if !errors.Is(err, ErrBadMeta) {
		t.Errorf("error does not wrap ErrBadMeta: %v", err)
	}
	msg := err.Error()
	for _, field := range []string{
		"NodeName", "BindAddr", "BindPort", "AdvertiseAddr", "AdvertisePort",
		"Seeds[0]", "Seeds[1]", "Seeds[3]", "Meta", "ProbeTimeout", "SuspicionMult",
		"GossipInterval", "GossipNodes", "PushPullInterval", "TCPTimeout",
		"DeadNodeReclaimTime", "JoinTimeout", "JoinRetries", "JoinBackoffMax",
		"LeaveTimeout", "EventQueueLen",
	} {
		if !strings.Contains(msg, field+":") {
			t.Errorf("problem with %s not reported", field)
		}
	}
	if strings.Contains(msg, "Seeds[2]") {
		t.Errorf("valid seed reported: %v", msg)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n < 21 {
		t.Errorf("%d problems reported, want >= 21:\n%v", n, msg)
	}

	// The zero Config is invalid and New refuses it.
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New(Config{}) = %v, want ErrInvalidConfig", err)
	}
}

// captureHandler records slog records.
type captureHandler struct {
	recs *[]slog.Record
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	*h.recs = append(*h.recs, r)
	return nil
}
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h captureHandler) WithGroup(string) slog.Handler      { return h }

func TestMemberlistLogRoutedToSlog(t *testing.T) {
	var recs []slog.Record
	l := newMemberlistLogger(slog.New(captureHandler{&recs}), nil)
	l.Printf("[DEBUG] memberlist: d")
	l.Printf("[INFO] memberlist: i")
	l.Printf("[WARN] memberlist: w")
	l.Printf("[ERR] memberlist: e")
	l.Printf("plain")
	want := []struct {
		level slog.Level
		msg   string
	}{{slog.LevelDebug, "d"}, {slog.LevelInfo, "i"}, {slog.LevelWarn, "w"}, {slog.LevelError, "e"}, {slog.LevelInfo, "plain"}}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if recs[i].Level != w.level || recs[i].Message != w.msg {
			t.Errorf("record %d = %v %q, want %v %q", i, recs[i].Level, recs[i].Message, w.level, w.msg)
		}
	}

	// Levels filter as configured.
	var buf bytes.Buffer
	l = newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	l.Printf("[DEBUG] memberlist: hidden")
	l.Printf("[WARN] memberlist: shown")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "shown") || !strings.Contains(out, "component=memberlist") {
		t.Errorf("filtered output: %q", out)
	}
}
