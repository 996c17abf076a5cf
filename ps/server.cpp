#include "ps/server.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <variant>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "ps/node_link.hpp"
#include "ps/store.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {
namespace {

// The shard's one thread that touches the store: messages from the transport's owner thread
// (which must not block) and control events queue here, so the store needs no locks and a pull
// can never see a half-applied update.
class Shard {
 public:
  Shard(const ServerOptions& opt, ZmqTransport& transport, TraceRecorder& trace)
      : opt_(opt), transport_(transport), trace_(trace) {}

  void enqueue(Message&& m) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(m));
    cv_.notify_one();
  }
  void worker_dead(int w) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_.push_back(w);
    cv_.notify_one();
  }
  void start(const ClusterMap& map, int shard) {
    map_ = map;
    shard_ = shard;
    thread_ = std::thread([this] { loop(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  const BadMessageCounter& bad() const { return bad_; }
  std::uint64_t pushes() const { return pushes_; }
  std::uint64_t pulls() const { return pulls_; }

 private:
  void loop() {
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

  bool check(const Message& m) {
    FrameSizes f{m.payload.empty() ? std::size_t(1) : std::size_t(2), kHeaderBytes, m.payload.size()};
    Limits limits;
    limits.max_message_bytes = opt_.max_message_bytes;
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

  void handle(Message&& m) {
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

  void reply(const Message& pull) {
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

  void retry_pulls() {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (store_->pull_ready(int(it->header.key), int(it->header.part), it->header.clock)) {
        reply(*it);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const ServerOptions& opt_;
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
  std::uint64_t pushes_ = 0, pulls_ = 0;
};

}  // namespace

int run_server(const ServerOptions& in) {
  ServerOptions opt = in;
  if (opt.name.empty()) opt.name = "server-" + std::to_string(::getpid());
  ZmqOptions z;
  z.role = ZmqOptions::Role::kServer;
  z.endpoint = opt.bind;
  z.thread_name = "ps-router";
  z.limits.max_message_bytes = opt.max_message_bytes;
  ZmqTransport transport(z);
  TraceRecorder trace(opt.name, !opt.trace_dir.empty());
  Shard shard(opt, transport, trace);
  transport.start([&](Message&& m) { shard.enqueue(std::move(m)); });
  std::string address = opt.advertise.empty() ? transport.endpoint() : opt.advertise;
  spdlog::info("{} serving on {}", opt.name, transport.endpoint());

  NodeLink link({opt.coordinator, "server", opt.name, address, opt.connect_timeout_s, opt.heartbeat_s});
  link.on_control([&](const nlohmann::json& j) {
    if (j.value("event", "") == "worker_dead") shard.worker_dead(j.value("worker", -1));
  });
  ClusterMap map = link.join();
  trace.set_metadata("role", "server");
  trace.set_metadata("cluster", map.to_json()["experiment"]);
  shard.start(map, link.id());
  while (!link.wait_shutdown(3600)) {
  }
  shard.stop();
  transport.stop();
  const auto& bad = shard.bad();
  const auto& tbad = transport.bad_messages();
  spdlog::info("{} shutting down: {} pushes, {} pulls, {} bad messages dropped", opt.name, shard.pushes(), shard.pulls(),
               bad.total() + tbad.total());
  nlohmann::json by_kind = nlohmann::json::object();
  for (int k = 1; k < kProblemKinds; ++k) {
    const auto p = static_cast<Problem>(k);
    if (auto n = bad.count(p) + tbad.count(p)) {
      by_kind[problem_name(p)] = n;
      spdlog::info("  bad messages, {}: {}", problem_name(p), n);
    }
  }
  if (!opt.trace_dir.empty()) {
    trace.set_metadata("bad_messages", bad.total() + tbad.total());
    trace.set_metadata("bad_messages_by_kind", by_kind);
    std::filesystem::create_directories(opt.trace_dir);
    trace.write(opt.trace_dir + "/" + opt.name + ".trace.json");
  }
  return 0;
}

}  // namespace psbed::ps
