#include "predictor/profile_extract.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/defaults.hpp"
#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"
#include "predictor/host_cost.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

bool parse_link_metadata(const std::string& text, double* bytes_per_sec, double* latency_s) {
  double value = 0, latency_us = 0;
  char unit[16] = {0};
  if (text.empty() || text == "unshaped") return false;
  if (std::sscanf(text.c_str(), "%lf %15[A-Za-z/], %lf us", &value, unit, &latency_us) < 2) {
    // "unlimited, 200 us one way": latency only
    if (std::sscanf(text.c_str(), "unlimited, %lf us", &latency_us) == 1) {
      *bytes_per_sec = 0, *latency_s = latency_us * 1e-6;
      return true;
    }
    return false;
  }
  const std::string u = unit;
  double scale = 0;
  if (u == "bit/s")
    scale = 1;
  else if (u == "Kbit/s")
    scale = 1e3;
  else if (u == "Mbit/s")
    scale = 1e6;
  else if (u == "Gbit/s")
    scale = 1e9;
  else
    return false;
  *bytes_per_sec = value * scale / 8;
  *latency_s = latency_us * 1e-6;
  return true;
}

namespace {

// A push handed over within this long after a compute event ends was handed over by the compute
// thread itself (the scheduler pumps right after each backward).
constexpr double kSendStartUs = 500;

// CPU seconds a process used between t0 and t1 (us), from [time_us, cpu_s] samples taken a
// few times a second, read off the line between the samples around each end; -1 if the samples
// do not cover the span.
double cpu_between(const nlohmann::json& samples, double t0, double t1) {
  auto at = [&](double t) {
    for (std::size_t i = 1; i < samples.size(); ++i) {
      const double ta = samples[i - 1][0], tb = samples[i][0];
      if (t < ta || t > tb) continue;
      const double ca = samples[i - 1][1], cb = samples[i][1];
      return tb > ta ? ca + (cb - ca) * (t - ta) / (tb - ta) : ca;
    }
    return -1.0;
  };
  const double a = at(t0), b = at(t1);
  return a < 0 || b < 0 ? -1.0 : b - a;
}

struct Fit {
  double intercept = 0, slope = 0;
  bool ok = false;
};

// Least squares y = a + b x; needs two distinct x.
Fit fit_line(const std::vector<std::pair<double, double>>& xy) {
  Fit f;
  if (xy.size() < 2) return f;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : xy) sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double n = double(xy.size());
  const double den = n * sxx - sx * sx;
  if (den <= 0) return f;
  f.slope = (n * sxy - sx * sy) / den;
  f.intercept = (sy - f.slope * sx) / n;
  f.ok = true;
  return f;
}

std::vector<std::string> trace_files(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 11 && name.substr(name.size() - 11) == ".trace.json")
      v.push_back(e.path().string());
  }
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

HostCpu host_cpu_per_step(const std::vector<WorkerSteadyCpu>& workers,
                          const std::vector<nlohmann::json>& server_cpu_samples) {
  HostCpu h;
  if (workers.empty()) return h;
  double t0 = -1e300, t1 = 1e300;
  for (const auto& w : workers) {
    if (!(w.to_us > w.from_us) || w.steps <= 0 || w.cpu_s < 0) return h;
    t0 = std::max(t0, w.from_us), t1 = std::min(t1, w.to_us);
  }
  if (!(t1 > t0)) return h;
  double cpu = 0, steps = 0;
  for (const auto& w : workers) {
    const double share = (t1 - t0) / (w.to_us - w.from_us);
    cpu += w.cpu_s * share, steps += w.steps * share;
  }
  for (const auto& samples : server_cpu_samples) {
    const double used = cpu_between(samples, t0, t1);
    if (used < 0) return h;
    cpu += used;
  }
  h.per_step_s = cpu / steps;
  h.busy_cores = cpu / ((t1 - t0) / 1e6);
  return h;
}

