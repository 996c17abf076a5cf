// What the coordinator says of a running cluster: the progress line, stalls, /api/status and its
// history, /metrics.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "ps/control.hpp"
#include "ps/coordinator_impl.hpp"
#include "ps/metrics.hpp"

namespace psbed::ps::coordinator_detail {

void Coordinator::record_sample_locked() {
  const json st = status_locked();
  json workers = json::object();
  for (const auto& w : st["workers"]) {
    // Not yet reporting, finished or dead: nothing to draw (not a zero).
    if (!w["alive"].get<bool>() || w["done"].get<bool>() || !w.contains("images_per_sec")) continue;
    workers[w["name"].get<std::string>()] = {{"images_per_sec", w.value("images_per_sec", 0.0)},
                                             {"bytes_up_per_sec", w["bytes_up_per_sec"]},
                                             {"bytes_down_per_sec", w["bytes_down_per_sec"]},
                                             {"loss", w.value("loss", json(nullptr))}};
  }
  if (workers.empty()) return;
  history_.push_back({{"t_s", st["t_s"]},
                      {"images_per_sec", st["totals"]["images_per_sec"]},
                      {"workers", workers}});
  if (history_.size() > kHistory) history_.pop_front();
}

// Workers still training: a stall is a lack of steps among them, not a finished run's quiet.
bool Coordinator::training_locked() const {
  if (!map_sent_ || finished_ || stopping_) return false;
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && n.alive && n.report.is_null()) return true;
  return false;
}

void Coordinator::advanced_locked(Node& n) {
  n.waiting = json();
  last_advance_ = Clock::now();
  if (stall_.is_null()) return;
  spdlog::info("progress again after a stall of {:.0f} s: {} finished step {}",
               age_s(last_advance_, stall_since_), n.name,
               std::int64_t(num(n.progress, "step")) + 1);
  stall_ = json();
}

// One line for the log and the launcher: who is where, and what each worker said it waits on.
std::string Coordinator::stall_text_locked(Clock::time_point now) const {
  std::string line = fmt::format("no progress for {:.0f} s:", age_s(now, last_advance_));
  const char* sep = " ";
  for (const auto& [_, n] : nodes_) {
    if (n.role != "worker" || !n.alive || !n.report.is_null()) continue;
    line += fmt::format("{}{} at step {}", sep, n.name, std::int64_t(num(n.progress, "step")));
    const std::string on = text(n.waiting, "on");
    line += on.empty() ? " (said nothing of a wait: computing, or its word did not come)"
                       : " waiting on " + on;
    sep = "; ";
  }
  return line;
}

json Coordinator::stall_json_locked(Clock::time_point now) const {
  json workers = json::array();
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && n.alive && n.report.is_null())
      workers.push_back({{"name", n.name},
                         {"step", std::int64_t(num(n.progress, "step"))},
                         {"waiting_on", text(n.waiting, "on")}});
  return {{"seconds", age_s(now, last_advance_)},
          {"message", stall_text_locked(now)},
          {"workers", workers}};
}

void Coordinator::check_stall_locked(Clock::time_point now) {
  if (opt_.stall_timeout_s <= 0 || !stall_.is_null() || !training_locked()) return;
  if (age_s(now, last_advance_) < opt_.stall_timeout_s) return;
  stall_since_ = last_advance_;
  stall_ = stall_json_locked(now);
  stalls_.push_back(stall_);
  spdlog::warn("{}", stall_["message"].get<std::string>());
}

