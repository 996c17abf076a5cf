// Link emulation: sustained transfers through a shaped transport never beat the set rate by more
// than 5%, and several senders share one node's ingress rather than each getting its own.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ps/link.hpp"
#include "ps/zmq_transport.hpp"

using namespace psbed::ps;
using Clock = std::chrono::steady_clock;

TEST_CASE("a token bucket hands out bytes at its rate, with bounded idle credit", "[ps][link]") {
  TokenBucket b(1e6, 1000);  // 1 MB/s, 1 KB of credit
  const auto t0 = Clock::now();
  auto t1 = b.reserve(500000, t0);  // starts with up to 1 ms of credit
  auto t2 = b.reserve(500000, t0);
  const double d1 = std::chrono::duration<double>(t1 - t0).count();
  const double d2 = std::chrono::duration<double>(t2 - t0).count();
  CHECK(d1 == Approx(0.5 - 0.001).margin(1e-6));
  CHECK(d2 == Approx(1.0 - 0.001).margin(1e-6));
  // After a long idle spell, only the burst carries over.
  auto t3 = b.reserve(1000, t0 + std::chrono::seconds(10));
  CHECK(std::chrono::duration<double>(t3 - (t0 + std::chrono::seconds(10))).count() ==
        Approx(0.0).margin(1e-6));
}

namespace {

// Sends `bytes` in 4 MiB Push messages from each of `senders` clients to one server whose link
// is shaped to `bps`; returns the measured rate in bits per second, first send to last arrival.
double measure_bps(double bps, std::uint64_t bytes_per_sender, int senders) {
  ZmqOptions so;
  so.role = ZmqOptions::Role::kServer;
  so.endpoint = "tcp://127.0.0.1:*";
  auto link = LinkBuckets::make(parse_link(std::to_string(bps) + "bit", ""));
  ShapedTransport server(std::make_unique<ZmqTransport>(so), link);
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t received = 0;
  Clock::time_point last;
  const std::uint64_t total = bytes_per_sender * std::uint64_t(senders);
  server.start([&](Message&& m) {
    std::lock_guard<std::mutex> lock(mu);
    received += m.payload.size();
    last = Clock::now();
    cv.notify_all();
  });
  const std::uint64_t chunk = 4 << 20;
  auto buf = std::make_shared<std::vector<std::uint8_t>>(chunk, 7);
  std::vector<std::unique_ptr<ZmqTransport>> clients;
  for (int i = 0; i < senders; ++i) {
    ZmqOptions co;
    co.endpoint = server.endpoint();
    co.identity = "sender-" + std::to_string(i);
    clients.push_back(std::make_unique<ZmqTransport>(co));
    clients.back()->start([](Message&&) {});
  }
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < senders; ++i)
    threads.emplace_back([&, i] {
      for (std::uint64_t sent = 0; sent < bytes_per_sender; sent += chunk) {
        Message m;
        m.header.op = Op::kPush;
        m.header.length = chunk;
        m.payload = Payload::share<std::uint8_t>(buf);
        clients[i]->send(std::move(m));
      }
    });
  for (auto& t : threads) t.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return received >= total; }));
  }
  for (auto& c : clients) c->stop();
  server.stop();
  return double(received + (received / chunk) * kHeaderBytes) * 8 /
         std::chrono::duration<double>(last - start).count();
}

}  // namespace

// The ceiling is the shaping's contract and holds on any machine. "paced:" tests run alone under
// `make test` (a second test beside them would take the cores their pacer needs). The floor only
// catches a pacer that stalls or serialises senders: on a loaded 2-core machine the pacer's thread
// wakes late and 1 Gbit/s has measured 894 Mbit/s. The bucket's arithmetic is checked exactly
// above.
constexpr double kCeiling = 1.05;
constexpr double kFloor = 0.7;

TEST_CASE("paced: a 64 MiB transfer runs at the set rate, never above it by more than 5%",
          "[ps][link]") {
  for (double bps : {100e6, 1e9}) {
    const double got = measure_bps(bps, 64ull << 20, 1);
    INFO("set " << bps / 1e6 << " Mbit/s, measured " << got / 1e6 << " Mbit/s");
    CHECK(got / bps <= kCeiling);
    CHECK(got / bps >= kFloor);
  }
}

TEST_CASE("paced: four senders share one node's ingress, together at most its rate", "[ps][link]") {
  const double bps = 1e9;
  const double got = measure_bps(bps, 16ull << 20, 4);
  INFO("set 1000 Mbit/s, 4 senders together measured " << got / 1e6 << " Mbit/s");
  CHECK(got / bps <= kCeiling);
  CHECK(got / bps >= kFloor);
}

TEST_CASE("with a rate set every message still arrives one full latency after it came in",
          "[ps][link]") {
  // The ingress bucket's unused credit dates a reservation back by up to its burst (5 ms at
  // 100 Mbit/s); the latency is added to the time the bytes pass, never to a time in the past.
  ZmqOptions so;
  so.role = ZmqOptions::Role::kServer;
  so.endpoint = "tcp://127.0.0.1:*";
  const double latency_s = 0.02;
  ShapedTransport server(std::make_unique<ZmqTransport>(so),
                         LinkBuckets::make(parse_link("100mbit", "20ms")));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> delays;
  std::vector<Clock::time_point> sent(5);
  server.start([&](Message&& m) {
    std::lock_guard<std::mutex> lock(mu);
    delays.push_back(std::chrono::duration<double>(Clock::now() - sent[m.header.key]).count());
    cv.notify_all();
  });
  ZmqOptions co;
  co.endpoint = server.endpoint();
  co.identity = "sender";
  ZmqTransport client(co);
  client.start([](Message&&) {});
  for (std::uint32_t i = 0; i < 5; ++i) {
    // Idle spells between small messages: the bucket has its whole burst of credit each time.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    Message m;
    m.header.op = Op::kPull;
    m.header.key = i;
    {
      std::lock_guard<std::mutex> lock(mu);
      sent[i] = Clock::now();
    }
    client.send(std::move(m));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return delays.size() == 5; }));
  }
  client.stop();
  server.stop();
  for (double d : delays) {
    INFO("delivered " << d * 1e3 << " ms after it was sent, latency 20 ms");
    CHECK(d >= latency_s);
  }
}
