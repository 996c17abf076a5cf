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
  const CommPlan h = choose_comm(mlp, CommMode::kHybrid, 4, 2, 32, {});
  REQUIRE(h.layers.size() == 3);
  CHECK(h.layers[0].sfb);
  CHECK(h.layers[1].sfb);
  CHECK_FALSE(h.layers[2].sfb);
  CHECK(h.layers[0].sfb_bytes == 4.0 * 32 * (784 + 512) * 3);
  CHECK(h.layers[0].ps_bytes == 4.0 * (784 * 512 + 512) * 2);
  // More workers: factors grow with each peer, the shards' share with workers / shards.
  const CommPlan many = choose_comm(mlp, CommMode::kHybrid, 64, 2, 256, {});
  CHECK_FALSE(many.any_sfb());
  CHECK(choose_comm(mlp, CommMode::kSfb, 64, 2, 256, {}).sfb ==
        std::vector<bool>{true, false, true, false, true});
  CHECK_FALSE(choose_comm(mlp, CommMode::kPs, 2, 1, 1, {}).any_sfb());
  CHECK(h.describe(mlp).rfind("fc1 sfb", 0) == 0);
  CHECK_THROWS_WITH(parse_comm("allreduce"),
                    "unknown communication 'allreduce', expected ps, "
                    "sfb or hybrid");
  CHECK(comm_problem(CommMode::kHybrid, Consistency::parse("async")).find("needs --mode bsp") !=
        std::string::npos);
  CHECK(comm_problem(CommMode::kSfb, Consistency::parse("ssp:2")).empty());
}

TEST_CASE("hybrid weighs messages against bytes where the link rate is known", "[core][comm]") {
  const ModelSpec mlp = load_model("mlp");
  // fc3, 256 x 10, batch 32, 2 shards, 1 Gbit/s (125 MB/s), 50 us a message.
  const CommCost gbit{125e6, 50e-6};
  // 2 workers. PS: 4 x 2570 floats = 10,280 bytes and 4 messages per tensor (weights, bias) at
  // a shard serving 1 worker's share: 82.24 + 8 x 50 = 482.24 us. SFB: 4 x 32 x 266 = 34,048
  // bytes to the one peer and 2 messages: 272.384 + 100 = 372.384 us. Factors win.
  const CommPlan two = choose_comm(mlp, CommMode::kHybrid, 2, 2, 32, gbit);
  REQUIRE(two.layers.size() == 3);
  const LayerComm& fc3 = two.layers[2];
  CHECK(fc3.ps_messages == 8);
  CHECK(fc3.sfb_messages == 2);
  CHECK(fc3.ps_s == Approx(482.24e-6));
  CHECK(fc3.sfb_s == Approx(372.384e-6));
  CHECK(fc3.sfb);
  // By bytes alone (no rate) the classifier stays on the shards, as Poseidon chooses.
  CHECK_FALSE(choose_comm(mlp, CommMode::kHybrid, 2, 2, 32, {}).layers[2].sfb);
  // 4 workers: PS 164.48 + 16 x 50 = 964.48 us; SFB 817.152 + 6 x 50 = 1,117.152 us: the shards.
  const LayerComm four = choose_comm(mlp, CommMode::kHybrid, 4, 2, 32, gbit).layers[2];
  CHECK(four.ps_s == Approx(964.48e-6));
  CHECK(four.sfb_s == Approx(1117.152e-6));
  CHECK_FALSE(four.sfb);
  // At 100 Mbit/s the bytes dominate: 2 workers keep fc3 on the shards (822.4 + 400 us against
  // 2,723.84 + 100 us), and the wide layers still go as factors.
  const CommPlan slow = choose_comm(mlp, CommMode::kHybrid, 2, 2, 32, {12.5e6, 50e-6});
  CHECK(slow.layers[0].sfb);
  CHECK(slow.layers[1].sfb);
  CHECK_FALSE(slow.layers[2].sfb);
  CHECK(two.describe(mlp).find("fc3 sfb (factors 3.31x the ps bytes, 0.77x the time with "
                               "messages)") != std::string::npos);
}
