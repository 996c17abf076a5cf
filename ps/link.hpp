// Link emulation in user space: loopback runs at ~30 Gbit/s, so a realistic network must be
// imposed. A node gets one token bucket per direction, shared by all its connections, so N
// workers pushing to one server really share the server's ingress; a fixed one-way latency is
// added on arrival. ShapedTransport wraps any Transport with them.
//
// Sending works like a socket on a real NIC: send() queues the message and returns at once while
// the node's send buffer (kSendBufferBytes, about what ZeroMQ's queues and the kernel's socket
// buffer hold) has room, and blocks only when it is full. A pacing thread takes queued messages
// round-robin across peers (as the kernel's fair queueing interleaves flows) and hands each to
// the transport when its bytes would have left the link. So a worker's compute thread is not
// held up by its own pushes, and a server's reply to one worker does not stall another's ack
// behind a long queue. Arrivals are delivered by a delivery thread at the time their last byte
// would have arrived plus the latency, in order. A send from that thread (the callback's) never
// waits: it is queued past the buffer's bound and the pacing thread hands it on, also when only
// a latency is set, since handing it to the transport directly may wait for room there.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/defaults.hpp"
#include "ps/transport.hpp"

namespace psbed::ps {

struct LinkOptions {
  double bandwidth_bps = 0;  // bits per second per direction; 0 = unshaped
  double latency_s = 0;      // one way, added on arrival
  bool shaped() const { return bandwidth_bps > 0 || latency_s > 0; }
  std::string str() const;
};
// "1gbit", "100mbit" (empty or "0" = unshaped); "200us" (empty = 0).
LinkOptions parse_link(const std::string& bandwidth, const std::string& latency);

// A reservation-based token bucket: each reserve(bytes) returns when those bytes have gone
// through, at `rate`; up to `burst` bytes of idle credit carry over. Thread-safe.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double bytes_per_s, double burst_bytes);
  Clock::time_point reserve(std::uint64_t bytes, Clock::time_point now = Clock::now());
  double bytes_per_s() const { return rate_; }

 private:
  std::mutex mu_;
  double rate_, burst_s_;
  Clock::time_point next_free_{};
};

// The two buckets of one node.
struct LinkBuckets {
  LinkOptions options;
  std::shared_ptr<TokenBucket> egress, ingress;  // null when unshaped
  static std::shared_ptr<LinkBuckets> make(const LinkOptions& o);
};

class ShapedTransport final : public Transport {
 public:
  ShapedTransport(std::unique_ptr<Transport> inner, std::shared_ptr<LinkBuckets> link);
  ~ShapedTransport() override;
  void start(ReceiveFn on_receive) override;
  bool send(Message msg) override;
  void check_send(const Message& msg) const override { inner_->check_send(msg); }
  void stop() override;
  std::string endpoint() const override { return inner_->endpoint(); }
  const BadMessageCounter& bad_messages() const override { return inner_->bad_messages(); }

 private:
  void deliver_loop();
  void pace_loop();

  std::unique_ptr<Transport> inner_;
  std::shared_ptr<LinkBuckets> link_;
  ReceiveFn on_receive_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<TokenBucket::Clock::time_point, Message>> arrivals_;
  bool stopping_ = false;
  std::thread delivery_;
  std::atomic<std::thread::id> delivery_id_{};  // sends from there never wait
  // Egress: per-peer queues served round-robin by the pacing thread.
  std::mutex out_mu_;
  std::condition_variable out_cv_;
  std::deque<std::pair<PeerId, std::deque<Message>>>
      out_;  // peers with queued messages, in turn order
  std::uint64_t queued_bytes_ = 0;
  bool out_stopping_ = false;
  std::thread pacer_;

 public:
  static constexpr std::uint64_t kSendBufferBytes = std::uint64_t(defaults::kSendBufferBytes);
};

}  // namespace psbed::ps
