// `psbed bench predict`: what the simulator costs per event and per slice, over worker counts
// and slice sizes, on a measured or a synthetic profile.
#include <cstdio>
#include <ctime>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/units.hpp"
#include "predictor/analytic.hpp"
#include "predictor/commands.hpp"
#include "predictor/report.hpp"
#include "predictor/sim_flags.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

int run_bench_predict(const BenchPredictOptions& o, bool model_given) {
  // Every setting checked before the table's head is printed.
  {
    policy::PolicyOptions po;
    po.name = o.policy;
    for_flag("--policy", [&] { policy::check_policy_options(po); });
  }
  const double bandwidth_bps =
      for_flag("--bandwidth", [&] { return parse_bandwidth_bps(o.bandwidth); });
  const LinkModel link_model =
      for_flag("--link-model", [&] { return parse_link_model(o.link_model); });
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
              bandwidth_bps > 0 ? o.bandwidth.c_str() : "unlimited", o.link_model.c_str(),
              o.profile.empty() ? "synthetic" : "measured");
  std::vector<Fidelity> modes;
  if (o.fidelity != "fast") modes.push_back(Fidelity::kExact);
  if (o.fidelity != "exact") modes.push_back(Fidelity::kFast);
  std::printf("%-8s %8s %8s %-6s %9s %9s %9s %12s %11s %13s %15s %9s %9s\n", "workers", "slice",
              "slices", "mode", "simulated", "wall s", "cpu s", "events", "ev/w-step",
              "events/cpu-s", "ns/slice-msg", "images/s", "vs exact");
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t slice : o.slice_params)
    for (int w : o.workers) {
      double exact_images = 0;
      for (Fidelity mode : modes) {
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
        c.fidelity = mode;
        c.groups = o.groups;
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
        if (mode == Fidelity::kExact) exact_images = r.images_per_sec;
        const bool compared = mode == Fidelity::kFast && exact_images > 0;
        const double diff_pct = compared ? 100 * (r.images_per_sec / exact_images - 1) : 0.0;
        char vs[32] = "";
        if (compared) std::snprintf(vs, sizeof vs, "%+.2f%%", diff_pct);
        std::printf("%-8d %8lld %8lld %-6s %9d %9.3f %9.3f %12llu %11.0f %13.0f %15.0f %9.0f %9s\n",
                    w, (long long)slice, (long long)per_step, to_string(mode).c_str(),
                    r.simulated_workers, r.wall_seconds, cpu, (unsigned long long)r.events,
                    double(r.events) / worker_steps, r.events / cpu, ns_per_slice, r.images_per_sec,
                    vs);
        std::fflush(stdout);
        nlohmann::json row = {
            {"model", spec.name},
            {"profile", o.profile.empty() ? nlohmann::json() : nlohmann::json(o.profile)},
            {"policy", o.policy},
            {"bandwidth", bandwidth_text(c.bandwidth_bytes_per_sec)},
            {"bandwidth_bytes_per_sec", c.bandwidth_bytes_per_sec},
            {"latency_us", c.latency_s * 1e6},
            {"workers", w},
            {"servers", c.servers},
            {"fidelity", to_string(mode)},
            {"simulated_workers", r.simulated_workers},
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
            {"images_per_sec", r.images_per_sec}};
        if (compared) row["vs_exact_pct"] = diff_pct;
        out.push_back(std::move(row));
      }
    }
  write_json(o.json_out, out);
  return 0;
}

}  // namespace psbed::predictor
