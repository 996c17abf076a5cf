#include "core/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace psbed {

float scheduled_lr(const std::string& schedule, float lr, std::int64_t step, std::int64_t total) {
  if (schedule == "constant") return lr;
  if (schedule == "cosine") {
    if (total <= 0) return lr;
    const double x = std::min<double>(1.0, double(step) / double(total));
    return float(lr * 0.5 * (1.0 + std::cos(M_PI * x)));
  }
  throw Error("unknown learning-rate schedule '" + schedule + "', expected constant or cosine");
}

void sgd_apply(const SgdOptions& opt, float* __restrict w, const float* __restrict g,
               float* __restrict velocity, std::size_t n, float grad_scale) {
  const float lr = opt.lr, mu = opt.momentum, wd = opt.weight_decay;
  if (mu == 0.0f) {
    for (std::size_t i = 0; i < n; ++i) w[i] -= lr * (grad_scale * g[i] + wd * w[i]);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    float v = mu * velocity[i] + grad_scale * g[i] + wd * w[i];
    velocity[i] = v;
    w[i] -= lr * v;
  }
}

}  // namespace psbed
