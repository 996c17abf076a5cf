// psbed validate's measurement against prediction: the run folders read, repeats of one
// configuration grouped, each configuration simulated, and the errors (validation.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/policy.hpp"
#include "core/stats.hpp"
#include "predictor/calibration.hpp"
#include "predictor/commands.hpp"
#include "predictor/measured_run.hpp"
#include "predictor/parallel.hpp"
#include "predictor/report.hpp"
#include "predictor/sim_flags.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

namespace {

using Group = std::vector<MeasuredRun>;  // the runs of one configuration (repeats)

// Some folders, none of them given twice.
void check_run_folders(const std::vector<std::string>& dirs) {
  if (dirs.empty())
    throw Error(
        "validate: no run folders given (expected one or more `psbed launch` --out folders)");
  // A folder given twice would count as a repeat of itself.
  std::map<std::string, std::string> seen;  // canonical path -> as given
  for (const std::string& d : dirs) {
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(fs::path(d), ec);
    const auto [at, fresh] = seen.emplace(ec ? d : canon.string(), d);
    if (!fresh)
      throw Error("validate: the run folder '" + d + "' is given twice (as '" + at->second +
                  "' before)");
  }
}

// Every run folder read; the failed runs, which are no measurements, are each named and left
// out, and listed in `skipped`.
std::vector<MeasuredRun> read_measured(const Profile& profile, const std::vector<std::string>& dirs,
                                       const SimFlags& flags, nlohmann::json& skipped) {
  const SimConfig base = base_config(profile, flags);
  // The run folders are read on the threads the simulations get (each trace's metadata is
  // parsed from a file of megabytes); a bad folder's error is the first a loop would meet.
  std::vector<MeasuredRun> all(dirs.size());
  parallel_for(dirs.size(), worker_threads(flags.jobs, dirs.size()),
               [&](std::size_t i) { all[i] = read_run(dirs[i], profile, base, flags); });
  std::vector<MeasuredRun> read;
  for (MeasuredRun& m : all) {
    if (m.skipped.empty()) {
      read.push_back(std::move(m));
      continue;
    }
    std::fprintf(stderr, "validate: left out %s: %s\n", m.run.c_str(), m.skipped.c_str());
    skipped.push_back({{"run", m.run}, {"reason", m.skipped}});
  }
  if (read.empty())
    throw Error("validate: none of the " + std::to_string(dirs.size()) +
                " run folder(s) holds a finished run to compare with");
  return read;
}

// --bandwidth and --latency replace the link each run recorded: said once a flag, naming the
// runs whose own link was another, so that a prediction for another link is not taken for one
// of what the run measured.
void say_replaced_links(const std::vector<MeasuredRun>& read, const SimFlags& flags) {
  auto say_replaced = [&](const std::string& flag, const std::string& value, auto differs,
                          auto recorded) {
    if (value.empty()) return;
    std::vector<std::string> names;
    for (const MeasuredRun& m : read)
      if (m.link.known && differs(m)) names.push_back(run_name(m.run) + " (" + recorded(m) + ")");
    if (names.empty()) return;
    constexpr std::size_t kNamed = 6;
    std::string list;
    for (std::size_t i = 0; i < names.size() && i < kNamed; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > kNamed) list += " and " + std::to_string(names.size() - kNamed) + " more";
    std::fprintf(stderr, "validate: %s %s replaces the %s %zu run(s) recorded: %s\n", flag.c_str(),
                 value.c_str(), flag.c_str() + 2, names.size(), list.c_str());
  };
  // An unshaped run's own link is the profile's estimate, where the profile's run was unshaped.
  auto own = [](const MeasuredRun& m, std::string value) {
    return m.link.text == "unshaped" ? "unshaped, predicted at " + value : value;
  };
  say_replaced(
      "--bandwidth", flags.bandwidth,
      [](const MeasuredRun& m) { return m.link.own_bandwidth != m.config.bandwidth_bytes_per_sec; },
      [&](const MeasuredRun& m) {
        return own(m, m.link.own_bandwidth > 0 ? bandwidth_text(m.link.own_bandwidth) : "no limit");
      });
  say_replaced(
      "--latency", flags.latency,
      [](const MeasuredRun& m) { return m.link.own_latency != m.config.latency_s; },
      [&](const MeasuredRun& m) { return own(m, fmt(m.link.own_latency * 1e6, 0) + " us"); });
}

// Runs of one configuration (a sweep's --repeat) are predicted once and compared by the median
// of their measurements: a short run may settle in either of two paces, and one run is one
// draw of them.
std::vector<Group> group_repeats(std::vector<MeasuredRun>& read) {
  std::vector<std::vector<MeasuredRun>> groups;
  std::map<std::string, std::size_t> group_of;
  for (MeasuredRun& m : read) {
    const auto [it, fresh] = group_of.emplace(config_key(m), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(std::move(m));
  }
  // A group is named after its first run in folder-name order: a sweep point's own folder
  // before its <point>-r2/ ... repeats.
  for (auto& g : groups)
    std::stable_sort(g.begin(), g.end(), [](const MeasuredRun& a, const MeasuredRun& b) {
      return run_name(a.run) < run_name(b.run);
    });
  return groups;
}

// Each group's configuration simulated, with a progress line as each completes.
std::vector<SimResult> predict_groups(const Profile& profile, const ModelSpec& spec,
                                      const std::vector<Group>& groups,
                                      const std::vector<SimConfig>& configs,
                                      const SimFlags& flags) {
  std::size_t finished = 0;
  return simulate_all(
      profile, spec, configs, flags.seeds, flags.jobs, [&](std::size_t i, const SimResult& r) {
        const auto& g = groups[i];
        const MeasuredRun& m = g.front();
        std::fprintf(
            stderr,
            "[%zu/%zu] %s%s: %d worker(s), %d server(s), %s, %s, comm %s: %.1f images/s "
            "predicted\n",
            ++finished, groups.size(), m.run.c_str(),
            g.size() > 1 ? (" and " + std::to_string(g.size() - 1) + " repeat(s)").c_str() : "",
            m.config.workers, m.config.servers, m.config.policy.name.c_str(),
            m.config.mode.str().c_str(), to_string(m.config.comm), r.images_per_sec);
      });
}

// Each configuration at its runs' measured host CPU: the median of its runs' CPU per
// worker-step (step_s), their busy cores, that over the simulation's CPU per step (ratio), and
// the simulation with every CPU cost x ratio.
struct CpuWhatIf {
  std::vector<double> ratio, busy, step_s;
  std::vector<SimResult> results;
  std::vector<int> result_of;  // per configuration: its index in results, -1 where none
  std::size_t configurations = 0;
  const SimResult* of(std::size_t i) const {
    return result_of[i] < 0 ? nullptr : &results[std::size_t(result_of[i])];
  }
};

// The host's CPU: each configuration whose runs measured theirs simulated again with every CPU
// cost scaled to it (the median of its runs' CPU per worker-step against what the simulation
// booked on the cores per worker-step). The simulator charges the profiled run's costs (and
// the profile's host.contention where processes outnumber the cores); a host time-sharing
// them may spend otherwise. The figure at the measured CPU says how much of an error
// the CPU per step accounts for; it predicts nothing, since it takes the run's own figure.
CpuWhatIf at_measured_cpu(const Profile& profile, const ModelSpec& spec,
                          const std::vector<Group>& groups, const std::vector<SimConfig>& configs,
                          const std::vector<SimResult>& results, const SimFlags& flags) {
  CpuWhatIf w;
  w.ratio.assign(groups.size(), 0), w.busy.assign(groups.size(), 0),
      w.step_s.assign(groups.size(), 0);
  std::vector<SimConfig> scaled;
  std::vector<std::size_t> scaled_group;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::vector<double> per_step, cores;
    for (const auto& x : groups[i])
      if (x.host.per_step_s > 0)
        per_step.push_back(x.host.per_step_s), cores.push_back(x.host.busy_cores);
    if (per_step.empty() || !(results[i].host_cpu_per_step_s > 0)) continue;
    w.step_s[i] = median(per_step), w.busy[i] = median(cores);
    w.ratio[i] = w.step_s[i] / results[i].host_cpu_per_step_s;
    SimConfig c = configs[i];
    scale_cpu_costs(c, w.ratio[i]);
    scaled.push_back(c), scaled_group.push_back(i);
  }
  if (!scaled.empty()) {
    std::fprintf(stderr,
                 "validate: %zu configuration(s) again at their runs' measured host CPU per step\n",
                 scaled.size());
    w.results = simulate_all(profile, spec, scaled, flags.seeds, flags.jobs);
  }
  w.result_of.assign(groups.size(), -1);
  for (std::size_t k = 0; k < scaled.size(); ++k) w.result_of[scaled_group[k]] = int(k);
  w.configurations = scaled.size();
  return w;
}

// The errors so far: of configurations (their runs' median), of single runs, and at the
// measured CPU.
struct ErrorTotals {
  double sum_abs = 0, max_abs = 0, single_sum = 0, single_max = 0;
  double what_if_sum = 0, what_if_max = 0, what_if_as_profiled = 0;
};

// Configuration i's row of validation.json: its runs' median against its prediction `r`, and
// the figures at the measured CPU where there are some; its errors go into `t`.
nlohmann::json group_row(const Group& g, const SimResult& r, const CpuWhatIf& w, std::size_t i,
                         ErrorTotals& t) {
  const MeasuredRun& m = g.front();
  std::vector<double> measured;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& x : g) {
    measured.push_back(x.measured);
    names.push_back(x.run);
    const double e = x.measured > 0 ? 100 * (r.images_per_sec - x.measured) / x.measured : 0.0;
    t.single_sum += std::fabs(e);
    t.single_max = std::max(t.single_max, std::fabs(e));
  }
  const double mid = median(measured);
  const double err = mid > 0 ? 100 * (r.images_per_sec - mid) / mid : 0.0;
  t.sum_abs += std::fabs(err);
  t.max_abs = std::max(t.max_abs, std::fabs(err));
  nlohmann::json row = {
      {"run", m.run},
      {"repeats", g.size()},
      {"repeat_runs", names},
      {"workers", m.config.workers},
      {"servers", m.config.servers},
      {"policy", m.config.policy.name},
      {"comm", to_string(m.config.comm)},
      {"mode", m.config.mode.str()},
      // The policy's settings where it uses them (null where it does not): a
      // p3 run of 10,000-parameter slices is another configuration than one of 40,000.
      {"slice_params", policy::uses_slice_params(m.config.policy.name)
                           ? nlohmann::json(m.config.policy.slice_params)
                           : nlohmann::json()},
      {"partition_params", policy::uses_partition_params(m.config.policy.name)
                               ? nlohmann::json(m.config.policy.partition_params)
                               : nlohmann::json()},
      {"credit_bytes", policy::uses_credit(m.config.policy.name)
                           ? nlohmann::json(policy::credit_in_effect(m.config.policy))
                           : nlohmann::json()},
      {"partition_bytes", m.config.partition_bytes},
      {"apply_threads", m.config.apply_lanes},
      {"replicas", m.config.replicas},
      {"push_pull", m.config.push_pull},
      {"steps", m.config.steps},  // simulated per worker
      {"recorded_steps", m.recorded["steps"]},
      {"bandwidth", bandwidth_text(m.config.bandwidth_bytes_per_sec)},
      {"bandwidth_bytes_per_sec", m.config.bandwidth_bytes_per_sec},
      {"latency_us", m.config.latency_s * 1e6},
      {"host_cpus", m.config.host_cpus},
      // The link the runs recorded (a flag may have replaced it; null: none
      // recorded, or an unshaped run, which recorded_link says).
      {"recorded_link", m.link.known ? nlohmann::json(m.link.text) : nlohmann::json()},
      {"recorded_bandwidth_bytes_per_sec", m.link.known && m.link.text != "unshaped"
                                               ? nlohmann::json(m.link.bandwidth)
                                               : nlohmann::json()},
      {"recorded_latency_us", m.link.known && m.link.text != "unshaped"
                                  ? nlohmann::json(m.link.latency * 1e6)
                                  : nlohmann::json()},
      {"straggler_ms", m.config.straggler_s * 1e3},
      {"stragglers", to_string(m.config.stragglers)},  // "": none
      {"start_stagger_ms", m.config.start_stagger_s * 1e3},
      {"compute", m.summary.value("compute", std::string("real"))},
      {"predicted_compute", m.config.compute_on_cores ? "real" : "replay"},
      {"measured_images_per_sec", mid},
      {"measured_runs_images_per_sec", measured},
      {"measured_min_images_per_sec", *std::min_element(measured.begin(), measured.end())},
      {"measured_max_images_per_sec", *std::max_element(measured.begin(), measured.end())},
      {"predicted_images_per_sec", r.images_per_sec},
      {"predicted_seeds_min_images_per_sec", r.seeds_min_images_per_sec},
      {"predicted_seeds_max_images_per_sec", r.seeds_max_images_per_sec},
      {"predicted_seeds_spread_pct", r.seeds_spread_pct()},
      {"predicted_draws_images_per_sec", r.draws_images_per_sec},
      {"predicted_low", r.band.low},  // the band one run should land in (predictor/band.hpp)
      {"predicted_high", r.band.high},
      {"predicted_band_width_pct", r.band.width_pct()},
      {"predicted_regimes", regimes_json(r.band)},
      {"host_cv", m.config.host_cv},
      {"start_spread_ms", m.config.start_spread_s * 1e3},
      {"predicted_cpu_contention_scale", r.cpu_contention_scale},
      {"error_pct", err}};
  if (const SimResult* at_cpu = w.of(i)) {
    const double ips = at_cpu->images_per_sec;
    const double e = mid > 0 ? 100 * (ips - mid) / mid : 0.0;
    t.what_if_sum += std::fabs(e), t.what_if_max = std::max(t.what_if_max, std::fabs(e));
    t.what_if_as_profiled += std::fabs(err);
    row["host_cpu"] = {{"per_step_ms", w.step_s[i] * 1e3},
                       {"simulated_per_step_ms", r.host_cpu_per_step_s * 1e3},
                       {"ratio", w.ratio[i]},
                       {"busy_cores", w.busy[i]},
                       {"cores", m.config.host_cpus},
                       {"predicted_images_per_sec", ips},
                       {"error_pct", e}};
  }
  return row;
}

}  // namespace

