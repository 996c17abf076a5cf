// Small statistics shared by the benchmarks, sweeps and validation.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace psbed {

// The middle value (the mean of the two middle ones for an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The arithmetic mean; 0 for none.
inline double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / double(v.size());
}

// A worker's warm-up: the first steps of a run of `steps`, left out of its steady-state figures
// (at least 3, a twentieth of a long run, never more than half). The live worker and the
// simulator count the same steps.
inline std::int64_t warmup_steps(std::int64_t steps) {
  return std::min<std::int64_t>(std::max<std::int64_t>(3, steps / 20), steps / 2);
}

}  // namespace psbed
