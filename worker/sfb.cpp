#include "worker/sfb.hpp"

#include <dnnl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "core/optimizer.hpp"

namespace psbed::worker {

std::string sfb_identity(const std::string& worker_name) { return "sfb:" + worker_name; }

namespace {

// Says when a message has left this worker's link. Under the link emulation it sits beneath
// the ShapedTransport, whose pacer hands a message on once its bytes have gone through the
// uplink; unshaped, the send itself is the departure (ZeroMQ queues it). Either way the
// scheduler's credit counts the factors while the link carries them, as it counts a push until
// its ack.
class Departures final : public ps::Transport {
 public:
  Departures(std::unique_ptr<ps::Transport> inner, std::function<void(const ps::Header&)> left)
      : inner_(std::move(inner)), left_(std::move(left)) {}
  void start(ps::ReceiveFn on_receive) override { inner_->start(std::move(on_receive)); }
  bool send(ps::Message msg) override {
    const ps::Header h = msg.header;
    if (!inner_->send(std::move(msg))) return false;
    left_(h);
    return true;
  }
  void check_send(const ps::Message& msg) const override { inner_->check_send(msg); }
  void stop() override { inner_->stop(); }
  std::string endpoint() const override { return inner_->endpoint(); }
  const ps::BadMessageCounter& bad_messages() const override { return inner_->bad_messages(); }

 private:
  std::unique_ptr<ps::Transport> inner_;
  std::function<void(const ps::Header&)> left_;
};

}  // namespace

FactorExchange::FactorExchange(const std::string& endpoint) : endpoint_(endpoint) {
  ps::ZmqOptions z;
  z.role = ps::ZmqOptions::Role::kServer;
  z.endpoint = endpoint;
  z.thread_name = "sfb-router";
  auto t = std::make_unique<ps::ZmqTransport>(z);
  router_zmq_ = t.get();
  router_ = std::move(t);
}

FactorExchange::~FactorExchange() { stop(); }

std::string FactorExchange::address() const { return router_->endpoint(); }

void FactorExchange::start(const ps::ClusterMap& map, int self, const CommPlan& plan,
                           std::shared_ptr<ps::LinkBuckets> link) {
  map_ = map;
  self_ = self;
  workers_ = int(map.workers.size());
  sfb_ = plan.sfb;
  const std::size_t layers = map.spec.layers.size();
  // A peer may run ahead of this worker's applied count by the staleness bound plus the step it
  // is in, from either side: bsp 2, ssp:K 2K + 2.
  window_ = 2 * (map.exp.mode.kind == Consistency::Kind::kSsp ? map.exp.mode.staleness + 1 : 1);
  each_ = map.exp.mode.kind == Consistency::Kind::kSsp;
  floats_.assign(layers, 0);
  pending_.assign(layers, {});
  applied_.assign(layers, 0);
  dead_.assign(std::size_t(workers_), false);
  velocity_w_.assign(layers, {}), velocity_b_.assign(layers, {});
  grad_w_.assign(layers, {}), grad_b_.assign(layers, {});
  from_.assign(layers, -1);
  for (std::size_t l = 0; l < layers; ++l)
    if (sfb_[l]) size_layer(int(l));
  for (const ps::NodeInfo& w : map.workers) identities_[sfb_identity(w.name)] = w.id;
  // Receiving under --comm ps too: a live --comm switch may add factor layers. Peers may send
  // as soon as they have the map: what arrives now is checked against it.
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
  }
  if (link && link->options.shaped())
    router_ = std::make_unique<ps::ShapedTransport>(std::move(router_), link);
  router_->start([this](ps::Message&& m) { receive(std::move(m)); });
  link_ = std::move(link);
  if (plan.any_sfb()) connect_peers(plan.mode);
}

