#include "ps/client.hpp"

#include <spdlog/spdlog.h>

#include <cstring>

#include "core/error.hpp"

namespace psbed::ps {

PsClient::PsClient(const ClusterMap& map, int worker_id, const std::string& name, std::shared_ptr<LinkBuckets> link)
    : map_(map), worker_(worker_id) {
  for (const auto& s : map.servers) {
    ZmqOptions z;
    z.role = ZmqOptions::Role::kClient;
    z.endpoint = s.address;
    z.identity = name;
    z.thread_name = "ps-client" + std::to_string(s.id);
    auto t = std::make_unique<ZmqTransport>(z);
    if (link && link->options.shaped()) shards_.push_back(std::make_unique<ShapedTransport>(std::move(t), link));
    else shards_.push_back(std::move(t));
  }
  for (int i = 0; i < int(shards_.size()); ++i)
    shards_[i]->start([this, i](Message&& m) { receive(i, std::move(m)); });
}

PsClient::~PsClient() { stop(); }

void PsClient::stop() {
  for (auto& s : shards_) s->stop();
}

std::uint64_t PsClient::send(Op op, int part_index, const float* data, float* dst, std::int64_t offset,
                             std::int64_t count, std::uint64_t clock, int priority, Callback done) {
  const Part& p = map_.plan.parts.at(part_index);
  const std::uint64_t seq = ++seq_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_[seq] = Pending{dst, std::uint64_t(count) * 4, std::move(done)};
  }
  Message m;
  m.header.op = op;
  m.header.sender = std::uint32_t(worker_);
  m.header.key = std::uint32_t(p.key);
  m.header.part = std::uint32_t(p.part);
  m.header.offset = std::uint64_t(offset) * 4;
  m.header.length = std::uint64_t(count) * 4;
  m.header.clock = clock;
  m.header.priority = priority;
  m.header.sequence = seq;
  // Push: the caller keeps the bytes alive until the ack, so they are shared without an owner.
  if (data) m.payload = Payload(std::shared_ptr<const void>(), data, std::size_t(count) * 4);
  shards_.at(p.shard)->send(std::move(m));
  return seq;
}

void PsClient::push(int part_index, const float* data, std::int64_t offset, std::int64_t count, std::uint64_t clock,
                    int priority, Callback on_ack) {
  pushed_ += std::uint64_t(count) * 4;
  send(Op::kPush, part_index, data, nullptr, offset, count, clock, priority, std::move(on_ack));
}

void PsClient::pull(int part_index, float* dst, std::int64_t offset, std::int64_t count, std::uint64_t clock,
                    int priority, Callback on_arrival) {
  send(Op::kPull, part_index, nullptr, dst, offset, count, clock, priority, std::move(on_arrival));
}

void PsClient::receive(int shard, Message&& m) {
  Pending done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(m.header.sequence);
    if (it == pending_.end()) {
      spdlog::warn("{} from shard {} answers no request (sequence {}), dropped", op_name(m.header.op), shard,
                   m.header.sequence);
      return;
    }
    done = std::move(it->second);
    pending_.erase(it);
  }
  if (m.header.op == Op::kPullReply) {
    if (m.payload.size() != done.bytes) {
      spdlog::error("pull reply from shard {} has {} bytes, expected {}: dropped", shard, m.payload.size(), done.bytes);
      return;
    }
    std::memcpy(done.dst, m.payload.data(), m.payload.size());
    pulled_ += m.payload.size();
  } else if (m.header.op != Op::kPushAck) {
    spdlog::warn("unexpected {} from shard {}, dropped", op_name(m.header.op), shard);
    return;
  }
  if (done.done) done.done();
}

}  // namespace psbed::ps
