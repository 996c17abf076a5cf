// The coordinator's control plane: `psbed ctl` over ZeroMQ, the live policy switch that it and
// HTTP share, and the HTTP server with its prediction.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "ps/control.hpp"
#include "ps/coordinator_http.hpp"
#include "ps/coordinator_impl.hpp"

namespace psbed::ps::coordinator_detail {

void Coordinator::ctl_reply(const PeerId& peer, json j) {
  j["event"] = "ctl_reply";
  send_to(peer, Op::kControl, j);
}

void Coordinator::on_ctl(const json& j, const SwitchReply& reply) {
  const std::string command = j.value("command", "");
  if (command == "status") {
    json workers = json::array();
    for (const auto& [_, n] : nodes_) {
      if (n.role != "worker") continue;
      json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
      if (!n.progress.is_null())
        for (const char* k : {"step", "loss", "steps_per_sec", "images_per_sec", "policy"})
          if (n.progress.contains(k)) w[k] = n.progress[k];
      workers.push_back(w);
    }
    return reply({{"ok", true},
                  {"policy", policy_to_json(policy_)},
                  {"describe", describe_policy(policy_)},
                  {"mode", mode_.str()},
                  {"steps", steps_},
                  {"started", map_sent_},
                  {"workers", workers},
                  {"policy_switches", switches_},
                  {"comm", comm_now_},
                  {"comm_switches", comm_switches_}});
  }
  if (command == "node_gone") {
    // The launcher saw a node's process end: the node is dead now, not at the heartbeat timeout
    // (a shard's backup takes over at once).
    const std::string name = j.value("name", "");
    for (auto& [_, n] : nodes_)
      if (n.name == name && n.alive) {
        fail_node_locked(n, j.value("reason", std::string("its process ended")));
        return reply({{"ok", true}});
      }
    return reply({{"ok", false}, {"error", "no live node is named '" + name + "'"}});
  }
  if (command == "comm") {
    if (auto refused = start_comm_locked(j, reply)) reply({{"ok", false}, {"error", *refused}});
    return;
  }
  if (command != "policy")
    return reply({{"ok", false},
                  {"error", "unknown command '" + command + "', expected policy, comm or status"}});
  json req = j;
  req.erase("event");
  req.erase("command");
  req.erase("token");
  if (auto refused = start_switch_locked(req, reply))
    reply({{"ok", false}, {"error", refused->second}});
}

// The one way a policy switch starts, for ctl and HTTP alike. A refusal comes back at once as
// (HTTP status, reason) and nothing changes; otherwise `reply` gets the outcome later, from
// finish_switch_locked.
std::optional<std::pair<int, std::string>> Coordinator::start_switch_locked(const json& req,
                                                                            SwitchReply reply) {
  // A bad request is named first, whatever the run's state: the caller can fix it now.
  policy::PolicyOptions o;
  try {
    o = policy_from_request(req, policy_);
  } catch (const Error& e) {
    return std::make_pair(400, std::string(e.what()));
  }
  if (!map_sent_)
    return std::make_pair(
        503, std::string("the run has not started yet: not every node has registered"));
  if (finished_) return std::make_pair(409, std::string("the run has ended"));
  if (switch_)
    return std::make_pair(409, std::string("a policy switch is already under way: try again once "
                                           "it took effect (within a step or two)"));
  Switch sw;
  sw.seq = ++switch_seq_;
  sw.reply = std::move(reply);
  sw.options = o;
  sw.requested = Clock::now();
  sw.requested_s = (now_us() - started_us_) / 1e6;
  spdlog::info("policy switch {} requested: {} (was {})", sw.seq, describe_policy(o),
               describe_policy(policy_));
  for (Node* w : live("worker"))
    if (w->report.is_null())
      send_to(w->peer, Op::kControl,
              {{"event", "set_policy"}, {"seq", sw.seq}, {"policy", policy_to_json(o)}});
  switch_ = std::move(sw);
  finish_switch_locked(false);
  return std::nullopt;
}

// Answers the pending switch once every live worker still training has switched (or, with
// `timeout`, now), and records it for the summary.
void Coordinator::finish_switch_locked(bool timeout) {
  if (!switch_) return;
  std::vector<std::string> missing;
  for (Node* w : live("worker"))
    if (w->report.is_null() && !switch_->workers.contains(w->name)) missing.push_back(w->name);
  if (!missing.empty() && !timeout) return;
  Switch sw = std::move(*switch_);
  switch_.reset();
  std::int64_t step = -1;
  for (const auto& [_, s] : sw.workers.items()) step = std::max(step, s.get<std::int64_t>());
  json reply = {{"policy", policy_to_json(sw.options)},
                {"describe", describe_policy(sw.options)},
                {"workers", sw.workers},
                {"step", step},
                {"timed_out", !missing.empty()}};
  if (sw.workers.empty()) {
    reply["ok"] = false;
    reply["error"] = missing.empty() ? "training ended before any worker switched"
                                     : "no worker switched within " +
                                           std::to_string(int(kSwitchTimeoutS)) + " s";
  } else {
    reply["ok"] = missing.empty();
    if (!missing.empty()) {
      std::string names;
      for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
      reply["error"] =
          "not switched within " + std::to_string(int(kSwitchTimeoutS)) + " s: " + names;
    }
    policy_ = sw.options;
    switches_.push_back({{"seq", sw.seq},
                         {"policy", policy_to_json(sw.options)},
                         {"describe", describe_policy(sw.options)},
                         {"requested_s", sw.requested_s},
                         {"effective_s", (now_us() - started_us_) / 1e6},
                         {"step", step},
                         {"workers", sw.workers}});
    spdlog::info("policy switch {} took effect: {} from step {}", sw.seq,
                 describe_policy(sw.options), step);
  }
  sw.reply(reply);
}

void Coordinator::start_http() {
  ControlPlaneApi api;
  api.status = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return status_locked();
  };
  api.metrics = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_locked();
  };
  api.switch_policy = [this](const json& req, std::function<void(int, json)> done) {
    std::unique_lock<std::mutex> lock(mu_);
    auto refused = start_switch_locked(req, [done](json reply) {
      const bool ok = reply.value("ok", false);
      done(ok ? 200 : reply.value("timed_out", false) ? 504 : 409, std::move(reply));
    });
    if (refused) {
      lock.unlock();
      return done(refused->first, {{"ok", false}, {"error", refused->second}});
    }
    // The set_policy messages wait in the outbox: wake the run loop to send them, so this
    // thread never blocks on the coordinator's socket.
    cv_.notify_all();
  };
  api.prediction = [this](HttpRespond respond) { prediction(std::move(respond)); };
  api.history = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return json{{"samples", json(history_)}, {"policy_switches", switches_}};
  };
  HttpOptions h;
  h.address = opt_.http;
  h.token = opt_.http_token;
  h.open_paths = {"/healthz"};  // probes (Kubernetes httpGet, compose) carry no token
  http_ = std::make_unique<HttpServer>(h, make_control_handler(std::move(api)));
  http_->start();
  spdlog::info("dashboard on {}{}", http_->url(),
               opt_.http_token.empty() ? "" : " (token required)");
  if (!opt_.http_file.empty()) {
    const std::string tmp = opt_.http_file + ".tmp";
    std::ofstream(tmp) << http_->url() << "\n";
    std::rename(tmp.c_str(), opt_.http_file.c_str());
  }
}

