// Replicated shards (SimConfig::replicas, as ps/shard_replica.cpp): shard s's parts have a copy
// on shard (s + 1) mod S. After taking a push the primary forwards its bytes from its own link to
// the backup's (every mode; in bsp the backup adds it to the clock's sum, which costs about what
// an apply does, and applies the sum on the primary's header-only word, not modelled), the backup
// takes it on the part's lane there, and its acknowledgment, a small message, comes back one
// latency later; only then does the primary acknowledge the push. Pull answers are not held.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

// The lane of `part`'s copy on its backup: the same hash of (key, part) over the backup's lanes.
int Simulation::backup_lane(int part) const {
  const int lanes = int(lanes_.size()) / S_;
  const int shard = plan_.parts[std::size_t(part)].shard;
  return backup_of(shard) * lanes + (part_lane_[std::size_t(part)] - shard * lanes);
}

// The primary's lane sends the push to the backup; `held` is the push ack it waits for.
void Simulation::forward(const Message& m, int lane, int held, std::int64_t clock,
                         const Transfer& t) {
  const int worker = m.worker, shard = m.shard;  // m may move in new_message
  const int id = new_message({MsgKind::kReplicate, worker, shard, t, clock, now_, held});
  if (bucket_)
    send_from(lane_thread(lane), id);
  else
    send(replica_channel(shard), id);
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

// The backup has the push: the primary acknowledges it.
void Simulation::replica_acked(int id) {
  const Message m = messages_[id];
  free_messages_.push_back(id);
  release_ack(m.held, lane_of(m.t));
}

}  // namespace psbed::predictor::sim
