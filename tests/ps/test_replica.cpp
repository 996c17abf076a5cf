// --replicas 2 at the shard level, with the links between the shards played by hand: a primary
// holds a push's ack until its backup has the update; the backup's copy is the primary's state;
// after a fail-over the backup serves it and acknowledges a resent push without applying it again.
#include <catch2/catch.hpp>

#include "fake_link.hpp"
#include "ps/shard.hpp"
#include "tiny_map.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

ClusterMap two_shard_map(const std::string& mode, int workers) {
  ClusterMap m = tiny_fc_map(mode, workers, 0.9f, 2);
  m.exp.replicas = 2;
  return m;
}

// Two shards: each has its server link (what it answers) and its link to its backup.
struct Pair {
  ClusterMap map;
  FakeLink server[2], backup[2];
  TraceRecorder trace{"t", false};
  std::unique_ptr<Shard> shard[2];
  Part part;  // a part of shard 0's
  explicit Pair(const std::string& mode, int workers) : map(two_shard_map(mode, workers)) {
    for (int s = 0; s < 2; ++s) {
      shard[s] = std::make_unique<Shard>(1 << 20, server[s], trace, 1);
      // The link is owned by the shard; the test keeps talking to it through backup[s].
      FakeLink* link = &backup[s];
      shard[s]->connect_backup([link](const std::string&) {
        return BackupLink{std::make_shared<Forwarder>(*link), [] {}};
      });
      shard[s]->start(map, s);
    }
    for (const Part& p : map.plan.parts)
      if (p.shard == 0) part = p;
  }
  ~Pair() {
    for (auto& s : shard) s->stop();
  }
  // Passes a transport's calls on to a FakeLink the test holds.
  struct Forwarder : Transport {
    explicit Forwarder(FakeLink& l) : link(l) {}
    FakeLink& link;
    void start(ReceiveFn f) override { link.start(std::move(f)); }
    bool send(Message m) override { return link.send(std::move(m)); }
    void stop() override {}
    std::string endpoint() const override { return "fake"; }
    const BadMessageCounter& bad_messages() const override { return link.bad_messages(); }
  };
  Message push(int worker, std::uint64_t seq, std::uint64_t clock, float value) {
    auto g = std::make_shared<std::vector<float>>(std::size_t(part.numel), value);
    Message m;
    m.peer = "worker-" + std::to_string(worker);
    m.header.op = Op::kPush;
    m.header.sender = std::uint32_t(worker);
    m.header.key = std::uint32_t(part.key), m.header.part = std::uint32_t(part.part);
    m.header.length = std::uint64_t(part.bytes());
    m.header.clock = clock, m.header.sequence = seq;
    m.payload = Payload::share(std::shared_ptr<const std::vector<float>>(g));
    return m;
  }
  Message pull(std::uint64_t seq, std::uint64_t clock) {
    Message m = push(0, seq, clock, 0);
    m.header.op = Op::kPull;
    m.payload = Payload();
    return m;
  }
  // The backup takes the primary's n-th forward, and its answer goes back to the primary.
  Message replicate(std::size_t n, std::size_t backup_answers) {
    Message f = backup[0].wait_for(n);
    f.peer = map.servers[0].link_id;
    shard[1]->enqueue(std::move(f));
    Message ack = server[1].wait_for(backup_answers);
    backup[0].deliver(ack);
    return ack;
  }
  std::vector<float> values(int s, std::size_t answers, std::uint64_t seq, std::uint64_t clock) {
    shard[s]->enqueue(pull(seq, clock));
    const Message r = server[s].wait_for(answers);
    REQUIRE(r.header.op == Op::kPullReply);
    const float* f = reinterpret_cast<const float*>(r.payload.data());
    return std::vector<float>(f, f + part.numel);
  }
};

}  // namespace

