#include "cluster/verify.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cluster/launch.hpp"
#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "workloads/dataset.hpp"

namespace psbed::cluster {
namespace fs = std::filesystem;

namespace {

std::string default_out(const std::string& model, int workers, int servers) {
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/verify-" + model + "-" + std::to_string(workers) + "w" + std::to_string(servers) +
         "s-" + stamp;
}

}  // namespace

LaunchOptions verify_launch(const predictor::OptimizeOptions& o, const VerifyOptions& v,
                            const Profile& profile, const predictor::OptimizeChoice& c,
                            const std::string& out) {
  LaunchOptions l;
  l.workers = c.workers, l.servers = c.servers;
  l.mode = c.mode, l.policy = c.policy;
  l.comm = o.sim.comm;  // the route the ranking simulated
  l.slice_params = c.slice_params, l.partition_params = c.partition_params;
  if (c.credit_bytes >= 0) l.credit = std::to_string(c.credit_bytes);
  l.partition_bytes = o.sim.partition_bytes;
  l.bandwidth = c.bandwidth, l.latency = c.latency;
  l.straggler_ms = o.sim.straggler_ms;
  l.stragglers = o.sim.stragglers;
  // The shard's lanes and the start the ranking simulated: the run is the configuration ranked.
  l.apply_threads = o.sim.apply_lanes;
  l.replicas = o.sim.replicas;
  if (o.sim.start_stagger_ms > 0) l.start_stagger_ms = o.sim.start_stagger_ms;
  l.batch = profile.batch, l.steps = v.steps;
  l.lr_schedule = "constant";
  l.data = v.data;
  l.compute = v.compute.empty() ? "replay:" + o.profile : v.compute;
  l.timeout_s = v.timeout_s;
  l.out = out;
  // The model the profile was taken on: the shipped one of that name if it is the same network,
  // else the spec the profile carries, so a model that is not shipped launches too.
  l.model = profile.model;
  if (profile.source.contains("model_toml")) {
    bool shipped = false;
    try {
      profile.check_matches(load_model(profile.model), "profile '" + o.profile + "'");
      shipped = true;
    } catch (const Error&) {
    }
    if (!shipped) {
      l.model = l.out + "/model.toml";
      std::ofstream(l.model) << profile.source["model_toml"].get<std::string>();
    }
  }
  return l;
}

int run_optimize_verify(const predictor::OptimizeOptions& options, const VerifyOptions& v) {
  if (v.enabled && v.steps < 1)
    throw Error("optimize --verify-steps must be at least 1, got " + std::to_string(v.steps));
  if (v.enabled && v.repeat < 0)
    throw Error("optimize --verify-repeat must be 0 (no settings check) or more, got " +
                std::to_string(v.repeat));
  // The ranking predicts the compute the run will have: replay unless --verify-compute real.
  predictor::OptimizeOptions o = options;
  if (v.enabled && o.sim.compute == "auto")
    o.sim.compute = v.compute.empty() || v.compute.rfind("replay", 0) == 0 ? "replay" : "real";
  if (v.enabled) {
    // What the run needs, checked before the search rather than after it: its data set and
    // its compute (the model is the profile's).
    const Profile profile = Profile::load(o.profile);
    const ModelSpec spec = predictor::profile_model_spec(profile, o.profile);
    try {
      workloads::load_dataset(v.data, "", spec.input, spec.classes, 1);
    } catch (const Error& e) {
      throw Error(std::string("optimize --verify-data: ") + e.what());
    }
    if (!v.compute.empty()) check_compute(v.compute, spec, "optimize --verify-compute");
    if (!v.out.empty() && fs::exists(fs::path(v.out) / "summary.json"))
      throw Error("optimize --verify-out " + v.out +
                  " holds a run already (summary.json): give another folder, or remove it");
    std::error_code ec;
    if (!v.out.empty() && v.repeat > 0 && !fs::is_empty(settings_folder(v.out), ec) && !ec)
      throw Error("optimize --verify-out: " + settings_folder(v.out) +
                  " holds the runs of a settings check already: give another folder, or remove it");
  }
  predictor::OptimizeChoice best;
  std::vector<predictor::OptimizeChoice> settings;
  const int rc = predictor::run_optimize(o, v.enabled ? &best : nullptr, &settings);
  if (rc != 0 || !v.enabled) return rc;
  if (best.workers == 0)
    throw Error("optimize --verify: no configuration was simulated, nothing to launch");

  const Profile profile = Profile::load(o.profile);
  const ModelSpec spec = predictor::profile_model_spec(profile, o.profile);
  const std::string out =
      v.out.empty() ? default_out(spec.name, best.workers, best.servers) : v.out;
  const bool made_out = !fs::exists(out);
  fs::create_directories(out);
  const LaunchOptions l = verify_launch(o, v, profile, best, out);
  std::printf(
      "verify: launching the first by images/s: %d workers, %d servers, %s, %s, link %s%s%s, "
      "compute %s, %lld steps -> %s\n",
      l.workers, l.servers, l.policy.c_str(), l.mode.c_str(),
      l.bandwidth.empty() ? "unshaped" : l.bandwidth.c_str(), l.latency.empty() ? "" : " + ",
      l.latency.c_str(), l.compute.c_str(), (long long)l.steps, l.out.c_str());
  std::fflush(stdout);
  int launch_rc = 0;
  try {
    launch_rc = run_launch(l);
  } catch (...) {
    // Refused before it started: no empty run folder left behind.
    std::error_code ec;
    if (made_out && fs::is_empty(out, ec)) fs::remove(out, ec);
    throw;
  }
  if (launch_rc != 0) {
    spdlog::error("verify: the run in {} failed (status {}); see the output above and {}/logs/",
                  l.out, launch_rc, l.out);
    return launch_rc;
  }
  // The same configuration predicted for the run's own length, beside what it measured.
  predictor::SimFlags flags = o.sim;
  flags.steps = 0;
  flags.seeds = std::max(flags.seeds, predictor::kBandDraws);  // as psbed validate, at least
  const nlohmann::json val = predictor::validate_runs(profile, spec, {l.out}, flags);
  const auto& r = val.at("runs").at(0);
  const double measured = r.at("measured_images_per_sec").get<double>();
  const double predicted = r.at("predicted_images_per_sec").get<double>();
  const double error = r.at("error_pct").get<double>();
  std::printf(
      "\nverify: %s\n  measured  %10.1f images/s\n  predicted %10.1f images/s (%+.1f%%, %d seeds; "
      "optimize's "
      "ranking said %.1f over %lld simulated steps, the median of %d seed(s))\n",
      l.out.c_str(), measured, predicted, error, flags.seeds, best.images_per_sec,
      (long long)o.sim.steps, best.seeds);
  nlohmann::json record = {{"run", l.out},
                           {"workers", l.workers},
                           {"servers", l.servers},
                           {"policy", l.policy},
                           {"mode", l.mode},
                           {"slice_params", l.slice_params},
                           {"partition_params", l.partition_params},
                           {"credit_bytes", best.credit_bytes},
                           {"bandwidth", l.bandwidth},
                           {"latency", l.latency},
                           {"compute", l.compute},
                           {"steps", l.steps},
                           {"measured_images_per_sec", measured},
                           {"predicted_images_per_sec", predicted},
                           {"error_pct", error},
                           {"optimize_images_per_sec", best.images_per_sec}};
  std::ofstream(l.out + "/verify.json") << record.dump(2) << "\n";
  std::printf("  written to %s/verify.json\n", l.out.c_str());
  if (v.repeat < 1) return 0;
  return verify_settings(o, v, profile, settings, settings_folder(out));
}

}  // namespace psbed::cluster
