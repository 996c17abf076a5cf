// `psbed bench compute`: ms/step and images/s of a full training step (forward, loss, backward,
// SGD) for each model at each thread count, beside PyTorch's figures from cluster/bench_torch.py
// measured in the same invocation, model by model, so the ratio is taken under the same load.
// With --device gpu each model also runs on the GPU, printed beside its CPU rows.
#pragma once
#include <string>
#include <vector>

namespace psbed::worker {

struct BenchComputeOptions {
  std::vector<std::string> models = {"mlp", "lenet5", "cnn-cifar", "vgg-mini"};
  std::vector<int> threads = {1, 2};
  int batch = 0;               // 0: 64 for inputs up to 28x28, 32 for larger ones
  std::string device = "cpu";  // "gpu": the CPU rows plus each model on the GPU beside them
  double min_seconds = 3.0;    // per row, after warm-up
  int min_steps = 20;
  int warmup = 10;
  bool torch = true;  // run the PyTorch reference (skipped with a note if unavailable)
  std::string python = "/usr/bin/python3";  // Debian's python3-torch imports only from here
  std::string json_out;
};

int run_bench_compute(const BenchComputeOptions& opt);

}  // namespace psbed::worker
