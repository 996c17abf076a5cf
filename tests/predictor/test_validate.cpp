#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "predictor/commands.hpp"

using namespace psbed;
using namespace psbed::predictor;
using Catch::Matchers::Contains;

namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(PSBED_FIXTURES_DIR) + "/predictor/regression";
const std::string kRun = kFixtures + "/runs/lenet5-2w-bsp-bulk-100mbit";

// A scratch folder of copied fixture runs, removed on every exit path.
struct ScratchRuns {
  fs::path dir;
  explicit ScratchRuns(const std::string& name) : dir(fs::temp_directory_path() / name) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~ScratchRuns() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A copy of the fixture run `src` named `name`, its summary.json edited by `edit`.
  std::string copy(const std::string& src, const std::string& name,
                   const std::function<void(nlohmann::json&)>& edit = {}) const {
    const fs::path run = dir / name;
    fs::copy(src, run, fs::copy_options::recursive);
    if (edit) {
      std::ifstream in(run / "summary.json");
      nlohmann::json s = nlohmann::json::parse(in);
      in.close();
      edit(s);
      std::ofstream(run / "summary.json") << s.dump();
    }
    return run.string();
  }
};

struct Fixture {
  Profile profile = Profile::load(kFixtures + "/profile.json");
  ModelSpec spec =
      parse_model_spec(profile.source["model_toml"].get<std::string>(), "fixture profile");
  SimFlags flags;
  Fixture() {
    flags.steps = 40;
    flags.seeds = 1;
  }
  nlohmann::json validate(const std::vector<std::string>& runs) const {
    return validate_runs(profile, spec, runs, flags);
  }
};

}  // namespace

TEST_CASE("validate leaves failed runs out, names them and says why", "[predictor][validate]") {
  const Fixture f;
  const ScratchRuns tmp("psbed-validate-failed-test");
  const std::string ok = tmp.copy(kRun, "ok");
  const std::string failed = tmp.copy(kRun, "failed", [](nlohmann::json& s) {
    s["ok"] = false, s["failure"] = "worker-1 died", s["images_per_sec"] = 0;
  });
  const std::string empty =
      tmp.copy(kRun, "no-throughput", [](nlohmann::json& s) { s["images_per_sec"] = 0; });
  const auto v = f.validate({failed, ok, empty});
  INFO(v.dump(1));
  REQUIRE(v["runs"].size() == 1);
  CHECK(v["runs"][0]["run"] == ok);
  CHECK(v["runs_measured"] == 1);
  REQUIRE(v["runs_left_out"].size() == 2);
  CHECK(v["runs_left_out"][0]["run"] == failed);
  CHECK_THAT(v["runs_left_out"][0]["reason"].get<std::string>(), Contains("worker-1 died"));
  CHECK(v["runs_left_out"][1]["run"] == empty);
  // Nothing left to compare with: an error, not an empty report.
  CHECK_THROWS_WITH(f.validate({failed}), Contains("none of the 1 run folder(s)"));
}

TEST_CASE("validate leaves out runs that lost a node or switched policy midway",
          "[predictor][validate]") {
  const Fixture f;
  const ScratchRuns tmp("psbed-validate-changed-test");
  const std::string ok = tmp.copy(kRun, "ok");
  // "ok": true, as the coordinator writes it when a worker died and the others finished.
  const std::string lost = tmp.copy(kRun, "lost", [](nlohmann::json& s) {
    s["failed_nodes"] = {{{"name", "worker-1"}, {"role", "worker"}, {"reason", "no heartbeat"}}};
  });
  const std::string switched = tmp.copy(kRun, "switched", [](nlohmann::json& s) {
    s["policy_switches"] = {{{"step", 102}, {"policy", {{"policy", "p3"}}}}};
  });
  const auto v = f.validate({lost, ok, switched});
  INFO(v.dump(1));
  REQUIRE(v["runs"].size() == 1);
  CHECK(v["runs"][0]["run"] == ok);
  REQUIRE(v["runs_left_out"].size() == 2);
  CHECK_THAT(v["runs_left_out"][0]["reason"].get<std::string>(),
             Contains("a node failed") && Contains("worker-1"));
  CHECK_THAT(v["runs_left_out"][1]["reason"].get<std::string>(), Contains("policy was switched"));
}

