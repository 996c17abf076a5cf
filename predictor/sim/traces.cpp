// Synthetic Chrome traces, one per node, as a live run leaves them.
#include <cmath>
#include <filesystem>

#include "core/units.hpp"
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

void Simulation::record(TraceRecorder& tr, const std::string& name, const char* lane, double t0,
                        double t1, std::int64_t step) {
  TraceEvent e;
  e.name = name, e.lane = lane, e.ts_us = t0 * 1e6, e.dur_us = (t1 - t0) * 1e6, e.step = step;
  tr.record(std::move(e));
}

void Simulation::record_transfer(Worker& w, const Message& m) {
  const Part& part = plan_.parts[m.t.part];
  const char* lane = m.t.dir == Direction::kPull ? "pull" : "push";  // a push-pull's: push
  TraceEvent e;
  e.name = std::string(lane) + ":" + spec_.tensors[part.key].name + "#" + std::to_string(part.part);
  e.lane = lane, e.ts_us = m.started * 1e6, e.dur_us = (now_ - m.started) * 1e6, e.step = m.clock;
  e.bytes = m.t.bytes(), e.key = part.key, e.part = part.part, e.priority = m.t.layer,
  e.has_priority = true;
  w.trace->record(std::move(e));
}

void Simulation::write_traces() {
  std::filesystem::create_directories(cfg_.trace_dir);
  const nlohmann::json cluster = {{"model", spec_.name},
                                  {"mode", cfg_.mode.str()},
                                  {"steps", cfg_.steps},
                                  {"batch", profile_.batch},
                                  {"seed", cfg_.seed},
                                  {"partition_bytes", cfg_.partition_bytes},
                                  {"policy", cfg_.policy.name},
                                  {"slice_params", cfg_.policy.slice_params},
                                  {"partition_params", cfg_.policy.partition_params},
                                  {"credit_bytes", cfg_.policy.credit_bytes},
                                  {"workers", W_},
                                  {"servers", S_}};
  const std::string link = cfg_.bandwidth_bytes_per_sec > 0
                               ? format_bandwidth(cfg_.bandwidth_bytes_per_sec * 8) + ", " +
                                     std::to_string(std::lround(cfg_.latency_s * 1e6)) +
                                     " us one way"
                               : "unshaped";
  auto meta = [&](TraceRecorder& tr, const char* role) {
    tr.set_metadata("role", role);
    tr.set_metadata("cluster", cluster);
    tr.set_metadata("compute", "simulated");
    tr.set_metadata("link", link);
    tr.set_metadata("policy", cfg_.policy.name);
    tr.set_metadata("clock", "simulated microseconds");
    tr.write(cfg_.trace_dir + "/" + tr.node() + ".trace.json");
  };
  for (auto& w : workers_) meta(*w.trace, "worker");
  for (auto& s : server_traces_) meta(*s, "server");
}

}  // namespace psbed::predictor::sim
