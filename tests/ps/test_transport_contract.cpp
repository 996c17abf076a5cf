// The transport contract (ps/transport.hpp), written once and run over every implementation x
// payload size, as gloo parameterises its transport tests. An implementation here is a way to
// make both ends of a connection: plain ZeroMQ, ZeroMQ behind a shaped link (a fast rate, so the
// cases stay quick, plus a small latency), and ZeroMQ behind a latency-only link (no pacing, but
// a delivery thread of its own). What only one implementation has (zero copies, dropped_unread,
// the token bucket's rate) stays in test_transport.cpp and test_link.cpp.
//
// Every case runs with the transport-thread rule strict (PSBED_STRICT_THREADS=1, as the stress
// tests run): a send that would wait on a thread that delivers messages aborts. Every wait is
// bounded; work that might hang runs on a thread the case never joins, and everything such a
// thread touches is shared, so a broken transport fails a check instead of hanging the run.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/error.hpp"
#include "ps/link.hpp"
#include "ps/transport_thread.hpp"
#include "ps/zmq_transport.hpp"
#include "transport_test_util.hpp"

using namespace psbed::ps;
using namespace psbed::ps::test;
using namespace std::chrono_literals;

namespace {

// ---- the implementations and sizes every case runs over ----

struct Implementation {
  const char* name;
  std::shared_ptr<Transport> (*make)(ZmqOptions);
};

std::shared_ptr<Transport> make_zmq(ZmqOptions o) {
  return std::make_shared<ZmqTransport>(std::move(o));
}

// Each end gets its own link, as each node has its own buckets.
std::shared_ptr<Transport> make_shaped(ZmqOptions o) {
  return std::make_shared<ShapedTransport>(std::make_unique<ZmqTransport>(std::move(o)),
                                           LinkBuckets::make(parse_link("10gbit", "20us")));
}

std::shared_ptr<Transport> make_latency_only(ZmqOptions o) {
  return std::make_shared<ShapedTransport>(std::make_unique<ZmqTransport>(std::move(o)),
                                           LinkBuckets::make(parse_link("", "100us")));
}

const Implementation kImplementations[] = {
    {"zmq", make_zmq},
    {"shaped 10gbit 20us", make_shaped},
    {"latency 100us, unshaped", make_latency_only},
};

const Implementation& implementation() {
  const int i = GENERATE(range(0, int(sizeof kImplementations / sizeof kImplementations[0])));
  return kImplementations[i];
}

std::size_t payload_size() { return GENERATE(as<std::size_t>(), 0, 1u << 10, 1u << 20, 16u << 20); }

// Fewer of the big ones: the cases check order and bytes, not throughput.
int messages_of(std::size_t bytes) {
  return bytes >= (16u << 20) ? 3 : bytes >= (1u << 20) ? 12 : 40;
}

// The transport-thread rule, strict for the case's duration.
class StrictThreads {
 public:
  StrictThreads() {
    if (const char* v = std::getenv(kName)) saved_ = v, had_ = true;
    setenv(kName, "1", 1);
  }
  ~StrictThreads() {
    if (had_)
      setenv(kName, saved_.c_str(), 1);
    else
      unsetenv(kName);
  }

