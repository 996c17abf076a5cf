#include "ps/shard.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/optimizer.hpp"
#include "ps/copy_counter.hpp"

namespace psbed::ps {

thread_local Shard::Lane* Shard::t_lane_ = nullptr;

Shard::Shard(std::uint64_t max_message_bytes, Transport& transport, TraceRecorder& trace, int lanes)
    : max_message_bytes_(max_message_bytes), transport_(transport), trace_(trace) {
  for (int i = 0; i < std::max(1, lanes); ++i) lanes_.push_back(std::make_unique<Lane>());
}

Shard::~Shard() { stop(); }

int Shard::lane_of(std::uint32_t key, std::uint32_t part) const {
  return int((std::uint64_t(key) * 1000003u + part) % lanes_.size());
}

void Shard::enqueue(Message&& m) {
  // A momentum pull reads the part under its lock: its lane answers it.
  if (m.header.op == Op::kPull && m.header.flags == 0 && answer_now(m)) return;
  Lane& l = *lanes_[lane_of(m.header.key, m.header.part)];
  std::lock_guard<std::mutex> lock(l.mu);
  l.queue.push_back(std::move(m));
  l.cv.notify_one();
}

void Shard::worker_dead(int w) {
  for (auto& l : lanes_) {
    std::lock_guard<std::mutex> lock(l->mu);
    l->dead.push_back(w);
    l->cv.notify_one();
  }
}

// On the receiving thread: a well-formed pull whose part is ready and not being changed is
// handed to the reply thread with the version it reads. False: the part's lane takes it.
bool Shard::answer_now(Message& m) {
  if (!started_.load(std::memory_order_acquire)) return false;
  if (!check(m)) return true;  // dropped and counted, as a lane would
  Buffer snap = serving(m.header.key, m.header.part)
                    ->try_snapshot(int(m.header.key), int(m.header.part), m.header.clock);
  if (!snap) return false;
  ++pulls_;
  {
    std::lock_guard<std::mutex> lock(reply_mu_);
    replies_.emplace_back(std::move(m), std::move(snap));
  }
  reply_cv_.notify_one();
  return true;
}

void Shard::reply_loop() {
  pthread_setname_np(pthread_self(), "ps-reply");
  for (;;) {
    std::deque<std::pair<Message, Buffer>> batch;
    {
      std::unique_lock<std::mutex> lock(reply_mu_);
      reply_cv_.wait(lock, [&] { return stopping_ || !replies_.empty(); });
      if (stopping_) return;
      batch.swap(replies_);
    }
    for (const auto& [pull, snap] : batch) send_reply(pull, snap);
  }
}

std::size_t Shard::queue_depth() const {
  std::size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(reply_mu_);
    n += replies_.size();
  }
  for (const auto& l : lanes_) {
    std::lock_guard<std::mutex> lock(l->mu);
    n += l->queue.size() + l->waiting.size();
  }
  return n;
}

void Shard::start(const ClusterMap& map, int shard) {
  map_ = map;
  shard_ = shard;
  store_ = std::make_unique<Store>(map_, shard_);
  parts_ = std::make_unique<PlanPartSizes>(map_.plan);
  rejoined_ = map_.rejoin_from >= 0;
  if (rejoined_ && (map_.exp.replicas < 2 || map_.servers.size() != 2))
    throw Error("the map rejoins this shard to a run of " + std::to_string(map_.servers.size()) +
                " shards with --replicas " + std::to_string(map_.exp.replicas) +
                ": a shard rejoins only 2 shards with --replicas 2");
  // A shard that rejoins gets every part's state from the primary, not from a checkpoint, and
  // writes none (the primary's parts are not all its own).
  if (!rejoined_) start_checkpoints();
  start_replica();
  if (rejoined_) {
    own_serving_ = false;
    to_install_ = store_->parts_owned() + (replica_ ? replica_->parts_owned() : 0);
    spdlog::info("shard {} rejoins the run: it holds a copy of every part {} serves", shard_,
                 map_.servers.at(std::size_t(map_.rejoin_from)).name);
  }
  for (auto& l : lanes_) l->forward = backup_ && replica_ && !rejoined_;
  spdlog::info("shard {} holds {} parts, {:.2f} MiB; mode {}; {} apply lane(s)", shard_,
               store_->parts_owned(), store_->bytes_owned() / 1048576.0, map_.exp.mode.str(),
               lanes_.size());
  for (int i = 0; i < int(lanes_.size()); ++i)
    lanes_[i]->thread = std::thread([this, i] { loop(i); });
  replier_ = std::thread([this] { reply_loop(); });
  started_.store(true, std::memory_order_release);
}

