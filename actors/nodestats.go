package actors

import (
	"sync/atomic"

	"github.com/aura-runtime/aura/messages"
	"github.com/aura-runtime/aura/occ"
)

// TxnKinds names the transaction types TxnStats counts, by index: the
// TxnSubmit body kinds, "other" for a submission without a body. The set is
// fixed, so metrics labelled by it stay bounded.
var TxnKinds = [...]string{"other", "new_order", "payment", "order_status", "delivery", "stock_level", "kv",
	"bank_transfer", "bank_audit"}

// NumTxnOutcomes bounds the messages.TxnOutcome values TxnStats counts
// (UNSPECIFIED through ERROR); an unknown value counts as ERROR.
const NumTxnOutcomes = int(messages.TxnOutcome_TXN_OUTCOME_ERROR) + 1

// TxnStats are a node's transaction counters since it started.
type TxnStats struct {
	// ByKind counts finished submissions by TxnKinds index and outcome
	// (a submission that failed without a result counts as ERROR).
	// Answers replayed from the result cache are not in it.
	ByKind [len(TxnKinds)][NumTxnOutcomes]uint64
	// Replayed counts submissions answered from the result cache.
	Replayed uint64
	// Counters sums the work of every attempt the node's coordinators
	// ran, whatever its outcome: locks by path, redirects, MN atomics and
	// the coordinators' own verbs.
	Counters occ.Counters
}

// nodeStats are the atomic counters behind TxnStats. Submitting goroutines
// and coordinators add to them; a scrape reads them. Adds are uncontended
// atomics, one per non-zero field, and nothing here takes a lock.
type nodeStats struct {
	byKind   [len(TxnKinds)][NumTxnOutcomes]atomic.Uint64
	replayed atomic.Uint64
	// One per occ.Counters field.
	reads, writes, inserts, deletes                  atomic.Uint64
	locksLocal, locksOwnerRPC, locksMNCAS, redirects atomic.Uint64
	mnCAS, mnCASFailed, mnFAA, rdmaReads, rdmaWrites atomic.Uint64
	// epochSeen is the highest OwnerMap epoch a submission said its
	// client routed by.
	epochSeen atomic.Uint64
}

func txnKind(m *messages.TxnSubmit) int {
	switch m.GetBody().(type) {
	case *messages.TxnSubmit_NewOrder:
		return 1
	case *messages.TxnSubmit_Payment:
		return 2
	case *messages.TxnSubmit_OrderStatus:
		return 3
	case *messages.TxnSubmit_Delivery:
		return 4
	case *messages.TxnSubmit_StockLevel:
		return 5
	case *messages.TxnSubmit_Kv:
		return 6
	case *messages.TxnSubmit_BankTransfer:
		return 7
	case *messages.TxnSubmit_BankAudit:
		return 8
	}
	return 0
}

func (s *nodeStats) count(m *messages.TxnSubmit, o messages.TxnOutcome) {
	i := int(o)
	if i < 0 || i >= NumTxnOutcomes {
		i = int(messages.TxnOutcome_TXN_OUTCOME_ERROR)
	}
	s.byKind[txnKind(m)][i].Add(1)
}

func (s *nodeStats) noteEpochSeen(e uint64) {
	for {
		cur := s.epochSeen.Load()
		if e <= cur || s.epochSeen.CompareAndSwap(cur, e) {
			return
		}
	}
}

func addNZ(a *atomic.Uint64, v uint64) {
	if v != 0 {
		a.Add(v)
	}
}

func (s *nodeStats) add(c *occ.Counters) {
	addNZ(&s.reads, c.Reads)
	addNZ(&s.writes, c.Writes)
	addNZ(&s.inserts, c.Inserts)
	addNZ(&s.deletes, c.Deletes)
	addNZ(&s.locksLocal, c.LocksLocal)
	addNZ(&s.locksOwnerRPC, c.LocksOwnerRPC)
	addNZ(&s.locksMNCAS, c.LocksMNCAS)
	addNZ(&s.redirects, c.Redirects)
	addNZ(&s.mnCAS, c.MNCAS)
	addNZ(&s.mnCASFailed, c.MNCASFailed)
	addNZ(&s.mnFAA, c.MNFAA)
	addNZ(&s.rdmaReads, c.RDMAReads)
	addNZ(&s.rdmaWrites, c.RDMAWrites)
}

// TxnStats returns the node's transaction counters. Each counter is read
// atomically, the set of them is not: a scrape may see a transaction's
// outcome before its locks, never a counter go back.
func (n *Node) TxnStats() TxnStats {
	s := &n.stats
	var out TxnStats
	for k := range s.byKind {
		for o := range s.byKind[k] {
			out.ByKind[k][o] = s.byKind[k][o].Load()
		}
	}
	out.Replayed = s.replayed.Load()
	out.Counters = occ.Counters{
		Reads: s.reads.Load(), Writes: s.writes.Load(), Inserts: s.inserts.Load(), Deletes: s.deletes.Load(),
		LocksLocal: s.locksLocal.Load(), LocksOwnerRPC: s.locksOwnerRPC.Load(), LocksMNCAS: s.locksMNCAS.Load(),
		Redirects: s.redirects.Load(), MNCAS: s.mnCAS.Load(), MNCASFailed: s.mnCASFailed.Load(), MNFAA: s.mnFAA.Load(),
		RDMAReads: s.rdmaReads.Load(), RDMAWrites: s.rdmaWrites.Load(),
	}
	return out
}

// EpochSeen returns the highest OwnerMap epoch a transaction submitted to
// the node said its client routed by (0: none yet). Above 0 while the node
// has no map installed, it shows that the cluster has published one this
// node has not received yet.
func (n *Node) EpochSeen() uint64 { return n.stats.epochSeen.Load() }