 private:
  static constexpr const char* kName = "PSBED_STRICT_THREADS";
  std::string saved_;
  bool had_ = false;
};

// ---- helpers ----

// A server that answers each Push from its receive callback, as a shard may: a PullReply with
// the very payload it received. The reply goes out through `self`, which it must not own.
ReceiveFn echo(const std::shared_ptr<Inbox>& inbox, const std::weak_ptr<Transport>& self) {
  return [inbox, self](Message&& m) {
    Message reply{m.header, m.payload, m.peer};
    reply.header.op = Op::kPullReply;
    inbox->add(std::move(m));
    if (auto t = self.lock()) t->send(std::move(reply));
  };
}

// Runs `fn` on a thread the case never joins (holding what it captures): a wait on it is
// bounded by the case, and one that never ends fails a check instead of hanging the run.
std::future<bool> in_background(std::function<bool()> fn) {
  std::packaged_task<bool()> task(std::move(fn));
  std::future<bool> done = task.get_future();
  std::thread(std::move(task)).detach();
  return done;
}

bool stops_within(const std::shared_ptr<Transport>& t, std::chrono::milliseconds limit = 5s) {
  return in_background([t] {
           t->stop();
           return true;
         }).wait_for(limit) == std::future_status::ready;
}

// Sends 1 MiB pushes until one send() has not returned for a while: the link is full. Returns
// whether that happened, and the future of the sending thread (false once a send returned false).
std::future<bool> fill(const std::shared_ptr<Transport>& client, bool& blocked) {
  auto sent = std::make_shared<std::atomic<int>>(0);
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(1u << 20, std::uint8_t(1));
  std::future<bool> sender = in_background([client, bytes, sent] {
    for (int i = 0; i < 4096; ++i) {
      if (!client->send(push(bytes, 0, std::uint64_t(i)))) return false;
      ++*sent;
    }
    return true;
  });
  // Blocked: no progress for 300 ms (4 GiB can't fit in any link's queues and buffers).
  int last = -1;
  blocked = false;
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < kWait;) {
    std::this_thread::sleep_for(300ms);
    if (sender.wait_for(0s) == std::future_status::ready) break;
    if (*sent == last) {
      blocked = true;
      break;
    }
    last = *sent;
  }
  return sender;
}

// Strict mode, a server, and a client "worker-0" connected to it; each end records what it
// receives in its inbox. kEcho starts both as most cases want them: the server answers each Push
// with echo(). kIdle leaves both unstarted, for a case that checks them idle first or gives them
// callbacks of its own.
struct Connected {
  enum class Start { kEcho, kIdle };

  explicit Connected(const Implementation& impl, Start start = Start::kEcho)
      : server(impl.make(server_options())),
        client(impl.make(client_options(server->endpoint(), "worker-0"))) {
    if (start == Start::kIdle) return;
    server->start(echo(server_inbox, server));
    client->start(into(inbox));
  }
  Connected(const Connected&) = delete;
  Connected& operator=(const Connected&) = delete;

  const StrictThreads strict;  // first: strict before either end exists
  const std::shared_ptr<Inbox> server_inbox = std::make_shared<Inbox>();
  const std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  const std::shared_ptr<Transport> server;
  const std::shared_ptr<Transport> client;
};

}  // namespace

TEST_CASE("contract: a message round-trips byte for byte", "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const Connected c(impl);

  const Bytes sent = pattern(bytes, 7);
  Message m = push(sent, 3, 42);
  m.header.part = 5;
  m.header.offset = 128;
  m.header.clock = 9;
  m.header.priority = -2;
  m.header.sender = 11;
  REQUIRE(c.client->send(std::move(m)));
  REQUIRE(c.inbox->wait_for(1));

  for (const Message& got : {c.server_inbox->messages().at(0), c.inbox->messages().at(0)}) {
    CHECK(got.header.key == 3);
    CHECK(got.header.part == 5);
    CHECK(got.header.offset == 128);
    CHECK(got.header.clock == 9);
    CHECK(got.header.priority == -2);
    CHECK(got.header.sender == 11);
    CHECK(got.header.sequence == 42);
    CHECK(got.header.length == bytes);
    REQUIRE(got.payload.size() == bytes);
    CHECK(std::equal(sent->begin(), sent->end(), got.payload.data()));
  }
  CHECK(c.server_inbox->messages().at(0).peer == "worker-0");
  CHECK(c.server_inbox->messages().at(0).header.op == Op::kPush);
  CHECK(c.inbox->messages().at(0).header.op == Op::kPullReply);
  CHECK(c.server->bad_messages().total() == 0);
  CHECK(c.client->bad_messages().total() == 0);
  CHECK(stops_within(c.client));
  CHECK(stops_within(c.server));
}

