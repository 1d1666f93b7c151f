package actors

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// MutualTLS loads a node's certificate and key and the cluster's CA and
// returns the TLS configuration for remote actor traffic in both roles:
// as a server it requires and verifies a client certificate signed by the
// CA; as a client it verifies the peer's certificate against the CA (the
// certificate must name the address other nodes dial: an IP SAN for
// host:port addresses). TLS 1.3 only. Every file is read once, here.
func MutualTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	var errs []error
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("tls: certificate %s / key %s: %w", certFile, keyFile, err))
	}
	pool := x509.NewCertPool()
	if pem, err := os.ReadFile(caFile); err != nil {
		errs = append(errs, fmt.Errorf("tls: CA %s: %w", caFile, err))
	} else if !pool.AppendCertsFromPEM(pem) {
		errs = append(errs, fmt.Errorf("tls: CA %s: no PEM certificate in it", caFile))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}, nil
}

// tlsRefusals counts inbound remote connections refused at the TLS
// handshake (TLSRefusals).
var tlsRefusals atomic.Uint64

// TLSRefusals returns the number of inbound remote connections whose TLS
// handshake failed: a peer with no certificate, one the CA did not sign, or
// no TLS at all. Each is also logged.
func TLSRefusals() uint64 { return tlsRefusals.Load() }

// countingCreds are server credentials that count and log failed
// handshakes (gRPC only logs them at its own verbosity).
type countingCreds struct {
	credentials.TransportCredentials
}

func (c countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		tlsRefusals.Add(1)
		slog.Warn("remote: refused a connection at the TLS handshake", "peer", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{c.TransportCredentials.Clone()}
}

// serverCreds and clientCreds wrap a TLS configuration for gRPC.
func serverCreds(cfg *tls.Config) credentials.TransportCredentials {
	return countingCreds{credentials.NewTLS(cfg)}
}

func clientCreds(cfg *tls.Config) credentials.TransportCredentials { return credentials.NewTLS(cfg) }
