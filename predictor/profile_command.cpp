// `psbed profile`: a run folder to profile.json, and the host's contention from a crowded run.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"
#include "predictor/commands.hpp"
#include "predictor/measured_run.hpp"
#include "predictor/report.hpp"
#include "predictor/sim_flags.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

namespace {

// The profile's host.contention from a crowded run of the same host (--contention-run): that
// run's measured CPU per worker-step over what the simulation of its configuration books with
// the profile's costs, less 1, over how crowded it was (min(1, (processes - cores) / cores)).
void measure_contention(Profile& p, const std::string& run) {
  const std::string flag = "--contention-run " + run;
  if (p.host_cpus <= 0)
    throw Error(flag +
                ": the profile has no host figures (the profiled run needs traces and "
                "summary.json's launch.host_cpus)");
  const int cores = p.host_cpus;
  const int profiled = p.source.value("workers", 1) + p.source.value("servers", 1);
  if (p.source.value("workers", 1) != 1)
    throw Error(flag + ": the profile is of a " + std::to_string(p.source.value("workers", 1)) +
                "-worker run; the contention is measured against a single-worker profile");
  // The profiled run must not be crowded itself: its costs would hold contention already.
  if (profiled > cores)
    throw Error(flag + ": the profiled run had " + std::to_string(profiled) +
                " workers + shards on " + std::to_string(cores) +
                " cores, crowded itself: profile a run with at most " + std::to_string(cores) +
                " of them");
  const ModelSpec spec =
      profile_model_spec(p, "the profile of " + p.source.value("run", std::string()));
  SimFlags flags;
  flags.steps = 0;  // the run's own
  flags.seeds = kPredictSeeds;
  p.contention = 0;  // the run's simulation books the single-worker costs alone
  // The contention is the mean cost of the crowded run: its median seed, at the profile's own host
  // speed (no band draws).
  SimConfig base = base_config(p, flags);
  base.host_cv = 0, base.start_spread_s = 0;
  const MeasuredRun m = for_flag(flag, [&] { return read_run(run, p, base, flags); });
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
    throw Error(flag + ": " + std::to_string(processes) + " workers + shards on " +
                std::to_string(cores) + " cores: give a run with at least " +
                std::to_string(2 * cores) + " (twice the cores), where the host is fully crowded");
  if (!(m.host.per_step_s > 0))
    throw Error(
        flag +
        ": no CPU per step to compare (it needs traces and real compute on one thread a worker)");
  const SimResult r = simulate_seeds(p, spec, m.config, flags.seeds);
  if (!(r.host_cpu_per_step_s > 0)) throw Error(flag + ": the simulation booked no CPU");
  const double ratio = m.host.per_step_s / r.host_cpu_per_step_s;
  p.contention = std::min(10.0, std::max(0.0, ratio - 1));
  p.source["contention_run"] =
      nlohmann::json{{"run", run},
                     {"workers", m.config.workers},
                     {"servers", m.config.servers},
                     {"cores", cores},
                     {"measured_cpu_per_step_ms", m.host.per_step_s * 1e3},
                     {"simulated_cpu_per_step_ms", r.host_cpu_per_step_s * 1e3},
                     {"ratio", ratio}};
  if (p.contention > 0)
    std::fprintf(
        stderr,
        "  contention: %s (%d workers + %d shards on %d cores) spent %.2f ms of CPU a worker-step, "
        "the simulation %.2f: every CPU cost x %.2f where the processes are twice the cores\n",
        run.c_str(), m.config.workers, m.config.servers, cores, m.host.per_step_s * 1e3,
        r.host_cpu_per_step_s * 1e3, 1 + p.contention);
  else
    std::fprintf(
        stderr,
        "  contention: none found: %s (%d workers + %d shards on %d cores) spent %.2f ms of CPU a "
        "worker-step, no more than the simulation's %.2f\n",
        run.c_str(), m.config.workers, m.config.servers, cores, m.host.per_step_s * 1e3,
        r.host_cpu_per_step_s * 1e3);
}

// The profile's host.cpu_per_data_message_us from a single-worker push-pull run of the same host
// (--push-pull-run): every message of such a run carries data, so its CPU per message is a data
// message's alone, where the profiled run's averages data and header messages.
void measure_data_message(Profile& p, const ProfileOptions& extract, const std::string& run) {
  const std::string flag = "--push-pull-run " + run;
  if (p.host_cpus <= 0 || !(p.cpu_per_message_us > 0))
    throw Error(flag +
                ": the profile has no host figures (the profiled run needs traces and "
                "summary.json's launch.host_cpus)");
  if (p.source.value("push_pull", false))
    throw Error(flag +
                ": the profiled run used push-pull itself; profile a run without it and "
                "give the push-pull run here");
  ProfileOptions o = extract;
  o.run = run;
  const Profile q = for_flag(flag, [&] { return extract_profile(o); });
  if (!q.source.value("push_pull", false))
    throw Error(flag + ": not a push-pull run (launch --push-pull)");
  // Under bsp and ssp every push-pull is acknowledged: a header message beside the data ones.
  if (const std::string mode = q.source.value("mode", "async"); mode != "async")
    throw Error(flag + ": a push-pull run in " + mode +
                ", whose acknowledgments are header messages; give an async one (with one "
                "worker it trains as bsp does)");
  if (q.model != p.model || q.batch != p.batch)
    throw Error(flag + ": a run of " + q.model + " at batch " + std::to_string(q.batch) +
                ", the profile's is " + p.model + " at batch " + std::to_string(p.batch));
  if (q.host_cpus != p.host_cpus || !(q.cpu_per_message_us > 0))
    throw Error(flag + ": no CPU per message on a host of " + std::to_string(p.host_cpus) +
                " cores (it needs one worker, traces and the same host)");
  p.cpu_per_data_message_us = q.cpu_per_message_us;
  p.source["push_pull_run"] = {{"run", run}, {"cpu_per_message_us", q.cpu_per_message_us}};
  std::fprintf(stderr,
               "  push-pull: %s spent %.0f us per (data) message, against %.0f us per message "
               "here (data and headers)\n",
               run.c_str(), q.cpu_per_message_us, p.cpu_per_message_us);
}

}  // namespace

