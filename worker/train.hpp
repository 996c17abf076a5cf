// `psbed train`: single-process training, no parameter server. The reference for correctness
// (a 1-worker BSP run must match it) and for compute speed.
#pragma once
#include <cstdint>
#include <string>

#include "core/optimizer.hpp"

namespace psbed::worker {

struct TrainOptions {
  std::string model = "lenet5";  // shipped name or path to a .toml spec
  std::string data = "mnist";    // mnist | synthetic
  std::string data_dir;          // default $PSBED_DATA_DIR or data/mnist
  std::string device = "cpu";    // cpu | gpu
  int epochs = 3;
  std::int64_t steps = 0;  // > 0: train this many steps instead of epochs
  int batch = 64;
  SgdOptions sgd;
  std::string lr_schedule = "cosine";  // constant | cosine
  int threads = 2;
  std::uint64_t seed = 1;
  bool standardize = true;  // zero-mean, unit-variance inputs (train-set statistics)
  bool evaluate = true;     // test accuracy after each epoch (or at the end with --steps)
  double progress_every_s = 2.0;
  std::string json_out;     // results file, empty = none
  std::string save_params;  // final parameters, raw float32 in tensor order
};

struct TrainResult {
  std::int64_t steps = 0;
  double images_per_sec = 0;  // steady state: warm-up steps and evaluation excluded
  double ms_per_step = 0;
  double final_loss = 0;      // mean loss over the last min(50, steps) steps
  double test_accuracy = -1;  // < 0 when not evaluated
  std::int64_t parameters = 0;
  std::string stopped_by;  // "SIGTERM", "SIGINT": stopped early, the figures its steps'
};

// SIGTERM or SIGINT stop the training at the next step boundary: the results of the steps done
// are written as at the end (stopped_by says which signal); a second signal ends it at once.
TrainResult run_train(const TrainOptions& opt);

// Threads for the compute library (OpenMP under oneDNN). Call before building a Net.
void set_compute_threads(int threads);

}  // namespace psbed::worker
