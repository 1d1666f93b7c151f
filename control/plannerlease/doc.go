// Package plannerlease holds the lease that lets one planner act at a time:
// a single 64-bit word on the memory node, renewed by compare-and-swap.
//
// Why a word on the memory node: the planner's majority check (package
// actors/planner, lease.go) stops a planner cut off with a minority, but
// under an asymmetric partition two nodes can each see a majority (cn-1
// and cn-2 cannot reach each other, cn-3 reaches both), each host a
// planner, and each grant owner leases and publish maps the other does not
// know of. Every compute node reaches the memory node (it cannot commit a
// transaction otherwise), so a word there is the one place both planners
// see, and its CAS serialises them: the planner whose renewals land holds
// the lease, the other stays silent.
//
// # The word
//
// The word is holder<<32 | counter. Holder is a random non-zero 32-bit id
// drawn for each Lease (one per planner incarnation), and only that Lease
// writes it. Each CAS a Lease issues, a renewal or a takeover, carries a
// counter one above both the value it replaces and the last one it issued,
// so no value ever recurs in the word (modulo 2^32 writes, 13 years at ten
// a second), even after a memory node wiped it: a contender that read v
// long ago and CASes from v cannot succeed against a later v. A Lease
// never special-cases any value, zero included: a memory node that
// restarted without its state shows zero, and a contender that took zero
// at once could act while the holder still believes in its lease.
//
// # Protocol (a pure state machine: Tick and Done, no clock or I/O inside)
//
//   - Contending, a Lease reads the word every RenewMicros. It records the
//     value and when the read's answer arrived (seenAt); a read showing
//     another value restarts the count. Once the value has stayed unchanged
//     for LeaseMicros since seenAt, it CASes seen → me|counter+1. Success
//     makes it the holder.
//   - Holding, it CASes cur → holder|counter+1 every RenewMicros. It is
//     Valid until ValidMicros (LeaseMicros/2) after it SENT its last
//     successful CAS. A failed CAS (the word holds a value it did not
//     write) deposes it: it is contending again, from that value.
//   - A holder that stops for good (a graceful shutdown, a placement
//     change) may Release: a CAS to 0:counter+1, after which it is no
//     longer Valid. A contender CASes from a released value at once. (A
//     wiped word, 0:0, is not a released one.) Safe because the releaser
//     acts no more; a release that does not land costs the next holder a
//     lease.
//   - An operation with an unknown outcome (a timeout, a lost connection)
//     changes nothing: validity runs out by the clock. If the unknown CAS
//     did land, the next renewal finds the value it tried to write and
//     takes it as its own (only this Lease writes its id).
//
// # Why at most one Lease is Valid at a time (assumption: clock rates
// differ by less than a third; a bounded message delay is not needed)
//
// Let H hold with value v, written by a CAS that H sent at time s (H's
// last successful one). H is Valid until s + L/2 on its clock. A contender
// C takes over only by a CAS from v, and only after a read of v whose
// answer arrived at t_o with no change seen until t_o + L on C's clock.
// v was written after s, and read before t_o, so s < t_o. C's CAS lands
// after t_o + L·(1-ρ) in real time and H stops by s + L/2·(1+ρ), earlier
// for every clock-rate error ρ < 1/3. Any later renewal by H fails, since
// the word no longer holds v, so H is never Valid again on that value.
// Two contenders racing for the same v: one CAS lands, the other fails.
//
// What the planner adds (package actors/planner): it grants owner leases
// and publishes maps only while Valid; a planner that just took over
// counts a departed node's owner lease from its acquisition (AcquiredAt),
// so any lease the deposed planner granted has run out before the new
// planner moves that node's cohorts; and a deposed planner forgets its
// state, because another planner may have changed the cluster meanwhile.
//
// Costs: one CAS per RenewMicros per planner (10 a second by default,
// nothing next to a transaction's), and a failover of the planner's node
// takes at least LeaseMicros longer (one second by default). A planner
// that cannot reach the memory node stops acting within ValidMicros.
package plannerlease
