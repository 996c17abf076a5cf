#include <catch2/catch.hpp>

#include "ps/host_lookup.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("a tcp endpoint whose host does not resolve is named; numeric and wildcard hosts pass",
          "[ps][host]") {
  CHECK(ps::unresolved_host("tcp://127.0.0.1:5555").empty());
  CHECK(ps::unresolved_host("tcp://*:5555").empty());
  CHECK(ps::unresolved_host("tcp://[::1]:5555").empty());
  CHECK(ps::unresolved_host("tcp://localhost:5555").empty());  // /etc/hosts
  CHECK(ps::unresolved_host("inproc://outbox").empty());       // not a network address
  // .invalid never resolves (RFC 6761).
  const std::string why = ps::unresolved_host("tcp://nosuchhost.invalid:5555");
  CHECK_THAT(why, Contains("'nosuchhost.invalid' does not resolve"));
  CHECK_THAT(ps::unresolved_host("tcp://eth0;nosuchhost.invalid:5555"),
             Contains("'nosuchhost.invalid'"));
}
