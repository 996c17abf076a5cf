// validate's calibration figures on toy sets whose answers are computed by hand.
#include <catch2/catch.hpp>
#include <cmath>

#include "predictor/calibration.hpp"

using namespace psbed::predictor;

TEST_CASE("calibration: Kendall's tau-b counts tied pairs in neither way", "[calibration]") {
  // x 1 2 3 4 against y 20 10 20 40. Pairs: (1,2) discordant; (1,3) tied in y; (1,4), (2,3),
  // (2,4), (3,4) concordant. C - D = 4 - 1 = 3 over sqrt((6 - 0 ties in x) x (6 - 1 tie in y)).
  const auto tau = kendall_tau_b({1, 2, 3, 4}, {20, 10, 20, 40});
  REQUIRE(tau);
  CHECK(*tau == Approx(3 / std::sqrt(30.0)));
  // A tie in x: x 1 1 2 against y 1 2 3: (1,2) tied in x; the other two concordant:
  // 2 / sqrt((3 - 1) x 3).
  const auto tied_x = kendall_tau_b({1, 1, 2}, {1, 2, 3});
  REQUIRE(tied_x);
  CHECK(*tied_x == Approx(2 / std::sqrt(6.0)));
  CHECK(*kendall_tau_b({1, 2, 3}, {30, 20, 10}) == Approx(-1));
  CHECK(*kendall_tau_b({5, 7}, {1, 2}) == Approx(1));
  // Undefined: a single item, or every item tied on one side.
  CHECK_FALSE(kendall_tau_b({1}, {1}));
  CHECK_FALSE(kendall_tau_b({2, 2, 2}, {1, 2, 3}));
}

TEST_CASE("calibration: regret of the policy predicted best in a 3-policy cell", "[calibration]") {
  // Predicted 100, 120, 110; measured 95, 90, 100. The second is predicted best and measured 90;
  // the third is measured best (100): regret (100 - 90) / 100 = 10%.
  Regret g = regret_of({100, 120, 110}, {95, 90, 100});
  CHECK(g.predicted_best == 1);
  CHECK(g.measured_best == 2);
  CHECK(g.pct == Approx(10));
  // Predicted best is measured best: no regret.
  g = regret_of({100, 120, 110}, {95, 130, 100});
  CHECK(g.predicted_best == 1);
  CHECK(g.pct == 0);
  // Two predicted equally best: the one measured lower counts, (100 - 90) / 100.
  g = regret_of({120, 120, 100}, {90, 95, 100});
  CHECK(g.predicted_best == 0);
  CHECK(g.pct == Approx(10));
}

namespace {

nlohmann::json row(const char* policy, int workers, double predicted, double low, double high,
                   std::vector<double> runs, double measured, double error_pct) {
  return {{"run", std::string("runs/") + policy + "-" + std::to_string(workers) + "w"},
          {"policy", policy},
          {"workers", workers},
          {"servers", 1},
          {"mode", "bsp"},
          {"bandwidth", "1.00 Gbit/s"},
          {"bandwidth_bytes_per_sec", 125e6},
          {"latency_us", 0},
          {"steps", 100},
          {"predicted_images_per_sec", predicted},
          {"predicted_low", low},
          {"predicted_high", high},
          {"predicted_band_width_pct", 100 * (high - low) / predicted},
          {"measured_runs_images_per_sec", runs},
          {"measured_images_per_sec", measured},
          {"error_pct", error_pct}};
}

}  // namespace

TEST_CASE("calibration: coverage, band width and error tail of a toy set", "[calibration]") {
  // a: band 90-110 (width 20%), runs 95, 105, 111: 2 inside. b: band 180-220 (20%), run 200:
  // inside. c: band 50-59 (18%), runs 40, 70: none inside. 3 of 6 runs.
  const nlohmann::json runs = {row("wfbp", 2, 100, 90, 110, {95, 105, 111}, 105, 1),
                               row("p3", 2, 200, 180, 220, {200}, 200, -3),
                               row("wfbp", 4, 50, 50, 59, {40, 70}, 55, 10)};
  const nlohmann::json c = calibration_of(runs);
  CHECK(c["runs"] == 6);
  CHECK(c["runs_inside"] == 3);
  CHECK(c["coverage"].get<double>() == Approx(0.5));
  CHECK(c["median_band_width_pct"].get<double>() == Approx(20));
  // |error| 1, 3, 10: median 3; p95 at index 0.95 x 2 = 1.9: 3 + 0.9 x 7 = 9.3.
  CHECK(c["median_abs_error_pct"].get<double>() == Approx(3));
  CHECK(c["p95_abs_error_pct"].get<double>() == Approx(9.3));
  REQUIRE(c["outside_band"].size() == 2);
  CHECK(c["outside_band"][0]["run"] == "runs/wfbp-2w");
  CHECK(c["outside_band"][0]["runs_outside"] == 1);
  CHECK(c["outside_band"][1]["run"] == "runs/wfbp-4w");
  CHECK(c["outside_band"][1]["runs_outside"] == 2);
  // One cell of two policies (2 workers): p3 predicted and measured best, tau 1; the 4-worker
  // configuration is a cell of one policy and counts in neither.
  CHECK(c["cells"] == 1);
  REQUIRE(c["policy_cells"].size() == 1);
  const auto& cell = c["policy_cells"][0];
  CHECK(cell["cell"] == "bsp, 2 worker(s), 1 server(s), 1.00 Gbit/s, 100 steps");
  CHECK(cell["predicted_best"] == "p3");
  CHECK(cell["measured_best"] == "p3");
  CHECK(cell["regret_pct"].get<double>() == 0);
  CHECK(cell["kendall_tau"].get<double>() == Approx(1));
  CHECK(c["cells_regret_within_3pct"].get<double>() == 1);
  CHECK(c["median_kendall_tau"].get<double>() == Approx(1));
}

TEST_CASE("calibration: configurations that differ in more than policy are other cells",
          "[calibration]") {
  nlohmann::json a = row("wfbp", 2, 100, 90, 110, {100}, 100, 0);
  nlohmann::json b = row("p3", 2, 120, 110, 130, {90}, 90, 33);
  b["latency_us"] = 200;  // another link: not the same cell
  const nlohmann::json c = calibration_of(nlohmann::json::array({a, b}));
  CHECK(c["cells"] == 0);
  CHECK(c["cells_regret_within_3pct"].is_null());
  CHECK(c["median_kendall_tau"].is_null());
  CHECK(policy_cell_of(b) == "bsp, 2 worker(s), 1 server(s), 1.00 Gbit/s, 200 us, 100 steps");
}