int run_profile(const ProfileCommandOptions& o) {
  std::error_code ec;
  if (fs::exists(o.extract.run, ec) && !fs::is_directory(o.extract.run, ec))
    throw Error("'" + o.extract.run +
                "' is a file, not a run folder (expected the --out folder of `psbed launch`)");
  ensure_writable_file(o.out, "--out");  // before the extraction and the contention's simulations
  Profile p = extract_profile(o.extract);
  if (!o.push_pull_run.empty()) measure_data_message(p, o.extract, o.push_pull_run);
  if (!o.contention_run.empty()) measure_contention(p, o.contention_run);
  p.save(o.out);
  const double pace = p.source.value("measured_steps_per_sec", 0.0);
  std::string calibration;
  if (p.source.contains("calibrated_link_model"))
    calibration = "calibrated to the run's " + fmt(pace, 1) + " steps/s";
  else if (p.source.contains("calibrated")) {
    std::string why = p.source["calibrated"].get<std::string>();
    if (why.rfind("no: ", 0) == 0) why = why.substr(4);
    calibration = "not calibrated: " + why;
  } else if (!o.extract.calibrate)
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
    std::fprintf(
        stderr,
        "  host: %d CPUs; the nodes' CPU over the steady steps is %.0f us per message received + "
        "%.2f ns per byte (measured copies)\n",
        p.host_cpus, p.cpu_per_message_us, p.cpu_per_byte_ns);
  if (p.host_cv > 0 || p.start_spread_ms > 0)
    std::fprintf(stderr,
                 "  variation: the host's time outside compute varies %.1f%% from run to run; "
                 "workers started together drift up to %.1f ms apart (the band's draws)\n",
                 100 * p.host_cv, p.start_spread_ms);
  if (p.source.contains("pulls_latency_us"))
    std::fprintf(stderr,
                 "  the pulls' latency, %.0f us one way, holds both ends' software time, which "
                 "the host's CPU charges again: lowered to %.0f us so the simulated run keeps "
                 "its pace\n",
                 p.source["pulls_latency_us"].get<double>(), p.latency_us);
  for (const char* key : {"refused_message_cost_us", "refused_message_latency_us"})
    if (p.source.contains(key))
      std::fprintf(
          stderr,
          "  (a per-message %s of %.0f us would match the run's pace, beyond the %.0f us any "
          "receive takes here: the gap is not per-message work, so it was fitted per byte)\n",
          std::string(key).find("latency") != std::string::npos ? "latency" : "cost",
          p.source[key].get<double>(), kMaxPlausibleMessageCostUs);
  if (p.source.contains("warnings"))
    for (const auto& w : p.source["warnings"])
      std::fprintf(stderr, "  warning: %s\n", w.get<std::string>().c_str());
  if (p.source.contains("refused_transit_ns_per_byte"))
    std::fprintf(stderr,
                 "  (nor per byte: %.1f ns/byte is beyond the %.0f ns/byte a host copy costs; both "
                 "stay 0 and the "
                 "gap to the run's pace is left unexplained)\n",
                 p.source["refused_transit_ns_per_byte"].get<double>(),
                 kMaxPlausibleTransitNsPerByte);
  std::printf("%s\n", o.out.c_str());
  return 0;
}

}  // namespace psbed::predictor