HostCpu run_host_cpu(const std::string& run_dir, int workers, int servers,
                     std::int64_t planned_steps, const nlohmann::json& per_worker,
                     const nlohmann::json* worker0_metadata) {
  const fs::path traces = fs::path(run_dir) / "traces";
  std::vector<WorkerSteadyCpu> ws;
  std::vector<nlohmann::json> samples;
  for (int w = 0; w < workers; ++w) {
    const fs::path path = traces / ("worker-" + std::to_string(w) + ".trace.json");
    const bool known = w == 0 && worker0_metadata && worker0_metadata->is_object();
    if (!known && !fs::exists(path)) return {};
    const nlohmann::json meta = known ? *worker0_metadata : read_trace_metadata(path.string());
    if (!meta.contains("cpu_steady") || !meta["cpu_steady"].is_object()) return {};
    const auto& c = meta["cpu_steady"];
    // The worker's own count where summary.json has it, else its done steps less the warm-up.
    double steps =
        double(meta.value("steps_done", planned_steps) - default_warmup_steps(planned_steps));
    if (per_worker.is_array())
      for (const auto& pw : per_worker)
        if (pw.is_object() && pw.value("id", -1) == w && pw.contains("steady_steps") &&
            pw["steady_steps"].is_number())
          steps = pw["steady_steps"].get<double>();
    ws.push_back({c.value("from_us", 0.0), c.value("to_us", 0.0), c.value("cpu_s", -1.0), steps});
  }
  for (int s = 0; s < servers; ++s) {
    const fs::path path = traces / ("server-" + std::to_string(s) + ".trace.json");
    if (!fs::exists(path)) return {};
    const nlohmann::json meta = read_trace_metadata(path.string());
    if (!meta.contains("cpu_samples") || !meta["cpu_samples"].is_array()) return {};
    samples.push_back(meta["cpu_samples"]);
  }
  return host_cpu_per_step(ws, samples);
}

