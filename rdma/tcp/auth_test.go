package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/wire"
)

// TestServerRequiresToken: a memory node with a token serves clients that
// present it and refuses, at once and without retrying, those that present
// none or another one (typed wire.ErrUnauthorized, counted).
func TestServerRequiresToken(t *testing.T) {
	ts := startServer(t, nil, ServerConfig{Token: []byte("s3cret")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range []string{"", "wrong"} {
		start := time.Now()
		d, err := Dial(ctx, ts.addr, ClientConfig{Token: []byte(tok), Logger: quiet()})
		if err == nil {
			d.Close()
			t.Fatalf("token %q: served", tok)
		}
		if !errors.Is(err, wire.ErrUnauthorized) {
			t.Fatalf("token %q: %v, want wire.ErrUnauthorized", tok, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("token %q: refused after %v: a refusal must not be retried", tok, took)
		}
	}
	if got := ts.server().Refused(); got != 2 {
		t.Errorf("%d refusals counted, want 2", got)
	}
	d, err := Dial(ctx, ts.addr, ClientConfig{Token: []byte("s3cret"), Logger: quiet()})
	if err != nil {
		t.Fatalf("right token: %v", err)
	}
	defer d.Close()
	if _, err := d.RegisterRegion(ctx, "r", 4096); err != nil {
		t.Fatal(err)
	}
	// A server without a token serves a client that sends one.
	open := startServer(t, nil, ServerConfig{})
	d2, err := Dial(ctx, open.addr, ClientConfig{Token: []byte("s3cret"), Logger: quiet()})
	if err != nil {
		t.Fatalf("token to an open server: %v", err)
	}
	d2.Close()
	if _, err := NewServer(rdma.NewMemory(1<<20), ServerConfig{Token: make([]byte, wire.MaxTokenLen+1)}); err == nil {
		t.Error("an over-long token accepted")
	}
}
