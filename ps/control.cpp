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