namespace {

// A run folder's traces, by role.
struct RunTraces {
  std::vector<LoadedTrace> workers, servers;
};

RunTraces load_traces(const ProfileOptions& opt, const fs::path& run) {
  if (!fs::is_directory(run))
    throw Error("run folder '" + opt.run +
                "' does not exist (expected the --out folder of `psbed launch`)");
  const fs::path traces = run / "traces";
  if (!fs::is_directory(traces))
    throw Error("run folder '" + opt.run + "' has no traces/ (was it launched with --no-trace?)");
  RunTraces t;
  for (const auto& path : trace_files(traces)) {
    LoadedTrace trace = read_trace(path);
    const std::string role = trace.metadata.value("role", std::string());
    if (role == "worker")
      t.workers.push_back(std::move(trace));
    else if (role == "server")
      t.servers.push_back(std::move(trace));
  }
  if (t.workers.empty())
    throw Error("run folder '" + opt.run +
                "': no worker trace in traces/ (expected worker-N.trace.json)");
  return t;
}

// The worker the profile is taken from: --worker, or the run's only one.
const LoadedTrace& pick_worker(const ProfileOptions& opt, const std::vector<LoadedTrace>& workers) {
  const LoadedTrace* worker = nullptr;
  if (!opt.worker.empty()) {
    for (const auto& w : workers)
      if (w.node == opt.worker) worker = &w;
    if (!worker)
      throw Error("run folder '" + opt.run + "' has no trace of worker '" + opt.worker + "'");
  } else if (workers.size() > 1) {
    std::string names;
    for (const auto& w : workers) names += (names.empty() ? "" : ", ") + w.node;
    throw Error("run folder '" + opt.run + "' has " + std::to_string(workers.size()) +
                " workers (" + names +
                "): a profile is taken from one; pick it with --worker NAME");
  } else {
    worker = &workers[0];
  }
  return *worker;
}

// Per step: each layer's forward and backward duration, each layer's last pull arrival, and
// the compute lane's gaps.
struct StepData {
  std::vector<double> fwd, bwd;  // ms, -1 = missing
  std::vector<const TraceEvent*> compute;
  std::vector<double> pull_done;  // us, per layer
  double all_pulls_done = 0, last_push_done = 0;
  std::vector<double> push_issued;  // us: when the worker handed each push to the transport
  const TraceEvent* step = nullptr;
};
struct WorkerSteps {
  std::map<std::string, int> layer_index;
  std::map<std::int64_t, StepData> by_step;
  std::vector<std::pair<double, double>> pull_points;  // (bytes, us)
};

// The worker's events after the warm-up, per step.
WorkerSteps collect_steps(const LoadedTrace& worker, const ModelSpec& spec, std::int64_t skip,
                          const std::string& where) {
  WorkerSteps ws;
  auto& layer_index = ws.layer_index;
  auto& by_step = ws.by_step;
  auto& pull_points = ws.pull_points;
  for (int l = 0; l < int(spec.layers.size()); ++l) layer_index[spec.layers[l].name] = l;
  const int L = int(spec.layers.size());
  auto step_data = [&](std::int64_t s) -> StepData& {
    StepData& d = by_step[s];
    if (d.fwd.empty()) d.fwd.assign(L, -1), d.bwd.assign(L, -1), d.pull_done.assign(L, 0);
    return d;
  };
  for (const auto& e : worker.events) {
    if (e.step < skip) continue;
    if (e.lane == "compute" && (e.name.rfind("fwd:", 0) == 0 || e.name.rfind("bwd:", 0) == 0)) {
      auto it = layer_index.find(e.name.substr(4));
      if (it == layer_index.end())
        throw Error(where + ": event '" + e.name + "' names no layer of " + spec.name);
      StepData& d = step_data(e.step);
      (e.name[0] == 'f' ? d.fwd : d.bwd)[it->second] = e.dur_us / 1e3;
      d.compute.push_back(&e);
    } else if (e.lane == "compute") {
      step_data(e.step).compute.push_back(&e);  // straggle and the like: time the worker spends
    } else if (e.lane == "pull" && e.has_priority && e.priority >= 0 && e.priority < L) {
      StepData& d = step_data(e.step);
      d.pull_done[e.priority] = std::max(d.pull_done[e.priority], e.ts_us + e.dur_us);
      d.all_pulls_done = std::max(d.all_pulls_done, e.ts_us + e.dur_us);
      if (e.bytes > 0) pull_points.emplace_back(double(e.bytes), e.dur_us);
    } else if (e.lane == "push") {
      StepData& d = step_data(e.step);
      d.last_push_done = std::max(d.last_push_done, e.ts_us + e.dur_us);
      d.push_issued.push_back(e.ts_us);
    } else if (e.lane == "step" && e.name == "step") {
      step_data(e.step).step = &e;
    }
  }
  return ws;
}

// Each whole step's per-layer samples and step overhead into `p`.
void take_step_samples(Profile& p, const ModelSpec& spec, WorkerSteps& ws, bool bulk) {
  const int L = int(spec.layers.size());
  auto& layer_index = ws.layer_index;
  for (const auto& l : spec.layers) p.layers.push_back({l.name, {}, {}});
  for (auto& [s, d] : ws.by_step) {
    if (!d.step) continue;  // the last, unfinished step of a stopped run
    bool whole = true;
    for (int l = 0; l < L; ++l) whole = whole && d.fwd[l] >= 0 && d.bwd[l] >= 0;
    if (!whole) continue;
    for (int l = 0; l < L; ++l)
      p.layers[l].forward_ms.push_back(d.fwd[l]), p.layers[l].backward_ms.push_back(d.bwd[l]);
    // Overhead: compute-lane gaps not spent waiting for a transfer (batch loading, the loss,
    // bookkeeping). A gap before forward of layer l waits for that layer's pulls (all pulls
    // under bulk); the gap after the last backward waits for the push acknowledgments. A gap
    // that opens with the compute thread handing pushes over (right after a backward) lasts
    // at least until its last hand-over: the thread was blocked in send() on a full send
    // buffer, which the simulator models itself, so it is no overhead.
    std::sort(d.compute.begin(), d.compute.end(),
              [](auto* a, auto* b) { return a->ts_us < b->ts_us; });
    std::sort(d.push_issued.begin(), d.push_issued.end());
    double overhead = 0, cursor = d.step->ts_us;
    for (const TraceEvent* e : d.compute) {
      double blocked_until = cursor;
      if (e->name.rfind("fwd:", 0) == 0) {
        const int l = layer_index[e->name.substr(4)];
        double ready = bulk ? d.all_pulls_done : 0;
        for (int k = 0; k <= l; ++k) ready = std::max(ready, d.pull_done[k]);
        blocked_until = std::max(cursor, std::min(ready, e->ts_us));
      }
      auto first = std::lower_bound(d.push_issued.begin(), d.push_issued.end(), cursor);
      if (first != d.push_issued.end() && *first <= std::min(cursor + kSendStartUs, e->ts_us)) {
        auto last = std::upper_bound(first, d.push_issued.end(), e->ts_us);
        blocked_until = std::max(blocked_until, *std::prev(last));
      }
      overhead += std::max(0.0, e->ts_us - blocked_until);
      cursor = std::max(cursor, e->ts_us + e->dur_us);
    }
    const double step_end = d.step->ts_us + d.step->dur_us;
    overhead += std::max(0.0, step_end - std::max(cursor, std::min(d.last_push_done, step_end)));
    p.step_overhead_ms.push_back(overhead / 1e3);
  }
}

}  // namespace

