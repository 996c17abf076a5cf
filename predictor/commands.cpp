#include "predictor/commands.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/run_program.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "predictor/analytic.hpp"
#include "predictor/parallel.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

// The spec travels in the profile when it came from a run, so a model that is not shipped
// still predicts; older profiles fall back to the shipped spec of that name.
ModelSpec profile_model_spec(const Profile& p, const std::string& profile_path) {
  ModelSpec spec = p.source.contains("model_toml")
                       ? parse_model_spec(p.source["model_toml"].get<std::string>(),
                                          profile_path + " (model spec)")
                       : load_model(p.model);
  p.check_matches(spec, "profile '" + profile_path + "'");
  return spec;
}

namespace {

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  ensure_writable_file(path, "'" + path + "'");
  std::ofstream out(path);
  if (!out) throw Error("cannot write '" + path + "'");
  out << j.dump(2) << "\n";
}

std::vector<std::string> expand_policies(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (n == "all") {
      for (const auto& p : policy::policy_names()) out.push_back(p);
    } else {
      out.push_back(n);
    }
  return out;
}

// Seeds whose images/s differ by more than this share of the median: the configuration sits
// between two regimes, and either can happen.
constexpr double kRegimeSpreadPct = 10;

std::string fmt(double v, int prec = 1) {
  if (std::isinf(v)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

}  // namespace

std::string seed_range(std::uint64_t seed, int seeds) {
  const std::uint64_t last = seed + std::uint64_t(seeds - 1);  // unsigned: wraps past 2^64 - 1 to 0
  if (seeds <= 1) return std::to_string(seed);
  if (last >= seed) return std::to_string(seed) + " to " + std::to_string(last);
  const std::string before = seed == UINT64_MAX ? std::to_string(seed) : std::to_string(seed) + " to " + std::to_string(UINT64_MAX);
  return before + ", then " + (last == 0 ? std::string("0") : "0 to " + std::to_string(last));
}

namespace {

// What a spread over kRegimeSpreadPct means, as predict's and optimize's tables say it.
std::string regime_edge_note() {
  return "Over " + fmt(kRegimeSpreadPct, 0) + "%, the configuration sits between two regimes " +
         "(workers in lockstep or drifted apart) and a real run can land in either";
}

// The progress line a simulating command starts with: how much it simulates, on how many threads.
void announce(const char* command, std::size_t configurations, const std::string& source,
              int seeds, int jobs) {
  std::fprintf(stderr, "%s: %zu configuration(s)%s, %d seed(s) each, on %d thread(s)\n", command,
               configurations, source.c_str(), seeds,
               worker_threads(jobs, configurations * std::size_t(seeds)));
}

// The configuration shared by every simulated point, from the flags and the profile's link.
SimConfig base_config(const Profile& profile, const SimFlags& f) {
  SimConfig c;
  c.bandwidth_bytes_per_sec = f.bandwidth.empty() ? profile.bandwidth_bytes_per_sec
                              : f.bandwidth == "0" || f.bandwidth == "unshaped"
                                  ? 0.0
                                  : for_flag("--bandwidth", [&] { return parse_bandwidth_bps(f.bandwidth); }) / 8;
  c.latency_s = f.latency.empty() ? profile.latency_us * 1e-6
                                  : for_flag("--latency", [&] { return parse_duration_s(f.latency); });
  c.link_model = for_flag("--link-model", [&] { return parse_link_model(f.link_model); });
  take_host_costs(profile, c);
  c.partition_bytes = std::int64_t(for_flag("--partition-bytes", [&] { return parse_bytes(f.partition_bytes); }));
  if (c.partition_bytes < 4)
    throw Error("--partition-bytes " + f.partition_bytes + ": expected 4 bytes (one float) or more");
  c.policy.slice_params = f.slice_params;
  c.policy.partition_params = f.partition_params;
  if (!f.credit.empty())
    c.policy.credit_bytes = std::int64_t(for_flag("--credit", [&] { return parse_bytes(f.credit); }));
  c.apply_lanes = f.apply_lanes;
  c.steps = f.steps;
  c.seed = f.seed;
  c.policy.seed = f.seed;  // tf-random
  c.straggler_s = f.straggler_ms / 1e3;
  c.start_stagger_s = std::max(0.0, f.start_stagger_ms) / 1e3;
  c.arrival_jitter_s = f.arrival_jitter_us * 1e-6;
  if (f.host_cpus >= 0) c.host_cpus = f.host_cpus;
  if (f.compute != "auto" && f.compute != "real" && f.compute != "replay")
    throw Error("unknown compute '" + f.compute + "', expected auto, real or replay");
  const std::string compute =
      f.compute == "auto" ? profile.source.value("compute", std::string("real")) : f.compute;
  c.compute_on_cores = compute == "real";
  return c;
}

// "runs/sweep/x/" -> "x"
std::string run_name(const std::string& dir) {
  fs::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string bandwidth_text(double bytes_per_sec) {
  return bytes_per_sec > 0 ? format_bandwidth(bytes_per_sec * 8) : std::string("unlimited");
}

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
      n += name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
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

}  // namespace

void measure_contention(Profile& p, const std::string& run);  // below, beside read_run

int run_profile(const ProfileCommandOptions& o) {
  std::error_code ec;
  if (fs::exists(o.extract.run, ec) && !fs::is_directory(o.extract.run, ec))
    throw Error("'" + o.extract.run + "' is a file, not a run folder (expected the --out folder of `psbed launch`)");
  ensure_writable_file(o.out, "--out");  // before the extraction and the contention's simulations
  Profile p = extract_profile(o.extract);
  if (!o.contention_run.empty()) measure_contention(p, o.contention_run);
  p.save(o.out);
  const double pace = p.source.value("measured_steps_per_sec", 0.0);
  std::string calibration;
  if (p.source.contains("calibrated_link_model"))
    calibration = "calibrated to the run's " + fmt(pace, 1) + " steps/s";
  else if (p.source.contains("calibrated"))
  {
    std::string why = p.source["calibrated"].get<std::string>();
    if (why.rfind("no: ", 0) == 0) why = why.substr(4);
    calibration = "not calibrated: " + why;
  }
  else if (!o.extract.calibrate)
    calibration = "not calibrated: --no-calibrate";
  else if (pace > 0)
    calibration = "no fit to the run's " + fmt(pace, 1) + " steps/s was kept, see below";
  else
    calibration = "not calibrated: the run's pace is unknown";
  std::fprintf(stderr,
               "profile of %s (batch %d) from %s: %zu steps, compute %.3f ms/step, link %s, "
               "message cost %.0f us + latency %.0f us, transit %.2f ns/byte (%s)\n",
               p.model.c_str(), p.batch, o.extract.run.c_str(), p.layers[0].forward_ms.size(),
               p.mean_compute_ms(),
               p.shaped.empty() ? (bandwidth_text(p.bandwidth_bytes_per_sec) + ", " +
                                   std::to_string(int(p.latency_us)) + " us one way (estimated)")
                                      .c_str()
                                : p.shaped.c_str(),
               p.message_cost_us, p.message_latency_us, p.transit_ns_per_byte, calibration.c_str());
  if (p.host_cpus > 0)
    std::fprintf(stderr,
                 "  host: %d CPUs; the nodes' CPU over the steady steps is %.0f us per message received + "
                 "%.2f ns per byte (measured copies)\n",
                 p.host_cpus, p.cpu_per_message_us, p.cpu_per_byte_ns);
  if (p.source.contains("pulls_latency_us"))
    std::fprintf(stderr,
                 "  the pulls' latency, %.0f us one way, holds both ends' software time, which "
                 "the host's CPU charges again: lowered to %.0f us so the simulated run keeps "
                 "its pace\n",
                 p.source["pulls_latency_us"].get<double>(), p.latency_us);
  for (const char* key : {"refused_message_cost_us", "refused_message_latency_us"})
    if (p.source.contains(key))
      std::fprintf(stderr,
                   "  (a per-message %s of %.0f us would match the run's pace, beyond the %.0f us any "
                   "receive takes here: the gap is not per-message work, so it was fitted per byte)\n",
                   std::string(key).find("latency") != std::string::npos ? "latency" : "cost",
                   p.source[key].get<double>(), kMaxPlausibleMessageCostUs);
  if (p.source.contains("warnings"))
    for (const auto& w : p.source["warnings"]) std::fprintf(stderr, "  warning: %s\n", w.get<std::string>().c_str());
  if (p.source.contains("refused_transit_ns_per_byte"))
    std::fprintf(stderr,
                 "  (nor per byte: %.1f ns/byte is beyond the %.0f ns/byte a host copy costs; both stay 0 and the "
                 "gap to the run's pace is left unexplained)\n",
                 p.source["refused_transit_ns_per_byte"].get<double>(), kMaxPlausibleTransitNsPerByte);
  std::printf("%s\n", o.out.c_str());
  return 0;
}

int run_predict(const PredictOptions& o) {
  if (o.analytic_only && !o.trace_out.empty())
    throw UsageError("--analytic and --trace-out: the analytic bounds simulate nothing, so there are no traces "
                     "to write (leave one out)");
  Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  SimConfig base = base_config(profile, o.sim);
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
          // An unknown policy fails before any simulation.
          for_flag("--policy", [&] { return policy::make_policy(c.policy); });
          configs.push_back(c);
        }
  ensure_writable_file(o.json_out, "--json");  // output paths too
  refuse_old_traces(o.trace_out);
  ensure_writable_dir(o.trace_out, "--trace-out");
  std::printf("model %s, batch %d, link %s, %.0f us one way, %s compute, %s%s\n",
              profile.model.c_str(), profile.batch,
              bandwidth_text(base.bandwidth_bytes_per_sec).c_str(), base.latency_s * 1e6,
              base.compute_on_cores ? "real" : "replayed",
              o.analytic_only ? "analytic bounds only"
                              : (std::to_string(base.steps) + " simulated steps").c_str(),
              o.analytic_only ? "" : " per worker");
  if (profile.contention > 0 && base.compute_on_cores && base.host_cpus > 0)
    std::printf("host: %d cores; with more workers + shards than that, every CPU cost x up to %.2f "
                "(the profile's host.contention, from %s)\n",
                base.host_cpus, 1 + profile.contention,
                profile.source.contains("contention_run")
                    ? profile.source["contention_run"].value("run", std::string("a crowded run")).c_str()
                    : "a crowded run");
  std::printf("%-7s %-7s %-14s %-6s %10s %11s %7s   %11s %11s  %s\n", "workers", "servers",
              "policy", "mode", "steps/s", "images/s", "spread", "upper", "serial", "bottleneck");
  nlohmann::json out = nlohmann::json::array();
  // Prints configuration i's row and adds it to the JSON; r is null for analytic bounds only.
  auto emit = [&](std::size_t index, const SimResult* r) {
    const SimConfig& c = configs[index];
    const AnalyticBounds a = analytic_bounds(profile, spec, c);
    nlohmann::json row = {{"workers", c.workers},
                          {"servers", c.servers},
                          {"policy", c.policy.name},
                          {"slice_params", c.policy.slice_params},
                          {"partition_params", c.policy.partition_params},
                          {"credit_bytes", c.policy.credit_bytes},  // -1: the policy's default
                          {"partition_bytes", c.partition_bytes},
                          {"apply_threads", c.apply_lanes},
                          {"straggler_ms", c.straggler_s * 1e3},
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
    if (!r) {
      std::printf("%-7d %-7d %-14s %-6s %10s %11s %7s   %11s %11s  %s\n", c.workers, c.servers,
                  c.policy.name.c_str(), c.mode.str().c_str(), "-", "-", "-",
                  fmt(a.upper, 0).c_str(), fmt(a.serial, 0).c_str(), a.bottleneck.c_str());
    } else {
      row["steps_per_sec"] = r->steps_per_sec;
      row["images_per_sec"] = r->images_per_sec;
      row["seeds_min_images_per_sec"] = r->seeds_min_images_per_sec;
      row["seeds_max_images_per_sec"] = r->seeds_max_images_per_sec;
      row["seeds_spread_pct"] = r->seeds_spread_pct();
      row["cpu_contention_scale"] = r->cpu_contention_scale;  // the host's contention, 1: none
      row["steps"] = c.steps;
      row["simulated_seconds"] = r->simulated_seconds;
      row["events"] = r->events;
      if (!c.trace_dir.empty()) row["traces"] = c.trace_dir, row["traces_seed"] = r->seed;
      const std::string spread = o.sim.seeds > 1 ? fmt(r->seeds_spread_pct(), 0) + "%" : "-";
      std::printf("%-7d %-7d %-14s %-6s %10s %11s %7s   %11s %11s  %s\n", c.workers, c.servers,
                  c.policy.name.c_str(), c.mode.str().c_str(), fmt(r->steps_per_sec, 2).c_str(),
                  fmt(r->images_per_sec, 0).c_str(), spread.c_str(), fmt(a.upper, 0).c_str(),
                  fmt(a.serial, 0).c_str(), a.bottleneck.c_str());
    }
    std::fflush(stdout);
    out.push_back(row);
  };
  if (o.analytic_only) {
    for (std::size_t i = 0; i < configs.size(); ++i) emit(i, nullptr);
  } else {
    announce("predict", configs.size(), "", o.sim.seeds, o.sim.jobs);
    for (SimConfig& c : configs)
      if (!o.trace_out.empty())
        c.trace_dir = configs.size() == 1 ? o.trace_out
                                          : o.trace_out + "/" + std::to_string(c.workers) + "w" +
                                                std::to_string(c.servers) + "s-" + c.policy.name +
                                                "-" + c.mode.str();
    // Rows go out in the table's order, each as soon as it and every row before it are done.
    std::vector<std::unique_ptr<SimResult>> finished_rows(configs.size());
    std::size_t finished = 0, printed = 0;
    simulate_all(profile, spec, configs, o.sim.seeds, o.sim.jobs,
                 [&](std::size_t i, const SimResult& r) {
                   const SimConfig& c = configs[i];
                   std::fprintf(stderr, "[%zu/%zu] %d worker(s), %d server(s), %s, %s: %.0f images/s\n",
                                ++finished, configs.size(), c.workers, c.servers,
                                c.policy.name.c_str(), c.mode.str().c_str(), r.images_per_sec);
                   finished_rows[i] = std::make_unique<SimResult>(r);
                   for (; printed < configs.size() && finished_rows[printed]; ++printed)
                     emit(printed, finished_rows[printed].get());
                 });
  }
  std::printf(
      "upper: analytic bound with perfect overlap (Yan et al.); serial: no overlap at all\n");
  if (!o.analytic_only && o.sim.seeds > 1)
    std::printf("images/s: the median of %d seeds (%s); spread: (highest - lowest) / median. %s\n",
                o.sim.seeds, seed_range(o.sim.seed, o.sim.seeds).c_str(), regime_edge_note().c_str());
  write_json(o.json_out, out);
  return 0;
}

namespace {

// The link a run recorded (its traces' metadata, or summary.json's launch), in bytes/s and
// seconds one way; `known` is false for an older run that recorded none.
struct RecordedLink {
  bool known = false;
  std::string text;                   // as recorded: "1.00 Gbit/s, 200 us one way", "unshaped"
  double bandwidth = 0, latency = 0;  // bytes/s and s as recorded (0 for an unshaped run)
  // What the run is predicted on where no --bandwidth or --latency replaces it (an unshaped run:
  // the profile's estimate of the host's link where the profile's run was unshaped too).
  double own_bandwidth = 0, own_latency = 0;
};

struct MeasuredRun {
  std::string run;
  nlohmann::json summary;
  SimConfig config;
  double measured = 0;
  std::string skipped;  // why the run is no measurement (it failed), empty if it is one
  HostCpu host;         // its host CPU per worker-step, where comparable with the simulation's
  RecordedLink link;
  // What the run recorded of the settings a flag may replace in its prediction (--steps,
  // --start-stagger-ms, --compute, --host-cpus): runs that differ in them are no repeats of one
  // configuration, even where the flags predict them alike.
  nlohmann::json recorded = nlohmann::json::object();
};

// summary.json's field `key`, of JSON type `want` (a number, a string); errors name the file.
const nlohmann::json& summary_field(const nlohmann::json& s, const char* key,
                                    nlohmann::json::value_t want, const std::string& path) {
  if (!s.contains(key)) throw Error("'" + path + "' has no '" + key + "' (an unfinished run?)");
  const nlohmann::json& v = s[key];
  const bool number = want == nlohmann::json::value_t::number_float;
  if (number ? !v.is_number() : v.type() != want)
    throw Error("'" + path + "': '" + key + "' is " + v.dump() + ", expected " +
                (number ? "a number" : "a string"));
  return v;
}

// The link a run was launched with, as the worker traces' metadata and summary.json's
// launch.link write it ("1.00 Gbit/s, 200 us one way", "unshaped"), into `recorded`, and into
// `c` where no flag replaces it. An unshaped run is predicted on the profile's link estimate
// when the profile's run was unshaped too (host loopback, as measured), and without a link
// limit when the profile's was shaped.
void take_run_link(const std::string& link, const Profile& profile, const SimFlags& flags,
                   SimConfig& c, RecordedLink& recorded) {
  double bw = 0, lat = 0;
  if (parse_link_metadata(link, &bw, &lat)) {
    recorded = {true, link, bw, lat, bw, lat};
    if (flags.bandwidth.empty()) c.bandwidth_bytes_per_sec = bw;
    if (flags.latency.empty()) c.latency_s = lat;
  } else if (link == "unshaped") {
    const bool estimate = profile.shaped.empty();
    recorded = {true, link, 0, 0, estimate ? profile.bandwidth_bytes_per_sec : 0.0,
                estimate ? profile.latency_us * 1e-6 : 0.0};
    if (estimate) return;
    if (flags.bandwidth.empty()) c.bandwidth_bytes_per_sec = 0;
    if (flags.latency.empty()) c.latency_s = 0;
  }
}

// The policy's slice, partition and credit (`policy`: an object holding them) and the delays a
// run had, into `c`, where the flags do not set them.
void take_run_settings(const nlohmann::json& policy, double straggler_ms, double start_stagger_ms,
                       const SimFlags& flags, SimConfig& c) {
  c.policy.slice_params = policy.value("slice_params", c.policy.slice_params);
  c.policy.partition_params = policy.value("partition_params", c.policy.partition_params);
  c.policy.credit_bytes = policy.value("credit_bytes", c.policy.credit_bytes);
  c.straggler_s = straggler_ms / 1e3;  // the run's own: validate has no --straggler-ms
  if (flags.start_stagger_ms < 0) c.start_stagger_s = start_stagger_ms / 1e3;
}

// A measured run's configuration, from its summary.json and a worker trace's metadata (the
// link and the policy parameters live there; runs launched without traces have them in
// summary.json). Errors name the run folder; a run that failed comes back with `skipped` set.
MeasuredRun read_run(const std::string& dir, const Profile& profile, const SimConfig& base,
                     const SimFlags& flags) {
  MeasuredRun m;
  m.run = dir;
  const std::string path = dir + "/summary.json";
  std::error_code ec;
  // `validate runs/*` lists the files beside the run folders too: say which is which.
  if (!fs::exists(dir, ec))
    throw Error("run folder '" + dir + "' does not exist (expected the --out folder of `psbed launch`)");
  if (!fs::is_directory(dir, ec))
    throw Error("'" + dir + "' is a file, not a run folder (expected the --out folder of `psbed launch`; " +
                "runs/*/ with the slash lists folders only)");
  std::ifstream in(path);
  if (!in)
    throw Error("run folder '" + dir +
                "' has no summary.json (expected the --out folder of `psbed launch`)");
  try {
    m.summary = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not JSON: " + e.what());
  }
  const auto& s = m.summary;
  if (!s.is_object()) throw Error("'" + path + "' is not a JSON object");
  using T = nlohmann::json::value_t;
  if (!s.value("ok", true)) {
    m.skipped = "the run failed" + (s.contains("failure") ? ": " + s["failure"].dump() : std::string());
    return m;
  }
  // A run that lost a node, or changed policy midway, measured another configuration than the
  // one its settings name: no measurement of it.
  if (s.contains("failed_nodes") && s["failed_nodes"].is_array() && !s["failed_nodes"].empty()) {
    std::string names;
    for (const auto& n : s["failed_nodes"])
      names += (names.empty() ? "" : ", ") +
               (n.is_object() && n.contains("name") ? n["name"].get<std::string>() : n.dump());
    m.skipped = "a node failed during the run (" + names + ")";
    return m;
  }
  if (s.contains("policy_switches") && s["policy_switches"].is_array() && !s["policy_switches"].empty()) {
    m.skipped = "its policy was switched during the run (" +
                std::to_string(s["policy_switches"].size()) + " switch(es))";
    return m;
  }
  m.measured = summary_field(s, "images_per_sec", T::number_float, path).get<double>();
  if (!(m.measured > 0) || !std::isfinite(m.measured)) {
    m.skipped = "it measured " + s["images_per_sec"].dump() + " images/s";
    return m;
  }
  const std::string model = summary_field(s, "model", T::string, path).get<std::string>();
  if (model != profile.model)
    throw Error("run folder '" + dir + "' trained " + model + ", but the profile is of " +
                profile.model + " (validate each model's runs with its own profile)");
  if (s.contains("batch") && s["batch"] != nlohmann::json(profile.batch))
    throw Error("run folder '" + dir + "' ran batches of " + s["batch"].dump() +
                ", but the profile's run used " + std::to_string(profile.batch) +
                " (the profiled compute is per batch: profile a run with the same batch)");
  SimConfig c = base;
  try {
    c.workers = int(summary_field(s, "workers", T::number_float, path).get<double>());
    c.servers = int(summary_field(s, "servers", T::number_float, path).get<double>());
    if (c.workers < 1 || c.servers < 1)
      throw Error("'" + path + "' has " + std::to_string(c.workers) + " worker(s) and " +
                  std::to_string(c.servers) + " server(s), expected at least one of each");
    c.mode = Consistency::parse(summary_field(s, "mode", T::string, path).get<std::string>());
    c.policy.name = summary_field(s, "policy", T::string, path).get<std::string>();
    policy::PolicyOptions check = c.policy;
    (void)policy::make_policy(check);  // an unknown policy is refused here, naming the run
  } catch (const Error& e) {
    throw Error("run folder '" + dir + "': " + e.what());
  }
  c.partition_bytes = s.value("partition_bytes", c.partition_bytes);
  // "replay:profile.json" sleeps; real compute runs on the host's cores (--compute auto: the
  // run's own; real or replay: as the flag says).
  if (flags.compute == "auto")
    c.compute_on_cores = s.value("compute", std::string("real")) == "real";
  if (flags.steps <= 0) c.steps = s.value("steps", std::int64_t(200));
  // worker-0 carries the link, the policy parameters and the straggler setting of the run.
  const fs::path trace = fs::path(dir) / "traces" / "worker-0.trace.json";
  const nlohmann::json launch = s.value("launch", nlohmann::json::object());
  nlohmann::json meta;  // worker-0's trace metadata, where it has a trace
  double start_stagger_ms = 0;  // as the run recorded it
  if (fs::exists(trace)) {
    meta = read_trace_metadata(trace.string());
    take_run_link(meta.value("link", std::string()), profile, flags, c, m.link);
    // With --netns tc shaped the links, not the nodes (their traces say only the latency):
    // the bandwidth is launch's.
    double bw = 0, lat = 0;
    if (launch.contains("netns")) {
      // Runs from before launch.link: the shaping as "tc tbf 100mbit per direction".
      const std::string shaping = launch["netns"].value("shaping", std::string());
      char rate[64] = {0};
      double netns_bw = -1;
      if (parse_link_metadata(launch.value("link", std::string()), &bw, &lat))
        netns_bw = bw;
      else if (std::sscanf(shaping.c_str(), "tc tbf %63s per direction", rate) == 1) {
        // Runs of then could be given a bare number, which was bits/s.
        std::string r = rate;
        if (!r.empty() && r.find_first_not_of("0123456789.") == std::string::npos) r += "bit";
        netns_bw = for_flag("the run's launch.netns.shaping", [&] { return parse_bandwidth_bps(r); }) / 8;
      }
      if (netns_bw >= 0) {
        m.link.text = "tc " + format_bandwidth(netns_bw * 8) + ", " + fmt(m.link.latency * 1e6, 0) + " us one way";
        m.link.known = true, m.link.bandwidth = m.link.own_bandwidth = netns_bw;
        if (flags.bandwidth.empty()) c.bandwidth_bytes_per_sec = netns_bw;
      }
    }
    start_stagger_ms = meta.value("start_stagger_ms", 0.0);
    take_run_settings(meta.value("cluster", nlohmann::json::object()),
                      meta.value("straggle_ms", 0.0), start_stagger_ms, flags, c);
  } else if (launch.contains("link")) {  // launched with --no-trace
    take_run_link(launch.value("link", std::string()), profile, flags, c, m.link);
    start_stagger_ms = launch.value("start_stagger_ms", 0.0);
    take_run_settings(s.value("policy_options", nlohmann::json::object()),
                      launch.value("straggler_ms", 0.0), start_stagger_ms, flags, c);
  } else if (flags.bandwidth.empty()) {
    throw Error("run folder '" + dir + "' has no traces/worker-0.trace.json, which records the link the run had: give it with --bandwidth (and --latency)");
  } else {  // an older run without traces: its link from the flags, its policy's settings from summary.json
    take_run_settings(s.value("policy_options", nlohmann::json::object()), 0.0, 0.0, flags, c);
  }
  // The shard's apply lanes, where launch recorded them (psbed launch --apply-threads).
  if (launch.contains("apply_threads") && launch["apply_threads"].is_number_integer())
    c.apply_lanes = launch["apply_threads"].get<int>();
  m.config = c;
  m.recorded = {{"steps", s.value("steps", nlohmann::json())},
                {"start_stagger_ms", start_stagger_ms},
                {"compute", s.value("compute", std::string("real"))},
                {"host_cpus", launch.value("host_cpus", nlohmann::json())},
                {"threads", meta.is_object() ? meta.value("threads", nlohmann::json()) : nlohmann::json()}};
  // The host's CPU per step, to set beside what the simulation books for the same
  // configuration: runs on as many cores as are simulated, predicted with the compute they had
  // (real compute on the cores, replayed compute on none), and real compute on one thread a
  // worker, as the simulator books it.
  const bool real = s.value("compute", std::string("real")) == "real";
  if (c.host_cpus > 0 && launch.value("host_cpus", 0) == c.host_cpus && real == c.compute_on_cores &&
      meta.is_object() && (!real || meta.value("threads", 1) == 1))
    m.host = run_host_cpu(dir, c.workers, c.servers, s.value("steps", std::int64_t(0)),
                          s.value("per_worker", nlohmann::json()), &meta);
  return m;
}

// What makes two runs repeats of one configuration: everything the prediction is made from,
// and what the runs recorded (their summary's model and batch, their link and the settings a
// flag may replace): runs that differ in what they measured are never merged into one median,
// even where --bandwidth, --latency or --steps predict them alike.
std::string config_key(const MeasuredRun& m) {
  const SimConfig& c = m.config;
  const auto& s = m.summary;
  return nlohmann::json{{"model", s.value("model", std::string())},
                        {"batch", s.value("batch", 0)},
                        {"recorded", m.recorded},
                        {"recorded_link", m.link.known ? nlohmann::json(m.link.text) : nlohmann::json()},
                        {"workers", c.workers},
                        {"servers", c.servers},
                        {"mode", c.mode.str()},
                        {"policy", c.policy.name},
                        {"slice_params", c.policy.slice_params},
                        {"partition_params", c.policy.partition_params},
                        {"credit_bytes", c.policy.credit_bytes},
                        {"partition_bytes", c.partition_bytes},
                        {"apply_lanes", c.apply_lanes},
                        {"steps", c.steps},
                        {"bandwidth", c.bandwidth_bytes_per_sec},
                        {"latency", c.latency_s},
                        {"straggler", c.straggler_s},
                        {"stagger", c.start_stagger_s},
                        {"compute_on_cores", c.compute_on_cores},
                        {"host_cpus", c.host_cpus}}
      .dump();
}

}  // namespace

// The profile's host.contention from a crowded run of the same host (--contention-run): that
// run's measured CPU per worker-step over what the simulation of its configuration books with
// the profile's costs, less 1, over how crowded it was (min(1, (processes - cores) / cores)).
void measure_contention(Profile& p, const std::string& run) {
  const std::string flag = "--contention-run " + run;
  if (p.host_cpus <= 0)
    throw Error(flag + ": the profile has no host figures (the profiled run needs traces and "
                "summary.json's launch.host_cpus)");
  const int cores = p.host_cpus;
  const int profiled = p.source.value("workers", 1) + p.source.value("servers", 1);
  if (p.source.value("workers", 1) != 1)
    throw Error(flag + ": the profile is of a " + std::to_string(p.source.value("workers", 1)) +
                "-worker run; the contention is measured against a single-worker profile");
  // The profiled run must not be crowded itself: its costs would hold contention already.
  if (profiled > cores)
    throw Error(flag + ": the profiled run had " + std::to_string(profiled) + " workers + shards on " +
                std::to_string(cores) + " cores, crowded itself: profile a run with at most " +
                std::to_string(cores) + " of them");
  const ModelSpec spec = profile_model_spec(p, "the profile of " + p.source.value("run", std::string()));
  SimFlags flags;
  flags.steps = 0;  // the run's own
  flags.seeds = kPredictSeeds;
  p.contention = 0;  // the run's simulation books the single-worker costs alone
  const MeasuredRun m = for_flag(flag, [&] { return read_run(run, p, base_config(p, flags), flags); });
  if (!m.skipped.empty()) throw Error(flag + ": " + m.skipped);
  const int processes = m.config.workers + m.config.servers;
  const int run_cores = m.summary.value("launch", nlohmann::json::object()).value("host_cpus", 0);
  if (run_cores != cores)
    throw Error(flag + ": it ran on " + std::to_string(run_cores) + " cores, the profiled run on " +
                std::to_string(cores) + ": measure both on one host");
  if (!m.config.compute_on_cores)
    throw Error(flag + ": its compute was replayed; the contention is measured with real compute");
  // At twice the cores or more the factor applies whole: measured there, it is not scaled up
  // from a run that was crowded only in part.
  if (processes < 2 * cores)
    throw Error(flag + ": " + std::to_string(processes) + " workers + shards on " + std::to_string(cores) +
                " cores: give a run with at least " + std::to_string(2 * cores) +
                " (twice the cores), where the host is fully crowded");
  if (!(m.host.per_step_s > 0))
    throw Error(flag + ": no CPU per step to compare (it needs traces and real compute on one thread a worker)");
  const SimResult r = simulate_seeds(p, spec, m.config, flags.seeds);
  if (!(r.host_cpu_per_step_s > 0)) throw Error(flag + ": the simulation booked no CPU");
  const double ratio = m.host.per_step_s / r.host_cpu_per_step_s;
  p.contention = std::min(10.0, std::max(0.0, ratio - 1));
  p.source["contention_run"] = nlohmann::json{{"run", run},
                                              {"workers", m.config.workers},
                                              {"servers", m.config.servers},
                                              {"cores", cores},
                                              {"measured_cpu_per_step_ms", m.host.per_step_s * 1e3},
                                              {"simulated_cpu_per_step_ms", r.host_cpu_per_step_s * 1e3},
                                              {"ratio", ratio}};
  if (p.contention > 0)
    std::fprintf(stderr,
                 "  contention: %s (%d workers + %d shards on %d cores) spent %.2f ms of CPU a worker-step, "
                 "the simulation %.2f: every CPU cost x %.2f where the processes are twice the cores\n",
                 run.c_str(), m.config.workers, m.config.servers, cores, m.host.per_step_s * 1e3,
                 r.host_cpu_per_step_s * 1e3, 1 + p.contention);
  else
    std::fprintf(stderr,
                 "  contention: none found: %s (%d workers + %d shards on %d cores) spent %.2f ms of CPU a "
                 "worker-step, no more than the simulation's %.2f\n",
                 run.c_str(), m.config.workers, m.config.servers, cores, m.host.per_step_s * 1e3,
                 r.host_cpu_per_step_s * 1e3);
}

nlohmann::json validate_runs(const Profile& profile, const ModelSpec& spec,
                             const std::vector<std::string>& dirs, const SimFlags& flags) {
  if (dirs.empty())
    throw Error(
        "validate: no run folders given (expected one or more `psbed launch` --out folders)");
  // A folder given twice would count as a repeat of itself.
  std::map<std::string, std::string> seen;  // canonical path -> as given
  for (const std::string& d : dirs) {
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(fs::path(d), ec);
    const auto [at, fresh] = seen.emplace(ec ? d : canon.string(), d);
    if (!fresh) throw Error("validate: the run folder '" + d + "' is given twice (as '" + at->second + "' before)");
  }
  const SimConfig base = base_config(profile, flags);
  // The run folders are read on the threads the simulations get (each trace's metadata is
  // parsed from a file of megabytes); a bad folder's error is the first a loop would meet.
  std::vector<MeasuredRun> all(dirs.size());
  parallel_for(dirs.size(), worker_threads(flags.jobs, dirs.size()),
               [&](std::size_t i) { all[i] = read_run(dirs[i], profile, base, flags); });
  // Failed runs are no measurements: each is named and left out, and listed in the report.
  std::vector<MeasuredRun> read;
  nlohmann::json skipped = nlohmann::json::array();
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
  // --bandwidth and --latency replace the link each run recorded: said once a flag, naming the
  // runs whose own link was another, so that a prediction for another link is not taken for one
  // of what the run measured.
  auto say_replaced = [&](const std::string& flag, const std::string& value, auto differs, auto recorded) {
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
      "--latency", flags.latency, [](const MeasuredRun& m) { return m.link.own_latency != m.config.latency_s; },
      [&](const MeasuredRun& m) { return own(m, fmt(m.link.own_latency * 1e6, 0) + " us"); });
  // Runs of one configuration (a sweep's --repeat) are predicted once and compared by the median
  // of their measurements: a short run may settle in either of two paces, and one run is one
  // draw of them.
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
  std::vector<SimConfig> configs;
  for (const auto& g : groups) configs.push_back(g.front().config);
  announce("validate", configs.size(), " from " + std::to_string(read.size()) + " run(s)",
           flags.seeds, flags.jobs);
  std::size_t finished = 0;
  const std::vector<SimResult> results = simulate_all(
      profile, spec, configs, flags.seeds, flags.jobs, [&](std::size_t i, const SimResult& r) {
        const auto& g = groups[i];
        const MeasuredRun& m = g.front();
        std::fprintf(stderr, "[%zu/%zu] %s%s: %d worker(s), %d server(s), %s, %s: %.1f images/s predicted\n",
                     ++finished, groups.size(), m.run.c_str(),
                     g.size() > 1 ? (" and " + std::to_string(g.size() - 1) + " repeat(s)").c_str() : "",
                     m.config.workers, m.config.servers, m.config.policy.name.c_str(),
                     m.config.mode.str().c_str(), r.images_per_sec);
      });
  // The host's CPU: each configuration whose runs measured theirs simulated again with every CPU
  // cost scaled to it (the median of its runs' CPU per worker-step against what the simulation
  // booked on the cores per worker-step). The simulator charges the profiled run's costs (and
  // the profile's host.contention where processes outnumber the cores); a host time-sharing
  // them may spend otherwise. The figure at the measured CPU says how much of an error
  // the CPU per step accounts for; it predicts nothing, since it takes the run's own figure.
  std::vector<double> cpu_ratio(groups.size(), 0), busy(groups.size(), 0), step_s(groups.size(), 0);
  std::vector<SimConfig> scaled;
  std::vector<std::size_t> scaled_group;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::vector<double> per_step, cores;
    for (const auto& x : groups[i])
      if (x.host.per_step_s > 0) per_step.push_back(x.host.per_step_s), cores.push_back(x.host.busy_cores);
    if (per_step.empty() || !(results[i].host_cpu_per_step_s > 0)) continue;
    step_s[i] = median(per_step), busy[i] = median(cores);
    cpu_ratio[i] = step_s[i] / results[i].host_cpu_per_step_s;
    SimConfig c = configs[i];
    scale_cpu_costs(c, cpu_ratio[i]);
    scaled.push_back(c), scaled_group.push_back(i);
  }
  std::vector<SimResult> at_measured_cpu;
  if (!scaled.empty()) {
    std::fprintf(stderr,
                 "validate: %zu configuration(s) again at their runs' measured host CPU per step\n",
                 scaled.size());
    at_measured_cpu = simulate_all(profile, spec, scaled, flags.seeds, flags.jobs);
  }
  std::vector<const SimResult*> what_if(groups.size(), nullptr);
  for (std::size_t k = 0; k < scaled.size(); ++k) what_if[scaled_group[k]] = &at_measured_cpu[k];

  nlohmann::json runs = nlohmann::json::array();
  double sum_abs = 0, max_abs = 0, single_sum = 0, single_max = 0;
  double what_if_sum = 0, what_if_max = 0, what_if_as_profiled = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    const MeasuredRun& m = g.front();
    const SimResult& r = results[i];
    std::vector<double> measured;
    nlohmann::json names = nlohmann::json::array();
    for (const auto& x : g) {
      measured.push_back(x.measured);
      names.push_back(x.run);
      const double e = x.measured > 0 ? 100 * (r.images_per_sec - x.measured) / x.measured : 0.0;
      single_sum += std::fabs(e);
      single_max = std::max(single_max, std::fabs(e));
    }
    const double mid = median(measured);
    const double err = mid > 0 ? 100 * (r.images_per_sec - mid) / mid : 0.0;
    sum_abs += std::fabs(err);
    max_abs = std::max(max_abs, std::fabs(err));
    runs.push_back({{"run", m.run},
                    {"repeats", g.size()},
                    {"repeat_runs", names},
                    {"workers", m.config.workers},
                    {"servers", m.config.servers},
                    {"policy", m.config.policy.name},
                    {"mode", m.config.mode.str()},
                    // The policy's settings where it uses them (null where it does not): a
                    // p3 run of 10,000-parameter slices is another configuration than one of 40,000.
                    {"slice_params", policy::uses_slice_params(m.config.policy.name)
                                         ? nlohmann::json(m.config.policy.slice_params) : nlohmann::json()},
                    {"partition_params", policy::uses_partition_params(m.config.policy.name)
                                             ? nlohmann::json(m.config.policy.partition_params) : nlohmann::json()},
                    {"credit_bytes", policy::uses_credit(m.config.policy.name)
                                         ? nlohmann::json(policy::credit_in_effect(m.config.policy)) : nlohmann::json()},
                    {"partition_bytes", m.config.partition_bytes},
                    {"apply_threads", m.config.apply_lanes},
                    {"steps", m.config.steps},  // simulated per worker
                    {"recorded_steps", m.recorded["steps"]},
                    {"bandwidth", bandwidth_text(m.config.bandwidth_bytes_per_sec)},
                    {"bandwidth_bytes_per_sec", m.config.bandwidth_bytes_per_sec},
                    {"latency_us", m.config.latency_s * 1e6},
                    {"host_cpus", m.config.host_cpus},
                    // The link the runs recorded (a flag may have replaced it; null: none
                    // recorded, or an unshaped run, which recorded_link says).
                    {"recorded_link", m.link.known ? nlohmann::json(m.link.text) : nlohmann::json()},
                    {"recorded_bandwidth_bytes_per_sec",
                     m.link.known && m.link.text != "unshaped" ? nlohmann::json(m.link.bandwidth) : nlohmann::json()},
                    {"recorded_latency_us",
                     m.link.known && m.link.text != "unshaped" ? nlohmann::json(m.link.latency * 1e6) : nlohmann::json()},
                    {"straggler_ms", m.config.straggler_s * 1e3},
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
                    {"predicted_cpu_contention_scale", r.cpu_contention_scale},
                    {"error_pct", err}});
    if (what_if[i]) {
      const double ips = what_if[i]->images_per_sec;
      const double e = mid > 0 ? 100 * (ips - mid) / mid : 0.0;
      what_if_sum += std::fabs(e), what_if_max = std::max(what_if_max, std::fabs(e));
      what_if_as_profiled += std::fabs(err);
      runs.back()["host_cpu"] = {{"per_step_ms", step_s[i] * 1e3},
                                 {"simulated_per_step_ms", r.host_cpu_per_step_s * 1e3},
                                 {"ratio", cpu_ratio[i]},
                                 {"busy_cores", busy[i]},
                                 {"cores", m.config.host_cpus},
                                 {"predicted_images_per_sec", ips},
                                 {"error_pct", e}};
    }
  }
  nlohmann::json host_cpu = nullptr;
  if (!scaled.empty())
    host_cpu = {{"profiled_per_step_ms", profile.source.value("host_cpu_per_step_ms", nlohmann::json())},
                {"profiled_busy_cores", profile.source.value("host_busy_cores", nlohmann::json())},
                {"configurations", scaled.size()},
                {"mean_abs_error_pct", what_if_sum / double(scaled.size())},
                {"max_abs_error_pct", what_if_max},
                {"as_profiled_mean_abs_error_pct", what_if_as_profiled / double(scaled.size())}};
  return {{"runs", runs},
          {"seed", flags.seed},
          {"seeds", flags.seeds},
          {"arrival_jitter_us", flags.arrival_jitter_us},
          {"configurations", groups.size()},
          {"runs_measured", read.size()},
          {"runs_left_out", skipped},
          {"mean_abs_error_pct", sum_abs / double(groups.size())},
          {"max_abs_error_pct", max_abs},
          {"single_run_mean_abs_error_pct", single_sum / double(read.size())},
          {"single_run_max_abs_error_pct", single_max},
          {"at_measured_host_cpu", host_cpu}};
}

