// `psbed predict`: a profile and configurations to predicted throughput, a table row per
// configuration as soon as it and every row before it are simulated.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/policy.hpp"
#include "predictor/analytic.hpp"
#include "predictor/commands.hpp"
#include "predictor/report.hpp"
#include "predictor/sim_flags.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

namespace {

// A --trace-out folder that holds traces already (in it, or in a configuration's subfolder,
// where predict writes them): the new ones would lie beside old node files (15 stale shards
// beside a 1-shard prediction) and be opened together. Refused, as launch refuses an --out that
// holds a run, rather than cleared: the traces may be a measured run's.
void refuse_old_traces(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return;
  auto traces_in = [&](const fs::path& folder) {
    const std::string suffix = ".trace.json";
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      const std::string name = e.path().filename().string();
      n += name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    return n;
  };
  std::size_t found = traces_in(dir);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec)) found += traces_in(e.path());
  if (found > 0)
    throw Error("--trace-out " + dir + " holds traces already (" + std::to_string(found) +
                " *.trace.json): give another folder, or remove them");
}

// Every configuration the flags name, in the table's order (mode, policy, servers, workers); a
// value given twice, an unknown mode or an unknown policy fails before any simulation.
std::vector<SimConfig> predicted_configs(const PredictOptions& o, const SimConfig& base) {
  const auto policies = expand_policies(o.policies);
  // A value given twice would be simulated and printed twice.
  require_distinct("--workers", o.workers);
  require_distinct("--servers", o.servers);
  const bool all = std::find(o.policies.begin(), o.policies.end(), "all") != o.policies.end();
  require_distinct("--policy", policies, all ? " (all names every policy)" : "");
  require_distinct("--mode", o.modes);
  std::vector<SimConfig> configs;
  for (const auto& mode : o.modes)
    for (const auto& pol : policies)
      for (int s : o.servers)
        for (int w : o.workers) {
          SimConfig c = base;
          c.workers = w, c.servers = s, c.policy.name = pol;
          c.mode = for_flag("--mode", [&] { return Consistency::parse(mode); });
          // As launch refuses it: SFB layers need a step to gather the factors for.
          if (const std::string why = comm_problem(c.comm, c.mode); !why.empty()) throw Error(why);
          if (const std::string why = push_pull_problem(c); !why.empty()) throw Error(why);
          check_stragglers(c.stragglers, w);  // worker-N of a cluster that has it
          // An unknown policy fails before any simulation.
          for_flag("--policy", [&] { policy::check_policy_options(c.policy); });
          configs.push_back(c);
        }
  return configs;
}

// The lines above the table: the model, the link, the compute, the length, and the host's
// contention where the profile measured one.
void print_predict_head(const PredictOptions& o, const Profile& profile, const ModelSpec& spec,
                        const SimConfig& base, const std::vector<SimConfig>& configs) {
  std::printf("model %s, batch %d, link %s, %.0f us one way, %s compute, %s%s\n",
              profile.model.c_str(), profile.batch,
              bandwidth_text(base.bandwidth_bytes_per_sec).c_str(), base.latency_s * 1e6,
              base.compute_on_cores ? "real" : "replayed",
              o.analytic_only ? "analytic bounds only"
                              : (std::to_string(base.steps) + " simulated steps").c_str(),
              o.analytic_only ? "" : " per worker");
  if (!base.stragglers.empty()) std::printf("stragglers: %s\n", to_string(base.stragglers).c_str());
  if (profile.contention > 0 && base.compute_on_cores && base.host_cpus > 0)
    std::printf(
        "host: %d cores; with more workers + shards than that, every CPU cost x up to %.2f "
        "(the profile's host.contention, from %s)\n",
        base.host_cpus, 1 + profile.contention,
        profile.source.contains("contention_run")
            ? profile.source["contention_run"].value("run", std::string("a crowded run")).c_str()
            : "a crowded run");
  // The route of the fc layers (core/comm.hpp's choose_comm, as launch prints it), per cluster.
  std::vector<std::string> said;
  for (const SimConfig& c : configs) {
    if (c.comm == CommMode::kPs) break;
    const std::string line =
        std::string("comm ") + to_string(c.comm) + ", " + std::to_string(c.workers) +
        " worker(s), " + std::to_string(c.servers) + " server(s): " +
        choose_comm(spec, c.comm, c.workers, c.servers, profile.batch, c.comm_cost())
            .describe(spec);
    if (std::find(said.begin(), said.end(), line) != said.end()) continue;
    said.push_back(line);
    std::printf("%s\n", line.c_str());
  }
  std::printf("%-7s %-7s %-14s %-6s %10s %11s %-15s %11s %11s  %-18s %s\n", "workers", "servers",
              "policy", "mode", "steps/s", "images/s", "  low-high", "upper", "serial",
              "bottleneck", "regimes (images/s, share)");
}

