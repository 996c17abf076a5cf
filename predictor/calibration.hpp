// How well validate's bands and rankings hold against measurement: the share of measured runs
// inside their configuration's band, the band's width, the point errors' tail, and, over
// configurations that differ only in policy, whether the policy predicted best is the one
// measured best (regret) and whether the predicted order is the measured one (Kendall's tau).
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace psbed::predictor {

// Measured runs inside their band, of all runs.
struct Coverage {
  std::size_t inside = 0, runs = 0;
  double share() const { return runs > 0 ? double(inside) / double(runs) : 0.0; }
};

// How many of `measured` lie in [low, high].
Coverage coverage_of(const std::vector<double>& measured, double low, double high);

// Kendall's tau-b between two rankings of the same items (pairs with a tie in x or in y count
// neither way; the denominator leaves them out): +1 the same order, -1 reversed. Empty where it
// is undefined: fewer than two items, or every item tied in x or in y.
std::optional<double> kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

// The regret of taking the policy predicted best, in % of the best measured: (measured best -
// measured of the one with the highest prediction) / measured best. Among policies predicted
// equally best, the one measured lowest counts (a tie gives no reason to pick the better).
struct Regret {
  std::size_t predicted_best = 0, measured_best = 0;  // indices into the policies
  double pct = 0;
};
Regret regret_of(const std::vector<double>& predicted, const std::vector<double>& measured);

// The share of cells with regret at most this, in %: the target's threshold.
constexpr double kRegretWithinPct = 3;

// The calibration of validation.json's rows (`runs`, each with measured_runs_images_per_sec,
// predicted_low, predicted_high, predicted_band_width_pct, predicted_images_per_sec,
// measured_images_per_sec, error_pct and its configuration): coverage, runs, runs_inside,
// outside_band (the configurations with runs outside), median_band_width_pct,
// median_abs_error_pct, p95_abs_error_pct, policy_cells (each cell of two or more policies: its
// configuration, policies, regret and tau), cells, cells_regret_within_3pct, median_kendall_tau.
nlohmann::json calibration_of(const nlohmann::json& runs);

// The policy cell of a validation.json row: everything of its configuration but the policy and
// the policy's settings, as text ("bsp, 4 workers, 1 server(s), 1.00 Gbit/s, ...").
std::string policy_cell_of(const nlohmann::json& row);

}  // namespace psbed::predictor