TEST_CASE("contract: one sender's messages arrive in the order sent both ways",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const Connected c(impl);

  const int n = messages_of(bytes);
  std::vector<Bytes> sent;
  for (int i = 0; i < n; ++i) {
    sent.push_back(pattern(bytes, std::uint8_t(i)));
    REQUIRE(c.client->send(push(sent.back(), std::uint32_t(i), std::uint64_t(i))));
  }
  REQUIRE(c.inbox->wait_for(std::size_t(n)));
  const auto arrived = c.server_inbox->messages();
  const auto replies = c.inbox->messages();
  REQUIRE(arrived.size() == std::size_t(n));
  REQUIRE(replies.size() == std::size_t(n));
  for (int i = 0; i < n; ++i) {
    INFO("message " << i);
    CHECK(arrived[i].header.sequence == std::uint64_t(i));
    CHECK(replies[i].header.sequence == std::uint64_t(i));
    REQUIRE(replies[i].payload.size() == bytes);
    CHECK(std::equal(sent[i]->begin(), sent[i]->end(), replies[i].payload.data()));
  }
  CHECK(stops_within(c.client));
  CHECK(stops_within(c.server));
}

TEST_CASE("contract: several clients share one server each in its own order",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const StrictThreads strict;
  constexpr int kClients = 4;
  const int n = messages_of(bytes);

  // The server acknowledges each Push from its callback; it records sequences per peer.
  struct Seen {
    std::mutex mu;
    std::map<PeerId, std::vector<std::uint64_t>> by_peer;
  };
  auto seen = std::make_shared<Seen>();
  std::shared_ptr<Transport> server = impl.make(server_options());
  std::weak_ptr<Transport> self = server;
  server->start([seen, self](Message&& m) {
    {
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->by_peer[m.peer].push_back(m.header.sequence);
    }
    Message ack{m.header, {}, m.peer};
    ack.header.op = Op::kPushAck;
    if (auto t = self.lock()) t->send(std::move(ack));
  });

  std::vector<std::shared_ptr<Inbox>> inboxes;
  std::vector<std::shared_ptr<Transport>> clients;
  for (int c = 0; c < kClients; ++c) {
    inboxes.push_back(std::make_shared<Inbox>());
    clients.push_back(impl.make(client_options(server->endpoint(), "worker-" + std::to_string(c))));
    clients.back()->start(into(inboxes.back()));
  }
  // All clients send at once, each from its own thread.
  const Bytes payload = pattern(bytes, 3);
  std::vector<std::future<bool>> senders;
  for (int c = 0; c < kClients; ++c)
    senders.push_back(in_background([client = clients[c], payload, c, n] {
      for (int i = 0; i < n; ++i)
        if (!client->send(push(payload, std::uint32_t(c), std::uint64_t(i)))) return false;
      return true;
    }));
  for (auto& s : senders) {
    REQUIRE(s.wait_for(kWait) == std::future_status::ready);
    CHECK(s.get());
  }

  for (int c = 0; c < kClients; ++c) {
    INFO("client " << c);
    REQUIRE(inboxes[c]->wait_for(std::size_t(n)));
    const auto acks = inboxes[c]->messages();
    for (int i = 0; i < n; ++i) {
      CHECK(acks[i].header.op == Op::kPushAck);
      CHECK(acks[i].header.key == std::uint32_t(c));  // only its own acks
      CHECK(acks[i].header.sequence == std::uint64_t(i));
    }
  }
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    REQUIRE(seen->by_peer.size() == std::size_t(kClients));
    for (int c = 0; c < kClients; ++c) {
      const auto& seq = seen->by_peer["worker-" + std::to_string(c)];
      REQUIRE(seq.size() == std::size_t(n));
      for (int i = 0; i < n; ++i) CHECK(seq[i] == std::uint64_t(i));
    }
  }
  for (auto& c : clients) CHECK(stops_within(c));
  CHECK(stops_within(server));
}

TEST_CASE("contract: callbacks run on a thread marked as a transport thread",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const Connected c(impl);
  CHECK_FALSE(transport_thread::current());  // the case's own thread is none
  REQUIRE(c.client->send(push(pattern(bytes, 1), 0, 0)));
  REQUIRE(c.inbox->wait_for(1));
  CHECK_FALSE(c.server_inbox->off_transport_thread());
  CHECK_FALSE(c.inbox->off_transport_thread());
  CHECK(stops_within(c.client));
  CHECK(stops_within(c.server));
}

