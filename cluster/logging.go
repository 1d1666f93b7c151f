package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// slogWriter adapts memberlist's *log.Logger output to slog. memberlist
// writes lines like "[WARN] memberlist: Refuting a suspect message"; the
// bracketed prefix picks the slog level and is stripped together with the
// redundant "memberlist: " tag. log.Logger serialises calls to Write.
type slogWriter struct {
	l *slog.Logger
}

var memberlistLevels = []struct {
	prefix []byte
	level  slog.Level
}{
	{[]byte("[DEBUG] "), slog.LevelDebug},
	{[]byte("[INFO] "), slog.LevelInfo},
	{[]byte("[WARN] "), slog.LevelWarn},
	{[]byte("[ERR] "), slog.LevelError},
	{[]byte("[ERROR] "), slog.LevelError},
}

func (w slogWriter) Write(p []byte) (int, error) {
	n := len(p)
	msg := bytes.TrimRight(p, "\r\n")
	level := slog.LevelInfo
	for _, lv := range memberlistLevels {
		if rest, ok := bytes.CutPrefix(msg, lv.prefix); ok {
			level, msg = lv.level, rest
			break
		}
	}
	msg = bytes.TrimPrefix(msg, []byte("memberlist: "))
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, string(msg))
	}
	return n, nil
}

// newMemberlistLogger returns a *log.Logger for memberlist.Config.Logger
// that forwards to l with component=memberlist.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l: l.With("component", "memberlist")}, "", 0)
}
