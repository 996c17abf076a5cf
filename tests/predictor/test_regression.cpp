#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

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
  // Every run its own configuration, each on the link it was measured on (the traces say
  // 100 Mbit/s; the profile's run had 1 Gbit/s).
  REQUIRE(v["runs"].size() == runs.size());
  for (const auto& r : v["runs"]) {
    INFO(r.dump());
    CHECK(r["bandwidth"] == "100.00 Mbit/s");
    CHECK(std::abs(r["error_pct"].get<double>()) <= 10.0);
  }
  CHECK(v["mean_abs_error_pct"].get<double>() <= 5.0);
  CHECK(v["max_abs_error_pct"].get<double>() <= 10.0);
}

// A sweep's repeats (`psbed sweep --repeat`): runs of one configuration are predicted once and
// compared by the median of their measurements; other configurations stay apart.
TEST_CASE("validate compares repeats of one configuration by their median",
          "[predictor][regression]") {
  const std::string dir = std::string(PSBED_FIXTURES_DIR) + "/predictor/regression";
  const Profile profile = Profile::load(dir + "/profile.json");
  const ModelSpec spec =
      parse_model_spec(profile.source["model_toml"].get<std::string>(), "fixture profile");
  const fs::path tmp = fs::temp_directory_path() / "psbed-validate-repeats-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string base_run = dir + "/runs/lenet5-2w-bsp-bulk-100mbit";
  const std::string other_run = dir + "/runs/lenet5-4w-bsp-bulk-100mbit";
  SimFlags flags;
  flags.steps = 0;
  const auto alone = validate_runs(profile, spec, {base_run}, flags);
  const double measured = alone["runs"][0]["measured_images_per_sec"].get<double>();
  const double predicted = alone["runs"][0]["predicted_images_per_sec"].get<double>();

  // Three repeats at 0.7x, 1x and 1.4x of the recorded pace: the median is the recorded one.
  std::vector<std::string> runs;
  for (double scale : {1.4, 1.0, 0.7}) {
    const fs::path run = tmp / ("bulk-2w-x" + std::to_string(int(scale * 10)));
    fs::copy(base_run, run, fs::copy_options::recursive);
    std::ifstream in(run / "summary.json");
    nlohmann::json s = nlohmann::json::parse(in);
    in.close();
    s["images_per_sec"] = measured * scale;
    std::ofstream(run / "summary.json") << s.dump();
    runs.push_back(run.string());
  }
  runs.push_back(other_run);
  const auto v = validate_runs(profile, spec, runs, flags);
  INFO(v.dump(1));
  REQUIRE(v["runs"].size() == 2);
  CHECK(v["configurations"] == 2);
  CHECK(v["runs_measured"] == 4);
  const auto& g = v["runs"][0];
  CHECK(g["repeats"] == 3);
  CHECK(g["workers"] == 2);
  CHECK(g["measured_images_per_sec"].get<double>() == Approx(measured));
  CHECK(g["measured_min_images_per_sec"].get<double>() == Approx(0.7 * measured));
  CHECK(g["measured_max_images_per_sec"].get<double>() == Approx(1.4 * measured));
  CHECK(g["predicted_images_per_sec"].get<double>() == Approx(predicted));
  CHECK(g["error_pct"].get<double>() == Approx(alone["runs"][0]["error_pct"].get<double>()));
  CHECK(v["runs"][1]["repeats"] == 1);
  CHECK(v["runs"][1]["workers"] == 4);
  // Each run alone: the 0.7x and 1.4x runs are far off the one prediction.
  double sum = 0, worst = 0;
  for (double m : {1.4 * measured, measured, 0.7 * measured}) {
    const double e = std::abs(100 * (predicted - m) / m);
    sum += e, worst = std::max(worst, e);
  }
  const double other = std::abs(v["runs"][1]["error_pct"].get<double>());
  CHECK(v["single_run_mean_abs_error_pct"].get<double>() == Approx((sum + other) / 4));
  CHECK(v["single_run_max_abs_error_pct"].get<double>() == Approx(std::max(worst, other)));
  CHECK(v["mean_abs_error_pct"].get<double>() ==
        Approx((std::abs(g["error_pct"].get<double>()) + other) / 2));
  fs::remove_all(tmp);
}
