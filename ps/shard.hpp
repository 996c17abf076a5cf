// A server shard's engine, independent of how the process was started (psbed server, or
// in-process for `psbed bench ps`). Apply lanes own the parts: a part always goes to the same
// lane (hash of key and part), so its updates are ordered, and a pull never sees a half-applied
// update; different parts are applied in parallel, since the optimizer's pass over a part is
// memory-bound work that a single thread cannot hide behind the network. Messages from the
// transport's receiving thread (which must not block) and control events queue per lane.
//
// A pull that can be answered when it arrives (its part is ready under the consistency model
// and its lane is not changing it) is answered in arrival order by the reply thread instead:
// the worker's policy chose that order, and lanes woken one after the other on a busy host
// would otherwise send their replies lane by lane (a layer's bias stuck behind megabytes of
// another lane's weights).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/defaults.hpp"
#include "core/trace.hpp"
#include "ps/bad_message_counter.hpp"
#include "ps/checkpoint.hpp"
#include "ps/cluster_map.hpp"
#include "ps/store.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

class Shard {
 public:
  Shard(std::uint64_t max_message_bytes, Transport& transport, TraceRecorder& trace,
        int lanes = defaults::kApplyThreads);
  ~Shard();
  // From the transport's receive callback: queue and return at once.
  void enqueue(Message&& m);
  void worker_dead(int worker);
  // Where checkpoints are written and read (before start; "" = none may be taken).
  void set_checkpoint_dir(std::string dir) { checkpoint_dir_ = std::move(dir); }
  // Builds the store for `shard`'s parts of the map (from the checkpoint of the map's resume
  // step, if any: a bad one throws Error naming the file) and starts the apply thread.
  void start(const ClusterMap& map, int shard);
  // The coordinator asks for a checkpoint of `step` (--checkpoint-every in seconds).
  void checkpoint_at(std::uint64_t step);
  // Checkpoints written, and the step of the last (0: none).
  std::uint64_t checkpoints_written() const;
  std::uint64_t last_checkpoint() const;
  void stop();
  const BadMessageCounter& bad() const { return bad_; }
  std::uint64_t pushes() const { return pushes_; }
  std::uint64_t pulls() const { return pulls_; }
  // The bytes of the parameters this shard holds (after start()).
  std::uint64_t bytes_owned() const { return store_ ? store_->bytes_owned() : 0; }
  // Messages waiting in the apply lanes (held-back pulls included): the shard's backlog.
  std::size_t queue_depth() const;

 private:
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Message> queue;
    std::vector<int> dead;
    std::deque<Message> waiting;  // pulls the consistency model holds back
    std::thread thread;
  };
  int lane_of(std::uint32_t key, std::uint32_t part) const;
  void start_checkpoints();
  void loop(int lane);
  bool check(const Message& m);
  void handle(Lane& lane, Message&& m);
  void reply(const Message& pull);
  void refuse_nonfinite(const Message& m);
  void send_reply(const Message& pull, const Buffer& snap);
  void retry_pulls(Lane& lane);
  bool answer_now(Message& m);
  void reply_loop();

  std::uint64_t max_message_bytes_;
  Transport& transport_;
  TraceRecorder& trace_;
  ClusterMap map_;
  int shard_ = 0;
  std::unique_ptr<Store> store_;
  std::string checkpoint_dir_;
  std::unique_ptr<ShardCheckpointer> checkpoints_;
  std::unique_ptr<PlanPartSizes> parts_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  // Pulls answered on arrival, with the version they read, for the reply thread.
  mutable std::mutex reply_mu_;
  std::condition_variable reply_cv_;
  std::deque<std::pair<Message, Buffer>> replies_;
  std::thread replier_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};  // the store exists: pulls may be answered on arrival
  BadMessageCounter bad_;
  std::atomic<std::uint64_t> pushes_{0}, pulls_{0};
};

}  // namespace psbed::ps
