package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aura-runtime/aura/internal/testcert"
	"github.com/aura-runtime/aura/rdma/tcp"
	"github.com/aura-runtime/aura/rdma/wire"
)

// TestSecuredClusterProcesses runs a memory node that requires a token and
// compute nodes with encrypted gossip and mutual TLS on actor traffic, then
// drives TPC-C through them with aura bench --connect (token and TLS too):
// transactions commit and the TPC-C checks pass. Strangers are refused: a
// memory-node client without the token (typed error, at once), a node with
// another gossip key (cannot join; the members count the refused gossip),
// a node without the memory node's token (exits).
func TestSecuredClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	leakOpts := processLeakOptions()
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	const token = "mn-secret"
	mn := startMN(t, "--listen", "127.0.0.1:0", "--size", "2GiB", "--auth-token", token)
	ctx := context.Background()
	if d, err := tcp.Dial(ctx, mn.addr, tcp.ClientConfig{RedialAttempts: 1}); err == nil || !errors.Is(err, wire.ErrUnauthorized) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("dial without the token: %v, want wire.ErrUnauthorized", err)
	}

	dir := t.TempDir()
	ca := testcert.New(t, dir, "cluster")
	keyOf := func() string {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	gossipKey := keyOf()
	tlsArgs := func(name string) []string {
		c, k := ca.Issue(t, name)
		return []string{"--tls-cert", c, "--tls-key", k, "--tls-ca", ca.File}
	}
	wlArgs := []string{"--workload", "tpcc", "--warehouses", "4", "--items", "2000", "--customers", "100", "--expected-new-orders", "100000"}
	common := append([]string{"--mn", mn.addr, "--mn-token", token, "--gossip-key", gossipKey, "--nodes", "cn-1,cn-2",
		"--test-timings", "--heartbeat", "50ms", "--tick", "50ms", "--coordinators", "4", "--log-level", "info"}, wlArgs...)

	// The tables, loaded through an authenticated connection.
	dev, err := tcp.Dial(ctx, mn.addr, tcp.ClientConfig{Token: []byte(token)})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	loadTables(t, ctx, dev, workloadOf(t, wlArgs))

	h := freeAddr(t)
	n1 := startNode(t, append(append([]string{"--name", "cn-1", "--http", h}, tlsArgs("cn-1")...), common...)...)
	n2 := startNode(t, append(append([]string{"--name", "cn-2", "--join", n1.gossip}, tlsArgs("cn-2")...), common...)...)
	if _, _, ok := watchFromNow(n1).wait(10*time.Second, func(l string) bool {
		return strings.Contains(l, `msg="roster slot assigned"`) && strings.Contains(l, "node=cn-2 ")
	}); !ok && !strings.Contains(n1.stderr.String(), "node=cn-2 slot=") {
		t.Fatal("cn-2 never joined through encrypted gossip")
	}
	out := filepath.Join(dir, "run.json")
	bcmd := exec.Command(buildAura(t), append([]string{"bench", "--connect", "aura://" + n1.remote + "/tpcc?http_addr=" + h,
		"--mn", mn.addr, "--mn-token", token, "--skip-load", "--duration", "5s", "--warmup", "2s", "--json", out},
		append(tlsArgs("client"), wlArgs...)...)...)
	if b, err := bcmd.CombinedOutput(); err != nil {
		t.Fatalf("aura bench --connect over TLS: %v\n%s", err, b)
	}
	res := readBenchJSON(t, out)
	if res.Committed == 0 || res.Failed != 0 || res.Checks["tpcc_consistency"] != "pass" {
		t.Fatalf("committed %d, failed %d (last: %s), checks %v", res.Committed, res.Failed, res.LastError, res.Checks)
	}
	t.Logf("over TLS, encrypted gossip and an authenticated memory node: %d committed, local hit %.1f%%", res.Committed, 100*res.LocalHit)

	// Strangers.
	intruder := exec.Command(buildAura(t), append([]string{"node", "--name", "cn-x", "--join", n1.gossip, "--gossip-key", keyOf(),
		"--mn", mn.addr, "--mn-token", token, "--test-timings", "--log-level", "warn", "--nodes", "cn-1,cn-2"}, wlArgs...)...)
	if b, err := intruder.CombinedOutput(); err == nil || !strings.Contains(string(b), "join") {
		t.Errorf("a node with another gossip key: %v\n%s", err, b)
	}
	if m := scrape(t, "http://"+h, ""); m["aura_membership_gossip_refused_total"] == 0 {
		t.Errorf("cn-1 counted no refused gossip")
	}
	noToken := exec.Command(buildAura(t), append([]string{"node", "--name", "cn-y", "--mn", mn.addr, "--test-timings", "--log-level", "warn",
		"--nodes", "cn-1,cn-2"}, wlArgs...)...)
	if b, err := noToken.CombinedOutput(); err == nil || !strings.Contains(string(b), "token") {
		t.Errorf("a node without the memory node's token: %v\n%s", err, b)
	}
	stopNodes(t, n1, n2)
}
