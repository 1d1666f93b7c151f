package store

import "github.com/aura-runtime/aura/rdma"

// The commit ledger: one 8-byte word per (client lane, ring position) in
// its own memory-node region. A committing transaction that writes stores
// its transaction id in its word, in the commit's write-back (before any
// lock is released), and every commit first reads that word in its
// validation doorbell: finding its own id there means another attempt of
// the same transaction committed already (a client retried after losing the
// reply, possibly on another node), and the attempt ends as a replay
// instead of committing twice. See package occ ("Exactly once") for why
// the read cannot miss a committed attempt.
//
// Addressing: transaction ids are (client number << 40) | sequence, the
// form every AURA client uses; the lane is the client number modulo
// LedgerLanes and the ring position the sequence modulo LedgerRing. A word
// is overwritten by the same lane's transaction LedgerRing later, so a
// retry must come before its client committed LedgerRing more transactions
// (a closed-loop client retries before it moves on), and two clients whose
// numbers are equal modulo LedgerLanes share words (ids of any other form
// are spread by a hash, with the same caveat).
const (
	// LedgerRegionName is the region's name on the memory node.
	LedgerRegionName = "txn/ledger"
	// LedgerLanes is the number of client lanes.
	LedgerLanes = 4096
	// LedgerRing is the number of words per lane.
	LedgerRing = 64
	// LedgerBytes is the region's size: 2 MiB.
	LedgerBytes = LedgerLanes * LedgerRing * 8
)

// LedgerAddr returns the address, in region, of txnID's ledger word.
func LedgerAddr(region rdma.Region, txnID uint64) uint64 {
	client, seq := txnID>>40, txnID&(1<<40-1)
	if client == 0 {
		// Not the (client, sequence) form: spread by a hash.
		h := mix(txnID)
		client, seq = h>>40, h
	}
	word := (client%LedgerLanes)*LedgerRing + seq%LedgerRing
	return region.Addr + word*8
}
