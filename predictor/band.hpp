// A prediction's range: what one real run of a configuration may measure, from the images/s of
// the simulation's draws (one per seed, each with its own compute draws, start phases and host
// speed). The band is a prediction interval: of n draws, a new one (a real run, if the draws vary
// as runs do) lies between the k-th lowest and the k-th highest with probability (n + 1 - 2k) /
// (n + 1); k is the largest that keeps this at 90% or more (at least 1: fewer than 19 draws give
// their whole range, which holds less). Where the draws fall into groups far apart (workers in
// lockstep or drifted apart), the groups are the regimes: each one's median and share of draws.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

namespace psbed::predictor {

// Two neighbouring draws (lowest first) further apart than this share of the median draw start
// a new regime: more than a run of the same regime varies by (about 1-3% on a quiet host)...
constexpr double kRegimeGap = 0.05;
// ...where each side holds at least this share of the draws: one draw far out in the tail of the
// host's speed is no regime.
constexpr double kMinRegimeShare = 0.15;
// The share of single runs the band should hold.
constexpr double kBandCoverage = 0.9;

struct Regime {
  double images_per_sec = 0;  // the median of its draws
  double share = 0;           // its draws / all draws
};

struct Band {
  double median = 0, low = 0, high = 0;
  std::vector<Regime> regimes;  // lowest first; one where the draws form a single group
  double width_pct() const { return median > 0 ? 100 * (high - low) / median : 0.0; }
  bool contains(double images_per_sec) const {
    return low <= images_per_sec && images_per_sec <= high;
  }
};

// The p-quantile of `sorted` (lowest first, not empty), interpolated linearly between the two
// draws around it (numpy's default).
double quantile(const std::vector<double>& sorted, double p);
// k of the band of n draws (above): at least 1.
std::size_t band_rank(std::size_t n);

// The band and regimes of some draws (any order; at least one).
Band band_of(std::vector<double> draws);

// "2.1k (0.6) | 3.0k (0.4)": the regimes as the table shows them; "-" for a single one.
std::string regimes_text(const Band& b);
nlohmann::json regimes_json(const Band& b);

}  // namespace psbed::predictor
