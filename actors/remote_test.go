package actors

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestRemoteSurvivesMalformedBatches sends a node's remote endpoint the
// batches protoactor-go's reader indexes unchecked at the pinned version
// (no target, an unknown type id, an unknown sender): each closes only the
// hostile stream, and the node goes on serving OwnerMap pushes. Without
// recoverStream the first one crashes the node's process.
func TestRemoteSurvivesMalformedBatches(t *testing.T) {
	bAddr, _ := ownerPeer(t)
	push := pushTo(t, clientSide(t), bAddr)
	if ack := push(nil, cohort7(1, 1)); ack.GetInstalledEpoch() != 1 {
		t.Fatalf("push before: %v", ack)
	}
	conn, err := grpc.Dial(bAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := &actor.PID{Address: bAddr, Id: OwnerMapActorName}
	for name, batch := range map[string]*remote.MessageBatch{
		"no target":       {Envelopes: []*remote.MessageEnvelope{{Target: 0}}},
		"unknown type id": {Targets: []*actor.PID{target}, Envelopes: []*remote.MessageEnvelope{{Target: 0, TypeId: 7}}},
		"unknown sender": {Targets: []*actor.PID{target}, TypeNames: []string{"aura.v1.OwnerMapPush"},
			Envelopes: []*remote.MessageEnvelope{{Target: 0, Sender: 5}}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stream, err := remote.NewRemotingClient(conn).Receive(ctx)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", name, err)
		}
		if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: batch}}); err != nil {
			cancel()
			t.Fatalf("%s: send: %v", name, err)
		}
		_, err = stream.Recv()
		cancel()
		if err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("%s: the stream stayed open (%v)", name, err)
		}
	}
	if ack := push(cohort7(1, 1), cohort7(2, 0)); ack.GetInstalledEpoch() != 2 {
		t.Fatalf("push after the malformed batches: %v", ack)
	}
}

// TestRemoteRefusesOversizedMessages: a peer's message above
// MaxRemoteMessageBytes ends that stream with ResourceExhausted before it
// is decoded, and the node goes on serving.
func TestRemoteRefusesOversizedMessages(t *testing.T) {
	bAddr, _ := ownerPeer(t)
	push := pushTo(t, clientSide(t), bAddr)
	conn, err := grpc.Dial(bAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(2*MaxRemoteMessageBytes)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := &remote.MessageBatch{TypeNames: []string{string(make([]byte, MaxRemoteMessageBytes))}}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: big}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("send: %v", err)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: stream ended with %v, want ResourceExhausted", err)
	}
	if ack := push(nil, cohort7(1, 1)); ack.GetInstalledEpoch() != 1 {
		t.Fatalf("push after the oversized message: %v", ack)
	}
}

// TestRemoteToADeadPeerLeavesNoConnection sends to an address where
// nothing listens: once the endpoint reports the peer terminated, no
// goroutine of the attempt is left. With protoactor's default of five
// attempts, four orphaned gRPC connections would go on redialling the dead
// address for the life of the process (endpointConnectAttempts).
func TestRemoteToADeadPeerLeavesNoConnection(t *testing.T) {
	sys := clientSide(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()

	leakOpts := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")}
	terminated := make(chan struct{})
	var once sync.Once
	sub := sys.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*remote.EndpointTerminatedEvent); ok && e.Address == dead {
			once.Do(func() { close(terminated) })
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	sys.Root.Send(&actor.PID{Address: dead, Id: OwnerMapActorName}, &remote.Ping{})
	select {
	case <-terminated:
	case <-time.After(20 * time.Second):
		t.Fatal("the endpoint to a dead address never reported itself terminated")
	}
	goleak.VerifyNone(t, leakOpts...)
}
