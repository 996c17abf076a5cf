// The receiving threads, and the host's cores the messages' CPU and real compute share.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

// An arrival's delivery time with its chance share of SimConfig::arrival_jitter_s, never before
// the previous message of the same connection (sender, receiver): one connection keeps its
// order, different senders' messages that come due together go in any order. Inlined into
// arrive, its one caller: it runs for every message.
[[gnu::always_inline]] inline double Simulation::jittered(const Message& m, double t) {
  if (cfg_.arrival_jitter_s <= 0) return t;
  double& last = connection_last_[connection_of(m)];
  last = std::max(last, t + cfg_.arrival_jitter_s * jitter_rng_.uniform());
  return last;
}

// A message reached its receiver at `at` (latency included). Each node's receiving thread
// handles one message at a time (receive_cost: a transfer's share on its data message), so on
// a busy node (a shard serving many workers) messages queue for software as well as for the
// link.
void Simulation::arrive(int id, double at) {
  const Message& m = messages_[id];
  const int node = receiver_node(m);
  if (!bucket_ && cfg_.message_cost_s <= 0 && cores_.empty()) {  // now + latency: one FIFO
    events_.push(jittered(m, at + cfg_.message_latency_s), EventType::kDeliver, id);
    return;
  }
  // A push-pull's push and its answer: one data message each; its ack, where the answer waits,
  // one header message (receive_cost).
  ReceiveCost cost = m.answer_later && m.kind == MsgKind::kPushAck
                         ? header_message_cost(cfg_)
                         : receive_cost(cfg_, carries_data(m), m.t.bytes(),
                                        cfg_.push_pull && m.t.dir == Direction::kPush);
  const double copies = copies_at(m, node);  // a group's members, at a shard
  cost.thread_s *= copies, cost.cpu_s *= copies;
  // A worker's factors come in on their own thread (the factor port's), not the shards'.
  const int rx = is_factors(m) ? W_ + S_ + m.shard : node;
  double& free = rx_free_[std::size_t(rx)];
  double start = std::max(free, at);
  // The receiving thread runs when a core is free.
  if (!cores_.empty()) start = book_core(start, cost.cpu_s), booked_cpu_s_ += cost.cpu_s;
  free = start + cost.thread_s;
  events_.push_stream(W_ + S_ + rx, jittered(m, free + cfg_.message_latency_s), EventType::kDeliver,
                      id);
}

// Books `cpu` seconds of a message's work on the core that can start it first, at or after
// `from`; returns when.
double Simulation::book_core(double from, double cpu) {
  double best = kInf;
  std::size_t best_core = 0;
  for (std::size_t k = 0; k < cores_.size(); ++k) {
    CoreSchedule& core = cores_[k];
    core.prune(now_);
    double t = from;
    for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
      if (t + cpu <= b->from) break;
      t = std::max(t, b->to);
    }
    if (t < best) best = t, best_core = k;
  }
  if (cpu > 0) cores_[best_core].insert({best, best + cpu});
  return best;
}

// Runs `cpu` seconds of a worker's real compute from `from` on the core that finishes it
// first. It fills that core's gaps between the work already booked there (messages, other
// workers' compute): a time-shared thread is held up by what runs in between rather than
// waiting for a gap as long as itself. Returns when it is done.
double Simulation::run_on_core(double from, double cpu) {
  double best = kInf;
  std::size_t best_core = 0;
  for (std::size_t k = 0; k < cores_.size(); ++k) {
    CoreSchedule& core = cores_[k];
    core.prune(now_);
    double t = from, left = cpu;
    for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
      if (b->from - t >= left) break;
      if (b->from > t) left -= b->from - t;
      t = std::max(t, b->to);
    }
    if (t + left < best) best = t + left, best_core = k;
  }
  // Book the pieces it runs in: every gap up to its end.
  pieces_.clear();
  double t = from;
  const CoreSchedule& core = cores_[best_core];
  for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
    if (b->from >= best) break;
    if (b->from > t) pieces_.push_back({t, b->from});
    t = std::max(t, b->to);
  }
  if (t < best) pieces_.push_back({t, best});
  for (const CoreBooking& b : pieces_) cores_[best_core].insert(b);
  return best;
}

// A reply or an acknowledgment taken by the worker's receiving thread. Its id is free again
// before the worker sends more: transfer_done reads the message before it asks the policy for
// more, which may reuse the id.
void Simulation::finish(int id) {
  free_messages_.push_back(id);
  transfer_done(messages_[id]);
}

}  // namespace psbed::predictor::sim
