// `psbed server`: one shard of the parameter server. It owns the parts the coordinator's plan
// gives it, initialised from the seed, applies the optimizer to pushed gradients, and answers
// pulls under the run's consistency model (async, bsp, ssp:K).
#pragma once
#include <cstdint>
#include <string>

#include "core/defaults.hpp"
#include "ps/node_options.hpp"

namespace psbed::ps {

struct ServerOptions {
  NodeOptions node;                        // name: default server-<pid>
  std::string bind = "tcp://127.0.0.1:*";  // where workers connect; ":*" picks a free port
  std::string advertise;                   // address given to workers (default: the bound one)
  std::uint64_t max_message_bytes = 256ull << 20;
  int apply_threads = defaults::kApplyThreads;  // parts are applied in parallel across these
  int io_threads = 1;          // ZeroMQ I/O threads: launch --connections N gives N
  std::string checkpoint_dir;  // where this shard writes its checkpoints and resumes from
};

int run_server(const ServerOptions& opt);

}  // namespace psbed::ps
