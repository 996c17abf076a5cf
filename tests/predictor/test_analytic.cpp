#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/profile.hpp"
#include "core/trace.hpp"
#include "predictor/analytic.hpp"
#include "predictor/commands.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor;
using namespace psbed::predictor::test;

TEST_CASE("analytic bounds after Yan et al.", "[predictor][analytic]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(8);
  const AnalyticBounds a = analytic_bounds(p, spec, c);
  CHECK(a.compute_bound == Approx(8 * 8 / 0.005));      // 5 ms of compute per step
  CHECK(a.worker_link_bound == Approx(8 * 8 / 0.001));  // 4,000 bytes each way at 4 MB/s
  CHECK(a.server_link_bound == Approx(8 / 0.001));      // the one shard moves 8 x 4,000 bytes
  CHECK(a.upper == Approx(8000));
  // No overlap: 5 ms compute + 8 x 1 ms each way + 4 latencies.
  CHECK(a.serial == Approx(8 * 8 / (0.005 + 0.016 + 0.0004)));
  CHECK(a.bottleneck == "server link");
  // The simulation can never beat the upper bound.
  const SimResult r = simulate(p, spec, c);
  CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
  CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
}

TEST_CASE(
    "the analytic latency bound: compute and two round trips; a straggler holds bsp to its pace",
    "[predictor][analytic]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(1);
  c.bandwidth_bytes_per_sec = 0;
  c.latency_s = 2e-3;  // a round trip (4 ms) is most of a 5 ms-compute step
  AnalyticBounds a = analytic_bounds(p, spec, c);
  // 5 ms compute + 2 round trips of 2 x 2 ms: 13 ms a step.
  CHECK(a.latency_bound == Approx(8 / 0.013));
  CHECK(a.bottleneck == "latency");
  CHECK(a.upper == Approx(a.latency_bound));
  CHECK(a.serial <= a.upper);
  SimResult r = simulate(p, spec, c);
  CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
  CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
  // 4 workers, worker-0 sleeping 50 ms after its backward (its last push's round trip inside the
  // sleep): 4 + 5 + 50 ms for it, 13 ms for the others, each at its own pace (under bsp the others
  // follow worker-0 in the long run, but a step ahead of it).
  c = config(4);
  c.bandwidth_bytes_per_sec = 0;
  c.latency_s = 2e-3;
  c.straggler_s = 0.05;
  for (const char* mode : {"bsp", "async"}) {
    c.mode = Consistency::parse(mode);
    a = analytic_bounds(p, spec, c);
    CHECK(a.latency_bound == Approx(3 * 8 / 0.013 + 8 / 0.059));
    CHECK(a.serial <= a.upper);
    r = simulate(p, spec, c);
    CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
    CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
  }
  // No overlap, with the straggler: bsp holds every worker to its sleep, async worker-0 alone.
  c.mode = Consistency::parse("bsp");
  const double bsp_serial = analytic_bounds(p, spec, c).serial;
  c.straggler_s = 0;
  const double no_straggler_serial = analytic_bounds(p, spec, c).serial;
  const double serial_step = 4 * 8 / no_straggler_serial;
  CHECK(bsp_serial == Approx(4 * 8 / (serial_step + 0.05)));
  c.straggler_s = 0.05;
  c.mode = Consistency::parse("async");
  CHECK(analytic_bounds(p, spec, c).serial ==
        Approx(3 * 8 / serial_step + 8 / (serial_step + 0.05)));
}

