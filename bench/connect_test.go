package bench

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors"
	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/manifest"
	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/store"
	"github.com/aura-runtime/aura/workload/bank"
)

func TestConnectConfigValidate(t *testing.T) {
	c := ConnectConfig{Clients: -1, Duration: -1, RateTPS: -1, MaxAttempts: -1, ProgressEvery: -1}
	err := c.Validate()
	for _, want := range []string{"workload", "connection string", "clients", "duration", "rate", "max attempts", "progress"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

// TestConnectDrivesAServedNode runs Connect against one compute node served
// the way `aura node` serves it (a txn actor on a remote endpoint, a
// management API over HTTP), on an embedded memory node: Connect loads the
// bank tables, runs, and the bank's total is conserved.
func TestConnectDrivesAServedNode(t *testing.T) {
	ctx := context.Background()
	cfg := bank.DefaultConfig()
	cfg.Accounts = 1000
	wl, err := bank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dial := embedded(t)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	rem, err := actors.StartRemote(sys, actors.DefaultRemoteConfig("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer rem.Shutdown()
	dev, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	layout, err := store.Create(ctx, dev, wl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	ncfg := actors.DefaultNodeConfig("cn-1")
	ncfg.System, ncfg.Logger = sys, slog.New(slog.DiscardHandler)
	node, err := actors.NewNode(ncfg, dev, layout, wl)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.TxnSubmit); ok {
			sender, root := c.Sender(), c.ActorSystem().Root
			go func() {
				res, err := node.Submit(ctx, m)
				if err != nil {
					res = &messages.TxnResult{TxnId: m.GetTxnId(), Outcome: messages.TxnOutcome_TXN_OUTCOME_ERROR, Error: err.Error()}
				}
				root.Send(sender, res)
			}()
		}
	}), client.TxnActorName); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case client.TopologyPath:
			_ = json.NewEncoder(w).Encode(client.NewTopology(map[string]string{"cn-1": rem.Address()}, []string{"cn-1"}, nil))
		case client.OwnerMapPath:
			b, _ := manifest.Encode(&control.OwnerMap{}, manifest.Version2, 0)
			_, _ = w.Write(b)
		}
	}))
	defer api.Close()
	u, err := client.ParseURL("aura://" + rem.Address() + "/bank?http_addr=" + strings.TrimPrefix(api.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Connect(ctx, ConnectConfig{Mode: "mn-only", Workload: wl, URL: u, System: sys, Dial: dial, MN: "embedded",
		Clients: 4, Duration: time.Second, Warmup: 200 * time.Millisecond, Seed: 2, ProgressEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "mn-only" || res.Workload != "bank" || res.CNs != 1 || res.Params.Clients != 4 || res.Params.Loaded == 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Committed == 0 || res.Failed != 0 || res.Checks["bank_total"] != "pass" {
		t.Fatalf("committed %d, failed %d (last: %s), checks %v", res.Committed, res.Failed, res.LastError, res.Checks)
	}
	if res.Locks.MNCAS == 0 || res.Locks.Local != 0 || res.AtomicPerTxn == 0 || res.RDMA.CAS == 0 || len(res.Timeline) < 4 {
		t.Fatalf("locks %+v, atomics/txn %.2f, rdma %+v, %d samples", res.Locks, res.AtomicPerTxn, res.RDMA, len(res.Timeline))
	}
	if res.LatencyUs.P50 == 0 || res.ThroughputTPS == 0 {
		t.Fatalf("latency %+v, throughput %.0f", res.LatencyUs, res.ThroughputTPS)
	}

	// A cluster that answers nothing (no transaction endpoint at the URL's
	// node, no management API) fails the run with ErrNothingCommitted and
	// the last submission error, rather than reporting an empty table as a
	// success. (The same process endpoint: one protoactor remote per
	// process; and a live address, because protoactor keeps redialling a
	// dead one after Remote.Shutdown.)
	if err := sys.Root.StopFuture(sys.NewLocalPID(client.TxnActorName)).Wait(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAPI := ln.Addr().String()
	ln.Close()
	du, err := client.ParseURL("aura://" + rem.Address() + "/bank?http_addr=" + deadAPI)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Connect(ctx, ConnectConfig{Mode: "aura", Workload: wl, URL: du, System: sys, SkipLoad: true, APIWait: -1,
		Clients: 2, Duration: 300 * time.Millisecond, Seed: 2, ProgressEvery: 100 * time.Millisecond,
		Client: func(c *client.Config) { c.Call.AttemptTimeout = 200 * time.Millisecond }})
	if !errors.Is(err, ErrNothingCommitted) {
		t.Fatalf("Connect to nothing: %v, want ErrNothingCommitted", err)
	}
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
}
