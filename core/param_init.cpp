#include "core/param_init.hpp"

#include <cmath>
#include <random>

namespace psbed {

void init_tensor(const ModelSpec& spec, int tensor, std::uint64_t seed, float* out) {
  const TensorSpec& t = spec.tensors.at(tensor);
  if (t.dims.size() == 1) {  // bias
    for (std::int64_t i = 0; i < t.numel; ++i) out[i] = 0.0f;
    return;
  }
  const double fan_in = double(t.numel) / double(t.dims[0]);
  const float bound = float(std::sqrt(1.0 / fan_in));
  // splitmix-style mixing so neighbouring tensor indices get unrelated streams.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (std::uint64_t(tensor) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  std::mt19937_64 rng(z ^ (z >> 31));
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (std::int64_t i = 0; i < t.numel; ++i) out[i] = dist(rng);
}

}  // namespace psbed
