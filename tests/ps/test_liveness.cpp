// What keeps a node's line to the coordinator alive when the coordinator is gone: messages that
// must not wait for room (heartbeats) never do, even behind a send() that is waiting; what lets
// a worker stop while a send waits on a shard that is gone (PsClient::stop frees it); and the
// seconds in its log lines are printed as given.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <vector>

#include "ps/client.hpp"
#include "ps/cluster_map.hpp"
#include "ps/link.hpp"
#include "ps/zmq_transport.hpp"
#include "transport_test_util.hpp"

using namespace psbed::ps;
using psbed::ps::test::kWait;  // every wait here is bounded: a regression fails, it never hangs
using namespace std::chrono_literals;

namespace {

Message heartbeat() {
  Message m;
  m.header.op = Op::kHeartbeat;
  return m;
}

Message push(const std::shared_ptr<const std::vector<std::uint8_t>>& bytes, std::uint64_t seq) {
  Message m;
  m.header.op = Op::kPush;
  m.header.length = bytes->size();
  m.header.sequence = seq;
  m.payload = Payload::share(bytes);
  return m;
}

// A node's link to a coordinator that died: an address nobody listens on any more. ZeroMQ keeps
// the connection's queue for a reconnect, so messages pile up there, then in the transport.
ZmqOptions link_to_a_dead_peer() {
  std::string endpoint;
  {
    ZmqOptions o;
    o.role = ZmqOptions::Role::kServer;
    o.endpoint = "tcp://127.0.0.1:*";
    ZmqTransport gone(o);
    endpoint = gone.endpoint();
  }
  ZmqOptions o;
  o.role = ZmqOptions::Role::kClient;
  o.endpoint = endpoint;
  o.identity = "node";
  return o;
}

}  // namespace

TEST_CASE("try_send drops a message rather than wait for a peer that is gone", "[ps][liveness]") {
  ZmqTransport link(link_to_a_dead_peer());
  link.start([](Message&&) {});
  // Far more heartbeats than the queues hold: the early ones are taken, later ones dropped, and
  // none of them waits longer than asked.
  auto sending = std::async(std::launch::async, [&] {
    int taken = 0, dropped = 0;
    for (int i = 0; i < 200; ++i) (link.try_send(heartbeat(), 5ms) ? taken : dropped) += 1;
    return std::make_pair(taken, dropped);
  });
  REQUIRE(sending.wait_for(kWait) == std::future_status::ready);
  const auto [taken, dropped] = sending.get();
  CHECK(taken > 0);
  CHECK(dropped > 0);
  link.stop();
  CHECK_FALSE(link.try_send(heartbeat()));  // stopped
}

TEST_CASE("try_send does not wait behind a send() that waits for room", "[ps][liveness]") {
  ZmqTransport link(link_to_a_dead_peer());
  link.start([](Message&&) {});
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(1u << 20, std::uint8_t(7));
  auto blocked = std::async(std::launch::async, [&] {
    for (int i = 0; i < 1000; ++i)
      if (!link.send(push(bytes, std::uint64_t(i)))) return false;
    return true;
  });
  // 1000 MiB cannot fit in the queues: that sender is waiting now (holding the way in).
  REQUIRE(blocked.wait_for(500ms) == std::future_status::timeout);
  auto beat = std::async(std::launch::async, [&] { return link.try_send(heartbeat(), 50ms); });
  REQUIRE(beat.wait_for(kWait) == std::future_status::ready);
  CHECK_FALSE(beat.get());
  link.stop();  // releases the waiting sender
  REQUIRE(blocked.wait_for(kWait) == std::future_status::ready);
  CHECK_FALSE(blocked.get());
}

TEST_CASE("PsClient::stop frees a push waiting for room on a shard that is gone",
          "[ps][liveness]") {
  // One fc tensor of 1 Mi floats in parts of 1 MiB, on one shard whose address leads nowhere.
  const char* toml = "input = [1, 1, 1024]\nclasses = 1024\n[[layer]]\ntype = \"fc\"\nout = 1024\n";
  ClusterMap map;
  map.exp.model_name = "wide";
  map.exp.model_toml = toml;
  map.spec = psbed::parse_model_spec(toml, "wide");
  map.plan = psbed::make_partition(map.spec, 1 << 20, 1);
  map.servers.push_back({"server", 0, "server-0", link_to_a_dead_peer().endpoint, "", ""});
  map.workers.push_back({"worker", 0, "worker-0", "", "", ""});
  REQUIRE(map.plan.parts.at(0).bytes() == (1 << 20));
  // Unshaped, the sender waits inside ZeroMQ's queue; shaped, behind the link's queue, whose
  // pacing thread waits inside ZeroMQ's (stopping that link used to wait for it for ever).
  const std::string bandwidth = GENERATE(std::string("0"), std::string("10gbit"));
  INFO("bandwidth " << bandwidth);
  auto client =
      std::make_unique<PsClient>(map, 0, "worker-0", LinkBuckets::make(parse_link(bandwidth, "")));
  std::vector<float> part(std::size_t(map.plan.parts[0].numel), 1.0f);
  auto blocked = std::async(std::launch::async, [&] {
    for (int i = 0; i < 1000; ++i)
      client->push(0, part.data(), 0, std::int64_t(part.size()), 0, 0, [] {});
  });
  // 1000 MiB cannot fit in the queues: the pusher is waiting now.
  REQUIRE(blocked.wait_for(1s) == std::future_status::timeout);
  auto stopping = std::async(std::launch::async, [&] { client->stop(); });
  if (stopping.wait_for(kWait) != std::future_status::ready ||
      blocked.wait_for(kWait) != std::future_status::ready) {
    // A hang would take the whole test binary down with it: say so and end.
    std::fprintf(
        stderr,
        "FAILED: PsClient::stop did not free a push waiting on a dead shard (bandwidth %s)\n",
        bandwidth.c_str());
    std::_Exit(1);
  }
  client->stop();  // again: nothing to do
  // Stopped: a push sends nothing and does not wait.
  auto after =
      std::async(std::launch::async, [&] { client->push(0, part.data(), 0, 4, 0, 0, [] {}); });
  REQUIRE(after.wait_for(kWait) == std::future_status::ready);
  client.reset();
}
