#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/error.hpp"
#include "ps/bench_raw.hpp"
#include "ps/transport_thread.hpp"
#include "ps/zmq_transport.hpp"
#include "transport_test_util.hpp"

using namespace psbed::ps;
using namespace psbed::ps::test;
using namespace std::chrono_literals;

namespace {

// A server that answers every Push with a PullReply carrying the very payload it received
// (sent from its receive callback, as a real server replies).
void start_echo(ZmqTransport& server) {
  server.start([&server](Message&& m) {
    Message reply;
    reply.header = m.header;
    reply.header.op = Op::kPullReply;
    reply.payload = std::move(m.payload);
    reply.peer = std::move(m.peer);
    server.send(std::move(reply));
  });
}

}  // namespace

TEST_CASE("small and 16 MiB payloads round-trip byte for byte", "[ps][transport]") {
  Inbox inbox;
  ZmqTransport server(server_options());
  start_echo(server);
  ZmqTransport client(client_options(server.endpoint(), "worker-0"));
  client.start(inbox.fn());
  REQUIRE(server.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  REQUIRE(server.endpoint() != "tcp://127.0.0.1:*");

  const std::vector<std::size_t> sizes = {0, 1, 100, 4096, 16u << 20};
  std::vector<Bytes> sent;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], static_cast<std::uint8_t>(i)));
    Payload p = Payload::share(sent.back());
    REQUIRE(client.send(push_message(p, static_cast<std::uint32_t>(i), 100 + i)));
  }
  REQUIRE(inbox.wait_for(sizes.size()));
  const auto replies = inbox.messages();
  REQUIRE(replies.size() == sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("message " << i << " of " << sizes[i] << " bytes");
    const Message& r = replies[i];  // one client, one server: order holds
    CHECK(r.header.op == Op::kPullReply);
    CHECK(r.header.key == i);
    CHECK(r.header.sequence == 100 + i);
    CHECK(r.header.length == sizes[i]);
    REQUIRE(r.payload.size() == sizes[i]);
    CHECK(std::equal(sent[i]->begin(), sent[i]->end(), r.payload.data()));
  }
  CHECK(server.bad_messages().total() == 0);
  CHECK(client.bad_messages().total() == 0);
}

TEST_CASE("payloads cross without copies on send and on receive", "[ps][transport]") {
  // The sender's buffer reports when it is freed and on which thread.
  struct Freed {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread::id on;
  } freed;
  struct Tracked {
    Tracked(std::vector<std::uint8_t> b, Freed* f) : bytes(std::move(b)), freed(f) {}
    ~Tracked() {
      std::lock_guard<std::mutex> lock(freed->mu);
      freed->done = true;
      freed->on = std::this_thread::get_id();
      freed->cv.notify_all();
    }
    std::vector<std::uint8_t> bytes;
    Freed* freed;
  };
  std::mutex mu;
  std::thread::id client_thread, server_thread;
  bool server_saw_own_frame = false;
  bool bytes_match = false;
  constexpr std::size_t kBytes = 4u << 20;
  const auto expected = pattern(kBytes, 9);

  // The server comes up only after the send, at an endpoint reserved here, so the message is
  // still inside the client's transport when the caller lets go of the buffer.
  std::string endpoint;
  {
    ZmqTransport probe(server_options());
    endpoint = probe.endpoint();
  }
  Inbox inbox;
  ZmqTransport client(client_options(endpoint, "worker-0"));
  client.start([&](Message&& m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      client_thread = std::this_thread::get_id();
    }
    inbox.fn()(std::move(m));
  });
  std::weak_ptr<Tracked> watch;
  {
    auto buffer = std::make_shared<Tracked>(*expected, &freed);
    watch = buffer;
    const Payload p(buffer, buffer->bytes.data(), buffer->bytes.size());
    REQUIRE(client.send(push_message(p, 0, 1)));
  }
  // The caller's references are gone, yet the buffer lives: the queued frame refers to it.
  CHECK_FALSE(watch.expired());

  ZmqOptions so = server_options();
  so.endpoint = endpoint;
  ZmqTransport server(so);
  server.start([&](Message&& m) {
    std::lock_guard<std::mutex> lock(mu);
    server_thread = std::this_thread::get_id();
    // The payload's bytes are the received frame's own bytes, not a copy of them.
    const zmq::message_t& frame = ZmqTransport::frame_of(m.payload);
    server_saw_own_frame = frame.data() == m.payload.data() && frame.size() == m.payload.size();
    bytes_match = std::equal(expected->begin(), expected->end(), m.payload.data());
    Message ack;
    ack.header = m.header;
    ack.header.op = Op::kPushAck;
    ack.peer = m.peer;
    server.send(std::move(ack));
  });
  REQUIRE(inbox.wait_for(1));
  {
    std::unique_lock<std::mutex> lock(freed.mu);
    REQUIRE(freed.cv.wait_for(lock, kWait, [&] { return freed.done; }));
    CHECK(watch.expired());
  }
  // Freed by ZeroMQ's free function on its I/O thread once the bytes were written: not by the
  // caller, and not by either transport's owner thread.
  std::lock_guard<std::mutex> lock(mu);
  CHECK(freed.on != std::this_thread::get_id());
  CHECK(freed.on != client_thread);
  CHECK(freed.on != server_thread);
  CHECK(server_saw_own_frame);
  CHECK(bytes_match);
}

