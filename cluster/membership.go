package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// EventKind says what happened to a member.
type EventKind uint8

const (
	// EventJoin: a node became alive (first seen, or back after Leave/Fail,
	// possibly at a new address after a restart).
	EventJoin EventKind = iota + 1
	// EventLeave: a node left gracefully (it broadcast its own departure).
	EventLeave
	// EventFail: the failure detector declared a node dead.
	EventFail
	// EventUpdate: a live node changed its metadata.
	EventUpdate
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	default:
		return fmt.Sprintf("EventKind(%d)", uint8(k))
	}
}

// Member is one live node as this node sees it.
type Member struct {
	// Name is the node's unique name (Config.NodeName).
	Name string
	// Addr is the node's gossip address (host:port).
	Addr string
	// Meta is the node's decoded metadata: remote actor address, roles,
	// process incarnation.
	Meta
}

// Clone returns a deep copy of m.
func (m Member) Clone() Member {
	m.Meta = m.Meta.Clone()
	return m
}

// Event reports one membership change applied to this node's view.
type Event struct {
	Kind EventKind
	// Member is the member after the change (for Leave and Fail: as it was
	// last known).
	Member Member
	// Epoch is the membership epoch right after this change was applied.
	// Events are emitted in epoch order and epochs of consecutive changes
	// are consecutive, so a gap (Epoch > previous+1) means events were
	// dropped and the consumer should resynchronise with Snapshot.
	Epoch uint64
}

// Errors returned by Membership's lifecycle methods.
var (
	ErrJoinFailed     = errors.New("cluster: could not join any seed")
	ErrAlreadyStarted = errors.New("cluster: membership already started")
	ErrNotRunning     = errors.New("cluster: membership not running")
)

type lifeState uint8

const (
	stateNew lifeState = iota
	stateRunning
	stateStopped
)

// Membership is this node's view of the cluster, kept by hashicorp/memberlist
// (SWIM gossip with suspicion and indirect probes).
//
// The view (Members, Epoch, Snapshot) is updated synchronously in
// memberlist's event callbacks and is therefore always authoritative; the
// Events channel is a bounded notification stream on top of it. When the
// channel is full the oldest queued event is dropped (and counted in
// Dropped) so memberlist's callbacks never block and the newest change is
// always delivered; a consumer detects the loss as a gap in Event.Epoch and
// re-reads Snapshot.
//
// All methods are safe for concurrent use. A Membership runs once: after
// Leave or Shutdown, make a new one to rejoin.
type Membership struct {
	cfg     Config
	log     *slog.Logger
	events  chan Event
	dropped atomic.Uint64
	// refused counts gossip messages memberlist could not authenticate
	// (see Config.GossipKeys).
	refused atomic.Uint64
	// kinds counts the changes applied to the view, by EventKind.
	kinds [EventUpdate + 1]atomic.Uint64

	// mu guards the view and the local metadata. memberlist calls the
	// delegates with its own node lock held, so code holding mu never calls
	// into memberlist.
	mu         sync.RWMutex
	meta       Meta
	metaBytes  []byte
	members    map[string]Member
	epoch      uint64
	lastChange time.Time
	lastUnrest time.Time              // last change other than a graceful leave
	closed     bool                   // events closed, view frozen
	ml         *memberlist.Memberlist // set once by Start; read by handleUserMsg
	intents    map[string]leaveIntent // announced leaves awaiting their removal
	leaveAcks  map[string]bool        // while announcing our own leave: who acked
	ackNotify  chan struct{}          // while announcing: signalled per ack

	// keyring is the gossip keyring (nil without Config.GossipKeys); set
	// by Start.
	keyring *memberlist.Keyring
	// lifeMu serialises Start, Leave, Shutdown and UpdateMeta.
	lifeMu sync.Mutex
	state  lifeState
	addr   atomic.Pointer[string]
}

