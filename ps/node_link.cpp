#include "ps/node_link.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "ps/host_lookup.hpp"

namespace psbed::ps {

using namespace std::chrono;

namespace {
// How long a message that must not hold its caller up waits for room on the link: enough for
// the transport's thread to take it when the coordinator is there, nothing when it is gone.
constexpr milliseconds kShortWait{50};
}  // namespace

NodeLink::NodeLink(NodeLinkOptions opt) : opt_(std::move(opt)) {
  ZmqOptions z;
  z.role = ZmqOptions::Role::kClient;
  z.endpoint = opt_.coordinator;
  // The name and a random tag: ZeroMQ routes by identity and silently ignores a second
  // connection with one already in use, so two nodes given the same name would leave the second
  // unanswered; with the tag the coordinator hears both and refuses the second by its name.
  char tag[16];
  std::snprintf(tag, sizeof tag, "#%08x", unsigned(std::random_device{}()));
  z.identity = opt_.name.substr(0, 200) + tag;
  z.thread_name = "ps-coordlink";
  z.curve = opt_.curve;
  try {
    transport_ = std::make_unique<ZmqTransport>(z);
  } catch (const Error& e) {
    throw Error("--coordinator: " + std::string(e.what()));
  }
  transport_->start([this](Message&& m) { receive(std::move(m)); });
}

NodeLink::~NodeLink() {
  stop_heartbeats_ = true;
  cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
  transport_->stop();
}

bool NodeLink::send(Op op, const std::string& json_text, std::uint64_t clock, bool wait) {
  Message m;
  m.header.op = op;
  m.header.sender = id_ < 0 ? 0 : std::uint32_t(id_);
  m.header.clock = clock;
  m.header.sequence = ++seq_;
  if (!json_text.empty()) {
    m.payload = Payload::copy(json_text);
    m.header.length = json_text.size();
  }
  return wait ? transport_->send(std::move(m)) : transport_->try_send(std::move(m), kShortWait);
}

void NodeLink::receive(Message&& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_heard_ = steady_clock::now();
  }
  nlohmann::json j;
  if (!m.payload.empty()) {
    try {
      j = parse_peer_json(m.payload.view());
    } catch (const nlohmann::json::exception& e) {
      spdlog::warn("coordinator sent unreadable JSON in a {} message: {}", op_name(m.header.op),
                   e.what());
      return;
    }
  }
  std::function<void(const nlohmann::json&)> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (m.header.op) {
      case Op::kControl:
        if (j.value("event", "") == "registered") {
          registered_ = true;
          id_ = j.value("id", -1);
          note_clock_locked(j);
        } else if (j.value("event", "") ==
                   "interrupted") {  // the shutdown that follows ends the run early
          shutdown_reason_ = "interrupted";
        } else if (j.value("event", "") == "ended") {  // why the run failed
          ended_because_ = j.value("reason", std::string());
        } else {
          fn = on_control_;
        }
        break;
      case Op::kClusterMap:
        map_ = std::move(j);
        break;
      case Op::kBarrierRelease:
        released_barrier_ = j.value("name", "");
        if (j.contains("evaluator")) evaluator_ = j["evaluator"].get<int>();
        ++barrier_generation_;
        break;
      case Op::kShutdown:
        shutdown_ = true;
        told_shutdown_ = true;
        break;
      case Op::kHeartbeat:
        break;  // the coordinator's answer: it is there
      case Op::kError:
        if (!registered_) {
          refused_ = j.value("error", std::string("?"));  // join stops with it
        } else {
          spdlog::error("coordinator: {}", j.value("error", std::string("?")));
        }
        break;
      default:
        spdlog::warn("unexpected {} message from the coordinator, dropped", op_name(m.header.op));
    }
  }
  cv_.notify_all();
  if (fn) fn(j);
}

