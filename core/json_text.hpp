// JSON from outside the process (a peer's message, an HTTP body, a file) as error messages quote
// it and as psbed parses it from the network: never dumped whole, never nested without bound.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace psbed {

// A value as an error message quotes it: a scalar as written (a long string cut short), an array
// or an object by its kind and size. A container is never dumped: a deeply nested one would
// overflow the stack of the dump (one level a call), and a large one would flood the line.
inline std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " item(s)";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " key(s)";
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) {
    std::size_t n = 77;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
      --n;  // not inside a UTF-8 character
    s = s.substr(0, n) + "...";
  }
  return s;
}

// A peer's number as a T, or nullopt where it is not one T holds: a fraction, NaN or a value out
// of T's range. json::get converts those with a cast, which is undefined behaviour for a value
// out of range (1e44 as an integer, 1e300 as a float).
template <typename T>
bool json_fits(const nlohmann::json& v) {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && std::fabs(d) <= double(L::max());
  } else {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= std::uint64_t(L::max());
    if (!v.is_number_integer()) return false;
    const std::int64_t i = v.get<std::int64_t>();
    return i >= 0 ? std::uint64_t(i) <= std::uint64_t(L::max())
                  : L::is_signed && i >= std::int64_t(L::min());
  }
}

// Levels below the top-level value (a scalar counts as one more than the container holding it);
// nothing psbed exchanges nests deeper than a few.
constexpr int kMaxJsonDepth = 64;

// json::parse, refusing nesting deeper than `max_depth` with a json::parse_error as any other
// malformed text: copying, comparing or printing such a value recurses once a level and would
// overflow the stack of the thread that does it (a coordinator, a shard).
inline nlohmann::json parse_peer_json(std::string_view text, int max_depth = kMaxJsonDepth) {
  return nlohmann::json::parse(
      text, [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > max_depth)
          throw nlohmann::json::parse_error::create(
              101, 0, "nested deeper than " + std::to_string(max_depth) + " levels", nullptr);
        return true;
      });
}

}  // namespace psbed
