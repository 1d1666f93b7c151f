package actors

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/owner"
	"github.com/aura-runtime/aura/actors/planner"
	"github.com/aura-runtime/aura/control"
	"github.com/aura-runtime/aura/messages"
)

// quietSystem is an actor system whose protoactor logs are dropped below
// error level.
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// ownerPeerEnv makes the test binary run as an owner peer process (see
// TestMain): one remote-enabled actor system per process, as in production.
// protoactor's Remote.Start writes grpc's process-global logger every time it
// runs, which races with an earlier remote's server goroutines when two
// remotes share a process; peers therefore run in their own processes.
const ownerPeerEnv = "AURA_TEST_OWNER_PEER"

func TestMain(m *testing.M) {
	if os.Getenv(ownerPeerEnv) == "1" {
		runOwnerPeer()
		return
	}
	code := m.Run()
	if clientRemote != nil {
		clientRemote.Shutdown()
		clientSystem.Shutdown()
	}
	os.Exit(code)
}

// The test process's own remote endpoint, shared by its tests (one
// Remote.Start per process; see ownerPeerEnv).
var (
	clientOnce   sync.Once
	clientSystem *actor.ActorSystem
	clientRemote *Remote
	clientErr    error
)

func clientSide(t *testing.T) *actor.ActorSystem {
	t.Helper()
	clientOnce.Do(func() {
		clientSystem = quietSystem()
		clientRemote, clientErr = StartRemote(clientSystem, DefaultRemoteConfig("127.0.0.1:0"))
	})
	if clientErr != nil {
		t.Fatal(clientErr)
	}
	return clientSystem
}

// runOwnerPeer serves a table that owns cohort 7 (key groups 1, 2) at epoch
// 3 on a loopback remote endpoint, prints the address, and exits when its
// standard input closes.
func runOwnerPeer() {
	sys := quietSystem()
	rem, err := StartRemote(sys, DefaultRemoteConfig("127.0.0.1:0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tab, err := owner.NewTable(owner.DefaultConfig())
	if err == nil {
		err = tab.Install(7, []control.KeyGroup{1, 2}, 3)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var clock atomic.Int64
	svc := owner.NewService(tab, func() int64 { return clock.Add(1) })
	if _, err := SpawnOwnerEndpoint(sys, svc, 1024); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// An OwnerMap endpoint for node "b" of the roster [a, b].
	own, err := newOwnership(OwnershipConfig{Names: []string{"a", "b"}}, "b", nil)
	if err == nil {
		_, err = sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &ownerMapActor{o: own} },
			actor.WithMailbox(actor.Bounded(64))), OwnerMapActorName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(rem.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	rem.Shutdown()
	sys.Shutdown()
}

// ownerPeer starts an owner peer process and returns its remote address and
// a function that stops it.
func ownerPeer(t *testing.T) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerPeerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("owner peer: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	return strings.TrimSpace(line), stop
}

func lockReq(txnID, reqID uint64, key uint64) *messages.LockRequest {
	return &messages.LockRequest{TxnId: txnID, CohortId: 7, Epoch: 3, Requester: "a", RequestId: reqID,
		Records: []*messages.RecordRef{{Table: 1, Key: key}}}
}

func TestOwnerRPCAcrossActorSystems(t *testing.T) {
	bAddr, _ := ownerPeer(t)
	aSys := clientSide(t)

	book := AddressBookFunc(func(n string) (string, bool) {
		if n == "b" {
			return bAddr, true
		}
		return "", false
	})
	tr, err := NewRemoteTransport(aSys, book, DefaultCallConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	rep, err := tr.Lock(ctx, "b", lockReq(1, 1, 100))
	if err != nil || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("first lock: %v, %v", rep, err)
	}
	// The same request again (a retry after a lost reply) is answered
	// idempotently, not as a conflict with itself.
	if rep, err := tr.Lock(ctx, "b", lockReq(1, 1, 100)); err != nil || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("retried lock: %v, %v", rep, err)
	}
	// Another transaction conflicts.
	if rep, err := tr.Lock(ctx, "b", lockReq(2, 2, 100)); err != nil || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_CONFLICT || rep.GetHolderTxnId() != 1 {
		t.Fatalf("conflicting lock: %v, %v", rep, err)
	}
	// A request at another epoch is refused, never granted (fencing).
	stale := lockReq(2, 3, 101)
	stale.Epoch = 2
	if rep, err := tr.Lock(ctx, "b", stale); err != nil || rep.GetStatus() == messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("stale-epoch lock: %v, %v", rep, err)
	}
	ur, err := tr.Unlock(ctx, "b", &messages.UnlockRequest{TxnId: 1, CohortId: 7, Epoch: 3, Requester: "a", RequestId: 4,
		Records: []*messages.RecordRef{{Table: 1, Key: 100}}})
	if err != nil || ur.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("unlock: %v, %v", ur, err)
	}
	if rep, err := tr.Lock(ctx, "b", lockReq(2, 5, 100)); err != nil || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("lock after unlock: %v, %v", rep, err)
	}

	var unknown *UnknownNodeError
	if _, err := tr.Lock(ctx, "nobody", lockReq(3, 6, 1)); !errors.As(err, &unknown) {
		t.Fatalf("lock on an unknown node: %v, want *UnknownNodeError", err)
	}
}