TEST_CASE("contract: send() from inside the callback never waits on a full link",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", the callback sends " << bytes << "-byte payloads");
  const StrictThreads strict;

  // The server is a raw socket the case drives: it reads nothing, so the client's link fills,
  // and it can still send the client a message, whose callback then sends more.
  auto ctx = std::make_shared<zmq::context_t>();
  zmq::socket_t raw(*ctx, zmq::socket_type::router);
  raw.set(zmq::sockopt::rcvhwm, 1);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::router_mandatory, true);
  raw.bind("tcp://127.0.0.1:*");
  const std::string endpoint = raw.get(zmq::sockopt::last_endpoint);

  struct Callback {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, all_sent = true;
    std::weak_ptr<Transport> self;
  };
  auto cb = std::make_shared<Callback>();
  const int n = messages_of(bytes);
  const Bytes payload = pattern(bytes, 2);
  std::shared_ptr<Transport> client = impl.make(client_options(endpoint, "w"));
  cb->self = client;
  client->start([cb, payload, n](Message&&) {
    bool ok = true;
    if (auto t = cb->self.lock())
      for (int i = 0; i < n; ++i) ok = t->send(push(payload, 1, std::uint64_t(i))) && ok;
    std::lock_guard<std::mutex> lock(cb->mu);
    cb->done = true;
    cb->all_sent = ok;
    cb->cv.notify_all();
  });

  bool blocked = false;
  std::future<bool> filler = fill(client, blocked);
  REQUIRE(blocked);

  // One message to the client (the router knows it once it connected).
  Header h;
  h.op = Op::kPushAck;
  const HeaderBytes head = encode_header(h);
  bool delivered = false;
  for (auto t0 = std::chrono::steady_clock::now();
       !delivered && std::chrono::steady_clock::now() - t0 < kWait;) {
    try {
      delivered =
          raw.send(zmq::buffer("w", 1), zmq::send_flags::sndmore | zmq::send_flags::dontwait)
              .has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) throw;
      std::this_thread::sleep_for(10ms);
    }
  }
  REQUIRE(delivered);
  raw.send(zmq::buffer(head.data(), head.size()), zmq::send_flags::none);
  {
    std::unique_lock<std::mutex> lock(cb->mu);
    CHECK(cb->cv.wait_for(lock, kWait, [&] { return cb->done; }));
    CHECK(cb->all_sent);
  }
  // And stop() still releases the sender that filled the link.
  CHECK(stops_within(client));
  REQUIRE(filler.wait_for(kWait) == std::future_status::ready);
  CHECK_FALSE(filler.get());
}

TEST_CASE("contract: stop() is idempotent and releases a sender blocked on a link nobody reads",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  INFO(impl.name);
  const StrictThreads strict;

  // A server bound but never started: the connection is accepted and nothing reads it.
  ZmqOptions so = server_options();
  so.receive_hwm = 1;
  std::shared_ptr<Transport> silent = impl.make(so);
  std::shared_ptr<Transport> client = impl.make(client_options(silent->endpoint(), "w"));
  client->start([](Message&&) {});
  bool blocked = false;
  std::future<bool> filler = fill(client, blocked);
  REQUIRE(blocked);

  CHECK(stops_within(client));
  REQUIRE(filler.wait_for(kWait) == std::future_status::ready);
  CHECK_FALSE(filler.get());
  CHECK(stops_within(client));  // again: nothing left to do, returns at once
  CHECK(stops_within(silent));
  CHECK(stops_within(silent));
}

TEST_CASE("contract: send() after stop() returns false and drops the message",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const Connected c(impl, Connected::Start::kIdle);
  c.server->start(into(c.server_inbox));
  c.client->start([](Message&&) {});
  REQUIRE(c.client->send(push(pattern(bytes, 4), 0, 0)));
  REQUIRE(c.server_inbox->wait_for(1));

  CHECK(stops_within(c.client));
  CHECK_FALSE(c.client->send(push(pattern(bytes, 4), 0, 1)));
  CHECK(stops_within(c.server));
  Message to_peer = push(pattern(bytes, 4), 0, 2);
  to_peer.peer = "worker-0";
  CHECK_FALSE(c.server->send(std::move(to_peer)));
}