TEST_CASE(
    "the analytic latency bound: layers before the first with parameters overlap the round trips",
    "[predictor][analytic]") {
  // A relu before fc1: its forward waits for no pull, its backward comes after fc1's gradient is
  // pushed. 5 + 5 ms for it, 0.1 + 0.1 ms for fc1, 2 ms latency: a step is max(5, 4) + 0.2 +
  // max(5, 4) = 10.2 ms, not 10.2 + two round trips.
  const ModelSpec spec = parse_model_spec(R"(name = "relu-first"
input = [1, 1, 249]
classes = 4

[[layer]]
type = "relu"

[[layer]]
type = "fc"
name = "fc1"
in = 249
out = 4
)",
                                          "relu-first");
  Profile p;
  p.model = spec.name;
  p.batch = 8;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  p.layers.push_back({spec.layers[0].name, {5.0}, {5.0}});
  p.layers.push_back({"fc1", {0.1}, {0.1}});
  for (const int workers : {1, 4}) {
    SimConfig c = config(workers, "async");
    c.bandwidth_bytes_per_sec = 0;
    c.latency_s = 2e-3;
    const AnalyticBounds a = analytic_bounds(p, spec, c);
    CHECK(a.latency_bound == Approx(workers * 8 / 0.0102));
    CHECK(a.serial <= a.upper);
    const SimResult r = simulate(p, spec, c);
    CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
    CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
  }
}

TEST_CASE("the analytic host bound: the host's cores doing every step's messages and bytes",
          "[predictor][analytic]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  Profile p = fixed_profile(spec);
  SimConfig c = config(8);
  c.bandwidth_bytes_per_sec = 0;
  CHECK(analytic_bounds(p, spec, c).host_bound == Approx(std::numeric_limits<double>::infinity()));
  p.host_cpus = 2;
  p.cpu_per_message_us = 400;
  p.cpu_per_byte_ns = 5;
  take_host_costs(p, c);  // as predict does: the profile's host unless --host-cpus says otherwise
  // wfbp: 2 parts -> 8 messages (3.2 ms) and 8,000 bytes (40 us) a worker-step; 2 cores. Below
  // the compute bound of 8 x 8 / 5 ms.
  AnalyticBounds a = analytic_bounds(p, spec, c);
  CHECK(a.host_bound == Approx(2 * 8 / 0.00324));
  CHECK(a.bottleneck == "host cpu");
  CHECK(a.upper == Approx(a.host_bound));
  // No overlap: 5 ms compute, 4 latencies, and the 8 workers' message work (3.24 ms each) on the
  // 2 cores: never above the upper bound.
  CHECK(a.serial == Approx(8 * 8 / (0.005 + 0.0004 + 8 * 0.00324 / 2)));
  CHECK(a.serial <= a.upper);
  // Real compute shares the cores too: 8 workers' 5 ms on 2 cores, not 5 ms.
  c.compute_on_cores = true;
  a = analytic_bounds(p, spec, c);
  CHECK(a.serial == Approx(8 * 8 / (8 * 0.005 / 2 + 0.0004 + 8 * 0.00324 / 2)));
  CHECK(a.serial <= a.upper);
  c.compute_on_cores = false;
  // p3 with 100-float slices: the weight's 996 floats go as 10 slices, the bias as 1: 44 messages.
  c.policy.name = "p3";
  c.policy.slice_params = 100;
  a = analytic_bounds(p, spec, c);
  CHECK(a.host_bound == Approx(2 * 8 / (44 * 400e-6 + 8000 * 5e-9)));
}

TEST_CASE("the analytic thread bound: the shard's receiving thread takes every worker's pushes",
          "[predictor][analytic]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(8);
  c.bandwidth_bytes_per_sec = 0;
  c.message_cost_s = 200e-6;  // a push holds the shard's thread 2 x 200 us (receive_cost)
  // wfbp: 2 parts a worker-step, 0.8 ms of the one shard's thread: 8 / 0.8 ms = 10,000 images/s,
  // under the compute bound of 8 x 8 / 5 ms = 12,800.
  const AnalyticBounds a = analytic_bounds(p, spec, c);
  CHECK(a.thread_bound == Approx(8 / 0.0008));
  CHECK(a.bottleneck == "server thread");
  CHECK(a.upper == Approx(a.thread_bound));
  CHECK(a.serial <= a.upper);
  const SimResult r = simulate(p, spec, c);
  CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
  CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
}
