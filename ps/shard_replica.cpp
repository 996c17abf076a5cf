// A shard's side of --replicas 2 (chain replication as in Li et al., OSDI 2014): the primary
// forwards every push it takes to the next shard and acknowledges it once that shard has it;
// in bsp it also says when it applies a clock, and the backup applies the sum it accumulated
// from the same pushes (exact, so the same floats) then, not on its own. After a fail-over the
// backup serves the copy and tells a push resent by a worker (never acknowledged, perhaps already
// forwarded) from a new one.
//
// A bsp push's ack waits for the backup's answer to that push, not for its clock to be applied:
// a worker whose credit (bytescheduler, prophet) waits on acks would otherwise wait for pushes
// of other workers that wait, in turn, for their own credit.
#include <spdlog/spdlog.h>

#include "ps/shard.hpp"

namespace psbed::ps {
namespace {

// What a lane's Store call applied (Store::on_applied runs inside it, holding the part): the bsp
// clocks, announced to the backup once the call returns.
thread_local std::vector<Message> t_forwards;

}  // namespace

bool Shard::replicating() const { return t_lane_ && t_lane_->forward && !backup_lost_; }

void Shard::connect_backup(std::function<BackupLink(const std::string&)> open) {
  open_backup_ = std::move(open);
  open_backup("");
}

void Shard::open_backup(const std::string& address) {
  BackupLink link = open_backup_(address);
  release_backup_ = std::move(link.release);
  // The backup's answers are acks of forwards: to the lane of their part, under a peer id no
  // worker can have.
  link.transport->start([this](Message&& m) {
    if (m.header.op != Op::kPushAck) {
      spdlog::warn("the backup shard answered a forward with {}: dropped", op_name(m.header.op));
      return;
    }
    m.peer = kBackupPeer;
    Lane& l = *lanes_[lane_of(m.header.key, m.header.part)];
    std::lock_guard<std::mutex> lock(l.mu);
    l.queue.push_back(std::move(m));
    l.cv.notify_one();
  });
  std::atomic_store(&backup_, std::move(link.transport));
}

void Shard::start_replica() {
  if (map_.exp.replicas < 2 || map_.servers.size() < 2) return;
  const int source = map_.replica_source(shard_);
  replica_ = std::make_unique<Store>(map_, source);
  spdlog::info("shard {} backs up {}'s {} parts ({:.2f} MiB); {} backs up its own", shard_,
               map_.servers.at(std::size_t(source)).name, replica_->parts_owned(),
               replica_->bytes_owned() / 1048576.0,
               map_.servers.at(std::size_t(map_.backup_of(shard_))).name);
  // A shard announces the clocks of its own parts, and of parts it took over once a backup of
  // them is back.
  const auto forward = [this](bool own) {
    return [this, own](const PartState& s, std::uint64_t clock, int contributors) {
      if (!replicating() || (!own && !copy_back_)) return;
      Message f;
      f.header.op = Op::kReplicate;
      f.header.flags = kClockApplied;
      f.header.sender = std::uint32_t(shard_);
      f.header.key = std::uint32_t(s.part.key);
      f.header.part = std::uint32_t(s.part.part);
      f.header.clock = clock;
      f.header.priority = contributors;
      t_forwards.push_back(std::move(f));
    };
  };
  store_->on_applied = forward(true);
  replica_->on_applied = forward(false);
}

void Shard::send_forwards() {
  if (t_forwards.empty()) return;
  const std::shared_ptr<Transport> backup = std::atomic_load(&backup_);
  for (auto& f : t_forwards) {
    forwarded_ += 1;
    if (!backup->send(std::move(f)) && !backup_lost_)
      spdlog::warn("a forward to the backup shard was dropped: its connection is stopped");
  }
  t_forwards.clear();
}

// After a push was taken: its ack goes now, or once the backup has the push too.
void Shard::push_done(Lane& lane, Store& store, const Message& push, Message&& ack) {
  const Header& h = push.header;
  // Every part's: a backup that rejoins gets them with the part's state.
  if (map_.exp.replicas > 1) lane.last_seq[{int(h.key), int(h.part), int(h.sender)}] = h.sequence;
  if (!replicating() || (&store != store_.get() && !copy_back_)) {
    transport_.send(std::move(ack));
    send_forwards();  // none unless the backup was lost under this call
    return;
  }
  Message f;
  f.header = h;
  f.header.op = Op::kReplicate;
  f.header.flags = kOnePush;
  f.header.sender = std::uint32_t(shard_);
  f.header.priority = std::int32_t(h.sender);
  f.payload = push.payload;  // the worker's bytes, shared: no copy
  // Before the clock this push completed, if it did: the backup applies what it has by then.
  t_forwards.insert(t_forwards.begin(), std::move(f));
  lane.held_acks[{int(h.sender), h.sequence}] = std::move(ack);
  send_forwards();
}

// A push to a part this shard took over that it already applied (from the dead shard's forward,
// or before the worker heard of the fail-over): acknowledged, not applied again.
bool Shard::replayed_push(Lane& lane, Store& store, const Message& push) {
  // Parts it took over; after a rejoin, its own parts too (they were a copy).
  if (&store != replica_.get() && !rejoined_) return false;
  const Header& h = push.header;
  // Every push the dead shard took came here, in the order it took them.
  const auto it = lane.last_seq.find({int(h.key), int(h.part), int(h.sender)});
  if (it == lane.last_seq.end() || h.sequence > it->second) return false;
  ++replayed_;
  transport_.send(ack_of(push));
  return true;
}

// On the backup: the previous shard's update, applied to the copy and acknowledged.
void Shard::replicate(Lane& lane, Message&& m) {
  const Header& h = m.header;
  const int source = map_.servers.size() > 1 ? map_.replica_source(shard_) : -1;
  std::string why;
  if (!replica_)
    why = "this shard backs up no other (the run has --replicas 1)";
  else if (int(h.sender) != source || (!map_.servers[std::size_t(source)].link_id.empty() &&
                                       m.peer != map_.servers[std::size_t(source)].link_id))
    why = "it does not come from " + map_.servers[std::size_t(source)].name +
          ", the shard backed up here";
  else if (!replica_->owns(int(h.key), int(h.part)) &&
           !(rejoined_ && store_->owns(int(h.key), int(h.part))))
    why = "part " + std::to_string(h.part) + " of key " + std::to_string(h.key) +
          " is not backed up here";
  else if (h.flags == kOnePush && (h.priority < 0 || h.priority >= int(map_.workers.size())))
    why = "worker " + std::to_string(h.priority) + " is not in the cluster";
  else if (h.flags != kOnePush && h.flags != kClockApplied && h.flags != kPartState)
    why = "flags " + std::to_string(h.flags) + ", expected 0, 1 or 2";
  else if (h.flags == kClockApplied && (h.length != 0 || h.priority < 1))
    why = "a clock applied carries no bytes and at least one worker";
  else if (h.offset % 4 || h.length % 4 || m.payload.size() != h.length)
    why = "its bytes are not whole floats of the length it gives";
  if (!why.empty()) {
    if (bad_.record(m.peer, Problem::kSender))
      spdlog::warn("bad Replicate message from {}: {} (dropped)", peer_name(m.peer), why);
    return;
  }
  // Taken over: the dead shard's late forwards change nothing (its pushes are resent).
  Store* copy = copy_of(h.key, h.part);
  if (!copy) return;
  if (h.flags == kPartState) return install(lane, m);
  std::vector<float> aligned;
  const float* grad = floats_of(m, aligned);
  // A rejoined shard applies a part's forwards once it has the part's state they follow.
  const bool stale = rejoined_ && !lane.installed.count({int(h.key), int(h.part)});
  const Status applied =
      stale ? Status::success()
      : h.flags == kOnePush
          ? copy->push(h.priority, h.clock, int(h.key), int(h.part), h.offset, grad, h.length, true)
          : copy->apply_pending(int(h.key), int(h.part), h.clock, h.priority);
  if (!applied.ok()) {
    if (bad_.record(m.peer, Problem::kRange))
      spdlog::error("a forward from {} was not applied to the copy: {}", peer_name(m.peer),
                    applied.message());
  } else if (!stale) {
    ++replicated_;
    if (h.flags == kOnePush) lane.last_seq[{int(h.key), int(h.part), h.priority}] = h.sequence;
  }
  if (h.flags == kClockApplied) return;  // nothing waits on it
  // Even when refused: the primary's workers must not wait forever on it.
  transport_.send(ack_of(m));
}

// On the primary: the backup has the push; the worker's ack goes.
void Shard::backup_acked(Lane& lane, const Message& m) {
  const auto it = lane.held_acks.find({m.header.priority, m.header.sequence});
  if (it == lane.held_acks.end()) return;
  transport_.send(std::move(it->second));
  lane.held_acks.erase(it);
}

// The backup is gone: what it would have acknowledged is acknowledged now (one copy is left).
void Shard::release_held_acks(Lane& lane) {
  for (auto& [_, ack] : lane.held_acks) transport_.send(std::move(ack));
  lane.held_acks.clear();
}

void Shard::server_dead(int server) {
  if (map_.exp.replicas < 2 || map_.servers.size() < 2) return;
  std::lock_guard<std::mutex> failover(failover_mu_);
  if (server == map_.replica_source(shard_) && replica_ && !promoted_) {
    own_serving_ = true;  // a shard that rejoined: its own parts were a copy until now
    promoted_ = true;
    spdlog::warn("{} is dead: shard {} serves its {} parts from its copy",
                 map_.servers.at(std::size_t(server)).name, shard_, replica_->parts_owned());
    // bsp clocks the copy holds whole are applied by the lanes now, as the dead shard would have.
    for (auto& l : lanes_) {
      std::lock_guard<std::mutex> lock(l->mu);
      l->drain_copy = true;
      l->cv.notify_one();
    }
  }
  if (server == map_.backup_of(shard_) && !backup_lost_) {
    backup_lost_ = true;
    spdlog::warn("{}, the backup of shard {}, is dead: its parts have one copy from now on",
                 map_.servers.at(std::size_t(server)).name, shard_);
    if (release_backup_) release_backup_();  // a lane waiting for room towards it
    for (auto& l : lanes_) {
      std::lock_guard<std::mutex> lock(l->mu);
      l->backup_lost = true;
      l->cv.notify_one();
    }
  }
}

}  // namespace psbed::ps