// Connects to every peer's factor port: at the start, or at a live --comm switch's first layer
// of factors (a thread and a connection per peer are not spent on a run that never sends any).
void FactorExchange::connect_peers(CommMode mode) {
  const std::shared_ptr<ps::LinkBuckets>& link = link_;
  peers_.resize(std::size_t(workers_));
  peer_zmq_.assign(std::size_t(workers_), nullptr);
  for (const ps::NodeInfo& w : map_.workers) {
    if (w.id == self_) continue;
    if (w.address.empty())
      throw Error(w.name + " gave no peer address when it registered: --comm " +
                  std::string(to_string(mode)) + " needs every worker to take factors");
    ps::ZmqOptions z;
    z.role = ps::ZmqOptions::Role::kClient;
    z.endpoint = w.address;
    z.identity = sfb_identity(map_.workers[std::size_t(self_)].name);
    z.thread_name = "sfb-peer" + std::to_string(w.id);
    auto t = std::make_unique<ps::ZmqTransport>(z);
    peer_zmq_[std::size_t(w.id)] = t.get();
    std::unique_ptr<ps::Transport> p = std::make_unique<Departures>(
        std::move(t), [this, to = w.id](const ps::Header& h) { left(to, h); });
    if (link && link->options.shaped())
      p = std::make_unique<ps::ShapedTransport>(std::move(p), link);
    // Nothing comes back on these: the peer answers nothing, its factors come on its own.
    p->start([](ps::Message&&) {});
    peers_[std::size_t(w.id)] = std::move(p);
  }
}

void FactorExchange::stop() {
  for (ps::ZmqTransport* z : peer_zmq_)
    if (z) z->release_senders();
  for (auto& p : peers_)
    if (p) p->stop();
  if (router_) router_->stop();
}

void FactorExchange::size_layer(int layer) {
  const LayerSpec& s = map_.spec.layers[std::size_t(layer)];
  const auto l = std::size_t(layer);
  floats_[l] = factor_floats(s, map_.exp.batch);
  const std::size_t wn = std::size_t(map_.spec.tensors[s.tensors[0]].numel);
  const std::size_t bn = std::size_t(map_.spec.tensors[s.tensors[1]].numel);
  velocity_w_[l].assign(wn, 0.0f), grad_w_[l].assign(wn, 0.0f);
  velocity_b_[l].assign(bn, 0.0f), grad_b_[l].assign(bn, 0.0f);
}

void FactorExchange::expect(const CommPlan& plan, std::int64_t step) {
  if (plan.any_sfb() && !has_peers()) connect_peers(plan.mode);
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t l = 0; l < sfb_.size(); ++l) {
    if (sfb_[l] || !plan.sfb[l]) continue;
    size_layer(int(l));
    pending_[l].clear();
    applied_[l] = step;
    from_[l] = step;
  }
}

bool FactorExchange::has_peers() const {
  if (int(peers_.size()) != workers_) return false;
  for (int w = 0; w < workers_; ++w)
    if (w != self_ && !peers_[std::size_t(w)]) return false;
  return true;
}

void FactorExchange::switch_plan(const CommPlan& plan, std::int64_t step,
                                 std::map<int, std::vector<float>> momentum) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t l = 0; l < sfb_.size(); ++l) {
    if (sfb_[l] == plan.sfb[l]) continue;
    sfb_[l] = plan.sfb[l];
    from_[l] = -1;
    if (!sfb_[l]) {  // back to the shards: every step below `step` is applied
      pending_[l].clear();
      continue;
    }
    const LayerSpec& s = map_.spec.layers[l];
    for (int i = 0; i < 2; ++i) {
      auto it = momentum.find(s.tensors[std::size_t(i)]);
      std::vector<float>& v = i == 0 ? velocity_w_[l] : velocity_b_[l];
      if (it == momentum.end() || it->second.size() != v.size())
        throw Error("no momentum of " + map_.spec.tensors[s.tensors[std::size_t(i)]].name +
                    " to send " + s.name + " as factors from step " + std::to_string(step));
      v = std::move(it->second);
    }
    applied_[l] = step;
  }
}

const std::vector<float>& FactorExchange::momentum(int layer, int which) const {
  return which == 0 ? velocity_w_.at(std::size_t(layer)) : velocity_b_.at(std::size_t(layer));
}

std::int64_t FactorExchange::applied(int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return applied_.at(std::size_t(layer));
}

void FactorExchange::peer_dead(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= workers_) return;
  dead_[std::size_t(id)] = true;
  cv_.notify_all();
}

