// Poseidon's per-layer choice (core/comm.hpp): the bytes each route puts on the busiest link.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/model_spec.hpp"

using namespace psbed;

TEST_CASE("hybrid sends a layer as factors only where they cost fewer bytes", "[core][comm]") {
  const ModelSpec mlp = load_model("mlp");
  // 4 workers, 2 shards, batch 32: fc1 784x512 and fc2 512x256 are cheaper as factors, the
  // 256x10 classifier is not.
  const CommPlan h = choose_comm(mlp, CommMode::kHybrid, 4, 2, 32);
  REQUIRE(h.layers.size() == 3);
  CHECK(h.layers[0].sfb);
  CHECK(h.layers[1].sfb);
  CHECK_FALSE(h.layers[2].sfb);
  CHECK(h.layers[0].sfb_bytes == 4.0 * 32 * (784 + 512) * 3);
  CHECK(h.layers[0].ps_bytes == 4.0 * (784 * 512 + 512) * 2);
  // More workers: factors grow with each peer, the shards' share with workers / shards.
  const CommPlan many = choose_comm(mlp, CommMode::kHybrid, 64, 2, 256);
  CHECK_FALSE(many.any_sfb());
  CHECK(choose_comm(mlp, CommMode::kSfb, 64, 2, 256).sfb ==
        std::vector<bool>{true, false, true, false, true});
  CHECK_FALSE(choose_comm(mlp, CommMode::kPs, 2, 1, 1).any_sfb());
  CHECK(h.describe(mlp).rfind("fc1 sfb", 0) == 0);
  CHECK_THROWS_WITH(parse_comm("allreduce"),
                    "unknown communication 'allreduce', expected ps, "
                    "sfb or hybrid");
  CHECK(comm_problem(CommMode::kHybrid, Consistency::parse("async")).find("needs --mode bsp") !=
        std::string::npos);
  CHECK(comm_problem(CommMode::kSfb, Consistency::parse("ssp:2")).empty());
}
