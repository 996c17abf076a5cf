// The control plane's JSON as the coordinator and the nodes read it from a peer: a ctl request
// or a node's register/progress/stats body (parse_peer_json, then a policy request read from it),
// the coordinator's set_policy word to the workers, and the cluster map the nodes decode.
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "ps/cluster_map.hpp"
#include "ps/control.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using psbed::Error;
using json = nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = psbed::fuzz::text_of(data, size);
  json j;
  try {
    j = psbed::parse_peer_json(text);
  } catch (const json::exception&) {
    return 0;  // the coordinator drops unreadable JSON
  }
  // What the coordinator does with a body it keeps: copies it, quotes it, serves it as text.
  const json kept = j;
  FUZZ_EXPECT(kept == j);
  (void)psbed::json_excerpt(j);
  (void)j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (j.is_object()) {
    try {
      const auto o = psbed::ps::policy_from_request(j, psbed::policy::PolicyOptions{});
      (void)psbed::ps::describe_policy(o);
    } catch (const Error& e) {
      psbed::fuzz::expect_message(e.what(), "policy_from_request");
    }
  }
  try {
    (void)psbed::ps::policy_from_json(j);
  } catch (const Error& e) {
    psbed::fuzz::expect_message(e.what(), "policy_from_json");
  }
  try {
    const auto map = psbed::ps::ClusterMap::from_json(j);
    (void)map.to_json();
  } catch (const Error& e) {
    psbed::fuzz::expect_message(e.what(), "ClusterMap::from_json");
  }
  return 0;
}