// The predictor's figure for the configuration running now; computed once per configuration,
// on a thread of its own (a simulation may take a while: the HTTP thread goes on serving, and
// the coordinator goes on meanwhile).
void Coordinator::prediction(HttpRespond respond) {
  if (opt_.profile.empty())
    return respond(HttpResponse::error(
        404,
        "no prediction: start the coordinator with --profile profile.json (from psbed profile)"));
  if (!opt_.predict)
    return respond(HttpResponse::error(
        503, "no prediction: this psbed was built without a predictor, measured figures only"));
  json config;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int live_workers = 0;
    for (const auto& [_, n] : nodes_) live_workers += n.role == "worker" && n.alive;
    config = {{"model", spec_.name},
              {"workers", map_sent_ ? live_workers : opt_.workers},
              {"servers", opt_.servers},
              {"mode", mode_.str()},
              {"batch", opt_.batch},
              {"partition_bytes", opt_.partition_bytes},
              {"policy", policy_to_json(policy_)},
              {"comm", comm_now_},
              {"compute", opt_.compute == "real" ? "real" : "replay"}};
  }
  const std::string profile = opt_.profile;
  const double t_s = since_start_s();
  auto compute = [predict = opt_.predict, profile, config] { return predict(profile, config); };
  auto answer = [respond, config, profile, t_s](std::optional<double> figure,
                                                const std::string& error) {
    if (!figure) return respond(HttpResponse::error(500, "the predictor failed: " + error));
    respond(HttpResponse::json(
        200,
        {{"images_per_sec", *figure}, {"config", config}, {"profile", profile}, {"t_s", t_s}}));
  };
  if (!predictions_.request(config.dump(), std::move(compute), std::move(answer))) {
    HttpResponse busy = HttpResponse::error(
        503, "a prediction for another configuration is under way; try again in a moment");
    busy.headers.emplace_back("Retry-After", "1");
    respond(std::move(busy));
  }
}

}  // namespace psbed::ps::coordinator_detail