// Why `m` is refused ("" to keep it); *problem is the kind for the counter.
std::string FactorExchange::check(const ps::Message& m, int* problem) const {
  using ps::Problem;
  const ps::Header& h = m.header;
  auto bad = [&](Problem p, std::string why) {
    *problem = int(p);
    return why;
  };
  if (h.op != ps::Op::kFactors)
    return bad(Problem::kOp, std::string("a ") + ps::op_name(h.op) +
                                 " message on the factor port, expected Factors");
  const auto who = identities_.find(m.peer);
  if (who == identities_.end())
    return bad(Problem::kSender, "unknown peer '" + ps::peer_name(m.peer) +
                                     "', expected one of the cluster's workers");
  if (int(h.sender) != who->second || who->second == self_)
    return bad(Problem::kSender, "sender " + std::to_string(h.sender) + " on the connection of " +
                                     map_.workers[std::size_t(who->second)].name);
  const bool expected = h.key < from_.size() && from_[h.key] >= 0 &&
                        std::int64_t(h.clock) >= from_[h.key];  // a --comm switch agreed on
  if (h.key >= sfb_.size() || (!sfb_[h.key] && !expected))
    return bad(Problem::kKey, "layer " + std::to_string(h.key) +
                                  " is not exchanged as factors (expected one of the sfb layers)");
  const std::uint64_t want = std::uint64_t(floats_[h.key]) * 4;
  if (h.length != want || m.payload.size() != want)
    return bad(Problem::kPayloadSize,
               "factors of " + map_.spec.layers[h.key].name + " of " +
                   std::to_string(m.payload.size()) +
                   " bytes, expected batch x (in + out) x 4 = " + std::to_string(want));
  const std::int64_t step = std::int64_t(h.clock), applied = applied_[h.key];
  if (step < applied || step >= applied + window_)
    return bad(Problem::kRange, "factors of " + map_.spec.layers[h.key].name + " for step " +
                                    std::to_string(step) + ", expected steps " +
                                    std::to_string(applied) + ".." +
                                    std::to_string(applied + window_ - 1));
  const auto it = pending_[h.key].find(step);
  if (it != pending_[h.key].end() && it->second.arrived[h.sender])
    return bad(Problem::kRange, "a second copy of step " + std::to_string(step) + "'s factors of " +
                                    map_.spec.layers[h.key].name);
  return "";
}

void FactorExchange::receive(ps::Message&& m) {
  std::unique_lock<std::mutex> lock(mu_);
  int problem = 0;
  const std::string why = started_ ? check(m, &problem) : "factors before this worker started";
  if (!why.empty()) {
    lock.unlock();
    if (refused_.record(m.peer, ps::Problem(std::max(problem, 1))))
      spdlog::warn("refused factors from {}: {} (dropped; further ones are only counted)",
                   ps::peer_name(m.peer), why);
    return;
  }
  Step& s = step_locked(int(m.header.key), std::int64_t(m.header.clock));
  s.from[m.header.sender] = std::move(m.payload);
  s.arrived[m.header.sender] = true;
  ++s.count;
  if (progress_) progress_->moved();
  cv_.notify_all();
}

std::vector<policy::Transfer> FactorExchange::stage(int layer, std::int64_t step, Net& net) {
  const LayerSpec& l = map_.spec.layers[std::size_t(layer)];
  const std::int64_t k = map_.exp.batch, m = l.in.numel(), floats = floats_[std::size_t(layer)];
  auto buf = std::make_shared<std::vector<float>>(std::size_t(floats));
  net.read_factors(layer, buf->data(), buf->data() + k * m);
  const ps::Payload own = ps::Payload::share(std::shared_ptr<const std::vector<float>>(buf));
  {
    std::lock_guard<std::mutex> lock(mu_);
    Step& s = step_locked(layer, step);
    s.from[std::size_t(self_)] = own;
    s.arrived[std::size_t(self_)] = true;
    ++s.count;
  }
  std::vector<policy::Transfer> out;
  if (workers_ < 2) return out;
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    Outgoing& o = outgoing_[{layer, step}];
    o.factors = own;
    o.to_send = o.in_flight = workers_ - 1;
  }
  for (int i = 1; i < workers_; ++i)
    out.push_back({policy::Direction::kFactors, (self_ + i) % workers_, layer, 0, floats});
  return out;
}

