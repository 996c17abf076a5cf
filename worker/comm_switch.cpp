#include "worker/comm_switch.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "core/error.hpp"

namespace psbed::worker {

using json = nlohmann::json;

json comm_json(const CommPlan& plan, const ModelSpec& spec) {
  json layers = json::array();
  for (const LayerComm& c : plan.layers) {
    layers.push_back({{"layer", spec.layers[std::size_t(c.layer)].name},
                      {"route", c.sfb ? "sfb" : "ps"},
                      {"ps_bytes", c.ps_bytes},
                      {"sfb_bytes", c.sfb_bytes},
                      {"ps_messages", c.ps_messages},
                      {"sfb_messages", c.sfb_messages}});
    // Each route's time with its messages, where the link rate was known to weigh them.
    if (c.ps_s > 0) layers.back().update({{"ps_s", c.ps_s}, {"sfb_s", c.sfb_s}});
  }
  return {{"mode", to_string(plan.mode)}, {"layers", layers}};
}

std::string comm_refusal(const CommPlan& plan, bool keys, const std::string& device,
                         const std::string& compute) {
  const std::string mode = to_string(plan.mode);
  // The factor port has no CURVE yet: a secured cluster would send factors in the clear and
  // take them from anyone who reaches the port.
  if (plan.any_sfb() && keys)
    return "--comm " + mode +
           " sends factors worker to worker without CURVE: a --keys cluster needs --comm ps";
  if (plan.any_sfb() && device != "cpu" && compute == "real")
    return "--comm " + mode + " reads sufficient factors on the cpu device only, not " + device;
  return "";
}

namespace {

// Transfers of a switch under way; shared with their callbacks, which may run after a wait
// given up.
struct Outstanding {
  std::mutex mu;
  std::condition_variable cv;
  int left = 0;
  std::function<void()> one() {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++left;
    }
    return [this] {
      std::lock_guard<std::mutex> lock(mu);
      --left;
      cv.notify_all();
    };
  }
};

}  // namespace

void CommSwitch::set_up(const ps::ClusterMap& map, int id, const std::string& name,
                        TraceRecorder& trace, Progress& progress,
                        std::function<std::string()> abort,
                        std::function<std::string(const CommPlan&)> refusal) {
  map_ = map, id_ = id, name_ = name, trace_ = &trace, progress_ = &progress;
  abort_ = std::move(abort), refusal_ = std::move(refusal);
}

void CommSwitch::on_control(const json& j) {
  const std::string ev = j.is_object() ? j.value("event", "") : "";
  if (ev != "comm_prepare" && ev != "comm_commit" && ev != "comm_abort") return;
  if (!j.contains("seq") || !j["seq"].is_number_unsigned()) return;
  std::lock_guard<std::mutex> lock(mu_);
  // The coordinator sends a request only once the last one was called off or taken by every
  // worker: a word not taken yet is an abort, which the new request replaces.
  if (ev == "comm_prepare") {
    prepare_ = j, word_.reset(), answered_ = -1;
  } else if (prepare_ && (*prepare_)["seq"] == j["seq"]) {
    word_ = j;
  }
  cv_.notify_all();
}

CommPlan CommSwitch::plan_of(const std::string& mode) const {
  return choose_comm(map_.spec, parse_comm(mode), int(map_.workers.size()),
                     int(map_.servers.size()), map_.exp.batch, map_.exp.comm_cost());
}

bool CommSwitch::at_boundary(ps::NodeLink& link, ps::PsClient& client, FactorExchange& sfb,
                             Net& net, std::int64_t step, CommPlan& comm) {
  std::unique_lock<std::mutex> lock(mu_);
  // Answered a step ago and no word yet: wait here, where no peer needs more of this worker
  // than the steps it has done (S is at least two past the answer: worker/comm_switch.hpp).
  if (answered_ >= 0 && !word_ && step > answered_) wait_word_locked(lock);
  if (word_) take_word_locked(lock, sfb);
  if (commit_ && commit_->value("step", std::int64_t(-1)) == step) {
    lock.unlock();
    apply(link, client, sfb, net, step, comm);
    return true;
  }
  // One switch at a time: a request that came meanwhile is answered at the next boundary.
  if (!prepare_ || answered_ >= 0 || commit_) return false;
  const json prepare = *prepare_;
  lock.unlock();
  json ready = {{"event", "comm_ready"}, {"seq", prepare["seq"]}, {"step", step}};
  try {
    if (const std::string why = refusal_(plan_of(prepare.value("mode", ""))); !why.empty())
      ready["error"] = name_ + ": " + why;
  } catch (const std::exception& e) {
    ready["error"] = name_ + ": " + e.what();
  }
  link.send_control(ready);
  lock.lock();
  if (ready.contains("error"))
    prepare_.reset();
  else
    answered_ = step;
  return false;
}

