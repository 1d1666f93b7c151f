package main

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/rdma/wire"
)

// Environment variables for secrets, so they stay out of process listings.
const (
	gossipKeysEnv = "AURA_GOSSIP_KEYS" // comma-separated base64 keys, first = primary
	mnTokenEnv    = "AURA_MN_TOKEN"
)

// securityFlags are a process's cluster credentials (docs/security.md).
type securityFlags struct {
	gossipKeys []string // base64
	tlsCert    string
	tlsKey     string
	tlsCA      string
	mnToken    string
}

// addGossipTLS registers the flags of a process that joins the membership
// and serves remote actors (aura node).
func (s *securityFlags) addGossipTLS(fl *pflag.FlagSet) {
	fl.StringSliceVar(&s.gossipKeys, "gossip-key", nil, "encrypt gossip with these base64 AES keys (16, 24 or 32 bytes; the first encrypts, any decrypts; for rotation list the new one second, then first, then alone); also $"+gossipKeysEnv)
	s.addTLS(fl)
}

// addTLS registers the mutual-TLS flags for remote actor traffic.
func (s *securityFlags) addTLS(fl *pflag.FlagSet) {
	fl.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate of this process for mutual TLS on remote actor traffic (with --tls-key and --tls-ca; it must name the address others dial)")
	fl.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA certificate that signed every node's certificate")
}

// addMNToken registers the memory-node client token flag.
func (s *securityFlags) addMNToken(fl *pflag.FlagSet) {
	fl.StringVar(&s.mnToken, "mn-token", "", "token the memory node requires (aura mn --auth-token); also $"+mnTokenEnv)
}

// gossip returns the decoded gossip keys (flag, else environment).
func (s *securityFlags) gossip() ([][]byte, error) {
	raw := s.gossipKeys
	if len(raw) == 0 {
		if env := os.Getenv(gossipKeysEnv); env != "" {
			raw = strings.Split(env, ",")
		}
	}
	var keys [][]byte
	var errs []error
	for i, k := range raw {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
		if err != nil {
			errs = append(errs, fmt.Errorf("--gossip-key %d: not base64: %w", i+1, err))
			continue
		}
		keys = append(keys, b)
	}
	if len(keys) > cluster.MaxGossipKeys {
		errs = append(errs, fmt.Errorf("--gossip-key: %d keys, at most %d", len(keys), cluster.MaxGossipKeys))
	}
	for i, k := range keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			errs = append(errs, fmt.Errorf("--gossip-key %d: %d bytes, want 16, 24 or 32", i+1, n))
		}
	}
	return keys, errors.Join(errs...)
}

// tls returns the mutual-TLS configuration, or nil when no TLS flag is set.
func (s *securityFlags) tls() (*tls.Config, error) {
	if s.tlsCert == "" && s.tlsKey == "" && s.tlsCA == "" {
		return nil, nil
	}
	if s.tlsCert == "" || s.tlsKey == "" || s.tlsCA == "" {
		return nil, errors.New("--tls-cert, --tls-key and --tls-ca go together")
	}
	return actors.MutualTLS(s.tlsCert, s.tlsKey, s.tlsCA)
}

// token returns the memory-node token (flag, else environment).
func (s *securityFlags) token() ([]byte, error) {
	t := s.mnToken
	if t == "" {
		t = os.Getenv(mnTokenEnv)
	}
	if len(t) > wire.MaxTokenLen {
		return nil, fmt.Errorf("--mn-token: %d bytes, at most %d", len(t), wire.MaxTokenLen)
	}
	if t == "" {
		return nil, nil
	}
	return []byte(t), nil
}
