// The factor exchange over real ZeroMQ between two workers' exchanges in one process, each with
// a real CPU net: the gradient rebuilt from factors is the net's own, both replicas apply the
// same update, and bad factors (wrong shape, wrong step, unknown peer, a layer not exchanged)
// are refused and counted, never applied; a dead peer ends a wait, named.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "ps/cluster_map.hpp"
#include "ps/zmq_transport.hpp"
#include "worker/net.hpp"
#include "worker/sfb.hpp"

using namespace psbed;
using namespace psbed::worker;

namespace {

const char* kToml = R"(name = "tiny"
input = [1, 2, 3]
classes = 3
[[layer]]
type = "fc"
name = "fc1"
out = 5
[[layer]]
type = "relu"
[[layer]]
type = "fc"
name = "fc2"
out = 3
)";

constexpr int kBatch = 4;

struct SfbPair {
  ps::ClusterMap map;
  CommPlan plan;
  FactorExchange a{"tcp://127.0.0.1:*"}, b{"tcp://127.0.0.1:*"};
  std::unique_ptr<Net> net_a, net_b;

  // `third`: a worker-2 with no exchange, whose connection a test plays by hand (a second
  // connection under worker-1's identity would be turned away by ZeroMQ itself).
  explicit SfbPair(const std::string& mode, bool third = false, CommMode comm = CommMode::kSfb) {
    map.exp.model_toml = kToml;
    map.exp.mode = Consistency::parse(mode);
    map.exp.batch = kBatch;
    map.exp.steps = 10;
    map.exp.sgd = {0.1f, 0.9f, 0.01f};
    map.exp.comm = to_string(comm);
    map.spec = parse_model_spec(kToml, "tiny");
    map.workers = {{"worker", 0, "worker-0", a.address(), "", ""},
                   {"worker", 1, "worker-1", b.address(), "", ""}};
    if (third) map.workers.push_back({"worker", 2, "worker-2", "tcp://127.0.0.1:9", "", ""});
    plan = choose_comm(map.spec, comm, int(map.workers.size()), 1, kBatch, {});
    net_a = make_cpu_net(map.spec, kBatch, 7);
    net_b = make_cpu_net(map.spec, kBatch, 7);
    a.start(map, 0, plan, nullptr);
    b.start(map, 1, plan, nullptr);
  }
};

// One forward and backward of `net` on a batch drawn from `seed`.
void step(Net& net, int seed) {
  std::vector<float> images(kBatch * 6);
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = std::sin(float(i * 7 + seed));
  std::vector<std::int32_t> labels = {seed % 3, 1, 2, 0};
  net.set_batch(images.data(), labels.data(), kBatch);
  for (int l = 0; l < net.num_layers(); ++l) net.forward(l);
  net.compute_loss();
  for (int l = net.num_layers() - 1; l >= 0; --l) net.backward(l);
}

std::vector<float> copy_param(Net& net, int t) {
  return {net.param(t), net.param(t) + net.spec().tensors[t].numel};
}

// A raw peer connection to `to`, as `identity`, for messages the exchange must refuse.
struct Raw {
  ps::ZmqTransport t;
  Raw(const std::string& to, const std::string& identity) : t(options(to, identity)) {
    t.start([](ps::Message&&) {});
  }
  static ps::ZmqOptions options(const std::string& to, const std::string& identity) {
    ps::ZmqOptions z;
    z.endpoint = to, z.identity = identity;
    return z;
  }
  void send(std::uint32_t sender, std::uint32_t layer, std::uint64_t step, std::size_t floats) {
    auto v = std::make_shared<const std::vector<float>>(floats, 1.0f);
    ps::Message m;
    m.header.op = ps::Op::kFactors;
    m.header.sender = sender, m.header.key = layer, m.header.clock = step;
    m.header.length = floats * 4;
    m.payload = ps::Payload::share(v);
    t.send(std::move(m));
  }
};

// What the transmission scheduler does with a layer's factors: stage them, send each peer's
// transfer. Counts the sends that have left the link in `left`.
void send_all(FactorExchange& x, int layer, std::int64_t step, Net& net,
              std::atomic<int>* left = nullptr) {
  for (const policy::Transfer& t : x.stage(layer, step, net))
    x.send_to(t, step, [left] {
      if (left) ++*left;
    });
}

