package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aura-runtime/aura/rules"
)

// PartitionRoutePath is the management API's route endpoint (SPEC §8):
// GET PartitionRoutePath?rule=NAME&key=K1,K2[&epoch=E].
const PartitionRoutePath = "/management/partition-route"

// RemoveNodePath is the management API's node removal endpoint:
// POST RemoveNodePath?node=NAME (see API.RemoveNode).
const RemoveNodePath = "/management/nodes/remove"

// Error codes of the management API's {code, message} bodies (SPEC §8),
// with the HTTP status each comes with.
const (
	CodeBadRequest      = "BadRequest"      // 400: a malformed or missing parameter
	CodeNotAuthorized   = "NotAuthorized"   // 401: a missing or wrong bearer token
	CodeNoSuchRule      = "NoSuchRule"      // 404: the node serves no rule of that name
	CodeNoSuchPartition = "NoSuchPartition" // 404: the key names a partition the workload lacks, or one with no live owner
	CodeStaleEpoch      = "StaleEpoch"      // 409: the node's OwnerMap is older than the epoch asked for
	CodeTokenRequired   = "TokenRequired"   // 403: the API has no token, and changing the cluster needs one
	CodeNoSuchNode      = "NoSuchNode"      // 404: no roster names the node and the planner does not see it live
	CodeNodeLive        = "NodeLive"        // 409: the planner's membership lists the node as live
	CodeTooManyRemovals = "TooManyRemovals" // 409: the planner keeps as many removals as a roster has slots
	CodeNoPlanner       = "NoPlanner"       // 503: no planner placed, or it did not answer in time
)

// RemoveResult is the body of a successful POST RemoveNodePath.
type RemoveResult struct {
	// Node is the removed node; Planner the planner that removed it.
	Node    string `json:"node"`
	Planner string `json:"planner"`
	// Live and Known are the compute nodes the planner counts after the
	// removal, and Quorum whether the live ones are a strict majority of
	// the known ones (the planner publishes maps only then, and moves the
	// removed node's cohorts only once its lease has run out).
	Live   int  `json:"live"`
	Known  int  `json:"known"`
	Quorum bool `json:"quorum"`
}

// Route sources: how a PartitionRoute's worker was chosen.
const (
	// SourceCohort: the key group is in a cohort of the OwnerMap, owned by
	// the worker.
	SourceCohort = "cohort"
	// SourceFallbackTable: the key group is in no cohort; the OwnerMap's
	// fallback table names the worker of the partition value.
	SourceFallbackTable = "fallback_table"
	// SourceStaticFallback: the key group is in no cohort and the map has
	// no fallback table; the workload's static fallback (StaticFallback)
	// over the topology's workers chose the worker, as Client.Choose does.
	SourceStaticFallback = "static_fallback"
)

// PartitionRoute is the body of GET PartitionRoutePath.
type PartitionRoute struct {
	// Rule and Key echo the request; Table is the key's table.
	Rule  string   `json:"rule"`
	Key   []uint64 `json:"key"`
	Table string   `json:"table"`
	// KeyGroup and PartitionValue are what the rule maps the key to.
	KeyGroup       uint64 `json:"key_group"`
	PartitionValue uint64 `json:"partition_value"`
	// PartitionID is the cohort holding the key group (partition = cohort,
	// SPEC §8); null when the key group is in no cohort (Source says which
	// fallback routed it).
	PartitionID *uint64 `json:"partition_id"`
	// Source is SourceCohort, SourceFallbackTable or SourceStaticFallback.
	Source string `json:"source"`
	// WorkerID, WorkerIndex and Address name the worker (compute node) to
	// send the key's transactions to, as in Topology.
	WorkerID    string `json:"worker_id"`
	WorkerIndex int    `json:"worker_index"`
	Address     string `json:"address"`
	// Epoch is the OwnerMap epoch the answer is from (0: no map yet).
	Epoch uint64 `json:"epoch"`
	// AnsweredBy is the node that answered.
	AnsweredBy string `json:"answered_by"`
}

