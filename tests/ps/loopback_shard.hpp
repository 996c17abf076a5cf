// For the tests that train through PsClient: a shard serving on loopback over real ZeroMQ, bound
// to a free port (endpoint(), for the clients' map), started as server 0 of `map`, stopped in
// order; and a countdown of the answers.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "core/trace.hpp"
#include "ps/cluster_map.hpp"
#include "ps/shard.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

class LoopbackShard {
 public:
  LoopbackShard(const ClusterMap& map, std::uint64_t max_message_bytes, int io_threads = 1)
      : transport_(options(io_threads)), shard_(max_message_bytes, transport_, trace_) {
    transport_.start([this](Message&& m) { shard_.enqueue(std::move(m)); });
    shard_.start(map, 0);
  }
  ~LoopbackShard() { stop(); }
  LoopbackShard(const LoopbackShard&) = delete;
  LoopbackShard& operator=(const LoopbackShard&) = delete;
  Shard& shard() { return shard_; }
  std::string endpoint() const { return transport_.endpoint(); }
  void stop() {
    shard_.stop();
    transport_.stop();
  }

 private:
  static ZmqOptions options(int io_threads) {
    ZmqOptions z;
    z.role = ZmqOptions::Role::kServer;
    z.endpoint = "tcp://127.0.0.1:*";
    z.io_threads = io_threads;
    return z;
  }
  ZmqTransport transport_;
  TraceRecorder trace_{"server-0", false};
  Shard shard_;
};

// Counts answers down, from any thread; waits for them, bounded.
class Countdown {
 public:
  explicit Countdown(int n) : left_(n) {}
  void done() {
    std::lock_guard<std::mutex> l(mu_);
    --left_;
    cv_.notify_all();
  }
  // True once `left` or fewer remain; false after `seconds`.
  bool wait(double seconds = 10, int left = 0) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::duration<double>(seconds), [&] { return left_ <= left; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

}  // namespace psbed::ps
