#include "core/partition.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace psbed {

double PartitionPlan::imbalance() const {
  if (shard_bytes.empty()) return 1.0;
  double total = std::accumulate(shard_bytes.begin(), shard_bytes.end(), 0.0);
  double mx = *std::max_element(shard_bytes.begin(), shard_bytes.end());
  return total > 0 ? mx / (total / shard_bytes.size()) : 1.0;
}

PartitionPlan make_partition(const ModelSpec& spec, std::int64_t max_part_bytes, int shards) {
  if (shards < 1) throw Error("need at least 1 server shard, got " + std::to_string(shards));
  if (max_part_bytes < 4)
    throw Error("partition size must be at least 4 bytes, got " + std::to_string(max_part_bytes));
  PartitionPlan plan;
  plan.shards = shards;
  plan.parts_of_key.resize(spec.tensors.size());
  const std::int64_t max_numel = max_part_bytes / 4;
  for (int k = 0; k < int(spec.tensors.size()); ++k) {
    const std::int64_t n = spec.tensors[k].numel;
    const std::int64_t count = (n + max_numel - 1) / max_numel;
    std::int64_t off = 0;
    for (std::int64_t p = 0; p < count; ++p) {
      // Near-equal parts: the first (n % count) parts get one float more.
      std::int64_t len = n / count + (p < n % count ? 1 : 0);
      plan.parts_of_key[k].push_back(int(plan.parts.size()));
      plan.parts.push_back(Part{k, int(p), off, len, 0});
      off += len;
    }
  }
  std::vector<int> order(plan.parts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return plan.parts[a].numel > plan.parts[b].numel; });
  plan.shard_bytes.assign(shards, 0);
  for (int i : order) {
    int best = int(std::min_element(plan.shard_bytes.begin(), plan.shard_bytes.end()) -
                   plan.shard_bytes.begin());
    plan.parts[i].shard = best;
    plan.shard_bytes[best] += plan.parts[i].bytes();
  }
  return plan;
}

}  // namespace psbed