TEST_CASE("validate refuses a run of another model or batch than the profile's",
          "[predictor][validate]") {
  const Fixture f;
  const ScratchRuns tmp("psbed-validate-model-test");
  const std::string other =
      tmp.copy(kRun, "other-model", [](nlohmann::json& s) { s["model"] = "cnn-cifar"; });
  CHECK_THROWS_WITH(f.validate({other}), Contains(other) && Contains("trained cnn-cifar") &&
                                             Contains("profile is of lenet5"));
  const std::string batch =
      tmp.copy(kRun, "other-batch", [](nlohmann::json& s) { s["batch"] = 64; });
  CHECK_THROWS_WITH(f.validate({batch}),
                    Contains(batch) && Contains("batches of 64") && Contains("32"));
}

TEST_CASE("validate's errors on a bad summary name the run", "[predictor][validate]") {
  const Fixture f;
  const ScratchRuns tmp("psbed-validate-errors-test");
  const std::string text =
      tmp.copy(kRun, "text", [](nlohmann::json& s) { s["images_per_sec"] = "fast"; });
  CHECK_THROWS_WITH(f.validate({text}), Contains(text + "/summary.json") &&
                                            Contains("'images_per_sec'") &&
                                            Contains("expected a number"));
  const std::string none =
      tmp.copy(kRun, "no-workers", [](nlohmann::json& s) { s["workers"] = 0; });
  CHECK_THROWS_WITH(f.validate({none}), Contains(none) && Contains("at least one of each"));
  const std::string policy =
      tmp.copy(kRun, "policy", [](nlohmann::json& s) { s["policy"] = "fastest"; });
  CHECK_THROWS_WITH(f.validate({policy}), Contains(policy) && Contains("fastest"));
  const std::string mode =
      tmp.copy(kRun, "mode", [](nlohmann::json& s) { s["mode"] = "sometimes"; });
  CHECK_THROWS_WITH(f.validate({mode}), Contains(mode) && Contains("sometimes"));
}

// The link of a run lives in its traces' metadata; a run launched with --no-trace has it in
// summary.json (launch.link); with neither, validate needs --bandwidth rather than guessing.
TEST_CASE("a run without traces: its link from summary.json, or --bandwidth, or a clear error",
          "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-notrace-test");
  const double traced = f.validate({kRun})["runs"][0]["predicted_images_per_sec"].get<double>();
  const std::string bare = tmp.copy(kRun, "bare");
  fs::remove_all(fs::path(bare) / "traces");
  CHECK_THROWS_WITH(f.validate({bare}), Contains(bare) && Contains("traces/worker-0.trace.json") &&
                                            Contains("--bandwidth"));
  const std::string linked = tmp.copy(bare, "linked", [](nlohmann::json& s) {
    s["launch"] = {
        {"link", "100.00 Mbit/s, 200 us one way"}, {"straggler_ms", 0}, {"start_stagger_ms", 0}};
  });
  const auto v = f.validate({linked});
  CHECK(v["runs"][0]["bandwidth"] == "100.00 Mbit/s");
  CHECK(v["runs"][0]["predicted_images_per_sec"].get<double>() == Approx(traced).epsilon(1e-12));
  f.flags.bandwidth = "100mbit";
  f.flags.latency = "200us";
  CHECK(f.validate({bare})["runs"][0]["predicted_images_per_sec"].get<double>() ==
        Approx(traced).epsilon(1e-12));
}

// Runs that differ only in their straggler are configurations of their own, each row carrying
// its latency, straggler and start stagger (validation.md gives them columns where one is set).
TEST_CASE("validate keeps each run's latency, straggler and start stagger",
          "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-straggler-test");
  auto bare = [&](const std::string& name, double straggler_ms) {
    const std::string run = tmp.copy(kRun, name, [&](nlohmann::json& s) {
      s["launch"] = {{"link", "100.00 Mbit/s, 200 us one way"},
                     {"straggler_ms", straggler_ms},
                     {"start_stagger_ms", 0}};
    });
    fs::remove_all(fs::path(run) / "traces");
    return run;
  };
  const auto v = f.validate({bare("plain", 0), bare("straggled", 20)});
  REQUIRE(v["runs"].size() == 2);
  CHECK(v["configurations"] == 2);
  for (const auto& r : v["runs"]) {
    CHECK(r["latency_us"].get<double>() == Approx(200));
    CHECK(r["start_stagger_ms"].get<double>() == 0);
  }
  const auto& plain = v["runs"][0]["run"].get<std::string>().find("plain") != std::string::npos
                          ? v["runs"][0]
                          : v["runs"][1];
  const auto& straggled = &plain == &v["runs"][0] ? v["runs"][1] : v["runs"][0];
  CHECK(plain["straggler_ms"].get<double>() == 0);
  CHECK(straggled["straggler_ms"].get<double>() == Approx(20));
  // Worker-0 sleeps 20 ms a step: its prediction is the slower one.
  CHECK(straggled["predicted_images_per_sec"].get<double>() <
        0.9 * plain["predicted_images_per_sec"].get<double>());

  // validation.md: a column for the latency and one for the straggler, none for the stagger.
  ValidateOptions o;
  o.profile = kFixtures + "/profile.json";
  o.runs = {bare("plain-md", 0), bare("straggled-md", 20)};
  o.out = (tmp.dir / "report").string();
  o.sim = f.flags;
  o.python = "true";  // no plot
  REQUIRE(run_validate(o) == 0);
  std::ifstream md(tmp.dir / "report" / "validation.md");
  std::string header;
  std::getline(md, header);
  CHECK_THAT(header, Contains("| bandwidth | latency us | straggler ms | measured images/s |"));
  CHECK_THAT(header, !Contains("stagger ms"));
}