// New validates cfg and returns a Membership that has not started yet; its
// Events channel already exists, so a consumer can subscribe before Start.
func New(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Seeds = slices.Clone(cfg.Seeds)
	cfg.Meta = cfg.Meta.Clone()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Membership{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "cluster", "node", cfg.NodeName),
		events:  make(chan Event, cfg.EventQueueLen),
		meta:    cfg.Meta,
		members: make(map[string]Member),
		intents: make(map[string]leaveIntent),
	}, nil
}

// Start creates the memberlist (binding the gossip port) and, if Seeds is
// not empty, joins through them: each attempt contacts every seed and
// succeeds if any one answers; failed attempts are retried up to
// JoinRetries times with jittered exponential backoff, all within
// JoinTimeout and ctx. A node without seeds starts a cluster alone. If the
// join fails, Start shuts the node down and returns an error wrapping
// ErrJoinFailed. Cancel ctx to abort the join; Leave, Shutdown and
// UpdateMeta wait for Start to return.
func (m *Membership) Start(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.state != stateNew {
		return ErrAlreadyStarted
	}

	m.mu.Lock()
	if m.meta.Incarnation == 0 {
		m.meta.Incarnation = uint64(time.Now().UnixNano())
	}
	b, err := EncodeMeta(m.meta)
	if err == nil {
		m.metaBytes = b
	}
	m.mu.Unlock()
	if err != nil {
		m.stopLocked()
		return err
	}

	ml, err := memberlist.Create(m.memberlistConfig())
	if err != nil {
		m.stopLocked()
		return fmt.Errorf("cluster: create memberlist: %w", err)
	}
	m.mu.Lock()
	m.ml = ml
	m.mu.Unlock()
	m.state = stateRunning
	addr := ml.LocalNode().Address()
	m.addr.Store(&addr)

	if len(m.cfg.Seeds) > 0 {
		if err := m.join(ctx); err != nil {
			m.stopLocked()
			return err
		}
	}
	m.log.Info("cluster: membership started", "addr", addr, "seeds", m.cfg.Seeds, "members", len(m.Members()))
	return nil
}

func (m *Membership) memberlistConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = m.cfg.NodeName
	c.BindAddr = m.cfg.BindAddr
	c.BindPort = m.cfg.BindPort
	c.AdvertiseAddr = m.cfg.AdvertiseAddr
	c.AdvertisePort = m.cfg.AdvertisePort
	if c.AdvertisePort == 0 {
		c.AdvertisePort = m.cfg.BindPort // memberlist replaces it when BindPort is 0
	}
	c.ProbeInterval = m.cfg.ProbeInterval
	c.ProbeTimeout = m.cfg.ProbeTimeout
	c.IndirectChecks = m.cfg.IndirectChecks
	c.SuspicionMult = m.cfg.SuspicionMult
	c.SuspicionMaxTimeoutMult = m.cfg.SuspicionMaxTimeoutMult
	c.AwarenessMaxMultiplier = m.cfg.AwarenessMaxMultiplier
	c.GossipInterval = m.cfg.GossipInterval
	c.GossipNodes = m.cfg.GossipNodes
	c.GossipToTheDeadTime = m.cfg.GossipToTheDeadTime
	c.RetransmitMult = m.cfg.RetransmitMult
	c.PushPullInterval = m.cfg.PushPullInterval
	c.TCPTimeout = m.cfg.TCPTimeout
	c.DeadNodeReclaimTime = m.cfg.DeadNodeReclaimTime
	d := delegate{m}
	c.Delegate = d
	c.Events = d
	c.Alive = d
	c.Conflict = d
	c.LogOutput = nil
	c.Logger = newMemberlistLogger(m.cfg.Logger, &m.refused)
	if len(m.cfg.GossipKeys) > 0 {
		// Validate checked the key sizes, which is all NewKeyring checks.
		kr, err := memberlist.NewKeyring(m.cfg.GossipKeys[1:], m.cfg.GossipKeys[0])
		if err == nil {
			c.Keyring, m.keyring = kr, kr
			c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
		}
	}
	return c
}