int run_validate(const ValidateOptions& given) {
  ValidateOptions o = given;
  while (o.out.size() > 1 && o.out.back() == '/') o.out.pop_back();  // report/ names report/validation.json
  const Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  // --out is checked before the simulations, not after; a folder this call made goes again if
  // they fail (no empty report folder left behind). Only that folder, only empty, and never
  // one that was there before under another spelling (foo/../results).
  std::error_code ec;
  const fs::path out_path = fs::weakly_canonical(fs::absolute(o.out), ec);
  const bool made_out = !ec && !fs::exists(out_path);
  ensure_writable_dir(o.out, "--out");
  nlohmann::json v;
  try {
    v = validate_runs(profile, spec, o.runs, o.sim);
  } catch (...) {
    if (made_out && fs::is_directory(out_path, ec) && fs::is_empty(out_path, ec)) fs::remove(out_path, ec);
    throw;
  }
  v["profile"] = o.profile;
  std::ostringstream md;
  const std::size_t measured_runs = v["runs_measured"].get<std::size_t>();
  const bool repeated = v["configurations"].get<std::size_t>() < measured_runs;
  const bool seeded = o.sim.seeds > 1;
  // The latency, the straggler and the start stagger get a column where a run has one: runs
  // that differ only in those are configurations of their own.
  auto any = [&](const char* key) {
    for (const auto& r : v["runs"])
      if (r[key].get<double>() != 0) return true;
    return false;
  };
  const bool latency = any("latency_us"), straggler = any("straggler_ms"),
             stagger = any("start_stagger_ms");
  // The policy's settings, the simulated steps and the compute get a column where they tell
  // configurations apart: a policy that has settings, steps or compute that differ between rows.
  auto settings_of = [](const nlohmann::json& r) {
    std::string t;
    if (r["slice_params"].is_number()) t += "slice " + std::to_string(r["slice_params"].get<std::int64_t>());
    if (r["partition_params"].is_number())
      t += "partition " + std::to_string(r["partition_params"].get<std::int64_t>());
    if (r["credit_bytes"].is_number())
      t += std::string(t.empty() ? "" : ", ") + (r["policy"] == "prophet" ? "block " : "credit ") +
           format_bytes(double(r["credit_bytes"].get<std::int64_t>()));
    return t;
  };
  auto differ = [&](const char* key) {
    for (const auto& r : v["runs"])
      if (r[key] != v["runs"][0][key]) return true;
    return false;
  };
  bool settings = false;
  for (const auto& r : v["runs"]) settings = settings || !settings_of(r).empty();
  const bool steps = differ("steps"), compute = differ("predicted_compute");
  md << "| run | workers | servers | policy |" << (settings ? " settings |" : "") << " mode | bandwidth |"
     << (latency ? " latency us |" : "") << (straggler ? " straggler ms |" : "")
     << (stagger ? " start stagger ms |" : "") << (steps ? " steps |" : "") << (compute ? " compute |" : "")
     << " measured images/s |" << (repeated ? " runs (range) |" : "") << " predicted images/s |"
     << (seeded ? " seeds' spread % |" : "") << " error % |\n"
     << "|---|---:|---:|---|" << (settings ? "---|" : "") << "---|---|" << (latency ? "---:|" : "")
     << (straggler ? "---:|" : "") << (stagger ? "---:|" : "") << (steps ? "---:|" : "")
     << (compute ? "---|" : "") << "---:|" << (repeated ? "---|" : "") << "---:|"
     << (seeded ? "---:|" : "") << "---:|\n";
  int edge = 0, edge_off = 0, off = 0;
  for (const auto& r : v["runs"]) {
    md << "| " << run_name(r["run"].get<std::string>()) << " | " << r["workers"] << " | "
       << r["servers"] << " | " << r["policy"].get<std::string>() << " | ";
    if (settings) md << settings_of(r) << " | ";
    md << r["mode"].get<std::string>() << " | " << r["bandwidth"].get<std::string>() << " | ";
    if (latency) md << fmt(r["latency_us"], 0) << " | ";
    if (straggler) md << fmt(r["straggler_ms"], 1) << " | ";
    if (stagger) md << fmt(r["start_stagger_ms"], 1) << " | ";
    if (steps) md << r["steps"] << " | ";
    if (compute) md << r["predicted_compute"].get<std::string>() << " | ";
    md << fmt(r["measured_images_per_sec"], 0) << " |";
    if (repeated)
      md << " " << r["repeats"] << " (" << fmt(r["measured_min_images_per_sec"], 0) << "-"
         << fmt(r["measured_max_images_per_sec"], 0) << ") |";
    md << " " << fmt(r["predicted_images_per_sec"], 0) << " |";
    const double spread = r["predicted_seeds_spread_pct"].get<double>();
    if (seeded) md << " " << fmt(spread, 0) << (spread > kRegimeSpreadPct ? " (edge)" : "") << " |";
    md << " " << fmt(r["error_pct"], 1) << " |\n";
    const bool is_off = std::abs(r["error_pct"].get<double>()) > 10;
    edge += spread > kRegimeSpreadPct, off += is_off, edge_off += is_off && spread > kRegimeSpreadPct;
  }
  v["regime_edge_configurations"] = edge;
  md << "\nmean |error| " << fmt(v["mean_abs_error_pct"], 1) << " %, max |error| "
     << fmt(v["max_abs_error_pct"], 1) << " % over " << v["configurations"] << " configuration(s)";
  if (repeated)
    md << " (" << measured_runs << " runs; the median of each configuration's runs against its "
       << "prediction; each run alone: mean " << fmt(v["single_run_mean_abs_error_pct"], 1)
       << " %, max " << fmt(v["single_run_max_abs_error_pct"], 1) << " %)";
  if (o.sim.seeds > 1)
    md << "; each prediction the median of " << o.sim.seeds << " seeds (" << seed_range(o.sim.seed, o.sim.seeds)
       << ")";
  md << "; profile " << o.profile << "\n";
  for (const auto& x : v["runs_left_out"])
    md << "left out " << x["run"].get<std::string>() << ": " << x["reason"].get<std::string>() << "\n";
  if (seeded)
    md << edge << " configuration(s) on the edge between two regimes (the seeds' images/s more "
       << "than " << fmt(kRegimeSpreadPct, 0) << "% apart: a run can land in either); " << edge_off
       << " of the " << off << " off by more than 10% are among them\n";
  if (!v["at_measured_host_cpu"].is_null()) {
    const auto& h = v["at_measured_host_cpu"];
    auto pct = [](double x) {
      char text[32];
      std::snprintf(text, sizeof text, "%+.1f%%", x);
      return std::string(text);
    };
    md << "\nThe host's CPU per worker-step, measured (every worker's and shard's process over "
       << "the steady steps) against what the simulation booked on the host's cores";
    if (h["profiled_per_step_ms"].is_number())
      md << " (the profiled run measured " << fmt(h["profiled_per_step_ms"], 2) << " ms, "
         << fmt(h["profiled_busy_cores"], 2) << " of " << profile.host_cpus << " cores busy)";
    md << ":\n";
    constexpr int kListed = 10;
    int measured = 0;  // configurations with the host's CPU measured
    for (const auto& r : v["runs"]) {
      if (!r.contains("host_cpu") || measured++ >= kListed) continue;
      const auto& c = r["host_cpu"];
      md << "- " << run_name(r["run"].get<std::string>()) << ": " << fmt(c["per_step_ms"], 2)
         << " ms against " << fmt(c["simulated_per_step_ms"], 2) << " (x" << fmt(c["ratio"], 2)
         << "), " << fmt(c["busy_cores"], 2) << " of " << c["cores"]
         << " cores busy; at the measured CPU the simulator gives "
         << fmt(c["predicted_images_per_sec"], 0) << " images/s (" << pct(c["error_pct"])
         << "; as profiled " << pct(r["error_pct"]) << ")\n";
    }
    if (measured > kListed)
      md << "- and " << measured - kListed << " more (validation.json: runs[].host_cpu)\n";
    if (measured > 1)
      md << "At each configuration's measured CPU: mean |error| " << fmt(h["mean_abs_error_pct"], 1)
         << " %, max " << fmt(h["max_abs_error_pct"], 1) << " % over " << measured
         << " configuration(s) (as profiled: mean " << fmt(h["as_profiled_mean_abs_error_pct"], 1)
         << " %).\n";
    md << "The simulator charges the profiled run's costs"
       << (profile.contention > 0
               ? ", and where workers + shards outnumber the cores its host's contention (every CPU "
                 "cost x up to " + fmt(1 + profile.contention, 2) + ", measured on a crowded run)"
               : std::string())
       << "; a run spends otherwise where its host "
       << "is busier (more busy processes than cores time-shared: context switches, caches; or "
       << "several messages taken per wake-up)"
       << (profile.contention > 0 ? " than that says" : ", which it does not model (psbed profile --contention-run measures it)")
       << ". The figure at the "
       << "measured CPU takes the run's own, so it predicts nothing: it says how much of the "
       << "error is the CPU per step. On a host the run keeps busy, images/s is about its cores "
       << "over the CPU per step, so there that figure follows from the measurement.\n";
  }
  write_json(o.out + "/validation.json", v);
  std::ofstream(o.out + "/validation.md") << md.str();
  std::printf("%s", md.str().c_str());

  // Plot: measured points and predicted lines against workers, one colour per policy and mode.
  const std::string script = o.out + "/plot_validation.py";
  std::ofstream(script) << R"PY(import json, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed (cluster/install-deps.sh plot): no plot", file=sys.stderr)
    sys.exit(3)