// launch --straggler's workers, from summary.json's launch.stragglers: runs that differ only in
// them are configurations of their own, and validation.md gives them a column.
TEST_CASE("validate reads each run's stragglers and keeps them apart", "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-stragglers-test");
  auto run = [&](const std::string& name, const nlohmann::json& stragglers) {
    return tmp.copy(kRun, name, [&](nlohmann::json& s) { s["launch"]["stragglers"] = stragglers; });
  };
  const nlohmann::json slow = {
      {{"worker", 1}, {"compute_factor", 3}, {"bandwidth_bytes_per_sec", 0}}};
  const auto v = f.validate({run("plain", nlohmann::json::array()), run("slow", slow)});
  REQUIRE(v["runs"].size() == 2);
  CHECK(v["configurations"] == 2);
  const bool first_plain = v["runs"][0]["stragglers"] == "";
  const auto& plain = v["runs"][first_plain ? 0 : 1];
  const auto& straggled = v["runs"][first_plain ? 1 : 0];
  CHECK(plain["stragglers"] == "");
  CHECK(straggled["stragglers"] == "worker-1:compute=3x");
  // bsp: worker-1's compute three times as long slows both workers.
  CHECK(straggled["predicted_images_per_sec"].get<double>() <
        0.95 * plain["predicted_images_per_sec"].get<double>());
  // A straggler the run cannot have had is refused, naming the run.
  const nlohmann::json bad = {{{"worker", 2}, {"compute_factor", 3}}};
  const std::string wrong = run("wrong", bad);
  CHECK_THROWS_WITH(f.validate({wrong}), Contains(wrong) && Contains("worker-2"));

  ValidateOptions o;
  o.profile = kFixtures + "/profile.json";
  o.runs = {run("plain-md", nlohmann::json::array()), run("slow-md", slow)};
  o.out = (tmp.dir / "report").string();
  o.sim = f.flags;
  o.python = "true";  // no plot
  REQUIRE(run_validate(o) == 0);
  std::ifstream md(tmp.dir / "report" / "validation.md");
  std::string header, line, all;
  std::getline(md, header);
  while (std::getline(md, line)) all += line + "\n";
  CHECK_THAT(header, Contains("| stragglers |"));
  CHECK_THAT(all, Contains("| worker-1:compute=3x |"));
}

TEST_CASE("validate --compute real or replay overrides each run's own", "[predictor][validate]") {
  Fixture f;
  // The host's cores modelled (the fixture profile has no host costs): real compute takes them.
  f.profile.host_cpus = 2;
  f.profile.cpu_per_message_us = 30;
  f.flags.bandwidth = "10gbit";  // a fast link, so that compute sets the pace
  f.flags.steps = 0;
  f.flags.seeds = 1;
  auto predicted = [&](const char* compute) {
    f.flags.compute = compute;
    // 4 workers on the 2 cores: real compute queues for them
    return f
        .validate({kFixtures +
                   "/runs/lenet5-4w-async-wfbp-100mbit"})["runs"][0]["predicted_images_per_sec"]
        .get<double>();
  };
  const double own = predicted("auto");  // the fixture runs computed for real
  CHECK(predicted("real") == own);
  CHECK(predicted("replay") > 1.2 * own);  // sleeps take no core
}

