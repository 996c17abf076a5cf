// The transport: moves messages (header + payload) between this node and its peers. An
// interface, as ps-lite's Van and gloo's transport are, because there are two real ones: the
// plain ZeroMQ transport and the same transport behind link emulation (bandwidth, latency).
//
// Threading contract, for every implementation:
// - One owner thread per endpoint does all socket work; received messages are delivered to the
//   ReceiveFn on that thread, in arrival order. The callback must not block (no waiting on other
//   messages, no long compute): the owner thread can neither receive nor send while it runs.
//   Hand heavy work to another thread.
// - send() may be called from any thread, including from inside the callback (a server replies
//   there). A client's send() may block when the link is full (back-pressure on the worker),
//   except from its own callback, where it never does; so never call send() holding a lock that
//   the callback takes. A server's send() never waits for a peer: a peer that does not read
//   loses its own messages past a bound (ZmqOptions::peer_max_*), and nobody else waits for it.
// - A thread that delivers received messages (any transport's callback) never calls a send()
//   that may wait, on any connection: it would stop reading its own connection while it waits,
//   and the peer it waits on may be waiting on that one. Work a completion triggers goes to a
//   thread that may wait (worker/scheduler.hpp). ps/transport_thread.hpp checks the rule.
// - Messages to one peer leave in the order send() was called for them (per calling thread).
#pragma once
#include <functional>
#include <string>

#include "ps/bad_message_counter.hpp"
#include "ps/payload.hpp"
#include "ps/protocol.hpp"

namespace psbed::ps {

// Who a message came from / goes to. On a server, the peer's routing identity (any bytes; see
// peer_name); on a client, unused (there is one peer: the server it connected to).
using PeerId = std::string;

struct Message {
  Header header;
  Payload payload;  // empty for ops without one; header.length bytes for Push/PullReply
  PeerId peer;
};

// A printable form of a peer id for logs: the id itself if printable, else hex.
std::string peer_name(const PeerId& peer);

using ReceiveFn = std::function<void(Message&&)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // Starts the owner thread. Messages that fail validation (validate.hpp, without the cluster-map
  // checks) are dropped and counted in bad_messages(); the first from each peer is logged.
  virtual void start(ReceiveFn on_receive) = 0;
  // Queues `msg` for msg.peer (server) or the server (client). Returns false if the transport is
  // stopped (the message is dropped). Throws psbed::Error before start(), or if the message
  // contradicts itself (a payload whose size isn't header.length, a payload on an op that has
  // none, a server message naming no peer).
  virtual bool send(Message msg) = 0;
  // Throws what send() would throw for `msg` (before start(), or a message that contradicts
  // itself), and nothing else. A transport that queues messages for another one checks them
  // with it on the caller's thread, where the error belongs, not later on its own.
  virtual void check_send(const Message& msg) const { (void)msg; }
  // Stops and joins the owner thread. Messages not yet handed to the network are dropped; callers
  // that need delivery wait for the protocol's acknowledgments first. Idempotent.
  virtual void stop() = 0;

  // The endpoint actually bound or connected (a bound "tcp://127.0.0.1:*" resolves the port).
  virtual std::string endpoint() const = 0;
  virtual const BadMessageCounter& bad_messages() const = 0;
};

}  // namespace psbed::ps
