// The prediction band and its regimes on draws whose answer is computed by hand.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "predictor/band.hpp"

using namespace psbed::predictor;

TEST_CASE("band: the prediction interval of n draws, k-th lowest to k-th highest", "[band]") {
  // A new draw falls between the k-th lowest and the k-th highest of n with probability
  // (n + 1 - 2k) / (n + 1): 90% or more needs k <= 0.05 (n + 1).
  CHECK(band_rank(5) == 1);   // 4/6 = 67%: the whole range, which holds less than 90%
  CHECK(band_rank(20) == 1);  // 19/21 = 90.5%
  CHECK(band_rank(38) == 1);  // 37/39 = 94.9%; k = 2 would give 35/39 = 89.7%
  CHECK(band_rank(39) == 2);  // 36/40 = 90%
  CHECK(band_rank(99) == 5);  // 90/100
  // 21 draws 100, 101, ..., 120 in any order: k = 1, the band is the whole range; the median is
  // the 11th, 110.
  std::vector<double> draws;
  for (int i = 20; i >= 0; --i) draws.push_back(100 + i);
  const Band b = band_of(draws);
  CHECK(b.median == Approx(110));
  CHECK(b.low == 100);
  CHECK(b.high == 120);
  CHECK(b.width_pct() == Approx(100.0 * 20 / 110));
  REQUIRE(b.regimes.size() == 1);  // steps of 1 (0.9% of the median) are one regime
  CHECK(b.regimes[0].images_per_sec == Approx(110));
  CHECK(b.regimes[0].share == 1);
  CHECK(b.contains(100));
  CHECK(b.contains(120));
  CHECK_FALSE(b.contains(99.9));
  CHECK_FALSE(b.contains(120.1));
  // 40 draws 0..39: k = 2, from the second lowest (1) to the second highest (38).
  std::vector<double> forty;
  for (int i = 0; i < 40; ++i) forty.push_back(i);
  const Band f = band_of(forty);
  CHECK(f.low == 1);
  CHECK(f.high == 38);
}

TEST_CASE("band: a toy two-regime system splits at the gap, each regime with its share", "[band]") {
  // Workers in lockstep (about 150 images/s) in 4 of 10 draws, drifted apart (about 100) in 6.
  const Band b = band_of({150, 100, 101, 151, 102, 149, 99, 100, 150, 103});
  // Sorted: 99 100 100 101 102 103 149 150 150 151. Median: (102 + 103) / 2 = 102.5; k = 1:
  // the band spans both regimes, 99 to 151.
  CHECK(b.median == Approx(102.5));
  CHECK(b.low == 99);
  CHECK(b.high == 151);
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

TEST_CASE("band: a lone draw far out is no regime", "[band]") {
  // 20 draws: 19 between 100 and 104.5, one at 114 (a fast host's draw). The gap 104.5 -> 114 is
  // over 5% of the median, but 1 draw is under 15% of 20 (3): one regime.
  std::vector<double> draws;
  for (int i = 0; i < 19; ++i) draws.push_back(100 + 0.25 * i);
  draws.push_back(114);
  const Band b = band_of(draws);
  REQUIRE(b.regimes.size() == 1);
  CHECK(b.regimes[0].share == 1);
  CHECK(b.high == 114);  // still in the band: the band is the draws' range
  // Three draws out there (15%) are a regime of their own.
  draws[17] = 113, draws[18] = 115;
  CHECK(band_of(draws).regimes.size() == 2);
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