void Shard::start_checkpoints() {
  const Experiment& e = map_.exp;
  if (e.resume_step > 0) {
    if (checkpoint_dir_.empty())
      throw Error(map_.servers.at(std::size_t(shard_)).name + " resumes at step " +
                  std::to_string(e.resume_step) + " and needs --checkpoint-dir, the checkpoints");
    const std::string path = checkpoint_path(checkpoint_dir_, shard_, std::uint64_t(e.resume_step));
    const Checkpoint c = read_checkpoint(path);
    check_checkpoint(c, map_, shard_, path);
    if (c.step != std::uint64_t(e.resume_step))
      throw Error("checkpoint " + path + " is of step " + std::to_string(c.step) + ", not " +
                  std::to_string(e.resume_step));
    restore_checkpoint(*store_, c, int(map_.workers.size()));
    spdlog::info("shard {} resumed from {} (step {})", shard_, path, c.step);
  }
  if (e.checkpoint_every <= 0 && e.checkpoint_every_s <= 0) return;
  if (checkpoint_dir_.empty())
    throw Error("the run takes checkpoints and " + map_.servers.at(std::size_t(shard_)).name +
                " has no --checkpoint-dir to write them to");
  checkpoints_ = std::make_unique<ShardCheckpointer>(
      checkpoint_dir_, map_, shard_, e.checkpoint_every, std::uint64_t(e.resume_step));
  store_->on_clock = [this](const PartState& s, std::uint64_t clock) {
    checkpoints_->reached(s, clock);
  };
}

void Shard::checkpoint_at(std::uint64_t step) {
  if (started_.load(std::memory_order_acquire) && checkpoints_) checkpoints_->want(step);
}

std::uint64_t Shard::checkpoints_written() const {
  return started_.load(std::memory_order_acquire) && checkpoints_ ? checkpoints_->written() : 0;
}

std::uint64_t Shard::last_checkpoint() const {
  return started_.load(std::memory_order_acquire) && checkpoints_ ? checkpoints_->last_step() : 0;
}

void Shard::stop() {
  stopping_ = true;
  for (auto& l : lanes_) {
    { std::lock_guard<std::mutex> lock(l->mu); }
    l->cv.notify_one();
  }
  for (auto& l : lanes_)
    if (l->thread.joinable()) l->thread.join();
  { std::lock_guard<std::mutex> lock(reply_mu_); }
  reply_cv_.notify_one();
  if (replier_.joinable()) replier_.join();
  if (checkpoints_) checkpoints_->stop();  // what is complete is written
}

void Shard::loop(int index) {
  pthread_setname_np(pthread_self(), ("ps-apply" + std::to_string(index)).c_str());
  Lane& lane = *lanes_[index];
  t_lane_ = &lane;
  for (;;) {
    std::deque<Message> batch;
    std::vector<int> dead;
    bool drain_copy = false, resync = false;
    {
      std::unique_lock<std::mutex> lock(lane.mu);
      lane.cv.wait(lock, [&] {
        return stopping_ || !lane.queue.empty() || !lane.dead.empty() || lane.backup_lost ||
               lane.drain_copy || lane.resync;
      });
      lane.backup_lost = false;
      drain_copy = lane.drain_copy;
      lane.drain_copy = false;
      resync = lane.resync;
      lane.resync = false;
      if (stopping_) return;
      batch.swap(lane.queue);
      dead.swap(lane.dead);
    }
    // bsp clocks that waited only for a dead worker are applied; a backup's copy waits for its
    // primary to say so, until it takes the parts over.
    auto drain = [&](Store& store) {
      for (const auto& [key, part] : store.parts())
        if (lane_of(std::uint32_t(key), std::uint32_t(part)) == index) store.drain(key, part);
    };
    for (int w : dead) {
      if (index == 0) spdlog::warn("worker {} is dead: no longer waiting for its gradients", w);
      store_->worker_dead(w);
      if (own_serving_) drain(*store_);
      if (replica_) replica_->worker_dead(w);
      if (replica_ && promoted_) drain(*replica_);
      send_forwards();
      retry_pulls(lane);
    }
    if (drain_copy && replica_) {
      drain(*replica_);
      if (rejoined_) drain(*store_);  // its own parts were a copy until now
      retry_pulls(lane);
    }
    for (auto& m : batch) {
      const PeerId peer = m.peer;
      try {
        handle(lane, std::move(m));
      } catch (const std::exception& e) {
        // A message must never take the shard down: log, count, go on.
        if (bad_.record(peer, Problem::kRange))
          spdlog::error("message from {} failed: {}", peer_name(peer), e.what());
      }
    }
    backup_events(lane, index, resync);
  }
}

