// A dead backup shard's process back (--replicas 2, 2 shards): the primary opens a new
// connection to it, and each apply lane sends it the whole state of every part the lane serves,
// then forwards that part's updates as before. A part's state and its later forwards leave from
// the same lane over the same connection, so the backup applies them in order, and training
// never pauses. The shard that rejoined serves nothing: it holds copies until its primary dies.
#include <spdlog/spdlog.h>

#include "ps/part_snapshot.hpp"
#include "ps/shard.hpp"

namespace psbed::ps {

Store* Shard::copy_of(std::uint32_t key, std::uint32_t part) const {
  if (replica_ && !promoted_ && replica_->owns(int(key), int(part))) return replica_.get();
  if (rejoined_ && !own_serving_ && store_ && store_->owns(int(key), int(part)))
    return store_.get();
  return nullptr;
}

void Shard::backup_back(int server, const std::string& address) {
  if (map_.exp.replicas < 2 || map_.servers.size() != 2 || server != map_.backup_of(shard_) ||
      !open_backup_ || !started_) {
    spdlog::warn("told that shard {} is back, which is not this shard's backup: ignored", server);
    return;
  }
  std::lock_guard<std::mutex> failover(failover_mu_);
  if (!backup_lost_) {
    spdlog::warn("told that {} is back, which never left: ignored",
                 map_.servers.at(std::size_t(server)).name);
    return;
  }
  open_backup(address);  // the old connection was released when the backup died
  copy_back_ = promoted_.load();
  backup_lost_ = false;
  spdlog::warn("{} is back: shard {} sends it every part it serves, and forwards to it again",
               map_.servers.at(std::size_t(server)).name, shard_);
  for (auto& l : lanes_) {
    std::lock_guard<std::mutex> lock(l->mu);
    l->resync = true;
    l->cv.notify_one();
  }
}

// After each batch: a lost backup's held acks go; a backup that is back gets the parts.
void Shard::backup_events(Lane& lane, int index, bool resync) {
  if (backup_lost_) {
    lane.forward = false;
    release_held_acks(lane);
    return;
  }
  if (resync) {
    send_parts(lane, index);
    lane.forward = true;
  }
}

void Shard::send_parts(Lane& lane, int index) {
  const std::shared_ptr<Transport> backup = std::atomic_load(&backup_);
  if (!backup) return;
  for (Store* store :
       {own_serving_ ? store_.get() : nullptr, promoted_ ? replica_.get() : nullptr}) {
    if (!store) continue;
    for (const auto& [key, part] : store->parts()) {
      if (lane_of(std::uint32_t(key), std::uint32_t(part)) != index) continue;
      std::map<int, std::uint64_t> seqs;
      for (int w = 0; w < int(map_.workers.size()); ++w)
        if (const auto it = lane.last_seq.find({key, part, w}); it != lane.last_seq.end())
          seqs[w] = it->second;
      // This lane alone changes the part: it reads it whole between two updates.
      const PartState& s = store->state(key, part);
      Message m;
      m.header.op = Op::kReplicate;
      m.header.flags = kPartState;
      m.header.sender = std::uint32_t(shard_);
      m.header.key = std::uint32_t(key);
      m.header.part = std::uint32_t(part);
      m.header.clock = s.applied_clocks;
      m.payload = encode_part(s, seqs);
      m.header.length = m.payload.size();
      if (!backup->send(std::move(m)))
        spdlog::warn("the state of a part was not sent to the backup: its connection is stopped");
    }
  }
}

// On the shard that rejoined: a part's state from the primary, in place of its copy's.
void Shard::install(Lane& lane, const Message& m) {
  const Header& h = m.header;
  Store* copy = copy_of(h.key, h.part);
  std::map<int, std::uint64_t> seqs;
  const Status st = copy ? install_part(*copy, int(h.key), int(h.part), m.payload, seqs)
                         : Status::error("this shard serves the part");
  if (!st.ok()) {
    if (bad_.record(m.peer, Problem::kRange))
      spdlog::error("the state of part {} of key {} from {} was not installed: {}", h.part, h.key,
                    peer_name(m.peer), st.message());
    return;
  }
  for (const auto& [w, seq] : seqs) lane.last_seq[{int(h.key), int(h.part), w}] = seq;
  if (!lane.installed.insert({int(h.key), int(h.part)}).second) return;
  if (++installed_ == to_install_)
    spdlog::info("shard {} holds the state of all {} parts: a copy of every part again", shard_,
                 to_install_);
}

}  // namespace psbed::ps