v = json.load(open(sys.argv[1]))
runs = v["runs"]
# One panel per (mode, bandwidth); in it one line per configuration, varying in workers only: a
# line for the prediction, points for the measurements. Lines of one policy share its colour;
# where configurations differ in more than policy, mode and bandwidth (slice, credit, servers,
# latency, ...), each line has its own style and a label naming what sets it apart.
SETTINGS = [("policy", "%s"), ("slice_params", "slice %s"), ("partition_params", "partition %s"),
            ("credit_bytes", "credit %s bytes"), ("servers", "%s servers"), ("latency_us", "%s us"),
            ("straggler_ms", "straggler %s ms"), ("start_stagger_ms", "stagger %s ms"),
            ("steps", "%s steps"), ("predicted_compute", "%s compute"), ("partition_bytes", "parts %s bytes"),
            ("apply_threads", "%s apply threads"), ("host_cpus", "%s cores"),
            ("recorded_bandwidth_bytes_per_sec", "ran at %s bytes/s"), ("recorded_latency_us", "ran at %s us")]
SIMULATED = {"recorded_bandwidth_bytes_per_sec": "bandwidth_bytes_per_sec", "recorded_latency_us": "latency_us"}
# A setting tells configurations apart where two rows of one panel, policy and worker count differ
# in it; one that changes only with the worker count (the steps of an --epochs run) does not.
def differs_at_one_size(k):
    seen = {}
    for r in runs:
        at = (r["mode"], r["bandwidth"], r["policy"], r["workers"])
        seen.setdefault(at, set()).add(json.dumps(r.get(k)))
    return any(len(v) > 1 for v in seen.values())
