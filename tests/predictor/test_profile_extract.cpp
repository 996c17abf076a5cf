#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "predictor/profile_extract.hpp"
#include "predictor/simulator.hpp"

using namespace psbed;
using namespace psbed::predictor;

namespace fs = std::filesystem;

namespace {
// A hand-written single-worker run of the one-layer "tiny" model, four steps of batch 8
// (tests/fixtures/predictor/run-1w): step s has fwd:fc1 100 + 10 s us, fwd:relu1 50 us,
// bwd:relu1 40 us, bwd:fc1 200 us; pulls of 3,984 and 16 bytes take 598.4 and 201.6 us
// (2 x 100 us latency + bytes at 10 bytes/us); applies take 2 us + 0.5 ns per byte.
const std::string kOneWorkerRun = std::string(PSBED_FIXTURES_DIR) + "/predictor/run-1w";

// The fixture's profile, fitted to nothing.
Profile uncalibrated_fixture() {
  ProfileOptions o;
  o.run = kOneWorkerRun;
  o.skip_steps = 1;
  o.calibrate = false;
  return extract_profile(o);
}

// The simulated pace of the profile's source run (1 worker, its link, bucket links) with `set`
// applied to the configuration.
template <typename Set>
double source_pace(const Profile& p, Set set) {
  const ModelSpec spec = parse_model_spec(p.source["model_toml"].get<std::string>(), "fixture");
  SimConfig c;
  c.link_model = LinkModel::kBucket;
  c.bandwidth_bytes_per_sec = p.bandwidth_bytes_per_sec;
  c.latency_s = p.latency_us * 1e-6;
  c.steps = 120;
  set(c);
  return simulate(p, spec, c).steps_per_sec;
}
}  // namespace

TEST_CASE("profile extraction from a single-worker run", "[predictor][profile]") {
  ProfileOptions o;
  o.run = kOneWorkerRun;
  o.skip_steps = 1;
  const Profile p = extract_profile(o);
  CHECK(p.model == "tiny");
  CHECK(p.batch == 8);
  REQUIRE(p.tensors.size() == 2);
  CHECK(p.tensors[0].bytes == 3984);
  CHECK(p.tensors[1].bytes == 16);
  REQUIRE(p.layers.size() == 2);
  CHECK(p.layers[0].name == "fc1");
  REQUIRE(p.layers[0].forward_ms.size() == 3);  // steps 1, 2, 3
  CHECK(p.layers[0].forward_ms[0] == Approx(0.11));
  CHECK(p.layers[0].forward_ms[2] == Approx(0.13));
  CHECK(p.layers[0].backward_ms[1] == Approx(0.2));
  CHECK(p.layers[1].forward_ms[0] == Approx(0.05));
  CHECK(p.layers[1].backward_ms[0] == Approx(0.04));
  // Overhead: 51.6 us between the weight's arrival and fwd:fc1, 40 - 10 (s - 1) us before
  // fwd:relu1, 10 us before bwd:relu1, 50 us after the last acknowledgment.
  REQUIRE(p.step_overhead_ms.size() == 3);
  CHECK(p.step_overhead_ms[0] == Approx(0.1516));
  CHECK(p.step_overhead_ms[1] == Approx(0.1416));
  CHECK(p.step_overhead_ms[2] == Approx(0.1316));
  CHECK(p.apply_ns_per_byte == Approx(0.5));
  CHECK(p.apply_overhead_us == Approx(2.0));
  // Unshaped: estimated from the pulls.
  CHECK(p.shaped.empty());
  CHECK(p.bandwidth_bytes_per_sec == Approx(1e7));
  CHECK(p.latency_us == Approx(100));
  CHECK(p.source["workers"] == 1);
  CHECK(p.source["servers"] == 1);
  CHECK(p.source["mode"] == "bsp");
  CHECK(p.source["policy"] == "wfbp");
  CHECK(p.source["profiled_steps"] == 3);
  // The default warm-up rule for 4 steps leaves out 2.
  ProfileOptions d;
  d.run = kOneWorkerRun;
  CHECK(extract_profile(d).layers[0].forward_ms.size() == 2);
}

