// The simulator's factor model (predictor/sim/factors.hpp) and its event flow, on cases
// computed by hand.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "core/comm.hpp"
#include "core/model_spec.hpp"
#include "core/trace.hpp"
#include "predictor/analytic.hpp"
#include "predictor/sim/factors.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor::sim;

TEST_CASE("factors: the simulator routes the layers as core/comm does", "[predictor][factors]") {
  const ModelSpec mlp = load_model("mlp");
  const CommPlan plan = choose_comm(mlp, CommMode::kHybrid, 4, 2, 32, {});
  const FactorModel h = factor_model(mlp, CommMode::kHybrid, 4, 2, 32, {});
  CHECK(h.sfb == plan.sfb);
  REQUIRE(h.layers.size() == 2);  // fc1 and fc2; fc3 stays on the shards
  CHECK(h.layers[0].bytes_per_peer == 4.0 * 32 * (784 + 512));
  CHECK(h.layers[0].rebuild_flops == 2.0 * 4 * 32 * 784 * 512);
  CHECK_FALSE(factor_model(mlp, CommMode::kPs, 4, 2, 32, {}).any());
}

TEST_CASE("factors: 2 workers, one fc layer: compute plus the factor transfer",
          "[predictor][factors]") {
  const ModelSpec mlp = load_model("mlp");
  FactorModel m = factor_model(mlp, CommMode::kSfb, 2, 1, 10, {});
  m.layers.resize(1);  // fc1 alone: 10 x (784 + 512) floats to the one peer
  CHECK(m.link_bytes() == 4.0 * 10 * 1296);
  // 51,840 bytes at 1 MB/s: 51.84 ms; 2 x 2 x 10 x 784 x 512 flops at 1 GFLOP/s: 16.06 ms.
  CHECK(factor_step_floor(m, 0.1, 1e6, 1e9) == Approx(0.1 + 0.05184 + 0.01605632));
}

// The event flow with SFB layers (predictor/sim/factor_flow.cpp), on the tiny model of the
// simulator's tests: fc1 is 249 x 4 at batch 8, forward 2 ms, backward 3 ms; a link of 4,000
// bytes per ms and 100 us one way; max-min fair sharing.
namespace {

// 8 x (249 + 4) floats: 8,096 bytes to each peer, 2.024 ms on the link.
constexpr double kFactorS = 8.0 * (249 + 4) * 4 / 4e6;

psbed::predictor::SimConfig sfb_config(int workers, const std::string& mode = "bsp") {
  psbed::predictor::SimConfig c = psbed::predictor::test::config(workers, mode);
  c.comm = CommMode::kSfb;
  return c;
}

}  // namespace

TEST_CASE("sfb, 2 workers, one fc layer: step = transfer + latency + rebuild + compute",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  // No shard traffic at all. Step s's fc1 forward waits for the peer's factors of step s - 1,
  // sent after its backward: 2.024 ms + 0.1 ms; then the rebuild, two products at fc1's
  // forward time (2 ms each, the same 2KMN flops); then forward 2 ms and backward 3 ms.
  const double step = kFactorS + 0.0001 + 2 * 0.002 + 0.005;
  const SimResult r = simulate(p, spec, sfb_config(2));
  REQUIRE(r.worker_steps_per_sec.size() == 2);
  CHECK(r.worker_steps_per_sec[0] == Approx(1 / step).epsilon(1e-9));
  CHECK(r.worker_steps_per_sec[1] == Approx(1 / step).epsilon(1e-9));
  // The factor model's floor (predictor/sim/factors.hpp) is the same step less the latency.
  const FactorModel m = factor_model(spec, CommMode::kSfb, 2, 1, 8, {});
  const double rate = 2.0 * 8 * 249 * 4 / 0.002;  // fc1's forward: flops per second
  CHECK(step - 0.0001 == Approx(factor_step_floor(m, 0.005, 4e6, rate)).epsilon(1e-12));
}

TEST_CASE("sfb, 3 workers: a worker's factors to its two peers share its uplink",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  // Two sends at once from each uplink, two arrivals into each downlink: half the rate each, so
  // both take twice as long; the rebuild is three products.
  const double step = 2 * kFactorS + 0.0001 + 3 * 0.002 + 0.005;
  const SimResult r = simulate(p, spec, sfb_config(3));
  for (double sps : r.worker_steps_per_sec) CHECK(sps == Approx(1 / step).epsilon(1e-9));
}

TEST_CASE("sfb: the optimizer step of the rebuild costs the profile's apply per byte",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  // 0.5 ns per byte of fc1's 4,000 bytes: 2 us per rebuild, once per step in bsp.
  const Profile p = test::fixed_profile(spec, 0.5);
  const double step = kFactorS + 0.0001 + 2 * 0.002 + 2e-6 + 0.005;
  const SimResult r = simulate(p, spec, sfb_config(2));
  CHECK(r.worker_steps_per_sec[0] == Approx(1 / step).epsilon(1e-9));
}

TEST_CASE("sfb, ssp:1: step s does not wait for step s - 1's factors", "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  SimConfig c = sfb_config(2, "ssp:1");
  c.steps = 41;  // warm-up 2: the steady window holds whole pairs of steps
  const SimResult ssp = simulate(p, spec, c);
  // Each worker's factors are rebuilt alone as they are found (apply_each): over a step two
  // products (4 ms) besides the compute. The step ends once its own factors have left the
  // link, as a ps step ends on its pushes' acks; the peer's arrive a latency later, and the
  // next forward does not wait for them.
  CHECK(1 / ssp.worker_steps_per_sec[0] == Approx(2 * 0.002 + 0.005 + kFactorS).epsilon(1e-9));
  const SimResult bsp = simulate(p, spec, sfb_config(2));
  CHECK(ssp.worker_steps_per_sec[0] > bsp.worker_steps_per_sec[0]);
}

