#include "ps/host_lookup.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <memory>

namespace psbed::ps {

std::string unresolved_host(const std::string& endpoint) {
  const std::string scheme = "tcp://";
  if (endpoint.rfind(scheme, 0) != 0) return "";
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < scheme.size()) return "";
  std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  // ZeroMQ's "interface;address" form: the part after the semicolon is the peer.
  if (const std::size_t semi = host.find(';'); semi != std::string::npos)
    host = host.substr(semi + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "*") return "";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(found, &::freeaddrinfo);
  if (rc == 0) return "";
  return "its host '" + host + "' does not resolve (" + ::gai_strerror(rc) + ")";
}

}  // namespace psbed::ps
