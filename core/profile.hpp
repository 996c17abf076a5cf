// The profile of a single-worker run (profile.json): what the predictor simulates from and what
// compute replay sleeps for. It lives in core/ because three parts read it: `psbed profile`
// (predictor/) writes it from a run's traces, the predictor simulates from it, and a worker in
// `--compute replay:profile.json` mode draws its per-layer durations from it.
//
// profile.json:
//   {"format": "psbed-profile/1",
//    "model": "lenet5", "batch": 32,
//    "tensors": [{"name": "conv1.weight", "layer": 0, "bytes": 600}, ...],   // spec order
//    "layers":  [{"name": "conv1", "forward_ms": [...], "backward_ms": [...]}, ...],  // every
//    layer "server":  {"apply_ns_per_byte": 0.35, "apply_overhead_us": 5}, "link":
//    {"bandwidth_bytes_per_sec": 1.2e8, "latency_us": 210, "shaped": "1gbit/200us",
//                "message_cost_us": 120,    // software time per received message, per node
//                "message_latency_us": 80,  // a delay per message besides (optional)
//                "transit_ns_per_byte": 0}, // copy time per byte between the links (optional)
//    "host":    {"cpus": 2, "cpu_per_message_us": 90, "cpu_per_byte_ns": 0.8,
//                "contention": 0.3,                    // optional; contention optional too
//                "cpu_per_data_message_us": 120},      // optional (profile --push-pull-run)
//    "variation": {"host_cv": 0.02, "start_spread_ms": 12},  // optional (Profile::host_cv)
//    "step_overhead_ms": [...],   // per step: time not explained by compute or transfers
//    "source":  {"run": "runs/x", "workers": 1, "servers": 1, "mode": "bsp", "policy": "wfbp",
//                "compute": "real", "threads": 2, "steps": 300, ...}}
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/model_spec.hpp"

namespace psbed {

// The most cores a profile's host (or predict's --host-cpus) may have: the simulation books each
// message on the core free first, looking at every one, so its time grows with them (predict of
// 8 workers and 2 shards: 0.5 s with 2 cores, 46 s with 4096).
constexpr int kMaxHostCpus = 1024;

struct ProfileTensor {
  std::string name;
  int layer = 0;
  std::int64_t bytes = 0;
};

struct ProfileLayer {
  std::string name;
  std::vector<double> forward_ms, backward_ms;  // one sample per profiled step
};

struct Profile {
  std::string model;
  int batch = 0;
  std::vector<ProfileTensor> tensors;
  std::vector<ProfileLayer> layers;
  double apply_ns_per_byte = 0;        // server: optimizer cost per gradient byte
  double apply_overhead_us = 0;        // server: fixed cost per applied part
  double bandwidth_bytes_per_sec = 0;  // link estimate (0 = unknown / unshaped)
  double latency_us = 0;
  // Software time a node spends receiving one message (transport threads, wake-ups), handled
  // one at a time per node: calibrated by `psbed profile` so the simulator reproduces the
  // profiled run.
  double message_cost_us = 0;
  // A delay every message takes besides (thread hand-overs, wake-ups): time, not a resource.
  // Where the host's CPU was measured, message_cost_us is the receiving node's share of the CPU
  // per message and this is the rest of what the calibration finds.
  double message_latency_us = 0;
  // Host time per byte between leaving the sender's link and reaching the receiver's (the copies
  // through the loopback stack and ZeroMQ): each message arrives bytes x this later. Calibrated
  // instead of message_cost_us where a per-message fit would be implausible (big messages).
  double transit_ns_per_byte = 0;
  // The host the run shared: its CPU count and the CPU time its worker and shards spent over the
  // steady steps, per message received and per byte (transport threads, the pacer, the shard
  // and client work around a message): the analytic host bound. 0 = not measured.
  int host_cpus = 0;
  double cpu_per_message_us = 0;
  double cpu_per_byte_ns = 0;  // measured on the host (copies through loopback and memory)
  // How much more CPU the same work takes when the host time-shares more busy processes than
  // it has cores (context switches, caches): at twice as many or more, every CPU cost x (1 +
  // this); in between, in proportion. Measured from a second, crowded run of the same host
  // (psbed profile --contention-run); 0 = not measured (nothing added).
  double contention = 0;
  // The CPU of one data message alone, both ends, without the header-only request or
  // acknowledgment a pull or push has beside it: a push-pull's two messages each cost this.
  // Measured from a single-worker push-pull run (psbed profile --push-pull-run); 0 = not
  // measured (then cpu_per_message_us, the average of both kinds).
  double cpu_per_data_message_us = 0;
  // How runs of this host vary, measured from the profiled run's own steps (psbed profile):
  //  host_cv: run-to-run variation of the host's speed, as the coefficient of variation of the
  //    mean time a step spends outside compute over each eighth of the profiled steps;
  //  start_spread_ms: how far apart workers that start together may be when their steady steps
  //    begin: the time the warm-up steps took beyond steady ones.
  // The predictor's band draws each run's host speed and each worker's start from them. 0: not
  // measured (older profiles): the band then comes from the compute draws alone.
  double host_cv = 0;
  double start_spread_ms = 0;
  std::string shaped;  // the link setting of the source run, "" if none
  std::vector<double> step_overhead_ms;
  nlohmann::json source = nlohmann::json::object();

  std::int64_t parameter_bytes() const;
  double mean_forward_ms(int layer) const;
  double mean_backward_ms(int layer) const;
  double mean_compute_ms() const;  // sum over layers of mean forward + backward
  nlohmann::json to_json() const;
  static Profile from_json(const nlohmann::json& j, const std::string& source_name);
  // Errors name the file and the field.
  static Profile load(const std::string& path);
  // The text of a profile.json; `name` ("profile 'x.json'") opens every error.
  static Profile parse(const std::string& text, const std::string& name);
  void save(const std::string& path) const;
  // Throws if the profile was taken on a different model (layer names or tensor sizes differ).
  void check_matches(const ModelSpec& spec, const std::string& profile_name) const;
};

// Draws per-layer durations from a profile's samples (uniformly, seeded): the same sampler drives
// compute replay in a live worker and compute in the simulator.
class ComputeSampler {
 public:
  ComputeSampler(const Profile& profile, std::uint64_t seed);
  double forward_s(int layer);
  double backward_s(int layer);
  double step_overhead_s();

 private:
  double draw(const std::vector<double>& samples_ms);
  const Profile* profile_;
  std::mt19937_64 rng_;
};

}  // namespace psbed
