#include "core/consistency.hpp"

#include "core/error.hpp"

namespace psbed {

Consistency Consistency::parse(const std::string& text) {
  Consistency c;
  if (text == "async") return c.kind = Kind::kAsync, c;
  if (text == "bsp") return c.kind = Kind::kBsp, c;
  if (text.rfind("ssp:", 0) == 0) {
    try {
      std::size_t used = 0;
      c.staleness = std::stoi(text.substr(4), &used);
      if (used == text.size() - 4 && c.staleness >= 0) return c.kind = Kind::kSsp, c;
    } catch (const std::exception&) {
    }
  }
  throw Error("unknown consistency mode '" + text + "', expected async, bsp or ssp:K (K >= 0)");
}

std::string Consistency::str() const {
  switch (kind) {
    case Kind::kAsync:
      return "async";
    case Kind::kBsp:
      return "bsp";
    case Kind::kSsp:
      return "ssp:" + std::to_string(staleness);
  }
  return "?";
}

}  // namespace psbed
