#include "ps/control.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <zmq.hpp>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"
#include "ps/host_lookup.hpp"
#include "ps/zmq_frames.hpp"
#include "ps/zmq_transport.hpp"

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
    o.slice_params = j.value("slice_params", o.slice_params);
    o.partition_params = j.value("partition_params", o.partition_params);
    o.credit_bytes = j.value("credit_bytes", o.credit_bytes);
    o.seed = j.value("seed", o.seed);
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

namespace {

// Whether anything accepts a connection at `endpoint` within `wait_s`: ZeroMQ queues a request to
// an address nothing listens on, so without this a mistyped endpoint or a run that ended waits
// out the whole --timeout for an answer.
bool reachable(const std::string& endpoint, double wait_s, const CurveKeys& keys) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  // A CURVE coordinator completes no handshake without the keys: the check needs them too.
  if (keys.on()) (void)secure_socket(ctx, s, keys, false);
  return connect_and_wait(s, endpoint, std::chrono::milliseconds(std::int64_t(wait_s * 1000)),
                          "ctl", "tcp://127.0.0.1:7000");
}

}  // namespace

json control_request(const std::string& coordinator, json request, double timeout_s,
                     const CurveKeys& keys) {
  const double connect_s = std::min(timeout_s, 3.0);
  if (!reachable(coordinator, connect_s, keys)) {
    const std::string host = unresolved_host(coordinator);
    const std::string why =
        keys.on() ? " (is the run still going, and is this key in its authorized_keys?)"
                  : " (is the run still going? one started with --keys needs ctl --keys)";
    throw Error("no coordinator at " + coordinator + ": " +
                (host.empty() ? "nothing accepted a connection within " +
                                    format_seconds(connect_s) + " s" + why
                              : host));
  }
  ZmqOptions z;
  z.role = ZmqOptions::Role::kClient;
  z.endpoint = coordinator;
  z.identity = "ctl-" + std::to_string(::getpid());
  z.thread_name = "ps-ctl";
  z.curve = keys;
  ZmqTransport transport(z);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<json> reply;
  transport.start([&](Message&& m) {
    json j;
    try {
      j = parse_peer_json(m.payload.view());
    } catch (const json::exception&) {
      return;
    }
    if (m.header.op == Op::kError)
      j = {{"ok", false}, {"error", j.value("error", std::string("refused"))}};
    if (!j.is_object() || (m.header.op == Op::kControl && j.value("event", "") != "ctl_reply"))
      return;
    std::lock_guard<std::mutex> lock(mu);
    reply = std::move(j);
    cv.notify_all();
  });
  request["event"] = "ctl";
  const std::string text = request.dump();
  Message m;
  m.header.op = Op::kControl;
  m.header.length = text.size();
  m.payload = Payload::copy(text);
  transport.send(std::move(m));
  std::unique_lock<std::mutex> lock(mu);
  const bool answered = cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                    [&] { return reply.has_value(); });
  lock.unlock();
  transport.stop();
  if (!answered)
    throw Error("no answer from the coordinator at " + coordinator + " within " +
                format_seconds(timeout_s) + " s (is the run still going?)");
  return *reply;
}

}  // namespace psbed::ps
