#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cluster/sweep_parts.hpp"
#include "cluster/verify.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"

namespace psbed::cluster {
namespace fs = std::filesystem;

namespace {

// A run's images/s as its summary gives it (the steady state, all workers together).
double measured_images_per_sec(const std::string& run) {
  std::ifstream in(run + "/summary.json");
  if (!in) throw Error("verify: " + run + "/summary.json is missing after the run ended");
  return nlohmann::json::parse(in).at("images_per_sec").get<double>();
}

}  // namespace

int verify_settings(const predictor::OptimizeOptions& o, const VerifyOptions& v,
                    const Profile& profile, const std::vector<predictor::OptimizeChoice>& settings,
                    const std::string& folder) {
  if (settings.empty()) {
    std::printf(
        "\nverify settings: no ranked configuration's policy has settings that act differently "
        "here (p3's slice and credit, bytescheduler's partition and credit): nothing to check\n");
    return 0;
  }
  const predictor::OptimizeChoice& rec = settings.front();
  const std::size_t n = settings.size();
  std::printf(
      "\nverify settings: %s at %d workers, %d servers, against the %zu other setting(s) the "
      "search tried there: %zu x %d runs, in alternating order -> %s\n",
      rec.description.c_str(), rec.workers, rec.servers, n - 1, n, v.repeat, folder.c_str());
  std::fflush(stdout);
  fs::create_directories(folder);
  std::vector<std::vector<double>> measured(n);
  nlohmann::json runs = nlohmann::json::array();
  int done = 0;
  // Each run a child launch, its output in its folder's launch.log, so that the terminal shows
  // one line a run; a Ctrl-C reaches the run and ends the check. SIGCHLD wakes the wait for it.
  ps::BlockedStopSignals stops(true, {SIGCHLD});
  for (int r = 0; r < v.repeat; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      // Every other round backwards, so that a drift of the host's speed favours none.
      const std::size_t k = r % 2 == 0 ? i : n - 1 - i;
      const std::string run =
          folder + "/setting" + std::to_string(k) + "-run" + std::to_string(r + 1);
      fs::create_directories(run);
      const int rc = sweep_detail::run_launch_child(
          sweep_detail::launch_args(verify_launch(o, v, profile, settings[k], run)),
          run + "/launch.log", stops);
      if (rc != 0) {
        spdlog::error("verify settings: the run in {} failed (status {}); see {}/launch.log", run,
                      rc, run);
        return rc;
      }
      measured[k].push_back(measured_images_per_sec(run));
      runs.push_back({{"run", run}, {"setting", k}, {"images_per_sec", measured[k].back()}});
      std::printf("verify settings [%d/%zu] %s: %.1f images/s\n", ++done, n * std::size_t(v.repeat),
                  settings[k].description.c_str(), measured[k].back());
      std::fflush(stdout);
    }

  std::vector<double> med(n);
  for (std::size_t k = 0; k < n; ++k) med[k] = median(measured[k]);
  const std::size_t best = std::size_t(std::max_element(med.begin(), med.end()) - med.begin());
  const double below_pct = 100.0 * (med[best] - med[0]) / med[best];
  const bool pass = below_pct <= kSettingsCheckPct;

  std::size_t width = 7;
  for (const auto& s : settings) width = std::max(width, s.description.size());
  std::printf("\nverify settings: medians of %d run(s) each\n%-*s %13s %13s %9s\n", v.repeat,
              int(width), "setting", "ranking said", "measured", "vs best");
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t k = 0; k < n; ++k) {
    const double vs = 100.0 * (med[k] - med[best]) / med[best];
    std::printf("%-*s %13.1f %13.1f %+8.1f%%%s\n", int(width), settings[k].description.c_str(),
                settings[k].images_per_sec, med[k], vs,
                k == 0 ? "  recommended" : (k == best ? "  best measured" : ""));
    const auto& s = settings[k];
    rows.push_back({{"description", s.description},
                    {"slice_params", s.slice_params},
                    {"partition_params", s.partition_params},
                    {"credit_bytes", s.credit_bytes},
                    {"recommended", k == 0},
                    {"optimize_images_per_sec", s.images_per_sec},
                    {"optimize_seeds", s.seeds},
                    {"measured_images_per_sec", med[k]},
                    {"measured_runs", measured[k]},
                    {"vs_best_pct", vs}});
  }
  std::printf(
      "verify settings: the recommended setting measured %.1f%% below the best measured "
      "(allowed: %.0f%%): %s\n",
      std::max(0.0, below_pct), kSettingsCheckPct, pass ? "pass" : "FAIL");
  const nlohmann::json record = {{"workers", rec.workers},
                                 {"servers", rec.servers},
                                 {"policy", rec.policy},
                                 {"mode", rec.mode},
                                 {"bandwidth", rec.bandwidth},
                                 {"latency", rec.latency},
                                 {"repeat", v.repeat},
                                 {"settings", rows},
                                 {"runs", runs},
                                 {"best", best},
                                 {"recommended_below_best_pct", std::max(0.0, below_pct)},
                                 {"allowed_pct", kSettingsCheckPct},
                                 {"pass", pass}};
  std::ofstream(folder + "/settings.json") << record.dump(2) << "\n";
  std::printf("  written to %s/settings.json\n", folder.c_str());
  return pass ? 0 : 1;
}

}  // namespace psbed::cluster
