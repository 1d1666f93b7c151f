// Package tcp is the TCP backend of the rdma verbs API: a memory-node Server
// (what `aura mn` runs) that serves an *rdma.Memory, and a client Device that
// implements rdma.Device against it, speaking the rdma/wire protocol.
//
// # Server
//
// Each connection has exactly two goroutines: a reader that decodes request
// frames and runs them on the Memory with (*rdma.Memory).Execute, which
// validates rkey, bounds and alignment; and a writer that drains a bounded
// queue of encoded responses to the socket, coalescing them into as few
// writes as the queue allows. Requests therefore pipeline: the reader goes on
// decoding and executing while earlier responses are being written. (When the
// queue is empty and nothing is being written, the reader writes a response
// itself and saves the hand-off; responses may then leave out of request
// order, which clients handle: they match responses by request id.) The queue
// is bounded in frames (ServerConfig.MaxInFlight) and bytes
// (ServerConfig.MaxQueuedBytes); when it is full the reader stops reading and
// TCP flow control pushes back on the client. A well-formed but bad request
// gets a typed error (an Error reply, or an error status in a work request's
// result); a malformed frame gets an Error reply with CodeMalformed and its
// connection is closed, logged with log/slog. Nothing a client sends can crash
// the server or make it touch memory outside a registered region. A doorbell
// batch runs in order and, as rdma promises, its first failed work request
// ends it: the rest complete with StatusFlushed without being applied.
//
// With ServerConfig.Cost set, the server applies an rdma.CostModel through one
// server-wide rdma.NIC: a batch is scheduled and executed under one lock (so
// atomics take effect in the order they hold their NIC slots) and its response
// is held back until the batch's modelled completion time. Responses of one
// connection may then leave out of request order; the client restores
// posting order per queue pair.
//
// # Client
//
// Dial returns a *Device holding ONE connection to the memory node, shared by
// all of the device's queue pairs. Why one per device and not one per QP:
//   - requests carry ids and responses are matched by id, so QPs sharing a
//     connection never wait for each other (pipelining is per request, not
//     per connection);
//   - the writer coalesces frames that several QPs post at the same moment
//     into one writev, so more QPs mean fewer system calls per verb, not more;
//   - the server spends two goroutines and two buffers per connection, not per
//     QP, and its MaxConns counts compute-node devices, a quantity an operator
//     can reason about;
//   - like a verbs device context, it fails and recovers as a unit.
//
// A compute node that wants more parallelism than one TCP stream gives (on
// many cores) opens several Devices.
//
// Post encodes the whole doorbell batch as one Batch frame: one round trip per
// batch. The device remembers the batch's work requests until its response
// arrives, copies READ data into each work request's Local buffer, counts
// every completion (rdma.Counters, per QP and per device) and delivers the
// completions to the QP's completion queue in posting order, even when the
// server answers batches out of order.
//
// # Failure
//
//   - Connection loss (EOF, reset, a frame the client cannot decode, or no
//     response for ClientConfig.RequestTimeout): every work request already
//     handed to the socket completes with rdma.StatusTransportError
//     (errors.Is(err, rdma.ErrConnectionLost); its effect is unknown), and every
//     work request still waiting in the device's send queue — never written —
//     completes with rdma.StatusFlushed (not applied). Control calls in
//     flight return an error wrapping rdma.ErrConnectionLost.
//   - The next Post or control call redials with bounded exponential backoff
//     (ClientConfig.RedialAttempts, RedialBaseDelay, RedialMaxDelay). If that
//     fails, Post returns an error wrapping rdma.ErrConnectionLost and posts
//     nothing. RegisterRegion and Regions are idempotent and are retried once
//     on a fresh connection after a loss.
//   - QueuePair.Close stops posting, completes the QP's work requests that
//     were never sent with StatusFlushed, and waits up to
//     ClientConfig.CloseTimeout for the responses to those already sent (if
//     they do not come, the connection is declared lost and they complete with
//     StatusTransportError). When it returns, every work request ever posted
//     on the QP has its completion in the completion queue, ready to poll.
//     Device.Close does the same for all its QPs at once, closes the
//     connection and waits for its goroutines.
//   - Nothing waits without a bound: dials and control calls honour their
//     context and DialTimeout, socket reads and writes with outstanding
//     requests honour RequestTimeout, and Close honours CloseTimeout. Post
//     writes to the socket only without blocking (what the socket does not
//     take goes to the writer goroutine); it waits only for a redial (bounded
//     by the redial settings) or, when MaxInFlight requests are outstanding,
//     for one of them to finish (bounded by RequestTimeout).
//
// # Durability
//
// With ServerConfig.Journal (rdma/durable, `aura mn --data-dir`) the server
// logs every mutation in the order it took effect and holds each response
// until the journal is durable up to every mutation the request made or
// could have read (Journal; docs/durability.md). Responses of one
// connection wait in its writer goroutine, so its reader keeps executing
// pipelined requests and concurrent requests share fsyncs. A journal error
// stops the server (Serve returns it): nothing is acknowledged that a
// restart would not find. Without a journal the verb path is unchanged.
package tcp