// ZeroMQ hands small frames over inside its receive buffer at any offset; floats are read from
// an aligned copy then (small by construction, so the copy is cheap).
const float* Shard::floats_of(const Message& m, std::vector<float>& aligned) {
  const float* f = reinterpret_cast<const float*>(m.payload.data());
  if (reinterpret_cast<std::uintptr_t>(f) % alignof(float) == 0) return f;
  aligned.resize(m.payload.size() / sizeof(float));
  std::memcpy(aligned.data(), m.payload.data(), m.payload.size());
  count_copy(m.payload.size());
  return aligned.data();
}

Message Shard::ack_of(const Message& m) {
  Message ack;
  ack.peer = m.peer;
  ack.header = m.header;
  ack.header.op = Op::kPushAck;
  ack.header.length = 0;
  return ack;
}

Store* Shard::serving(std::uint32_t key, std::uint32_t part) const {
  if (store_ && own_serving_ && store_->owns(int(key), int(part))) return store_.get();
  if (promoted_ && replica_ && replica_->owns(int(key), int(part))) return replica_.get();
  return nullptr;
}

bool Shard::check(const Message& m) {
  FrameSizes f{m.payload.empty() ? std::size_t(1) : std::size_t(2), kHeaderBytes, m.payload.size()};
  Limits limits;
  limits.max_message_bytes = max_message_bytes_;
  Verdict v = validate(m.header, f, limits, parts_.get());
  if (v.ok() && m.header.sender >= map_.workers.size()) {
    v.problem = Problem::kKey;
    v.reason = "sender " + std::to_string(m.header.sender) +
               " is not a worker id (the cluster has " + std::to_string(map_.workers.size()) +
               " workers)";
  } else if (v.ok() && (m.header.offset % 4 || m.header.length % 4)) {
    v.problem = Problem::kRange;
    v.reason = "offset " + std::to_string(m.header.offset) + " and length " +
               std::to_string(m.header.length) + " must be multiples of 4 (float32)";
  } else if (v.ok() && m.header.op == Op::kPull && m.header.flags > kPullMomentum) {
    v.problem = Problem::kOp;
    v.reason = "pull flags " + std::to_string(m.header.flags) +
               ", expected 0 (parameters) or 1 (momentum)";
  } else if (v.ok() && m.header.op == Op::kPush && m.header.flags > kPushPull) {
    v.problem = Problem::kOp;
    v.reason = "push flags " + std::to_string(m.header.flags) +
               ", expected 0 (acknowledged) or 1 (answered with the updated part)";
  } else if (v.ok() && m.header.op == Op::kPush && m.header.flags == kPushPull &&
             map_.exp.replicas > 1) {
    // The answer would say the update is safe before the backup has it.
    v.problem = Problem::kOp;
    v.reason = "a push-pull under --replicas 2 (the shards acknowledge only what the backup holds)";
  } else if (v.ok() && !map_.workers[m.header.sender].link_id.empty() &&
             !link_id_matches(m.peer, map_.workers[m.header.sender].link_id,
                              map_.exp.connections)) {
    // Whoever can reach this port could otherwise train the model in a worker's name.
    v.problem = Problem::kSender;
    v.reason = "it claims to be worker " + std::to_string(m.header.sender) +
               ", whose connection this is not";
  } else if (v.ok() && !promoted_ && replica_ &&
             replica_->owns(int(m.header.key), int(m.header.part))) {
    // A worker asks this shard for the previous one's part: the coordinator told it that shard
    // is dead, and this word may reach the worker before it reaches this shard.
    server_dead(map_.replica_source(shard_));
  } else if (v.ok() && rejoined_ && !own_serving_ &&
             store_->owns(int(m.header.key), int(m.header.part))) {
    // The same for a shard that rejoined: its own parts come back to it when its primary dies.
    server_dead(map_.replica_source(shard_));
  }
  if (v.ok() && !serving(m.header.key, m.header.part)) {
    v.problem = Problem::kPart;
    v.reason = "part " + std::to_string(m.header.part) + " of key " + std::to_string(m.header.key) +
               " belongs to another shard";
  }
  if (v.ok()) return true;
  if (bad_.record(m.peer, v.problem))
    spdlog::warn(
        "bad {} message from {}: {} (dropped; further bad messages from it are only counted)",
        op_name(m.header.op), peer_name(m.peer), v.reason);
  return false;
}

