// `psbed bench coordinator`: a real coordinator (a child process, so its memory is its own)
// under N fake workers, registered and heartbeating over ZeroMQ as real nodes do, from a few
// threads: registration time, the heartbeat round trip and the coordinator's memory.
#pragma once
#include <string>

#include "core/defaults.hpp"

namespace psbed::ps {

struct BenchCoordinatorOptions {
  int workers = 1000;
  int threads = 4;      // each owns workers/threads of the fake nodes' sockets
  double seconds = 10;  // of heartbeats, after every node has the cluster map
  double heartbeat_s = defaults::kHeartbeatS;
  std::string json_out;
};

// The most fake workers: each costs this process and the coordinator a socket and a connection.
inline constexpr int kMaxBenchWorkers = 20000;

int run_bench_coordinator(const BenchCoordinatorOptions& opt);

}  // namespace psbed::ps
