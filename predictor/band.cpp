#include "predictor/band.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "predictor/report.hpp"

namespace psbed::predictor {

double quantile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) throw Error("quantile of no values");
  const double at = std::clamp(p, 0.0, 1.0) * double(sorted.size() - 1);
  const std::size_t i = std::size_t(std::floor(at));
  if (i + 1 >= sorted.size()) return sorted.back();
  const double f = at - double(i);
  return sorted[i] * (1 - f) + sorted[i + 1] * f;
}

std::size_t band_rank(std::size_t n) {
  // (n + 1 - 2k) / (n + 1) >= coverage  <=>  k <= (1 - coverage) (n + 1) / 2.
  const double k = std::floor((1 - kBandCoverage) * double(n + 1) / 2 + 1e-9);
  return std::max<std::size_t>(1, std::size_t(k));
}

Band band_of(std::vector<double> draws) {
  if (draws.empty()) throw Error("a band of no draws");
  std::sort(draws.begin(), draws.end());
  Band b;
  b.median = median(draws);
  const std::size_t k = std::min(band_rank(draws.size()), (draws.size() + 1) / 2);
  b.low = draws[k - 1];
  b.high = draws[draws.size() - k];
  const std::size_t n = draws.size();
  const std::size_t least = std::max<std::size_t>(1, std::size_t(std::ceil(kMinRegimeShare * n)));
  std::size_t first = 0;
  for (std::size_t i = 1; i <= n; ++i) {
    if (i < n &&
        (draws[i] - draws[i - 1] <= kRegimeGap * b.median || i - first < least || n - i < least))
      continue;
    const std::vector<double> group(draws.begin() + std::ptrdiff_t(first),
                                    draws.begin() + std::ptrdiff_t(i));
    b.regimes.push_back({median(group), double(group.size()) / double(draws.size())});
    first = i;
  }
  return b;
}

std::string regimes_text(const Band& b) {
  if (b.regimes.size() < 2) return "-";
  std::string t;
  for (const Regime& r : b.regimes)
    t += (t.empty() ? "" : " | ") + fmt(r.images_per_sec, 0) + " (" + fmt(r.share, 2) + ")";
  return t;
}

nlohmann::json regimes_json(const Band& b) {
  nlohmann::json out = nlohmann::json::array();
  for (const Regime& r : b.regimes)
    out.push_back({{"images_per_sec", r.images_per_sec}, {"share", r.share}});
  return out;
}

}  // namespace psbed::predictor
