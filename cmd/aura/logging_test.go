package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestComponentLoggerThreshold: a component's records below its own
// threshold are dropped even when the node logs at debug, and the others
// carry the component.
func TestComponentLoggerThreshold(t *testing.T) {
	var buf bytes.Buffer
	node := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pa, err := componentLogger(node, "protoactor", "warn")
	if err != nil {
		t.Fatal(err)
	}
	pa.Info("endpoint connected")
	pa.With("peer", "x").Warn("endpoint lost")
	node.Debug("node detail")
	out := buf.String()
	if strings.Contains(out, "endpoint connected") || !strings.Contains(out, "endpoint lost") ||
		!strings.Contains(out, "component=protoactor") || !strings.Contains(out, "node detail") {
		t.Fatalf("output:\n%s", out)
	}
	if _, err := componentLogger(node, "protoactor", "loud"); err == nil {
		t.Fatal("bad level accepted")
	}
}