nlohmann::json validate_runs(const Profile& profile, const ModelSpec& spec,
                             const std::vector<std::string>& dirs, const SimFlags& flags) {
  check_run_folders(dirs);
  nlohmann::json skipped = nlohmann::json::array();
  std::vector<MeasuredRun> read = read_measured(profile, dirs, flags, skipped);
  say_replaced_links(read, flags);
  const std::vector<Group> groups = group_repeats(read);
  std::vector<SimConfig> configs;
  for (const auto& g : groups) configs.push_back(g.front().config);
  announce("validate", configs.size(), " from " + std::to_string(read.size()) + " run(s)",
           flags.seeds, flags.jobs);
  const std::vector<SimResult> results = predict_groups(profile, spec, groups, configs, flags);
  const CpuWhatIf what_if = at_measured_cpu(profile, spec, groups, configs, results, flags);
  nlohmann::json runs = nlohmann::json::array();
  ErrorTotals t;
  for (std::size_t i = 0; i < groups.size(); ++i)
    runs.push_back(group_row(groups[i], results[i], what_if, i, t));
  nlohmann::json host_cpu = nullptr;
  if (what_if.configurations > 0)
    host_cpu = {
        {"profiled_per_step_ms", profile.source.value("host_cpu_per_step_ms", nlohmann::json())},
        {"profiled_busy_cores", profile.source.value("host_busy_cores", nlohmann::json())},
        {"configurations", what_if.configurations},
        {"mean_abs_error_pct", t.what_if_sum / double(what_if.configurations)},
        {"max_abs_error_pct", t.what_if_max},
        {"as_profiled_mean_abs_error_pct", t.what_if_as_profiled / double(what_if.configurations)}};
  return {{"runs", runs},
          {"seed", flags.seed},
          {"seeds", flags.seeds},
          {"arrival_jitter_us", flags.arrival_jitter_us},
          {"configurations", groups.size()},
          {"runs_measured", read.size()},
          {"runs_left_out", skipped},
          {"mean_abs_error_pct", t.sum_abs / double(groups.size())},
          {"max_abs_error_pct", t.max_abs},
          {"single_run_mean_abs_error_pct", t.single_sum / double(read.size())},
          {"single_run_max_abs_error_pct", t.single_max},
          {"at_measured_host_cpu", host_cpu},
          {"calibration", calibration_of(runs)}};
}

}  // namespace psbed::predictor