func (m *Membership) join(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.JoinTimeout)
	defer cancel()
	backoff := m.cfg.JoinBackoff
	var errs []error
	for attempt := 1; ; attempt++ {
		n, err := m.ml.Join(m.cfg.Seeds)
		if n > 0 {
			m.log.Info("cluster: joined", "seeds_reached", n, "attempt", attempt)
			return nil
		}
		if err == nil {
			err = errors.New("no seed answered")
		}
		err = flattenErr(err)
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if attempt > m.cfg.JoinRetries {
			break
		}
		sleep := backoff
		if half := backoff / 2; half > 0 {
			sleep = half + rand.N(half)
		}
		backoff = min(2*backoff, m.cfg.JoinBackoffMax)
		m.log.Warn("cluster: join failed, retrying", "attempt", attempt, "in", sleep, "err", err)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			errs = append(errs, ctx.Err())
			return fmt.Errorf("%w %v after %d attempts: %w", ErrJoinFailed, m.cfg.Seeds, attempt, errors.Join(errs...))
		case <-t.C:
		}
	}
	return fmt.Errorf("%w %v after %d attempts: %w", ErrJoinFailed, m.cfg.Seeds, m.cfg.JoinRetries+1, errors.Join(errs...))
}

// Leave leaves gracefully, within timeout (<= 0 means Config.LeaveTimeout):
// it announces the intent to every live member and waits (up to half the
// timeout) for their acknowledgements, so they report EventLeave rather than
// EventFail; then it broadcasts memberlist's leave, waits for it to go out,
// and shuts down. It shuts down even if a wait times out, and then returns
// the broadcast error.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	switch m.state {
	case stateNew:
		m.stopLocked()
		return nil
	case stateStopped:
		return nil
	}
	if timeout <= 0 {
		timeout = m.cfg.LeaveTimeout
	}
	start := time.Now()
	m.announceLeave(timeout / 2)
	err := m.ml.Leave(max(timeout-time.Since(start), timeout/4))
	if err != nil {
		err = fmt.Errorf("cluster: leave: %w", err)
		m.log.Warn("cluster: leave broadcast not confirmed, shutting down anyway", "err", err)
	} else {
		m.log.Info("cluster: left")
	}
	m.stopLocked()
	return err
}

// Shutdown stops gossip and failure detection at once, without a leave
// broadcast: the others will detect this node as failed. It closes the
// Events channel and freezes the view. Safe to call more than once.
func (m *Membership) Shutdown() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	return m.stopLocked()
}

func (m *Membership) stopLocked() error {
	if m.state == stateStopped {
		return nil
	}
	var err error
	if m.ml != nil {
		err = m.ml.Shutdown()
	}
	m.state = stateStopped
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.events)
	}
	m.mu.Unlock()
	return err
}

// UpdateMeta replaces this node's metadata and re-advertises it, waiting up
// to timeout (<= 0: Config.LeaveTimeout) for the broadcast; every member then
// sees EventUpdate. A zero Incarnation keeps the current one.
func (m *Membership) UpdateMeta(meta Meta, timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.state != stateRunning {
		return ErrNotRunning
	}
	meta = meta.Clone()
	m.mu.Lock()
	if meta.Incarnation == 0 {
		meta.Incarnation = m.meta.Incarnation
	}
	b, err := EncodeMeta(meta)
	if err == nil {
		m.meta, m.metaBytes = meta, b
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = m.cfg.LeaveTimeout
	}
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("cluster: update metadata: %w", err)
	}
	return nil
}

// Refused returns the number of gossip messages refused because they
// could not be authenticated with the keyring (Config.GossipKeys): a peer
// with no key or another key, or garbage. Each refusal is also logged.
func (m *Membership) Refused() uint64 { return m.refused.Load() }

