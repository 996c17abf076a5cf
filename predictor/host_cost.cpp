#include "predictor/host_cost.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace psbed::predictor {
namespace {

constexpr std::size_t kChunk = 1 << 20;
constexpr std::size_t kTotal = 64 << 20;

// Closes its descriptor on every path.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void check(bool ok, const char* what) {
  if (!ok)
    throw Error(std::string("measuring the host's copy cost: ") + what + ": " +
                std::strerror(errno));
}

}  // namespace

double measure_copy_cpu_ns_per_byte() {
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  check(listener.fd >= 0, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
  check(::listen(listener.fd, 1) == 0, "listen");
  socklen_t len = sizeof addr;
  check(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
  Fd sender(::socket(AF_INET, SOCK_STREAM, 0));
  check(sender.fd >= 0, "socket");
  check(::connect(sender.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "connect");
  Fd receiver(::accept(listener.fd, nullptr, nullptr));
  check(receiver.fd >= 0, "accept");

  std::vector<char> out(kChunk, 1), in(kChunk), copy(kChunk);
  const double cpu0 = process_cpu_s();
  std::thread reading([&] {  // the receiving side, as a node's I/O thread
    std::size_t got = 0;
    while (got < kTotal) {
      const ssize_t n = ::read(receiver.fd, in.data(), in.size());
      if (n <= 0) return;
      got += std::size_t(n);
      std::memcpy(copy.data(), in.data(), std::size_t(n));
    }
  });
  std::size_t sent = 0;
  while (sent < kTotal) {
    const ssize_t n = ::write(sender.fd, out.data(), out.size());
    if (n <= 0) break;
    sent += std::size_t(n);
  }
  ::shutdown(sender.fd, SHUT_WR);
  reading.join();
  check(sent == kTotal, "write");
  return (process_cpu_s() - cpu0) * 1e9 / double(kTotal);
}

}  // namespace psbed::predictor
