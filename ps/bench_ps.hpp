// `psbed bench ps`: push+pull throughput through the real parameter-server code (client,
// transport, shard, store with the optimizer) on loopback, beside a raw cppzmq round trip of
// the same bytes measured in the same run: the transport's limit on this machine.
#pragma once
#include <string>
#include <vector>

#include "core/defaults.hpp"

namespace psbed::ps {

struct BenchPsOptions {
  std::vector<int> model_mib = {4, 25, 64};  // single worker, single shard rows
  int aggregate_mib = 25;                    // model for the workers x servers grid
  std::vector<int> workers = {1, 2, 4};
  std::vector<int> servers = {1, 2};
  std::string partition = defaults::kPartitionBytesText;
  double min_seconds = 2.0;
  int repeat = 3;  // psbed runs per single-worker row, interleaved with raw runs
  std::string json_out;
  bool secure = false;     // the CURVE table (with / without) instead of the others
  int replicas = 1;        // 2: the table of 1 against 2 copies of each shard instead
  bool push_pull = false;  // rounds of push-pull (PsClient::push_pull), not push then pull
  int connections = 1;     // above 1: the table of 1 connection against this many instead
};

int run_bench_ps(const BenchPsOptions& opt);

}  // namespace psbed::ps
