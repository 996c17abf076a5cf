// The policy fields of control messages (a ctl request, the coordinator's set_policy word to the
// workers): decoding only, apart from the transport of control.cpp, so that they can be tested
// and fuzzed on their own.
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"
#include "ps/control.hpp"

namespace psbed::ps {

using json = nlohmann::json;

json policy_to_json(const policy::PolicyOptions& o) {
  return {{"policy", o.name},
          {"slice_params", o.slice_params},
          {"partition_params", o.partition_params},
          {"credit_bytes", o.credit_bytes},
          {"seed", o.seed}};
}

policy::PolicyOptions policy_from_json(const json& j) {
  policy::PolicyOptions o;
  try {
    o.name = j.at("policy").get<std::string>();
    // json::value converts a fraction or a value out of range with a cast: undefined behaviour.
    auto whole = [&j](const char* key, auto dflt) {
      if (!j.contains(key)) return dflt;
      if (!json_fits<decltype(dflt)>(j[key]))
        throw Error(std::string("a policy description's '") + key + "' is " + json_excerpt(j[key]) +
                    ", expected a whole number in range");
      return j[key].get<decltype(dflt)>();
    };
    o.slice_params = whole("slice_params", o.slice_params);
    o.partition_params = whole("partition_params", o.partition_params);
    o.credit_bytes = whole("credit_bytes", o.credit_bytes);
    o.seed = whole("seed", o.seed);
  } catch (const json::exception& e) {
    throw Error(std::string("a policy description is malformed: ") + e.what());
  }
  policy::check_policy_options(o);
  return o;
}

namespace {

std::int64_t positive_int(const json& req, const char* key) {
  const json& v = req.at(key);
  // At most 10^9, as the flags take them: no model has more, and 2^63 - 1 wraps as bytes.
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1000000000)
    throw Error(std::string("field '") + key + "' must be a positive integer, at most 10^9, got " +
                json_excerpt(v));
  return v.get<std::int64_t>();
}

}  // namespace

policy::PolicyOptions policy_from_request(const json& req, policy::PolicyOptions o) {
  if (!req.is_object()) throw Error("a policy request must be a JSON object");
  if (req.contains("policy")) {
    if (!req["policy"].is_string())
      throw Error("field 'policy' must be a policy name, got " + json_excerpt(req["policy"]));
    const std::string name = req["policy"];
    // A new policy starts from its own defaults, not from the old policy's credit.
    if (name != o.name) o.credit_bytes = -1;
    o.name = name;
  }
  if (req.contains("slice_params")) o.slice_params = positive_int(req, "slice_params");
  if (req.contains("partition_params")) o.partition_params = positive_int(req, "partition_params");
  if (req.contains("credit")) {
    const json& c = req["credit"];
    if (c.is_string() && c.get<std::string>() == "default") {
      o.credit_bytes = -1;
    } else if (c.is_string()) {
      try {
        o.credit_bytes = std::int64_t(parse_bytes(c.get<std::string>()));
      } catch (const Error& e) {
        throw Error(std::string("field 'credit': ") + e.what());
      }
    } else if (c.is_number_integer() && c.get<std::int64_t>() > 0 &&
               double(c.get<std::int64_t>()) <= kMaxBytes) {
      o.credit_bytes = c.get<std::int64_t>();
    } else {
      throw Error(
          "field 'credit' must be a size such as \"2MiB\" or a byte count, at most 1 PiB, got " +
          json_excerpt(c));
    }
  }
  for (const auto& [k, v] : req.items())
    if (k != "policy" && k != "slice_params" && k != "partition_params" && k != "credit" &&
        k != "event" && k != "command")
      throw Error("unknown field '" + k +
                  "' (expected policy, slice_params, partition_params, credit)");
  if (!req.contains("policy") && !req.contains("slice_params") &&
      !req.contains("partition_params") && !req.contains("credit"))
    throw Error(
        "a policy request names nothing to change (expected policy, slice_params, "
        "partition_params or credit)");
  // A setting the policy switched to does not use is refused, not kept for a later switch.
  const std::string& n = o.name;
  if (req.contains("slice_params") && !policy::uses_slice_params(n))
    throw Error("field 'slice_params' is for p3 and prophet, not " + n);
  if (req.contains("partition_params") && !policy::uses_partition_params(n))
    throw Error("field 'partition_params' is for bytescheduler, not " + n);
  if (req.contains("credit") && req["credit"] != "default" && !policy::uses_credit(n))
    throw Error("field 'credit' is for p3, bytescheduler and prophet, not " + n);
  policy::check_policy_options(o);  // unknown names and bad parameters are refused here, named
  return o;
}

std::string describe_policy(const policy::PolicyOptions& o) {
  std::string s = o.name;
  if (policy::uses_slice_params(o.name))
    s += " slice " + std::to_string(o.slice_params) + " params";
  if (policy::uses_partition_params(o.name))
    s += " partition " + std::to_string(o.partition_params) + " params";
  if (policy::uses_credit(o.name) && o.credit_bytes >= 0)
    s += (o.name == "prophet" ? ", block " : ", credit ") + std::to_string(o.credit_bytes) +
         " bytes";
  return s;
}

}  // namespace psbed::ps