void wait_refused(const FactorExchange& x, std::uint64_t n) {
  for (int i = 0; i < 200 && x.refused().total() < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

TEST_CASE("factors rebuild the summed gradient and keep the replicas equal", "[worker][sfb]") {
  SfbPair p("bsp");
  REQUIRE(p.plan.sfb[0]);
  REQUIRE(p.plan.sfb[2]);
  // What a bsp shard would do: the mean of the two nets' own gradients, one SGD step.
  step(*p.net_a, 1);
  step(*p.net_b, 2);
  std::vector<std::vector<float>> expect;
  for (int t = 0; t < int(p.map.spec.tensors.size()); ++t) {
    std::vector<float> w = copy_param(*p.net_a, t), v(w.size(), 0.0f), g(w.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = p.net_a->grad(t)[i] + p.net_b->grad(t)[i];
    sgd_apply(p.map.exp.sgd, w.data(), g.data(), v.data(), w.size(), 0.5f);
    expect.push_back(w);
  }
  for (int l : {2, 0}) {
    send_all(p.a, l, 0, *p.net_a);
    send_all(p.b, l, 0, *p.net_b);
  }
  for (int l : {0, 2}) {
    p.a.apply_until(l, 1, *p.net_a);
    p.b.apply_until(l, 1, *p.net_b);
    CHECK(p.a.applied(l) == 1);
  }
  for (int t = 0; t < int(p.map.spec.tensors.size()); ++t) {
    INFO(p.map.spec.tensors[t].name);
    CHECK(copy_param(*p.net_a, t) == copy_param(*p.net_b, t));  // bit for bit
    for (std::size_t i = 0; i < expect[t].size(); ++i)
      CHECK(p.net_a->param(t)[i] == Approx(expect[t][i]).margin(1e-6));
  }
  CHECK(p.a.refused().total() == 0);
  CHECK(p.a.bytes_sent() == std::uint64_t(4 * kBatch * ((6 + 5) + (5 + 3))));
}

TEST_CASE("a layer's factors are one whole transfer per peer, done once each has left",
          "[worker][sfb]") {
  SfbPair p("bsp");
  step(*p.net_a, 1);
  const std::vector<policy::Transfer> go = p.a.stage(0, 0, *p.net_a);
  REQUIRE(go.size() == 1);  // one peer
  CHECK(go[0].dir == policy::Direction::kFactors);
  CHECK(go[0].part == 1);  // the peer's worker id
  CHECK(go[0].layer == 0);
  CHECK(go[0].count == kBatch * (6 + 5));
  // What a step waits to have sent: one peer's factors of fc1 and fc2 on top of the pushes.
  CHECK(p.a.with_factor_sends({0, 7, 0}) ==
        std::vector<std::int64_t>{kBatch * (6 + 5), 7, kBatch * (5 + 3)});
  // Nothing was staged for fc2: the scheduler may not send it.
  CHECK_THROWS_WITH(p.a.send_to({policy::Direction::kFactors, 1, 2, 0, 1}, 0, [] {}),
                    Catch::Contains("no factors of layer 2 for step 0"));
  std::atomic<int> left{0};
  // Unshaped, the message has left once ZeroMQ has it: before send_to returns.
  p.a.send_to(go[0], 0, [&left] { ++left; });
  CHECK(left == 1);
  CHECK(p.a.bytes_sent() == std::uint64_t(4 * kBatch * (6 + 5)));
  // The peer has them: its own and ours make step 0 complete.
  step(*p.net_b, 2);
  send_all(p.b, 0, 0, *p.net_b, &left);
  CHECK(left == 2);
  p.b.apply_until(0, 1, *p.net_b);
  CHECK(p.b.applied(0) == 1);
}

TEST_CASE("bad factors are refused and counted, never applied", "[worker][sfb]") {
  SfbPair p("bsp", true);
  const std::size_t fc1 = kBatch * (6 + 5);
  const std::vector<float> before = copy_param(*p.net_a, 0);
  {
    Raw stranger(p.a.address(), "sfb:worker-9");
    stranger.send(1, 0, 0, fc1);  // unknown peer
    wait_refused(p.a, 1);
  }
  Raw peer(p.a.address(), sfb_identity("worker-2"));
  peer.send(2, 0, 0, fc1 - 1);  // wrong shape
  wait_refused(p.a, 2);
  peer.send(2, 0, 7, fc1);  // a step far ahead of bsp's window
  wait_refused(p.a, 3);
  peer.send(2, 1, 0, fc1);  // the relu: no factors
  wait_refused(p.a, 4);
  peer.send(1, 0, 0, fc1);  // claims to be worker 1 on worker-2's connection
  wait_refused(p.a, 5);
  CHECK(p.a.refused().total() == 5);
  CHECK(p.a.refused().count(ps::Problem::kPayloadSize) == 1);
  CHECK(p.a.refused().count(ps::Problem::kRange) == 1);
  CHECK(p.a.applied(0) == 0);
  CHECK(copy_param(*p.net_a, 0) == before);
  // A well-formed one is kept, and a second copy of it refused.
  peer.send(2, 0, 0, fc1);
  peer.send(2, 0, 0, fc1);
  wait_refused(p.a, 6);
  CHECK(p.a.refused().total() == 6);
}

TEST_CASE("a dead peer ends the wait for its factors, named", "[worker][sfb]") {
  SfbPair p("bsp");
  step(*p.net_a, 1);
  send_all(p.a, 0, 0, *p.net_a);
  p.a.peer_dead(1);
  CHECK_THROWS_WITH(p.a.apply_until(0, 1, *p.net_a),
                    Catch::Contains("worker-1 died: bsp cannot go on without its factors of fc1"));
}

TEST_CASE("ssp applies what arrived and waits only past the bound", "[worker][sfb]") {
  SfbPair p("ssp:1");
  step(*p.net_a, 1);
  send_all(p.a, 0, 0, *p.net_a);
  const std::vector<float> before = copy_param(*p.net_a, 0);
  // The forward of step 1 may run on step 0 missing (bound 1): it applies its own factors.
  p.a.apply_until(0, 0, *p.net_a);
  CHECK(copy_param(*p.net_a, 0) != before);
  CHECK(p.a.applied(0) == 0);
  // Step 0 complete only once the peer's factors are applied too.
  step(*p.net_b, 2);
  send_all(p.b, 0, 0, *p.net_b);
  p.a.apply_until(0, 1, *p.net_a);
  CHECK(p.a.applied(0) == 1);
}

TEST_CASE("a live --comm switch: factors from the agreed step on, with the shards' momentum",
          "[worker][sfb][comm_switch]") {
  SfbPair p("bsp", false, CommMode::kPs);
  REQUIRE(!p.plan.any_sfb());
  const CommPlan sfb = choose_comm(p.map.spec, CommMode::kSfb, 2, 1, kBatch, {});
  const std::size_t fc1 = kBatch * (6 + 5);
  {
    Raw peer(p.a.address(), sfb_identity("worker-1"));
    peer.send(1, 0, 3, fc1);  // fc1 goes through the shards: no factors of it yet
    wait_refused(p.a, 1);
    CHECK(p.a.refused().count(ps::Problem::kKey) == 1);
  }
  // Gone before worker-1's own connection takes its identity.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Agreed on step 3: the peers connect, and factors of 3 on are kept from now on.
  p.a.expect(sfb, 3);
  p.b.expect(sfb, 3);
  CHECK(!p.a.exchanges(0));  // not before step 3
  // At step 3, the momentum the shards had; one step of factors updates it as a shard would.
  std::map<int, std::vector<float>> momentum;
  for (int t = 0; t < int(p.map.spec.tensors.size()); ++t)
    momentum[t].assign(std::size_t(p.map.spec.tensors[t].numel), 0.25f);
  p.a.switch_plan(sfb, 3, momentum);
  p.b.switch_plan(sfb, 3, momentum);
  CHECK(p.a.exchanges(0));
  CHECK(p.a.applied(0) == 3);
  step(*p.net_a, 1);
  step(*p.net_b, 2);
  std::vector<float> w = copy_param(*p.net_a, 0), v = momentum[0], g(w.size());
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = p.net_a->grad(0)[i] + p.net_b->grad(0)[i];
  sgd_apply(p.map.exp.sgd, w.data(), g.data(), v.data(), w.size(), 0.5f);
  for (int l : {2, 0}) {
    send_all(p.a, l, 3, *p.net_a);
    send_all(p.b, l, 3, *p.net_b);
  }
  for (int l : {0, 2}) {
    p.a.apply_until(l, 4, *p.net_a);
    p.b.apply_until(l, 4, *p.net_b);
  }
  CHECK(copy_param(*p.net_a, 0) == copy_param(*p.net_b, 0));
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(p.net_a->param(0)[i] == Approx(w[i]).margin(1e-6));
    CHECK(p.a.momentum(0, 0)[i] == Approx(v[i]).margin(1e-6));  // what goes back to the shards
  }
  // Back to the shards from step 4: a peer's factors of fc1 are refused again.
  p.a.switch_plan(p.plan, 4, {});
  CHECK(!p.a.exchanges(0));
  send_all(p.b, 0, 4, *p.net_b);
  wait_refused(p.a, 2);
  CHECK(p.a.refused().count(ps::Problem::kKey) == 2);
}