void Shard::handle(Lane& lane, Message&& m) {
  if (m.peer == kBackupPeer) return backup_acked(lane, m);
  if (m.header.op == Op::kReplicate) return replicate(lane, std::move(m));
  if (m.header.op != Op::kPush && m.header.op != Op::kPull && m.header.op != Op::kAssign) {
    if (bad_.record(m.peer, Problem::kOp))
      spdlog::warn("unexpected {} message from {} (a shard takes Push, Pull and Assign), dropped",
                   op_name(m.header.op), peer_name(m.peer));
    return;
  }
  if (!check(m)) return;
  const Header& h = m.header;
  Store& store = *serving(h.key, h.part);
  if (h.op == Op::kAssign) return assign(lane, store, m);
  if (h.op == Op::kPush) {
    const double t0 = now_us();
    std::vector<float> aligned;
    const float* grad = floats_of(m, aligned);
    if (!map_.exp.allow_nonfinite && !all_finite(grad, h.length / sizeof(float))) {
      refuse_nonfinite(m);
      return;
    }
    if (replayed_push(lane, store, m)) return;
    const Status pushed =
        store.push(int(h.sender), h.clock, int(h.key), int(h.part), h.offset, grad, h.length);
    if (!pushed.ok()) {
      if (bad_.record(m.peer, Problem::kRange))
        spdlog::warn("push from {} refused: {} (further bad messages from it are only counted)",
                     peer_name(m.peer), pushed.message());
      return;
    }
    ++pushes_;
    if (trace_.enabled()) {
      TraceEvent e;
      e.name = "apply:" + map_.spec.tensors[h.key].name + "#" + std::to_string(h.part);
      e.lane = "apply", e.ts_us = t0, e.dur_us = now_us() - t0;
      e.step = std::int64_t(h.clock), e.bytes = std::int64_t(h.length), e.key = h.key,
      e.part = h.part;
      e.priority = h.priority, e.has_priority = true;
      e.flow = transfer_flow_id(std::int64_t(h.sender), h.key, h.part,
                                std::int64_t(h.offset / sizeof(float)), std::int64_t(h.clock));
      e.flow_in = e.flow_out = true;
      trace_.record(std::move(e));
    }
    if (h.flags == kPushPull)
      pull_after_push(lane, store, m);
    else
      push_done(lane, store, m, ack_of(m));
    retry_pulls(lane);
    return;
  }
  ++pulls_;
  if (store.pull_ready(int(h.key), int(h.part), h.clock))
    reply(m);
  else
    lane.waiting.push_back(std::move(m));
}

