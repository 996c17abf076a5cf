#include <catch2/catch.hpp>
#include <string>

#include "core/json_text.hpp"

using psbed::json_excerpt;
using psbed::parse_peer_json;

TEST_CASE("[json] parse_peer_json refuses nesting past the limit as malformed text", "[json]") {
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK_THROWS_WITH(parse_peer_json(deep), Catch::Contains("nested deeper than 64 levels"));
  CHECK_THROWS_AS(parse_peer_json(deep), nlohmann::json::parse_error);
  // The top-level value is depth 0: 64 levels below it parse, a 65th does not.
  const auto nested = [](int arrays) {
    return "{\"a\":" + std::string(std::size_t(arrays), '[') +
           std::string(std::size_t(arrays), ']') + "}";
  };
  CHECK(parse_peer_json(nested(64))["a"].is_array());
  CHECK_THROWS_AS(parse_peer_json(nested(65)), nlohmann::json::parse_error);
  CHECK(parse_peer_json(R"({"policy":"p3","credit":"2MiB"})")["credit"] == "2MiB");
  CHECK_THROWS_AS(parse_peer_json("not json"), nlohmann::json::parse_error);
}

TEST_CASE("[json] json_excerpt quotes scalars and names containers", "[json]") {
  CHECK(json_excerpt(nlohmann::json(5)) == "5");
  CHECK(json_excerpt(nlohmann::json("p3")) == "\"p3\"");
  CHECK(json_excerpt(nlohmann::json(nullptr)) == "null");
  CHECK(json_excerpt(nlohmann::json::array({1, 2})) == "an array of 2 item(s)");
  CHECK(json_excerpt(nlohmann::json{{"a", 1}}) == "an object of 1 key(s)");
  const std::string cut = json_excerpt(nlohmann::json(std::string(500, 'x')));
  CHECK(cut.size() == 80);
  CHECK(cut.substr(77) == "...");
}
