package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/durable"
	"github.com/aura-runtime/aura/rdma/tcp"
)

func init() { subcommands = append(subcommands, newMNCmd) }

// mnListeningPrefix starts the line `aura mn` prints on stdout once it
// accepts connections; the address follows it.
const mnListeningPrefix = "aura mn listening on "

type mnFlags struct {
	listen           string
	size             byteSize
	costModel        bool
	maxConns         int
	maxInFlight      int
	maxQueued        byteSize
	handshakeTimeout time.Duration
	readTimeout      time.Duration
	writeTimeout     time.Duration
	idleTimeout      time.Duration
	shutdownTimeout  time.Duration
	metricsAddr      string
	logLevel         string
	logFormat        string
	authToken        string
	dataDir          string
	segmentSize      byteSize
	snapshotEvery    byteSize
	cfg              configFlags
}

func newMNCmd() *cobra.Command {
	f := &mnFlags{size: 1 << 30, maxQueued: tcp.DefaultMaxQueuedBytes,
		segmentSize: durable.DefaultSegmentBytes, snapshotEvery: durable.DefaultSnapshotEveryBytes}
	cmd := &cobra.Command{
		Use:   "mn",
		Short: "Run a memory node: registered memory served to compute nodes over TCP",
		Long: `Run a memory node (MN). It holds the records and lock words of the cluster in
registered memory regions and executes one-sided verbs (READ, WRITE, CAS, FAA)
that compute nodes post over TCP with the rdma/tcp backend: one round trip per
doorbell batch, many batches in flight per connection. The node validates every
request (rkey, bounds, 8-byte alignment of atomics) and answers bad ones with
typed errors; a malformed frame closes only its own connection.

Once it accepts connections it prints one line on stdout,

    aura mn listening on HOST:PORT

with the actual address (useful with --listen 127.0.0.1:0). Logs go to stderr.
SIGINT or SIGTERM shut it down gracefully: it stops accepting, answers the
requests it has read, closes the connections and exits 0.

By default memory lives only in the process. With --data-dir the node is
durable: every mutation (region registration, WRITE, successful CAS, FAA) is
appended to a write-ahead log and fsynced — concurrent requests share one
fsync (group commit) — before any reply that depends on it is sent, and the
log is periodically folded into a snapshot. A restart on the same directory,
after a crash or kill -9 included, rebuilds the memory (same regions, rkeys
and addresses) before it accepts connections, so no acknowledged write is
lost. A damaged log or snapshot stops the node with an error instead of
serving wrong memory. See docs/durability.md.`,
		Example: `  aura mn --listen 0.0.0.0:7070 --size 4GiB
  aura mn --listen 127.0.0.1:0 --size 64MiB --cost-model
  aura mn --listen 0.0.0.0:7070 --size 4GiB --data-dir /var/lib/aura/mn`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runMN(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	addConfigFlags(cmd, &f.cfg)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070",
		"TCP address to listen on, HOST:PORT; port 0 picks a free port (the address is printed on stdout)")
	fl.Var(&f.size, "size",
		"total memory the node may register, with a unit: B, KiB, MiB, GiB, TiB (binary), KB, MB, GB, TB (decimal); bare K/M/G/T are binary. Memory is allocated as regions are registered")
	fl.BoolVar(&f.costModel, "cost-model", false,
		"apply the default NIC cost model on the server: per-verb latency (≈2 µs READ/WRITE, 2.5 µs atomics) and atomics serialised per slot of a 512-slot table hashed on the address; responses are held back until the modelled completion time")
	fl.IntVar(&f.maxConns, "max-conns", tcp.DefaultMaxConns,
		"maximum concurrent client connections (one per compute-node device); more are refused with a busy error")
	fl.IntVar(&f.maxInFlight, "max-in-flight", tcp.DefaultMaxInFlight,
		"maximum requests per connection read but not yet answered; beyond it the node stops reading that connection (TCP flow control pushes back)")
	fl.Var(&f.maxQueued, "max-queued-bytes",
		"maximum bytes of responses queued for one connection before the node stops reading it (units as for --size)")
	fl.DurationVar(&f.handshakeTimeout, "handshake-timeout", tcp.DefaultHandshakeTimeout,
		"how long a new connection may take to send its hello; 0 disables")
	fl.DurationVar(&f.readTimeout, "read-timeout", tcp.DefaultReadTimeout,
		"how long the rest of a request may take to arrive once its first byte has; 0 disables")
	fl.DurationVar(&f.writeTimeout, "write-timeout", tcp.DefaultWriteTimeout,
		"how long one write of responses may block (a client not reading its responses is disconnected); 0 disables")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", tcp.DefaultIdleTimeout,
		"close connections that sent no request for this long (clients reconnect transparently); 0 disables")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second,
		"on SIGINT/SIGTERM, how long to let connections finish the requests already read before closing them")
	fl.StringVar(&f.metricsAddr, "metrics", "", "serve the memory node's verb counters and memory use in Prometheus text format on http://HOST:PORT/metrics (docs/metrics.md), and liveness on /healthz (empty: off; no authentication: bind a private address)")
	fl.StringVar(&f.authToken, "auth-token", "", "serve only clients that present this token (aura node/bench --mn-token; 1..255 bytes); also $"+mnTokenEnv)
	fl.StringVar(&f.dataDir, "data-dir", "",
		"make the memory durable in this directory (created if missing; locked, so one node per directory): a write-ahead log fsynced before every acknowledgement, plus snapshots; a restart recovers it. Empty: memory only, lost when the process ends")
	fl.Var(&f.segmentSize, "log-segment-size",
		"with --data-dir: size at which the write-ahead log moves to a new segment file (units as for --size; at least one full request, about 8.1 MiB)")
	fl.Var(&f.snapshotEvery, "snapshot-every",
		"with --data-dir: take a snapshot (and drop the log before it) after this many log bytes; bounds recovery time and disk use (units as for --size; 0: never, and the log grows without bound)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// off0 maps a timeout flag to ServerConfig, where 0 means "default" and a
// negative value "disabled": on the command line 0 disables.
func off0(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// runMN serves until ctx ends (a signal), then shuts down gracefully.
func runMN(ctx context.Context, f *mnFlags, stdout, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if f.size == 0 {
		return errors.New("--size must be positive")
	}
	if f.maxConns <= 0 || f.maxInFlight <= 0 || f.maxQueued == 0 {
		return errors.New("--max-conns, --max-in-flight and --max-queued-bytes must be positive")
	}
	if uint64(f.maxQueued) > 1<<40 {
		return fmt.Errorf("--max-queued-bytes %s is implausibly large", f.maxQueued.String())
	}
	cfg := tcp.ServerConfig{
		MaxConns: f.maxConns, MaxInFlight: f.maxInFlight, MaxQueuedBytes: int(f.maxQueued),
		HandshakeTimeout: off0(f.handshakeTimeout), ReadTimeout: off0(f.readTimeout), WriteTimeout: off0(f.writeTimeout),
		IdleTimeout: off0(f.idleTimeout), Logger: log,
	}
	if f.costModel {
		m := rdma.DefaultCostModel()
		cfg.Cost = &m
	}
	tok := f.authToken
	if tok == "" {
		tok = os.Getenv(mnTokenEnv)
	}
	if tok != "" {
		cfg.Token = []byte(tok)
	}
	var mem *rdma.Memory
	var store *durable.Store
	if f.dataDir != "" {
		every := int64(f.snapshotEvery)
		if every == 0 {
			every = -1
		}
		if store, err = durable.Open(durable.Options{Dir: f.dataDir, Capacity: uint64(f.size),
			SegmentBytes: int64(f.segmentSize), SnapshotEveryBytes: every, Logger: log}); err != nil {
			return fmt.Errorf("--data-dir %s: %w", f.dataDir, err)
		}
		// Closed after the server: graceful shutdown answers what was read,
		// and those answers wait for the log.
		defer func() {
			if err := store.Close(); err != nil {
				log.Error("closing the data directory", "err", err)
			}
		}()
		mem, cfg.Journal = store.Memory(), store
	} else {
		mem = rdma.NewMemory(uint64(f.size))
	}
	srv, err := tcp.NewServer(mem, cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	addr := l.Addr().String()
	if f.metricsAddr != "" {
		var dstats func() durable.Stats
		if store != nil {
			dstats = store.Stats
		}
		maddr, stop, err := serveMNMetrics(ctx, f.metricsAddr, srv.Stats, srv.Refused, mem, dstats, log)
		if err != nil {
			l.Close()
			srv.Close()
			return err
		}
		defer stop()
		log.Info("metrics ready", "url", "http://"+maddr+"/metrics")
	}
	log.Info("memory node ready", "addr", addr, "size", f.size.String(), "cost_model", f.costModel,
		"max_conns", f.maxConns, "max_in_flight", f.maxInFlight, "data_dir", f.dataDir)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	if _, err := fmt.Fprintf(stdout, "%s%s\n", mnListeningPrefix, addr); err != nil {
		srv.Close()
		<-serveErr
		return fmt.Errorf("writing the listen line: %w", err)
	}

	select {
	case err := <-serveErr:
		srv.Close()
		return fmt.Errorf("serving %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", f.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("connections did not finish in time; closed them", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, tcp.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", addr, err)
	}
	st := srv.Stats()
	log.Info("memory node stopped", "batches", st.Doorbells, "reads", st.Reads, "writes", st.Writes,
		"cas", st.CAS, "cas_failed", st.CASFailed, "faa", st.FAA, "errors", st.Errors)
	return nil
}
