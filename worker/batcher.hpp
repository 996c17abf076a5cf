// Mini-batches for one worker: its shard of the training set (samples i with
// i % shards == shard), reshuffled at the start of every epoch with a seeded generator. With
// one shard this is exactly the order `psbed train` uses, so a 1-worker cluster run sees the
// same batches as single-process training.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "workloads/dataset.hpp"

namespace psbed::worker {

class Batcher {
 public:
  Batcher(const workloads::Dataset& train, int shard, int shards, int batch, std::uint64_t seed);
  std::int64_t steps_per_epoch() const { return std::int64_t(order_.size()) / batch_; }
  std::size_t shard_size() const { return order_.size(); }
  // Copies the next batch into images (batch x sample floats) and labels.
  void next(float* images, std::int32_t* labels);
  // Moves past `steps` batches as next() would (a run resumed from a checkpoint sees the batches
  // it would have seen).
  void skip(std::int64_t steps);

 private:
  const workloads::Dataset& data_;
  int batch_;
  std::vector<std::size_t> order_;
  std::mt19937_64 rng_;
  std::int64_t step_ = 0;
};

}  // namespace psbed::worker