IDENTITY = [(k, name) for k, name in SETTINGS if k == "policy" or differs_at_one_size(k)]
def config(r):
    return tuple(json.dumps(r.get(k)) for k, _ in IDENTITY)
def value(x):
    return ("%g" % x) if isinstance(x, float) else str(x)
policies = sorted({r["policy"] for r in runs})
# A setting goes in the labels where it tells two lines of one policy apart.
varying = [(k, name) for k, name in IDENTITY[1:]
           if len({(r["policy"], json.dumps(r.get(k))) for r in runs}) > len(policies)]
def label(r):
    # A recorded link is named only where the prediction replaced it.
    parts = [r["policy"]] + [name % value(r[k]) for k, name in varying
                             if r.get(k) is not None and r.get(k) != r.get(SIMULATED.get(k))]
    return ", ".join(parts)
panels = sorted({(r["mode"], r["bandwidth"]) for r in runs})
colour = {p: "C%d" % (i % 10) for i, p in enumerate(policies)}
styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 3)), "P")]
lines = {}  # configuration -> (colour, line style, marker, label), the same in every panel
for r in sorted(runs, key=lambda r: (r["policy"], config(r))):
    c = config(r)
    if c not in lines:
        k = sum(1 for x in lines.values() if x[0] == colour[r["policy"]])
        lines[c] = (colour[r["policy"]],) + styles[k % len(styles)] + (label(r),)