TEST_CASE("contract: a message that contradicts itself is refused with an error",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  const std::size_t bytes = payload_size();
  INFO(impl.name << ", " << bytes << "-byte payloads");
  const Connected c(impl, Connected::Start::kIdle);
  Header beat;
  beat.op = Op::kHeartbeat;
  CHECK_THROWS_WITH(c.client->send(Message{beat, {}, {}}), Catch::Contains("before start()"));
  c.server->start([](Message&&) {});
  c.client->start([](Message&&) {});

  const Bytes payload = pattern(bytes + 1, 5);                           // never empty
  CHECK_THROWS_AS(c.server->send(Message{beat, {}, {}}), psbed::Error);  // no peer named
  CHECK_THROWS_WITH(c.client->send(Message{beat, Payload::share(payload), {}}),
                    Catch::Contains("Heartbeat carries no payload"));
  Message lies = push(payload, 0, 0);
  lies.header.length = bytes;  // one byte short of the payload
  CHECK_THROWS_WITH(c.client->send(std::move(lies)),
                    Catch::Contains("the header says " + std::to_string(bytes)));
  Message huge = push(pattern(0, 0), 0, 0);
  huge.header.length = Limits{}.max_message_bytes + 1;
  CHECK_THROWS_AS(c.client->send(std::move(huge)), psbed::Error);
  // The transports still work after refusing them.
  Message fine = push(payload, 0, 1);
  fine.peer = "worker-0";
  CHECK(c.server->send(std::move(fine)));
  CHECK(stops_within(c.client));
  CHECK(stops_within(c.server));
}

TEST_CASE("contract: a server's send() never waits for a peer that does not read",
          "[ps][transport][contract]") {
  const Implementation& impl = implementation();
  INFO(impl.name);
  const StrictThreads strict;
  constexpr int kToSlow = 64, kRoundTrips = 10;

  auto server_inbox = std::make_shared<Inbox>();
  std::shared_ptr<Transport> server = impl.make(server_options());
  server->start(echo(server_inbox, server));

  // The slow client's callback waits (bounded) until the case lets it go: it stops reading.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  std::shared_ptr<Transport> slow = impl.make(client_options(server->endpoint(), "slow"));
  slow->start([gate](Message&&) {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait_for(lock, kWait, [&] { return gate->open; });
  });
  REQUIRE(slow->send(push(pattern(0, 0), 0, 0)));
  REQUIRE(server_inbox->wait_for(1));  // the server knows the slow peer now

  // 64 MiB for a peer that reads nothing, from a thread that is not the transport's (a shard's
  // reply thread): it is handed over, or dropped, but its sender never waits for that peer.
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(1u << 20, std::uint8_t(5));
  std::future<bool> flood = in_background([server, bytes] {
    for (int i = 0; i < kToSlow; ++i) {
      Message m{Header{}, Payload::share(bytes), "slow"};
      m.header.op = Op::kPullReply;
      m.header.length = bytes->size();
      m.header.sequence = std::uint64_t(i);
      if (!server->send(std::move(m))) return false;
    }
    return true;
  });
  CHECK(flood.wait_for(kWait) == std::future_status::ready);

  auto fast_inbox = std::make_shared<Inbox>();
  std::shared_ptr<Transport> fast = impl.make(client_options(server->endpoint(), "fast"));
  fast->start(into(fast_inbox));
  const Bytes small = pattern(1024, 6);
  for (int i = 0; i < kRoundTrips; ++i) {
    REQUIRE(fast->send(push(small, 0, std::uint64_t(i))));
    REQUIRE(
        fast_inbox->wait_for(std::size_t(i + 1)));  // answered while the slow peer reads nothing
  }
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
  CHECK(stops_within(fast));
  CHECK(stops_within(slow));
  CHECK(stops_within(server));
}
