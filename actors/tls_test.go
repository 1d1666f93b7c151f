package actors

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aura-runtime/aura/internal/testcert"
)

// testCA makes a CA and a node certificate it signed in dir, and returns
// the certificate, key and CA file names.
func testCA(t *testing.T, dir, name string) (cert, key, ca string) {
	t.Helper()
	c := testcert.New(t, dir, name+"-authority")
	cert, key = c.Issue(t, name)
	return cert, key, c.File
}

// TestMutualTLSRefusesStrangers: a peer with a certificate from the
// cluster's CA completes the handshake; one from another CA, one without a
// certificate and one speaking plaintext are refused, and each refusal is
// counted.
func TestMutualTLSRefusesStrangers(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := testCA(t, dir, "node")
	ours, err := MutualTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	oCert, oKey, oCA := testCA(t, dir, "other")
	other, err := MutualTLS(oCert, oKey, oCA)
	if err != nil {
		t.Fatal(err)
	}
	other.RootCAs = ours.RootCAs // it trusts us; we do not trust it
	noCert := ours.Clone()
	noCert.Certificates = nil

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := serverCreds(ours)
	serverErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _, err = srv.ServerHandshake(c)
			c.Close()
			serverErr <- err
		}
	}()
	// The server's verdict decides (with TLS 1.3 a client learns of a
	// refused certificate only after its own handshake returned).
	dial := func(cfg *tls.Config) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if cfg == nil {
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if conn, _, err := clientCreds(cfg).ClientHandshake(ctx, ln.Addr().String(), c); err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = conn.Read(make([]byte, 1)) // until the server's verdict closes it
		}
	}
	before := TLSRefusals()
	dial(ours)
	if err := <-serverErr; err != nil {
		t.Fatalf("server refused a member: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{"another CA": other, "no certificate": noCert, "plaintext": nil} {
		dial(cfg)
		if err := <-serverErr; err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got := TLSRefusals() - before; got != 3 {
		t.Errorf("%d refusals counted, want 3", got)
	}
}

func TestMutualTLSReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := MutualTLS(filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key"), bad)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"missing.crt", "bad.pem"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
}
