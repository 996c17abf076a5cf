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
//
// With --replicas 2 (shard_replica.cpp) a shard also holds a copy of the previous shard's parts,
// kept up to date by that shard's forwards, and forwards its own applied updates to the next
// shard before it acknowledges the pushes behind them: an acknowledged update survives the loss
// of one shard. When the coordinator declares a shard dead, the next one serves its parts.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "core/defaults.hpp"
#include "core/trace.hpp"
#include "ps/bad_message_counter.hpp"
#include "ps/checkpoint.hpp"
#include "ps/cluster_map.hpp"
#include "ps/store.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

// The peer id a backup's answers are handed to the lanes under. ZeroMQ gives no connection an
// identity that starts with a zero byte, so no worker can send under it.
inline const PeerId kBackupPeer = std::string("\0backup", 7);

// --replicas 2: a connection to the backup shard, and what frees a lane waiting for room on it
// when the backup is gone.
struct BackupLink {
  std::shared_ptr<Transport> transport;
  std::function<void()> release;
};

class Shard {
 public:
  Shard(std::uint64_t max_message_bytes, Transport& transport, TraceRecorder& trace,
        int lanes = defaults::kApplyThreads);
  ~Shard();
  // From the transport's receive callback: queue and return at once.
  void enqueue(Message&& m);
  void worker_dead(int worker);
  // The coordinator declared shard `server` dead: the parts this shard backs up for it are served
  // from now on (it was the previous shard), or the forwards stop (it was the backup).
  void server_dead(int server);
  // --replicas 2: how to open a connection to the backup shard (before start); opened at once,
  // and again when a dead backup rejoins.
  // `open` takes the backup's address ("": the map's).
  void connect_backup(std::function<BackupLink(const std::string&)> open);
  // The dead backup `server` is back (a new process at its address): every part this shard
  // serves is sent to it whole, then forwarded as before (shard_rejoin.cpp). 2 shards only.
  void backup_back(int server, const std::string& address);
  // A shard that rejoined (the map's rejoin_from): whether it holds every part's state now.
  bool rejoined() const { return rejoined_; }
  bool synced() const { return rejoined_ && installed_ == to_install_; }
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
  // --replicas 2: updates forwarded to the backup; updates applied from the previous shard's
  // forwards; pushes resent after a fail-over that were already applied (acknowledged only).
  std::uint64_t forwarded() const { return forwarded_; }
  std::uint64_t replicated() const { return replicated_; }
  std::uint64_t replayed() const { return replayed_; }
  // Whether this shard serves the parts of a dead one.
  bool promoted() const { return promoted_; }
  // The bytes of the parameters this shard holds (after start()).
  std::uint64_t bytes_owned() const { return store_ ? store_->bytes_owned() : 0; }
  // Messages waiting in the apply lanes (held-back pulls included): the shard's backlog.
  std::size_t queue_depth() const;

 private:
  // Replicate's flags (protocol.hpp).
  static constexpr std::uint8_t kOnePush = 0, kClockApplied = 1, kPartState = 2;
  // Pull's flag (protocol.hpp): the part's momentum, not its parameters.
  static constexpr std::uint8_t kPullMomentum = 1;
  // Push's flag (protocol.hpp): answer with the updated bytes, not an ack.
  static constexpr std::uint8_t kPushPull = 1;
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Message> queue;
    std::vector<int> dead;
    std::deque<Message> waiting;  // pulls the consistency model holds back
    std::thread thread;
    // --replicas 2, the lane's parts: push acks held until the backup has the push, by
    // (worker, sequence); and, for the parts backed up here, the last push sequence taken per
    // (key, part, worker), which tells a push resent after a fail-over from a new one.
    std::map<std::pair<int, std::uint64_t>, Message> held_acks;
    std::map<std::tuple<int, int, int>, std::uint64_t> last_seq;
    bool backup_lost = false;  // set to wake the lane: its held acks go
    bool drain_copy = false;   // set on a take-over: the copy's whole bsp clocks are applied
    bool resync = false;       // set to wake the lane: a backup is back, send it the parts
    bool forward = false;      // the lane's thread alone: it forwards to the backup now
    std::set<std::pair<int, int>> installed;  // a rejoined shard: parts whose state arrived
  };
  int lane_of(std::uint32_t key, std::uint32_t part) const;
  void start_checkpoints();
  void loop(int lane);
  bool check(const Message& m);
  void handle(Lane& lane, Message&& m);
  void reply(const Message& pull);
  // A push-pull's pull: answered now, or held until the consistency model allows it.
  void pull_after_push(Lane& lane, Store& store, const Message& push);
  void refuse_nonfinite(const Message& m);
  void assign(Lane& lane, Store& store, const Message& m);
  void send_reply(const Message& pull, const Buffer& snap);
  void retry_pulls(Lane& lane);
  bool answer_now(Message& m);
  void reply_loop();
  // The store serving (key, part) to workers: this shard's own, or after a fail-over the copy
  // of the dead shard's; null when neither.
  Store* serving(std::uint32_t key, std::uint32_t part) const;
  // A message's payload as floats, from `aligned` when it sits at an odd address.
  static const float* floats_of(const Message& m, std::vector<float>& aligned);
  // A PushAck to `m`'s sender, echoing its header without bytes.
  static Message ack_of(const Message& m);
  // shard_replica.cpp
  bool replicating() const;
  void start_replica();
  void push_done(Lane& lane, Store& store, const Message& push, Message&& ack);
  bool replayed_push(Lane& lane, Store& store, const Message& push);
  void replicate(Lane& lane, Message&& m);
  void backup_acked(Lane& lane, const Message& m);
  void send_forwards();
  void release_held_acks(Lane& lane);
  void open_backup(const std::string& address);
  // shard_rejoin.cpp
  void backup_events(Lane& lane, int index, bool resync);
  void send_parts(Lane& lane, int index);
  void install(Lane& lane, const Message& m);
  // The store holding a copy of (key, part) that this shard does not serve; null when none.
  Store* copy_of(std::uint32_t key, std::uint32_t part) const;

  std::uint64_t max_message_bytes_;
  Transport& transport_;
  TraceRecorder& trace_;
  ClusterMap map_;
  int shard_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Store> replica_;  // --replicas 2: the previous shard's parts
  // --replicas 2: to the next shard; replaced (atomically: the lanes read it) when it rejoins.
  std::shared_ptr<Transport> backup_;
  std::function<BackupLink(const std::string&)> open_backup_;
  std::function<void()> release_backup_;
  std::atomic<bool> promoted_{false}, backup_lost_{false};
  // server_dead runs on the control thread and on a lane (a worker's request can tell first),
  // backup_back on the control thread: one at a time. Taken before any lane's mutex.
  std::mutex failover_mu_;
  // A shard that rejoined serves nothing until its primary dies: its own parts are a copy too.
  bool rejoined_ = false;
  std::atomic<bool> own_serving_{true};
  // The backup came back: the parts taken over are forwarded too.
  std::atomic<bool> copy_back_{false};
  std::atomic<std::size_t> installed_{0};
  std::size_t to_install_ = 0;
  std::atomic<std::uint64_t> forwarded_{0}, replicated_{0}, replayed_{0};
  std::string checkpoint_dir_;
  std::unique_ptr<ShardCheckpointer> checkpoints_;
  std::unique_ptr<PlanPartSizes> parts_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  static thread_local Lane* t_lane_;  // the lane whose thread this is (replicating())
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
