// JSON from outside the process (a peer's message, an HTTP body, a file) as error messages quote
// it and as psbed parses it from the network: never dumped whole, never nested without bound.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

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