// An unshaped run (its traces say "unshaped") is predicted on the profile's link estimate when
// the profile's run was unshaped too, and without a link limit when the profile's was shaped; a
// --netns run's nodes say "unshaped" too, but tc shaped its links: the bandwidth is launch's.
TEST_CASE("validate: the link of unshaped and --netns runs", "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-links-test");
  const std::string unshaped = tmp.copy(kRun, "unshaped");
  {
    const fs::path trace = fs::path(unshaped) / "traces" / "worker-0.trace.json";
    std::ifstream in(trace);
    nlohmann::json t = nlohmann::json::parse(in);
    in.close();
    t["metadata"]["link"] = "unshaped";
    std::ofstream(trace) << t.dump();
  }
  auto link_of = [&](const std::string& run) { return f.validate({run})["runs"][0]["bandwidth"]; };
  REQUIRE_FALSE(f.profile.shaped.empty());
  CHECK(link_of(unshaped) == "unlimited");
  const std::string netns = tmp.copy(unshaped, "netns", [](nlohmann::json& s) {
    s["launch"] = {{"netns", {{"shaping", "tc tbf 100mbit per direction"}}},
                   {"link", "100.00 Mbit/s, 0 us one way"}};
  });
  CHECK(link_of(netns) == "100.00 Mbit/s");
  const std::string older = tmp.copy(unshaped, "netns-older", [](nlohmann::json& s) {
    s["launch"] = {{"netns", {{"shaping", "tc tbf 20mbit per direction"}}}};
  });
  CHECK(link_of(older) == "20.00 Mbit/s");
  f.profile.shaped.clear();  // an unshaped profile: its estimate of the host's loopback
  f.profile.bandwidth_bytes_per_sec = 5e6;
  CHECK(link_of(unshaped) == "40.00 Mbit/s");
  // The row says the run was unshaped, not that it ran at 0 bytes/s and 0 us.
  const nlohmann::json row = f.validate({unshaped})["runs"][0];
  CHECK(row["recorded_link"] == "unshaped");
  CHECK(row["recorded_bandwidth_bytes_per_sec"].is_null());
  CHECK(row["recorded_latency_us"].is_null());
  CHECK(f.validate({netns})["runs"][0]["recorded_bandwidth_bytes_per_sec"].get<double>() ==
        Approx(12.5e6));
}