// Cristian's estimate: the coordinator read its clock about half a round trip after the node
// sent. Of several answers (retries) the one with the shortest round trip is the closest.
void NodeLink::note_clock_locked(const nlohmann::json& j) {
  const auto echo = j.find("echo_us"), clock = j.find("clock_us");
  if (echo == j.end() || clock == j.end() || !echo->is_number() || !clock->is_number()) return;
  const double t1 = now_us(), t0 = echo->get<double>(), rtt = t1 - t0;
  if (rtt < 0 || (!clock_sync_.is_null() && clock_sync_.value("rtt_us", 0.0) <= rtt)) return;
  const std::string mine = clock_domain();
  const bool same = !mine.empty() && j.value("clock_domain", std::string()) == mine;
  clock_sync_ = {{"offset_us", same ? 0.0 : clock->get<double>() - (t0 + t1) / 2},
                 {"rtt_us", rtt},
                 {"same_clock", same}};
}

nlohmann::json NodeLink::clock_sync() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clock_sync_;
}

ClusterMap NodeLink::join(nlohmann::json extra) {
  nlohmann::json reg = {{"role", opt_.role}, {"name", opt_.name}, {"address", opt_.address}};
  for (auto& [k, v] : extra.items()) reg[k] = v;
  reg["clock_domain"] = clock_domain();
  const steady_clock::time_point deadline =
      steady_clock::now() +
      duration_cast<steady_clock::duration>(duration<double>(opt_.connect_timeout_s));
  double backoff = 0.1;
  // A host that does not resolve may be a container not started yet: said now, waited for.
  const std::string unresolved = unresolved_host(opt_.coordinator);
  if (const std::string& why = unresolved; !why.empty())
    spdlog::warn("the coordinator at {}: {}; retrying for up to {} s (--connect-timeout)",
                 opt_.coordinator, why, format_seconds(opt_.connect_timeout_s));
  const steady_clock::time_point started = steady_clock::now();
  bool said_waiting = !unresolved.empty();  // said above
  std::unique_lock<std::mutex> lock(mu_);
  while (!registered_) {
    lock.unlock();
    // Not waiting for room: a coordinator not there yet leaves the queue full, and the retries
    // must keep to the deadline.
    reg["sent_us"] = now_us();  // echoed: the round trip gives this clock's offset
    send(Op::kRegister, reg.dump(), 0, false);
    lock.lock();
    auto wake = std::min(
        steady_clock::now() + duration_cast<steady_clock::duration>(duration<double>(backoff)),
        deadline);
    cv_.wait_until(lock, wake, [&] {
      return registered_ || shutdown_.load() || stop_.load() || !refused_.empty();
    });
    if (registered_) break;
    if (stop_) throw Error(stopped_);
    if (!refused_.empty())
      throw Error("the coordinator at " + opt_.coordinator + " refused this " + opt_.role + ": " +
                  refused_);
    if (shutdown_)
      throw Error("the coordinator ended the run before this " + opt_.role + " joined it");
    if (steady_clock::now() >= deadline) {
      const std::string host = unresolved_host(opt_.coordinator);
      throw Error("cannot reach the coordinator at " + opt_.coordinator + ": " +
                  (host.empty() ? "" : host + "; ") + "no answer to registration within " +
                  format_seconds(opt_.connect_timeout_s) + " s (--connect-timeout)");
    }
    // A coordinator not started yet, a wrong port, a run that ended: said once, not after
    // --connect-timeout of silence.
    if (!said_waiting && steady_clock::now() >= started + seconds(2)) {
      said_waiting = true;
      spdlog::info(
          "no answer yet from the coordinator at {}; retrying for up to {} s (--connect-timeout)",
          opt_.coordinator, format_seconds(opt_.connect_timeout_s));
    }
    backoff = std::min(backoff * 2, 2.0);
  }
  spdlog::info("registered with the coordinator at {} as {} (id {})", opt_.coordinator, opt_.name,
               id_);
  heartbeats_ = std::thread([this] { heartbeat_loop(); });
  cv_.wait(lock, [&] { return map_.has_value() || shutdown_.load() || stop_.load(); });
  if (!map_) {
    if (!lost_.empty()) throw Error(lost_);
    if (stop_) throw Error(stopped_);
    throw Error("the coordinator shut the cluster down before it started" +
                (ended_because_.empty() ? std::string() : ": " + ended_because_));
  }
  return ClusterMap::from_json(*map_);
}

