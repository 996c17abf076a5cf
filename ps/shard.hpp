// A server shard's engine, independent of how the process was started (psbed server, or
// in-process for `psbed bench ps`): the one thread that owns the Store. Messages from the
// transport's owner thread (which must not block) and control events queue here, so the store
// needs no locks and a pull never sees a half-applied update.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/trace.hpp"
#include "ps/bad_message_counter.hpp"
#include "ps/cluster_map.hpp"
#include "ps/store.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

class Shard {
 public:
  Shard(std::uint64_t max_message_bytes, ZmqTransport& transport, TraceRecorder& trace);
  ~Shard();
  // From the transport's receive callback: queue and return at once.
  void enqueue(Message&& m);
  void worker_dead(int worker);
  // Builds the store for `shard`'s parts of the map and starts the apply thread.
  void start(const ClusterMap& map, int shard);
  void stop();
  const BadMessageCounter& bad() const { return bad_; }
  std::uint64_t pushes() const { return pushes_; }
  std::uint64_t pulls() const { return pulls_; }

 private:
  void loop();
  bool check(const Message& m);
  void handle(Message&& m);
  void reply(const Message& pull);
  void retry_pulls();

  std::uint64_t max_message_bytes_;
  ZmqTransport& transport_;
  TraceRecorder& trace_;
  ClusterMap map_;
  int shard_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<PlanPartSizes> parts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  std::vector<int> dead_;
  std::deque<Message> waiting_;
  bool stopping_ = false;
  std::thread thread_;
  BadMessageCounter bad_;
  std::atomic<std::uint64_t> pushes_{0}, pulls_{0};
};

}  // namespace psbed::ps