// Keyring returns the running gossip keyring for key rotation (AddKey,
// UseKey, RemoveKey; see Config.GossipKeys), or nil when gossip is not
// encrypted or the membership is not running.
func (m *Membership) Keyring() *memberlist.Keyring {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.ml == nil {
		return nil
	}
	return m.keyring
}

// Events returns the bounded stream of membership changes, in the order they
// were applied (Epoch order). It is closed by Leave/Shutdown. If nobody
// reads, the oldest events are dropped (see Dropped); the view stays exact.
func (m *Membership) Events() <-chan Event { return m.events }

// Dropped is the number of events discarded because Events was full.
func (m *Membership) Dropped() uint64 { return m.dropped.Load() }

// EventCount is the number of changes of kind k applied to this node's
// view since Start (counted whether or not Events delivered them).
func (m *Membership) EventCount(k EventKind) uint64 {
	if k < EventJoin || k > EventUpdate {
		return 0
	}
	return m.kinds[k].Load()
}

// Name is this node's name.
func (m *Membership) Name() string { return m.cfg.NodeName }

// Addr is this node's advertised gossip address (host:port) once started,
// or "" before; use it as a seed for other nodes.
func (m *Membership) Addr() string {
	if p := m.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// LocalMeta returns the metadata this node currently advertises.
func (m *Membership) LocalMeta() Meta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.Clone()
}

// Members returns the live members (including this node), sorted by name.
func (m *Membership) Members() []Member {
	ms, _ := m.Snapshot()
	return ms
}

// Epoch is the membership epoch: the number of changes (join, leave, fail,
// update) applied to this node's view. It only grows. It is local to this
// node; epochs of different nodes are not comparable.
func (m *Membership) Epoch() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.epoch
}

// Snapshot returns Members and Epoch read atomically together.
func (m *Membership) Snapshot() ([]Member, uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ms := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		ms = append(ms, mem.Clone())
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return ms, m.epoch
}

// Member returns the live member called name, if any.
func (m *Membership) Member(name string) (Member, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mem, ok := m.members[name]
	return mem.Clone(), ok
}

// LastChange is when the view last changed (zero before Start).
func (m *Membership) LastChange() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastChange
}

// Settled reports whether the view has been unchanged for at least d (false
// before the first change). The planner acts only on settled membership.
func (m *Membership) Settled(d time.Duration) bool {
	lc := m.LastChange()
	return !lc.IsZero() && time.Since(lc) >= d
}

// SettledExceptLeaves is Settled with graceful leaves not counted as
// changes (nor the metadata updates that announce them, RoleLeaving): the
// view has had no join, failure or other metadata update for at least d. Settling exists so that a flapping node (suspected, then back)
// does not make the planner move cohorts back and forth; a node that
// announced its departure cannot come back as the same run (a restart is a
// join), so its leave can be acted on at once. False before the first
// change.
func (m *Membership) SettledExceptLeaves(d time.Duration) bool {
	m.mu.RLock()
	lu := m.lastUnrest
	m.mu.RUnlock()
	return !lu.IsZero() && time.Since(lu) >= d
}

