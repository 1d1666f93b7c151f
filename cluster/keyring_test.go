package cluster

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

func key(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// TestGossipEncryption: nodes sharing a key form a cluster; a node with
// another key, or with none, cannot join (its gossip is refused, logged and
// counted); a key rotation on running nodes (add, use, remove) keeps the
// cluster together.
func TestGossipEncryption(t *testing.T) {
	k1, k2 := key(1, 32), key(2, 16)
	with := func(keys ...[]byte) func(*Config) { return func(c *Config) { c.GossipKeys = keys } }
	nodes := startCluster(t, "enc", 2, with(k1))

	for name, keys := range map[string][][]byte{"wrong key": {k2}, "no key": nil} {
		cfg := testConfig("intruder-"+string(rune('a'+len(keys))), nodes[0].Addr())
		cfg.GossipKeys = keys
		cfg.JoinRetries, cfg.JoinTimeout, cfg.TCPTimeout = 0, 2*time.Second, time.Second
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Start(context.Background())
		_ = m.Shutdown()
		if err == nil {
			t.Fatalf("%s: joined an encrypted cluster", name)
		}
		if len(nodes[0].Members()) != 2 {
			t.Fatalf("%s: members %v", name, memberNames(nodes[0].Members()))
		}
	}
	eventually(t, "refusals counted", func() bool { return nodes[0].Refused() > 0 })

	// Rotate to k2 everywhere without losing anyone: add, use, remove.
	for _, n := range nodes {
		if err := n.Keyring().AddKey(k2); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.Keyring().UseKey(k2); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.Keyring().RemoveKey(k1); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig("enc-3", nodes[1].Addr())
	cfg.GossipKeys = [][]byte{k2}
	waitConverged(t, append(nodes, startNode(t, cfg))...)
	if nodes[0].Keyring() == nil {
		t.Fatal("no keyring on an encrypted node")
	}
}

func TestGossipKeysValidated(t *testing.T) {
	cfg := testConfig("v")
	cfg.GossipKeys = [][]byte{key(1, 15), key(2, 32), nil}
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"GossipKeys[0]", "GossipKeys[2]"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
	if bytes.Contains([]byte(err.Error()), []byte("GossipKeys[1]")) {
		t.Errorf("a valid key reported: %v", err)
	}
}
