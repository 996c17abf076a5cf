// The shard engine behind a fake transport: what it answers, and that gradient bytes at any
// address (ZeroMQ hands small frames over inside its receive buffer, at odd offsets) are applied
// exactly as aligned ones.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/param_init.hpp"
#include "fake_link.hpp"
#include "ps/shard.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

Message request(Op op, std::uint64_t sequence, Payload payload = {}) {
  Message m;
  m.peer = "worker-0";
  m.header.op = op;
  m.header.key = 0;
  m.header.part = 0;
  m.header.length = 32;  // the fc weight: 2 x 4 floats
  m.header.sequence = sequence;
  m.payload = std::move(payload);
  return m;
}

}  // namespace

TEST_CASE(
    "a shard applies a push whose floats sit at an odd address, acks it, and serves the result",
    "[ps][shard]") {
  const ClusterMap map = tiny_fc_map("async", 1);
  std::vector<float> w0(8);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());

  // Eight gradient floats starting one byte into the buffer.
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(1 + 32);
  for (int i = 0; i < 8; ++i) {
    const float g = float(i + 1);
    std::memcpy(bytes->data() + 1 + 4 * i, &g, 4);
  }
  const Payload grad(bytes, bytes->data() + 1, 32);

  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  shard.enqueue(request(Op::kPush, 1, grad));
  const Message ack = transport.wait_for(1);
  CHECK(ack.header.op == Op::kPushAck);
  CHECK(ack.header.sequence == 1);
  shard.enqueue(request(Op::kPull, 2));
  const Message reply = transport.wait_for(2);
  shard.stop();
  REQUIRE(reply.header.op == Op::kPullReply);
  REQUIRE(reply.payload.size() == 32);
  std::vector<float> got(8);
  std::memcpy(got.data(), reply.payload.data(), 32);
  for (int i = 0; i < 8; ++i) CHECK(got[i] == Approx(w0[i] - 0.5f * float(i + 1)));
  CHECK(shard.bad().total() == 0);
}

TEST_CASE("a shard takes a worker's id only from that worker's own connection", "[ps][shard]") {
  ClusterMap map = tiny_fc_map("async", 1);
  map.workers[0].link_id = "worker-0#0123456789abcdef";
  auto grad = std::make_shared<const std::vector<float>>(8, 1.0f);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  auto own = [&](Message m) {
    m.peer = map.workers[0].link_id;
    return m;
  };
  // In worker 0's name from another connection: neither applied nor answered. Its own push,
  // behind the forged one on the same lane, is acked after the forged one was looked at.
  shard.enqueue(request(Op::kPush, 1, Payload::share(grad)));
  shard.enqueue(own(request(Op::kPush, 2, Payload::share(grad))));
  CHECK(transport.wait_for(1).header.sequence == 2);
  shard.enqueue(request(Op::kPull, 3));
  shard.enqueue(own(request(Op::kPull, 4)));
  const Message reply = transport.wait_for(2);
  shard.stop();
  CHECK(reply.header.sequence == 4);
  std::vector<float> w0(8), got(8);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());
  std::memcpy(got.data(), reply.payload.data(), 32);
  for (int i = 0; i < 8; ++i) CHECK(got[i] == Approx(w0[i] - 0.5f));  // one push applied
  CHECK(shard.bad().count(Problem::kSender) == 2);
  CHECK(shard.pushes() == 1);
}

TEST_CASE("a shard refuses a gradient holding NaN or infinity and tells the worker why",
          "[ps][shard]") {
  for (const float poison : {std::nanf(""), INFINITY, -INFINITY}) {
    for (const bool allow : {false, true}) {
      ClusterMap map = tiny_fc_map("async", 1);
      map.exp.allow_nonfinite = allow;
      std::vector<float> g(8, 1.0f);
      g[5] = poison;
      auto grad = std::make_shared<const std::vector<float>>(std::move(g));
      FakeLink transport;
      TraceRecorder trace("server-0", false);
      Shard shard(1 << 20, transport, trace);
      shard.start(map, 0);
      shard.enqueue(request(Op::kPush, 1, Payload::share(grad)));
      const Message answer = transport.wait_for(1);
      shard.stop();
      if (allow) {
        CHECK(answer.header.op == Op::kPushAck);
        CHECK(shard.pushes() == 1);
        continue;
      }
      CHECK(answer.header.op == Op::kError);
      CHECK(answer.header.sequence == 1);
      CHECK(std::string(answer.payload.view()).find("NaN or infinity") != std::string::npos);
      CHECK(shard.bad().count(Problem::kNonfinite) == 1);
      CHECK(shard.pushes() == 0);
    }
  }
}

TEST_CASE("the cluster map carries the workers' link ids and the non-finite switch",
          "[ps][shard]") {
  ClusterMap map = tiny_fc_map("async", 1);
  map.workers[0].link_id = "worker-0#00000000000000000000000000000001";
  map.exp.allow_nonfinite = true;
  const ClusterMap back = ClusterMap::from_json(map.to_json());
  CHECK(back.workers.at(0).link_id == map.workers[0].link_id);
  CHECK(back.exp.allow_nonfinite);
  // The map workers get has no link ids: absent, not empty strings.
  map.workers[0].link_id.clear();
  CHECK_FALSE(map.to_json()["workers"][0].contains("link_id"));
  CHECK(ClusterMap::from_json(map.to_json()).workers.at(0).link_id.empty());
}