TEST_CASE("time blocked handing pushes to a full send buffer is no overhead",
          "[predictor][profile]") {
  // Step 1 of the fixture, changed: after bwd:relu1 (ends at 1010900 us) the compute thread hands
  // two pushes over, at 1010900 and 1010960 (the second waited for room), and bwd:fc1 starts at
  // 1010970; the fc1 pushes follow it at 1011170 and the step ends at 1011400.
  const fs::path tmp = fs::temp_directory_path() / "psbed-profile-send-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "traces");
  nlohmann::json t;
  std::ifstream(kOneWorkerRun + "/traces/worker-0.trace.json") >> t;
  nlohmann::json extra = nlohmann::json::array();
  for (auto& e : t["traceEvents"]) {
    if (e.value("ph", "") != "X" || e["args"].value("step", -1) != 1) continue;
    const std::string name = e["name"];
    if (name == "bwd:fc1") e["ts"] = 1010970;
    if (name.rfind("push:", 0) == 0) e["ts"] = 1011170;
    if (name == "step") e["dur"] = 1400;
    if (name == "push:fc1.bias#0")
      for (double ts : {1010900.0, 1010960.0}) {
        nlohmann::json p = e;
        p["ts"] = ts;
        extra.push_back(p);
      }
  }
  for (auto& e : extra) t["traceEvents"].push_back(e);
  std::ofstream(tmp / "traces/worker-0.trace.json") << t.dump();
  ProfileOptions o;
  o.run = tmp.string();
  o.skip_steps = 1;
  const Profile p = extract_profile(o);
  // 51.6 (weight's arrival) + 40 (before fwd:relu1) + 10 (before bwd:relu1) + 10 (after the last
  // hand-over, before bwd:fc1) + 80 (after the last acknowledgment) us; the 60 us in send() are
  // left out.
  REQUIRE(p.step_overhead_ms.size() == 3);
  CHECK(p.step_overhead_ms[0] == Approx(0.1916));
  CHECK(p.step_overhead_ms[1] == Approx(0.1416));
  fs::remove_all(tmp);
}

