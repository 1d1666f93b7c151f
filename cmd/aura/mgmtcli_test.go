package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/workload/tpcc"
)

// runAura runs the aura command line in this process.
func runAura(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestTopologyAndRouteCommands runs aura topology and aura route against a
// node's management API with authentication on: tables by default, the
// API's JSON with --json, the route agreeing with the installed OwnerMap,
// and errors carrying the API's code.
func TestTopologyAndRouteCommands(t *testing.T) {
	t.Setenv(authTokenEnv, "")
	const token = "cli-token"
	n := startMgmtNode(t, token)
	kg := n.wl.Rule().KeyGroup(txn.Ref{Table: tpcc.TableOrder, Key: tpcc.OrderKey(1, 3, 2101)})
	n.install(t, &control.OwnerMap{Epoch: 7, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 12, KeyGroups: []control.KeyGroup{kg}}, Owner: 1}}})
	addr := n.ms.Addr()

	out, err := runAura("topology", "--http-addr", addr, "--auth-token", token)
	if err != nil || !strings.Contains(out, "OwnerMap epoch 7, 2 workers") || !strings.Contains(out, "INDEX") ||
		!strings.Contains(out, "cn-2    127.0.0.1:8002  1        12") {
		t.Fatalf("topology: %v\n%s", err, out)
	}
	out, err = runAura("topology", "--http-addr", addr, "--auth-token", token, "--json")
	var topo client.Topology
	if err != nil || json.Unmarshal([]byte(out), &topo) != nil || topo.Epoch != 7 || topo.WorkerCount != 2 {
		t.Fatalf("topology --json: %v\n%s", err, out)
	}

	t.Setenv(authTokenEnv, token) // the environment gives the token
	out, err = runAura("route", "--http-addr", addr, "--rule-name", "r_orders", "--key", "1,3,2101")
	if err != nil || !strings.Contains(out, "cohort 12") || !strings.Contains(out, "cn-2 (index 1) at 127.0.0.1:8002") ||
		!strings.Contains(out, "routed by        cohort") {
		t.Fatalf("route: %v\n%s", err, out)
	}
	out, err = runAura("route", "--http-addr", addr, "--rule-name", "r_orders", "--key", "1,3,2101", "--json", "--epoch", "7")
	var r client.PartitionRoute
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.WorkerID != "cn-2" || r.PartitionID == nil || *r.PartitionID != 12 {
		t.Fatalf("route --json: %v\n%s", err, out)
	}
	t.Setenv(authTokenEnv, "")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topology", "--http-addr", addr}, "NotAuthorized (HTTP 401)"},
		{[]string{"route", "--http-addr", addr, "--auth-token", "nope", "--rule-name", "r_orders", "--key", "1,3,2101"}, "NotAuthorized (HTTP 401)"},
		{[]string{"route", "--http-addr", addr, "--auth-token", token, "--rule-name", "r_nope", "--key", "1"}, "NoSuchRule (HTTP 404)"},
		{[]string{"route", "--http-addr", addr, "--auth-token", token, "--rule-name", "r_orders", "--key", "9,3,1"}, "NoSuchPartition (HTTP 404)"},
		{[]string{"route", "--http-addr", addr, "--auth-token", token, "--rule-name", "r_orders", "--key", "1,3"}, "BadRequest (HTTP 400)"},
		{[]string{"route", "--http-addr", addr, "--auth-token", token, "--rule-name", "r_orders", "--key", "1,3,1", "--epoch", "8"}, "StaleEpoch (HTTP 409)"},
		{[]string{"route", "--http-addr", addr, "--rule-name", "r_orders", "--key", "1,x"}, `--key "1,x"`},
		{[]string{"route", "--http-addr", "nohost", "--key", "1"}, "--rule-name is required"},
		{[]string{"route", "--http-addr", "nohost", "--rule-name", "r", "--key", "1"}, `--http-addr "nohost"`},
		{[]string{"topology"}, "--http-addr is required"},
		{[]string{"topology", "--http-addr", addr, "--timeout", "2m"}, "--timeout 2m0s"},
		{[]string{"topology", "--http-addr", addr, "--auth-token", "a b"}, "--auth-token"},
	} {
		out, err := runAura(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), token) {
			t.Errorf("%v: %v (output %q), want an error containing %q", c.args, err, out, c.want)
		}
	}
}
