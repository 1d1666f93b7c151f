package cluster

import (
	"encoding/binary"
	"time"

	"github.com/hashicorp/memberlist"
)

// Telling a graceful leave from a failure.
//
// memberlist reports both through EventDelegate.NotifyLeave and, at v0.7.0,
// does not fill Node.State there (it updates its private nodeState.State,
// which shadows the embedded Node.State). So a leaving node first announces
// its intent with a small user message to every live member and waits (for
// at most half its leave timeout) until each has acknowledged; only then does
// it broadcast memberlist's leave. A member that recorded the intent (for
// the same name and incarnation) classifies the following removal as
// EventLeave; any other removal is EventFail. Intents are delivered over UDP
// and re-sent every ProbeTimeout until acknowledged; a member that never
// acknowledges in time may report the leave as a failure, which is the safe
// direction (the planner treats both as "gone").
//
// Wire format of our user messages (memberlist delivers them whole):
//
//	intent: kind=1, incarnation 8 B LE, name_len 1 B, leaver name
//	ack:    kind=2, incarnation 8 B LE, name_len 1 B, leaver name,
//	        name_len 1 B, acker name
//
// Unknown kinds and malformed messages are ignored (a later version may add
// kinds).
const (
	msgLeaveIntent byte = 1
	msgLeaveAck    byte = 2

	// maxLeaveIntents bounds the intents a node remembers.
	maxLeaveIntents = 1024
)

type leaveMsg struct {
	kind        byte
	incarnation uint64
	leaver      string
	acker       string // ack only
}

func (l leaveMsg) encode() []byte {
	b := make([]byte, 0, 11+len(l.leaver)+1+len(l.acker))
	b = append(b, l.kind)
	b = binary.LittleEndian.AppendUint64(b, l.incarnation)
	b = append(b, byte(len(l.leaver)))
	b = append(b, l.leaver...)
	if l.kind == msgLeaveAck {
		b = append(b, byte(len(l.acker)))
		b = append(b, l.acker...)
	}
	return b
}

func decodeLeaveMsg(b []byte) (leaveMsg, bool) {
	var l leaveMsg
	if len(b) < 10 || (b[0] != msgLeaveIntent && b[0] != msgLeaveAck) {
		return l, false
	}
	l.kind = b[0]
	l.incarnation = binary.LittleEndian.Uint64(b[1:])
	p := 9
	str := func() (string, bool) {
		if len(b) < p+1 {
			return "", false
		}
		n := int(b[p])
		p++
		if n == 0 || n > MaxNodeNameLen || len(b) < p+n {
			return "", false
		}
		s := string(b[p : p+n])
		p += n
		return s, true
	}
	var ok bool
	if l.leaver, ok = str(); !ok {
		return l, false
	}
	if l.kind == msgLeaveAck {
		if l.acker, ok = str(); !ok {
			return l, false
		}
	}
	return l, p == len(b)
}

type leaveIntent struct {
	incarnation uint64
	at          time.Time
}

// leaveIntentTTL is how long a recorded intent waits for the matching
// removal before it is forgotten.
func (m *Membership) leaveIntentTTL() time.Duration {
	return max(4*m.cfg.LeaveTimeout, 30*time.Second)
}

// recordIntentLocked remembers that name (at incarnation) is leaving. m.mu
// must be held.
func (m *Membership) recordIntentLocked(name string, incarnation uint64, now time.Time) {
	ttl := m.leaveIntentTTL()
	if len(m.intents) >= maxLeaveIntents {
		for k, v := range m.intents {
			if now.Sub(v.at) > ttl {
				delete(m.intents, k)
			}
		}
		if len(m.intents) >= maxLeaveIntents {
			return // flooded: the removal will read as a failure
		}
	}
	m.intents[name] = leaveIntent{incarnation: incarnation, at: now}
}

// takeIntentLocked reports whether a removal of mem is a graceful leave and
// forgets the intent. m.mu must be held.
func (m *Membership) takeIntentLocked(mem Member, now time.Time) bool {
	in, ok := m.intents[mem.Name]
	if !ok {
		return false
	}
	delete(m.intents, mem.Name)
	return in.incarnation == mem.Incarnation && now.Sub(in.at) <= m.leaveIntentTTL()
}

// handleUserMsg is Delegate.NotifyMsg: it must not block, and it runs
// without memberlist's node lock, so it may send.
func (m *Membership) handleUserMsg(b []byte) {
	l, ok := decodeLeaveMsg(b)
	if !ok {
		return
	}
	switch l.kind {
	case msgLeaveIntent:
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		m.recordIntentLocked(l.leaver, l.incarnation, time.Now())
		leaver, known := m.members[l.leaver]
		ml := m.ml
		m.mu.Unlock()
		if !known || ml == nil {
			return
		}
		ack := leaveMsg{kind: msgLeaveAck, incarnation: l.incarnation, leaver: l.leaver, acker: m.cfg.NodeName}
		if err := ml.SendToAddress(memberlist.Address{Addr: leaver.Addr, Name: leaver.Name}, ack.encode()); err != nil {
			m.log.Debug("cluster: leave ack not sent", "to", leaver.Name, "err", err)
		}
	case msgLeaveAck:
		m.mu.Lock()
		if m.leaveAcks != nil && l.leaver == m.cfg.NodeName && l.incarnation == m.meta.Incarnation {
			m.leaveAcks[l.acker] = true
			select {
			case m.ackNotify <- struct{}{}:
			default:
			}
		}
		m.mu.Unlock()
	}
}

// announceLeave sends this node's leave intent to every other live member
// until all have acknowledged (or left the view) or budget runs out. It
// reports whether everyone acknowledged. Called with lifeMu held, m.mu not.
func (m *Membership) announceLeave(budget time.Duration) bool {
	end := time.Now().Add(budget)
	m.mu.Lock()
	inc := m.meta.Incarnation
	m.recordIntentLocked(m.cfg.NodeName, inc, time.Now())
	m.leaveAcks = make(map[string]bool)
	m.ackNotify = make(chan struct{}, 1)
	notify := m.ackNotify
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.leaveAcks, m.ackNotify = nil, nil
		m.mu.Unlock()
	}()

	intent := leaveMsg{kind: msgLeaveIntent, incarnation: inc, leaver: m.cfg.NodeName}.encode()
	var resendAt time.Time
	for resend := true; ; {
		var pending []Member
		m.mu.Lock()
		for name, mem := range m.members {
			if name != m.cfg.NodeName && !m.leaveAcks[name] {
				pending = append(pending, mem)
			}
		}
		m.mu.Unlock()
		if len(pending) == 0 {
			return true
		}
		left := time.Until(end)
		if left <= 0 {
			m.log.Warn("cluster: leave intent not acknowledged by all members", "pending", len(pending))
			return false
		}
		if resend {
			for _, mem := range pending {
				if err := m.ml.SendToAddress(memberlist.Address{Addr: mem.Addr, Name: mem.Name}, intent); err != nil {
					m.log.Debug("cluster: leave intent not sent", "to", mem.Name, "err", err)
				}
			}
			resendAt = time.Now().Add(m.cfg.ProbeTimeout)
		}
		t := time.NewTimer(max(0, min(time.Until(resendAt), left)))
		select {
		case <-notify:
		case <-t.C:
		}
		t.Stop()
		resend = !time.Now().Before(resendAt)
	}
}
