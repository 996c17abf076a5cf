// The coordinator's HTTP API and dashboard: which request goes where. The coordinator supplies
// what only it knows (its state, the policy switch) as the functions of ControlPlaneApi; this
// file owns the routes, the status codes and the dashboard's files.
//
//   GET  /                the dashboard (and its scripts, styles and charting library)
//   GET  /api/status      nodes, per-worker progress and link use, policy, mode, step
//   GET  /api/history     one sample a second of what the dashboard charts, last ten minutes
//   GET  /metrics         Prometheus text format
//   POST /api/policy      {"policy":"p3","credit":"2MiB"}: every worker switches at its next step
//                         boundary; the answer carries that step
//   GET  /api/prediction  the predictor's images/s for the configuration running now
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "ps/http_server.hpp"

namespace psbed::ps {

struct ControlPlaneApi {
  std::function<nlohmann::json()> status;
  std::function<std::string()> metrics;
  // Starts a switch from a request body (already parsed JSON); `done` gets the HTTP status and
  // the answer, at once for a refusal, or once every worker has switched (or the switch timed out).
  std::function<void(const nlohmann::json& request, std::function<void(int, nlohmann::json)> done)>
      switch_policy;
  // Answers later, from another thread: a prediction may take a while, and the HTTP thread
  // serves every other request meanwhile.
  std::function<void(HttpRespond)> prediction;
  // {"samples":[{"t_s", "images_per_sec", "workers":{name:{...}}}...], "policy_switches":[...]}
  std::function<nlohmann::json()> history;
};

HttpHandler make_control_handler(ControlPlaneApi api);

}  // namespace psbed::ps
