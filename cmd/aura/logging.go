package main

import (
	"context"
	"fmt"
	"log/slog"
)

// atLeast is a slog handler that drops records below min before its inner
// handler sees them: a chatty component (protoactor logs every endpoint
// connect and disconnect at info) gets its own threshold above the node's.
type atLeast struct {
	min   slog.Level
	inner slog.Handler
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.inner.Enabled(ctx, l)
}

func (h atLeast) Handle(ctx context.Context, r slog.Record) error { return h.inner.Handle(ctx, r) }

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{min: h.min, inner: h.inner.WithAttrs(as)}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{min: h.min, inner: h.inner.WithGroup(name)}
}

// componentLogger returns log for one component, with records below level
// dropped (level is a --*-log-level flag's value).
func componentLogger(log *slog.Logger, component, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--%s-log-level %q: want debug, info, warn or error", component, level)
	}
	return slog.New(atLeast{min: lv, inner: log.Handler()}).With("component", component), nil
}
