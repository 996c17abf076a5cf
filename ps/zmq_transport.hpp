// The ZeroMQ transport: a server binds a ROUTER, a client connects a DEALER with an identity.
//
// Why it looks the way it does:
// - Zero copies. Outgoing payloads become frames that reference the tensor's buffer (freed by
//   ZeroMQ's free function when written); received payload frames are handed up as they are.
// - Small high-water marks. The transmission scheduler above decides which part goes next; a
//   socket queue of hundreds of messages would undo that order, so ZeroMQ holds only a few per
//   peer and send() blocks (backpressure) when they are full.
// - One owner thread per socket, because ZeroMQ sockets aren't thread-safe. Other threads pass
//   messages to it through a mailbox: a queue, and an eventfd it polls beside the socket, written
//   only while it sleeps there.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "ps/curve.hpp"
#include "ps/transport.hpp"
#include "ps/validate.hpp"

namespace zmq {
class message_t;
}

namespace psbed::ps {

struct ZmqOptions {
  enum class Role { kServer, kClient };
  Role role = Role::kClient;
  // Server: where to bind ("tcp://127.0.0.1:*" picks a free port; see endpoint()).
  // Client: the server's endpoint to connect to.
  std::string endpoint;
  // Client: the routing identity the server sees as Message::peer ("worker-3"). Empty: ZeroMQ
  // makes one up. Unique per server; ignored for servers.
  std::string identity;
  // Messages ZeroMQ queues per peer before send() blocks (ZMQ_SNDHWM / ZMQ_RCVHWM). Kept small
  // so the scheduler's order holds; loopback TCP buffers add a few MiB on top anyway.
  int send_hwm = 4;
  int receive_hwm = 8;
  // Client: messages the owner thread holds for the server while its socket queue is full before
  // it stops taking new ones from other threads (their send() then blocks: back-pressure).
  std::size_t max_pending = 16;
  // Server: what the owner thread holds for one peer whose socket queue is full (a peer that does
  // not read). Past either bound that peer's messages are dropped (dropped_unread(), logged once
  // per backlog); no other peer and no sending thread ever waits for it.
  std::size_t peer_max_messages = 4096;
  std::size_t peer_max_bytes = 64ull << 20;
  // Received messages are checked against these (and bigger frames make ZeroMQ drop the peer).
  Limits limits;
  // How long stop() lets messages already inside ZeroMQ drain to the network.
  std::chrono::milliseconds linger{200};
  // The owner thread's name in ps/top/gdb (15 characters at most). Empty: "ps-server"/"ps-client".
  std::string thread_name;
  // CURVE (ps/curve.hpp): a server lets in only listed client keys, a client needs the server's
  // public key. Off (keys empty): a plain socket.
  CurveKeys curve;
  // ZeroMQ I/O threads of this transport's context. A server taking several connections from
  // each worker (--connections, PsClient) spreads them over these; one serves one connection.
  int io_threads = 1;
};

class ZmqTransport final : public Transport {
 public:
  // Binds or connects right away, so a bad endpoint fails here: throws psbed::Error naming it.
  explicit ZmqTransport(ZmqOptions options);
  ~ZmqTransport() override;  // stop()s
  ZmqTransport(const ZmqTransport&) = delete;
  ZmqTransport& operator=(const ZmqTransport&) = delete;

  void start(ReceiveFn on_receive) override;
  bool send(Message msg) override;
  void check_send(const Message& msg) const override;
  // send() that waits at most `wait` for room: false, and the message dropped, when the queue
  // towards the peer stays full (or the transport is stopped). For messages that must not hold
  // their caller up while the peer is gone: heartbeats, retried registrations, a last word.
  bool try_send(Message msg, std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  void stop() override;
  // The first half of stop(), without joining anything: every send() waiting for room and every
  // later one return false at once (the message dropped), and the owner thread ends. For a
  // caller releasing the senders of several transports (a thread blocked on one may hold up
  // another's owner thread) before it stops them. stop() must still follow. Any thread but the
  // owner's may call it.
  void release_senders();
  std::string endpoint() const override;
  const BadMessageCounter& bad_messages() const override;
  // Server: messages dropped because their peer did not read (ZmqOptions::peer_max_*).
  std::uint64_t dropped_unread() const;
  // Server: new per-peer bounds, for a shard that learns its parameters' size after it bound.
  void set_peer_bounds(std::size_t messages, std::size_t bytes);
  // Server with CURVE: the connections it refused, for the node's closing lines ("" if none).
  std::string refused_connections() const;

  // The ZeroMQ frame that owns a payload this transport delivered: its data() is the payload's
  // data(), which shows the receive path made no copy. Precondition: `received` came from a
  // ZmqTransport's ReceiveFn and is not empty.
  static const zmq::message_t& frame_of(const Payload& received);

 private:
  struct Impl;
  bool hand_over(Message msg, std::chrono::milliseconds wait);  // wait < 0: as long as it takes
  std::unique_ptr<Impl> impl_;
};

}  // namespace psbed::ps
