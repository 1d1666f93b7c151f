package actors

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RemoteConfig configures a node's protoactor remote endpoint (gRPC over
// TCP), through which its actors receive requests from other nodes.
type RemoteConfig struct {
	// ListenAddr is the host:port to listen on. Port 0 picks a free port
	// (tests). Required.
	ListenAddr string
	// AdvertiseAddr is the host:port other nodes use to reach this one, when
	// it differs from the listening address (NAT, 0.0.0.0). Default: the
	// listening address actually bound.
	AdvertiseAddr string
	// WriterQueueSize bounds the messages queued per peer endpoint before
	// they are sent. Default 16,384 (protoactor's default is 1,000,000, which
	// on a partitioned peer lets a node buffer gigabytes before anyone
	// notices; past the bound the request times out and the caller's
	// retry/backoff takes over).
	WriterQueueSize int
	// ManagerQueueSize bounds the endpoint manager's queue of connection
	// events. Default 16,384, for the same reason.
	ManagerQueueSize int
	// TLS, when set, makes every remote connection mutual TLS (see
	// MutualTLS): this endpoint accepts only peers with a certificate the
	// CA signed, and dials others verifying theirs. Default nil: plaintext
	// gRPC, for a trusted LAN or loopback tests; a production cluster sets
	// it on every node.
	TLS *tls.Config
}

// DefaultRemoteConfig returns the defaults documented on RemoteConfig.
func DefaultRemoteConfig(listen string) RemoteConfig {
	return RemoteConfig{ListenAddr: listen, WriterQueueSize: 1 << 14, ManagerQueueSize: 1 << 14}
}

// Validate reports every problem at once.
func (c RemoteConfig) Validate() error {
	var errs []error
	if _, _, err := splitHostPort(c.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("remote: ListenAddr %q: %w", c.ListenAddr, err))
	}
	if c.AdvertiseAddr != "" {
		if _, p, err := splitHostPort(c.AdvertiseAddr); err != nil || p == 0 {
			errs = append(errs, fmt.Errorf("remote: AdvertiseAddr %q: want host:port with a non-zero port", c.AdvertiseAddr))
		}
	}
	if c.WriterQueueSize < 1 || c.ManagerQueueSize < 1 {
		errs = append(errs, fmt.Errorf("remote: queue sizes %d/%d must be positive", c.WriterQueueSize, c.ManagerQueueSize))
	}
	return errors.Join(errs...)
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q out of range", p)
	}
	return h, port, nil
}

// MaxRemoteMessageBytes bounds one message a remote endpoint accepts
// (gRPC's default, stated): an OwnerMap push is chunked far below it
// (planner.DefaultChunkBytes) and every other message is small.
const MaxRemoteMessageBytes = 4 << 20

// remotePanics counts remote streams ended by a panic in protoactor's
// reader (RemotePanics).
var remotePanics atomic.Uint64

// RemotePanics returns the number of inbound remote streams that
// recoverStream closed after a panic.
func RemotePanics() uint64 { return remotePanics.Load() }

// recoverStream turns a panic in a remote stream's handler into an error
// that closes that stream only. At the pinned protoactor-go version the
// endpoint reader indexes a batch's target, sender and type-name arrays
// with the envelope's numbers unchecked, on the gRPC handler's goroutine, so
// one malformed batch from any peer would otherwise crash the node
// (TestRemoteSurvivesMalformedBatches).
func recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			remotePanics.Add(1)
			slog.Warn("remote: stream closed after a malformed message", "method", info.FullMethod, "panic", fmt.Sprint(p))
			err = status.Errorf(codes.InvalidArgument, "malformed message")
		}
	}()
	return handler(srv, ss)
}

// endpointConnectAttempts is how many times protoactor's endpoint writer
// tries to reach a peer before it reports the endpoint terminated (its
// default is 5). At the pinned version each failed attempt but the last
// leaves its gRPC connection open: the next attempt overwrites the writer's
// only reference, and the orphan redials the dead address with backoff for
// the life of the process (two goroutines and a socket each, seen as a leak
// in TestNodeProcessesJoinAndLeaveUnderLoad). With one attempt the writer
// keeps the one connection it made and closes it when it stops. Nothing is
// lost by trying once: the next message to that peer starts a new writer,
// and every cross-node request goes through Call, which retries or reports
// the peer unreachable. It also shortens the time messages wait on a dead
// peer from 10 s (five attempts two seconds apart) to 2 s.
const endpointConnectAttempts = 1

// Remote is a started remote endpoint.
type Remote struct {
	r    *remote.Remote
	addr string
}

// StartRemote starts system's remote endpoint. protoactor's Remote.Start
// panics when it cannot listen; StartRemote turns that into an error.
func StartRemote(system *actor.ActorSystem, cfg RemoteConfig) (rem *Remote, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, port, _ := splitHostPort(cfg.ListenAddr)
	serverOpts := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRemoteMessageBytes), grpc.ChainStreamInterceptor(recoverStream)}
	opts := []remote.ConfigOption{
		remote.WithEndpointWriterQueueSize(cfg.WriterQueueSize),
		remote.WithEndpointManagerQueueSize(cfg.ManagerQueueSize),
	}
	if cfg.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(serverCreds(cfg.TLS)))
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(clientCreds(cfg.TLS))))
	}
	opts = append(opts, remote.WithServerOptions(serverOpts...))
	if cfg.AdvertiseAddr != "" {
		opts = append(opts, remote.WithAdvertisedHost(cfg.AdvertiseAddr))
	}
	rc := remote.Configure(host, port, opts...)
	rc.MaxRetryCount = endpointConnectAttempts
	r := remote.NewRemote(system, rc)
	defer func() {
		if p := recover(); p != nil {
			rem, err = nil, fmt.Errorf("remote: start on %s: %v", cfg.ListenAddr, p)
		}
	}()
	r.Start()
	return &Remote{r: r, addr: system.Address()}, nil
}

// Address is the address other nodes use to reach this endpoint.
func (r *Remote) Address() string { return r.addr }

// Shutdown stops the endpoint's server. It uses protoactor's non-graceful
// stop: at the pinned version the graceful path (endpoint manager stop) races
// with endpoint-writer goroutines that are still publishing connection events
// (seen under -race), and may wait up to 10 s for gRPC. Nothing is lost by
// not flushing: every cross-node request goes through Call, which retries or
// reports the peer unreachable, and a node hands its cohorts off before it
// stops its endpoint.
func (r *Remote) Shutdown() { r.r.Shutdown(false) }