TEST_CASE("a peer that stops reading holds up nobody and loses its own messages past its bound",
          "[ps][transport]") {
  constexpr int kToSlow = 100, kRoundTrips = 20;
  ZmqOptions so = server_options();
  so.peer_max_bytes = 16u << 20;
  ZmqTransport server(so);
  Inbox server_inbox;
  server.start([&](Message&& m) {
    if (m.header.op == Op::kPush) {  // the healthy client: ack from the callback
      Message ack{m.header, {}, m.peer};
      ack.header.op = Op::kPushAck;
      ack.header.length = 0;
      server.send(std::move(ack));
    }
    server_inbox.fn()(std::move(m));
  });

  // The slow client's callback waits (bounded) until the test lets it go: it stops reading, so
  // ZeroMQ's queues and the socket buffers towards it fill up.
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  Inbox slow_inbox;
  ZmqTransport slow(client_options(server.endpoint(), "slow"));
  slow.start([&](Message&& m) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, kWait, [&] { return released; });
    }
    slow_inbox.fn()(std::move(m));
  });
  Header hello;
  hello.op = Op::kHeartbeat;
  REQUIRE(slow.send(Message{hello, {}, {}}));
  REQUIRE(server_inbox.wait_for(1));  // the server knows the slow peer now

  // 100 MiB for a peer that reads nothing: the sending thread (a shard's reply thread) never
  // waits for it; past 16 MiB held for it, its messages are dropped and counted.
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(1u << 20, std::uint8_t(5));
  auto flood = std::async(std::launch::async, [&] {
    for (int i = 0; i < kToSlow; ++i) {
      Message m{Header{}, Payload::share(bytes), "slow"};
      m.header.op = Op::kPullReply;
      m.header.length = bytes->size();
      m.header.sequence = i;
      if (!server.send(std::move(m))) return false;
    }
    return true;
  });
  REQUIRE(flood.wait_for(kWait) == std::future_status::ready);
  CHECK(flood.get());

  Inbox fast_inbox;
  ZmqTransport fast(client_options(server.endpoint(), "fast"));
  fast.start(fast_inbox.fn());
  auto small = std::make_shared<const std::vector<std::uint8_t>>(1024, std::uint8_t(6));
  for (int i = 0; i < kRoundTrips; ++i) {
    REQUIRE(fast.send(push_message(Payload::share(small), 0, i)));
    REQUIRE(fast_inbox.wait_for(i + 1));  // answered while the slow peer's queue is full
  }
  for (int i = 0; i < 100 && server.dropped_unread() == 0; ++i) std::this_thread::sleep_for(10ms);
  const std::uint64_t dropped = server.dropped_unread();
  CHECK(dropped > 0);
  CHECK(dropped < kToSlow);

  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  // What was held for it arrives, in order: all but the dropped ones.
  REQUIRE(slow_inbox.wait_for(kToSlow - dropped));
  std::this_thread::sleep_for(100ms);
  const auto got = slow_inbox.messages();
  CHECK(got.size() == kToSlow - dropped);
  for (std::size_t i = 1; i < got.size(); ++i)
    CHECK(got[i].header.sequence > got[i - 1].header.sequence);
}