TEST_CASE("async: a push is acknowledged once the backup has it, and survives the primary",
          "[ps][replica]") {
  Pair p("async", 1);
  p.shard[0]->enqueue(p.push(0, 1, 0, 1.0f));
  const Message f = p.backup[0].wait_for(1);
  CHECK(f.header.op == Op::kReplicate);
  CHECK(f.header.flags == 0);
  CHECK(f.header.priority == 0);            // the worker
  CHECK(f.header.sequence == 1);            // its push's
  CHECK(p.server[0].settled_count() == 0);  // no ack before the backup answers
  const Message answer = p.replicate(1, 1);
  CHECK(answer.header.op == Op::kPushAck);
  const Message ack = p.server[0].wait_for(1);
  CHECK(ack.header.op == Op::kPushAck);
  CHECK(ack.peer == "worker-0");
  CHECK(ack.header.sequence == 1);
  const std::vector<float> primary = p.values(0, 2, 2, 0);

  // server-0 is dead: server-1 serves its part from the copy, the same floats.
  p.shard[1]->server_dead(0);
  CHECK(p.shard[1]->promoted());
  CHECK(p.values(1, 2, 3, 0) == primary);
  // The worker resends the push it may not have seen acknowledged: acked, not applied again.
  p.shard[1]->enqueue(p.push(0, 1, 0, 1.0f));
  CHECK(p.server[1].wait_for(3).header.op == Op::kPushAck);
  CHECK(p.shard[1]->replayed() == 1);
  CHECK(p.values(1, 4, 4, 0) == primary);
  // A new push is applied.
  p.shard[1]->enqueue(p.push(0, 5, 1, 1.0f));
  CHECK(p.server[1].wait_for(5).header.op == Op::kPushAck);
  CHECK(p.values(1, 6, 6, 1) != primary);
}

TEST_CASE("bsp: each push's ack waits for the backup, and the copy applies a clock when told",
          "[ps][replica]") {
  Pair p("bsp", 2);
  p.shard[0]->enqueue(p.push(0, 1, 0, 1.0f));
  const Message f0 = p.backup[0].wait_for(1);
  CHECK(f0.header.flags == 0);  // the push itself
  CHECK(p.server[0].settled_count() == 0);
  p.replicate(1, 1);
  // Worker 0's ack goes although worker 1 has not pushed clock 0: a credit waiting on acks
  // never waits on another worker.
  CHECK(p.server[0].wait_for(1).header.sequence == 1);
  p.shard[0]->enqueue(p.push(1, 1, 0, 3.0f));
  const Message f1 = p.backup[0].wait_for(2);
  CHECK(f1.header.flags == 0);
  const Message done = p.backup[0].wait_for(3);
  CHECK(done.header.flags == 1);     // clock 0 applied
  CHECK(done.header.priority == 2);  // averaging two workers
  CHECK(done.header.length == 0);
  p.replicate(2, 2);
  Message marker = done;
  marker.peer = p.map.servers[0].link_id;
  p.shard[1]->enqueue(std::move(marker));  // not answered: nothing waits on it
  CHECK(p.server[0].wait_for(2).header.op == Op::kPushAck);
  const std::vector<float> primary = p.values(0, 3, 2, 1);
  p.shard[1]->server_dead(0);
  CHECK(p.values(1, 3, 3, 1) == primary);
  // A resent push the copy has is acknowledged only.
  p.shard[1]->enqueue(p.push(1, 1, 0, 3.0f));
  CHECK(p.server[1].wait_for(4).header.op == Op::kPushAck);
  CHECK(p.shard[1]->replayed() == 1);
  CHECK(p.values(1, 5, 4, 1) == primary);
}

TEST_CASE("bsp: a clock the copy holds whole when it takes over is applied then", "[ps][replica]") {
  Pair p("bsp", 2);
  p.shard[0]->enqueue(p.push(0, 1, 0, 1.0f));
  p.shard[0]->enqueue(p.push(1, 1, 0, 3.0f));
  p.replicate(1, 1);
  p.replicate(2, 2);
  CHECK(p.server[0].wait_for(2).header.op == Op::kPushAck);  // both acks out before the pull
  const std::vector<float> primary = p.values(0, 3, 2, 1);
  // The primary dies before its word that clock 0 was applied reaches the copy.
  p.shard[1]->server_dead(0);
  CHECK(p.values(1, 3, 3, 1) == primary);
}

TEST_CASE("a backup refuses forwards from anyone but the shard it backs up", "[ps][replica]") {
  Pair p("async", 1);
  p.shard[0]->enqueue(p.push(0, 1, 0, 1.0f));
  Message f = p.backup[0].wait_for(1);
  f.peer = "worker-0";  // a worker's connection, claiming to be server-0
  p.shard[1]->enqueue(std::move(f));
  CHECK(p.server[1].settled_count() == 0);
  CHECK(p.shard[1]->bad().total() == 1);
}