void NodeLink::heartbeat_loop() {
  pthread_setname_np(pthread_self(), "ps-heartbeat");
  std::unique_lock<std::mutex> lock(mu_);
  last_heard_ = steady_clock::now();
  while (!stop_heartbeats_) {
    if (lost_.empty()) {
      lock.unlock();
      // Never waiting for room: a dead coordinator's queue fills in seconds, and a heartbeat
      // stuck behind it would stop this loop, which is what notices the silence. One that
      // finds the queue full is dropped: the next one says the same.
      send(Op::kHeartbeat, "", 0, false);
      lock.lock();
    }
    cv_.wait_for(lock, duration<double>(opt_.heartbeat_s), [&] { return stop_heartbeats_.load(); });
    const double silent = duration<double>(steady_clock::now() - last_heard_).count();
    // At least three heartbeats' time: the coordinator answers each, so a shorter wait would
    // take the gap between two answers for its death.
    const double timeout = std::max(opt_.coordinator_timeout_s, 3 * opt_.heartbeat_s);
    if (!shutdown_ && lost_.empty() && silent > timeout) {
      lock.unlock();
      declare_lost(silent, timeout);
      lock.lock();
    }
  }
}

void NodeLink::declare_lost(double silent, double timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Checked again under the lock: the coordinator's shutdown may have come since the caller
    // looked. It said goodbye; it is not lost, and must not turn a clean end into a failure.
    if (shutdown_ || !lost_.empty()) return;
    lost_ = "lost the coordinator at " + opt_.coordinator + ": nothing heard from it for " +
            format_seconds(silent) + " s (--coordinator-timeout " + format_seconds(timeout) + " s)";
    // Not logged here: the node stops at once and its exit says it, in one line.
    spdlog::debug("{}: stopping", lost_);
    shutdown_ = true;
  }
  cv_.notify_all();
  // Another thread may be waiting for room on the link (a progress report, a barrier): stopping
  // the link ends that wait (its send returns false), so every wait on the coordinator ends.
  transport_->stop();
}

void NodeLink::stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stopped_ = why;
    stop_ = true;
  }
  cv_.notify_all();
}

bool NodeLink::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

std::string NodeLink::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

std::string NodeLink::ended_because() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_because_;
}

void NodeLink::leave(const std::string& why, double wait_s, const nlohmann::json& report) {
  if (!report.is_null()) send(Op::kControl, report.dump(), 0, false);
  if (!send(Op::kControl, nlohmann::json({{"event", "failed"}, {"reason", why}}).dump(), 0, false))
    return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, duration<double>(wait_s), [&] { return told_shutdown_ || !lost_.empty(); });
}

std::string NodeLink::leave_before_start() {
  if (!registered()) return "before it registered with the coordinator";
  leave(stopped(), 0.5);
  return "after it registered, before the cluster started; the coordinator was told";
}

std::string NodeLink::shutdown_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_reason_;
}

std::string NodeLink::coordinator_lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

void NodeLink::barrier(const std::string& name) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t gen = barrier_generation_;
  lock.unlock();
  send(Op::kBarrier, nlohmann::json({{"name", name}, {"role", opt_.role}}).dump());
  lock.lock();
  cv_.wait(lock, [&] {
    return (barrier_generation_ != gen && released_barrier_ == name) || shutdown_.load() ||
           stop_.load();
  });
}

int NodeLink::evaluator() {
  std::lock_guard<std::mutex> lock(mu_);
  return evaluator_;
}

void NodeLink::send_control(const nlohmann::json& j) { send(Op::kControl, j.dump()); }

bool NodeLink::try_send_control(const nlohmann::json& j) {
  return send(Op::kControl, j.dump(), 0, false);
}

void NodeLink::on_control(std::function<void(const nlohmann::json&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_control_ = std::move(fn);
}

bool NodeLink::wait_shutdown(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, duration<double>(timeout_s),
                      [&] { return shutdown_.load() || stop_.load(); });
}

}  // namespace psbed::ps
