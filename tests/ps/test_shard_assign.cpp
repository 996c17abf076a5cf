// A live --comm switch hands an SFB layer back to the shards with op Assign: the workers'
// parameters and momentum become the part's state from a clock on. A good one is acked and
// answers the pulls of that clock (parameters and momentum); a bad one is refused and counted,
// never applied.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/param_init.hpp"
#include "fake_link.hpp"
#include "ps/shard.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

Message message(Op op, std::uint64_t sequence, std::uint64_t clock, std::vector<float> v = {},
                std::uint64_t length = 32) {
  Message m;
  m.peer = "worker-0";
  m.header.op = op;
  m.header.length = v.empty() ? length : v.size() * 4;
  m.header.clock = clock;
  m.header.sequence = sequence;
  if (!v.empty())
    m.payload = Payload::share(std::make_shared<const std::vector<float>>(std::move(v)));
  return m;
}

// The weights' 8 parameters 1..8, then their momentum 0.1..0.8.
std::vector<float> state() {
  std::vector<float> v(16);
  for (int i = 0; i < 8; ++i) v[i] = float(i + 1), v[8 + i] = 0.1f * float(i + 1);
  return v;
}

std::vector<float> floats(const Message& m) {
  std::vector<float> v(m.payload.size() / 4);
  std::memcpy(v.data(), m.payload.data(), m.payload.size());
  return v;
}

}  // namespace

TEST_CASE("an assign sets a part's parameters, momentum and bsp clock", "[ps][shard][assign]") {
  const ClusterMap map = tiny_fc_map("bsp", 2, 0.9f);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  // A pull of clock 5 waits: the part has applied no clock yet.
  shard.enqueue(message(Op::kPull, 1, 5));
  CHECK(transport.settled_count() == 0);
  shard.enqueue(message(Op::kAssign, 2, 5, state()));
  const Message ack = transport.wait_for(1);
  CHECK(ack.header.op == Op::kPushAck);
  CHECK(ack.header.sequence == 2);
  const Message reply = transport.wait_for(2);
  REQUIRE(reply.header.sequence == 1);
  CHECK(floats(reply) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  Message momentum = message(Op::kPull, 3, 5);
  momentum.header.flags = 1;
  shard.enqueue(std::move(momentum));
  const std::vector<float> v = floats(transport.wait_for(3));
  for (int i = 0; i < 8; ++i) CHECK(v[i] == 0.1f * float(i + 1));
  // Clock 5's pushes apply on top, with the assigned momentum: v = 0.9 v + g, w -= 0.5 v.
  shard.enqueue(message(Op::kPush, 4, 5, std::vector<float>(8, 1.0f)));
  Message other = message(Op::kPush, 5, 5, std::vector<float>(8, 1.0f));
  other.peer = "worker-1", other.header.sender = 1;
  shard.enqueue(std::move(other));
  transport.wait_for(5);
  shard.enqueue(message(Op::kPull, 6, 6));
  const std::vector<float> w = floats(transport.wait_for(6));
  shard.stop();
  for (int i = 0; i < 8; ++i)
    CHECK(w[i] == Approx(float(i + 1) - 0.5f * (0.9f * 0.1f * float(i + 1) + 1.0f)));
  CHECK(shard.bad().total() == 0);
}

TEST_CASE("a bad assign is refused and counted, never applied", "[ps][shard][assign]") {
  const ClusterMap map = tiny_fc_map("bsp", 2, 0.9f);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  // Pushes of clock 0 from both workers: the part applies clock 0.
  shard.enqueue(message(Op::kPush, 1, 0, std::vector<float>(8, 1.0f)));
  Message other = message(Op::kPush, 2, 0, std::vector<float>(8, 1.0f));
  other.peer = "worker-1", other.header.sender = 1;
  shard.enqueue(std::move(other));
  transport.wait_for(2);
  // The parameters without their momentum; a clock the part has applied past; an offset; a
  // sender the map does not have; a non-finite value.
  shard.enqueue(message(Op::kAssign, 3, 4, std::vector<float>(8, 1.0f)));
  shard.enqueue(message(Op::kAssign, 4, 0, state()));
  Message offset = message(Op::kAssign, 5, 4, state());
  offset.header.offset = 4;
  shard.enqueue(std::move(offset));
  Message stranger = message(Op::kAssign, 6, 4, state());
  stranger.header.sender = 7;
  shard.enqueue(std::move(stranger));
  std::vector<float> nan = state();
  nan[3] = std::nanf("");
  shard.enqueue(message(Op::kAssign, 7, 4, nan));
  // A pull with flags the shard does not know.
  Message flags = message(Op::kPull, 8, 1);
  flags.header.flags = 2;
  shard.enqueue(std::move(flags));
  CHECK(transport.settled_count() == 2);  // nothing answered
  shard.enqueue(message(Op::kPull, 9, 1));
  const std::vector<float> w = floats(transport.wait_for(3));
  shard.stop();
  std::vector<float> w0(8);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());
  for (int i = 0; i < 8; ++i) CHECK(w[i] == Approx(w0[i] - 0.5f));  // clock 0 alone
  CHECK(shard.bad().total() == 6);
  CHECK(shard.bad().count(Problem::kKey) == 1);  // the unknown sender
  CHECK(shard.bad().count(Problem::kOp) == 1);   // the unknown pull flags
}
