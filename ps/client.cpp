#include "ps/client.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "ps/copy_counter.hpp"
#include "ps/host_lookup.hpp"

namespace psbed::ps {

PsClient::PsClient(const ClusterMap& map, int worker_id, const std::string& link_id,
                   std::shared_ptr<LinkBuckets> link, const CurveKeys& keys)
    : map_(map),
      worker_(worker_id),
      link_id_(link_id),
      link_(std::move(link)),
      keys_(keys),
      connections_(std::clamp(map.exp.connections, 1, kMaxConnections)) {
  const int shards = int(map.servers.size());
  zmq_.resize(std::size_t(shards * connections_));
  for (int s = 0; s < shards; ++s)
    for (int k = 0; k < connections_; ++k) conns_.push_back(open_connection(s, k));
  for (int i = 0; i < shards; ++i) owner_.push_back(i);
  dead_.assign(std::size_t(shards), 0);
  for (int s = 0; s < shards; ++s)
    for (int k = 0; k < connections_; ++k)
      conns_[conn(s, k)]->start([this, s](Message&& m) { receive(s, std::move(m)); });
}

std::unique_ptr<Transport> PsClient::open_connection(int id, int k, const std::string& address) {
  const NodeInfo& s = map_.servers.at(std::size_t(id));
  ZmqOptions z;
  z.role = ZmqOptions::Role::kClient;
  z.endpoint = address.empty() ? s.address : address;
  z.identity = connection_identity(link_id_, k);
  z.thread_name = "ps-client" + std::to_string(s.id) + (k ? "." + std::to_string(k) : "");
  if (keys_.on()) {
    if (s.curve_key.empty())
      throw Error("--keys: " + s.name +
                  " gave no CURVE key when it registered: start every node with --keys");
    z.curve = keys_;
    z.curve.server_key = s.curve_key;
  }
  auto t = std::make_unique<ZmqTransport>(z);
  zmq_.at(conn(id, k)) = t.get();
  if (link_ && link_->options.shaped())
    return std::make_unique<ShapedTransport>(std::move(t), link_);
  return t;
}

PsClient::~PsClient() { stop(); }

void PsClient::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stopping_ = true;
  // First every sender waiting for room, on any shard: a callback of one shard may be waiting to
  // send to another, and a shaped link's pacing thread waits inside its ZeroMQ transport.
  for (ZmqTransport* z : zmq_) z->release_senders();
  // Then the shards, together: a shaped shard's delivery thread may be waiting for room in
  // another shard's shaped queue, which only that shard's stop() ends.
  if (conns_.size() <= 1) {
    for (auto& s : conns_) s->stop();
    return;
  }
  std::vector<std::thread> stopping;
  for (auto& s : conns_) stopping.emplace_back([t = s.get()] { t->stop(); });
  for (auto& t : stopping) t.join();
  for (auto& s : retired_) s->stop();
}

std::vector<PsClient::Piece> PsClient::stripes(int part_index, std::int64_t numel,
                                               std::int64_t offset, std::int64_t count,
                                               int connections) {
  if (connections <= 1) return {{0, offset, count}};
  if (numel * 4 < connections * kMinStripeBytes) return {{part_index % connections, offset, count}};
  const std::int64_t stripe = (numel + connections - 1) / connections;
  // Empty, or past the part (the shard refuses it): whole, on the connection of its start.
  if (count <= 0 || offset < 0 || offset + count > numel)
    return {{int(std::clamp<std::int64_t>(offset / stripe, 0, connections - 1)), offset, count}};
  std::vector<Piece> pieces;
  for (std::int64_t at = offset, end = offset + count; at < end;) {
    const std::int64_t k = at / stripe, until = std::min(end, (k + 1) * stripe);
    pieces.push_back({int(k), at, until - at});
    at = until;
  }
  return pieces;
}

// One piece's callback of several: `all` runs once every piece's ran.
PsClient::Callback PsClient::countdown(const std::shared_ptr<std::atomic<int>>& left,
                                       const std::shared_ptr<Callback>& all) {
  return [left, all] {
    if (--*left == 0 && *all) (*all)();
  };
}

