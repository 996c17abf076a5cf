// Whole-part transfers as the policy tests script them.
#pragma once
#include <cstdint>

#include "core/policy.hpp"

namespace psbed::policy {

inline Transfer push(int part, int layer, std::int64_t count) {
  return {Direction::kPush, part, layer, 0, count};
}
inline Transfer pull(int part, int layer, std::int64_t count) {
  return {Direction::kPull, part, layer, 0, count};
}
// kFactors: `peer` is the worker the factors go to.
inline Transfer factors(int peer, int layer, std::int64_t count) {
  return {Direction::kFactors, peer, layer, 0, count};
}

}  // namespace psbed::policy
