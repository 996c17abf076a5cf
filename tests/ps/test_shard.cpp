// The shard engine behind a fake transport: what it answers, and that gradient bytes at any
// address (ZeroMQ hands small frames over inside its receive buffer, at odd offsets) are applied
// exactly as aligned ones.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/param_init.hpp"
#include "ps/shard.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

// Records what the shard sends.
class FakeTransport : public Transport {
 public:
  void start(ReceiveFn) override {}
  bool send(Message msg) override {
    std::lock_guard<std::mutex> l(mu_);
    sent_.push_back(std::move(msg));
    cv_.notify_all();
    return true;
  }
  void stop() override {}
  std::string endpoint() const override { return "fake"; }
  const BadMessageCounter& bad_messages() const override { return bad_; }

  // Waits (bounded) for the n-th message sent.
  Message wait_for(std::size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    REQUIRE(cv_.wait_for(l, std::chrono::seconds(10), [&] { return sent_.size() >= n; }));
    return sent_[n - 1];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> sent_;
  BadMessageCounter bad_;
};

ClusterMap one_fc_map() {
  const char* toml = "input = [1, 1, 4]\nclasses = 2\n[[layer]]\ntype = \"fc\"\nout = 2\n";
  ClusterMap m;
  m.exp.model_name = "tiny";
  m.exp.model_toml = toml;
  m.exp.mode = Consistency::parse("async");
  m.exp.sgd = {0.5f, 0.0f, 0.0f};
  m.exp.steps = 100;
  m.spec = parse_model_spec(toml, "tiny");
  m.plan = make_partition(m.spec, 1 << 20, 1);
  m.servers.push_back({"server", 0, "server-0", "x"});
  m.workers.push_back({"worker", 0, "worker-0", ""});
  return m;
}

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
  const ClusterMap map = one_fc_map();
  std::vector<float> w0(8);
  init_tensor(map.spec, 0, map.exp.seed, w0.data());

  // Eight gradient floats starting one byte into the buffer.
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(1 + 32);
  for (int i = 0; i < 8; ++i) {
    const float g = float(i + 1);
    std::memcpy(bytes->data() + 1 + 4 * i, &g, 4);
  }
  const Payload grad(bytes, bytes->data() + 1, 32);

  FakeTransport transport;
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
