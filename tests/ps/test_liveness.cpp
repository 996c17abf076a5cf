// What keeps a node's line to the coordinator alive when the coordinator is gone: messages that
// must not wait for room (heartbeats) never do, even behind a send() that is waiting; and the
// seconds in its log lines are printed as given.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "ps/seconds_text.hpp"
#include "ps/zmq_transport.hpp"

using namespace psbed::ps;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = 10s;  // every wait here is bounded: a regression fails, it never hangs

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

TEST_CASE("seconds in log lines are printed as given", "[ps][liveness]") {
  CHECK(seconds_text(0.5) == "0.5");
  CHECK(seconds_text(30) == "30");
  CHECK(seconds_text(2.25) == "2.25");
  CHECK(seconds_text(10.2049) == "10.2");
  CHECK(seconds_text(0) == "0");
}
