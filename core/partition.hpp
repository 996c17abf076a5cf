// How tensors are cut into parts and parts placed on server shards. Shared by the coordinator
// (which decides it for a live cluster) and the predictor (which must model the same balance).
#pragma once
#include <cstdint>
#include <vector>

#include "core/model_spec.hpp"

namespace psbed {

struct Part {
  int key = 0;              // tensor index in ModelSpec::tensors
  int part = 0;             // index of this part within the tensor
  std::int64_t offset = 0;  // first float of the part within the tensor
  std::int64_t numel = 0;
  int shard = 0;  // server shard that owns it
  std::int64_t bytes() const { return numel * 4; }
};

struct PartitionPlan {
  std::vector<Part> parts;                     // ordered by (key, part)
  std::vector<std::vector<int>> parts_of_key;  // key -> indices into parts
  std::vector<std::int64_t> shard_bytes;       // bytes owned by each shard
  int shards = 1;
  const Part& at(int key, int part) const { return parts[parts_of_key.at(key).at(part)]; }
  // max shard bytes / mean shard bytes (1.0 = perfectly balanced)
  double imbalance() const;
};

// Each tensor is cut into ceil(bytes / max_part_bytes) near-equal parts (a multiple of 4
// bytes); parts go to shards greedily, largest first, each to the least-loaded shard (ties to
// the lowest shard id), so the result is deterministic.
PartitionPlan make_partition(const ModelSpec& spec, std::int64_t max_part_bytes, int shards);

}  // namespace psbed
