#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <vector>

#include "core/defaults.hpp"
#include "core/error.hpp"
#include "core/optimizer.hpp"
#include "core/units.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("sizes, bandwidths and durations parse with their units", "[core][units]") {
  CHECK(parse_bytes("4MiB") == 4u * 1024 * 1024);
  CHECK(parse_bytes("40000") == 40000u);
  CHECK(parse_bytes("2 KB") == 2000u);
  CHECK(parse_bandwidth_bps("1gbit") == Approx(1e9));
  CHECK(parse_bandwidth_bps("100mbit") == Approx(1e8));
  CHECK(parse_duration_s("200us") == Approx(200e-6));
  CHECK(parse_duration_s("1.5s") == Approx(1.5));
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("1 gigabit"),
                      Contains("'1 gigabit'") && Contains("gbit"));
  REQUIRE_THROWS_WITH(parse_bytes("lots"), Contains("'lots'"));
  REQUIRE_THROWS_AS(parse_duration_s("-3ms"), Error);
  // A bare number needs its unit (it would be seconds); 0 is 0 in any unit.
  REQUIRE_THROWS_WITH(parse_duration_s("200"), Catch::Contains("give its unit"));
  CHECK(parse_duration_s("0") == 0);
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("100"), Catch::Contains("give its unit"));
  CHECK(parse_bandwidth_bps("0") == 0);
  CHECK(parse_bandwidth_bps("1000bit") == Approx(1000));
}

TEST_CASE("gbps is refused with a hint, a rate as psbed prints it reads back", "[core][units]") {
  // tc reads gbps as gigabytes per second: refused in every prefix, naming the bit form.
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("10gbps"), Contains("ambiguous") && Contains("10gbit"));
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("100mbps"), Contains("100mbit"));
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("500kbps"), Contains("500kbit"));
  CHECK(parse_bandwidth_bps("1Gbit/s") == Approx(1e9));
  CHECK(parse_bandwidth_bps(format_bandwidth(2.5e8)) == Approx(2.5e8));
}

TEST_CASE("durations take min and h; a flag's bare number keeps the flag's unit", "[core][units]") {
  CHECK(parse_duration_s("2min") == Approx(120));
  CHECK(parse_duration_s("1h") == Approx(3600));
  CHECK(parse_duration_in("3600", 1, 1e9) == Approx(3600));   // --timeout 3600: seconds
  CHECK(parse_duration_in("50", 1e-3, 1e9) == Approx(0.05));  // --straggler-ms 50
  CHECK(parse_duration_in("0.1s", 1e-3, 1e9) == Approx(0.1));
  CHECK(parse_duration_in("1h", 1, 1e9) == Approx(3600));
  REQUIRE_THROWS_WITH(parse_duration_in("2x", 1, 1e9), Contains("unknown unit 'x'"));
  REQUIRE_THROWS_WITH(parse_duration_in("2h", 1, 3600), Contains("at most 3600 s"));
}

TEST_CASE("sizes, bandwidths and durations past their bound are refused, naming it",
          "[core][units]") {
  // 1e19 bytes, cast to the int64 a credit is, became -9223372036854775808.
  REQUIRE_THROWS_WITH(parse_bytes("1e19"), Contains("'1e19'") && Contains("at most 1 PiB"));
  REQUIRE_THROWS_WITH(parse_bytes("1e300"), Contains("at most 1 PiB"));
  REQUIRE_THROWS_WITH(parse_bytes("2000000GiB"), Contains("at most 1 PiB"));
  CHECK(parse_bytes("1125899906842624") == 1125899906842624u);
  REQUIRE_THROWS_WITH(parse_bytes("1e400"), Contains("'1e400'"));
  REQUIRE_THROWS_WITH(parse_bandwidth_bps("1e300gbit"), Contains("at most 10000gbit"));
  CHECK(parse_bandwidth_bps("10000gbit") == Approx(1e13));
  REQUIRE_THROWS_WITH(parse_duration_s("1e300s"), Contains("at most 86400s"));
  REQUIRE_THROWS_WITH(parse_duration_s("100000s"), Contains("'100000s'"));
  CHECK(parse_duration_s("86400s") == Approx(86400));
}

