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
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/aura-runtime/aura/actors/cohort"
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

// runOwnerPeer serves node "b" of the roster [a, b] on a loopback remote
// endpoint — its cohort activator (owner RPCs) and its OwnerMap endpoint,
// over one ownership state as in a node — prints the address, and exits
// when its standard input closes. It owns what the maps pushed to it say.
func runOwnerPeer() {
	sys := quietSystem()
	rem, err := StartRemote(sys, DefaultRemoteConfig("127.0.0.1:0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	own, err := newOwnership(OwnershipConfig{Names: []string{"a", "b"}}, "b", nil)
	if err == nil {
		own.root = sys.Root
		own.activator, err = cohort.Spawn(sys, cohort.DefaultConfig(), own, own.svc)
	}
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

// pushTo returns a function that pushes OwnerMaps (full, in 16-byte chunks:
// several per push) to node "b" at bAddr and returns the last
// acknowledgement.
func pushTo(t *testing.T, sys *actor.ActorSystem, bAddr string) func(base, m *control.OwnerMap) *messages.OwnerMapAck {
	book := AddressBookFunc(func(n string) (string, bool) { return bAddr, n == "b" })
	p, err := NewRemotePusher(sys, book, DefaultCallConfig(), 2)
	if err != nil {
		t.Fatal(err)
	}
	return func(base, m *control.OwnerMap) *messages.OwnerMapAck {
		t.Helper()
		ps, err := planner.Pushes(base, m, 16, "a", 1)
		if err != nil {
			t.Fatal(err)
		}
		var ack *messages.OwnerMapAck
		for _, x := range ps {
			if ack, err = p.Push(context.Background(), "b", x); err != nil {
				t.Fatal(err)
			}
			if ack.GetNeedFull() || ack.GetError() != "" {
				break
			}
		}
		return ack
	}
}

// cohort7 is the map of epoch e in which cohort 7 (key groups 1, 2) is
// owned by roster index owner (0 = a, 1 = b).
func cohort7(e uint64, owner int) *control.OwnerMap {
	return &control.OwnerMap{Epoch: e, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 7, KeyGroups: []control.KeyGroup{1, 2}}, Owner: owner}}}
}

func TestOwnerRPCAcrossActorSystems(t *testing.T) {
	bAddr, _ := ownerPeer(t)
	aSys := clientSide(t)
	push := pushTo(t, aSys, bAddr)
	if ack := push(nil, cohort7(3, 1)); ack.GetInstalledEpoch() != 3 || ack.GetError() != "" {
		t.Fatalf("push of epoch 3: %v", ack)
	}

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
	// Grants went to cohort 7's activation: its PID is cached.
	if n := tr.Activations(); n != 1 {
		t.Fatalf("%d cached activations after grants, want 1", n)
	}

	// Cohort 7 moves to a at epoch 4. Once b's table has no holder left the
	// activation is retired; a request through the cached PID (or the
	// activator, if the activation is gone) is refused with MOVED(a, 4),
	// never granted, and the cache forgets the activation.
	if ur, err := tr.Unlock(ctx, "b", &messages.UnlockRequest{TxnId: 2, CohortId: 7, Epoch: 3, Requester: "a", RequestId: 7, All: true}); err != nil || ur.GetStatus() != messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("release before the move: %v, %v", ur, err)
	}
	if ack := push(nil, cohort7(4, 0)); ack.GetInstalledEpoch() != 4 || ack.GetError() != "" {
		t.Fatalf("push of epoch 4: %v", ack)
	}
	for i := range 3 {
		rep, err := tr.Lock(ctx, "b", lockReq(3, uint64(8+i), 102))
		if err != nil || rep.GetStatus() != messages.LockStatus_LOCK_STATUS_MOVED ||
			rep.GetMoved().GetOwner() != "a" || rep.GetMoved().GetEpoch() != 4 {
			t.Fatalf("lock after the move (try %d): %v, %v; want MOVED(a, 4)", i, rep, err)
		}
		if n := tr.Activations(); n != 0 {
			t.Fatalf("%d cached activations after MOVED, want 0", n)
		}
	}

	// Back to b at epoch 5: a new activation serves requests of epoch 5;
	// the old epoch stays fenced.
	if ack := push(nil, cohort7(5, 1)); ack.GetInstalledEpoch() != 5 || ack.GetError() != "" {
		t.Fatalf("push of epoch 5: %v", ack)
	}
	old := lockReq(3, 11, 103)
	if rep, err := tr.Lock(ctx, "b", old); err != nil || rep.GetStatus() == messages.LockStatus_LOCK_STATUS_OK {
		t.Fatalf("epoch-3 lock after the return at epoch 5: %v, %v; want a refusal", rep, err)
	}
	fresh := lockReq(3, 12, 103)
	fresh.Epoch = 5
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := tr.Lock(ctx, "b", fresh)
		if err == nil && rep.GetStatus() == messages.LockStatus_LOCK_STATUS_OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("epoch-5 lock: %v, %v", rep, err)
		}
		fresh.RequestId += 100 // a new attempt, not a resend
		time.Sleep(10 * time.Millisecond)
	}
	if n := tr.Activations(); n != 1 {
		t.Fatalf("%d cached activations after the return, want 1", n)
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
	push := pushTo(t, sys, bAddr)
	m1 := &control.OwnerMap{Epoch: 1, Cohorts: []control.Placement{
		{Cohort: control.Cohort{ID: 5, KeyGroups: []control.KeyGroup{10, 11}}, Owner: 1},
		{Cohort: control.Cohort{ID: 6, KeyGroups: []control.KeyGroup{12}}, Owner: 0}}}
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
