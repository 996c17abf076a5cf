#include "worker/batcher.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace psbed::worker {

Batcher::Batcher(const workloads::Dataset& train, int shard, int shards, int batch,
                 std::uint64_t seed)
    : data_(train), batch_(batch), rng_(seed * 7919 + 17 + 1000003ull * std::uint64_t(shard)) {
  for (std::size_t i = std::size_t(shard); i < train.size(); i += std::size_t(shards))
    order_.push_back(i);
  if (order_.size() < std::size_t(batch))
    throw Error("worker shard " + std::to_string(shard) + " of " + std::to_string(shards) +
                " has " + std::to_string(order_.size()) +
                " training samples, fewer than one batch of " + std::to_string(batch));
}

void Batcher::next(float* images, std::int32_t* labels) {
  const std::int64_t in_epoch = step_ % steps_per_epoch();
  if (in_epoch == 0) std::shuffle(order_.begin(), order_.end(), rng_);
  const std::int64_t per = data_.shape.numel();
  for (int i = 0; i < batch_; ++i) {
    std::size_t idx = order_[std::size_t(in_epoch) * batch_ + i];
    std::copy(data_.image(idx), data_.image(idx) + per, images + std::int64_t(i) * per);
    labels[i] = data_.labels[idx];
  }
  ++step_;
}

void Batcher::skip(std::int64_t steps) {
  for (std::int64_t i = 0; i < steps; ++i, ++step_)
    if (step_ % steps_per_epoch() == 0) std::shuffle(order_.begin(), order_.end(), rng_);
}

}  // namespace psbed::worker
