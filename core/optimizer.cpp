#include "core/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// One pass over the part (momentum, weight decay and update fused). GCC builds a clone per
// instruction set and picks at load time the widest the CPU has; FMA contraction stays off so
// that every clone rounds as the plain loop does, and replicas on different CPUs agree bit for
// bit. sgd_apply_reference is that plain loop, for the tests.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PSBED_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define PSBED_SGD_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define PSBED_CPU_CLONES
#define PSBED_SGD_CLONES
#endif

PSBED_SGD_CLONES void sgd_apply(const SgdOptions& opt, float* __restrict w,
                                const float* __restrict g, float* __restrict velocity,
                                std::size_t n, float grad_scale) {
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

void sgd_apply_reference(const SgdOptions& opt, float* w, const float* g, float* velocity,
                         std::size_t n, float grad_scale) {
  const float lr = opt.lr, mu = opt.momentum, wd = opt.weight_decay;
  for (std::size_t i = 0; i < n; ++i) {
    // volatile: one element at a time, as a scalar CPU would, whatever the compiler's mood.
    volatile float v = mu == 0.0f ? grad_scale * g[i] + wd * w[i]
                                  : mu * velocity[i] + grad_scale * g[i] + wd * w[i];
    if (mu != 0.0f) velocity[i] = v;
    w[i] -= lr * v;
  }
}

// A float is NaN or infinite when its exponent bits are all ones. Or-ing a compare per float
// has no branch and vectorises even on SSE2 (a running maximum of the exponents needs SSE4.1's
// unsigned max, and std::isfinite in the loop does not vectorise at all): about the cost of
// reading the gradient once, a tenth of the maximum's on SSE2 with the AVX clones.
PSBED_CPU_CLONES bool all_finite(const float* v, std::size_t n) {
  constexpr std::uint32_t kExponent = 0x7f800000u;
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= (bits & kExponent) == kExponent;
  }
  return bad == 0;
}

}  // namespace psbed