// Runs whose traces measured the host's CPU are simulated again at it: every CPU cost scaled by
// their CPU per worker-step against what the simulation booked on the cores for the same
// configuration. At the booked CPU that changes nothing; at ten times it, 4 workers' real
// compute on 2 cores runs far slower.
TEST_CASE("validate: each run again at its measured host CPU per step", "[predictor][validate]") {
  Fixture f;
  f.profile.host_cpus = 2;
  f.profile.cpu_per_message_us = 30;
  f.flags.bandwidth = "10gbit";  // a fast link, so that the CPU sets the pace
  f.flags.steps = 0;             // the run's own 100
  const ScratchRuns tmp("psbed-validate-host-cpu-test");
  const std::string run =
      tmp.copy(kFixtures + "/runs/lenet5-4w-async-wfbp-100mbit", "run", [](nlohmann::json& s) {
        s["launch"] = {{"host_cpus", 2}};
      });
  // Each worker `cpu_s` of CPU over its 95 steady steps (100 done, 5 warm-up) in 1-2 s; the shard
  // 0.2 s over that second: 4 cpu_s + 0.2 s over 380 steps, 4 cpu_s + 0.2 cores busy.
  const fs::path traces = fs::path(run) / "traces";
  auto measured_cpu = [&](double cpu_s, int threads = 1) {
    for (int w = 0; w < 4; ++w) {
      nlohmann::json t = {{"traceEvents", nlohmann::json::array()},
                          {"metadata", nlohmann::json::object()}};
      std::ifstream(kFixtures + "/runs/lenet5-4w-async-wfbp-100mbit/traces/worker-0.trace.json") >>
          t;
      if (w > 0) t["traceEvents"] = nlohmann::json::array();
      t["metadata"]["steps_done"] = 100;
      t["metadata"]["threads"] = threads;
      t["metadata"]["cpu_steady"] = {{"from_us", 1e6}, {"to_us", 2e6}, {"cpu_s", cpu_s}};
      std::ofstream(traces / ("worker-" + std::to_string(w) + ".trace.json")) << t.dump();
    }
    std::ofstream(traces / "server-0.trace.json") << nlohmann::json{
        {"traceEvents", nlohmann::json::array()},
        {"metadata",
         {{"cpu_samples", {{0, 0.0}, {3e6, 0.6}}}}}}.dump();
    return (4 * cpu_s + 0.2) / 380;  // seconds a worker-step
  };
  measured_cpu(0.5);
  nlohmann::json v = f.validate({run});
  nlohmann::json r = v["runs"][0];
  REQUIRE(r.contains("host_cpu"));
  const double simulated = r["host_cpu"]["simulated_per_step_ms"].get<double>() / 1e3;
  const double predicted = r["predicted_images_per_sec"].get<double>();
  REQUIRE(simulated > 0);
  CHECK(r["host_cpu"]["per_step_ms"].get<double>() == Approx(2.2 / 380 * 1e3));
  CHECK(r["host_cpu"]["ratio"].get<double>() == Approx(2.2 / 380 / simulated));
  CHECK(r["host_cpu"]["busy_cores"].get<double>() == Approx(2.2));
  CHECK(r["host_cpu"]["cores"] == 2);
  CHECK(v["at_measured_host_cpu"]["configurations"] == 1);
  CHECK(v["at_measured_host_cpu"]["profiled_per_step_ms"].is_null());  // an older profile

  // Measured exactly what the simulation booked: the same figure.
  measured_cpu((simulated * 380 - 0.2) / 4);
  r = f.validate({run})["runs"][0];
  CHECK(r["host_cpu"]["ratio"].get<double>() == Approx(1));
  CHECK(r["host_cpu"]["predicted_images_per_sec"].get<double>() == Approx(predicted).epsilon(1e-3));
  // Ten times that: far slower, where the prediction as profiled stays.
  measured_cpu((10 * simulated * 380 - 0.2) / 4);
  v = f.validate({run});
  r = v["runs"][0];
  CHECK(r["host_cpu"]["ratio"].get<double>() == Approx(10));
  CHECK(r["predicted_images_per_sec"].get<double>() == predicted);
  CHECK(r["host_cpu"]["predicted_images_per_sec"].get<double>() < predicted / 3);
  CHECK(v["at_measured_host_cpu"]["max_abs_error_pct"].get<double>() ==
        Approx(std::fabs(r["host_cpu"]["error_pct"].get<double>())));

  // Beside a run without the figures (the fixture's 2-worker run has one worker trace), each
  // configuration keeps its own.
  const std::string other =
      tmp.copy(kFixtures + "/runs/lenet5-2w-bsp-bulk-100mbit", "other", [](nlohmann::json& s) {
        s["launch"] = {{"host_cpus", 2}};
      });
  v = f.validate({other, run});
  REQUIRE(v["runs"].size() == 2);
  for (const auto& row : v["runs"]) CHECK(row.contains("host_cpu") == (row["workers"] == 4));
  CHECK(v["at_measured_host_cpu"]["configurations"] == 1);

  // Not compared: another core count simulated than the run had; compute predicted otherwise
  // than the run's; real compute on two threads a worker (the simulator books one); a shard's
  // samples missing.
  f.flags.host_cpus = 4;
  CHECK_FALSE(f.validate({run})["runs"][0].contains("host_cpu"));
  f.flags.host_cpus = -1;
  f.flags.compute = "replay";
  CHECK_FALSE(f.validate({run})["runs"][0].contains("host_cpu"));
  f.flags.compute = "auto";
  measured_cpu(0.5, 2);
  CHECK_FALSE(f.validate({run})["runs"][0].contains("host_cpu"));
  measured_cpu(0.5);
  fs::remove(traces / "server-0.trace.json");
  CHECK_FALSE(f.validate({run})["runs"][0].contains("host_cpu"));
}

