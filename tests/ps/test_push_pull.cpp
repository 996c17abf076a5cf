// Push-pull (PsClient::push_pull, a Push with flags 1): the shard answers the push, once a pull of
// the next clock would be answered, with the same bytes of the updated part instead of an ack.
// At the shard: when it answers under bsp and async, and what it refuses. End to end, over real
// ZeroMQ: the parameters after bsp steps equal those of a push then a pull, bit for bit.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "core/param_init.hpp"
#include "fake_link.hpp"
#include "loopback_shard.hpp"
#include "ps/client.hpp"
#include "ps/shard.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

constexpr std::uint8_t kPushPullFlag = 1;

Message push_pull_message(int worker, std::uint64_t sequence, std::uint64_t clock,
                          std::vector<float> g, std::uint64_t offset = 0) {
  Message m;
  m.peer = "worker-" + std::to_string(worker);
  m.header.op = Op::kPush;
  m.header.flags = kPushPullFlag;
  m.header.sender = std::uint32_t(worker);
  m.header.offset = offset;
  m.header.length = g.size() * 4;
  m.header.clock = clock;
  m.header.sequence = sequence;
  m.payload = Payload::share(std::make_shared<const std::vector<float>>(std::move(g)));
  return m;
}

std::vector<float> answer_floats(const Message& m) {
  std::vector<float> v(m.payload.size() / 4);
  std::memcpy(v.data(), m.payload.data(), m.payload.size());
  return v;
}

std::vector<float> initial_fc_weights(const ClusterMap& map) {
  std::vector<float> w0(8);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());
  return w0;
}

}  // namespace

TEST_CASE("a bsp push-pull is answered with the updated bytes once the clock is whole",
          "[ps][shard][push-pull]") {
  const ClusterMap map = tiny_fc_map("bsp", 2);
  const std::vector<float> w0 = initial_fc_weights(map);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  // Worker 0 pushes the weights' last 4 floats, worker 1 all 8: acknowledged (their answers
  // must wait, and a policy's credit waits for the ack), not answered while worker 0's first 4
  // are missing from clock 0.
  shard.enqueue(push_pull_message(0, 1, 0, std::vector<float>(4, 1.0f), 16));
  shard.enqueue(push_pull_message(1, 1, 0, std::vector<float>(8, 3.0f)));
  std::map<std::pair<std::string, std::uint64_t>, Message> answers;
  for (std::size_t i = 1; i <= 2; ++i) {
    const Message m = transport.wait_for(i);
    CHECK(m.header.op == Op::kPushAck);
    CHECK(m.payload.size() == 0);
  }
  CHECK(transport.settled_count() == 2);
  // The last push of the clock is acknowledged too (the worker's step ends at the ack), then
  // the three are answered.
  shard.enqueue(push_pull_message(0, 2, 0, std::vector<float>(4, 1.0f), 0));
  CHECK(transport.wait_for(3).header.op == Op::kPushAck);
  for (std::size_t i = 4; i <= 6; ++i) {
    Message m = transport.wait_for(i);
    answers[{m.peer, m.header.sequence}] = m;
  }
  CHECK(transport.settled_count() == 6);
  shard.stop();
  // Clock 0 applied the workers' mean gradient, 2: w = w0 - 0.5 x 2.
  auto expect = [&](const std::string& peer, std::uint64_t seq, int from, int n) {
    INFO(peer << " sequence " << seq);
    REQUIRE(answers.count({peer, seq}) == 1);
    const Message& m = answers.at({peer, seq});
    CHECK(m.header.op == Op::kPullReply);
    CHECK(m.header.offset == std::uint64_t(from) * 4);
    const std::vector<float> v = answer_floats(m);
    REQUIRE(int(v.size()) == n);
    for (int i = 0; i < n; ++i) CHECK(v[std::size_t(i)] == w0[std::size_t(from + i)] - 1.0f);
  };
  expect("worker-0", 1, 4, 4);
  expect("worker-1", 1, 0, 8);
  expect("worker-0", 2, 0, 4);
  CHECK(shard.pushes() == 3);
  CHECK(shard.bad().total() == 0);
}

TEST_CASE("an async push-pull is answered at once with the part after the push",
          "[ps][shard][push-pull]") {
  const ClusterMap map = tiny_fc_map("async", 1, 0.9f);
  const std::vector<float> w0 = initial_fc_weights(map);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  shard.start(map, 0);
  shard.enqueue(push_pull_message(0, 1, 0, std::vector<float>(8, 1.0f)));
  shard.enqueue(push_pull_message(0, 2, 1, std::vector<float>(8, 1.0f)));
  const std::vector<float> first = answer_floats(transport.wait_for(1));
  const Message second = transport.wait_for(2);
  shard.stop();
  CHECK(second.header.op == Op::kPullReply);
  CHECK(second.header.sequence == 2);
  // Momentum 0.9: v = 1, then 1.9; w = w0 - 0.5 v after each.
  for (int i = 0; i < 8; ++i) {
    CHECK(first[std::size_t(i)] == Approx(w0[std::size_t(i)] - 0.5f));
    CHECK(answer_floats(second)[std::size_t(i)] == Approx(w0[std::size_t(i)] - 0.5f - 0.95f));
  }
}