double host_cv_of(const std::vector<double>& outside) {
  constexpr std::size_t kBlocks = 8;
  const std::size_t per = outside.size() / kBlocks;
  const double mean_outside = mean_of(outside);
  if (per < 2 || !(mean_outside > 0)) return 0;
  std::vector<double> means;
  double within = 0;  // the steps' variance inside their block, pooled
  for (std::size_t b = 0; b < kBlocks; ++b) {
    const std::vector<double> block(outside.begin() + std::ptrdiff_t(b * per),
                                    outside.begin() + std::ptrdiff_t((b + 1) * per));
    const double m = mean_of(block);
    means.push_back(m);
    for (double x : block) within += (x - m) * (x - m);
  }
  within /= double(kBlocks * (per - 1));
  const double m = mean_of(means);
  double between = 0;
  for (double x : means) between += (x - m) * (x - m);
  between /= double(kBlocks - 1);
  const double slow = std::max(0.0, between - within / double(per));
  return std::min(1.0, std::sqrt(slow + within / double(outside.size())) / mean_outside);
}

namespace {

// How this run's steps varied (Profile::host_cv, start_spread_ms): host_cv_of the time each
// steady step spent outside compute (transfers, the host's message work, overhead: where the
// host's speed shows), and the warm-up steps' time beyond steady ones, which is how far apart
// workers started together may be once they are steady.
void measure_variation(Profile& p, const LoadedTrace& worker, const WorkerSteps& ws,
                       std::int64_t skip) {
  std::vector<double> outside;  // us per steady step, in step order
  std::vector<double> steady;
  for (const auto& [s, d] : ws.by_step) {
    if (!d.step) continue;
    double compute = 0;
    bool whole = true;
    for (std::size_t l = 0; l < d.fwd.size(); ++l) {
      whole = whole && d.fwd[l] >= 0 && d.bwd[l] >= 0;
      compute += (d.fwd[l] + d.bwd[l]) * 1e3;
    }
    if (!whole) continue;
    outside.push_back(std::max(0.0, d.step->dur_us - compute));
    steady.push_back(d.step->dur_us);
  }
  p.host_cv = host_cv_of(outside);
  if (steady.empty()) return;
  const double typical = median(steady);
  double extra = 0;
  for (const TraceEvent& e : worker.events)
    if (e.step >= 0 && e.step < skip && e.lane == "step" && e.name == "step")
      extra += std::max(0.0, e.dur_us - typical);
  p.start_spread_ms = extra / 1e3;
}

// The run's own pace over the profiled steps, for calibration.
double measured_pace(const std::map<std::int64_t, StepData>& by_step) {
  double first_start = 0, last_end = 0;
  std::int64_t counted = 0;
  for (const auto& [st, d] : by_step) {
    if (!d.step) continue;
    if (counted == 0) first_start = d.step->ts_us;
    last_end = std::max(last_end, d.step->ts_us + d.step->dur_us);
    ++counted;
  }
  return counted > 0 && last_end > first_start ? counted / ((last_end - first_start) / 1e6) : 0;
}

// Server: apply cost per byte from the apply events (a line through duration against bytes).
void fit_apply_cost(Profile& p, const std::vector<LoadedTrace>& servers, std::int64_t skip) {
  std::vector<std::pair<double, double>> apply_points;
  for (const auto& s : servers)
    for (const auto& e : s.events)
      if (e.lane == "apply" && e.bytes >= 0 && e.step >= skip)
        apply_points.emplace_back(double(e.bytes), e.dur_us);
  const Fit apply = fit_line(apply_points);
  if (apply.ok) {
    p.apply_ns_per_byte = std::max(0.0, apply.slope * 1e3);
    p.apply_overhead_us = std::max(0.0, apply.intercept);
  } else if (!apply_points.empty()) {
    double mean = 0;
    for (auto [x, y] : apply_points) mean += y;
    p.apply_overhead_us = mean / double(apply_points.size());
  }
}

// Link: the run's configured emulation if it had one; otherwise what the pulls show (a pull
// is a request one way and the part the other: duration = 2 latency + bytes / bandwidth).
void take_link(Profile& p, const std::string& link,
               const std::vector<std::pair<double, double>>& pull_points) {
  double bw = 0, lat = 0;
  if (parse_link_metadata(link, &bw, &lat)) {
    p.bandwidth_bytes_per_sec = bw, p.latency_us = lat * 1e6, p.shaped = link;
  } else {
    const Fit f = fit_line(pull_points);
    if (f.ok && f.slope > 0) p.bandwidth_bytes_per_sec = 1e6 / f.slope;
    if (f.ok) p.latency_us = std::max(0.0, f.intercept / 2);
  }
}

// summary.json says what the traces cannot: the host's CPU count (launch's record), the run's
// worker count (a worker killed leaves no trace), the nodes that failed. A damaged one is
// refused rather than read as absent: the profile would quietly lose the host's cores. Null
// where the run has none (said in `warnings`).
nlohmann::json read_run_summary(const fs::path& run, const ProfileOptions& opt,
                                nlohmann::json& warnings) {
  nlohmann::json summary;
  const fs::path summary_path = run / "summary.json";
  if (std::ifstream in(summary_path); in) {
    try {
      summary = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(summary_path.string() + " is not valid JSON (" + e.what() +
                  "): repair it, or remove it to profile from the traces alone");
    }
    if (!summary.is_object())
      throw Error(summary_path.string() + " is not a JSON object (expected a run's summary)");
    // The fields read below, of the kinds launch writes: another kind is named, with the file.
    using T = nlohmann::json::value_t;
    auto expect = [&](const nlohmann::json& obj, const std::string& where, const char* key,
                      std::initializer_list<T> kinds, const char* what) {
      if (!obj.contains(key)) return;
      for (const T k : kinds)
        if (obj[key].type() == k || (k == T::number_float && obj[key].is_number())) return;
      throw Error(summary_path.string() + ": '" + where + key + "' is " + obj[key].dump() +
                  ", expected " + what);
    };
    expect(summary, "", "servers", {T::number_float}, "a number");
    expect(summary, "", "workers", {T::number_float}, "a number");
    expect(summary, "", "ok", {T::boolean}, "true or false");
    expect(summary, "", "failure", {T::string}, "a string");
    expect(summary, "", "policy_final", {T::string, T::null}, "a policy's name");
    expect(summary, "", "policy_switches", {T::array}, "a list");
    expect(summary, "", "launch", {T::object}, "an object");
    expect(summary, "", "failed_nodes", {T::array}, "a list of nodes");
    if (summary.contains("launch"))
      expect(summary["launch"], "launch.", "host_cpus", {T::number_float}, "a number");
    if (summary.contains("failed_nodes"))
      for (const auto& f : summary["failed_nodes"]) {
        if (!f.is_object())
          throw Error(summary_path.string() + ": a node of 'failed_nodes' is " + f.dump() +
                      ", expected an object");
        expect(f, "failed_nodes[].", "name", {T::string}, "a string");
        expect(f, "failed_nodes[].", "reason", {T::string}, "a string");
      }
  } else {
    warnings.push_back(
        "no summary.json in '" + opt.run +
        "': the host's CPU count is unknown, so the host's cores are not modelled, and "
        "a worker that died without a trace would go unseen; profile a run psbed launch made");
  }
  return summary;
}

// What summary.json says against the profile: no host CPU count, nodes that failed.
void warn_about_summary(const nlohmann::json& summary, nlohmann::json& warnings) {
  if (summary.is_object() &&
      !(summary.contains("launch") && summary["launch"].value("host_cpus", 0.0) > 0))
    warnings.push_back(
        "summary.json has no launch.host_cpus (a cluster started by hand, or an older psbed): "
        "the host's cores are not modelled");
  if (summary.is_object() && summary.contains("failed_nodes") &&
      summary["failed_nodes"].is_array() && !summary["failed_nodes"].empty()) {
    std::string names;
    for (const auto& f : summary["failed_nodes"])
      names += (names.empty() ? "" : ", ") + f.value("name", std::string("?")) + " (" +
               f.value("reason", std::string("failed")) + ")";
    warnings.push_back(
        "node(s) failed during the run: " + names +
        "; the steps before shared the host and the shard with them: profile a run in which "
        "no node failed");
  }
}

// Host: the CPU the worker and the shards spent over the worker's steady steps (its trace
// carries its own, the shards' traces samples of theirs), less the worker's computing, per
// message received on either side (a transfer is two messages: a push and its acknowledgment,
// a pull request and its reply; under push-pull a push and its answer, which carries the bytes
// back). From a replay run that is all transport and bookkeeping; from
// a real one the compute's share is estimated as its duration x its threads. Only a
// single-worker run splits into a cost per message and per byte: the shards' CPU serves every
// worker of the run, the worker's transfers are one worker's. Returns every process's CPU per
// step (compute included); `steady_cpu_s` the CPU split, < 0 where none.
HostCpu measure_host_cpu(Profile& p, const ProfileOptions& opt, const LoadedTrace& worker,
                         const std::vector<LoadedTrace>& servers, int host_cpus,
                         double& steady_cpu_s) {
  const nlohmann::json& meta = worker.metadata;
  HostCpu host_cpu;
  if (!(host_cpus > 0 && meta.contains("cpu_steady"))) return host_cpu;
  const auto& steady = meta["cpu_steady"];
  const double t0 = steady.value("from_us", 0.0), t1 = steady.value("to_us", 0.0);
  double cpu = steady.value("cpu_s", 0.0);
  bool every_shard = t1 > t0;
  for (const auto& sv : servers) {
    const auto samples = sv.metadata.value("cpu_samples", nlohmann::json::array());
    const double used = cpu_between(samples, t0, t1);
    every_shard = every_shard && used >= 0;
    cpu += std::max(0.0, used);
  }
  double transfers = 0, bytes = 0, compute_s = 0, steady_steps = 0;
  const bool push_pull = meta.contains("cluster") && meta["cluster"].is_object() &&
                         meta["cluster"].value("push_pull", false);
  for (const auto& e : worker.events) {
    const double end = e.ts_us + e.dur_us;
    if (end < t0 || end > t1) continue;
    if (e.lane == "push" || e.lane == "pull")
      ++transfers, bytes += double(std::max<std::int64_t>(0, e.bytes)) *
                            (push_pull && e.lane == "push" ? 2 : 1);
    if (e.lane == "step" && e.name == "step") ++steady_steps;
    if (e.lane == "compute" && (e.name.rfind("fwd:", 0) == 0 || e.name.rfind("bwd:", 0) == 0))
      compute_s += e.dur_us / 1e6;
  }
  // Every process's CPU so far, compute included: per step and per second of the span.
  if (every_shard && steady_steps > 0) host_cpu = {cpu / steady_steps, cpu / ((t1 - t0) / 1e6)};
  if (meta.value("compute", std::string("real")) == "real")
    cpu -= compute_s * std::max(1, meta.value("threads", 1));
  if (every_shard && transfers > 0 && cpu > 0) {
    p.host_cpus = host_cpus;
    p.cpu_per_byte_ns =
        opt.copy_cpu_ns_per_byte >= 0 ? opt.copy_cpu_ns_per_byte : measure_copy_cpu_ns_per_byte();
    p.cpu_per_message_us =
        std::max(0.0, cpu - bytes * p.cpu_per_byte_ns * 1e-9) / (2 * transfers) * 1e6;
    steady_cpu_s = cpu;
  }
  return host_cpu;
}

// A run switched to other policies (psbed ctl) mixes their paces and messages; a run that did
// not finish is profiled over the steps it did; a handful of steps makes every per-layer figure
// and the pace that handful's. Each is said in `warnings`, and kept in the profile. Returns the
// run's policy switches.
std::size_t warn_about_run(Profile& p, const nlohmann::json& summary, const std::string& policy,
                           std::int64_t skip, nlohmann::json& warnings) {
  std::size_t switches = 0;
  if (summary.is_object() && summary.contains("policy_switches") &&
      summary["policy_switches"].is_array())
    switches = summary["policy_switches"].size();
  if (switches > 0) {
    p.source["policy_switches"] = switches;
    p.source["policy_final"] = summary.value("policy_final", nlohmann::json());
    warnings.push_back(
        "the run switched its policy " + std::to_string(switches) + " time(s) (from " + policy +
        " to " + summary.value("policy_final", std::string("?")) +
        " at the end): its steps mix the policies, and source.policy names the first; "
        "profile a run of one policy for predictions");
  }
  if (summary.is_object() && !summary.value("ok", true))
    warnings.push_back("the run did not finish (" +
                       summary.value("failure", std::string("failed")) + "): profiled over the " +
                       std::to_string(p.layers[0].forward_ms.size()) +
                       " steps it did after its warm-up");
  if (p.layers[0].forward_ms.size() < kFewProfiledSteps)
    warnings.push_back("only " + std::to_string(p.layers[0].forward_ms.size()) +
                       " step(s) profiled after " + std::to_string(skip) +
                       " skipped: the compute samples and the pace are that few steps'; "
                       "profile a longer run (or a smaller --skip-steps)");
  return switches;
}

// Calibration against the run's own pace.
void calibrate_to_pace(Profile& p, const ProfileOptions& opt, bool single, std::size_t switches,
                       int run_workers, double measured_sps) {
  // An unshaped run's latency is the intercept of its pulls' durations, which holds the
  // software time of both ends as well; where the host's CPU was measured the simulator charges
  // that time again (each message's CPU, a node's serial share of it). Where the simulated run
  // is then slower than it measured, the latency comes down until it is not.
  if (single && switches == 0 && opt.calibrate && measured_sps > 0 && p.shaped.empty() &&
      p.host_cpus > 0 && p.latency_us > 0 &&
      simulated_source_pace(p) < measured_sps * (1 - kCalibrationTolerance)) {
    p.source["pulls_latency_us"] = p.latency_us;
    p.latency_us = std::min(p.latency_us, calibrate_link_latency_us(p, measured_sps));
  }
  if (!single) {
    p.source["calibrated"] = "no: the pace of one of " + std::to_string(run_workers) +
                             " workers holds the others' contention; profile a 1-worker run";
  } else if (switches > 0) {
    p.source["calibrated"] = "no: the run's pace is no one policy's (it switched policy)";
  } else if (opt.calibrate && measured_sps > 0) {
    // A receive costs tens of microseconds of software here; a fit far beyond that means the
    // gap between the run and its simulation lies elsewhere (compute contention, a model the
    // simulator lacks), and charging it to every message would distort configurations that send
    // many more messages (small slices, more workers). Then the cost stays 0 and the fit is kept
    // for the record.
    //
    // Big messages are another matter: each waits for the host to copy it through loopback and
    // ZeroMQ between the two links, a cost per byte. So a refused per-message fit is tried per
    // byte instead, within what a copy costs (kMaxPlausibleTransitNsPerByte).
    //
    // Where the run measured the host's CPU, a node's serial time per message is known: its
    // share, half, of the CPU a message costs both ends. What the calibration then finds on top
    // is a delay (thread hand-overs, wake-ups) that holds up nothing but the message, so it does
    // not cap a busy shard at one message per calibrated cost.
    const bool host = p.host_cpus > 0;
    const double fit = host ? calibrate_message_latency_us(p, measured_sps)
                            : calibrate_message_cost_us(p, measured_sps);
    if (fit <= kMaxPlausibleMessageCostUs) {
      (host ? p.message_latency_us : p.message_cost_us) = fit;
      p.source["calibrated_link_model"] = "bucket";
    } else {
      p.source[host ? "refused_message_latency_us" : "refused_message_cost_us"] = fit;
      const double per_byte = calibrate_transit_ns_per_byte(p, measured_sps);
      if (per_byte <= kMaxPlausibleTransitNsPerByte) {
        p.transit_ns_per_byte = per_byte;
        p.source["calibrated_link_model"] = "bucket";
      } else {
        p.source["refused_transit_ns_per_byte"] = per_byte;
      }
    }
  }
}

// The profile's own run, simulated: a profile that cannot reproduce it says by how much, in the
// file as well as on the terminal (every prediction from it carries that gap).
void self_check(Profile& p, double measured_sps, nlohmann::json& warnings) {
  const double simulated = simulated_source_pace(p);
  p.source["simulated_steps_per_sec"] = simulated;
  const double off = 100 * (simulated - measured_sps) / measured_sps;
  if (std::abs(off) > kSelfCheckTolerancePct) {
    char text[256];
    std::snprintf(
        text, sizeof text,
        "simulated, this profile's own run gives %.1f steps/s against the %.1f it measured "
        "(%+.0f%%): predictions from it carry that gap",
        simulated, measured_sps, off);
    warnings.push_back(text);
  }
}

}  // namespace

