// summary.json: what a run measured and how it ended, written once the loop ends.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/files.hpp"
#include "ps/control.hpp"
#include "ps/coordinator_impl.hpp"

namespace psbed::ps::coordinator_detail {
namespace {

// A float setting as the number it was given (0.01, not the float's 0.009999999776482582): the
// shortest text that reads back as the same float.
double as_given(float f) { return std::stod(fmt::format("{}", f)); }

}  // namespace

// The data set the workers trained on, as they described it when they registered ("mnist from
// ... (8000 train / 2000 test)", "synthetic ..."); null if none said.
json Coordinator::data_described_locked() const {
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && n.extra.contains("data") && n.extra["data"].is_string())
      return n.extra["data"];
  return nullptr;
}

void Coordinator::write_summary_locked() {
  json per = json::array();
  double ips = 0, sps = 0;
  for (const auto& [_, n] : nodes_) {
    if (n.role != "worker") continue;
    json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
    if (!n.report.is_null()) {
      for (const char* k :
           {"steps", "images_per_sec", "steps_per_sec", "first_loss", "final_loss", "steady_steps",
            "comm", "comm_switches", "bytes_factors", "factors_refused"})
        if (n.report.contains(k)) w[k] = n.report[k];
    }
    // The aggregate is the workers' that trained to the end: one that left early (stopped by its
    // own signal, with a report of its steps so far) trained over a shorter window, and adding
    // its pace to theirs counted a worker the run no longer had; a worker that died without a
    // word has no figures at all. Either keeps its failure beside whatever it reported (one that
    // died after its last step, evaluating, still counts).
    if (n.alive || num(n.report, "steps", -1) >= double(steps_)) {
      ips += num(n.report, "images_per_sec");
      sps += num(n.report, "steps_per_sec");
    }
    if (!n.alive) w["failure"] = n.failure;
    per.push_back(w);
  }
  std::sort(per.begin(), per.end(), [](const json& a, const json& b) { return a["id"] < b["id"]; });
  json s = {{"model", spec_.name},
            {"parameters", spec_.parameter_count()},
            {"workers", opt_.workers},
            {"servers", opt_.servers},
            {"mode", mode_.str()},
            {"policy", opt_.policy.name},
            {"comm", opt_.comm},
            {"policy_options", policy_to_json(opt_.policy)},
            {"policy_switches", switches_},
            {"comm_switches", comm_switches_},
            {"comm_final", comm_now_},
            {"stalls", stalls_},
            {"policy_final", policy_.name},
            {"compute", opt_.compute},
            {"batch", opt_.batch},
            {"steps", steps_},
            {"lr", as_given(opt_.sgd.lr)},
            {"momentum", as_given(opt_.sgd.momentum)},
            {"weight_decay", as_given(opt_.sgd.weight_decay)},
            {"seed", opt_.seed},
            {"data", data_described_locked()},
            {"lr_schedule", opt_.lr_schedule},
            {"partition_bytes", opt_.partition_bytes},
            {"steps_per_sec", sps},
            {"images_per_sec", ips},
            {"per_worker", per},
            {"failed_nodes", failed_},
            {"test_accuracy", test_accuracy_ >= 0 ? json(test_accuracy_) : json(nullptr)},
            {"ok", exit_code_ == 0},
            {"duration_s", std::chrono::duration<double>(Clock::now() - started_).count()}};
  // What each shard dropped, by kind, as it last reported (once a second).
  json bad = json::object();
  for (const auto& [_, n] : nodes_)
    if (n.role == "server" && n.stats.is_object() && n.stats.contains("bad_by_kind"))
      bad[n.name] = n.stats["bad_by_kind"];
  s["bad_messages_by_server"] = bad;
  if (!opt_.checkpoint_every.empty() || opt_.resume_step > 0) {
    // The last step every shard reported a checkpoint of (reports come once a second).
    json last = nullptr;
    for (const auto& [_, n] : nodes_)
      if (n.role == "server") {
        const double l = num(n.stats, "last_checkpoint");
        last = last.is_null() ? json(l) : json(std::min(last.get<double>(), l));
      }
    s["checkpoints"] = {{"every", opt_.checkpoint_every},
                        {"resumed_from_step", opt_.resume_step},
                        {"last_step", last}};
  }
  if (opt_.push_pull) s["push_pull"] = true;
  if (opt_.connections > 1) s["connections"] = opt_.connections;
  if (opt_.replicas > 1) {
    s["replicas"] = opt_.replicas;
    s["failovers"] = failovers_;
    s["rejoins"] = rejoins_;
    // Per shard, as it last reported: updates forwarded to its backup, applied to its copy of the
    // previous shard, and pushes resent after a fail-over that it had applied already.
    json copies = json::object();
    for (const auto& [_, n] : nodes_)
      if (n.role == "server" && n.stats.is_object())
        copies[n.name] = {{"forwarded", num(n.stats, "forwarded")},
                          {"replicated", num(n.stats, "replicated")},
                          {"replayed", num(n.stats, "replayed")}};
    s["replication"] = copies;
  }
  if (!failure_.empty()) s["failure"] = failure_;
  if (!evaluation_note_.empty()) s["evaluation"] = evaluation_note_;
  if (!map_json_.is_null())
    s["cluster"] = {{"servers", map_json_["servers"]},
                    {"workers", map_json_["workers"]},
                    {"parts", map_json_["parts"].size()}};
  if (opt_.summary_path.empty()) return;
  try {
    write_text_file(opt_.summary_path, s.dump(2) + "\n");
  } catch (const std::exception& e) {
    // Said, and the summary kept in the log, whence launch takes what the workers reported.
    spdlog::error("the summary: {}", e.what());
    spdlog::error("{}{}", kUnwrittenSummary,
                  s.dump(-1, ' ', false, json::error_handler_t::replace));
    exit_code_ = exit_code_ ? exit_code_ : 1;
    return;
  }
  spdlog::info("summary written to {}: {:.1f} steps/s, {:.0f} images/s in all", opt_.summary_path,
               sps, ips);
}

}  // namespace psbed::ps::coordinator_detail
