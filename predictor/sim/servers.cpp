// The server shards: apply lanes, consistency (async, bsp, ssp:K), and the messages a node takes
// in.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

// Answers a pull (bucket links: from the lane thread that took it).
void Simulation::reply(int request_id, int lane) {
  Message& m = messages_[request_id];
  m.kind = MsgKind::kPullReply;
  if (bucket_)
    send_from(lane_thread(lane), request_id);
  else
    send(pull_channel(m.worker, m.shard), request_id);
}

void Simulation::answer_pull(int request_id, int lane) {
  const Message& m = messages_[request_id];
  PartState& p = parts_[m.t.part];
  if (pull_ready(p, m.clock))
    reply(request_id, lane);
  else
    p.waiting.push_back(request_id);
}

// A shard's apply lane takes its messages in order: a push is applied, acknowledged, and may
// release waiting pulls; a pull (bucket links) is answered or parked. With bucket links the
// lane waits in a send while the shard's send buffer is full, as the live lane thread does.
void Simulation::start_lane(int li) {
  Lane& lane = lanes_[li];
  while (!lane.busy && !lane.queue.empty()) {
    if (bucket_ && threads_[lane_thread(li)].blocked) return;
    const int id = lane.queue.front();
    const Message& m = messages_[id];
    if (m.kind == MsgKind::kPushData || m.kind == MsgKind::kReplicate) {
      lane.busy = true;
      lane_started_[li] = now_;
      // A group's push is its members' pushes, applied one after the other.
      const double cost = (profile_.apply_overhead_us * 1e-6 +
                           profile_.apply_ns_per_byte * 1e-9 * double(m.t.bytes())) *
                          double(copies_[std::size_t(m.worker)]);
      schedule(now_ + cost, EventType::kApplyDone, li);
      return;
    }
    lane.queue.pop_front();
    answer_pull(id, li);
  }
}

void Simulation::apply_done(int lane_index) {
  Lane& lane = lanes_[lane_index];
  const int id = lane.queue.front();
  lane.queue.pop_front();
  Message& m = messages_[id];
  PartState& p = parts_[m.t.part];
  const bool copy = m.kind == MsgKind::kReplicate;
  if (!server_traces_.empty()) {
    const Part& part = plan_.parts[m.t.part];
    TraceEvent e;
    e.name = std::string(copy ? "replicate:" : "apply:") + spec_.tensors[part.key].name + "#" +
             std::to_string(part.part);
    e.lane = "apply", e.ts_us = lane_started_[lane_index] * 1e6,
    e.dur_us = (now_ - lane_started_[lane_index]) * 1e6;
    e.step = m.clock, e.bytes = m.t.bytes(), e.key = part.key, e.part = part.part,
    e.priority = m.t.layer;
    e.has_priority = true;
    server_traces_[std::size_t(lane_index) * S_ / lanes_.size()]->record(std::move(e));
  }
  if (copy) {  // on the backup: its copy has the update
    replica_applied(id);
    lane.busy = false;
    start_lane(lane_index);
    return;
  }
  bool released = false;
  p.got[m.worker] += m.t.bytes();
  if (p.got[m.worker] >= p.bytes) {
    p.got[m.worker] = 0;
    released = complete_clock(p, m.worker);
  }
  // The acknowledgment goes first, then the pulls this push released (as the live shard); with
  // a backup it waits for the backup to have the push. A push-pull is answered with its floats
  // of the updated part instead, from the lane as the live shard's, when a pull of the next
  // clock would be (async; bsp's last push of a clock); else it is acknowledged and waits.
  m.kind = MsgKind::kPushAck;
  if (cfg_.push_pull && cfg_.mode.kind != Consistency::Kind::kAsync) {
    Message ack = m;  // new_message may move messages_: `m` is not used after it
    ack.answer_later = m.answer_later = true;
    const bool ready = pull_ready(p, m.clock + 1);
    if (!ready) p.waiting.push_back(id);
    release_ack(new_message(ack), lane_index);
    if (ready) reply(id, lane_index);
  } else if (cfg_.push_pull)
    reply(id, lane_index);
  else if (!replicating())
    release_ack(id, lane_index);
  else
    forward(m, lane_index, id, m.clock, m.t);
  if (released) {
    std::vector<int> still;
    for (int w : p.waiting)
      if (pull_ready(p, messages_[w].clock + (messages_[w].answer_later ? 1 : 0)))
        reply(w, lane_index);
      else
        still.push_back(w);
    p.waiting.swap(still);
  }
  lane.busy = false;
  start_lane(lane_index);
}

// A worker's whole part for its current clock arrived. True if the slowest worker's clock
// moved, which may release waiting pulls.
bool Simulation::complete_clock(PartState& p, int worker) {
  const bool was_min = p.completed[worker] == p.min_completed;
  ++p.completed[worker];
  if (!was_min || --p.at_min > 0) return false;
  p.min_completed = *std::min_element(p.completed.begin(), p.completed.end());
  p.at_min = int(std::count(p.completed.begin(), p.completed.end(), p.min_completed));
  return !p.waiting.empty();
}

void Simulation::deliver(int id) {
  Message& m = messages_[id];
  switch (m.kind) {
    case MsgKind::kPullRequest:
      if (bucket_) {
        // As the live shard: a pull whose part is ready and not being applied right now is
        // answered on arrival by the shard's reply thread, in arrival order; otherwise the
        // part's lane takes it in turn. An apply that began within the arrival jitter (a tie
        // with this pull, or the same instant) does not count: the receiving thread answers
        // the pull before the lane thread, woken for the push, takes the part's lock.
        const int lane = lane_of(m.t);
        const Lane& l = lanes_[lane];
        const bool applying = l.busy && messages_[l.queue.front()].t.part == m.t.part &&
                              lane_started_[lane] + cfg_.arrival_jitter_s < now_;
        if (!applying && pull_ready(parts_[m.t.part], m.clock)) {
          m.kind = MsgKind::kPullReply;
          send_from(reply_thread(m.shard), id);
          break;
        }
        lanes_[lane].queue.push_back(id);
        start_lane(lane);
      } else {
        answer_pull(id, lane_of(m.t));
      }
      break;
    case MsgKind::kPushData: {
      const int lane = lane_of(m.t);
      lanes_[lane].queue.push_back(id);
      start_lane(lane);
      break;
    }
    case MsgKind::kFactors:
      factors_arrived(id);
      break;
    case MsgKind::kReplicate: {
      const int lane = backup_lane(m.t.part);
      lanes_[lane].queue.push_back(id);
      start_lane(lane);
      break;
    }
    case MsgKind::kReplicaAck:
      replica_acked(id);
      break;
    case MsgKind::kPullReply:
    case MsgKind::kPushAck: {
      Worker& w = workers_[m.worker];
      if (bucket_ && (threads_[W_ + m.worker].blocked || !w.held.empty())) {
        w.held.push_back(id);  // the receiving thread still waits in a send
        break;
      }
      finish(id);
      break;
    }
  }
}

}  // namespace psbed::predictor::sim
