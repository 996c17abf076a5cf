#include "ps/transport.hpp"

#include <cctype>
#include <cstdio>

namespace psbed::ps {

std::string peer_name(const PeerId& peer) {
  if (peer.empty()) return "(no id)";
  bool printable = true;
  for (unsigned char c : peer) printable = printable && std::isprint(c);
  if (printable) return peer;
  // ZeroMQ's made-up identities are binary (a zero byte and a counter).
  std::string hex = "0x";
  char buf[3];
  for (unsigned char c : peer) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    hex += buf;
  }
  return hex;
}

}  // namespace psbed::ps
