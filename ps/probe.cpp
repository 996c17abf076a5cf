#include "ps/probe.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/error.hpp"
#include "ps/protocol.hpp"
#include "ps/zmq_frames.hpp"

namespace psbed::ps {
namespace {

struct Case {
  const char* what;
  std::vector<std::vector<std::uint8_t>> frames;
};

std::vector<std::uint8_t> header(const Header& h) {
  auto b = encode_header(h);
  return {b.begin(), b.end()};
}

Header push(std::uint32_t key, std::uint32_t part, std::uint64_t offset, std::uint64_t length,
            int sender) {
  Header h;
  h.op = Op::kPush;
  h.key = key, h.part = part, h.offset = offset, h.length = length,
  h.sender = std::uint32_t(sender);
  return h;
}

}  // namespace

int run_probe(const std::string& endpoint, int sender) {
  std::vector<Case> cases;
  std::vector<std::uint8_t> four(4, 0), eight(8, 0);
  cases.push_back({"short header frame", {std::vector<std::uint8_t>(10, 0)}});
  {
    Header h = push(0, 0, 0, 4, sender);
    h.magic = 0x12345678;
    cases.push_back({"bad magic", {header(h), four}});
  }
  {
    Header h = push(0, 0, 0, 4, sender);
    h.version = 9;
    cases.push_back({"bad version", {header(h), four}});
  }
  {
    Header h = push(0, 0, 0, 4, sender);
    h.op = static_cast<Op>(77);
    cases.push_back({"unknown op", {header(h), four}});
  }
  cases.push_back({"unknown key", {header(push(9999, 0, 0, 4, sender)), four}});
  cases.push_back({"unknown part", {header(push(0, 9999, 0, 4, sender)), four}});
  cases.push_back({"range past the part", {header(push(0, 0, 1ull << 30, 4, sender)), four}});
  cases.push_back({"truncated payload", {header(push(0, 0, 0, 8, sender)), four}});
  cases.push_back({"oversize length", {header(push(0, 0, 0, 1ull << 40, sender)), four}});
  cases.push_back({"extra frames", {header(push(0, 0, 0, 4, sender)), four, four}});
  cases.push_back({"sender is not a worker", {header(push(0, 0, 0, 4, 4000)), four}});
  cases.push_back({"misaligned offset", {header(push(0, 0, 2, 4, sender)), four}});
  // Well formed, in a worker's name, from a connection that is not that worker's.
  cases.push_back({"forged sender", {header(push(0, 0, 0, 4, sender)), four}});

  zmq::context_t ctx;
  int n = 0;
  for (const auto& c : cases) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    const std::string id = "probe-" + std::to_string(++n);
    s.set(zmq::sockopt::routing_id, id);
    s.set(zmq::sockopt::linger, 1000);
    // Queue only on a connection that is up, and wait a while for it: sent to nothing (a wrong
    // endpoint, a server not started), the messages would be counted as sent and lost.
    if (!connect_and_wait(s, endpoint, std::chrono::milliseconds(3000), "probe",
                          "tcp://127.0.0.1:7001"))
      throw Error(
          "probe: no connection to " + endpoint +
          " within 3 s (expected a running psbed server's endpoint)" +
          (n > 1 ? "; " + std::to_string(n - 1) + " message(s) were sent before" : std::string()));
    for (size_t i = 0; i < c.frames.size(); ++i) {
      zmq::message_t m(c.frames[i].data(), c.frames[i].size());
      s.send(m, i + 1 < c.frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    spdlog::info("sent {} as {}", c.what, id);
  }
  // Linger lets the frames leave before the sockets close.
  return n;
}

}  // namespace psbed::ps