TEST_CASE("host CPU per message and per byte from the traces' CPU over the steady steps",
          "[predictor][profile]") {
  // The fixture run, with the CPU the live nodes record: the worker used 0.02 s over its steady
  // steps (1010000-1031300 us; 12 transfers end inside, 24,000 bytes), the shard's samples say
  // 0.01 s over the same span. At 1 ns per byte (0.000024 s) the rest is 0.029976 s over 24
  // messages: 1249 us each.
  const fs::path tmp = fs::temp_directory_path() / "psbed-profile-host-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "traces");
  nlohmann::json w, sv, summary;
  std::ifstream(kOneWorkerRun + "/traces/worker-0.trace.json") >> w;
  std::ifstream(kOneWorkerRun + "/traces/server-0.trace.json") >> sv;
  std::ifstream(kOneWorkerRun + "/summary.json") >> summary;
  w["metadata"]["compute"] = "replay:x.json";
  w["metadata"]["cpu_steady"] = {{"from_us", 1010000}, {"to_us", 1031300}, {"cpu_s", 0.02}};
  sv["metadata"]["cpu_samples"] = {
      {1000000, 0.99}, {1010000, 1.0}, {1031300, 1.01}, {1041300, 1.02}};
  summary["launch"] = {{"host_cpus", 2}};
  std::ofstream(tmp / "traces/worker-0.trace.json") << w.dump();
  std::ofstream(tmp / "traces/server-0.trace.json") << sv.dump();
  std::ofstream(tmp / "summary.json") << summary.dump();
  ProfileOptions o;
  o.run = tmp.string();
  o.skip_steps = 1;
  o.calibrate = false;
  o.copy_cpu_ns_per_byte = 1;
  Profile p = extract_profile(o);
  int transfers = 0;
  double bytes = 0;
  for (const auto& e : w["traceEvents"]) {
    if (e.value("ph", "") != "X" || (e["tid"] != 3 && e["tid"] != 1)) continue;
    const double end = e["ts"].get<double>() + e["dur"].get<double>();
    if (end >= 1010000 && end <= 1031300) ++transfers, bytes += e["args"]["bytes"].get<double>();
  }
  REQUIRE(transfers > 0);
  CHECK(p.host_cpus == 2);
  CHECK(p.cpu_per_byte_ns == 1);
  CHECK(p.cpu_per_message_us == Approx((0.02 + 0.01 - bytes * 1e-9) / (2 * transfers) * 1e6));
  CHECK(p.to_json()["host"]["cpus"] == 2);
  // A node's serial share of it, half, is set whether or not the pace is calibrated.
  CHECK(p.message_cost_us == Approx(p.cpu_per_message_us / 2));
  // Every process's CPU per step, compute and all (validate sets each run's beside it): 0.03 s
  // over the three steps that ended in the span (at 1011300, 1021300 and 1031300 us), and over
  // its 21.3 ms.
  CHECK(p.source["host_cpu_per_step_ms"].get<double>() == Approx(10));
  CHECK(p.source["host_busy_cores"].get<double>() == Approx(0.03 / 0.0213));
  // Ten times the worker's CPU (12 ms a message) makes the simulated run slower than the
  // measured one: calibrated, the unshaped run's latency (the pulls' 100 us, which hold both
  // ends' software time too) comes down, to 0 as even that is too slow, and the profile keeps
  // the pulls' figure.
  w["metadata"]["cpu_steady"]["cpu_s"] = 0.3;
  std::ofstream(tmp / "traces/worker-0.trace.json") << w.dump();
  const Profile busy = extract_profile(o);
  REQUIRE(simulated_source_pace(busy) <
          busy.source["measured_steps_per_sec"].get<double>() * (1 - kCalibrationTolerance));
  o.calibrate = true;
  const Profile calibrated = extract_profile(o);
  CHECK(calibrated.source["pulls_latency_us"].get<double>() == Approx(busy.latency_us));
  CHECK(busy.latency_us > 0);
  CHECK(calibrated.latency_us == 0);
  o.calibrate = false;
  w["metadata"]["cpu_steady"]["cpu_s"] = 0.02;
  std::ofstream(tmp / "traces/worker-0.trace.json") << w.dump();
  // One worker of two: the shard's CPU served both, so no split (and no calibration).
  std::ofstream(tmp / "traces/worker-1.trace.json") << w.dump();
  o.worker = "worker-0";
  o.calibrate = true;
  p = extract_profile(o);
  CHECK(p.host_cpus == 0);
  CHECK(p.message_cost_us == 0);
  CHECK_THAT(p.source.value("calibrated", std::string()),
             Catch::Contains("profile a 1-worker run"));
  fs::remove(tmp / "traces/worker-1.trace.json");
  o.worker.clear();
  o.calibrate = false;
  // Without the shard's samples over the span the host stays unmeasured.
  sv["metadata"]["cpu_samples"] = {{1015000, 1.0}, {1041300, 1.01}};
  std::ofstream(tmp / "traces/server-0.trace.json") << sv.dump();
  p = extract_profile(o);
  CHECK(p.host_cpus == 0);
  CHECK_FALSE(p.to_json().contains("host"));
  CHECK_FALSE(p.source.contains("host_cpu_per_step_ms"));
  fs::remove_all(tmp);
}

