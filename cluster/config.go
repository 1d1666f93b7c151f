package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

// ErrInvalidConfig is wrapped by every problem Config.Validate reports.
var ErrInvalidConfig = errors.New("cluster: invalid config")

// Limits Validate enforces.
const (
	// MaxNodeNameLen caps NodeName: memberlist puts the name in every
	// message, and the name is also a placement identity.
	MaxNodeNameLen = 64
	// MaxEventQueueLen caps EventQueueLen so the event buffer stays a
	// bounded, modest amount of memory.
	MaxEventQueueLen = 1 << 16
)

// Config configures a Membership. Start from DefaultLANConfig (deployments)
// or DefaultTestConfig (loopback tests) and override what you need; Validate
// reports every problem at once. The zero value is not valid.
// MaxGossipKeys bounds the gossip keyring (a rotation needs two keys).
const MaxGossipKeys = 8

type Config struct {
	// NodeName is this node's unique name in the cluster (1..64 bytes of
	// [A-Za-z0-9._-]). A restarted process reuses it to rejoin as the same
	// node. Default: the host name (one node per host in a LAN deployment).
	NodeName string

	// BindAddr is the IP address the gossip UDP and TCP listeners bind to.
	// Default "0.0.0.0" (all interfaces); tests use "127.0.0.1".
	BindAddr string
	// BindPort is the gossip port (UDP and TCP). 0 picks a free port (see
	// Membership.Addr). Default 7946, memberlist's conventional port.
	BindPort int

	// AdvertiseAddr is the IP other nodes use to reach this node, for NAT or
	// multi-homed hosts. Default "" = the bind address, or a private
	// interface address when bound to 0.0.0.0.
	AdvertiseAddr string
	// AdvertisePort is the port advertised with AdvertiseAddr. Default 0 =
	// the bound port.
	AdvertisePort int

	// Seeds are host:port gossip addresses of existing members to join
	// through. Any one reachable seed suffices; listing this node's own
	// address is harmless. Default empty: the node starts a cluster alone.
	Seeds []string

	// Meta is advertised to every member: the protoactor remote address and
	// the roles. Meta.Incarnation 0 means "set from the clock at Start".
	// Its encoding must fit in MaxMetaSize (512) bytes. Default: no address,
	// role "cn".
	Meta Meta

	// ProbeInterval is the period of the failure detector's random probe.
	// Default 500ms: failure is noticed within about a second on a LAN, at
	// one small UDP packet per node per interval. memberlist's own default
	// is 1s; we want crashed owners found faster.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for an ack before
	// indirect probes start; it must be below ProbeInterval and above the
	// p99 RTT. Default 200ms: generous for a LAN, leaves 300ms for
	// indirect and TCP fallback probes in the interval.
	ProbeTimeout time.Duration
	// IndirectChecks is how many other members are asked to probe a node
	// whose direct probe failed. Default 3 (memberlist's): a node is not
	// suspected because of one bad path.
	IndirectChecks int
	// SuspicionMult scales how long a suspected node has to refute before it
	// is declared failed: SuspicionMult * max(1, log10(N)) * ProbeInterval.
	// Default 4 (memberlist's LAN value): 2s for clusters up to 9 nodes.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion timeout when no other
	// member confirms the suspicion: SuspicionMaxTimeoutMult * the timeout
	// above. Default 6 (memberlist's): at most 12s for small clusters.
	SuspicionMaxTimeoutMult int
	// AwarenessMaxMultiplier lets a node that notices it is degraded (missed
	// acks, refutes) stretch its probe interval up to this factor instead of
	// falsely accusing healthy peers. Default 8 (memberlist's).
	AwarenessMaxMultiplier int

	// GossipInterval is the period of the gossip round that spreads
	// membership changes not piggybacked on probes. Default 200ms
	// (memberlist's LAN value): changes reach a small cluster in well under
	// a second.
	GossipInterval time.Duration
	// GossipNodes is how many random members each gossip round sends to.
	// Default 3 (memberlist's).
	GossipNodes int
	// GossipToTheDeadTime is how long a failed node still receives gossip,
	// giving it a chance to refute a false failure. Default 15s
	// (= PushPullInterval).
	GossipToTheDeadTime time.Duration
	// RetransmitMult scales how often each broadcast is retransmitted:
	// RetransmitMult * ceil(log10(N+1)). Default 4 (memberlist's).
	RetransmitMult int
	// PushPullInterval is the period of the full TCP state exchange with one
	// random member; it repairs anything gossip missed (including a
	// restarted node whose first alive message was refused). Default 15s:
	// half memberlist's LAN value, cheap for clusters of tens of nodes.
	PushPullInterval time.Duration
	// TCPTimeout bounds connecting, reading and writing one TCP stream (a
	// join or push/pull attempt, a TCP fallback probe). Default 5s.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime is how long a failed node's name must stay failed
	// before the same name may come back from a different address (a
	// restart on a new port or host). 0 forbids that (a restart must reuse
	// its address). Default 2s: long enough to not flip between two live
	// processes misconfigured with one name, short enough that a restarted
	// node is back within one push/pull.
	DeadNodeReclaimTime time.Duration

	// JoinTimeout bounds the whole join (all attempts and backoff sleeps) in
	// Start; one attempt already in flight may overrun it by up to
	// TCPTimeout per seed. Default 30s.
	JoinTimeout time.Duration
	// JoinRetries is how many times a join that reached no seed is retried
	// (so at most JoinRetries+1 attempts). Default 6.
	JoinRetries int
	// JoinBackoff is the sleep before the first retry; it doubles per retry
	// up to JoinBackoffMax, and each sleep is jittered to [d/2, d) so nodes
	// started together do not retry in lockstep. Default 250ms.
	JoinBackoff time.Duration
	// JoinBackoffMax caps the retry sleep. Default 5s.
	JoinBackoffMax time.Duration
	// LeaveTimeout is the default for Leave(0): how long to wait for the
	// leave broadcast to go out before shutting down anyway. Default 5s.
	LeaveTimeout time.Duration

	// EventQueueLen is the capacity of the Events channel (1..65536). When
	// it is full the oldest event is dropped (see Membership.Events).
	// Default 1024: far more than a membership change burst in a small
	// cluster.
	EventQueueLen int

	// GossipKeys turn on gossip encryption (AES-GCM, memberlist's keyring):
	// GossipKeys[0] encrypts everything this node sends, and a message is
	// accepted if any key decrypts it; unencrypted or undecryptable
	// messages are refused, logged and counted (Membership.Refused). Each
	// key is 16, 24 or 32 bytes (AES-128/192/256); at most MaxGossipKeys.
	// Rotation without downtime: add the new key to every node as a second
	// key, then make it the first everywhere, then drop the old one
	// (Membership.Keyring does each step on a running node). Default none:
	// plain gossip, for tests on loopback; a production cluster sets one.
	GossipKeys [][]byte

	// Logger receives this package's logs and memberlist's own (mapped from
	// its [DEBUG]/[INFO]/[WARN]/[ERR] prefixes to slog levels, with
	// component=memberlist). Default nil = slog.Default().
	Logger *slog.Logger
}