# The legend: beside the panels, or where lines carry labels, in columns below them.
columns = 3 if varying else 1
legend_rows = -(-(len(lines) + 2) // columns) if varying else 0
legend_in = 0 if varying else 1.5  # inches beside the panels
below_in = 0.25 * legend_rows + 0.2 if varying else 0  # inches below them
fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + legend_in, 4.2 + below_in), squeeze=False)
for ax, (mode, bw) in zip(axes[0], panels):
    for c, (col, ls, marker, _) in lines.items():
        rs = sorted((r for r in runs if (r["mode"], r["bandwidth"]) == (mode, bw) and config(r) == c),
                    key=lambda r: r["workers"])
        if not rs:
            continue
        ax.plot([r["workers"] for r in rs], [r["predicted_images_per_sec"] for r in rs], linestyle=ls, color=col)
        ax.plot([r["workers"] for r in rs], [r["measured_images_per_sec"] for r in rs], marker, color=col)
        if any(r.get("repeats", 1) > 1 for r in rs):  # the range of a configuration's repeats
            ax.vlines([r["workers"] for r in rs], [r["measured_min_images_per_sec"] for r in rs],
                      [r["measured_max_images_per_sec"] for r in rs], color=col, alpha=0.6)
    ax.set_title("%s, %s" % (mode, bw))
    ax.set_xlabel("workers")
    ax.set_xticks(sorted({r["workers"] for r in runs if (r["mode"], r["bandwidth"]) == (mode, bw)}))
    ax.set_ylabel("images/s (all workers)")
    ax.grid(alpha=0.3)