// IsCode reports whether err carries a management API error of that code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// API is a caller of one node's management API; its methods are safe for
// concurrent use. The token, if any, goes in an Authorization: Bearer
// header and appears in no error or log line.
type API struct {
	// Addr is the API's HOST:PORT (aura node --http).
	Addr string
	// Token is the bearer token ("" when the API has none).
	Token string
	// HTTP makes the requests; nil: a client with a 5 s timeout.
	HTTP *http.Client
	// MaxResponseBytes bounds a response body; 0: 1 MiB.
	MaxResponseBytes int64
}

// DefaultAPITimeout bounds one API request made with a nil API.HTTP.
const DefaultAPITimeout = 5 * time.Second

// NewAPI returns an API for u's http_addr and token.
func NewAPI(u URL) *API { return &API{Addr: u.HTTPAddr, Token: u.Token} }

// FetchTopology reads the topology of the cluster u names.
func FetchTopology(ctx context.Context, u URL) (Topology, error) { return NewAPI(u).Topology(ctx) }

// Topology reads GET /management/topology.
func (a *API) Topology(ctx context.Context) (Topology, error) {
	return callJSON[Topology](ctx, a, http.MethodGet, TopologyPath, "topology")
}

// PartitionRoute asks where key goes under rule. With minEpoch > 0 the node
// answers StaleEpoch (IsCode(err, CodeStaleEpoch)) while its OwnerMap is
// older than that.
func (a *API) PartitionRoute(ctx context.Context, rule string, key []uint64, minEpoch uint64) (PartitionRoute, error) {
	if rule == "" {
		return PartitionRoute{}, errors.New("client: partition route: empty rule name")
	}
	if len(key) == 0 || len(key) > rules.MaxArity {
		return PartitionRoute{}, fmt.Errorf("client: partition route: %d key values, want 1..%d", len(key), rules.MaxArity)
	}
	q := url.Values{"rule": {rule}, "key": {rules.FormatKey(key)}}
	if minEpoch > 0 {
		q.Set("epoch", strconv.FormatUint(minEpoch, 10))
	}
	return callJSON[PartitionRoute](ctx, a, http.MethodGet, PartitionRoutePath+"?"+q.Encode(), "partition route")
}

// RemoveNode asks the cluster's planner to stop counting node, a compute
// node that is down for good, among the known ones, so that the survivors
// of a cluster that lost half of its nodes or more regain a majority (see
// docs/migration.md, "Removing a node"). The API must have a token. A
// node the planner sees live is refused (IsCode(err, CodeNodeLive)).
func (a *API) RemoveNode(ctx context.Context, node string) (RemoveResult, error) {
	if node == "" {
		return RemoveResult{}, errors.New("client: remove node: empty node name")
	}
	return callJSON[RemoveResult](ctx, a, http.MethodPost, RemoveNodePath+"?"+url.Values{"node": {node}}.Encode(), "remove node")
}

// callJSON requests path (with its query) with method and decodes the JSON
// answer into a T; what names the call in errors.
func callJSON[T any](ctx context.Context, a *API, method, path, what string) (T, error) {
	var v T
	body, _, err := a.do(ctx, method, path, a.limit())
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("client: %s: %w", what, err)
	}
	return v, nil
}

func (a *API) limit() int64 {
	if a.MaxResponseBytes > 0 {
		return a.MaxResponseBytes
	}
	return 1 << 20
}

// get fetches path (with its query) from the API, reading at most limit
// bytes; a non-200 answer is an *APIError.
func (a *API) get(ctx context.Context, path string, limit int64) ([]byte, http.Header, error) {
	return a.do(ctx, http.MethodGet, path, limit)
}

// do is get with another method (no request body).
func (a *API) do(ctx context.Context, method, path string, limit int64) ([]byte, http.Header, error) {
	hc := a.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultAPITimeout}
	}
	name, _, _ := strings.Cut(path, "?")
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.Addr+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", name, err)
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", name, err)
	}
	if int64(len(body)) > limit {
		return nil, nil, fmt.Errorf("client: %s: response above %d bytes", name, limit)
	}
	if resp.StatusCode != http.StatusOK {
		ae := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(body, ae) != nil || ae.Code == "" {
			ae.Code, ae.Message = http.StatusText(resp.StatusCode), string(body[:min(len(body), 200)])
		}
		return nil, nil, fmt.Errorf("client: %s: %w", name, ae)
	}
	return body, resp.Header, nil
}