// DefaultLANConfig returns the configuration for a deployment on one LAN
// (see README.md for the table and the reasoning).
func DefaultLANConfig() Config {
	host, _ := os.Hostname()
	return Config{
		NodeName:                host,
		BindAddr:                "0.0.0.0",
		BindPort:                7946,
		Meta:                    Meta{Roles: []string{RoleCN}},
		ProbeInterval:           500 * time.Millisecond,
		ProbeTimeout:            200 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		AwarenessMaxMultiplier:  8,
		GossipInterval:          200 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     15 * time.Second,
		RetransmitMult:          4,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              5 * time.Second,
		DeadNodeReclaimTime:     2 * time.Second,
		JoinTimeout:             30 * time.Second,
		JoinRetries:             6,
		JoinBackoff:             250 * time.Millisecond,
		JoinBackoffMax:          5 * time.Second,
		LeaveTimeout:            5 * time.Second,
		EventQueueLen:           1024,
	}
}

// DefaultTestConfig returns fast timings for clusters on loopback in tests:
// bind 127.0.0.1 on a free port, failures detected within about 1–2s even
// under the race detector on a loaded machine, and a logger that discards
// everything. Callers set NodeName (and Seeds).
func DefaultTestConfig() Config {
	c := DefaultLANConfig()
	c.NodeName = ""
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.IndirectChecks = 2
	c.SuspicionMult = 3
	c.SuspicionMaxTimeoutMult = 3
	c.GossipInterval = 20 * time.Millisecond
	c.GossipToTheDeadTime = time.Second
	c.PushPullInterval = 500 * time.Millisecond
	c.TCPTimeout = 2 * time.Second
	c.DeadNodeReclaimTime = 50 * time.Millisecond
	c.JoinTimeout = 10 * time.Second
	c.JoinRetries = 8
	c.JoinBackoff = 50 * time.Millisecond
	c.JoinBackoffMax = 500 * time.Millisecond
	c.LeaveTimeout = 2 * time.Second
	c.EventQueueLen = 256
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// Validate checks c and returns every problem found, joined (errors.Join);
// each wraps ErrInvalidConfig and names its field. It returns nil for a
// usable configuration.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if len(c.GossipKeys) > MaxGossipKeys {
		bad("GossipKeys", "%d keys, limit %d", len(c.GossipKeys), MaxGossipKeys)
	}
	for i, k := range c.GossipKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			bad(fmt.Sprintf("GossipKeys[%d]", i), "%d bytes, want 16, 24 or 32", n)
		}
	}

	if err := CheckNodeName(c.NodeName); err != nil {
		bad("NodeName", "%v", err)
	}

	if net.ParseIP(c.BindAddr) == nil {
		bad("BindAddr", "%q is not an IP address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("BindPort", "%d is outside 0..65535", c.BindPort)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("AdvertiseAddr", "%q is not an IP address", c.AdvertiseAddr)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		bad("AdvertisePort", "%d is outside 0..65535", c.AdvertisePort)
	}

	seen := make(map[string]bool, len(c.Seeds))
	for i, s := range c.Seeds {
		host, port, err := net.SplitHostPort(s)
		switch {
		case err != nil:
			bad(fmt.Sprintf("Seeds[%d]", i), "%q: want host:port: %v", s, err)
		case host == "":
			bad(fmt.Sprintf("Seeds[%d]", i), "%q: empty host", s)
		default:
			if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
				bad(fmt.Sprintf("Seeds[%d]", i), "%q: port must be in 1..65535", s)
			}
		}
		if seen[s] {
			bad(fmt.Sprintf("Seeds[%d]", i), "%q listed twice", s)
		}
		seen[s] = true
	}

	if _, err := EncodeMeta(c.Meta); err != nil {
		errs = append(errs, fmt.Errorf("%w: Meta: %w", ErrInvalidConfig, err))
	}

	positive := func(field string, d time.Duration) {
		if d <= 0 {
			bad(field, "%v must be > 0", d)
		}
	}
	atLeast := func(field string, v, min int) {
		if v < min {
			bad(field, "%d must be >= %d", v, min)
		}
	}
	positive("ProbeInterval", c.ProbeInterval)
	positive("ProbeTimeout", c.ProbeTimeout)
	if c.ProbeTimeout > 0 && c.ProbeInterval > 0 && c.ProbeTimeout >= c.ProbeInterval {
		bad("ProbeTimeout", "%v must be below ProbeInterval (%v) to leave time for indirect probes", c.ProbeTimeout, c.ProbeInterval)
	}
	atLeast("IndirectChecks", c.IndirectChecks, 0)
	atLeast("SuspicionMult", c.SuspicionMult, 1)
	atLeast("SuspicionMaxTimeoutMult", c.SuspicionMaxTimeoutMult, 1)
	atLeast("AwarenessMaxMultiplier", c.AwarenessMaxMultiplier, 1)
	positive("GossipInterval", c.GossipInterval)
	atLeast("GossipNodes", c.GossipNodes, 1)
	if c.GossipToTheDeadTime < 0 {
		bad("GossipToTheDeadTime", "%v must be >= 0", c.GossipToTheDeadTime)
	}
	atLeast("RetransmitMult", c.RetransmitMult, 1)
	positive("PushPullInterval", c.PushPullInterval)
	positive("TCPTimeout", c.TCPTimeout)
	if c.DeadNodeReclaimTime < 0 {
		bad("DeadNodeReclaimTime", "%v must be >= 0", c.DeadNodeReclaimTime)
	}
	positive("JoinTimeout", c.JoinTimeout)
	atLeast("JoinRetries", c.JoinRetries, 0)
	positive("JoinBackoff", c.JoinBackoff)
	if c.JoinBackoffMax < c.JoinBackoff {
		bad("JoinBackoffMax", "%v must be >= JoinBackoff (%v)", c.JoinBackoffMax, c.JoinBackoff)
	}
	positive("LeaveTimeout", c.LeaveTimeout)
	if c.EventQueueLen < 1 || c.EventQueueLen > MaxEventQueueLen {
		bad("EventQueueLen", "%d is outside 1..%d", c.EventQueueLen, MaxEventQueueLen)
	}
	return errors.Join(errs...)
}

// CheckNodeName reports whether name can be a node's membership name: 1 to
// MaxNodeNameLen bytes of [A-Za-z0-9._-].
func CheckNodeName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxNodeNameLen:
		return fmt.Errorf("%d bytes, limit %d", len(name), MaxNodeNameLen)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("%q: want only [A-Za-z0-9._-]", name)
		}
	}
	return nil
}
