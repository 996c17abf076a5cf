#include "predictor/measured_run.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/policy.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "predictor/report.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

namespace {

using T = nlohmann::json::value_t;

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
    recorded = {true,
                link,
                0,
                0,
                estimate ? profile.bandwidth_bytes_per_sec : 0.0,
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

// A run folder's summary.json, parsed; `validate runs/*` lists the files beside the run folders
// too, so the errors say which is which.
nlohmann::json read_summary(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw Error("run folder '" + dir +
                "' does not exist (expected the --out folder of `psbed launch`)");
  if (!fs::is_directory(dir, ec))
    throw Error("'" + dir +
                "' is a file, not a run folder (expected the --out folder of `psbed launch`; " +
                "runs/*/ with the slash lists folders only)");
  std::ifstream in(path);
  if (!in)
    throw Error("run folder '" + dir +
                "' has no summary.json (expected the --out folder of `psbed launch`)");
  nlohmann::json s;
  try {
    s = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not JSON: " + e.what());
  }
  if (!s.is_object()) throw Error("'" + path + "' is not a JSON object");
  return s;
}

// Why a run is no measurement (it failed, lost a node, switched policy, measured nothing), or
// empty with its images/s in `measured`.
std::string why_no_measurement(const nlohmann::json& s, const std::string& path, double& measured) {
  if (!s.value("ok", true))
    return "the run failed" + (s.contains("failure") ? ": " + s["failure"].dump() : std::string());
  // A run that lost a node, or changed policy midway, measured another configuration than the
  // one its settings name: no measurement of it.
  if (s.contains("failed_nodes") && s["failed_nodes"].is_array() && !s["failed_nodes"].empty()) {
    std::string names;
    for (const auto& n : s["failed_nodes"])
      names += (names.empty() ? "" : ", ") +
               (n.is_object() && n.contains("name") ? n["name"].get<std::string>() : n.dump());
    return "a node failed during the run (" + names + ")";
  }
  if (s.contains("policy_switches") && s["policy_switches"].is_array() &&
      !s["policy_switches"].empty())
    return "its policy was switched during the run (" +
           std::to_string(s["policy_switches"].size()) + " switch(es))";
  measured = summary_field(s, "images_per_sec", T::number_float, path).get<double>();
  if (!(measured > 0) || !std::isfinite(measured))
    return "it measured " + s["images_per_sec"].dump() + " images/s";
  return {};
}

// The run's nodes, mode and policy on `base`, after checking that its model and batch are the
// profile's; errors name the run folder.
SimConfig run_nodes(const std::string& dir, const nlohmann::json& s, const std::string& path,
                    const Profile& profile, const SimConfig& base) {
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
    policy::check_policy_options(c.policy);  // an unknown policy is refused here, naming the run
    // The route its fc layers took (launch --comm); runs from before it went through the shards.
    if (s.contains("comm"))
      c.comm = parse_comm(summary_field(s, "comm", T::string, path).get<std::string>());
  } catch (const Error& e) {
    throw Error("run folder '" + dir + "': " + e.what());
  }
  return c;
}

// With --netns tc shaped the links, not the nodes (their traces say only the latency): the
// bandwidth is launch's, in bytes/s; < 0 where launch recorded none.
double netns_bandwidth(const nlohmann::json& launch) {
  double bw = 0, lat = 0;
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
    netns_bw =
        for_flag("the run's launch.netns.shaping", [&] { return parse_bandwidth_bps(r); }) / 8;
  }
  return netns_bw;
}