void PsClient::send(Op op, int part_index, const float* data, float* dst, std::int64_t offset,
                    std::int64_t count, std::uint64_t clock, int priority, Callback done,
                    std::uint8_t flags, Callback answered) {
  const Part& part = map_.plan.parts.at(std::size_t(part_index));
  // An Assign carries the parameters then the momentum (2 x numel floats): not cut.
  const auto pieces = op == Op::kAssign
                          ? std::vector<Piece>{{0, offset, count}}
                          : stripes(part_index, part.numel, offset, count, connections_);
  if (pieces.size() == 1) {
    send_piece(op, part_index, data, dst, offset, count, clock, priority, std::move(done), flags,
               pieces[0].connection, std::move(answered));
    return;
  }
  const int n = int(pieces.size());
  auto pushed = std::make_shared<std::atomic<int>>(n), got = std::make_shared<std::atomic<int>>(n);
  auto all_pushed = std::make_shared<Callback>(std::move(done));
  auto all_got = std::make_shared<Callback>(std::move(answered));
  for (const Piece& p : pieces) {
    const std::int64_t at = p.offset - offset;
    send_piece(op, part_index, data ? data + at : nullptr, dst ? dst + at : nullptr, p.offset,
               p.count, clock, priority, countdown(pushed, all_pushed), flags, p.connection,
               *all_got ? countdown(got, all_got) : nullptr);
  }
}

void PsClient::send_piece(Op op, int part_index, const float* data, float* dst, std::int64_t offset,
                          std::int64_t count, std::uint64_t clock, int priority, Callback done,
                          std::uint8_t flags, int connection, Callback answered) {
  const std::uint64_t seq = ++seq_;
  Message m;
  int shard = 0;
  Transport* to = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shard = owner_.at(std::size_t(map_.plan.parts.at(part_index).shard));
    to = conns_.at(conn(shard, connection)).get();
    Pending& p = pending_[seq];
    p = Pending{dst,     std::uint64_t(count) * 4, std::move(done), part_index, shard, connection,
                now_us()};
    p.op = op, p.data = data, p.offset = offset, p.clock = clock, p.priority = priority;
    p.flags = flags;
    p.answered = std::move(answered);
    m = request(p, seq);
  }
  // Stopped (or stopped while this waited for room): nothing goes, and no answer will come. A
  // shard that died while this waited: fail_over() sent it again, to the new owner.
  if (stopping_ || !to->send(std::move(m))) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !dead_[std::size_t(shard)]) pending_.erase(seq);
  }
}

Message PsClient::request(const Pending& p, std::uint64_t seq) const {
  const Part& part = map_.plan.parts.at(std::size_t(p.part));
  Message m;
  m.header.op = p.op;
  m.header.flags = p.flags;
  m.header.sender = std::uint32_t(worker_);
  m.header.key = std::uint32_t(part.key);
  m.header.part = std::uint32_t(part.part);
  m.header.offset = std::uint64_t(p.offset) * 4;
  m.header.length = p.bytes;
  m.header.clock = p.clock;
  m.header.priority = p.priority;
  m.header.sequence = seq;
  // Push: the caller keeps the bytes alive until the ack, so they are shared without an owner.
  if (p.data) m.payload = Payload(std::shared_ptr<const void>(), p.data, std::size_t(p.bytes));
  return m;
}

std::size_t PsClient::fail_over(int dead, int to, const std::string& address) {
  const int shards = int(dead_.size());
  if (dead < 0 || to < 0 || dead >= shards || to >= shards || dead == to) return 0;
  std::vector<std::tuple<std::uint64_t, Message, Transport*>> again;
  std::unique_lock<std::mutex> stop_lock(stop_mu_);  // stop() goes over the transports
  if (stopping_) return 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_[std::size_t(dead)]) return 0;
    dead_[std::size_t(dead)] = 1;
    if (dead_[std::size_t(to)]) {
      // A shard that died before and rejoined (--replicas 2) takes its parts and the dead one's:
      // its old connections were released when it died, so new ones go to its address.
      for (int k = 0; k < connections_; ++k) {
        auto& c = conns_[conn(to, k)];
        retired_.push_back(std::move(c));
        c = open_connection(to, k, address);
        c->start([this, to](Message&& m) { receive(to, std::move(m)); });
      }
      dead_[std::size_t(to)] = 0;
    }
    for (int& o : owner_)
      if (o == dead) o = to;
    for (auto& [seq, p] : pending_)
      if (p.shard == dead) {
        p.shard = to;
        again.emplace_back(seq, request(p, seq), conns_[conn(to, p.connection)].get());
      }
  }
  stop_lock.unlock();  // not held while sending: stop() must be able to free a sender
  // A sender waiting for room towards the dead shard gives up (its request is in `again`).
  for (int k = 0; k < connections_; ++k) zmq_.at(conn(dead, k))->release_senders();
  std::sort(again.begin(), again.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  for (auto& [seq, m, next] : again)
    if (stopping_ || !next->send(std::move(m))) break;
  return again.size();
}