// A gradient that is not finite poisons the part for every worker and never recovers: refused,
// and its (bound, so real) sender is told why, since a worker waiting for the ack would hang.
void Shard::refuse_nonfinite(const Message& m) {
  const Header& h = m.header;
  const std::string what = map_.spec.tensors[h.key].name + "#" + std::to_string(h.part);
  if (bad_.record(m.peer, Problem::kNonfinite))
    spdlog::warn(
        "push of {} from worker {} refused: it holds NaN or infinity (further bad "
        "messages from it are only counted)",
        what, h.sender);
  const std::string text =
      nlohmann::json{{"error", map_.servers.at(std::size_t(shard_)).name +
                                   " refused the gradient of " + what +
                                   ": it holds NaN or infinity (the run diverged: a " +
                                   "smaller --lr helps; --allow-nonfinite lets it through)"}}
          .dump();
  Message e;
  e.peer = m.peer;
  e.header = h;
  e.header.op = Op::kError;
  e.header.length = text.size();
  e.payload = Payload::copy(text);
  transport_.send(std::move(e));
}

void Shard::reply(const Message& pull) {
  const Store& store = *serving(pull.header.key, pull.header.part);
  const int key = int(pull.header.key), part = int(pull.header.part);
  send_reply(pull, pull.header.flags == kPullMomentum ? store.velocity(key, part)
                                                      : store.snapshot(key, part));
}

// The pull a worker would send next for these bytes asks for the push's clock + 1 (the state
// after it); asked together, it saves the request and a turnaround, and in async the ack. Under
// bsp and ssp the push is acknowledged first: the worker's policy counts an unacknowledged push
// against its credit (a credit smaller than the clock's pushes would never be released), and
// its step ends at the ack, so the answer of even the clock's last push overlaps the next
// step's start as a pull's reply does.
void Shard::pull_after_push(Lane& lane, Store& store, const Message& push) {
  Message pull;
  pull.peer = push.peer;
  pull.header = push.header;
  pull.header.op = Op::kPull;
  pull.header.flags = 0;
  pull.header.clock = push.header.clock + 1;
  ++pulls_;
  if (map_.exp.mode.kind != Consistency::Kind::kAsync) transport_.send(ack_of(push));
  if (store.pull_ready(int(pull.header.key), int(pull.header.part), pull.header.clock))
    reply(pull);
  else
    lane.waiting.push_back(std::move(pull));
}

// A live --comm switch hands an SFB layer back: the workers' values become the part's state
// from the message's clock on; the pulls of that clock waiting for it are answered.
void Shard::assign(Lane& lane, Store& store, const Message& m) {
  const Header& h = m.header;
  std::vector<float> aligned;
  Status st = Status::success();
  if (replica_ || backup_)
    st = Status::error("--replicas 2 keeps no copy of an assigned part: --comm cannot switch");
  else if (h.offset != 0)
    st = Status::error("offset " + std::to_string(h.offset) + ", expected 0 (the whole part)");
  else if (!map_.exp.allow_nonfinite && !all_finite(floats_of(m, aligned), h.length / 4))
    st = Status::error("it holds NaN or infinity");
  else
    st = store.assign(int(h.key), int(h.part), h.clock, floats_of(m, aligned), h.length / 4);
  if (!st.ok()) {
    if (bad_.record(m.peer, Problem::kRange))
      spdlog::warn(
          "assign of part {} of key {} from {} refused: {} (further bad messages from it "
          "are only counted)",
          h.part, h.key, peer_name(m.peer), st.message());
    return;
  }
  spdlog::debug("{} assigned part {} of {} from clock {}", peer_name(m.peer), h.part,
                map_.spec.tensors[h.key].name, h.clock);
  transport_.send(ack_of(m));
  retry_pulls(lane);
}

void Shard::send_reply(const Message& pull, const Buffer& snap) {
  const Header& h = pull.header;
  Message r;
  r.peer = pull.peer;
  r.header = h;
  r.header.op = Op::kPullReply;
  Payload whole(snap, snap->data(), snap->size() * sizeof(float));
  r.payload = whole.slice(h.offset, h.length);
  transport_.send(std::move(r));
}

void Shard::retry_pulls(Lane& lane) {
  for (auto it = lane.waiting.begin(); it != lane.waiting.end();) {
    if (serving(it->header.key, it->header.part)
            ->pull_ready(int(it->header.key), int(it->header.part), it->header.clock)) {
      reply(*it);
      it = lane.waiting.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace psbed::ps
