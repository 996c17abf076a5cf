// The shard's store: each consistency model's rule for applying pushes and answering pulls,
// and copy-on-write versions that a reply in flight keeps intact.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/param_init.hpp"
#include "ps/store.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

std::vector<float> initial(const ClusterMap& m) {
  std::vector<float> w(8);
  init_tensor(m.spec, 0, m.exp.seed, w.data());
  return w;
}

}  // namespace

TEST_CASE("consistency modes parse and print", "[ps][store]") {
  CHECK(Consistency::parse("async").str() == "async");
  CHECK(Consistency::parse("bsp").str() == "bsp");
  CHECK(Consistency::parse("ssp:3").staleness == 3);
  CHECK_THROWS_WITH(Consistency::parse("ssp:x"), Catch::Contains("expected async, bsp or ssp:K"));
  CHECK_THROWS_AS(Consistency::parse("sync"), Error);
}

TEST_CASE("async applies each push on arrival and answers pulls at once", "[ps][store]") {
  ClusterMap m = tiny_fc_map("async", 2);
  Store s(m, 0);
  const auto w0 = initial(m);
  std::vector<float> g(8, 1.0f);
  CHECK(s.pull_ready(0, 0, 5));
  s.push(1, 0, 0, 0, 0, g.data(), 32);
  auto v = s.snapshot(0, 0);
  for (int i = 0; i < 8; ++i) CHECK((*v)[i] == Approx(w0[i] - 0.5f));
}

TEST_CASE("bsp averages one gradient per worker per clock before pulls of the next clock",
          "[ps][store]") {
  ClusterMap m = tiny_fc_map("bsp", 2);
  Store s(m, 0);
  const auto w0 = initial(m);
  std::vector<float> g1(8, 1.0f), g2(8, 3.0f);
  CHECK(s.pull_ready(0, 0, 0));
  CHECK_FALSE(s.pull_ready(0, 0, 1));
  s.push(0, 0, 0, 0, 0, g1.data(), 32);
  CHECK_FALSE(s.pull_ready(0, 0, 1));  // worker 1 has not pushed clock 0
  CHECK((*s.snapshot(0, 0))[0] == Approx(w0[0]));
  s.push(1, 0, 0, 0, 0, g2.data(), 32);
  CHECK(s.pull_ready(0, 0, 1));
  CHECK((*s.snapshot(0, 0))[0] == Approx(w0[0] - 0.5f * 2.0f));  // mean of 1 and 3
  // A push for a clock already applied, or more bytes than the part, is refused with a reason.
  CHECK_THAT(s.push(0, 0, 0, 0, 0, g1.data(), 32).message(), Catch::Contains("already applied"));
  CHECK(s.push(0, 1, 0, 0, 0, g1.data(), 32).ok());
  CHECK_THAT(s.push(0, 1, 0, 0, 0, g1.data(), 32).message(), Catch::Contains("more than the part"));
  CHECK_THAT(s.push(0, 1000, 0, 0, 0, g1.data(), 32).message(), Catch::Contains("too far ahead"));
  // A dead worker no longer holds the clock back, and its pushes are refused.
  CHECK_FALSE(s.pull_ready(0, 0, 2));
  s.worker_dead(1);
  s.drain(0, 0);
  CHECK(s.pull_ready(0, 0, 2));
  CHECK_THAT(s.push(1, 2, 0, 0, 0, g2.data(), 32).message(), Catch::Contains("declared dead"));
}

TEST_CASE("bsp sums are exact: the order pushes arrive in changes no bit", "[ps][store]") {
  ClusterMap m = tiny_fc_map("bsp", 3, 0.9f);
  // Three gradients whose float sum depends on the order: (a + b) + c != a + (b + c).
  std::vector<float> a(8, 1e8f), b(8, 1.0f), c(8, -1e8f);
  for (int i = 0; i < 8; ++i) b[i] += float(i) * 0.37f;
  Store one(m, 0), other(m, 0), copy(m, 0);
  int applied = 0;
  one.on_applied = [&](const PartState&, std::uint64_t clock, int n) {
    CHECK(clock == 0);
    CHECK(n == 3);
    ++applied;
  };
  one.push(0, 0, 0, 0, 0, a.data(), 32);
  one.push(1, 0, 0, 0, 0, b.data(), 32);
  one.push(2, 0, 0, 0, 0, c.data(), 32);
  other.push(2, 0, 0, 0, 0, c.data(), 32);
  other.push(0, 0, 0, 0, 0, a.data(), 32);
  other.push(1, 0, 0, 0, 0, b.data(), 32);
  CHECK(applied == 1);
  const auto x = *one.snapshot(0, 0), y = *other.snapshot(0, 0);
  CHECK(x == y);
  // A backup's copy (--replicas 2) only accumulates forwarded pushes, from a worker declared
  // dead since too, and applies the clock when its primary did: the same floats.
  copy.worker_dead(1);
  copy.push(1, 0, 0, 0, 0, b.data(), 32, true);
  copy.push(0, 0, 0, 0, 0, a.data(), 32, true);
  copy.push(2, 0, 0, 0, 0, c.data(), 32, true);
  CHECK(copy.applied_clocks(0, 0) == 0);
  CHECK(copy.apply_pending(0, 0, 0, 3).ok());
  CHECK(*copy.snapshot(0, 0) == x);
  CHECK(copy.applied_clocks(0, 0) == 1);
  CHECK_THAT(copy.apply_pending(0, 0, 0, 3).message(), Catch::Contains("not the part's next"));
  CHECK_THAT(copy.apply_pending(0, 0, 1, 3).message(), Catch::Contains("no push of it"));
}

TEST_CASE("ssp:K lets a worker run at most K clocks ahead of the slowest", "[ps][store]") {
  ClusterMap m = tiny_fc_map("ssp:1", 2);
  Store s(m, 0);
  std::vector<float> g(8, 0.1f);
  // Worker 0 completes clocks 0 and 1; worker 1 none.
  s.push(0, 0, 0, 0, 0, g.data(), 32);
  s.push(0, 1, 0, 0, 0, g.data(), 32);
  CHECK(s.pull_ready(0, 0, 1));         // 1 ahead of the slowest (0 completed): allowed
  CHECK_FALSE(s.pull_ready(0, 0, 2));   // 2 ahead: waits
  s.push(1, 0, 0, 0, 0, g.data(), 16);  // half of worker 1's part: not complete yet
  CHECK_FALSE(s.pull_ready(0, 0, 2));
  s.push(1, 0, 0, 0, 16, g.data(), 16);
  CHECK(s.pull_ready(0, 0, 2));
}

TEST_CASE("a snapshot held by a reply is never modified by later pushes", "[ps][store]") {
  ClusterMap m = tiny_fc_map("async", 1, 0.9f);
  Store s(m, 0);
  std::vector<float> g(8, 1.0f);
  Buffer held = s.snapshot(0, 0);
  const std::vector<float> copy = *held;
  s.push(0, 0, 0, 0, 0, g.data(), 32);
  s.push(0, 1, 0, 0, 0, g.data(), 32);
  CHECK(*held == copy);
  CHECK(*s.snapshot(0, 0) != copy);
  held.reset();
  // Once nobody holds the old version, updates go in place again (no new buffers).
  Buffer now = s.snapshot(0, 0);
  const float* where = now->data();
  now.reset();
  s.push(0, 2, 0, 0, 0, g.data(), 32);
  CHECK(s.snapshot(0, 0)->data() == where);
}
