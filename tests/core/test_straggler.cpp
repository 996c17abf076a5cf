#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/straggler.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("a straggler setting parses a worker's compute factor and bandwidth",
          "[core][straggler]") {
  auto s = parse_stragglers({"worker-2:compute=2x"}, 4);
  REQUIRE(s.size() == 1);
  CHECK(s[0].worker == 2);
  CHECK(s[0].compute_factor == 2);
  CHECK(s[0].bandwidth_bytes_per_sec == 0);

  s = parse_stragglers({"worker-0:bandwidth=100mbit"}, 4);
  REQUIRE(s.size() == 1);
  CHECK(s[0].worker == 0);
  CHECK(s[0].compute_factor == 1);
  CHECK(s[0].bandwidth_bytes_per_sec == Approx(100e6 / 8));

  // Repeated, and comma-separated: keys of one worker, or a new worker after its name.
  s = parse_stragglers({"worker-1:compute=4x,bandwidth=10mbit", "worker-3:bandwidth=1gbit"}, 4);
  REQUIRE(s.size() == 2);
  CHECK(s[0].worker == 1);
  CHECK(s[0].compute_factor == 4);
  CHECK(s[0].bandwidth_bytes_per_sec == Approx(10e6 / 8));
  CHECK(s[1].worker == 3);
  CHECK(s[1].bandwidth_bytes_per_sec == Approx(1e9 / 8));
  s = parse_stragglers({"worker-1:compute=1.5X, worker-2:compute=3x"}, 0);
  REQUIRE(s.size() == 2);
  CHECK(s[0].compute_factor == 1.5);
  CHECK(s[1].worker == 2);
  CHECK(s[1].compute_factor == 3);
  CHECK(parse_stragglers({}, 2).empty());
}

TEST_CASE("a straggler setting refuses each mistake in one line naming the value",
          "[core][straggler]") {
  REQUIRE_THROWS_WITH(parse_stragglers({"server-0:compute=2x"}, 2),
                      Contains("unknown worker 'server-0'") && Contains("expected worker-N"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-x:compute=2x"}, 2),
                      Contains("unknown worker 'worker-x'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=2"}, 2),
                      Contains("'worker-1:compute=2'") &&
                          Contains("factor of 1 or more with an x") && Contains("got '2'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=0.5x"}, 2), Contains("got '0.5x'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=fastx"}, 2), Contains("got 'fastx'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=infx"}, 2), Contains("got 'infx'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:memory=2x"}, 2),
                      Contains("unknown key 'memory'") && Contains("compute or bandwidth"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:bandwidth=fast"}, 2),
                      Contains("'worker-1:bandwidth=fast'") && Contains("bad bandwidth 'fast'"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:bandwidth=100"}, 2), Contains("give its unit"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:bandwidth=0"}, 2), Contains("above 0"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=2x", "worker-1:bandwidth=1gbit"}, 2),
                      Contains("worker-1 is given twice"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute=2x,compute=3x"}, 2),
                      Contains("compute is given twice for worker-1"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-2:compute=2x"}, 2),
                      Contains("worker-2") && Contains("the cluster has 2 worker(s)") &&
                          Contains("worker-0 to worker-1"));
  REQUIRE_THROWS_WITH(parse_stragglers({"compute=2x"}, 2), Contains("expected worker-N:KEY=VALUE"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:"}, 2), Contains("expected KEY=VALUE"));
  REQUIRE_THROWS_WITH(parse_stragglers({"worker-1:compute"}, 2), Contains("expected KEY=VALUE"));
}

TEST_CASE("stragglers print as the flag takes them and round-trip through JSON",
          "[core][straggler]") {
  const auto s =
      parse_stragglers({"worker-1:compute=4x,bandwidth=10mbit", "worker-3:bandwidth=1.5gbit"}, 4);
  CHECK(to_string(s) == "worker-1:compute=4x,bandwidth=10mbit; worker-3:bandwidth=1.5gbit");
  CHECK(parse_stragglers({to_string(s[0])}, 4) == std::vector<Straggler>{s[0]});
  Straggler keys;
  keys.worker = 1;
  parse_straggler_keys(straggler_keys(s[0]), keys);
  CHECK(keys == s[0]);
  const auto j = stragglers_json(s);
  CHECK(j[0]["worker"] == 1);
  CHECK(j[0]["compute_factor"] == 4.0);
  CHECK(j[1]["bandwidth_bytes_per_sec"].get<double>() == Approx(1.5e9 / 8));
  CHECK(stragglers_from_json(j, "summary.json") == s);
  REQUIRE_THROWS_WITH(stragglers_from_json(nlohmann::json::parse(R"([{"worker": 1,
                      "compute_factor": 0.5}])"),
                                           "summary.json"),
                      Contains("summary.json") && Contains("expected 1 or more"));
  REQUIRE_THROWS_WITH(stragglers_from_json(nlohmann::json::object(), "summary.json"),
                      Contains("not a list"));
  CHECK(straggler_of(s, 3).bandwidth_bytes_per_sec == Approx(1.5e9 / 8));
  CHECK(straggler_of(s, 0).compute_factor == 1);
  CHECK(straggler_of(s, 0).worker == 0);
}
