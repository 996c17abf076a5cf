#include "ps/shard.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace psbed::ps {

Shard::Shard(std::uint64_t max_message_bytes, ZmqTransport& transport, TraceRecorder& trace)
  : max_message_bytes_(max_message_bytes), transport_(transport), trace_(trace) {}

void Shard::enqueue(Message&& m) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(m));
  cv_.notify_one();
}
void Shard::worker_dead(int w) {
  std::lock_guard<std::mutex> lock(mu_);
  dead_.push_back(w);
  cv_.notify_one();
}
void Shard::start(const ClusterMap& map, int shard) {
  map_ = map;
  shard_ = shard;
  thread_ = std::thread([this] { loop(); });
}
void Shard::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Shard::loop() {
  pthread_setname_np(pthread_self(), "ps-apply");
  store_ = std::make_unique<Store>(map_, shard_);
  parts_ = std::make_unique<PlanPartSizes>(map_.plan);
  spdlog::info("shard {} holds {} parts, {:.2f} MiB; mode {}", shard_, store_->parts_owned(),
               store_->bytes_owned() / 1048576.0, map_.exp.mode.str());
  for (;;) {
    std::deque<Message> batch;
    std::vector<int> dead;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !dead_.empty(); });
      if (stopping_) return;
      batch.swap(queue_);
      dead.swap(dead_);
    }
    for (int w : dead) {
      spdlog::warn("worker {} is dead: no longer waiting for its gradients", w);
      store_->worker_dead(w);
      retry_pulls();
    }
    for (auto& m : batch) handle(std::move(m));
  }
}

bool Shard::check(const Message& m) {
  FrameSizes f{m.payload.empty() ? std::size_t(1) : std::size_t(2), kHeaderBytes, m.payload.size()};
  Limits limits;
  limits.max_message_bytes = max_message_bytes_;
  Verdict v = validate(m.header, f, limits, parts_.get());
  if (v.ok() && m.header.sender >= map_.workers.size()) {
    v.problem = Problem::kKey;
    v.reason = "sender " + std::to_string(m.header.sender) + " is not a worker id (the cluster has " +
               std::to_string(map_.workers.size()) + " workers)";
  } else if (v.ok() && (m.header.offset % 4 || m.header.length % 4)) {
    v.problem = Problem::kRange;
    v.reason = "offset " + std::to_string(m.header.offset) + " and length " + std::to_string(m.header.length) +
               " must be multiples of 4 (float32)";
  } else if (v.ok() && !store_->owns(int(m.header.key), int(m.header.part))) {
    v.problem = Problem::kPart;
    v.reason = "part " + std::to_string(m.header.part) + " of key " + std::to_string(m.header.key) +
               " belongs to another shard";
  }
  if (v.ok()) return true;
  if (bad_.record(m.peer, v.problem))
    spdlog::warn("bad {} message from {}: {} (dropped; further bad messages from it are only counted)",
                 op_name(m.header.op), peer_name(m.peer), v.reason);
  return false;
}

void Shard::handle(Message&& m) {
  if (m.header.op != Op::kPush && m.header.op != Op::kPull) {
    if (bad_.record(m.peer, Problem::kOp))
      spdlog::warn("unexpected {} message from {} (a shard takes Push and Pull), dropped", op_name(m.header.op),
                   peer_name(m.peer));
    return;
  }
  if (!check(m)) return;
  const Header& h = m.header;
  if (h.op == Op::kPush) {
    const double t0 = now_us();
    store_->push(int(h.sender), h.clock, int(h.key), int(h.part), h.offset,
                 reinterpret_cast<const float*>(m.payload.data()), h.length);
    ++pushes_;
    if (trace_.enabled()) {
      TraceEvent e;
      e.name = "apply:" + map_.spec.tensors[h.key].name + "#" + std::to_string(h.part);
      e.lane = "apply", e.ts_us = t0, e.dur_us = now_us() - t0;
      e.step = std::int64_t(h.clock), e.bytes = std::int64_t(h.length), e.key = h.key, e.part = h.part;
      e.priority = h.priority, e.has_priority = true;
      trace_.record(std::move(e));
    }
    Message ack;
    ack.peer = m.peer;
    ack.header = h;
    ack.header.op = Op::kPushAck;
    ack.header.length = 0;
    transport_.send(std::move(ack));
    retry_pulls();
    return;
  }
  ++pulls_;
  if (store_->pull_ready(int(h.key), int(h.part), h.clock)) reply(m);
  else waiting_.push_back(std::move(m));
}

void Shard::reply(const Message& pull) {
  const Header& h = pull.header;
  Buffer snap = store_->snapshot(int(h.key), int(h.part));
  Message r;
  r.peer = pull.peer;
  r.header = h;
  r.header.op = Op::kPullReply;
  Payload whole(snap, snap->data(), snap->size() * sizeof(float));
  r.payload = whole.slice(h.offset, h.length);
  transport_.send(std::move(r));
}

void Shard::retry_pulls() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (store_->pull_ready(int(it->header.key), int(it->header.part), it->header.clock)) {
      reply(*it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

Shard::~Shard() { stop(); }

}  // namespace psbed::ps
