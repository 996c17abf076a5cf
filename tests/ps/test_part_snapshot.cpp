// A part's whole state, as a primary sends it to a shard that rejoins: installed into another
// store, the part behaves the same from then on (same parameters, momentum and clocks, and a
// clock half-gathered before the copy completes the same way); damaged bytes are refused.
#include <catch2/catch.hpp>

#include "ps/part_snapshot.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

TEST_CASE("a bsp part's state installed elsewhere goes on the same way", "[ps][rejoin]") {
  const ClusterMap m = tiny_fc_map("bsp", 2, 0.9f);
  Store primary(m, 0), copy(m, 0);
  std::vector<float> g(8, 1.0f), h(8, -0.25f);
  for (std::uint64_t c = 0; c < 3; ++c) {  // momentum and three clocks applied
    REQUIRE(primary.push(0, c, 0, 0, 0, g.data(), 32).ok());
    REQUIRE(primary.push(1, c, 0, 0, 0, h.data(), 32).ok());
  }
  REQUIRE(primary.push(0, 3, 0, 0, 0, g.data(), 32).ok());  // clock 3 half-gathered
  const Payload bytes = encode_part(primary.state(0, 0), {{1, 42}});
  std::map<int, std::uint64_t> seqs;
  REQUIRE(install_part(copy, 0, 0, bytes, seqs).ok());
  CHECK(seqs == std::map<int, std::uint64_t>{{1, 42}});
  CHECK(copy.applied_clocks(0, 0) == 3);
  CHECK(!copy.pull_ready(0, 0, 4));
  REQUIRE(primary.push(1, 3, 0, 0, 0, h.data(), 32).ok());
  REQUIRE(copy.push(1, 3, 0, 0, 0, h.data(), 32).ok());
  CHECK(copy.applied_clocks(0, 0) == 4);
  CHECK(*copy.snapshot(0, 0) == *primary.snapshot(0, 0));
  // One more clock: the momentum came along too.
  for (Store* s : {&primary, &copy}) {
    REQUIRE(s->push(0, 4, 0, 0, 0, g.data(), 32).ok());
    REQUIRE(s->push(1, 4, 0, 0, 0, g.data(), 32).ok());
  }
  CHECK(*copy.snapshot(0, 0) == *primary.snapshot(0, 0));
}

TEST_CASE("a copy given a clock half-gathered applies it whole when told", "[ps][rejoin]") {
  const ClusterMap m = tiny_fc_map("bsp", 2, 0.9f);
  Store primary(m, 0), copy(m, 0);
  std::vector<float> g(8, 1.0f), h(8, 0.5f);
  REQUIRE(primary.push(0, 0, 0, 0, 0, g.data(), 32).ok());
  std::map<int, std::uint64_t> seqs;
  REQUIRE(install_part(copy, 0, 0, encode_part(primary.state(0, 0), {}), seqs).ok());
  // The rest of clock 0 as the primary takes and forwards it, then its word that it applied it.
  REQUIRE(primary.push(1, 0, 0, 0, 0, h.data(), 32).ok());
  REQUIRE(copy.push(1, 0, 0, 0, 0, h.data(), 32, true).ok());
  CHECK(copy.applied_clocks(0, 0) == 0);
  REQUIRE(copy.apply_pending(0, 0, 0, 2).ok());
  CHECK(copy.applied_clocks(0, 0) == 1);
  CHECK(*copy.snapshot(0, 0) == *primary.snapshot(0, 0));
  // Clock 1 completes on its own: nothing of clock 0 is left to hold it back.
  REQUIRE(copy.push(0, 1, 0, 0, 0, g.data(), 32).ok());
  REQUIRE(copy.push(1, 1, 0, 0, 0, g.data(), 32).ok());
  CHECK(copy.applied_clocks(0, 0) == 2);
}

TEST_CASE("an async part's clocks come along; damaged state is refused", "[ps][rejoin]") {
  const ClusterMap m = tiny_fc_map("ssp:1", 2, 0.9f);
  Store primary(m, 0), copy(m, 0);
  std::vector<float> g(8, 1.0f);
  REQUIRE(primary.push(0, 0, 0, 0, 0, g.data(), 32).ok());
  REQUIRE(primary.push(0, 1, 0, 0, 0, g.data(), 16).ok());  // half of clock 1
  const Payload bytes = encode_part(primary.state(0, 0), {});
  std::map<int, std::uint64_t> seqs;
  REQUIRE(install_part(copy, 0, 0, bytes, seqs).ok());
  CHECK(copy.state(0, 0).completed == primary.state(0, 0).completed);
  CHECK(copy.state(0, 0).partial == primary.state(0, 0).partial);
  CHECK(*copy.snapshot(0, 0) == *primary.snapshot(0, 0));
  const Status cut = install_part(copy, 0, 0, bytes.slice(0, bytes.size() - 4), seqs);
  CHECK(!cut.ok());
  CHECK_THAT(cut.message(), Catch::Contains("do not hold what its counts say"));
  const ClusterMap three = tiny_fc_map("ssp:1", 3, 0.9f);
  Store other(three, 0);
  CHECK_THAT(install_part(other, 0, 0, bytes, seqs).message(),
             Catch::Contains("for 2 workers, expected 8 for 3"));
}
