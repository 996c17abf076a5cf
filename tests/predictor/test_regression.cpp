#include <catch2/catch.hpp>
#include <filesystem>

#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "predictor/commands.hpp"

using namespace psbed;
using namespace psbed::predictor;

namespace fs = std::filesystem;

// A recorded single-worker lenet5 profile (1 Gbit/s, 200 us) and the summaries of runs measured
// on this testbed (tests/fixtures/predictor/regression/README.md says which and how): the
// predictions must stay within the accuracy the issue asks of the predictor.
TEST_CASE("recorded runs stay within the accuracy bounds", "[predictor][regression]") {
  const std::string dir = std::string(PSBED_FIXTURES_DIR) + "/predictor/regression";
  const Profile profile = Profile::load(dir + "/profile.json");
  const ModelSpec spec =
      parse_model_spec(profile.source["model_toml"].get<std::string>(), "fixture profile");
  std::vector<std::string> runs;
  for (const auto& e : fs::directory_iterator(dir + "/runs")) runs.push_back(e.path().string());
  std::sort(runs.begin(), runs.end());
  REQUIRE(runs.size() >= 4);
  SimFlags flags;
  flags.steps = 0;  // each run's own length
  const auto v = validate_runs(profile, spec, runs, flags);
  for (const auto& r : v["runs"]) {
    INFO(r.dump());
    CHECK(std::abs(r["error_pct"].get<double>()) <= 10.0);
  }
  CHECK(v["mean_abs_error_pct"].get<double>() <= 5.0);
  CHECK(v["max_abs_error_pct"].get<double>() <= 10.0);
}