// A configuration's row of the JSON: what it is, and its analytic bounds `a`.
nlohmann::json prediction_json(const PredictOptions& o, const Profile& profile,
                               const ModelSpec& spec, const SimConfig& c, const AnalyticBounds& a) {
  const std::string layers =
      choose_comm(spec, c.comm, c.workers, c.servers, profile.batch, c.comm_cost()).describe(spec);
  return {{"workers", c.workers},
          {"servers", c.servers},
          {"policy", c.policy.name},
          {"comm", to_string(c.comm)},
          {"comm_layers", layers},
          {"slice_params", c.policy.slice_params},
          {"partition_params", c.policy.partition_params},
          {"credit_bytes", c.policy.credit_bytes},  // -1: the policy's default
          {"partition_bytes", c.partition_bytes},
          {"apply_threads", c.apply_lanes},
          {"replicas", c.replicas},
          {"push_pull", c.push_pull},
          {"straggler_ms", c.straggler_s * 1e3},
          {"stragglers", stragglers_json(c.stragglers)},
          {"profile", o.profile},
          {"mode", c.mode.str()},
          {"bandwidth", bandwidth_text(c.bandwidth_bytes_per_sec)},
          {"bandwidth_bytes_per_sec", c.bandwidth_bytes_per_sec},
          {"latency_us", c.latency_s * 1e6},
          {"link_model", to_string(c.link_model)},
          {"message_cost_us", c.message_cost_s * 1e6},
          {"message_latency_us", c.message_latency_s * 1e6},
          {"transit_ns_per_byte", c.transit_s_per_byte * 1e9},
          {"host_cpus", c.host_cpus},
          {"cpu_per_message_us", c.cpu_per_message_s * 1e6},
          {"cpu_per_byte_ns", c.cpu_per_byte_s * 1e9},
          {"compute", c.compute_on_cores ? "real" : "replay"},
          {"start_stagger_ms", c.start_stagger_s * 1e3},
          {"arrival_jitter_us", c.arrival_jitter_s * 1e6},
          {"seed", c.seed},
          {"seeds", o.sim.seeds},
          {"analytic",
           {{"upper_images_per_sec", a.upper},
            {"serial_images_per_sec", a.serial},
            {"compute_bound", a.compute_bound},
            {"worker_link_bound", a.worker_link_bound},
            {"server_link_bound", a.server_link_bound},
            {"apply_bound", a.apply_bound},
            {"host_bound", a.host_bound},
            {"thread_bound", a.thread_bound},
            {"latency_bound", a.latency_bound},
            {"imbalance", a.imbalance},
            {"bottleneck", a.bottleneck}}}};
}

// Configuration c's row: printed, and added to `out`; r is null for analytic bounds only.
void emit_prediction(const PredictOptions& o, const Profile& profile, const ModelSpec& spec,
                     const SimConfig& c, const SimResult* r, nlohmann::json& out) {
  const AnalyticBounds a = analytic_bounds(profile, spec, c);
  nlohmann::json row = prediction_json(o, profile, spec, c, a);
  if (!r) {
    std::printf("%-7d %-7d %-14s %-6s %10s %11s %-15s %11s %11s  %s\n", c.workers, c.servers,
                c.policy.name.c_str(), c.mode.str().c_str(), "-", "-", "  -",
                fmt(a.upper, 0).c_str(), fmt(a.serial, 0).c_str(), a.bottleneck.c_str());
  } else {
    row["steps_per_sec"] = r->steps_per_sec;
    row["images_per_sec"] = r->images_per_sec;
    row["seeds_min_images_per_sec"] = r->seeds_min_images_per_sec;
    row["seeds_max_images_per_sec"] = r->seeds_max_images_per_sec;
    row["seeds_spread_pct"] = r->seeds_spread_pct();
    row["low"] = r->band.low;  // the band one real run should land in (predictor/band.hpp)
    row["high"] = r->band.high;
    row["band_width_pct"] = r->band.width_pct();
    row["regimes"] = regimes_json(r->band);
    row["draws_images_per_sec"] = r->draws_images_per_sec;
    row["host_cv"] = c.host_cv;
    row["start_spread_ms"] = c.start_spread_s * 1e3;
    row["cpu_contention_scale"] = r->cpu_contention_scale;  // the host's contention, 1: none
    row["steps"] = c.steps;
    row["simulated_seconds"] = r->simulated_seconds;
    row["events"] = r->events;
    row["fidelity"] = r->simulated_workers < c.workers ? "fast" : "exact";
    row["simulated_workers"] = r->simulated_workers;
    if (r->simulated_workers < c.workers) row["fast_check_pct"] = r->fast_check_pct;
    if (!c.trace_dir.empty()) row["traces"] = c.trace_dir, row["traces_seed"] = r->seed;
    const std::string band =
        o.sim.seeds > 1 ? "  " + fmt(r->band.low, 0) + "-" + fmt(r->band.high, 0) : "  -";
    std::printf("%-7d %-7d %-14s %-6s %10s %11s %-15s %11s %11s  %-18s %s\n", c.workers, c.servers,
                c.policy.name.c_str(), c.mode.str().c_str(), fmt(r->steps_per_sec, 2).c_str(),
                fmt(r->images_per_sec, 0).c_str(), band.c_str(), fmt(a.upper, 0).c_str(),
                fmt(a.serial, 0).c_str(), a.bottleneck.c_str(), regimes_text(r->band).c_str());
  }
  std::fflush(stdout);
  out.push_back(row);
}