TEST_CASE("the host's CPU per worker-step over the span every worker is steady in",
          "[predictor][profile]") {
  // Worker 0 steady over 0-2 s (1.0 s of CPU, 100 steps), worker 1 over 1-3 s (0.6 s, 50
  // steps): both in 1-2 s, with half of each (0.5 + 0.3 s, 50 + 25 steps); the shard's samples
  // say 0.2 s over it. 1.0 s over 75 steps, and over the span's 1 s.
  const std::vector<WorkerSteadyCpu> two{{0, 2e6, 1.0, 100}, {1e6, 3e6, 0.6, 50}};
  const nlohmann::json shard =
      nlohmann::json::parse("[[0, 0.0], [1e6, 0.1], [2e6, 0.3], [3e6, 0.4]]");
  HostCpu h = host_cpu_per_step(two, {shard});
  CHECK(h.per_step_s == Approx(1.0 / 75));
  CHECK(h.busy_cores == Approx(1.0));
  // Samples that do not cover the span, workers never steady together, no steps: not measured.
  CHECK(host_cpu_per_step(two, {nlohmann::json::parse("[[1.5e6, 0.1], [3e6, 0.4]]")}).per_step_s <
        0);
  CHECK(host_cpu_per_step({{0, 1e6, 1.0, 10}, {2e6, 3e6, 1.0, 10}}, {}).per_step_s < 0);
  CHECK(host_cpu_per_step({{0, 1e6, 1.0, 0}}, {}).per_step_s < 0);
  CHECK(host_cpu_per_step({}, {}).per_step_s < 0);

  // From a run folder's traces: the steps are each worker's done steps less the warm-up rule of
  // the run's planned steps (200: 10).
  const fs::path tmp = fs::temp_directory_path() / "psbed-run-host-cpu-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "traces");
  auto write = [&](const std::string& node, const nlohmann::json& meta) {
    std::ofstream(tmp / "traces" / (node + ".trace.json"))
        << nlohmann::json{{"traceEvents", nlohmann::json::array()}, {"metadata", meta}}.dump();
  };
  write("worker-0",
        {{"steps_done", 200}, {"cpu_steady", {{"from_us", 0}, {"to_us", 2e6}, {"cpu_s", 1.0}}}});
  write("worker-1",
        {{"steps_done", 110}, {"cpu_steady", {{"from_us", 1e6}, {"to_us", 3e6}, {"cpu_s", 0.6}}}});
  write("server-0", {{"cpu_samples", shard}});
  // In 1-2 s: 95 of worker 0's 190 steps and 50 of worker 1's 100.
  h = run_host_cpu(tmp.string(), 2, 1, 200);
  CHECK(h.per_step_s == Approx(1.0 / 145));
  CHECK(h.busy_cores == Approx(1.0));
  // worker-0's metadata as the caller read it: taken instead of reading its trace again.
  const nlohmann::json w0 = {{"steps_done", 200},
                             {"cpu_steady", {{"from_us", 0}, {"to_us", 2e6}, {"cpu_s", 3.0}}}};
  CHECK(run_host_cpu(tmp.string(), 2, 1, 200, nullptr, &w0).per_step_s == Approx(2.0 / 145));
  CHECK(run_host_cpu(tmp.string(), 3, 1, 200).per_step_s < 0);  // no worker-2 trace
  CHECK(run_host_cpu(tmp.string(), 2, 2, 200).per_step_s < 0);  // no server-1 trace
  write("server-0", {{"node", "server-0"}});                    // a shard without samples
  CHECK(run_host_cpu(tmp.string(), 2, 1, 200).per_step_s < 0);
  fs::remove_all(tmp);
}

TEST_CASE("profile extraction names what is missing", "[predictor][profile]") {
  ProfileOptions o;
  o.run = kOneWorkerRun + "-nonexistent";
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("does not exist"));
  const fs::path tmp = fs::temp_directory_path() / "psbed-profile-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  o.run = tmp.string();
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("no traces/"));
  fs::create_directories(tmp / "traces");
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("no worker trace"));
  fs::copy_file(kOneWorkerRun + "/traces/worker-0.trace.json", tmp / "traces/worker-0.trace.json");
  fs::copy_file(kOneWorkerRun + "/traces/worker-0.trace.json", tmp / "traces/worker-1.trace.json");
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("--worker NAME"));
  o.worker = "worker-7";
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("no trace of worker 'worker-7'"));
  o.worker = "worker-0";
  CHECK(extract_profile(o).model == "tiny");
  fs::remove_all(tmp);
}

