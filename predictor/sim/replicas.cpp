// Replicated shards (SimConfig::replicas, as ps/shard_replica.cpp): shard s's parts have a copy
// on shard (s + 1) mod S. After applying a push the primary forwards the update from its own
// link to the backup's (async, ssp: the push's bytes; bsp: a part's bytes once per clock, when
// every worker's push of that clock is in), the backup applies it on the part's lane there, and
// its acknowledgment, a small message, comes back one latency later; only then does the primary
// acknowledge the push (bsp: every push of that clock). Pull answers are not held.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

// The lane of `part`'s copy on its backup: the same hash of (key, part) over the backup's lanes.
int Simulation::backup_lane(int part) const {
  const int lanes = int(lanes_.size()) / S_;
  const int shard = plan_.parts[std::size_t(part)].shard;
  return backup_of(shard) * lanes + (part_lane_[std::size_t(part)] - shard * lanes);
}

// The primary's lane sends the update to the backup; `held` is the push ack it waits for
// (-1 in bsp: the clock's acks wait under the part).
void Simulation::forward(const Message& m, int lane, int held, std::int64_t clock,
                         const Transfer& t) {
  const int worker = m.worker, shard = m.shard;  // m may move in new_message
  const int id = new_message({MsgKind::kReplicate, worker, shard, t, clock, now_, held});
  if (bucket_)
    send_from(lane_thread(lane), id);
  else
    send(replica_channel(shard), id);
}

// bsp: the ack `id` of a push of clock count `clock_count` waits for the backup to have that
// clock; if the push completed the part's clock `completed` (its slowest worker's), the clock's
// sum goes to the backup now.
void Simulation::hold_ack(int id, int lane, std::int64_t clock_count, bool completed) {
  const Message& m = messages_[id];
  const int part = m.t.part;
  parts_[std::size_t(part)].held_acks[clock_count].push_back(id);
  if (!completed) return;
  Transfer whole;
  whole.part = part;
  whole.layer = m.t.layer;
  whole.count = plan_.parts[std::size_t(part)].numel;
  forward(m, lane, -1, parts_[std::size_t(part)].min_completed - 1, whole);
}

// A push ack goes to its worker, from the lane of its part (bucket links: the lane's thread).
void Simulation::release_ack(int id, int lane) {
  if (bucket_)
    send_from(lane_thread(lane), id);
  else
    arrive(id, now_ + cfg_.latency_s);
}

// The backup applied a forward: its acknowledgment goes back, one latency (no bytes to speak
// of, on the backup's own connection to the primary).
void Simulation::replica_applied(int id) {
  messages_[id].kind = MsgKind::kReplicaAck;
  schedule(now_ + cfg_.latency_s, EventType::kDeliver, id);
}

// The backup has the update: the primary acknowledges the pushes behind it.
void Simulation::replica_acked(int id) {
  const Message m = messages_[id];
  free_messages_.push_back(id);
  const int lane = lane_of(m.t);
  if (m.held >= 0) {
    release_ack(m.held, lane);
    return;
  }
  auto& held = parts_[std::size_t(m.t.part)].held_acks;
  const auto it = held.find(m.clock);
  if (it == held.end()) return;
  const std::vector<int> acks = std::move(it->second);
  held.erase(it);
  for (int ack : acks) release_ack(ack, lane);
}

}  // namespace psbed::predictor::sim
