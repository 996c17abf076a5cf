// `psbed server`: one shard of the parameter server. It owns the parts the coordinator's plan
// gives it, initialised from the seed, applies the optimizer to pushed gradients, and answers
// pulls under the run's consistency model (async, bsp, ssp:K).
#pragma once
#include <cstdint>
#include <string>

#include "core/defaults.hpp"

namespace psbed::ps {

struct ServerOptions {
  std::string coordinator = "tcp://127.0.0.1:7000";
  std::string bind = "tcp://127.0.0.1:*";  // where workers connect; ":*" picks a free port
  std::string advertise;                    // address given to workers (default: the bound one)
  std::string name;                         // default server-<pid>
  double connect_timeout_s = 30;
  double coordinator_timeout_s = 30;  // silence from the coordinator after joining: it is gone
  double heartbeat_s = defaults::kHeartbeatS;
  std::string trace_dir;                    // write <name>.trace.json here at the end
  std::uint64_t max_message_bytes = 256ull << 20;
  int apply_threads = defaults::kApplyThreads;  // parts are applied in parallel across these
  std::string bandwidth;                    // link emulation: "1gbit" per direction ("" = none)
  std::string latency;                      // link emulation: one-way latency, "200us"
};

int run_server(const ServerOptions& opt);

}  // namespace psbed::ps