namespace {
bool warns(const Profile& p, const std::string& text) {
  if (!p.source.contains("warnings")) return false;
  for (const auto& w : p.source["warnings"])
    if (w.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE(
    "what the summary says, or cannot: a damaged one refused, a missing one or a failed node said",
    "[predictor][profile]") {
  const fs::path tmp = fs::temp_directory_path() / "psbed-profile-summary-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "traces");
  fs::copy_file(kOneWorkerRun + "/traces/worker-0.trace.json", tmp / "traces/worker-0.trace.json");
  fs::copy_file(kOneWorkerRun + "/traces/server-0.trace.json", tmp / "traces/server-0.trace.json");
  ProfileOptions o;
  o.run = tmp.string();
  o.skip_steps = 1;
  // No summary: profiled from the traces, and said (the host's cores go unmodelled).
  Profile p = extract_profile(o);
  CHECK(warns(p, "no summary.json"));
  // A damaged one is refused, not read as absent.
  std::ofstream(tmp / "summary.json") << "{\"model\": ";
  CHECK_THROWS_WITH(extract_profile(o), Catch::Contains("summary.json is not valid JSON"));
  // Valid JSON of the wrong shape: the field named, with the file.
  std::ofstream(tmp / "summary.json") << R"({"launch": []})";
  CHECK_THROWS_WITH(extract_profile(o),
                    Catch::Contains("summary.json: 'launch' is [], expected an object"));
  std::ofstream(tmp / "summary.json") << R"({"failed_nodes": ["worker-1"]})";
  CHECK_THROWS_WITH(extract_profile(o),
                    Catch::Contains("a node of 'failed_nodes' is \"worker-1\""));
  // The fixture's own summary: no launch record.
  fs::copy_file(kOneWorkerRun + "/summary.json", tmp / "summary.json",
                fs::copy_options::overwrite_existing);
  p = extract_profile(o);
  CHECK(warns(p, "no launch.host_cpus"));
  CHECK_FALSE(warns(p, "no summary.json"));
  CHECK(p.source["workers"] == 1);
  CHECK(p.source.value("calibrated", std::string()).empty());
  // A second worker that died leaves no trace: the summary counts it and names it; the run is
  // then no single-worker run (no calibration, no split of the host's CPU).
  nlohmann::json s = nlohmann::json::parse(std::ifstream(kOneWorkerRun + "/summary.json"));
  s["workers"] = 2;
  s["failed_nodes"] = {
      {{"name", "worker-1"}, {"role", "worker"}, {"reason", "killed by signal 9 (Killed)"}}};
  std::ofstream(tmp / "summary.json") << s.dump();
  p = extract_profile(o);
  CHECK(warns(p, "node(s) failed during the run: worker-1 (killed by signal 9 (Killed))"));
  CHECK(p.source["workers"] == 2);
  CHECK_THAT(p.source.value("calibrated", std::string()), Catch::Contains("one of 2 workers"));
  fs::remove_all(tmp);
}

TEST_CASE("a profile of few steps, or one that cannot reproduce its own run, says so in the file",
          "[predictor][profile]") {
  ProfileOptions o;
  o.run = kOneWorkerRun;
  o.skip_steps = 1;
  const Profile p = extract_profile(o);
  // Three steps profiled.
  CHECK(warns(p, "only 3 step(s) profiled after 1 skipped"));
  // The fixture idles between its steps, which no fit explains (see the calibration test): its
  // simulation runs far faster than it measured, and the profile says by how much.
  const double measured = p.source["measured_steps_per_sec"].get<double>();
  const double simulated = p.source["simulated_steps_per_sec"].get<double>();
  CHECK(simulated > 2 * measured);
  CHECK(warns(p, "this profile's own run gives"));
}

TEST_CASE("link metadata of a trace", "[predictor][profile]") {
  double bw = 0, lat = 0;
  CHECK(parse_link_metadata("1.00 Gbit/s, 200 us one way", &bw, &lat));
  CHECK(bw == Approx(1.25e8));
  CHECK(lat == Approx(200e-6));
  CHECK(parse_link_metadata("100.00 Mbit/s, 0 us one way", &bw, &lat));
  CHECK(bw == Approx(1.25e7));
  CHECK(lat == 0);
  CHECK_FALSE(parse_link_metadata("unshaped", &bw, &lat));
  CHECK_FALSE(parse_link_metadata("fast", &bw, &lat));
}

TEST_CASE("calibration makes the simulated source run keep the measured pace",
          "[predictor][profile]") {
  ProfileOptions o;
  o.run = kOneWorkerRun;
  o.skip_steps = 1;
  const Profile p = extract_profile(o);
  // Steps 1-3 start 10 ms apart and last 1.3 ms: 3 steps in 21.3 ms.
  const double measured = p.source["measured_steps_per_sec"].get<double>();
  CHECK(measured == Approx(3 / 0.0213));
  const double fit = calibrate_message_cost_us(p, measured);
  REQUIRE(fit > 0);
  SimConfig c;
  c.link_model = LinkModel::kBucket;
  c.bandwidth_bytes_per_sec = p.bandwidth_bytes_per_sec;
  c.latency_s = p.latency_us * 1e-6;
  c.message_cost_s = fit * 1e-6;
  c.steps = 120;
  const ModelSpec spec = parse_model_spec(p.source["model_toml"].get<std::string>(), "fixture");
  CHECK(simulate(p, spec, c).steps_per_sec == Approx(measured).epsilon(0.005));
  // This fixture idles ~8.7 ms between 1.3 ms steps: no per-message software cost explains
  // that, so the profile refuses the fit and records it.
  REQUIRE(fit > kMaxPlausibleMessageCostUs);
  CHECK(p.message_cost_us == 0);
  CHECK(p.source["refused_message_cost_us"].get<double>() == Approx(fit));
  // Nor does a host copy cost: the fixture moves a few kilobytes per step, so the per-byte fit is
  // far beyond any copy and refused as well.
  CHECK(p.transit_ns_per_byte == 0);
  CHECK(p.source["refused_transit_ns_per_byte"].get<double>() > kMaxPlausibleTransitNsPerByte);
  o.calibrate = false;
  const Profile uncalibrated = extract_profile(o);
  CHECK(uncalibrated.message_cost_us == 0);
  CHECK(uncalibrated.transit_ns_per_byte == 0);
}

TEST_CASE("the per-byte calibration finds the host copy cost that gives a pace",
          "[predictor][profile]") {
  const Profile p = uncalibrated_fixture();
  const double pace = source_pace(p, [](SimConfig& c) { c.transit_s_per_byte = 40e-9; });
  REQUIRE(pace < source_pace(
                     p, [](SimConfig&) {}));  // the cost slows it down
  CHECK(calibrate_transit_ns_per_byte(p, pace) == Approx(40).epsilon(0.01));
}

TEST_CASE("an unshaped run's latency comes down to the pace it measured, never up",
          "[predictor][profile]") {
  const Profile p = uncalibrated_fixture();  // latency 100 us, from the pulls
  REQUIRE(p.shaped.empty());
  const double pace = source_pace(p, [](SimConfig& c) { c.latency_s = 40e-6; });
  REQUIRE(pace > source_pace(p, [](SimConfig&) {}));
  CHECK(calibrate_link_latency_us(p, pace) == Approx(40).epsilon(0.01));
  // A measured pace the pulls' latency already reaches leaves it (the fit gives it or more).
  CHECK(calibrate_link_latency_us(p, source_pace(p, [](SimConfig&) {}) / 2) >= p.latency_us);
}

TEST_CASE("the latency calibration finds the per-message delay that gives a pace",
          "[predictor][profile]") {
  const Profile p = uncalibrated_fixture();
  const double pace = source_pace(p, [](SimConfig& c) { c.message_latency_s = 300e-6; });
  CHECK(calibrate_message_latency_us(p, pace) == Approx(300).epsilon(0.01));
}

TEST_CASE("the host's run-to-run variation from the steps' time outside compute",
          "[predictor][profile]") {
  // 16 steps in 8 blocks of 2. Blocks alternate 10, 10 | 12, 12: the block means 10, 12, ...
  // (mean 11) vary with variance 8 / 7 and nothing varies within: sqrt(8 / 7) / 11.
  std::vector<double> slow;
  for (int b = 0; b < 8; ++b) slow.insert(slow.end(), 2, b % 2 ? 12.0 : 10.0);
  CHECK(host_cv_of(slow) == Approx(std::sqrt(8.0 / 7) / 11));
  // Steps alternate 10, 12 inside every block: the means are all 11; within a block the variance
  // is 2, which is independent steps' noise: a whole run's mean varies by 2 / 16.
  std::vector<double> fast;
  for (int i = 0; i < 16; ++i) fast.push_back(i % 2 ? 12.0 : 10.0);
  CHECK(host_cv_of(fast) == Approx(std::sqrt(2.0 / 16) / 11));
  // Fewer than 16 steps, or no time outside compute: not measured.
  CHECK(host_cv_of(std::vector<double>(15, 3.0)) == 0);
  CHECK(host_cv_of(std::vector<double>(16, 0.0)) == 0);
}
