#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "ps/control.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("a policy request takes the settings its policy uses and refuses the others",
          "[ps][control]") {
  policy::PolicyOptions now;
  now.name = "wfbp";
  const auto p3 =
      ps::policy_from_request({{"policy", "p3"}, {"slice_params", 1000}, {"credit", "2MiB"}}, now);
  CHECK(p3.name == "p3");
  CHECK(p3.slice_params == 1000);
  CHECK(p3.credit_bytes == 2 << 20);
  // A switch keeps the cluster's slice (p3 -> prophet) and starts from the new policy's credit.
  const auto prophet = ps::policy_from_request({{"policy", "prophet"}}, p3);
  CHECK(prophet.slice_params == 1000);
  CHECK(prophet.credit_bytes == -1);
  CHECK(ps::policy_from_request({{"policy", "bytescheduler"}, {"partition_params", 5000}}, now)
            .partition_params == 5000);
  CHECK(ps::policy_from_request({{"policy", "wfbp"}, {"credit", "default"}}, p3).credit_bytes ==
        -1);
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "wfbp"}, {"slice_params", 1000}}, now),
                    Contains("'slice_params' is for p3 and prophet, not wfbp"));
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "p3"}, {"partition_params", 1000}}, now),
                    Contains("'partition_params' is for bytescheduler, not p3"));
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "bulk"}, {"credit", "1MiB"}}, now),
                    Contains("'credit' is for p3, bytescheduler and prophet, not bulk"));
  // The settings alone apply to the policy the cluster runs.
  CHECK_THROWS_WITH(ps::policy_from_request({{"slice_params", 1000}}, now), Contains("not wfbp"));
  CHECK(ps::policy_from_request({{"slice_params", 500}}, p3).slice_params == 500);
  // A request naming nothing is refused, not recorded as a switch.
  CHECK_THROWS_WITH(ps::policy_from_request(nlohmann::json::object(), p3),
                    Contains("names nothing to change"));
  CHECK_THROWS_WITH(ps::policy_from_request({{"command", "policy"}}, p3),
                    Contains("names nothing to change"));
  CHECK_THROWS_WITH(ps::policy_from_request({{"policy", "p3"}, {"slice_params", -5}}, now),
                    Contains("'slice_params' must be a positive integer"));
}

// Found by tests/fuzz/fuzz_peer_json: json's own conversion casts, which is undefined behaviour
// for a number out of the field's range.
TEST_CASE("a set_policy word's number out of range is refused, naming it", "[ps][control]") {
  const nlohmann::json ok = {{"policy", "p3"}, {"slice_params", 1000}, {"seed", 7}};
  CHECK(ps::policy_from_json(ok).slice_params == 1000);
  for (const nlohmann::json& bad :
       {nlohmann::json(1.3e44), nlohmann::json(2.5), nlohmann::json(-1), nlohmann::json("5")}) {
    nlohmann::json j = ok;
    j["seed"] = bad;
    CHECK_THROWS_WITH(ps::policy_from_json(j), Contains("'seed'") && Contains("whole number"));
  }
}
