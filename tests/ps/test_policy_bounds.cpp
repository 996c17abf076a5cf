// A policy switch's numbers (over HTTP or psbed ctl) have the bounds the flags have: a credit of
// "1e300" became -9223372036854775808 bytes, and a whole number up to 2^63 - 1 was taken.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "ps/control.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("a policy switch's sizes and counts past their bounds are refused, naming the field",
          "[ps][control]") {
  policy::PolicyOptions p3;
  p3.name = "p3";
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "p3"}, {"credit", "1e300"}}, p3),
                    Contains("field 'credit': bad size '1e300': at most 1 PiB"));
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "p3"}, {"credit", "1e19"}}, p3),
                    Contains("at most 1 PiB"));
  CHECK_THROWS_WITH(
      ps::policy_from_request({{"policy", "p3"}, {"credit", 9223372036854775807LL}}, p3),
      Contains("field 'credit'") && Contains("at most 1 PiB"));
  CHECK_THROWS_WITH(
      ps::policy_from_request({{"policy", "p3"}, {"credit", 18446744073709551615ULL}}, p3),
      Contains("field 'credit'"));
  CHECK_THROWS_WITH(
      ps::policy_from_request({{"policy", "p3"}, {"slice_params", 9223372036854775807LL}}, p3),
      Contains("'slice_params' must be a positive integer, at most 10^9"));
  CHECK(ps::policy_from_request({{"policy", "p3"}, {"credit", "1MiB"}}, p3).credit_bytes ==
        1 << 20);
  CHECK(
      ps::policy_from_request({{"policy", "p3"}, {"slice_params", 1000000000}}, p3).slice_params ==
      1000000000);
}
