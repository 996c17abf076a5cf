// SGD with momentum and weight decay: the one optimizer, used by single-process training and,
// applied per part, by the parameter server. It works on flat float spans so that a server
// shard can update any slice of a tensor without knowing the model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace psbed {

struct SgdOptions {
  float lr = 0.05f;           // learning rate
  float momentum = 0.9f;      // 0 disables the velocity buffer
  float weight_decay = 0.0f;  // L2 coefficient added to the gradient
};

// The learning rate at `step` of `total` steps: "constant", or "cosine" (decays from lr to 0
// along half a cosine; helps a short run settle). Throws Error on an unknown name.
float scheduled_lr(const std::string& schedule, float lr, std::int64_t step, std::int64_t total);

// v = momentum * v + (grad_scale * g + weight_decay * w);  w -= lr * v.
// `velocity` has n floats (zero-initialised by the owner); grad_scale averages summed gradients.
// Vectorised for the CPU it runs on (AVX-512, AVX2, else SSE2), rounding as the scalar loop.
void sgd_apply(const SgdOptions& opt, float* w, const float* g, float* velocity, std::size_t n,
               float grad_scale = 1.0f);
// The same update one element at a time, unvectorised: the reference the tests hold
// sgd_apply to.
void sgd_apply_reference(const SgdOptions& opt, float* w, const float* g, float* velocity,
                         std::size_t n, float grad_scale = 1.0f);
// Whether every float is finite (none NaN or infinite): a shard's check of each gradient before
// it applies it, vectorised for the CPU it runs on as sgd_apply is.
bool all_finite(const float* v, std::size_t n);

}  // namespace psbed
