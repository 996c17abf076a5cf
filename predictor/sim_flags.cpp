#include "predictor/sim_flags.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/policy.hpp"
#include "core/straggler.hpp"
#include "core/units.hpp"

namespace psbed::predictor {

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

SimConfig base_config(const Profile& profile, const SimFlags& f) {
  SimConfig c;
  c.bandwidth_bytes_per_sec =
      f.bandwidth.empty() ? profile.bandwidth_bytes_per_sec
      : f.bandwidth == "0" || f.bandwidth == "unshaped"
          ? 0.0
          : for_flag("--bandwidth", [&] { return parse_bandwidth_bps(f.bandwidth); }) / 8;
  c.latency_s = f.latency.empty()
                    ? profile.latency_us * 1e-6
                    : for_flag("--latency", [&] { return parse_duration_s(f.latency); });
  c.link_model = for_flag("--link-model", [&] { return parse_link_model(f.link_model); });
  c.comm = for_flag("--comm", [&] { return parse_comm(f.comm); });
  take_host_costs(profile, c);
  c.partition_bytes =
      std::int64_t(for_flag("--partition-bytes", [&] { return parse_bytes(f.partition_bytes); }));
  if (c.partition_bytes < 4)
    throw Error("--partition-bytes " + f.partition_bytes +
                ": expected 4 bytes (one float) or more");
  c.policy.slice_params = f.slice_params;
  c.policy.partition_params = f.partition_params;
  if (!f.credit.empty())
    c.policy.credit_bytes =
        std::int64_t(for_flag("--credit", [&] { return parse_bytes(f.credit); }));
  c.apply_lanes = f.apply_lanes;
  c.replicas = f.replicas;
  c.push_pull = f.push_pull;
  c.steps = f.steps;
  c.seed = f.seed;
  c.policy.seed = f.seed;  // tf-random
  c.straggler_s = f.straggler_ms / 1e3;
  c.stragglers = parse_stragglers(f.stragglers);  // its worker checked per configuration
  c.start_stagger_s = std::max(0.0, f.start_stagger_ms) / 1e3;
  c.arrival_jitter_s = f.arrival_jitter_us * 1e-6;
  c.host_cv = f.host_cv >= 0 ? f.host_cv : profile.host_cv;
  c.start_spread_s = (f.start_spread_ms >= 0 ? f.start_spread_ms : profile.start_spread_ms) * 1e-3;
  if (f.host_cpus >= 0) c.host_cpus = f.host_cpus;
  if (f.compute != "auto" && f.compute != "real" && f.compute != "replay")
    throw Error("unknown compute '" + f.compute + "', expected auto, real or replay");
  const std::string compute =
      f.compute == "auto" ? profile.source.value("compute", std::string("real")) : f.compute;
  c.compute_on_cores = compute == "real";
  c.fidelity = for_flag("--fidelity", [&] { return parse_fidelity(f.fidelity); });
  c.groups = f.groups;
  return c;
}

}  // namespace psbed::predictor