TEST_CASE("SGD with momentum and weight decay follows its update rule", "[core][optimizer]") {
  SgdOptions o{0.1f, 0.9f, 0.01f};
  float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, v[2] = {0, 0};
  sgd_apply(o, w, g, v, 2);
  // v = g + wd * w ; w -= lr * v
  CHECK(v[0] == Approx(0.5f + 0.01f * 1.0f));
  CHECK(w[0] == Approx(1.0f - 0.1f * 0.51f));
  float v0 = v[0], w0 = w[0];
  sgd_apply(o, w, g, v, 2);
  CHECK(v[0] == Approx(0.9f * v0 + 0.5f + 0.01f * w0));
  CHECK(w[0] == Approx(w0 - 0.1f * v[0]));
  SgdOptions plain{0.5f, 0.0f, 0.0f};
  float x = 1.0f, gx = 2.0f;
  sgd_apply(plain, &x, &gx, nullptr, 1);
  CHECK(x == Approx(0.0f));
}

TEST_CASE("seconds in log lines are printed as given", "[core][units]") {
  CHECK(format_seconds(0.5) == "0.5");
  CHECK(format_seconds(30) == "30");
  CHECK(format_seconds(2.25) == "2.25");
  CHECK(format_seconds(10.2049) == "10.2");
  CHECK(format_seconds(0) == "0");
}

TEST_CASE("the default partition size reads, as the flags show it, as the bytes it is",
          "[core][units]") {
  CHECK(parse_bytes(defaults::kPartitionBytesText) == std::uint64_t(defaults::kPartitionBytes));
}

TEST_CASE("the vectorised SGD step equals the scalar loop bit for bit", "[core][optimizer]") {
  // An odd length, so that the vector body and its scalar tail both run; values of all sizes.
  const std::size_t n = 1003;
  std::vector<float> w(n), g(n), v(n);
  std::uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return (float(x >> 8) / float(1u << 24) - 0.5f) * float(1 << (x % 12));
  };
  for (std::size_t i = 0; i < n; ++i) w[i] = next(), g[i] = next(), v[i] = next();
  for (const SgdOptions o : {SgdOptions{0.03f, 0.9f, 1e-4f}, SgdOptions{0.5f, 0.0f, 0.01f}}) {
    std::vector<float> w1 = w, v1 = v, w2 = w, v2 = v;
    for (int step = 0; step < 3; ++step) {
      sgd_apply(o, w1.data(), g.data(), v1.data(), n, 0.25f);
      sgd_apply_reference(o, w2.data(), g.data(), v2.data(), n, 0.25f);
    }
    CHECK(std::memcmp(w1.data(), w2.data(), n * sizeof(float)) == 0);
    if (o.momentum != 0) CHECK(std::memcmp(v1.data(), v2.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("all_finite finds a NaN or an infinity anywhere, in the vector body or its tail",
          "[core][optimizer]") {
  const std::size_t n = 1003;  // odd: a vector body and a scalar tail
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (float(i) - 500.0f) * 1e-3f;
  v[7] = std::numeric_limits<float>::max(), v[8] = -std::numeric_limits<float>::max();
  v[9] = std::numeric_limits<float>::denorm_min(), v[10] = -0.0f;
  CHECK(all_finite(v.data(), n));
  CHECK(all_finite(v.data(), 0));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()})
    for (std::size_t at : {std::size_t(0), std::size_t(31), std::size_t(512), n - 2, n - 1}) {
      INFO("at " << at << " value " << bad);
      std::vector<float> w = v;
      w[at] = bad;
      CHECK_FALSE(all_finite(w.data(), n));
      CHECK(all_finite(w.data(), at));  // the floats before it
    }
}
