package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"sync/atomic"
)

// slogWriter adapts memberlist's *log.Logger output to slog. memberlist
// writes lines like "[WARN] memberlist: Refuting a suspect message"; the
// bracketed prefix picks the slog level and is stripped together with the
// redundant "memberlist: " tag. log.Logger serialises calls to Write.
type slogWriter struct {
	l       *slog.Logger
	refused *atomic.Uint64
}

// refusalMarks are the memberlist log lines that report a message it
// refused because it could not authenticate it (a peer with no key, the
// wrong key, or garbage): Membership.Refused counts them.
var refusalMarks = [][]byte{[]byte("decrypt"), []byte("encryption"), []byte("No installed keys")}

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
	if w.refused != nil && level >= slog.LevelWarn {
		for _, mark := range refusalMarks {
			if bytes.Contains(msg, mark) {
				w.refused.Add(1)
				break
			}
		}
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, string(msg))
	}
	return n, nil
}

// newMemberlistLogger returns a *log.Logger for memberlist.Config.Logger
// that forwards to l with component=memberlist.
func newMemberlistLogger(l *slog.Logger, refused *atomic.Uint64) *log.Logger {
	return log.New(slogWriter{l: l.With("component", "memberlist"), refused: refused}, "", 0)
}
