// Calibration of a profile against its own run: the source configuration (the profiled run's,
// as profile.source records it) simulated, and one cost at a time bisected until the simulated
// pace is the measured one.
#include <algorithm>

#include "core/model_spec.hpp"
#include "predictor/profile_extract.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace {

// The source run's configuration: 1 worker, its servers, mode, policy, link and compute, bucket
// links.
SimConfig source_config(const Profile& profile) {
  const auto& src = profile.source;
  SimConfig c;
  c.workers = 1;
  c.servers = std::max(1, src.value("servers", 1));
  c.mode = Consistency::parse(src.value("mode", std::string("bsp")));
  c.policy.name = src.value("policy", std::string("wfbp"));
  c.policy.slice_params = src.value("slice_params", c.policy.slice_params);
  c.policy.partition_params = src.value("partition_params", c.policy.partition_params);
  c.policy.credit_bytes = src.value("credit_bytes", c.policy.credit_bytes);
  c.partition_bytes = src.value("partition_bytes", c.partition_bytes);
  c.straggler_s = src.value("straggle_ms", 0.0) / 1e3;
  c.push_pull = src.value("push_pull", false);  // a run of launch --push-pull
  c.bandwidth_bytes_per_sec = profile.bandwidth_bytes_per_sec;
  c.latency_s = profile.latency_us * 1e-6;
  take_host_costs(profile, c);
  c.compute_on_cores = src.value("compute", std::string("real")) == "real";
  c.link_model = LinkModel::kBucket;
  c.steps = 120;
  return c;
}

ModelSpec source_spec(const Profile& profile) {
  return parse_model_spec(profile.source.at("model_toml").get<std::string>(),
                          "profile source model");
}

// The source configuration with `set(c, x)` applied, bisected for the x that gives
// `steps_per_sec`. x starts at `first` and doubles while the pace is still too fast; returns
// `give_up` or more if even `give_up` is.
template <typename Set>
double calibrate(const Profile& profile, double steps_per_sec, double first, double give_up,
                 Set set) {
  const ModelSpec spec = source_spec(profile);
  SimConfig c = source_config(profile);
  auto pace = [&](double x) {
    set(c, x);
    return simulate(profile, spec, c).steps_per_sec;
  };
  // A gap under kCalibrationTolerance is within what repeated runs of one configuration vary
  // here: no evidence of a missing cost.
  if (pace(0) <= steps_per_sec * (1 + kCalibrationTolerance)) return 0;
  // The pace falls as x grows: bracket the measured pace, then bisect.
  double lo = 0, hi = first;
  while (pace(hi) > steps_per_sec) {
    lo = hi, hi *= 2;
    if (hi > give_up) return hi;
  }
  for (int i = 0; i < 30; ++i) {
    const double mid = (lo + hi) / 2;
    (pace(mid) > steps_per_sec ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

double calibrate_message_cost_us(const Profile& profile, double steps_per_sec) {
  return 1e6 * calibrate(profile, steps_per_sec, 1e-4, 1.0,
                         [](SimConfig& c, double s) { c.message_cost_s = s; });
}

double calibrate_message_latency_us(const Profile& profile, double steps_per_sec) {
  return 1e6 * calibrate(profile, steps_per_sec, 1e-4, 1.0,
                         [](SimConfig& c, double s) { c.message_latency_s = s; });
}

double calibrate_link_latency_us(const Profile& profile, double steps_per_sec) {
  return 1e6 * calibrate(profile, steps_per_sec, 1e-6, profile.latency_us * 1e-6,
                         [](SimConfig& c, double s) { c.latency_s = s; });
}

double simulated_source_pace(const Profile& profile) {
  return simulate(profile, source_spec(profile), source_config(profile)).steps_per_sec;
}

double calibrate_transit_ns_per_byte(const Profile& profile, double steps_per_sec) {
  return 1e9 * calibrate(profile, steps_per_sec, 1e-10, 1e-6,
                         [](SimConfig& c, double s) { c.transit_s_per_byte = s; });
}

}  // namespace psbed::predictor