// --bandwidth and --latency replace the link each run recorded; runs that recorded different
// links still measured different configurations and are never taken as repeats of one (their
// median was compared with one prediction).
TEST_CASE("validate keeps runs of different recorded links apart under --bandwidth/--latency",
          "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-override-test");
  auto with_link = [&](const std::string& name, const std::string& link) {
    const std::string run = tmp.copy(kRun, name);
    const fs::path trace = fs::path(run) / "traces" / "worker-0.trace.json";
    std::ifstream in(trace);
    nlohmann::json t = nlohmann::json::parse(in);
    in.close();
    t["metadata"]["link"] = link;
    std::ofstream(trace) << t.dump();
    return run;
  };
  const std::string near = with_link("near", "100.00 Mbit/s, 0 us one way");
  const std::string far = with_link("far", "100.00 Mbit/s, 2000 us one way");
  const std::string fast = with_link("fast", "1.00 Gbit/s, 0 us one way");
  const std::string near_again = with_link("near-r2", "100.00 Mbit/s, 0 us one way");

  // Each run's own link: three configurations, the repeat with its own.
  nlohmann::json v = f.validate({near, far, fast, near_again});
  INFO(v.dump(1));
  CHECK(v["configurations"] == 3);

  // One latency for all: still three configurations, each with the latency simulated and the
  // one its runs recorded.
  f.flags.latency = "200us";
  v = f.validate({near, far, fast, near_again});
  REQUIRE(v["configurations"] == 3);
  for (const auto& r : v["runs"]) {
    CHECK(r["latency_us"].get<double>() == Approx(200));
    const bool repeated = r["run"] == near;
    CHECK(r["repeats"] == (repeated ? 2 : 1));
    CHECK(r["recorded_latency_us"].get<double>() == Approx(r["run"] == far ? 2000 : 0));
  }

  // One bandwidth for all: the 100 Mbit/s and 1 Gbit/s runs stay apart too.
  f.flags.latency.clear();
  f.flags.bandwidth = "1gbit";
  v = f.validate({near, fast});
  REQUIRE(v["configurations"] == 2);
  for (const auto& r : v["runs"]) {
    CHECK(r["bandwidth"] == "1.00 Gbit/s");
    CHECK(r["recorded_bandwidth_bytes_per_sec"].get<double>() ==
          Approx(r["run"] == fast ? 125e6 : 12.5e6));
  }
  // The same override on runs of one recorded link: repeats, as without it.
  CHECK(f.validate({near, near_again})["configurations"] == 1);
}

// Each row says what sets its configuration apart: the policy's settings where it uses them (as
// the run used them: a default credit as the bytes it is), the simulated steps, the link in
// numbers; validation.md gives the settings a column.
TEST_CASE("validate's rows carry each configuration's settings", "[predictor][validate]") {
  Fixture f;
  const ScratchRuns tmp("psbed-validate-settings-test");
  const std::string p3 = kFixtures + "/runs/lenet5-2w-async-p3-100mbit";
  const nlohmann::json v = f.validate({kRun, p3});
  INFO(v.dump(1));
  REQUIRE(v["runs"].size() == 2);
  for (const auto& r : v["runs"]) {
    const bool is_p3 = r["policy"] == "p3";
    CHECK(r["slice_params"] == (is_p3 ? nlohmann::json(40000) : nlohmann::json()));
    CHECK(r["partition_params"].is_null());
    CHECK(r["credit_bytes"] == (is_p3 ? nlohmann::json(4 << 20) : nlohmann::json()));
    CHECK(r["steps"] == 40);
    CHECK(r["recorded_steps"].is_number());
    CHECK(r["bandwidth_bytes_per_sec"].get<double>() == Approx(12.5e6));
    CHECK(r["partition_bytes"] == 4 << 20);
    CHECK(r["servers"] == 1);
  }

  ValidateOptions o;
  o.profile = kFixtures + "/profile.json";
  o.runs = {kRun, p3};
  o.out = (tmp.dir / "report").string();
  o.sim = f.flags;
  o.python = "true";
  REQUIRE(run_validate(o) == 0);
  std::ifstream md(tmp.dir / "report" / "validation.md");
  std::string header, rule, first, second;
  std::getline(md, header), std::getline(md, rule), std::getline(md, first),
      std::getline(md, second);
  CHECK_THAT(header, Contains("| policy | settings | mode |"));
  CHECK_THAT(first + second,
             Contains("| p3 | slice 40000, credit 4.00 MiB |") && Contains("| bulk |  |"));
}

// Seeds past 2^64 - 1 wrap to 0 (unsigned arithmetic); the report names them so, not as
// "18446744073709551615 to 1".
TEST_CASE("a seed range is named as the seeds run, wrapping past 2^64 - 1",
          "[predictor][validate]") {
  CHECK(seed_range(1, 5) == "1 to 5");
  CHECK(seed_range(7, 1) == "7");
  CHECK(seed_range(18446744073709551611ull, 5) == "18446744073709551611 to 18446744073709551615");
  CHECK(seed_range(18446744073709551614ull, 5) ==
        "18446744073709551614 to 18446744073709551615, then 0 to 2");
  CHECK(seed_range(18446744073709551615ull, 2) == "18446744073709551615, then 0");
}