if varying:
    handles = [plt.Line2D([], [], color=col, linestyle=ls, marker=m, label=text)
               for col, ls, m, text in lines.values()]
else:
    handles = [plt.Line2D([], [], color=colour[p], marker="o", label=p) for p in policies]
handles += [plt.Line2D([], [], color="grey", label="predicted"),
            plt.Line2D([], [], color="grey", marker="o", linestyle="", label="measured")]
fig.legend(handles=handles, loc="lower center" if varying else "center right", ncol=columns, fontsize=8)
fig.suptitle("predicted (lines) and measured (points); mean |error| %.1f%%, max %.1f%%"
             % (v["mean_abs_error_pct"], v["max_abs_error_pct"]))
fig.tight_layout(rect=(0, below_in / (4.2 + below_in), 1 - max(0, legend_in - 0.1) / (5.5 * len(panels) + legend_in), 1))
fig.savefig(sys.argv[2], dpi=120)
)PY";
  // A plot left from an earlier report would pass for this one's when no new one is made.
  const std::string png = o.out + "/validation.png";
  std::error_code gone;
  fs::remove(png, gone);
  const ProgramStatus plot = run_program({o.python, script, o.out + "/validation.json", png});
  if (plot.ok())
    std::fprintf(stderr, "plot: %s\n", png.c_str());
  else if (!plot.exited_with(3))  // 3: the script said matplotlib is missing
    std::fprintf(stderr, "no plot written (%s failed; matplotlib: cluster/install-deps.sh plot)\n",
                 o.python.c_str());
  std::fprintf(stderr, "validation: %s/validation.json, %s/validation.md\n", o.out.c_str(),
               o.out.c_str());
  return 0;
}

namespace {

// What a policy's settings do in a simulation, two values that act alike made one: a slice (or
// bytescheduler's partition) of at least the largest part sends every part whole, and a credit
// (prophet: a block) of at least the model's bytes never holds a transfer back, since a worker
// has at most one step's pulls, or its pushes, in flight (pushes start once every pull has
// arrived, and a step ends when its pushes are acknowledged). Configurations of one such key
// simulate alike, event for event.
nlohmann::json acting_settings(const SimConfig& c, std::int64_t largest_part, std::int64_t model_bytes) {
  const policy::PolicyOptions& p = c.policy;
  auto cut = [&](std::int64_t n) { return n >= largest_part ? nlohmann::json("whole parts") : nlohmann::json(n); };
  const std::int64_t credit = policy::credit_in_effect(p);
  return {{"workers", c.workers},
          {"servers", c.servers},
          {"policy", p.name},
          {"slice", policy::uses_slice_params(p.name) ? cut(p.slice_params) : nlohmann::json()},
          {"partition", policy::uses_partition_params(p.name) ? cut(p.partition_params) : nlohmann::json()},
          {"credit", !policy::uses_credit(p.name) ? nlohmann::json()
                     : credit >= model_bytes      ? nlohmann::json("unbounded")
                                                  : nlohmann::json(credit)}};
}

// optimize's name for a configuration: the policy and the settings it uses.
std::string describe_settings(const policy::PolicyOptions& p) {
  std::string d = p.name;
  if (policy::uses_slice_params(p.name)) d += " slice " + std::to_string(p.slice_params);
  if (policy::uses_partition_params(p.name)) d += " partition " + std::to_string(p.partition_params);
  if (policy::uses_credit(p.name))
    d += (p.name == "prophet" ? " block " : " credit ") + format_bytes(double(policy::credit_in_effect(p)));
  return d;
}

}  // namespace

