// Deterministic initial parameters: every process (single-process trainer, each server shard)
// computes the same values for a tensor from (seed, tensor index), so a shard can initialise
// just its parts and a 1-worker BSP run starts from the same point as `psbed train`.
#pragma once
#include <cstdint>

#include "core/model_spec.hpp"

namespace psbed {

// Weights: U(-1/sqrt(fan_in), +1/sqrt(fan_in)), the scale PyTorch's layers start from (He's
// sqrt(6/fan_in) trained worse on the small digit set); biases: zero. Writes
// spec.tensors[tensor].numel floats to out.
void init_tensor(const ModelSpec& spec, int tensor, std::uint64_t seed, float* out);

}  // namespace psbed