TEST_CASE("a transport thread that would wait on a send is caught", "[ps][transport]") {
  using namespace psbed::ps::transport_thread;
  CHECK_FALSE(current());
  {
    const Scope marked;
    CHECK(current());
  }
  CHECK_FALSE(current());
  assert_may_block("a call off any transport thread");  // fine: not marked
  // Strict (PSBED_STRICT_THREADS=1, or any debug build): a marked thread that asks aborts.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);  // the test framework's handler would report a failure
    setenv("PSBED_STRICT_THREADS", "1", 1);
    std::freopen("/dev/null", "w", stderr);
    const Scope marked;
    assert_may_block("a send that waits for room");
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("malformed frames are dropped and counted; the server keeps serving", "[ps][transport]") {
  Inbox inbox;
  ZmqOptions opt = server_options();
  opt.limits.max_message_bytes = 1u << 20;
  ZmqTransport server(opt);
  server.start(inbox.fn());

  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "raw");
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(server.endpoint());
  auto send_frames = [&](std::vector<std::string> frames) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      raw.send(zmq::buffer(frames[i]),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  };
  auto header = [](Header h) {
    const HeaderBytes b = encode_header(h);
    return std::string(b.begin(), b.end());
  };
  Header good;
  good.op = Op::kPush;
  good.length = 16;
  Header bad_magic = good;
  bad_magic.magic = 0x12345678;
  Header bad_op = good;
  bad_op.op = static_cast<Op>(77);

  send_frames({"short"});
  send_frames({header(bad_magic), std::string(16, 'x')});
  send_frames({header(good), std::string(12, 'x')});
  send_frames({header(good), std::string(16, 'x'), "extra"});
  send_frames({header(bad_op), std::string(16, 'x')});
  send_frames({header(good), std::string(16, 'y')});  // and then a good one

  REQUIRE(inbox.wait_for(1));
  auto got = inbox.messages();
  CHECK(got[0].peer == "raw");
  CHECK(got[0].payload.view() == std::string(16, 'y'));
  const BadMessageCounter& bad = server.bad_messages();
  CHECK(bad.total() == 5);
  CHECK(bad.count_from("raw") == 5);
  CHECK(bad.count(Problem::kHeaderSize) == 1);
  CHECK(bad.count(Problem::kMagic) == 1);
  CHECK(bad.count(Problem::kPayloadSize) == 1);
  CHECK(bad.count(Problem::kFrames) == 1);
  CHECK(bad.count(Problem::kOp) == 1);

  // A frame over the size limit makes ZeroMQ drop that connection; others are unaffected.
  zmq::socket_t big(ctx, zmq::socket_type::dealer);
  big.set(zmq::sockopt::linger, 0);
  big.connect(server.endpoint());
  Header huge = good;
  huge.length = 2u << 20;
  const std::string huge_payload(huge.length, 'z');
  big.send(zmq::buffer(header(huge)), zmq::send_flags::sndmore);
  big.send(zmq::buffer(huge_payload), zmq::send_flags::none);
  ZmqTransport client(client_options(server.endpoint(), "worker-0"));
  client.start([](Message&&) {});
  Header beat;
  beat.op = Op::kHeartbeat;
  REQUIRE(client.send(Message{beat, {}, {}}));
  REQUIRE(inbox.wait_for(2));
  got = inbox.messages();
  CHECK(got.back().peer == "worker-0");
  CHECK(got.back().header.op == Op::kHeartbeat);
}

TEST_CASE("send() rejects messages that contradict themselves", "[ps][transport]") {
  ZmqTransport server(server_options());
  Header beat;
  beat.op = Op::kHeartbeat;
  CHECK_THROWS_AS(server.send(Message{beat, {}, {}}), psbed::Error);  // no peer named
  ZmqTransport client(client_options(server.endpoint(), "w"));
  CHECK_THROWS_WITH(client.send(Message{beat, Payload::copy("{}"), {}}),
                    Catch::Contains("Heartbeat carries no payload"));
  Header push;
  push.op = Op::kPush;
  push.length = 16;
  CHECK_THROWS_WITH(client.send(Message{push, Payload::copy("12 bytes....."), {}}),
                    Catch::Contains("the header says 16"));
  CHECK_THROWS_WITH(ZmqTransport(client_options("nonsense", "w")), Catch::Contains("'nonsense'"));
}

TEST_CASE("the raw round-trip benchmark measures and checks an echo", "[ps][transport]") {
  RawBenchOptions o;
  o.bytes = 256u << 10;
  o.min_seconds = 0.05;
  o.min_round_trips = 5;
  const RawBenchResult r = bench_raw_round_trip(o);
  CHECK(r.bytes == o.bytes);
  CHECK(r.round_trips >= 5);
  CHECK(r.seconds > 0);
  CHECK(r.gb_per_s > 0);
}