int run_optimize(const OptimizeOptions& o, OptimizeChoice* best) {
  const Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  SimConfig base = base_config(profile, o.sim);
  base.mode = for_flag("--mode", [&] { return Consistency::parse(o.mode); });
  if (o.max_nodes < 2 || o.max_nodes > kOptimizeMaxNodes)
    throw Error("optimize: --max-nodes must be 2 (one server and one worker) to " +
                std::to_string(kOptimizeMaxNodes) + ", got " + std::to_string(o.max_nodes));
  if (o.max_servers < 1) throw Error("optimize: --max-servers must be at least 1");
  if (o.top < 1) throw Error("optimize: --top must be at least 1");
  for (const auto& name : expand_policies(o.policies)) {  // an unknown name: before the search
    policy::PolicyOptions po = base.policy;
    po.name = name;
    for_flag("--policy", [&] { return policy::make_policy(po); });
  }
  ensure_writable_file(o.json_out, "--json");
  // The dimensions searched unless a flag fixes them (--slice-params, --partition-params,
  // --credit, `--credit default` included: the policy's own): then every configuration takes
  // the flag's value.
  const bool credit_fixed = o.credit_given || !o.sim.credit.empty();
  const std::vector<std::int64_t> slices =
      o.slice_params_given ? std::vector<std::int64_t>{o.sim.slice_params}
                           : std::vector<std::int64_t>{10000, 40000, 160000};
  const std::vector<std::int64_t> p3_credits =
      credit_fixed ? std::vector<std::int64_t>{base.policy.credit_bytes}
                   : std::vector<std::int64_t>{1 << 20, 4 << 20, 16 << 20};
  const std::vector<std::int64_t> partitions =
      o.partition_params_given ? std::vector<std::int64_t>{o.sim.partition_params}
                               : std::vector<std::int64_t>{250000, 1000000};
  const std::vector<std::int64_t> bs_credits =
      credit_fixed ? std::vector<std::int64_t>{base.policy.credit_bytes}
                   : std::vector<std::int64_t>{4 << 20, 16000000};
  struct Point {
    SimConfig c;
    SimResult r;
    std::size_t config = 0;  // index into grid
    double ips() const { return r.images_per_sec; }
  };
  std::vector<SimConfig> searched;
  // A shard beyond the model's parts would hold nothing (launch refuses it): not searched.
  const int parts = int(make_partition(spec, base.partition_bytes, 1).parts.size());
  for (int s = 1; s <= std::min({o.max_servers, o.max_nodes - 1, parts}); ++s) {
    // Worker counts 1, 2, 3, 4, 6, 8, 12, 16, ... and the most the node budget allows.
    std::vector<int> counts;
    for (int base_w = 1; base_w <= o.max_nodes - s; base_w *= 2)
      for (int w : {base_w, base_w + base_w / 2})
        if (w <= o.max_nodes - s && (counts.empty() || counts.back() < w)) counts.push_back(w);
    if (counts.back() != o.max_nodes - s) counts.push_back(o.max_nodes - s);
    for (int w : counts)
      for (const auto& pol : expand_policies(o.policies)) {
        SimConfig c = base;
        c.workers = w, c.servers = s, c.policy.name = pol;
        if (pol == "p3") {
          for (std::int64_t slice : slices)
            for (std::int64_t credit : p3_credits) {
              c.policy.slice_params = slice, c.policy.credit_bytes = credit;
              searched.push_back(c);
            }
        } else if (pol == "bytescheduler") {
          for (std::int64_t part : partitions)
            for (std::int64_t credit : bs_credits) {
              c.policy.partition_params = part, c.policy.credit_bytes = credit;
              searched.push_back(c);
            }
        } else {
          searched.push_back(c);
        }
      }
  }
  // Configurations that simulate alike (a credit no step can fill, a slice no part needs) are
  // simulated once, as the first of them, and listed as one: the others ride along as `same`.
  std::int64_t largest_part = 0;
  for (int s = 1; s <= std::min({o.max_servers, o.max_nodes - 1, parts}); ++s)
    for (const Part& part : make_partition(spec, base.partition_bytes, s).parts)
      largest_part = std::max(largest_part, part.numel);
  std::int64_t model_bytes = 0;
  for (const auto& t : spec.tensors) model_bytes += t.bytes();
  std::vector<SimConfig> grid;
  std::vector<std::vector<SimConfig>> same;  // grid[i]'s look-alikes
  std::map<std::string, std::size_t> first_of;
  for (const SimConfig& c : searched) {
    const auto [at, fresh] = first_of.emplace(acting_settings(c, largest_part, model_bytes).dump(), grid.size());
    if (fresh) {
      grid.push_back(c), same.emplace_back();
    } else {
      same[at->second].push_back(c);
    }
  }
  // Progress on stderr every ten configurations: "[10/374] simulated".
  auto progress = [](const char* what, std::size_t total) {
    return [what, total, finished = std::size_t(0)](std::size_t, const SimResult&) mutable {
      if (++finished % 10 == 0 || finished == total)
        std::fprintf(stderr, "[%zu/%zu] %s\n", finished, total, what);
    };
  };
  announce("optimize", grid.size(),
           grid.size() < searched.size()
               ? " (" + std::to_string(searched.size() - grid.size()) + " more alike, not simulated again)"
               : std::string(),
           o.sim.seeds, o.sim.jobs);
  const std::vector<SimResult> results =
      simulate_all(profile, spec, grid, o.sim.seeds, o.sim.jobs, progress("simulated", grid.size()));
  std::vector<Point> points;
  for (std::size_t i = 0; i < grid.size(); ++i) points.push_back({grid[i], results[i], i});
  auto by_ips = [](const Point& a, const Point& b) { return a.ips() > b.ips(); };
  auto by_ips_per_node = [](const Point& a, const Point& b) {
    return a.ips() / (a.c.workers + a.c.servers) > b.ips() / (b.c.workers + b.c.servers);
  };
  // One draw can put a configuration on the edge between two regimes (workers in lockstep or
  // drifted apart) at the top by chance. The leaders of the search, the first 2 x --top of each
  // ranking, are simulated again with --confirm-seeds seeds and ranked by their median, as
  // predict and validate give it.
  int seeds = o.sim.seeds;
  std::vector<const SimResult*> confirmed_of(grid.size(), nullptr);
  std::vector<SimResult> confirmed;
  if (o.confirm_seeds > o.sim.seeds) {
    std::vector<std::size_t> leaders;
    for (auto better : {+by_ips, +by_ips_per_node}) {
      std::vector<std::size_t> order(points.size());
      std::iota(order.begin(), order.end(), std::size_t(0));
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return better(points[a], points[b]); });
      order.resize(std::min(order.size(), 2 * std::size_t(o.top)));
      for (std::size_t i : order)
        if (std::find(leaders.begin(), leaders.end(), i) == leaders.end()) leaders.push_back(i);
    }
    std::sort(leaders.begin(), leaders.end());  // the search's order
    std::vector<SimConfig> again;
    for (std::size_t i : leaders) again.push_back(points[i].c);
    announce("optimize: the leaders again", again.size(), "", o.confirm_seeds, o.sim.jobs);
    confirmed = simulate_all(profile, spec, again, o.confirm_seeds, o.sim.jobs,
                             progress("confirmed", again.size()));
    std::vector<Point> leading;
    for (std::size_t k = 0; k < again.size(); ++k) {
      leading.push_back({again[k], confirmed[k], leaders[k]});
      confirmed_of[leaders[k]] = &confirmed[k];
    }
    points = std::move(leading);
    seeds = o.confirm_seeds;
  }
  // A configuration's name, with its look-alikes: "p3 slice 10000 credit 1.00 MiB (same: credit
  // 4.00 MiB, 16.00 MiB)".
  auto describe = [&](const Point& p) {
    std::string d = describe_settings(p.c.policy);
    const auto& others = same[p.config];
    if (others.empty()) return d;
    auto values = [&](const char* what, auto get, auto show) {
      std::vector<std::int64_t> seen{get(p.c.policy)};
      std::string list;
      for (const SimConfig& c : others)
        if (std::find(seen.begin(), seen.end(), get(c.policy)) == seen.end()) {
          seen.push_back(get(c.policy));
          list += std::string(list.empty() ? what : ", ") + show(get(c.policy));
        }
      return list;
    };
    std::string alike;
    for (const std::string& v :
         {values("slice ", [](const policy::PolicyOptions& x) { return x.slice_params; },
                 [](std::int64_t n) { return std::to_string(n); }),
          values("partition ", [](const policy::PolicyOptions& x) { return x.partition_params; },
                 [](std::int64_t n) { return std::to_string(n); }),
          values(p.c.policy.name == "prophet" ? "block " : "credit ",
                 [](const policy::PolicyOptions& x) { return policy::credit_in_effect(x); },
                 [](std::int64_t n) { return format_bytes(double(n)); })})
      if (!v.empty()) alike += (alike.empty() ? "" : "; ") + v;
    return d + " (same: " + alike + ")";
  };
  auto settings_json = [](const SimConfig& c) {
    return nlohmann::json{{"slice_params", c.policy.slice_params},
                          {"partition_params", c.policy.partition_params},
                          {"credit_bytes", c.policy.credit_bytes}};
  };
  // The search's context, and every configuration it simulated (not only the ranked top).
  nlohmann::json simulated = nlohmann::json::array();
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const SimConfig& c = grid[i];
    const SimResult& r = results[i];
    const int nodes = c.workers + c.servers;
    nlohmann::json row = {{"workers", c.workers},
                          {"servers", c.servers},
                          {"policy", c.policy.name},
                          {"slice_params", c.policy.slice_params},
                          {"partition_params", c.policy.partition_params},
                          {"credit_bytes", c.policy.credit_bytes},
                          {"description", describe({c, r, i})},
                          {"same", nlohmann::json::array()},
                          {"images_per_sec", r.images_per_sec},
                          {"images_per_sec_per_node", r.images_per_sec / nodes},
                          {"seeds", o.sim.seeds}};
    for (const SimConfig& other : same[i]) row["same"].push_back(settings_json(other));
    if (const SimResult* cr = confirmed_of[i])
      row["confirmed"] = {{"images_per_sec", cr->images_per_sec},
                          {"images_per_sec_per_node", cr->images_per_sec / nodes},
                          {"seeds", o.confirm_seeds},
                          {"seeds_min_images_per_sec", cr->seeds_min_images_per_sec},
                          {"seeds_max_images_per_sec", cr->seeds_max_images_per_sec},
                          {"seeds_spread_pct", cr->seeds_spread_pct()}};
    simulated.push_back(row);
  }
  nlohmann::json out = {
      {"search",
       {{"profile", o.profile},
        {"model", profile.model},
        {"batch", profile.batch},
        {"mode", base.mode.str()},
        {"policies", expand_policies(o.policies)},
        {"max_nodes", o.max_nodes},
        {"max_servers", o.max_servers},
        {"bandwidth", bandwidth_text(base.bandwidth_bytes_per_sec)},
        {"bandwidth_bytes_per_sec", base.bandwidth_bytes_per_sec},
        {"latency_us", base.latency_s * 1e6},
        {"link_model", to_string(base.link_model)},
        {"partition_bytes", base.partition_bytes},
        {"apply_threads", base.apply_lanes},
        {"steps", base.steps},
        {"seed", o.sim.seed},
        {"seeds", o.sim.seeds},
        {"confirm_seeds", o.confirm_seeds},
        {"arrival_jitter_us", base.arrival_jitter_s * 1e6},
        {"compute", base.compute_on_cores ? "real" : "replay"},
        {"host_cpus", base.host_cpus},
        {"straggler_ms", base.straggler_s * 1e3},
        {"start_stagger_ms", base.start_stagger_s * 1e3},
        {"slice_params", slices},
        {"partition_params", partitions},
        {"p3_credit_bytes", p3_credits},
        {"bytescheduler_credit_bytes", bs_credits},
        {"largest_part_params", largest_part},
        {"model_bytes", model_bytes}}},
      {"simulated", simulated},
      {"by_images_per_sec", nlohmann::json::array()},
      {"by_images_per_sec_per_node", nlohmann::json::array()}};
  auto show = [&](const char* title, const char* key, auto better) {
    std::vector<Point> v = points;
    std::stable_sort(v.begin(), v.end(), better);
    std::size_t label_width = 30;
    for (int k = 0; k < std::min<int>(o.top, int(v.size())); ++k)
      label_width = std::max(label_width, describe(v[k]).size());
    const int w = int(label_width);
    std::printf("%s\n%-7s %-7s %-*s %11s %15s %7s\n", title, "workers", "servers", w, "policy",
                "images/s", "images/s/node", "spread");
    for (int k = 0; k < std::min<int>(o.top, int(v.size())); ++k) {
      const auto& p = v[k];
      const int nodes = p.c.workers + p.c.servers;
      const std::string spread = seeds > 1 ? fmt(p.r.seeds_spread_pct(), 0) + "%" : "-";
      std::printf("%-7d %-7d %-*s %11s %15s %7s\n", p.c.workers, p.c.servers, w, describe(p).c_str(),
                  fmt(p.ips(), 0).c_str(), fmt(p.ips() / nodes, 1).c_str(), spread.c_str());
      nlohmann::json row = {{"workers", p.c.workers},
                            {"servers", p.c.servers},
                            {"policy", p.c.policy.name},
                            {"slice_params", p.c.policy.slice_params},
                            {"partition_params", p.c.policy.partition_params},
                            {"credit_bytes", p.c.policy.credit_bytes},
                            {"description", describe(p)},
                            {"same", nlohmann::json::array()},
                            {"mode", p.c.mode.str()},
                            {"images_per_sec", p.ips()},
                            {"images_per_sec_per_node", p.ips() / nodes},
                            {"seeds", seeds},
                            {"seeds_min_images_per_sec", p.r.seeds_min_images_per_sec},
                            {"seeds_max_images_per_sec", p.r.seeds_max_images_per_sec},
                            {"seeds_spread_pct", p.r.seeds_spread_pct()}};
      for (const SimConfig& other : same[p.config]) row["same"].push_back(settings_json(other));
      out[key].push_back(row);
    }
    std::printf("\n");
  };
  std::printf("model %s, mode %s, link %s, at most %d nodes: %zu configurations simulated",
              profile.model.c_str(), base.mode.str().c_str(),
              bandwidth_text(base.bandwidth_bytes_per_sec).c_str(), o.max_nodes, grid.size());
  if (grid.size() < searched.size())
    std::printf(" (of %zu searched: %zu act alike and are listed as one)", searched.size(),
                searched.size() - grid.size());
  if (seeds != o.sim.seeds)
    std::printf(", the %zu leading ones again with %d seeds: images/s is their median", points.size(),
                seeds);
  else if (seeds > 1)
    std::printf(", %d seeds each: images/s is their median", seeds);
  std::printf("\n\n");
  out["configurations"] = grid.size();
  out["configurations_searched"] = searched.size();
  out["seeds"] = o.sim.seeds;
  out["confirmed"] = seeds != o.sim.seeds ? points.size() : 0;
  out["confirm_seeds"] = o.confirm_seeds;
  show("top by images/s", "by_images_per_sec", by_ips);
  show("top by images/s per node", "by_images_per_sec_per_node", by_ips_per_node);
  if (seeds > 1)
    std::printf("spread: (highest - lowest) / median of the seeds. %s\n", regime_edge_note().c_str());
  if (grid.size() < searched.size())
    std::printf("same: settings that change nothing here, simulated once: a credit of at least the model's "
                "%s never holds a transfer back, a slice or partition of at least the largest part's %lld "
                "parameters sends every part whole\n",
                format_bytes(double(model_bytes)).c_str(), (long long)largest_part);
  write_json(o.json_out, out);
  if (best && !points.empty()) {
    const Point& p = *std::max_element(points.begin(), points.end(),
                                       [](const Point& a, const Point& b) { return a.ips() < b.ips(); });
    best->workers = p.c.workers, best->servers = p.c.servers;
    best->policy = p.c.policy.name, best->mode = p.c.mode.str();
    best->slice_params = p.c.policy.slice_params, best->partition_params = p.c.policy.partition_params;
    best->credit_bytes = p.c.policy.credit_bytes;
    // The link as launch flags: the one simulated, if the profile's run was shaped or the flags
    // named it; an estimate from an unshaped run's pulls is not something to emulate.
    const bool shaped = !o.sim.bandwidth.empty() || !profile.shaped.empty();
    char text[64];
    best->bandwidth.clear(), best->latency.clear();
    if (shaped && base.bandwidth_bytes_per_sec > 0) {
      const double bps = base.bandwidth_bytes_per_sec * 8;
      if (std::fmod(bps, 1e9) == 0) std::snprintf(text, sizeof text, "%.0fgbit", bps / 1e9);
      else if (std::fmod(bps, 1e6) == 0) std::snprintf(text, sizeof text, "%.0fmbit", bps / 1e6);
      else std::snprintf(text, sizeof text, "%.0fbit", bps);
      best->bandwidth = text;
    }
    if ((shaped || !o.sim.latency.empty()) && base.latency_s > 0) {
      std::snprintf(text, sizeof text, "%.0fus", base.latency_s * 1e6);
      best->latency = text;
    }
    best->images_per_sec = p.ips();
    best->seeds = seeds;
  }
  return 0;
}

