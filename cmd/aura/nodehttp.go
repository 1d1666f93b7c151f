package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/cluster"
	"github.com/aura-runtime/aura/manifest"
)

// Bounds of the management API's HTTP server. Requests are tiny GETs and
// answers at most a manifest (900 KiB): the timeouts only have to outlast a
// slow loopback or LAN peer, and they keep idle or stalled clients from
// holding connections.
const (
	mgmtReadHeaderTimeout = 2 * time.Second
	mgmtReadTimeout       = 5 * time.Second
	mgmtWriteTimeout      = 10 * time.Second
	mgmtIdleTimeout       = 60 * time.Second
	mgmtMaxHeaderBytes    = 8 << 10 // 8 KiB: a GET with a few headers
	// mgmtShutdownTimeout bounds the graceful shutdown when the node stops.
	mgmtShutdownTimeout = 2 * time.Second
)

// mgmtServer is a node's management API (aura node --http):
//
//   - GET /management/topology: the live compute nodes as workers (SPEC §8,
//     with partition = cohort and worker = compute node), see
//     client.Topology;
//   - GET /management/ownermap: an AURA extension, the node's installed
//     OwnerMap as a version-2 manifest (X-Aura-Epoch: its epoch), from
//     which a client takes the cohort → key group overlay it routes by.
//
// Anything else is a JSON error {code, message} with its status.
type mgmtServer struct {
	node  *actors.Node
	mem   *cluster.Membership
	order []string // --nodes
	log   *slog.Logger
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
}

// startMgmt serves the management API on ln until shutdown.
func startMgmt(ln net.Listener, node *actors.Node, mem *cluster.Membership, order []string, log *slog.Logger) *mgmtServer {
	s := &mgmtServer{node: node, mem: mem, order: order, log: log, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc(client.TopologyPath, s.get(s.topology))
	mux.HandleFunc(client.OwnerMapPath, s.get(s.ownerMap))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "NotFound", "no such endpoint: "+r.URL.Path)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: mgmtReadHeaderTimeout, ReadTimeout: mgmtReadTimeout,
		WriteTimeout: mgmtWriteTimeout, IdleTimeout: mgmtIdleTimeout, MaxHeaderBytes: mgmtMaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("management API", "err", err)
		}
	}()
	return s
}

// Addr is the address the server listens on.
func (s *mgmtServer) Addr() string { return s.ln.Addr().String() }

// shutdown stops accepting, lets requests in flight finish (bounded by
// mgmtShutdownTimeout) and waits for the server to return.
func (s *mgmtServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), mgmtShutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// get wraps a handler: GET (and HEAD) only, no query parameters.
func (s *mgmtServer) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" not allowed, use GET")
			return
		}
		if r.URL.RawQuery != "" {
			writeAPIError(w, http.StatusBadRequest, "BadRequest", r.URL.Path+" takes no query parameters")
			return
		}
		h(w, r)
	}
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(client.APIError{Code: code, Message: msg})
}

func (s *mgmtServer) topology(w http.ResponseWriter, _ *http.Request) {
	m, roster := s.node.InstalledMap()
	members, _ := s.mem.Snapshot()
	live := map[string]string{}
	for _, mb := range members {
		if mb.HasRole(cluster.RoleCN) && mb.Meta.RemoteAddr != "" {
			live[mb.Name] = mb.Meta.RemoteAddr
		}
	}
	if m.Epoch == 0 || len(roster) == 0 {
		// Before the first map: the order in which the planner hands out
		// slots to live compute nodes (--nodes first, then by name).
		roster = cluster.ComputeNodes(members, s.order)
	}
	t := client.NewTopology(live, roster, m)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(client.EpochHeader, strconv.FormatUint(t.Epoch, 10))
	_ = json.NewEncoder(w).Encode(t)
}

func (s *mgmtServer) ownerMap(w http.ResponseWriter, _ *http.Request) {
	m := s.node.OwnerMap()
	b, err := manifest.Encode(m, manifest.Version2, 0)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "Internal", "encode OwnerMap: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(client.EpochHeader, strconv.FormatUint(m.Epoch, 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