Profile extract_profile(const ProfileOptions& opt) {
  const fs::path run(opt.run);
  const RunTraces traces = load_traces(opt, run);
  const LoadedTrace& worker = pick_worker(opt, traces.workers);
  const std::string where = "trace of " + worker.node + " in '" + opt.run + "'";
  const nlohmann::json& meta = worker.metadata;
  if (!meta.contains("cluster") || !meta["cluster"].contains("model_toml"))
    throw Error(
        where +
        ": metadata has no cluster experiment with the model spec (expected a psbed worker trace)");
  const nlohmann::json& exp = meta["cluster"];
  const ModelSpec spec =
      parse_model_spec(exp["model_toml"].get<std::string>(), where + " (model spec)");
  // A run cut short (Ctrl-C, --timeout) did fewer steps than planned: its warm-up is counted
  // over those.
  const std::int64_t steps = meta.value("steps_done", exp.value("steps", std::int64_t(0)));
  const std::int64_t skip = opt.skip_steps >= 0 ? opt.skip_steps : default_warmup_steps(steps);

  Profile p;
  p.model = spec.name;
  p.batch = exp.value("batch", 0);
  if (p.batch <= 0) throw Error(where + ": metadata has no positive batch");
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  WorkerSteps steps_seen = collect_steps(worker, spec, skip, where);
  take_step_samples(p, spec, steps_seen, meta.value("policy", std::string()) == "bulk");
  const double measured_sps = measured_pace(steps_seen.by_step);
  measure_variation(p, worker, steps_seen, skip);
  if (p.layers.empty() || p.layers[0].forward_ms.empty())
    throw Error(where + ": no complete step after the " + std::to_string(skip) +
                " warm-up steps (expected fwd:/bwd: events of every layer and a step event; run "
                "more steps)");
  fit_apply_cost(p, traces.servers, skip);
  const std::string link = meta.value("link", std::string());
  take_link(p, link, steps_seen.pull_points);
  std::string mode = exp.value("mode", std::string());
  std::string policy = meta.value("policy", exp.value("policy", std::string()));
  nlohmann::json warnings = nlohmann::json::array();
  const nlohmann::json summary = read_run_summary(run, opt, warnings);
  int n_servers = int(traces.servers.size());
  if (summary.is_object()) n_servers = int(summary.value("servers", double(n_servers)));
  warn_about_summary(summary, warnings);
  // Every worker the run had, traced or not.
  const int run_workers = std::max(int(traces.workers.size()),
                                   summary.is_object() ? int(summary.value("workers", 0.0)) : 0);
  const int host_cpus = summary.is_object() && summary.contains("launch")
                            ? int(summary["launch"].value("host_cpus", 0.0))
                            : 0;
  double steady_cpu_s = -1;
  const bool single = run_workers == 1;
  const HostCpu host_cpu =
      single ? measure_host_cpu(p, opt, worker, traces.servers, host_cpus, steady_cpu_s)
             : HostCpu{};
  p.source = {{"run", opt.run},
              {"worker", worker.node},
              {"workers", run_workers},  // the run's, traced or not (a killed worker leaves none)
              {"servers", n_servers},
              {"mode", mode},
              {"policy", policy},
              {"compute", meta.value("compute", std::string("real"))},
              {"threads", meta.value("threads", 0)},
              {"steps", steps},
              {"skipped_steps", skip},
              {"profiled_steps", p.layers[0].forward_ms.size()},
              {"partition_bytes", exp.value("partition_bytes", defaults::kPartitionBytes)},
              {"link", link},
              {"slice_params", exp.value("slice_params", std::int64_t(40000))},
              {"partition_params", exp.value("partition_params", std::int64_t(1000000))},
              {"credit_bytes", exp.value("credit_bytes", std::int64_t(-1))},
              {"straggle_ms", meta.value("straggle_ms", 0.0)},
              {"push_pull", exp.value("push_pull", false)},
              {"measured_steps_per_sec", measured_sps},
              {"model_toml", exp["model_toml"]}};
  const std::size_t switches = warn_about_run(p, summary, policy, skip, warnings);
  if (steady_cpu_s >= 0) p.source["steady_cpu_s"] = steady_cpu_s;
  if (steady_cpu_s >= 0 && host_cpu.per_step_s > 0) {
    p.source["host_cpu_per_step_ms"] = host_cpu.per_step_s * 1e3;
    p.source["host_busy_cores"] = host_cpu.busy_cores;
  }
  // A node's serial time per message is its share, half, of the CPU a message costs both ends,
  // calibrated or not.
  if (p.host_cpus > 0) p.message_cost_us = p.cpu_per_message_us / 2;
  calibrate_to_pace(p, opt, single, switches, run_workers, measured_sps);
  if (single && switches == 0 && measured_sps > 0) self_check(p, measured_sps, warnings);
  if (!warnings.empty()) p.source["warnings"] = warnings;
  return p;
}

}  // namespace psbed::predictor