void FactorExchange::send_to(const policy::Transfer& t, std::int64_t step,
                             std::function<void()> left) {
  ps::Message msg;
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    const auto it = outgoing_.find({t.layer, step});
    if (it == outgoing_.end() || t.part < 0 || t.part >= workers_ || t.part == self_)
      throw Error("no factors of layer " + std::to_string(t.layer) + " for step " +
                  std::to_string(step) + " staged for worker " + std::to_string(t.part));
    Outgoing& o = it->second;
    if (o.issued_us < 0) o.issued_us = now_us();
    o.left[t.part] = std::move(left);  // before the send: unshaped, it leaves inside it
    msg.payload = o.factors;
    if (--o.to_send == 0) o.factors = ps::Payload();  // the messages hold it now
  }
  msg.header.op = ps::Op::kFactors;
  msg.header.sender = std::uint32_t(self_);
  msg.header.key = std::uint32_t(t.layer);
  msg.header.clock = std::uint64_t(step);
  msg.header.priority = t.layer;
  msg.header.length = msg.payload.size();
  const std::uint64_t bytes = msg.payload.size();
  if (peers_[std::size_t(t.part)]->send(std::move(msg))) bytes_sent_ += bytes;
}

void FactorExchange::left(int to, const ps::Header& h) {
  std::function<void()> done;
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    const auto it = outgoing_.find({int(h.key), std::int64_t(h.clock)});
    if (it == outgoing_.end()) return;
    Outgoing& o = it->second;
    const auto cb = o.left.find(to);
    if (cb != o.left.end()) done = std::move(cb->second), o.left.erase(cb);
    if (--o.in_flight == 0) {
      if (trace_ && trace_->enabled())
        trace_->complete("factors:" + map_.spec.layers[h.key].name, "sfb", o.issued_us,
                         std::int64_t(h.clock), std::int64_t(h.length) * (workers_ - 1), -1, -1);
      outgoing_.erase(it);
    }
  }
  if (done) done();
}

std::vector<std::int64_t> FactorExchange::with_factor_sends(
    std::vector<std::int64_t> per_layer) const {
  for (std::size_t l = 0; l < per_layer.size() && l < sfb_.size(); ++l)
    if (sfb_[l]) per_layer[l] += floats_[l] * (workers_ - 1);
  return per_layer;
}

FactorExchange::Step& FactorExchange::step_locked(int layer, std::int64_t step) {
  Step& s = pending_[std::size_t(layer)][step];
  if (s.from.empty())
    s.from.resize(std::size_t(workers_)), s.arrived.assign(std::size_t(workers_), false);
  return s;
}

bool FactorExchange::complete_locked(int layer, std::int64_t step) const {
  const auto& p = pending_[std::size_t(layer)];
  const auto it = p.find(step);
  return it != p.end() && it->second.count == workers_;
}

std::string FactorExchange::missing_locked(int layer, std::int64_t step) const {
  const auto& p = pending_[std::size_t(layer)];
  const auto it = p.find(step);
  for (int w = 0; w < workers_; ++w)
    if (dead_[std::size_t(w)] && (it == p.end() || !it->second.arrived[std::size_t(w)]))
      return map_.workers[std::size_t(w)].name;
  return "";
}

// Waits, `lock` held, until ready() or the run ends: a dead peer whose factors `step` lacks, or
// abort_'s reason.
template <class Ready>
void FactorExchange::wait_locked(std::unique_lock<std::mutex>& lock, int layer, std::int64_t step,
                                 Ready ready) {
  const std::string& name = map_.spec.layers[std::size_t(layer)].name;
  std::optional<Progress::Waiting> waiting;
  if (progress_) {
    lock.unlock();
    waiting.emplace(*progress_, "the factors of " + name + " for step " + std::to_string(step) +
                                    " from its peers");
    lock.lock();
  }
  while (!ready()) {
    if (const std::string dead = missing_locked(layer, step); !dead.empty())
      throw Error(dead + " died: " + map_.exp.mode.str() + " cannot go on without its factors of " +
                  name + " for step " + std::to_string(step) + " (--comm " + map_.exp.comm + ")");
    if (!abort_) {
      cv_.wait(lock);
    } else if (cv_.wait_for(lock, std::chrono::milliseconds(250)) == std::cv_status::timeout) {
      lock.unlock();
      const std::string why = abort_();
      lock.lock();
      if (!why.empty()) throw Error(why + " while waiting for the factors of " + name);
    }
  }
}