// The link, the policy's settings and the delays the run had, into `m.link` and `c`: from
// worker-0's trace (its metadata into `meta`) or, launched with --no-trace, from summary.json.
// Returns the start stagger the run recorded, in ms.
double take_recorded_settings(const std::string& dir, const nlohmann::json& s,
                              const Profile& profile, const SimFlags& flags, SimConfig& c,
                              MeasuredRun& m, nlohmann::json& meta) {
  // worker-0 carries the link, the policy parameters and the straggler setting of the run.
  const fs::path trace = fs::path(dir) / "traces" / "worker-0.trace.json";
  const nlohmann::json launch = s.value("launch", nlohmann::json::object());
  double start_stagger_ms = 0;  // as the run recorded it
  if (fs::exists(trace)) {
    meta = read_trace_metadata(trace.string());
    take_run_link(meta.value("link", std::string()), profile, flags, c, m.link);
    if (launch.contains("netns")) {
      const double netns_bw = netns_bandwidth(launch);
      if (netns_bw >= 0) {
        m.link.text = "tc " + format_bandwidth(netns_bw * 8) + ", " + fmt(m.link.latency * 1e6, 0) +
                      " us one way";
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
    throw Error("run folder '" + dir +
                "' has no traces/worker-0.trace.json, which records the link the run had: give it "
                "with --bandwidth (and --latency)");
  } else {  // an older run without traces: its link from the flags, its policy's settings from
            // summary.json
    take_run_settings(s.value("policy_options", nlohmann::json::object()), 0.0, 0.0, flags, c);
  }
  return start_stagger_ms;
}

}  // namespace

MeasuredRun read_run(const std::string& dir, const Profile& profile, const SimConfig& base,
                     const SimFlags& flags) {
  MeasuredRun m;
  m.run = dir;
  const std::string path = dir + "/summary.json";
  m.summary = read_summary(dir);
  const auto& s = m.summary;
  m.skipped = why_no_measurement(s, path, m.measured);
  if (!m.skipped.empty()) return m;
  SimConfig c = run_nodes(dir, s, path, profile, base);
  c.partition_bytes = s.value("partition_bytes", c.partition_bytes);
  // "replay:profile.json" sleeps; real compute runs on the host's cores (--compute auto: the
  // run's own; real or replay: as the flag says).
  if (flags.compute == "auto")
    c.compute_on_cores = s.value("compute", std::string("real")) == "real";
  if (flags.steps <= 0) c.steps = s.value("steps", std::int64_t(200));
  const nlohmann::json launch = s.value("launch", nlohmann::json::object());
  nlohmann::json meta;  // worker-0's trace metadata, where it has a trace
  const double start_stagger_ms = take_recorded_settings(dir, s, profile, flags, c, m, meta);
  // The run's stragglers (launch --straggler): validate has no flag for them.
  if (launch.contains("stragglers")) {
    c.stragglers = stragglers_from_json(launch["stragglers"], "'" + path + "' launch");
    for_flag("run folder '" + dir + "'", [&] { check_stragglers(c.stragglers, c.workers); });
  }
  // The shard's apply lanes, where launch recorded them (psbed launch --apply-threads).
  if (launch.contains("apply_threads") && launch["apply_threads"].is_number_integer())
    c.apply_lanes = launch["apply_threads"].get<int>();
  // Copies of each part (launch --replicas): the summary names them from 2 on.
  c.replicas = s.value("replicas", 1);
  c.push_pull = s.value("push_pull", false);  // launch --push-pull: the summary says so when on
  m.config = c;
  m.recorded = {
      {"steps", s.value("steps", nlohmann::json())},
      {"start_stagger_ms", start_stagger_ms},
      {"compute", s.value("compute", std::string("real"))},
      {"host_cpus", launch.value("host_cpus", nlohmann::json())},
      {"threads", meta.is_object() ? meta.value("threads", nlohmann::json()) : nlohmann::json()}};
  // The host's CPU per step, to set beside what the simulation books for the same
  // configuration: runs on as many cores as are simulated, predicted with the compute they had
  // (real compute on the cores, replayed compute on none), and real compute on one thread a
  // worker, as the simulator books it.
  const bool real = s.value("compute", std::string("real")) == "real";
  if (c.host_cpus > 0 && launch.value("host_cpus", 0) == c.host_cpus &&
      real == c.compute_on_cores && meta.is_object() && (!real || meta.value("threads", 1) == 1))
    m.host = run_host_cpu(dir, c.workers, c.servers, s.value("steps", std::int64_t(0)),
                          s.value("per_worker", nlohmann::json()), &meta);
  return m;
}

std::string config_key(const MeasuredRun& m) {
  const SimConfig& c = m.config;
  const auto& s = m.summary;
  return nlohmann::json{
      {"model", s.value("model", std::string())},
      {"batch", s.value("batch", 0)},
      {"recorded", m.recorded},
      {"recorded_link", m.link.known ? nlohmann::json(m.link.text) : nlohmann::json()},
      {"workers", c.workers},
      {"servers", c.servers},
      {"mode", c.mode.str()},
      {"policy", c.policy.name},
      {"comm", to_string(c.comm)},
      {"slice_params", c.policy.slice_params},
      {"partition_params", c.policy.partition_params},
      {"credit_bytes", c.policy.credit_bytes},
      {"partition_bytes", c.partition_bytes},
      {"apply_lanes", c.apply_lanes},
      {"replicas", c.replicas},
      {"push_pull", c.push_pull},
      {"steps", c.steps},
      {"bandwidth", c.bandwidth_bytes_per_sec},
      {"latency", c.latency_s},
      {"straggler", c.straggler_s},
      {"stragglers", stragglers_json(c.stragglers)},
      {"stagger", c.start_stagger_s},
      {"compute_on_cores", c.compute_on_cores},
      {"host_cpus", c.host_cpus}}
      .dump();
}

}  // namespace psbed::predictor