void PsClient::push(int part_index, const float* data, std::int64_t offset, std::int64_t count,
                    std::uint64_t clock, int priority, Callback on_ack) {
  pushed_ += std::uint64_t(count) * 4;
  send(Op::kPush, part_index, data, nullptr, offset, count, clock, priority, std::move(on_ack));
}

void PsClient::pull(int part_index, float* dst, std::int64_t offset, std::int64_t count,
                    std::uint64_t clock, int priority, Callback on_arrival) {
  send(Op::kPull, part_index, nullptr, dst, offset, count, clock, priority, std::move(on_arrival));
}

void PsClient::push_pull(int part_index, const float* data, float* dst, std::int64_t offset,
                         std::int64_t count, std::uint64_t clock, int priority, Callback on_pushed,
                         Callback on_answered) {
  if (map_.exp.replicas > 1)
    throw Error("push-pull under --replicas 2: the shards acknowledge only what the backup holds");
  pushed_ += std::uint64_t(count) * 4;
  send(Op::kPush, part_index, data, dst, offset, count, clock, priority, std::move(on_pushed),
       kPushPull, std::move(on_answered));
}

void PsClient::pull_momentum(int part_index, float* dst, std::uint64_t clock, int priority,
                             Callback on_arrival) {
  send(Op::kPull, part_index, nullptr, dst, 0, map_.plan.parts.at(part_index).numel, clock,
       priority, std::move(on_arrival), kPullMomentum);
}

void PsClient::assign(int part_index, const float* values, std::uint64_t clock, int priority,
                      Callback on_ack) {
  send(Op::kAssign, part_index, values, nullptr, 0, 2 * map_.plan.parts.at(part_index).numel, clock,
       priority, std::move(on_ack));
}

void PsClient::check_shards(double timeout_s, const std::function<std::string()>& abort) {
  // Shared with the callbacks: an answer may come after this gave up.
  struct Answers {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<char> answered;
    std::vector<float> sink;
  };
  // One pull on each connection (conn(shard, k)): a connection that leads nowhere shows now.
  auto answers = std::make_shared<Answers>();
  answers->answered.assign(conns_.size(), 0);
  answers->sink.assign(conns_.size(), 0.0f);
  std::vector<char> asked(conns_.size(), 0);
  for (int i = 0; i < int(map_.plan.parts.size()); ++i) {
    const int shard = map_.plan.parts[i].shard;
    if (asked.at(conn(shard, 0))) continue;
    for (int k = 0; k < connections_; ++k) {
      const std::size_t c = conn(shard, k);
      asked[c] = 1;
      send_piece(
          Op::kPull, i, nullptr, &answers->sink[c], 0, 1, 0, 0,
          [answers, c] {
            std::lock_guard<std::mutex> lock(answers->mu);
            answers->answered[c] = 1;
            answers->cv.notify_all();
          },
          0, k, nullptr);
    }
  }
  auto unanswered = [&] {  // the shard of the first connection not answered, or -1
    for (std::size_t c = 0; c < asked.size(); ++c)
      if (asked[c] && !answers->answered[c]) return int(c) / connections_;
    return -1;
  };
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  std::unique_lock<std::mutex> lock(answers->mu);
  while (unanswered() >= 0) {
    const auto wake =
        std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(250));
    answers->cv.wait_until(lock, wake, [&] { return unanswered() < 0; });
    if (unanswered() < 0) break;
    if (abort) {
      lock.unlock();
      const std::string why = abort();
      lock.lock();
      if (!why.empty()) throw Error(why + " while waiting for the servers' first answers");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const int s = unanswered();
      const NodeInfo& server = map_.servers.at(std::size_t(s));
      const std::string host = unresolved_host(server.address);
      throw Error("cannot reach " + server.name + " at " + server.address +
                  " (the address it gave the coordinator): " + (host.empty() ? "" : host + "; ") +
                  "no answer to a pull within " + format_seconds(timeout_s) +
                  " s (--connect-timeout); check its --bind and --advertise");
    }
  }
}