func TestOwnerRPCToDeadPeerGivesUpWithinBounds(t *testing.T) {
	addr, stop := ownerPeer(t)
	stop()

	aSys := clientSide(t)
	cfg := CallConfig{AttemptTimeout: 100 * time.Millisecond, MaxAttempts: 3, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	tr, err := NewRemoteTransport(aSys, AddressBookFunc(func(string) (string, bool) { return addr, true }), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = tr.Lock(context.Background(), "b", lockReq(1, 1, 100))
	var ce *CallError
	if !errors.As(err, &ce) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("lock on a dead peer: %v, want *CallError wrapping ErrUnreachable", err)
	}
	if ce.Attempts != 3 {
		t.Fatalf("attempts %d, want 3", ce.Attempts)
	}
	// 3 × 100 ms + backoff ≤ 40 ms, with generous slack for a loaded machine.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v: the call is not bounded", d)
	}
	// The caller's context bounds the call too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Lock(ctx, "b", lockReq(1, 2, 100)); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnreachable) {
		t.Fatalf("lock under a 50 ms context: %v", err)
	}
}

func TestCallConfigValidateAndBackoff(t *testing.T) {
	if err := DefaultCallConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := CallConfig{AttemptTimeout: 0, MaxAttempts: 0, BackoffBase: 10, BackoffMax: 5}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"AttemptTimeout", "MaxAttempts", "backoff"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	cfg := DefaultCallConfig()
	rng := rand.New(rand.NewPCG(1, 2))
	prevMax := time.Duration(0)
	for attempt := 2; attempt < 12; attempt++ {
		d := cfg.Backoff(attempt, rng)
		ceil := min(cfg.BackoffBase<<(attempt-2), cfg.BackoffMax)
		if d < ceil/2 || d > ceil {
			t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, d, ceil/2, ceil)
		}
		if ceil < prevMax {
			t.Fatalf("backoff ceiling shrank")
		}
		prevMax = ceil
	}
}

func TestOwnerMapPushAcrossProcesses(t *testing.T) {
	bAddr, _ := ownerPeer(t)
	sys := clientSide(t)
	book := AddressBookFunc(func(n string) (string, bool) { return bAddr, n == "b" })
	p, err := NewRemotePusher(sys, book, DefaultCallConfig(), 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m1 := &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 5, KeyGroups: []control.KeyGroup{10, 11}}, Owner: 1},
		{Cohort: control.Cohort{ID: 6, KeyGroups: []control.KeyGroup{12}}, Owner: 0}}}
	push := func(base, m *control.OwnerMap) *messages.OwnerMapAck {
		t.Helper()
		ps, err := planner.Pushes(base, m, 16, "a", 1) // 16-byte chunks: several per push
		if err != nil {
			t.Fatal(err)
		}
		var ack *messages.OwnerMapAck
		for _, x := range ps {
			if ack, err = p.Push(ctx, "b", x); err != nil {
				t.Fatal(err)
			}
			if ack.GetNeedFull() || ack.GetError() != "" {
				break
			}
		}
		return ack
	}
	if ack := push(nil, m1); ack.GetInstalledEpoch() != 1 || ack.GetError() != "" {
		t.Fatalf("first push: %v", ack)
	}
	// Idempotent: the same epoch again is acknowledged, nothing changes.
	if ack := push(nil, m1); ack.GetInstalledEpoch() != 1 || ack.GetError() != "" || ack.GetNeedFull() {
		t.Fatalf("repeated push: %v", ack)
	}
	m2 := m1.Clone()
	m2.Epoch = 2
	m2.Cohorts[1].Owner = 1
	if ack := push(m1, m2); ack.GetInstalledEpoch() != 2 {
		t.Fatalf("delta push: %v", ack)
	}
	// A delta against an epoch the node does not have asks for the full map.
	m3 := m2.Clone()
	m3.Epoch = 4
	m3.Cohorts[0].Owner = 0
	base := m2.Clone()
	base.Epoch = 3
	if ack := push(base, m3); !ack.GetNeedFull() || ack.GetInstalledEpoch() != 2 {
		t.Fatalf("delta on the wrong base: %v, want need_full at epoch 2", ack)
	}
	if _, err := p.Push(ctx, "nobody", &messages.OwnerMapPush{Epoch: 9, ChunkCount: 1}); err == nil {
		t.Fatal("push to an unknown node succeeded")
	}
}
