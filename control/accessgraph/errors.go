package accessgraph

import (
	"errors"
	"fmt"
)

// Sentinel causes of a rejected summary; a *SummaryError wraps exactly one,
// so callers test them with errors.Is.
var (
	// ErrVersion: AccessSummary.version is 0 (unset). Versions above the
	// newest known one are accepted and read with the fields this package
	// knows, as the schema promises.
	ErrVersion = errors.New("unsupported summary version")
	// ErrTooLarge: a repeated field exceeds the Graph's configured bound
	// (MaxSummaryNodes, MaxSummaryEdges, control.MaxNodes home counts).
	ErrTooLarge = errors.New("summary too large")
	// ErrInvalid: a field holds an impossible value (empty node name, node
	// index out of range, negative / NaN / infinite weight, self edge,
	// sampled_txns > total_txns).
	ErrInvalid = errors.New("invalid summary")
	// ErrTooManySenders: the summary comes from a node name beyond
	// GraphConfig.MaxSenders distinct names.
	ErrTooManySenders = errors.New("too many summary senders")
)

// SummaryError is the typed error Graph.Apply returns for a summary it
// rejects. A rejected summary changes nothing in the graph.
type SummaryError struct {
	// Node and Tick identify the summary (as sent; possibly empty).
	Node string
	Tick uint64
	// Field names the offending field, e.g. "typed_edges[3].ww".
	Field string
	// Err is one of ErrVersion, ErrTooLarge, ErrInvalid, ErrTooManySenders.
	Err error
	// Detail says what was wrong.
	Detail string
}

func (e *SummaryError) Error() string {
	return fmt.Sprintf("accessgraph: summary from %q tick %d: %s: %v: %s", e.Node, e.Tick, e.Field, e.Err, e.Detail)
}

// Unwrap returns the sentinel cause.
func (e *SummaryError) Unwrap() error { return e.Err }
