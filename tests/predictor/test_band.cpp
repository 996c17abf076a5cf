// The prediction band and its regimes on draws whose answer is computed by hand.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "predictor/band.hpp"

using namespace psbed::predictor;

TEST_CASE("band: the 5th to 95th percentile of the draws, linearly interpolated", "[band]") {
  // 21 draws 100, 101, ..., 120: the 5th percentile sits at index 0.05 x 20 = 1 (101), the 95th
  // at index 19 (119), the median at index 10 (110).
  std::vector<double> draws;
  for (int i = 20; i >= 0; --i) draws.push_back(100 + i);  // any order
  const Band b = band_of(draws);
  CHECK(b.median == Approx(110));
  CHECK(b.low == Approx(101));
  CHECK(b.high == Approx(119));
  CHECK(b.width_pct() == Approx(100.0 * 18 / 110));
  REQUIRE(b.regimes.size() == 1);  // steps of 1 (0.9% of the median) are one regime
  CHECK(b.regimes[0].images_per_sec == Approx(110));
  CHECK(b.regimes[0].share == 1);
  CHECK(b.contains(101));
  CHECK(b.contains(119));
  CHECK_FALSE(b.contains(100.9));
  CHECK_FALSE(b.contains(119.1));
}

TEST_CASE("band: a toy two-regime system splits at the gap, each regime with its share", "[band]") {
  // Workers in lockstep (about 150 images/s) in 4 of 10 draws, drifted apart (about 100) in 6.
  const Band b = band_of({150, 100, 101, 151, 102, 149, 99, 100, 150, 103});
  // Sorted: 99 100 100 101 102 103 149 150 150 151. Median: (102 + 103) / 2 = 102.5. 5th
  // percentile: index 0.45 -> 99 + 0.45 x 1 = 99.45; 95th: index 8.55 -> 150 + 0.55 x 1 = 150.55.
  CHECK(b.median == Approx(102.5));
  CHECK(b.low == Approx(99.45));
  CHECK(b.high == Approx(150.55));
  // The gap 103 -> 149 is 45% of the median, over kRegimeGap (5%): two regimes.
  REQUIRE(b.regimes.size() == 2);
  CHECK(b.regimes[0].images_per_sec == Approx(100.5));  // median of 99 100 100 101 102 103
  CHECK(b.regimes[0].share == Approx(0.6));
  CHECK(b.regimes[1].images_per_sec == Approx(150));  // median of 149 150 150 151
  CHECK(b.regimes[1].share == Approx(0.4));
  CHECK(regimes_text(b) == "100 (0.60) | 150 (0.40)");
  const auto j = regimes_json(b);
  REQUIRE(j.size() == 2);
  CHECK(j[1]["share"].get<double>() == Approx(0.4));
}

TEST_CASE("band: one draw is its own band; none is an error", "[band]") {
  const Band b = band_of({42});
  CHECK(b.low == 42);
  CHECK(b.high == 42);
  CHECK(b.median == 42);
  CHECK(regimes_text(b) == "-");
  CHECK_THROWS_AS(band_of({}), psbed::Error);
  CHECK(quantile({1, 2, 3, 4}, 0.5) == Approx(2.5));
  CHECK(quantile({1, 2, 3, 4}, 1) == 4);
}