json Coordinator::status_locked() {
  const auto now = Clock::now();
  auto age = [&](Clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
  json nodes = json::array(), workers = json::array(), servers = json::array();
  double ips = 0, sps = 0, up = 0, down = 0;
  std::int64_t min_step = -1;
  for (const auto& [_, n] : nodes_) {
    json node = {{"role", n.role},       {"id", n.id},       {"name", n.name},
                 {"address", n.address}, {"alive", n.alive}, {"heartbeat_age_s", age(n.last_seen)}};
    if (!n.failure.empty()) node["failure"] = n.failure;
    nodes.push_back(node);
    if (n.role == "server") {
      json sv = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
      for (const char* k : {"pushes", "pulls", "bad_messages", "bad_by_kind", "queue_depth"})
        if (n.stats.contains(k)) sv[k] = n.stats[k];
      servers.push_back(sv);
      continue;
    }
    json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}, {"done", !n.report.is_null()}};
    for (const char* k : {"step", "loss", "steps_per_sec", "images_per_sec", "policy",
                          "bytes_pushed", "bytes_pulled"})
      if (n.progress.contains(k)) w[k] = n.progress[k];
    w["bytes_up_per_sec"] = num(n.progress, "bytes_pushed_per_sec");
    w["bytes_down_per_sec"] = num(n.progress, "bytes_pulled_per_sec");
    // A finished or dead worker adds nothing to the cluster's rate any more.
    if (n.alive && n.report.is_null()) {
      ips += num(n.progress, "images_per_sec");
      sps += num(n.progress, "steps_per_sec");
      up += w["bytes_up_per_sec"].get<double>();
      down += w["bytes_down_per_sec"].get<double>();
      const auto step = std::int64_t(num(n.progress, "step"));
      min_step = min_step < 0 ? step : std::min(min_step, step);
    }
    workers.push_back(w);
  }
  auto by_id = [](const json& a, const json& b) { return a["id"] < b["id"]; };
  std::sort(nodes.begin(), nodes.end(), [](const json& a, const json& b) {
    return std::make_pair(a["role"].get<std::string>(), a["id"].get<int>()) <
           std::make_pair(b["role"].get<std::string>(), b["id"].get<int>());
  });
  std::sort(workers.begin(), workers.end(), by_id);
  std::sort(servers.begin(), servers.end(), by_id);
  json policy = policy_to_json(policy_);
  policy["describe"] = describe_policy(policy_);
  json st = {{"t_s", since_start_s()},
             {"model", spec_.name},
             {"mode", mode_.str()},
             {"batch", opt_.batch},
             {"steps", steps_},
             {"step", std::max<std::int64_t>(min_step, 0)},
             {"started", map_sent_},
             {"finished", finished_},
             {"policy", policy},
             {"policies", policy::policy_names()},
             {"switch_pending", switch_.has_value()},
             {"policy_switches", switches_},
             {"comm", comm_now_},
             {"comm_switches", comm_switches_},
             {"nodes", nodes},
             {"workers", workers},
             {"servers", servers},
             {"totals",
              {{"images_per_sec", ips},
               {"steps_per_sec", sps},
               {"bytes_up_per_sec", up},
               {"bytes_down_per_sec", down}}},
             {"prediction", {{"available", !opt_.profile.empty() && bool(opt_.predict)}}},
             {"stall", stall_.is_null() ? json() : stall_json_locked(now)}};
  return st;
}

