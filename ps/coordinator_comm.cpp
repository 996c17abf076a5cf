// The live --comm switch (`psbed ctl comm MODE`), the coordinator's side. Every worker must take
// the new per-layer route at the same step, so the switch has two phases: comm_prepare to every
// worker still training; each answers at its next step boundary with the step it is about to
// start (comm_ready); then comm_commit with the step S = the largest answer + 2 (a worker waits
// one boundary after its answer for the word, so each hears of S before it starts S - 1:
// worker/comm_switch.hpp), or comm_abort when a worker cannot switch or does not answer in time.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "ps/coordinator_impl.hpp"

namespace psbed::ps::coordinator_detail {

std::optional<std::string> Coordinator::start_comm_locked(const json& req, SwitchReply reply) {
  // A bad request is named first, whatever the run's state: the caller can fix it now.
  if (!req.contains("mode") || !req["mode"].is_string())
    return std::string("a comm request needs 'mode': ps, sfb or hybrid");
  const std::string mode = req["mode"];
  CommMode m;
  try {
    m = parse_comm(mode);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  if (const std::string why = comm_problem(m, mode_); !why.empty()) return why;
  if (mode_.kind != Consistency::Kind::kBsp)
    return "psbed ctl comm needs --mode bsp, not " + mode_.str() +
           ": under ssp the workers' copies of a factor layer differ, and there is no one state "
           "to hand to the shards";
  if (opt_.replicas > 1)
    return std::string(
        "psbed ctl comm cannot switch a --replicas 2 run: an SFB layer handed back to the shards "
        "would have no copy on the backup");
  const CommPlan plan = choose_comm(spec_, m, opt_.workers, opt_.servers, opt_.batch, comm_cost());
  if (plan.any_sfb() && !opt_.keys.empty())
    return "--comm " + mode +
           " sends factors worker to worker without CURVE: a --keys cluster needs --comm ps";
  if (!map_sent_) return std::string("the run has not started yet: not every node has registered");
  if (finished_) return std::string("the run has ended");
  if (mode == comm_now_) return "the run already uses --comm " + mode;
  if (comm_switch_)
    return std::string(
        "a --comm switch is already under way: try again once every worker took it (within a "
        "few steps)");
  std::vector<Node*> workers;
  for (Node* w : live("worker"))
    if (w->report.is_null()) workers.push_back(w);
  if (workers.size() != live("worker").size() || workers.empty())
    return std::string(
        "training is ending: a worker has done its steps, none is left to switch at");
  CommSwitch sw;
  sw.seq = ++comm_seq_;
  sw.mode = mode;
  sw.reply = std::move(reply);
  sw.requested = Clock::now();
  sw.requested_s = (now_us() - started_us_) / 1e6;
  sw.deadline = sw.requested + std::chrono::milliseconds(int(kCommPrepareS * 1000));
  spdlog::info("--comm switch {} requested: {} (was {})", sw.seq, mode, comm_now_);
  for (Node* w : workers)
    send_to(w->peer, Op::kControl, {{"event", "comm_prepare"}, {"seq", sw.seq}, {"mode", mode}});
  comm_switch_ = std::move(sw);
  cv_.notify_all();
  return std::nullopt;
}

void Coordinator::on_comm_switched_locked(Node& n, const json& j) {
  if (!comm_switch_ || comm_switch_->step < 0 || whole(j, "seq") != std::int64_t(comm_switch_->seq))
    return;
  comm_switch_->switched[n.name] = whole(j, "step");
  finish_comm_locked(false);
}

// A committed switch is under way until every live worker still training said it switched (or
// at its deadline): a second one must not reach a worker that has not taken the first.
void Coordinator::took_comm_locked(bool timeout) {
  std::string missing;
  for (Node* w : live("worker"))
    if (w->report.is_null() && !comm_switch_->switched.contains(w->name))
      missing += (missing.empty() ? "" : ", ") + w->name;
  if (!missing.empty() && !timeout) return;
  if (!missing.empty())
    spdlog::warn("--comm switch {}: {} did not say it switched at step {} within {} s",
                 comm_switch_->seq, missing, comm_switch_->step, int(kCommTakeS));
  comm_switch_.reset();
}

void Coordinator::on_comm_ready_locked(Node& n, const json& j) {
  if (!comm_switch_ || comm_switch_->step >= 0 ||
      whole(j, "seq") != std::int64_t(comm_switch_->seq))
    return;
  const std::int64_t step = whole(j, "step");
  if (step < 0) return;
  comm_switch_->ready[n.name] = step;
  if (const std::string why = text(j, "error"); !why.empty() && comm_switch_->refused.empty())
    comm_switch_->refused = why;
  finish_comm_locked(false);
}

// Commits the pending switch once every live worker still training answered, or calls it off
// (a refusal, a worker done, a worker dead, or with `timeout` one that did not answer).
void Coordinator::finish_comm_locked(bool timeout) {
  if (!comm_switch_) return;
  CommSwitch& sw = *comm_switch_;
  if (sw.step >= 0) return took_comm_locked(timeout);
  std::vector<std::string> missing;
  std::string done;
  int assigner = -1;
  for (Node* w : live("worker")) {
    if (!w->report.is_null()) done = w->name;
    if (!sw.ready.contains(w->name)) missing.push_back(w->name);
    if (assigner < 0 || w->id < assigner) assigner = w->id;
  }
  std::string why = sw.refused;
  if (why.empty() && !done.empty())
    why = done + " has done its steps: no step is left to switch at";
  if (why.empty() && missing.empty() && sw.ready.empty()) why = "no worker is left";
  if (why.empty() && !missing.empty()) {
    if (!timeout) return;
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    why = "not every worker reached a step boundary within " + std::to_string(int(kCommPrepareS)) +
          " s: " + names;
  }
  std::int64_t step = 0;
  for (const auto& [_, s] : sw.ready.items()) step = std::max(step, s.get<std::int64_t>() + 2);
  if (why.empty() && step >= steps_)
    why = "the run ends at step " + std::to_string(steps_) + ", before the step " +
          std::to_string(step) + " it could switch at";
  const CommSwitch taken = sw;
  if (why.empty()) {  // kept until every worker took it: the next switch waits for that
    sw.step = step;
    sw.deadline = Clock::now() + std::chrono::milliseconds(int(kCommTakeS * 1000));
  } else {
    comm_switch_.reset();
  }
  const std::string event = why.empty() ? "comm_commit" : "comm_abort";
  for (Node* w : live("worker"))
    send_to(w->peer, Op::kControl,
            {{"event", event},
             {"seq", taken.seq},
             {"mode", taken.mode},
             {"step", step},
             {"assigner", assigner},
             {"reason", why}});
  cv_.notify_all();
  if (!why.empty()) {
    spdlog::warn("--comm switch {} to {} called off: {}", taken.seq, taken.mode, why);
    return taken.reply({{"ok", false}, {"error", "--comm " + taken.mode + " refused: " + why}});
  }
  const CommPlan plan = choose_comm(spec_, parse_comm(taken.mode), opt_.workers, opt_.servers,
                                    opt_.batch, comm_cost());
  json layers = json::array();
  for (const LayerComm& c : plan.layers)
    layers.push_back(
        {{"layer", spec_.layers[std::size_t(c.layer)].name}, {"route", c.sfb ? "sfb" : "ps"}});
  const std::string was = comm_now_;
  comm_now_ = taken.mode;
  comm_switches_.push_back({{"seq", taken.seq},
                            {"mode", taken.mode},
                            {"was", was},
                            {"step", step},
                            {"layers", layers},
                            {"requested_s", taken.requested_s},
                            {"effective_s", (now_us() - started_us_) / 1e6},
                            {"workers", taken.ready}});
  spdlog::info("--comm switch {}: {} from step {} (was {}): {}", taken.seq, taken.mode, step, was,
               plan.describe(spec_));
  taken.reply({{"ok", true},
               {"mode", taken.mode},
               {"was", was},
               {"step", step},
               {"layers", layers},
               {"describe", plan.describe(spec_)},
               {"workers", taken.ready}});
}

}  // namespace psbed::ps::coordinator_detail