// WaitSettled blocks until the view has been unchanged for d and returns the
// epoch it settled at, or ctx's error.
func (m *Membership) WaitSettled(ctx context.Context, d time.Duration) (uint64, error) {
	for {
		m.mu.RLock()
		lc, epoch := m.lastChange, m.epoch
		m.mu.RUnlock()
		wait := d
		if !lc.IsZero() {
			wait = d - time.Since(lc)
		}
		if !lc.IsZero() && wait <= 0 {
			return epoch, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// apply records one change in the view and emits its event. Called from
// memberlist's event delegate (with memberlist's node lock held, so calls
// are already serialised); it must not block.
func (m *Membership) apply(kind EventKind, n *memberlist.Node) {
	mem := Member{Name: n.Name, Addr: n.Address()}
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		m.log.Warn("cluster: undecodable member metadata", "member", n.Name, "err", err)
	} else {
		mem.Meta = meta
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	now := time.Now()
	if kind == EventFail && m.takeIntentLocked(mem, now) {
		kind = EventLeave
	}
	if kind == EventJoin {
		delete(m.intents, mem.Name) // an intent from an earlier run is void
	}
	switch kind {
	case EventJoin, EventUpdate:
		m.members[mem.Name] = mem
	case EventLeave, EventFail:
		if old, ok := m.members[mem.Name]; ok && err != nil {
			mem.Meta = old.Meta
		}
		delete(m.members, mem.Name)
	}
	m.epoch++
	m.kinds[kind].Add(1)
	m.lastChange = now
	// A leave, or an update announcing one (RoleLeaving), is final for
	// that run of the node: the planner may act on it at once.
	if kind != EventLeave && !(kind == EventUpdate && mem.HasRole(RoleLeaving)) {
		m.lastUnrest = now
	}
	m.log.Info("cluster: member "+kind.String(), "member", mem.Name, "addr", mem.Addr,
		"remote", mem.RemoteAddr, "roles", mem.Roles, "epoch", m.epoch, "members", len(m.members))

	ev := Event{Kind: kind, Member: mem.Clone(), Epoch: m.epoch}
	for {
		select {
		case m.events <- ev:
			return
		default:
		}
		select {
		case <-m.events: // drop the oldest to make room for the newest
			m.dropped.Add(1)
		default:
		}
	}
}

// delegate implements memberlist's Delegate, EventDelegate, AliveDelegate
// and ConflictDelegate for a Membership.
type delegate struct{ m *Membership }

// NodeMeta returns the pre-encoded local metadata (never mutated in place).
func (d delegate) NodeMeta(limit int) []byte {
	d.m.mu.RLock()
	defer d.m.mu.RUnlock()
	if len(d.m.metaBytes) > limit { // unreachable: EncodeMeta enforces MaxMetaSize
		d.m.log.Error("cluster: metadata over memberlist's limit; advertising none", "len", len(d.m.metaBytes), "limit", limit)
		return nil
	}
	return d.m.metaBytes
}

func (d delegate) NotifyMsg(b []byte)                       { d.m.handleUserMsg(b) }
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d delegate) NotifyJoin(n *memberlist.Node)   { d.m.apply(EventJoin, n) }
func (d delegate) NotifyUpdate(n *memberlist.Node) { d.m.apply(EventUpdate, n) }
func (d delegate) NotifyLeave(n *memberlist.Node) {
	if n.State == memberlist.StateLeft { // not filled in by memberlist v0.7.0; see leave.go
		d.m.apply(EventLeave, n)
	} else {
		d.m.apply(EventFail, n) // apply turns it into EventLeave if the node announced it
	}
}

// NotifyAlive keeps nodes whose metadata we cannot decode (another
// cluster's gossip, an incompatible version) out of the view altogether.
func (d delegate) NotifyAlive(n *memberlist.Node) error {
	if _, err := DecodeMeta(n.Meta); err != nil {
		return fmt.Errorf("metadata of %s: %w", n.Name, err)
	}
	return nil
}

// NotifyConflict logs a name claimed from two addresses (a restarted node
// before its old incarnation was declared failed and DeadNodeReclaimTime
// elapsed, or two processes configured with one name).
func (d delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.m.log.Warn("cluster: node name claimed by two addresses; keeping the known one until it fails",
		"member", existing.Name, "known", existing.Address(), "other", other.Address())
}

// flattenErr turns memberlist's multi-line multierror into errors.Join of
// its parts, keeping the chain.
func flattenErr(err error) error {
	if me, ok := err.(interface{ WrappedErrors() []error }); ok {
		if parts := me.WrappedErrors(); len(parts) > 0 {
			return errors.Join(parts...)
		}
	}
	return err
}