TEST_CASE("a push-pull with unknown flags or under --replicas 2 is refused and counted",
          "[ps][shard][push-pull]") {
  ClusterMap map = tiny_fc_map("async", 1);
  FakeLink transport;
  TraceRecorder trace("server-0", false);
  Shard shard(1 << 20, transport, trace);
  Message flags = push_pull_message(0, 1, 0, std::vector<float>(8, 1.0f));
  flags.header.flags = 2;
  SECTION("flags 2") {
    shard.start(map, 0);
    shard.enqueue(std::move(flags));
  }
  SECTION("--replicas 2") {
    map.exp.replicas = 2;
    shard.start(map, 0);
    shard.enqueue(push_pull_message(0, 1, 0, std::vector<float>(8, 1.0f)));
  }
  CHECK(transport.settled_count() == 0);
  shard.stop();
  CHECK(shard.pushes() == 0);
  CHECK(shard.bad().count(Problem::kOp) == 1);
  if (map.exp.replicas > 1) {
    // The client says so before sending (nobody listens at that port: nothing must go).
    map.servers[0].address = "tcp://127.0.0.1:1";
    PsClient client(map, 0, "worker-0");
    std::vector<float> g(8), w(8);
    CHECK_THROWS_WITH(client.push_pull(0, g.data(), w.data(), 0, 8, 0, 0, nullptr, [] {}),
                      Catch::Contains("--replicas 2"));
    client.stop();
  }
}

TEST_CASE("bsp push-pull over ZeroMQ ends with the parameters of a push then a pull",
          "[ps][push-pull]") {
  // Two workers, momentum, five steps; gradients that are multiples of 1/8, so the order in
  // which the shard sums them cannot round differently between the two runs.
  auto train = [](bool both) {
    ClusterMap map = tiny_fc_map("bsp", 2, 0.9f);
    LoopbackShard server(map, 1 << 20);
    map.servers[0].address = server.endpoint();
    std::vector<std::unique_ptr<PsClient>> clients;
    std::vector<std::vector<std::vector<float>>> params(2), grads(2);
    for (int w = 0; w < 2; ++w) {
      clients.push_back(std::make_unique<PsClient>(map, w, "worker-" + std::to_string(w)));
      for (const auto& t : map.spec.tensors) {
        params[std::size_t(w)].emplace_back(std::size_t(t.numel), 0.0f);
        grads[std::size_t(w)].emplace_back(std::size_t(t.numel), 0.0f);
      }
    }
    const auto& parts = map.plan.parts;
    for (std::uint64_t step = 0; step < 5; ++step) {
      for (int w = 0; w < 2; ++w)
        for (auto& g : grads[std::size_t(w)])
          for (std::size_t i = 0; i < g.size(); ++i)
            g[i] = float((int(step) + 1) * (w + 1) * int(i + 1) % 7) / 8.0f;
      Countdown pushed(2 * int(parts.size()));
      // Worker 0's push-pulls are acknowledged while their answers wait for worker 1's.
      Countdown acked(2 * int(parts.size()));
      std::atomic<int> early_answers{0};
      for (int w = 0; w < 2; ++w) {
        for (int i = 0; i < int(parts.size()); ++i) {
          const Part& p = parts[std::size_t(i)];
          const float* g = grads[std::size_t(w)][std::size_t(p.key)].data() + p.offset;
          float* dst = params[std::size_t(w)][std::size_t(p.key)].data() + p.offset;
          if (both)
            clients[std::size_t(w)]->push_pull(
                i, g, dst, 0, p.numel, step, 0, [&] { acked.done(); },
                [&, w] {
                  if (w == 0) ++early_answers;
                  pushed.done();
                });
          else
            clients[std::size_t(w)]->push(i, g, 0, p.numel, step, 0, [&] { pushed.done(); });
        }
        if (both && w == 0) {
          REQUIRE(acked.wait(10, int(parts.size())));
          CHECK(early_answers == 0);
        }
      }
      REQUIRE(pushed.wait());
      if (both) REQUIRE(acked.wait());
      if (both) continue;
      Countdown pulled(2 * int(parts.size()));
      for (int w = 0; w < 2; ++w)
        for (int i = 0; i < int(parts.size()); ++i) {
          const Part& p = parts[std::size_t(i)];
          clients[std::size_t(w)]->pull(
              i, params[std::size_t(w)][std::size_t(p.key)].data() + p.offset, 0, p.numel, step + 1,
              0, [&] { pulled.done(); });
        }
      REQUIRE(pulled.wait());
    }
    for (auto& c : clients) c->stop();
    server.stop();
    CHECK(server.shard().bad().total() == 0);
    CHECK(params[0] == params[1]);
    return params[0];
  };
  const auto apart = train(false), together = train(true);
  CHECK(apart == together);  // bit for bit
  // And they trained: the weights moved from their initial values.
  std::vector<float> w0(8);
  const ClusterMap map = tiny_fc_map("bsp", 2, 0.9f);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());
  CHECK(apart[0] != w0);
}