std::string Coordinator::metrics_locked() {
  const auto now = Clock::now();
  MetricsText m;
  auto labels = [](const Node& n) { return MetricLabels{{"role", n.role}, {"node", n.name}}; };
  m.family("psbed_node_up", "gauge", "1 while the node is alive, 0 once declared dead");
  for (const auto& [_, n] : nodes_) m.sample("psbed_node_up", labels(n), n.alive ? 1 : 0);
  m.family("psbed_node_heartbeat_age_seconds", "gauge",
           "Seconds since the coordinator last heard from the node");
  for (const auto& [_, n] : nodes_)
    m.sample("psbed_node_heartbeat_age_seconds", labels(n),
             std::chrono::duration<double>(now - n.last_seen).count());
  auto workers = [&](const char* name, const char* type, const char* help, const char* key) {
    m.family(name, type, help);
    for (const auto& [_, n] : nodes_)
      if (n.role == "worker" && n.progress.contains(key))
        m.sample(name, labels(n),
                 std::string(key) == "loss" ? loss_of(n.progress) : num(n.progress, key));
  };
  // Counters only: Prometheus takes rates itself (rate(psbed_worker_images_total[1m])), over
  // whatever window the reader asks, where a rate gauge fixes one and loses what lies between
  // scrapes.
  workers("psbed_worker_steps_total", "counter", "Training steps the worker has finished", "step");
  m.family("psbed_worker_images_total", "counter", "Training images the worker has processed");
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && n.progress.contains("step"))
      m.sample("psbed_worker_images_total", labels(n), num(n.progress, "step") * opt_.batch);
  workers("psbed_worker_pushed_bytes_total", "counter",
          "Gradient bytes the worker has pushed to the servers", "bytes_pushed");
  workers("psbed_worker_pulled_bytes_total", "counter",
          "Parameter bytes the worker has pulled from the servers", "bytes_pulled");
  workers("psbed_worker_loss", "gauge", "Training loss of the worker's latest step", "loss");
  m.family("psbed_step_duration_seconds", "histogram", "Duration of the worker's training steps");
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && !n.step_bins.empty())
      m.histogram("psbed_step_duration_seconds", labels(n), kStepBuckets, n.step_bins,
                  n.step_sum_s);
  auto servers = [&](const char* name, const char* type, const char* help, const char* key) {
    m.family(name, type, help);
    for (const auto& [_, n] : nodes_)
      if (n.role == "server" && n.stats.contains(key)) m.sample(name, labels(n), num(n.stats, key));
  };
  servers("psbed_server_pushes_total", "counter", "Gradient pushes the server shard has applied",
          "pushes");
  servers("psbed_server_pulls_total", "counter", "Parameter pulls the server shard has answered",
          "pulls");
  servers("psbed_server_queued_messages", "gauge",
          "Messages waiting in the server shard's apply queues", "queue_depth");
  m.family("psbed_bad_messages_total", "counter", "Malformed or out-of-range messages dropped");
  m.sample("psbed_bad_messages_total", {{"role", "coordinator"}, {"node", "coordinator"}},
           double(transport_->bad_messages().total() + dropped_messages_));
  for (const auto& [_, n] : nodes_)
    if (n.role == "server" && n.stats.contains("bad_messages"))
      m.sample("psbed_bad_messages_total", labels(n), num(n.stats, "bad_messages"));
  m.family("psbed_server_bad_messages_total", "counter",
           "A server shard's dropped messages by kind (forged sender, non-finite gradient, ...)");
  for (const auto& [_, n] : nodes_) {
    if (n.role != "server" || !n.stats.is_object() || !n.stats.contains("bad_by_kind") ||
        !n.stats["bad_by_kind"].is_object())
      continue;
    for (const auto& [kind, count] : n.stats["bad_by_kind"].items()) {
      auto l = labels(n);
      l.emplace_back("kind", kind);
      m.sample("psbed_server_bad_messages_total", l, count.is_number() ? count.get<double>() : 0);
    }
  }
  m.family("psbed_policy_switches_total", "counter", "Live policy switches that took effect");
  m.sample("psbed_policy_switches_total", {}, double(switches_.size()));
  m.family("psbed_policy_info", "gauge",
           "The transmission policy the workers run now (value always 1)");
  m.sample("psbed_policy_info", {{"policy", policy_.name}, {"describe", describe_policy(policy_)}},
           1);
  m.family("psbed_progress_age_seconds", "gauge",
           "Seconds since a worker last finished a step (while the workers train)");
  m.sample("psbed_progress_age_seconds", {}, training_locked() ? age_s(now, last_advance_) : 0.0);
  m.family("psbed_stalled", "gauge",
           "1 while no worker has finished a step for --stall-timeout, else 0");
  m.sample("psbed_stalled", {}, stall_.is_null() ? 0 : 1);
  m.family("psbed_dropped_unread_messages_total", "counter",
           "Messages dropped because their peer did not read them (its own replies)");
  m.sample("psbed_dropped_unread_messages_total",
           {{"role", "coordinator"}, {"node", "coordinator"}},
           double(transport_->dropped_unread()));
  for (const auto& [_, n] : nodes_)
    if (n.role == "server" && n.stats.contains("dropped_unread"))
      m.sample("psbed_dropped_unread_messages_total", labels(n), num(n.stats, "dropped_unread"));
  m.family("psbed_run_steps", "gauge", "Steps each worker trains in this run");
  m.sample("psbed_run_steps", {}, double(steps_));
  append_build_info(m);
  append_process_metrics(m);
  return m.str();
}

void Coordinator::print_progress_locked() {
  double ips = 0, sps = 0;
  std::int64_t min_step = -1, max_step = 0;
  std::string losses;
  for (Node* w : live("worker")) {
    if (w->progress.is_null()) continue;
    std::int64_t s = std::int64_t(num(w->progress, "step"));
    min_step = min_step < 0 ? s : std::min(min_step, s);
    max_step = std::max(max_step, s);
    ips += num(w->progress, "images_per_sec");
    sps += num(w->progress, "steps_per_sec");
    char buf[48];
    std::snprintf(buf, sizeof buf, " w%d %.3f", w->id, loss_of(w->progress));
    losses += buf;
  }
  if (min_step < 0) return;
  spdlog::info("step {}..{}/{}  {:.1f} steps/s  {:.0f} images/s  loss{}", min_step, max_step,
               steps_, sps, ips, losses);
}

// --checkpoint-every in seconds: every shard is asked for the same step, far enough ahead of the
// fastest worker's last progress (a second old at most) that no shard has gone past it yet.
void Coordinator::request_checkpoint_locked(Clock::time_point now) {
  const double every = num(map_json_["experiment"], "checkpoint_every_s");
  if (every <= 0 || now < next_checkpoint_ || finished_ || stopping_) return;
  next_checkpoint_ = now + std::chrono::duration_cast<Clock::duration>(dsec(every));
  double step = 0, rate = 0;
  for (Node* w : live("worker")) {
    step = std::max(step, num(w->progress, "step"));
    rate = std::max(rate, num(w->progress, "steps_per_sec"));
  }
  const double ahead = std::ceil(rate * 2.0) + 2;
  const auto at = std::uint64_t(std::max(step, double(opt_.resume_step)) + ahead);
  if (std::int64_t(at) >= steps_) return;
  for (Node* s : live("server"))
    send_to(s->peer, Op::kControl, {{"event", "checkpoint"}, {"step", at}});
}

}  // namespace psbed::ps::coordinator_detail