// Waits, bounded, for the coordinator's commit or abort of the request answered.
void CommSwitch::wait_word_locked(std::unique_lock<std::mutex>& lock) {
  const std::uint64_t seq = (*prepare_)["seq"];
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int(kWordTimeoutS * 1000));
  lock.unlock();
  Progress::Waiting waiting(*progress_,
                            "the coordinator's word on --comm switch " + std::to_string(seq));
  lock.lock();
  while (!word_ && answered_ >= 0) {  // or a new request replaced the one answered
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn("{}: no word on --comm switch {} within {:.0f} s: going on as it was", name_,
                   seq, kWordTimeoutS);
      prepare_.reset(), answered_ = -1;
      return;
    }
    if (cv_.wait_for(lock, std::chrono::milliseconds(250)) == std::cv_status::timeout) {
      lock.unlock();
      const std::string why = abort_();
      lock.lock();
      if (!why.empty()) throw Error(why + " while waiting for the word on a --comm switch");
    }
  }
}

void CommSwitch::take_word_locked(std::unique_lock<std::mutex>& lock, FactorExchange& sfb) {
  const json word = std::move(*word_);
  word_.reset(), prepare_.reset(), answered_ = -1;
  if (word.value("event", "") == "comm_abort") {
    spdlog::warn("{}: --comm switch {} called off: {}", name_, word.value("seq", 0),
                 word.value("reason", "?"));
    return;
  }
  commit_ = word;
  lock.unlock();
  // From now on a peer past the agreed step may send the added layers' factors.
  sfb.expect(plan_of(word.value("mode", "")), word.value("step", std::int64_t(-1)));
  lock.lock();
}

void CommSwitch::apply(ps::NodeLink& link, ps::PsClient& client, FactorExchange& sfb, Net& net,
                       std::int64_t step, CommPlan& comm) {
  std::unique_lock<std::mutex> lock(mu_);
  const json word = *commit_;
  commit_.reset();
  lock.unlock();
  const CommPlan next = plan_of(word.value("mode", ""));
  const ModelSpec& spec = map_.spec;
  const int assigner = word.value("assigner", 0);
  auto out = std::make_shared<Outstanding>();
  std::vector<std::vector<float>> sent;        // the assigned parts' bytes, alive until acked
  std::map<int, std::vector<float>> momentum;  // by tensor, for the layers joining the factors
  for (int l = 0; l < int(spec.layers.size()); ++l) {
    const bool was = comm.sfb[std::size_t(l)], now = next.sfb[std::size_t(l)];
    if (was == now) continue;
    if (was) sfb.apply_until(l, step, net);  // every step below `step` applied
    for (int which = 0; which < int(spec.layers[l].tensors.size()); ++which) {
      const int t = spec.layers[l].tensors[std::size_t(which)];
      if (now) momentum[t].assign(std::size_t(spec.tensors[t].numel), 0.0f);
      for (int i : map_.plan.parts_of_key[t]) {
        const Part& p = map_.plan.parts[std::size_t(i)];
        if (now) {  // the shards' parameters and momentum at `step`
          client.pull(i, net.param(t) + p.offset, 0, p.numel, std::uint64_t(step), l, out->one());
          client.pull_momentum(i, momentum[t].data() + p.offset, std::uint64_t(step), l,
                               out->one());
        } else if (id_ == assigner) {  // this worker's, which every worker holds
          const float* v = sfb.momentum(l, which).data() + p.offset;
          std::vector<float>& b =
              sent.emplace_back(net.param(t) + p.offset, net.param(t) + p.offset + p.numel);
          b.insert(b.end(), v, v + p.numel);
          client.assign(i, b.data(), std::uint64_t(step), l, out->one());
        }
      }
    }
  }
  {
    Progress::Waiting waiting(
        *progress_, "the shards' answers to --comm switch " + std::to_string(word.value("seq", 0)));
    std::unique_lock<std::mutex> olock(out->mu);
    while (out->left > 0)
      if (!out->cv.wait_for(olock, std::chrono::milliseconds(250),
                            [&] { return out->left == 0; })) {
        olock.unlock();
        const std::string why = abort_();
        olock.lock();
        if (!why.empty())
          throw Error(why + " while switching --comm at step " + std::to_string(step));
      }
  }
  sfb.switch_plan(next, step, std::move(momentum));
  net.all_params_updated();
  const std::string was = to_string(comm.mode);
  comm = next;
  TraceEvent e;
  e.name = std::string("comm:") + to_string(next.mode), e.lane = "control", e.ts_us = now_us();
  e.dur_us = 0, e.step = step;
  e.note = "switched from " + was + ": " + next.describe(spec);
  trace_->record(std::move(e));
  switches_.push_back(
      {{"seq", word.value("seq", 0)}, {"mode", to_string(next.mode)}, {"step", step}});
  spdlog::info("{}: comm {} from step {} (was {}): {}", name_, to_string(next.mode), step, was,
               next.describe(spec));
  link.send_control({{"event", "comm_switched"},
                     {"seq", word.value("seq", 0)},
                     {"step", step},
                     {"mode", to_string(next.mode)}});
}

}  // namespace psbed::worker
