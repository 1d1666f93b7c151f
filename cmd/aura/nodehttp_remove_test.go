package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/messages"
)

// startRemoveAPI serves the management API with token ("" for none) and a
// planner whose answers to RemoveNode come from planner.
func startRemoveAPI(t *testing.T, token string, planner func(string) (*messages.RemoveNodeReply, error)) *mgmtServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := startMgmtEarly(ln, slog.New(slog.DiscardHandler), mgmtOptions{AuthToken: token})
	ms.removeNode = func(node string, _ time.Duration) (*messages.RemoveNodeReply, error) { return planner(node) }
	ms.attached.Store(true) // the endpoint reads nothing of the node
	t.Cleanup(ms.shutdown)
	return ms
}

// fakePlanner answers as a planner on cn-1 that sees cn-1 live and knows
// cn-2 down.
func fakePlanner(asked *[]string) func(string) (*messages.RemoveNodeReply, error) {
	return func(node string) (*messages.RemoveNodeReply, error) {
		*asked = append(*asked, node)
		r := &messages.RemoveNodeReply{Planner: "cn-1", Live: 1, Known: 2}
		switch node {
		case "cn-1":
			r.Reason = "live"
		case "cn-2":
			r.Removed, r.Known, r.Quorum = true, 1, true
		case "cn-3":
			r.Removed = true // removed, but a third node is still down
		case "gone":
			return nil, errors.New("planner on cn-1: future: timeout")
		case "odd":
			r.Reason = "a reason this API does not know"
		case "long-name-the-planner-refuses":
			r.Reason = "bad name"
		default:
			r.Reason = "unknown"
		}
		return r, nil
	}
}

// TestRemoveNodeEndpoint: POST /management/nodes/remove reaches the
// planner only with the API's token and one node name, and maps the
// planner's refusals to typed errors; without a token on the API it is not
// served at all.
func TestRemoveNodeEndpoint(t *testing.T) {
	var asked []string
	open := startRemoveAPI(t, "", fakePlanner(&asked))
	var e client.APIError
	if status, _ := getJSON(t, http.MethodPost, "http://"+open.Addr()+client.RemoveNodePath+"?node=cn-2", &e); status != http.StatusForbidden ||
		e.Code != client.CodeTokenRequired {
		t.Fatalf("without a token on the API: %d %+v", status, e)
	}

	const token = "remove-token"
	ms := startRemoveAPI(t, token, fakePlanner(&asked))
	base := "http://" + ms.Addr() + client.RemoveNodePath
	do := func(method, url, tok string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b [4096]byte
		n, _ := resp.Body.Read(b[:])
		return resp.StatusCode, b[:n]
	}
	for _, c := range []struct {
		method, query, token string
		status               int
		code                 string
	}{
		{http.MethodPost, "?node=cn-2", "", http.StatusUnauthorized, client.CodeNotAuthorized},
		{http.MethodPost, "?node=cn-2", "wrong", http.StatusUnauthorized, client.CodeNotAuthorized},
		{http.MethodGet, "?node=cn-2", token, http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{http.MethodPost, "", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=cn-2&node=cn-3", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=cn-2&force=1", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=%zz", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=cn%202", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=" + strings.Repeat("n", 65), token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=long-name-the-planner-refuses", token, http.StatusBadRequest, client.CodeBadRequest},
		{http.MethodPost, "?node=odd", token, http.StatusBadGateway, "Internal"},
		{http.MethodPost, "?node=cn-1", token, http.StatusConflict, client.CodeNodeLive},
		{http.MethodPost, "?node=cn-9", token, http.StatusNotFound, client.CodeNoSuchNode},
		{http.MethodPost, "?node=gone", token, http.StatusServiceUnavailable, client.CodeNoPlanner},
	} {
		status, b := do(c.method, base+c.query, c.token)
		var e client.APIError
		if err := json.Unmarshal(b, &e); err != nil || status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s %s (token %q): %d %s, want %d %s", c.method, c.query, c.token, status, b, c.status, c.code)
		}
	}
	if strings.Join(asked, ",") != "long-name-the-planner-refuses,odd,cn-1,cn-9,gone" {
		t.Fatalf("the planner was asked about %q, want only the well-formed, authenticated requests", asked)
	}
	status, b := do(http.MethodPost, base+"?node=cn-2", token)
	var r client.RemoveResult
	if err := json.Unmarshal(b, &r); err != nil || status != http.StatusOK ||
		r != (client.RemoveResult{Node: "cn-2", Planner: "cn-1", Live: 1, Known: 1, Quorum: true}) {
		t.Fatalf("remove cn-2: %d %s", status, b)
	}
}

// TestRemoveNodeCommand: aura remove-node wants --down and the node's
// name, says whether the survivors are a majority again, and exits non-zero
// with the API's code on a refusal.
func TestRemoveNodeCommand(t *testing.T) {
	t.Setenv(authTokenEnv, "")
	var asked []string
	const token = "remove-token"
	addr := startRemoveAPI(t, token, fakePlanner(&asked)).Addr()
	if out, err := runAura("remove-node", "cn-2", "--http-addr", addr, "--auth-token", token); err == nil ||
		!strings.Contains(err.Error(), "--down is required") || len(asked) != 0 {
		t.Fatalf("without --down: %v\n%s", err, out)
	}
	if out, err := runAura("remove-node", "--down", "--http-addr", addr, "--auth-token", token); err == nil {
		t.Fatalf("without a name: %s", out)
	}
	out, err := runAura("remove-node", "cn-2", "--down", "--http-addr", addr, "--auth-token", token)
	if err != nil || !strings.Contains(out, "planner cn-1 no longer counts cn-2: 1 of 1 known compute nodes live, a majority") {
		t.Fatalf("remove cn-2: %v\n%s", err, out)
	}
	out, err = runAura("remove-node", "cn-3", "--down", "--http-addr", addr, "--auth-token", token)
	if err != nil || !strings.Contains(out, "1 of 2 known compute nodes live, still no majority") {
		t.Fatalf("remove cn-3: %v\n%s", err, out)
	}
	t.Setenv(authTokenEnv, token)
	out, err = runAura("remove-node", "cn-2", "--down", "--http-addr", addr, "--json")
	var r client.RemoveResult
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || !r.Quorum || r.Node != "cn-2" {
		t.Fatalf("remove cn-2 --json: %v\n%s", err, out)
	}
	if _, err := runAura("remove-node", "cn-1", "--down", "--http-addr", addr); err == nil ||
		!strings.Contains(err.Error(), "NodeLive (HTTP 409)") {
		t.Fatalf("remove a live node: %v", err)
	}
}