// Below the table: the rows the fast mode grouped, and those whose figure moved with the groups.
void print_fast_note(const nlohmann::json& rows, int groups) {
  int fast = 0;
  std::string moved;
  for (const auto& row : rows) {
    if (row.value("fidelity", std::string()) != "fast") continue;
    ++fast;
    const double check = row["fast_check_pct"].get<double>();
    if (std::abs(check) <= kFastCheckPct) continue;
    char line[160];
    std::snprintf(line, sizeof line, "\n  %d workers, %d server(s), %s, %s: moved %+.1f%%",
                  row["workers"].get<int>(), row["servers"].get<int>(),
                  row["policy"].get<std::string>().c_str(), row["mode"].get<std::string>().c_str(),
                  check);
    moved += line;
  }
  if (fast == 0) return;
  std::printf(
      "fast: %d row(s) simulated as %d groups of identical workers moving in step "
      "(docs/predictor-model.md, \"Fast mode\"); --fidelity exact simulates every worker\n",
      fast, groups);
  if (!moved.empty())
    std::printf(
        "fast: these moved more than %.0f%% with %d or %d groups (under a credit the finer "
        "has at most %d workers a group, over fewer steps), which do not hold them: confirm "
        "them with --fidelity exact%s\n",
        kFastCheckPct, std::max(1, groups / 2), 2 * groups, kCheckMembers, moved.c_str());
}

// Simulates every configuration, printing the rows in the table's order, each as soon as it and
// every row before it are done.
void predict_simulated(const PredictOptions& o, const Profile& profile, const ModelSpec& spec,
                       std::vector<SimConfig>& configs, nlohmann::json& out) {
  announce("predict", configs.size(), "", o.sim.seeds, o.sim.jobs);
  for (SimConfig& c : configs)
    if (!o.trace_out.empty())
      c.trace_dir = configs.size() == 1
                        ? o.trace_out
                        : o.trace_out + "/" + std::to_string(c.workers) + "w" +
                              std::to_string(c.servers) + "s-" + c.policy.name + "-" + c.mode.str();
  std::vector<std::unique_ptr<SimResult>> finished_rows(configs.size());
  std::size_t finished = 0, printed = 0;
  simulate_all(
      profile, spec, configs, o.sim.seeds, o.sim.jobs, [&](std::size_t i, const SimResult& r) {
        const SimConfig& c = configs[i];
        std::fprintf(stderr, "[%zu/%zu] %d worker(s), %d server(s), %s, %s: %.0f images/s\n",
                     ++finished, configs.size(), c.workers, c.servers, c.policy.name.c_str(),
                     c.mode.str().c_str(), r.images_per_sec);
        finished_rows[i] = std::make_unique<SimResult>(r);
        for (; printed < configs.size() && finished_rows[printed]; ++printed)
          emit_prediction(o, profile, spec, configs[printed], finished_rows[printed].get(), out);
      });
}

}  // namespace

int run_predict(const PredictOptions& o) {
  if (o.analytic_only && !o.trace_out.empty())
    throw UsageError(
        "--analytic and --trace-out: the analytic bounds simulate nothing, so there are no traces "
        "to write (leave one out)");
  Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  SimConfig base = base_config(profile, o.sim);
  std::vector<SimConfig> configs = predicted_configs(o, base);
  ensure_writable_file(o.json_out, "--json");  // output paths too
  refuse_old_traces(o.trace_out);
  ensure_writable_dir(o.trace_out, "--trace-out");
  print_predict_head(o, profile, spec, base, configs);
  nlohmann::json out = nlohmann::json::array();
  if (o.analytic_only) {
    for (const SimConfig& c : configs) emit_prediction(o, profile, spec, c, nullptr, out);
  } else {
    predict_simulated(o, profile, spec, configs, out);
  }
  std::printf(
      "upper: analytic bound with perfect overlap (Yan et al.); serial: no overlap at all\n");
  if (!o.analytic_only && o.sim.seeds > 1)
    std::printf(
        "images/s: the median of %d draws (seeds %s); low-high: the band where one real run "
        "should land 9 times in 10 (their range for up to 38 draws); regimes: groups of draws more "
        "than %.0f%% "
        "apart (workers in lockstep or drifted apart), each one's images/s and share of draws\n",
        o.sim.seeds, seed_range(o.sim.seed, o.sim.seeds).c_str(), 100 * kRegimeGap);
  print_fast_note(out, base.groups);
  write_json(o.json_out, out);
  return 0;
}

}  // namespace psbed::predictor
