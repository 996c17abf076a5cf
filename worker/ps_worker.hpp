// `psbed worker`: trains through the parameter server. Each step pulls every part, runs the
// forward of a layer as soon as that layer's parts have arrived (dataflow), and pushes a
// layer's gradient parts as soon as its backward ends (wait-free backprop). Parts go out in
// the order they are handed over (FIFO); the transmission policies sit between this loop and
// the client without changing either.
#pragma once
#include <string>
#include <vector>

#include "ps/node_options.hpp"

namespace psbed::worker {

struct WorkerOptions {
  ps::NodeOptions node;          // name: default worker-<pid>
  std::string model = "lenet5";  // must be the cluster's model (its data shape is read first)
  std::string data = "mnist";
  std::string data_dir;
  std::string device = "cpu";
  int threads = 1;
  double progress_every_s = 1.0;
  double straggle_ms = 0;  // sleep this long every step (a deliberate straggler, for experiments)
  // A heterogeneous worker, "compute=2x,bandwidth=100mbit" (core/straggler.hpp): its compute K
  // times as long, its own link at that rate in place of node.bandwidth ("" = neither).
  std::string straggler;
  // Worker i of N waits i x this / N before its first step: a de-synchronized start, for
  // experiments with regimes that depend on how the workers start (0 = all at once).
  double start_stagger_ms = 0;
  std::string save_params;       // evaluating worker: write the final parameters here (raw float32)
  std::string compute = "real";  // or replay:<profile.json>: sleep per layer instead of computing
  // ps | sfb | hybrid: must be the cluster's ("" = take the cluster's; core/comm.hpp).
  std::string comm;
  // Where peers send this worker their sufficient factors (worker/sfb.hpp); the bound address
  // goes to the coordinator, so it must be one the other workers reach.
  std::string peer_bind = "tcp://127.0.0.1:*";
};

int run_worker(const WorkerOptions& opt);

// Raw little-endian float32 of every tensor in spec order: the format of --save-params.
void save_params(const std::string& path, const std::vector<std::vector<float>>& tensors);

}  // namespace psbed::worker