TEST_CASE("sfb: a straggler holds its peers to its pace in bsp", "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  SimConfig c = sfb_config(2);
  c.straggler_s = 0.02;  // worker-0 sleeps 20 ms after every backward, before the factors
  const SimResult r = simulate(p, spec, c);
  // Worker 1 waits for worker 0's factors each step: both at worker 0's pace.
  CHECK(r.worker_steps_per_sec[1] == Approx(r.worker_steps_per_sec[0]).epsilon(1e-9));
  CHECK(1 / r.worker_steps_per_sec[1] > 0.02);
}

TEST_CASE("sfb: the policy decides when the factors leave, and the step waits for them",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  // Worker 0 sleeps 20 ms after backward, before telling its policy backward ended. wfbp sends
  // its factors at once, so they cross the link during the sleep; bulk holds them until
  // backward ends, so worker 0's step (and its peer's, held to its pace) grows by their
  // transfer.
  SimConfig wfbp = sfb_config(2), bulk = sfb_config(2);
  wfbp.straggler_s = bulk.straggler_s = 0.02;
  bulk.policy.name = "bulk";
  const SimResult a = simulate(p, spec, wfbp), b = simulate(p, spec, bulk);
  // wfbp: rebuild (two products, 4 ms), forward 2, backward 3, the sleep.
  CHECK(1 / a.worker_steps_per_sec[0] == Approx(0.004 + 0.005 + 0.02).epsilon(1e-9));
  CHECK(1 / b.worker_steps_per_sec[0] == Approx(0.004 + 0.005 + 0.02 + kFactorS).epsilon(1e-9));
}

TEST_CASE("comm: ps, and hybrid where every layer stays on the shards, simulate alike",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  // 4 workers, 1 shard, 4 MB/s: fc1's factors, 8,096 bytes to each of 3 peers in 6 messages
  // (6.07 + 0.3 ms), cost more than its 4,000 bytes x 4 workers through the one shard in 32
  // messages (4 + 1.6 ms), so hybrid keeps it there. (By bytes alone it would with 2 workers.)
  SimConfig ps = test::config(4), hybrid = test::config(4);
  hybrid.comm = CommMode::kHybrid;
  REQUIRE_FALSE(choose_comm(spec, CommMode::kHybrid, 4, 1, 8, hybrid.comm_cost()).any_sfb());
  REQUIRE_FALSE(choose_comm(spec, CommMode::kHybrid, 2, 1, 8, {}).any_sfb());
  ps.arrival_jitter_s = hybrid.arrival_jitter_s = 1e-6;  // seeded draws: the same sequence
  const SimResult a = simulate(p, spec, ps), b = simulate(p, spec, hybrid);
  CHECK(a.steps_per_sec == b.steps_per_sec);
  CHECK(a.events == b.events);
}

TEST_CASE("comm: async refuses SFB layers with the live worker's words", "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  const SimConfig c = sfb_config(2, "async");
  CHECK_THROWS_WITH(simulate(p, spec, c), comm_problem(CommMode::kSfb, c.mode));
  SimConfig ps = test::config(2, "async");
  CHECK_NOTHROW(simulate(p, spec, ps));
}

TEST_CASE("sfb: the synthetic traces show the factors and the rebuild", "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  SimConfig c = sfb_config(2);
  c.steps = 4;
  c.trace_dir =
      (std::filesystem::temp_directory_path() / ("psbed-sfb-traces-" + std::to_string(::getpid())))
          .string();
  simulate(p, spec, c);
  const LoadedTrace w = read_trace(c.trace_dir + "/worker-1.trace.json");
  int factors = 0, rebuilds = 0, transfers = 0;
  for (const auto& e : w.events) {
    factors += e.name == "factors:fc1" && e.lane == "sfb";
    rebuilds += e.name == "rebuild:fc1" && e.lane == "compute";
    transfers += e.lane == "push" || e.lane == "pull";
    if (e.name == "rebuild:fc1") CHECK(e.dur_us == Approx(4000));  // two products of 2 ms
  }
  std::filesystem::remove_all(c.trace_dir);
  CHECK(factors == 4);    // one send per step
  CHECK(rebuilds == 3);   // steps 1 to 3 rebuild the step before
  CHECK(transfers == 0);  // fc1 never goes through the shard
}

TEST_CASE("analytic bounds with SFB layers: factors on the worker links, rebuild in the compute",
          "[predictor][factors]") {
  using namespace psbed::predictor;
  const ModelSpec spec = parse_model_spec(test::kTiny, "tiny");
  const Profile p = test::fixed_profile(spec);
  const SimConfig c = sfb_config(2);
  const AnalyticBounds a = analytic_bounds(p, spec, c);
  // Two workers of batch 8. Compute 5 ms + the rebuild's two products at 2 ms; one peer's
  // factors each way.
  CHECK(a.compute_bound == Approx(2 * 8 / 0.009).epsilon(1e-12));
  CHECK(a.worker_link_bound == Approx(2 * 8 / kFactorS).epsilon(1e-12));
  CHECK(std::isinf(a.server_link_bound));  // nothing left on the shard
  CHECK(a.bottleneck == "compute");
  const SimResult r = simulate(p, spec, c);
  CHECK(r.images_per_sec >= a.serial * (1 - 1e-9));
  CHECK(r.images_per_sec <= a.upper * (1 + 1e-9));
}
