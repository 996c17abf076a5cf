// The simulator's factor model (predictor/sim/factors.hpp) on cases computed by hand.
#include <catch2/catch.hpp>

#include "core/comm.hpp"
#include "core/model_spec.hpp"
#include "predictor/sim/factors.hpp"

using namespace psbed;
using namespace psbed::predictor::sim;

TEST_CASE("factors: the simulator routes the layers as core/comm does", "[predictor][factors]") {
  const ModelSpec mlp = load_model("mlp");
  const CommPlan plan = choose_comm(mlp, CommMode::kHybrid, 4, 2, 32);
  const FactorModel h = factor_model(mlp, CommMode::kHybrid, 4, 2, 32);
  CHECK(h.sfb == plan.sfb);
  REQUIRE(h.layers.size() == 2);  // fc1 and fc2; fc3 stays on the shards
  CHECK(h.layers[0].bytes_per_peer == 4.0 * 32 * (784 + 512));
  CHECK(h.layers[0].rebuild_flops == 2.0 * 4 * 32 * 784 * 512);
  CHECK_FALSE(factor_model(mlp, CommMode::kPs, 4, 2, 32).any());
}

TEST_CASE("factors: 2 workers, one fc layer: compute plus the factor transfer",
          "[predictor][factors]") {
  const ModelSpec mlp = load_model("mlp");
  FactorModel m = factor_model(mlp, CommMode::kSfb, 2, 1, 10);
  m.layers.resize(1);  // fc1 alone: 10 x (784 + 512) floats to the one peer
  CHECK(m.link_bytes() == 4.0 * 10 * 1296);
  // 51,840 bytes at 1 MB/s: 51.84 ms; 2 x 2 x 10 x 784 x 512 flops at 1 GFLOP/s: 16.06 ms.
  CHECK(factor_step_floor(m, 0.1, 1e6, 1e9) == Approx(0.1 + 0.05184 + 0.01605632));
}