std::string PsClient::describe_outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.empty()) return "";
  // Sequences grow: the smallest is the oldest request still unanswered.
  const Pending* oldest = nullptr;
  std::uint64_t oldest_seq = 0;
  std::vector<int> per_shard(map_.servers.size(), 0);
  for (const auto& [seq, p] : pending_) {
    if (p.shard >= 0 && p.shard < int(per_shard.size())) ++per_shard[std::size_t(p.shard)];
    if (!oldest || seq < oldest_seq) oldest = &p, oldest_seq = seq;
  }
  const Part& part = map_.plan.parts.at(std::size_t(oldest->part));
  std::string text = std::string(oldest->dst && oldest->data ? "the answer to a push-pull of "
                                 : oldest->dst               ? "a pull of "
                                                             : "the ack of a push of ") +
                     map_.spec.tensors.at(std::size_t(part.key)).name + "#" +
                     std::to_string(part.part) + " from " +
                     map_.servers.at(std::size_t(oldest->shard)).name + ", unanswered for " +
                     format_seconds((now_us() - oldest->sent_us) / 1e6) + " s; " +
                     std::to_string(pending_.size()) + " request(s) outstanding (";
  for (std::size_t s = 0; s < per_shard.size(); ++s)
    text += (s ? ", " : "") + map_.servers[s].name + ": " + std::to_string(per_shard[s]);
  return text + ")";
}

std::string PsClient::refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusal_;
}

std::string PsClient::make_link_id(const std::string& name) {
  std::random_device random;
  char tag[40];
  std::snprintf(tag, sizeof tag, "#%08x%08x%08x%08x", unsigned(random()), unsigned(random()),
                unsigned(random()), unsigned(random()));
  return name.substr(0, 200) + tag;
}

void PsClient::receive(int shard, Message&& m) {
  Pending done;
  Callback pushed;  // a push-pull's at its ack: the request stays pending for the answer
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(m.header.sequence);
    // A dead shard's late answer: the request went to its successor, which answers it.
    if (it != pending_.end() && it->second.shard != shard) return;
    if (it == pending_.end()) {
      spdlog::warn("{} from shard {} answers no request (sequence {}), dropped",
                   op_name(m.header.op), shard, m.header.sequence);
      return;
    }
    // A pull (or push-pull) is answered with bytes, a push with an ack, a push-pull with one ack
    // at most before its bytes: the other way round would leave dst unwritten, or write where
    // nothing was asked. The request stays pending.
    Pending& p = it->second;
    const bool push_pull = p.op == Op::kPush && p.dst;
    if ((m.header.op == Op::kPullReply && !p.dst) ||
        (m.header.op == Op::kPushAck && p.dst && (!push_pull || p.acked))) {
      spdlog::warn("{} from shard {} answers a request of the other kind (sequence {}), dropped",
                   op_name(m.header.op), shard, m.header.sequence);
      return;
    }
    if (m.header.op == Op::kPushAck && push_pull) {
      p.acked = true;
      pushed = std::move(p.done);
      p.done = nullptr;  // a moved-from function need not be empty
    } else {
      done = std::move(p);
      pending_.erase(it);
    }
  }
  if (pushed) {
    pushed();
    return;
  }
  if (m.header.op == Op::kError) {
    std::string why = "an error without a reason";
    try {
      why = parse_peer_json(m.payload.view()).value("error", why);
    } catch (const std::exception&) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!refusal_.empty()) return;  // the first says why; the rest follow from it
    spdlog::error("{} refused a request: {}", map_.servers.at(std::size_t(shard)).name, why);
    refusal_ = why;
    return;
  }
  if (m.header.op == Op::kPullReply) {
    if (m.payload.size() != done.bytes) {
      spdlog::error("pull reply from shard {} has {} bytes, expected {}: dropped", shard,
                    m.payload.size(), done.bytes);
      return;
    }
    std::memcpy(done.dst, m.payload.data(), m.payload.size());
    count_copy(m.payload.size());
    pulled_ += m.payload.size();
  } else if (m.header.op != Op::kPushAck) {
    spdlog::warn("unexpected {} from shard {}, dropped", op_name(m.header.op), shard);
    return;
  }
  // A push-pull answered without an ack (async): answered first, so a step that the push's end
  // lets begin finds the part back.
  if (done.answered) done.answered();
  if (done.done) done.done();
}

}  // namespace psbed::ps
