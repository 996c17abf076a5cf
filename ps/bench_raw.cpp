#include "ps/bench_raw.hpp"

#include <pthread.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/error.hpp"
#include "ps/zmq_frames.hpp"

namespace psbed::ps {
namespace {

// The ROUTER side: echoes every frame it receives back to its sender, until an empty frame.
// Its destructor shuts the context down and joins, so an error on the client side can't leave
// the thread behind.
class Echo {
 public:
  explicit Echo(std::chrono::milliseconds timeout) : socket_(ctx_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { run(); });
  }
  ~Echo() {
    ctx_.shutdown();
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void run() {
    pthread_setname_np(pthread_self(), "ps-bench-echo");
    try {
      for (;;) {
        zmq::message_t id, data;
        if (!socket_.recv(id) || !socket_.recv(data) || data.size() == 0) break;
        socket_.send(id, zmq::send_flags::sndmore);
        socket_.send(data, zmq::send_flags::none);  // the received frame itself: no copy
      }
    } catch (const zmq::error_t&) {
      // ETERM from the destructor: done.
    }
    socket_.close();
  }

  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
  std::thread thread_;
};

using Clock = std::chrono::steady_clock;

void round_trip(zmq::socket_t& dealer, const Payload& payload) {
  zmq::message_t frame = zero_copy_frame(payload);
  dealer.send(frame, zmq::send_flags::none);
  zmq::message_t reply;
  if (!dealer.recv(reply)) throw Error("raw benchmark: no echo within the timeout");
  // Sampled check (a full compare would measure memcmp, not the link).
  const auto* got = reply.data<std::uint8_t>();
  const std::size_t n = payload.size();
  if (reply.size() != n || got[0] != payload.data()[0] || got[n / 2] != payload.data()[n / 2] ||
      got[n - 1] != payload.data()[n - 1])
    throw Error("raw benchmark: the echo of " + std::to_string(n) + " bytes came back as " +
                std::to_string(reply.size()) + " different bytes");
}

}  // namespace

RawBenchResult bench_raw_round_trip(const RawBenchOptions& opt) {
  if (opt.bytes == 0) throw Error("raw benchmark: message size is 0, expected at least 1 byte");
  auto buffer = std::make_shared<std::vector<std::uint8_t>>(opt.bytes);
  for (std::size_t i = 0; i < buffer->size(); ++i)
    (*buffer)[i] = static_cast<std::uint8_t>(i * 131 + 7);
  const Payload payload = Payload::share(std::shared_ptr<const std::vector<std::uint8_t>>(buffer));

  Echo echo(opt.timeout);
  zmq::context_t ctx{1};
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, static_cast<int>(opt.timeout.count()));
  dealer.set(zmq::sockopt::sndtimeo, static_cast<int>(opt.timeout.count()));
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(echo.endpoint());

  for (int i = 0; i < opt.warmup_round_trips; ++i) round_trip(dealer, payload);
  RawBenchResult r;
  r.bytes = opt.bytes;
  const auto start = Clock::now();
  do {
    round_trip(dealer, payload);
    ++r.round_trips;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (r.seconds < opt.min_seconds ||
           r.round_trips < static_cast<std::uint64_t>(opt.min_round_trips));

  zmq::message_t done;  // the empty frame that ends the echo loop
  (void)dealer.send(done, zmq::send_flags::dontwait);
  r.gb_per_s =
      2.0 * static_cast<double>(opt.bytes) * static_cast<double>(r.round_trips) / r.seconds / 1e9;
  r.round_trip_ms = 1e3 * r.seconds / static_cast<double>(r.round_trips);
  return r;
}

}  // namespace psbed::ps
