// Fair links: the pairs sending on a link share it max-min fairly (TCP flows under kernel shaping).
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

void Simulation::send(std::size_t ci, int id) {
  Channel& c = channels_[ci];
  // Links unlimited at both ends: latency (and host copies) only. Link 2n and 2n+1 are node n's.
  if (!shaped(c.up_link / 2) && !shaped(c.down_link / 2)) {
    if (is_factors(messages_[id])) factor_departed(messages_[id]);
    arrive(id, now_ + cfg_.latency_s + wire_bytes(messages_[id]) * cfg_.transit_s_per_byte);
    return;
  }
  c.queue.push_back(id);
  if (c.queue.size() > 1) return;
  c.head_left = wire_bytes(messages_[id]);
  c.since = now_;
  c.rate = 0;
  c.active_index = int(active_.size());
  active_.push_back(int(ci));
  network_dirty_ = true;
}

void Simulation::channel_done(int ci) {
  Channel& c = channels_[ci];
  const int id = c.queue.front();
  c.queue.pop_front();
  if (is_factors(messages_[id])) factor_departed(messages_[id]);
  arrive(id, now_ + cfg_.latency_s + wire_bytes(messages_[id]) * cfg_.transit_s_per_byte);
  if (!c.queue.empty()) {
    c.head_left = wire_bytes(messages_[c.queue.front()]);
    c.since = now_;
    if (network_dirty_) {
      c.rate = 0;  // the coming reallocation reschedules it
      events_.clear_channel(ci);
    } else {
      events_.set_channel(ci, now_ + c.head_left / c.rate);
    }
    return;
  }
  events_.clear_channel(ci);
  // Idle: leave the active list (swap with the last).
  const int pos = c.active_index;
  active_[pos] = active_.back();
  channels_[active_[pos]].active_index = pos;
  active_.pop_back();
  c.active_index = -1;
  network_dirty_ = true;
}

// Max-min fair rates for the active pairs by progressive filling: repeatedly saturate the
// link with the smallest fair share and freeze the pairs crossing it.
void Simulation::reallocate() {
  network_dirty_ = false;
  // A node's link capacity is its own (a straggler's may differ); an unlimited one never limits.
  const auto cap = [this](int l) {
    const double bw = node_bw_[std::size_t(l / 2)];
    return bw > 0 ? bw : kInf;
  };
  // A channel's flows on link l: a group's members at a shard (SimConfig::groups), else one.
  const auto flows = [this](const Channel& c, int l) {
    return copies_at(messages_[c.queue.front()], l / 2);
  };
  touched_.clear();
  for (int ci : active_) {
    Channel& c = channels_[ci];
    c.head_left = std::max(0.0, c.head_left - c.rate * (now_ - c.since));
    c.since = now_;
    for (int l : {c.up_link, c.down_link}) {
      if (link_n_[l] == 0) link_cap_[l] = cap(l), touched_.push_back(l);
      link_n_[l] += flows(c, l);
    }
  }
  frozen_.assign(active_.size(), 0);
  std::size_t left = active_.size();
  while (left > 0) {
    int best = -1;
    double share = kInf;
    for (int l : touched_)
      if (link_n_[l] > 0 && link_cap_[l] / link_n_[l] < share)
        share = link_cap_[l] / link_n_[l], best = l;
    for (std::size_t k = 0; k < active_.size(); ++k) {
      if (frozen_[k]) continue;
      Channel& c = channels_[active_[k]];
      if (c.up_link != best && c.down_link != best) continue;
      frozen_[k] = 1, --left;
      for (int l : {c.up_link, c.down_link}) {
        const double n = flows(c, l);
        link_cap_[l] -= share * n, link_n_[l] -= n;
      }
      const double rate = std::max(share, 1e-9 * cap(best));
      if (rate != c.rate || c.head_left == 0) {
        c.rate = rate;
        events_.set_channel(active_[k], now_ + c.head_left / c.rate);
      }
    }
    link_n_[best] = 0;
  }
  for (int l : touched_) link_n_[l] = 0;
}

}  // namespace psbed::predictor::sim