void FactorExchange::apply_until(int layer, std::int64_t steps, Net& net) {
  if (each_) return apply_each(layer, steps, net);
  for (;;) {
    std::vector<ps::Payload> from;
    std::int64_t step = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      step = applied_[std::size_t(layer)];
      if (!complete_locked(layer, step)) {
        if (step >= steps) return;  // what must be applied is; the rest is not here yet
        wait_locked(lock, layer, step, [&] { return complete_locked(layer, step); });
      }
      auto it = pending_[std::size_t(layer)].find(step);
      from = std::move(it->second.from);
      pending_[std::size_t(layer)].erase(it);
    }
    rebuild_and_apply(layer, step, from, net, 0, workers_, 1.0f / float(workers_));
    std::lock_guard<std::mutex> lock(mu_);
    applied_[std::size_t(layer)] = step + 1;
  }
}

// ssp, as an ssp shard: each worker's gradient is applied alone as it arrives (here: whenever
// the compute thread looks), and the forward of step s waits until every step below `steps` is.
void FactorExchange::apply_each(int layer, std::int64_t steps, Net& net) {
  auto& pending = pending_[std::size_t(layer)];
  for (;;) {
    std::vector<std::tuple<std::int64_t, int, ps::Payload>> arrived_now;  // (step, worker, factors)
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto arrived = [&] {
        for (auto& [step, st] : pending)
          for (int w = 0; w < workers_; ++w)
            if (!st.from[std::size_t(w)].empty()) return true;
        return false;
      };
      const std::int64_t step = applied_[std::size_t(layer)];
      if (!arrived()) {
        if (step >= steps) return;
        wait_locked(lock, layer, step, arrived);
      }
      for (auto& [s, st] : pending)
        for (int w = 0; w < workers_; ++w)
          if (!st.from[std::size_t(w)].empty()) {
            arrived_now.emplace_back(s, w, std::move(st.from[std::size_t(w)]));
            st.from[std::size_t(w)] = ps::Payload();
          }
    }
    for (auto& [s, w, payload] : arrived_now) {
      std::vector<ps::Payload> one(static_cast<std::size_t>(workers_));
      one[std::size_t(w)] = payload;
      rebuild_and_apply(layer, s, one, net, w, w + 1, 1.0f);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [s, w, payload] : arrived_now) ++pending[s].applied;
    while (!pending.empty() && pending.begin()->first == applied_[std::size_t(layer)] &&
           pending.begin()->second.applied == workers_) {
      pending.erase(pending.begin());
      ++applied_[std::size_t(layer)];
    }
  }
}

// The summed gradient of every worker's factors, in worker order (the same floats in the same
// order on every replica), then the optimizer's step as a shard would take it.
void FactorExchange::rebuild_and_apply(int layer, std::int64_t step,
                                       const std::vector<ps::Payload>& from, Net& net, int first,
                                       int last, float scale) {
  const double t0 = now_us();
  const LayerSpec& l = map_.spec.layers[std::size_t(layer)];
  const std::int64_t k = map_.exp.batch, m = l.in.numel(), n = l.out.numel();
  std::vector<float>& gw = grad_w_[std::size_t(layer)];
  std::vector<float>& gb = grad_b_[std::size_t(layer)];
  std::fill(gb.begin(), gb.end(), 0.0f);
  for (int w = first; w < last; ++w) {
    const float* x = reinterpret_cast<const float*>(from[std::size_t(w)].data());
    const float* dy = x + k * m;
    // gw (n x m) = dy^T (n x k) . x (k x m), accumulated over the workers.
    const dnnl_status_t st =
        dnnl_sgemm('T', 'N', n, m, k, 1.0f, dy, n, x, m, w == first ? 0.0f : 1.0f, gw.data(), m);
    if (st != dnnl_success)
      throw Error("rebuilding the gradient of " + l.name + " from factors failed (oneDNN sgemm)");
    for (std::int64_t r = 0; r < k; ++r)
      for (std::int64_t j = 0; j < n; ++j) gb[std::size_t(j)] += dy[r * n + j];
  }
  SgdOptions o = map_.exp.sgd;
  o.lr = scheduled_lr(map_.exp.lr_schedule, o.lr, step, map_.exp.steps);
  const int wt = l.tensors[0], bt = l.tensors[1];
  sgd_apply(o, net.param(wt), gw.data(), velocity_w_[std::size_t(layer)].data(), gw.size(), scale);
  sgd_apply(o, net.param(bt), gb.data(), velocity_b_[std::size_t(layer)].data(), gb.size(), scale);
  net.params_updated(wt);
  net.params_updated(bt);
  if (trace_ && trace_->enabled()) trace_->complete("rebuild:" + l.name, "compute", t0, step);
}

}  // namespace psbed::worker
