// Heterogeneous workers in the simulator and the analytic bounds (SimConfig::stragglers), with
// hand-computed answers on the tiny model of sim_test_util.hpp (compute 5 ms a step, 4,000
// bytes each way).
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/straggler.hpp"
#include "predictor/analytic.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor;
using namespace psbed::predictor::test;
using Catch::Contains;

namespace {
Straggler slow(int worker, double factor, double bytes_per_sec = 0) {
  Straggler s;
  s.worker = worker, s.compute_factor = factor, s.bandwidth_bytes_per_sec = bytes_per_sec;
  return s;
}
}  // namespace

TEST_CASE("a worker with compute=2x sets bsp's pace and only its own under async",
          "[predictor][simulator][straggler]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2);
  c.bandwidth_bytes_per_sec = 0, c.latency_s = 0;  // no link limit: compute alone
  c.stragglers = {slow(1, 2)};
  c.steps = 30;
  // Worker-1 computes 2 x 5 ms: under bsp both run at its 10 ms a step.
  const SimResult bsp = simulate(p, spec, c);
  CHECK(bsp.worker_steps_per_sec[0] == Approx(100).epsilon(1e-6));
  CHECK(bsp.worker_steps_per_sec[1] == Approx(100).epsilon(1e-9));
  AnalyticBounds a = analytic_bounds(p, spec, c);
  CHECK(a.compute_bound == Approx(2 * 8 / 0.010));
  CHECK(bsp.images_per_sec <= a.upper * (1 + 1e-9));
  CHECK(bsp.images_per_sec >= a.serial * (1 - 1e-9));
  // Async: worker-0 at its own 5 ms, worker-1 at 10 ms.
  c.mode = Consistency::parse("async");
  const SimResult async = simulate(p, spec, c);
  CHECK(async.worker_steps_per_sec[0] == Approx(200).epsilon(1e-9));
  CHECK(async.worker_steps_per_sec[1] == Approx(100).epsilon(1e-9));
  a = analytic_bounds(p, spec, c);
  CHECK(a.compute_bound == Approx(8 / 0.005 + 8 / 0.010));
  CHECK(async.images_per_sec <= a.upper * (1 + 1e-9));
  CHECK(async.images_per_sec >= a.serial * (1 - 1e-9));
  // The factor of 1 changes nothing.
  c.stragglers = {slow(1, 1)};
  CHECK(simulate(p, spec, c).worker_steps_per_sec[1] == Approx(200).epsilon(1e-9));
}

TEST_CASE("a worker's own link rate: fair links move its bytes at its bandwidth",
          "[predictor][simulator][straggler]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2, "async");
  c.bandwidth_bytes_per_sec = 0, c.latency_s = 0;  // the cluster unlimited
  c.stragglers = {slow(1, 1, 4000)};               // worker-1: 4,000 bytes/s each way
  c.steps = 20;
  // Worker-1: the reply 1 s, compute 5 ms, the push 1 s; worker-0 computes alone, 5 ms a step.
  const SimResult r = simulate(p, spec, c);
  CHECK(r.worker_steps_per_sec[0] == Approx(200).epsilon(1e-9));
  CHECK(r.worker_steps_per_sec[1] == Approx(1 / 2.005).epsilon(1e-9));
  // A shaped cluster, worker-1 at half its rate: its 4,000 bytes take 2 ms each way instead of
  // 1 ms, on a step that is otherwise kOneWorkerStep (the workers' transfers overlap on the
  // shard's links under async, so one worker alone).
  c = config(1);
  c.stragglers = {slow(0, 1, 2e6)};
  CHECK(simulate(p, spec, c).worker_steps_per_sec[0] ==
        Approx(1 / (kOneWorkerStep + 0.002)).epsilon(1e-9));
  const AnalyticBounds a = analytic_bounds(p, spec, c);
  CHECK(a.worker_link_bound == Approx(8 * 2e6 / 4000));
  // Two workers, one at 2 MB/s: under async each worker's link bounds only its own pace.
  c = config(2, "async");
  c.stragglers = {slow(1, 1, 2e6)};
  CHECK(analytic_bounds(p, spec, c).worker_link_bound == Approx(8 * 4e6 / 4000 + 8 * 2e6 / 4000));
  c.mode = Consistency::parse("bsp");
  CHECK(analytic_bounds(p, spec, c).worker_link_bound == Approx(2 * 8 * 2e6 / 4000));
}

TEST_CASE("bucket links pace a straggler's bytes at its own rate",
          "[predictor][simulator][straggler]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2, "async");
  c.link_model = LinkModel::kBucket;
  c.bandwidth_bytes_per_sec = 0, c.latency_s = 0;
  c.stragglers = {slow(1, 1, 4000)};  // 4,000 bytes a step each way: at most 1 step/s
  c.steps = 200;
  const SimResult r = simulate(p, spec, c);
  // Worker-0's link is unshaped: its 5 ms of compute alone.
  CHECK(r.worker_steps_per_sec[0] == Approx(200).epsilon(1e-9));
  // Worker-1: past the burst allowance (64 KiB, 16 steps' worth) 4,000 bytes a second each way;
  // the steady window (from step 10) includes a few burst steps, so a little above 1 step/s.
  CHECK(r.worker_steps_per_sec[1] <= 1.2);
  CHECK(r.worker_steps_per_sec[1] >= 0.9);
}

TEST_CASE("a straggler the cluster does not have is refused, naming it",
          "[predictor][simulator][straggler]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2);
  c.stragglers = {slow(2, 2)};
  REQUIRE_THROWS_WITH(simulate(p, spec, c),
                      Contains("worker-2") && Contains("the cluster has 2 worker(s)"));
}