int run_bench_predict(const BenchPredictOptions& o, bool model_given) {
  // Every setting checked before the table's head is printed.
  {
    policy::PolicyOptions po;
    po.name = o.policy;
    for_flag("--policy", [&] { return policy::make_policy(po); });
  }
  const double bandwidth_bps = for_flag("--bandwidth", [&] { return parse_bandwidth_bps(o.bandwidth); });
  const LinkModel link_model = for_flag("--link-model", [&] { return parse_link_model(o.link_model); });
  ensure_writable_file(o.json_out, "--json");  // before the benchmark, not after it
  ModelSpec spec = load_model(o.model);
  Profile profile;
  if (!o.profile.empty()) {
    profile = Profile::load(o.profile);
    spec = profile_model_spec(profile, o.profile);
    if (model_given && spec.name != load_model(o.model).name)
      throw Error("--model " + o.model + ": the profile " + o.profile + " is of " + spec.name +
                  " (give one or the other)");
  } else {
    // A synthetic profile: the simulator's cost depends on the number of events, not on the
    // durations, so fixed per-layer times measure it fairly.
    profile.model = spec.name;
    profile.batch = 32;
    for (const auto& t : spec.tensors) profile.tensors.push_back({t.name, t.layer, t.bytes()});
    for (const auto& l : spec.layers) profile.layers.push_back({l.name, {1.0}, {2.0}});
    profile.apply_ns_per_byte = 0.3;
    profile.apply_overhead_us = 5;
    profile.step_overhead_ms = {0.5};
  }
  std::printf("bench predict: %s, policy %s, %lld steps per worker, %s %s links, %s profile\n",
              spec.name.c_str(), o.policy.c_str(), (long long)o.steps,
              bandwidth_bps > 0 ? o.bandwidth.c_str() : "unlimited",
              o.link_model.c_str(), o.profile.empty() ? "synthetic" : "measured");
  std::printf("%-8s %8s %8s %9s %9s %12s %11s %13s %15s %9s\n", "workers", "slice", "slices",
              "wall s", "cpu s", "events", "ev/w-step", "events/cpu-s", "ns/slice-msg", "images/s");
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t slice : o.slice_params)
    for (int w : o.workers) {
      SimConfig c;
      c.workers = w;
      c.servers = 1;
      c.policy.name = o.policy;
      c.policy.slice_params = c.policy.partition_params = slice;
      c.bandwidth_bytes_per_sec = bandwidth_bps / 8;
      c.latency_s = 200e-6;
      c.arrival_jitter_s = kArrivalJitterUs * 1e-6;  // as psbed predict
      c.link_model = link_model;
      take_host_costs(profile, c);
      c.steps = o.steps;
      const std::int64_t per_step =
          transfers_per_step(make_partition(spec, c.partition_bytes, c.servers), c.policy);
      // CPU time beside wall time: on a shared machine the wall clock measures the neighbours.
      const std::clock_t cpu0 = std::clock();
      const SimResult r = simulate(profile, spec, c);
      const double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
      const double worker_steps = double(w) * double(o.steps);
      // CPU per message a worker pushes (each also has its pull, reply and acknowledgment):
      // constant when the cost is linear in workers x steps x slices.
      const double ns_per_slice = cpu / (worker_steps * double(per_step)) * 1e9;
      std::printf("%-8d %8lld %8lld %9.3f %9.3f %12llu %11.0f %13.0f %15.0f %9.0f\n", w,
                  (long long)slice, (long long)per_step, r.wall_seconds, cpu,
                  (unsigned long long)r.events, double(r.events) / worker_steps, r.events / cpu,
                  ns_per_slice, r.images_per_sec);
      std::fflush(stdout);
      out.push_back({{"model", spec.name},
                     {"profile", o.profile.empty() ? nlohmann::json() : nlohmann::json(o.profile)},
                     {"policy", o.policy},
                     {"bandwidth", bandwidth_text(c.bandwidth_bytes_per_sec)},
                     {"bandwidth_bytes_per_sec", c.bandwidth_bytes_per_sec},
                     {"latency_us", c.latency_s * 1e6},
                     {"workers", w},
                     {"servers", c.servers},
                     {"slice_params", slice},
                     {"slices_per_step", per_step},
                     {"steps", o.steps},
                     {"link_model", o.link_model},
                     {"seconds", r.wall_seconds},
                     {"cpu_seconds", cpu},
                     {"events", r.events},
                     {"events_per_worker_step", double(r.events) / worker_steps},
                     {"events_per_cpu_sec", r.events / cpu},
                     {"cpu_ns_per_slice", ns_per_slice},
                     {"images_per_sec", r.images_per_sec}});
    }
  write_json(o.json_out, out);
  return 0;
}

}  // namespace psbed::predictor
