// Shared by the simulator's and the analytic model's tests: a tiny model with fixed compute,
// and configurations built from it.
#pragma once
#include <string>

#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor::test {

// One fully-connected layer of 249 x 4 weights + 4 biases: 1,000 floats, 4,000 bytes in two
// parts (weight 3,984 bytes, bias 16), then a relu without parameters.
inline const char* kTiny = R"(name = "tiny"
input = [1, 1, 249]
classes = 4

[[layer]]
type = "fc"
name = "fc1"
in = 249
out = 4

[[layer]]
type = "relu"
)";

// Fixed compute: forward of fc1 2 ms, backward 3 ms; relu and overhead cost nothing.
inline Profile fixed_profile(const ModelSpec& spec, double apply_ns_per_byte = 0) {
  Profile p;
  p.model = spec.name;
  p.batch = 8;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  p.layers.push_back({"fc1", {2.0}, {3.0}});
  p.layers.push_back({spec.layers[1].name, {0.0}, {0.0}});
  p.apply_ns_per_byte = apply_ns_per_byte;
  return p;
}

// Per-layer compute drawn from three samples each, so the seed of the draws matters.
inline Profile varied_profile(const ModelSpec& spec) {
  Profile p;
  p.model = spec.name;
  p.batch = 32;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  for (const auto& l : spec.layers) p.layers.push_back({l.name, {0.1, 0.5, 0.9}, {0.2, 0.4, 1.3}});
  p.step_overhead_ms = {0.1, 0.3};
  return p;
}

// One worker of kTiny on config()'s link: pull request (L) + 4,000 bytes (1 ms) + reply (L),
// forward 2 ms, backward 3 ms, push 4,000 bytes (1 ms) + L, apply 0, acknowledgment L.
constexpr double kOneWorkerStep = 0.0001 + 0.001 + 0.0001 + 0.002 + 0.003 + 0.001 + 0.0001 + 0.0001;

inline SimConfig config(int workers, const std::string& mode = "bsp") {
  SimConfig c;
  c.workers = workers;
  c.servers = 1;
  c.mode = Consistency::parse(mode);
  c.policy.name = "wfbp";
  c.bandwidth_bytes_per_sec = 4e6;  // 4,000 bytes take 1 ms
  c.latency_s = 100e-6;
  c.message_overhead_bytes = 0;
  c.steps = 20;
  return c;
}

// `workers` async workers on unlimited links sharing `cpus` host cores, every message taking
// `cpu_per_message` seconds of one.
inline SimConfig host_config(int workers, int cpus, double cpu_per_message) {
  SimConfig c = config(workers, "async");
  c.bandwidth_bytes_per_sec = 0;
  c.host_cpus = cpus;
  c.cpu_per_message_s = cpu_per_message;
  return c;
}

}  // namespace psbed::predictor::test
