// The coordinator's run: its loop, the messages in and out, and a stop by signal. The other
// seams of the class are in coordinator_*.cpp (see ps/coordinator_impl.hpp).
#include "ps/coordinator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/secret.hpp"
#include "core/units.hpp"
#include "ps/coordinator_impl.hpp"

namespace psbed::ps {
namespace coordinator_detail {

Coordinator::Coordinator(const CoordinatorOptions& opt) : opt_(opt) {
  spec_text_ = read_spec_text();
  policy_ = opt_.policy;
  comm_now_ = opt_.comm;
  policy_.seed = opt_.seed;
  ZmqOptions z;
  z.role = ZmqOptions::Role::kServer;
  z.endpoint = opt_.bind;
  z.thread_name = "coord-router";
  z.curve = node_keys(opt_.keys, opt_.key_file, "coordinator");
  // No peer has more than a few control messages outstanding: one that sends requests and
  // never reads the answers loses them past this, and delays nobody.
  z.peer_max_messages = 4096;
  z.peer_max_bytes = 16 << 20;
  // Every message a node or `psbed ctl` sends here is a small JSON text: a larger one is refused
  // before it is read (ZeroMQ drops the connection), not parsed into memory.
  z.limits.max_message_bytes = kMaxControlBytes;
  transport_ = std::make_unique<ZmqTransport>(z);
}

int Coordinator::run() {
  // SIGTERM and SIGINT are blocked from here on, in this thread and in the threads started below
  // (they inherit the mask), so no poll of theirs is interrupted by one; the loop takes them.
  // SIGHUP keeps its default action. The mask is restored on the way out.
  BlockedStopSignals stops(/*hangup=*/false);
  started_ = Clock::now();
  started_us_ = now_us();
  transport_->start([this](Message&& m) { receive(std::move(m)); });
  if (!opt_.http.empty()) start_http();
  if (!opt_.endpoint_file.empty()) {
    // Written whole, then renamed: a reader never sees half an address.
    const std::string tmp = opt_.endpoint_file + ".tmp";
    std::ofstream(tmp) << transport_->endpoint() << "\n";
    std::rename(tmp.c_str(), opt_.endpoint_file.c_str());
  }
  spdlog::info(
      "coordinator on {}: waiting for {} server(s) and {} worker(s); model {}, mode {}, policy {}",
      transport_->endpoint(), opt_.servers, opt_.workers, spec_.name, mode_.str(),
      opt_.policy.name);
  std::unique_lock<std::mutex> lock(mu_);
  serve_locked(lock, stops);
  if (switch_) finish_switch_locked(true);
  if (comm_switch_) finish_comm_locked(true);
  write_summary_locked();
  // The nodes hear why the run failed (a shutdown carries no payload): a registration timeout,
  // an interruption, a shard lost with its parameters.
  if (!failure_.empty())
    broadcast_locked(Op::kControl, json{{"event", "ended"}, {"reason", failure_}});
  broadcast_locked(Op::kShutdown, json());
  lock.unlock();
  flush_outbox();
  // Give the shutdown messages time to leave before the socket closes.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (http_) http_->stop();
  transport_->stop();
  if (const std::string refused = transport_->refused_connections(); !refused.empty())
    spdlog::warn("coordinator {}", refused);
  spdlog::info("coordinator done{}", exit_code_ == 0 ? "" : " (the run failed)");
  return exit_code_;
}

// The run loop: until the run finishes, fails or is stopped, it watches registration,
// heartbeats, stalls and the policy switch, and sends what the others queued.
void Coordinator::serve_locked(std::unique_lock<std::mutex>& lock, BlockedStopSignals& stops) {
  auto next_progress = Clock::now() + dsec(opt_.progress_every_s);
  auto next_sample = Clock::now();
  const auto register_deadline = Clock::now() + dsec(opt_.register_timeout_s);
  // Every message queued wakes the loop to send it; the checks, O(nodes), run on their tick
  // alone, so a heartbeat costs the same with 1,000 workers as with 2.
  const auto tick =
      std::chrono::duration_cast<Clock::duration>(dsec(std::min(opt_.heartbeat_s / 2, 0.25)));
  auto next_tick = Clock::now() + tick;
  while (!finished_) {
    cv_.wait_until(lock, next_tick);
    const auto now = Clock::now();
    stops.poll();
    if (!go_on_after_stop_locked(stops.received(), now)) break;
    if (now < next_tick) {
      lock.unlock();
      flush_outbox();
      lock.lock();
      continue;
    }
    next_tick = now + tick;
    if (!map_sent_ && now > register_deadline) {
      fail_locked("not every node registered within " + format_seconds(opt_.register_timeout_s) +
                  " s: have " + std::to_string(count("server")) + "/" +
                  std::to_string(opt_.servers) + " servers and " + std::to_string(count("worker")) +
                  "/" + std::to_string(opt_.workers) + " workers");
      break;
    }
    check_heartbeats_locked(now);
    check_stall_locked(now);
    if (switch_ && now - switch_->requested > dsec(kSwitchTimeoutS)) finish_switch_locked(true);
    if (comm_switch_ && now > comm_switch_->deadline) finish_comm_locked(true);
    if (map_sent_ && now >= next_progress) {
      print_progress_locked();
      next_progress = now + dsec(opt_.progress_every_s);
    }
    if (map_sent_) request_checkpoint_locked(now);
    if (map_sent_ && http_ && now >= next_sample) {
      record_sample_locked();
      next_sample = now + std::chrono::seconds(1);
    }
    lock.unlock();
    flush_outbox();
    lock.lock();
  }
}

// Told to stop (`sig`: Ctrl-C, the launcher's --timeout): the workers stop at once and report
// what they measured, and the summary keeps it, as it keeps a finished run's. False once the
// run ends: stopped before it began, or the workers' reports are in (or overdue).
bool Coordinator::go_on_after_stop_locked(int sig, Clock::time_point now) {
  if (sig != 0 && !stopping_) {
    stopping_ = true;
    stop_deadline_ = now + std::chrono::duration_cast<Clock::duration>(dsec(kStopReportS));
    stop_reason_ = std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ")";
    // Stopped while stuck (launch --timeout, say): the reason names the stall.
    if (!stall_.is_null()) stop_reason_ += " during a stall, " + stall_text_locked(now);
    if (!map_sent_) {
      fail_locked(stop_reason_ + " before every node registered");
      exit_code_ = kStoppedStatus;  // stopped, as a server or a worker stopped by a signal
      return false;
    }
    spdlog::warn("{}: the workers stop now and report what they measured", stop_reason_);
    for (Node* w : live("worker")) {  // the reason first: a shutdown carries no payload
      send_to(w->peer, Op::kControl, json{{"event", "interrupted"}});
      send_to(w->peer, Op::kShutdown, json());
    }
  }
  if (stopping_) {
    bool reported = true;
    for (Node* w : live("worker")) reported = reported && !w->report.is_null();
    if (reported || now > stop_deadline_) {
      fail_locked(stop_reason_);
      exit_code_ = kStoppedStatus;
      return false;
    }
  }
  return true;
}

std::string Coordinator::read_spec_text() {
  spec_ = load_model(opt_.model);
  std::ifstream in(spec_.source);
  std::stringstream ss;
  ss << in.rdbuf();
  mode_ = Consistency::parse(opt_.mode);
  if (const std::string why = comm_problem(parse_comm(opt_.comm), mode_); !why.empty())
    throw Error(why);
  if (!opt_.comm_bandwidth.empty())
    comm_cost_.link_bytes_per_sec = parse_bandwidth_bps(opt_.comm_bandwidth) / 8;
  return ss.str();
}

// Called with mu_ held: queue the message; flush_outbox() sends it once mu_ is released.
// (A send from a thread other than the transport's owner may block until the owner thread
// drains it, and the owner thread may be waiting for mu_ in receive().)
void Coordinator::send_to(const PeerId& peer, Op op, const json& j, std::uint64_t clock) {
  send_to(peer, op, j.is_null() ? Payload() : json_payload(j), clock);
}

Payload Coordinator::json_payload(const json& j) {
  // A reply may quote what a peer sent, which need not be UTF-8: replaced, not thrown on.
  return Payload::copy(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void Coordinator::send_to(const PeerId& peer, Op op, const Payload& payload, std::uint64_t clock) {
  Message m;
  m.peer = peer;
  m.header.op = op;
  m.header.clock = clock;
  m.header.length = payload.size();
  m.payload = payload;
  outbox_.push_back(std::move(m));
  cv_.notify_all();  // the loop sends it now, not at its next tick
}

void Coordinator::flush_outbox() {
  std::vector<Message> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(outbox_);
  }
  for (auto& m : out) transport_->send(std::move(m));
}

void Coordinator::broadcast_locked(Op op, const json& j) {
  for (const auto& [_, n] : nodes_)
    if (n.alive) send_to(n.peer, op, j);
}

void Coordinator::receive(Message&& m) {
  handle(std::move(m));
  flush_outbox();
}

void Coordinator::handle(Message&& m) {
  json j;
  if (m.header.op == Op::kRegister && m.payload.size() > kMaxRegisterBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_drop_locked(m.peer))
      spdlog::warn("{}: a registration of {} bytes, expected at most {}, dropped{}",
                   peer_name(m.peer), m.payload.size(), kMaxRegisterBytes, kLaterDropped);
    return;
  }
  if (!m.payload.empty()) {
    try {
      j = parse_peer_json(m.payload.view());
    } catch (const json::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_drop_locked(m.peer))
        spdlog::warn("{}: unreadable JSON in a {} message ({}), dropped{}", peer_name(m.peer),
                     op_name(m.header.op), e.what(), kLaterDropped);
      return;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (m.header.op == Op::kRegister) return on_register(m.peer, j);
  // `psbed ctl` (or any peer) asking something of the run; it need not be a node.
  if (m.header.op == Op::kControl && j.is_object() && j.value("event", "") == "ctl") {
    if (!ctl_allowed_locked(m.peer, Clock::now())) {
      if (first_drop_locked(m.peer))
        spdlog::warn("{} asks more than {} times a second (ctl), dropped{}", peer_name(m.peer),
                     kCtlPerSecond, kLaterDropped);
      return;
    }
    PeerId peer = m.peer;
    // The same secret as the HTTP API's: a switch refused there must not pass here.
    if (!opt_.http_token.empty() && !same_secret(text(j, "token"), opt_.http_token)) {
      if (first_drop_locked(peer))
        spdlog::warn("{}: a ctl request without the coordinator's token, refused{}",
                     peer_name(peer), kLaterDropped);
      return ctl_reply(peer, {{"ok", false},
                              {"error",
                               "a token is required: give psbed ctl --token TOKEN (or "
                               "PSBED_HTTP_TOKEN), the coordinator's --http-token"}});
    }
    return on_ctl(j, [this, peer](json reply) { ctl_reply(peer, std::move(reply)); });
  }
  auto it = nodes_.find(m.peer);
  if (it == nodes_.end()) {
    if (first_drop_locked(m.peer))
      spdlog::warn("{} message from unregistered peer {}, dropped{}", op_name(m.header.op),
                   peer_name(m.peer), kLaterDropped);
    return;
  }
  Node& n = it->second;
  n.last_seen = Clock::now();
  if (!n.alive) return;  // declared dead: too late to come back
  switch (m.header.op) {
    case Op::kHeartbeat:
      send_to(m.peer, Op::kHeartbeat, json());
      break;  // "still here"
    case Op::kBarrier:
      on_barrier(n, j.value("name", ""));
      break;
    case Op::kControl:
      on_control(n, j);
      break;
    default:
      if (first_drop_locked(m.peer))
        spdlog::warn("{}: unexpected {} message, dropped{}", n.name, op_name(m.header.op),
                     kLaterDropped);
  }
}

bool Coordinator::ctl_allowed_locked(const PeerId& peer, Clock::time_point now) {
  // Fixed one-second windows per peer; the map is cleared when it holds too many peers (a flood
  // of fresh identities), which lets each of them start a window again: bounded either way.
  if (ctl_windows_.size() >= kMaxWarnedPeers && !ctl_windows_.count(peer)) ctl_windows_.clear();
  CtlWindow& w = ctl_windows_[peer];
  if (now - w.start >= std::chrono::seconds(1)) w = {now, 0};
  return ++w.count <= kCtlPerSecond;
}

bool Coordinator::first_drop_locked(const PeerId& peer) {
  ++dropped_messages_;
  if (warned_peers_.count(peer) || warned_peers_.size() >= kMaxWarnedPeers) return false;
  warned_peers_.insert(peer);
  return true;
}

void Coordinator::on_control(Node& n, const json& j) {
  const std::string ev = j.value("event", "");
  if (ev == "progress") {
    if (j.value("step", std::int64_t(0)) > std::int64_t(num(n.progress, "step")))
      advanced_locked(n);
    n.progress = j;
    if (n.step_bins.empty()) n.step_bins.assign(kStepBuckets.size() + 1, 0);
    if (auto it = j.find("step_ms"); it != j.end() && it->is_array()) {
      for (const auto& ms : *it) {
        if (!ms.is_number() || ms.get<double>() < 0) continue;
        const double t = ms.get<double>() / 1e3;
        n.step_bins[std::lower_bound(kStepBuckets.begin(), kStepBuckets.end(), t) -
                    kStepBuckets.begin()] += 1;
        n.step_sum_s += t;
      }
    }
  } else if (ev == "waiting") {
    n.waiting = j;
  } else if (ev == "stats") {
    n.stats = j;
  } else if (ev == "synced") {
    rejoined_synced_locked(n);
  } else if (ev == "report") {
    n.report = j;
    if (switch_) finish_switch_locked(false);  // a worker done training will not switch
    if (comm_switch_) finish_comm_locked(false);
  } else if (ev == "comm_ready") {
    on_comm_ready_locked(n, j);
  } else if (ev == "comm_switched") {
    on_comm_switched_locked(n, j);
  } else if (ev == "policy_switched") {
    if (!switch_ || j.value("seq", std::uint64_t(0)) != switch_->seq) return;
    switch_->workers[n.name] = j.value("step", std::int64_t(-1));
    // Its status row says so now, not at its next progress report a second on.
    if (const std::string name = text(j, "policy"); !name.empty() && n.progress.is_object())
      n.progress["policy"] = name;
    finish_switch_locked(false);
  } else if (ev == "evaluated") {
    if (n.id != evaluator_) {
      spdlog::warn("{}: 'evaluated' from a worker that was not asked to evaluate, dropped", n.name);
      return;
    }
    test_accuracy_ = num(j, "test_accuracy", -1.0);
    if (j.contains("note") && j["note"].is_string()) evaluation_note_ = j["note"];
    if (test_accuracy_ >= 0) {
      spdlog::info("test accuracy of the final parameters: {:.2f}%", 100 * test_accuracy_);
      // The run ends ok either way (it ran), but a model at chance did not learn: said, so a
      // throughput figure is not taken for a training result.
      const double chance = 1.0 / std::max(2, spec_.classes);
      if (test_accuracy_ < 1.5 * chance)
        spdlog::warn(
            "the model did not learn: {:.2f}% is about chance for {} classes ({:.0f}%) after {} "
            "steps per "
            "worker ({})",
            100 * test_accuracy_, spec_.classes, 100 * chance, steps_,
            opt_.sgd.lr > 0
                ? "too few steps, or too large an --lr: asynchronous SGD with several workers "
                  "needs a smaller one, docs/concepts.md, \"Consistency\""
                : "--lr 0 changes nothing");
    } else
      spdlog::info("no test accuracy: {}",
                   evaluation_note_.empty() ? "none reported" : evaluation_note_);
    finished_ = true;
    cv_.notify_all();
  } else if (ev == "failed") {
    fail_node_locked(n, j.value("reason", std::string("reported a failure")));
  } else {
    spdlog::warn("{}: unknown control event '{}', dropped", n.name, ev);
  }
}

void Coordinator::fail_locked(const std::string& why) {
  spdlog::error("run failed: {}", why);
  // The first cause is the run's: a dead shard, then "every worker died" as they stop.
  if (failure_.empty()) failure_ = why;
  exit_code_ = 1;
  finished_ = true;
  cv_.notify_all();
}

}  // namespace coordinator_detail

int run_coordinator(const CoordinatorOptions& opt) {
  if (opt.servers < 1 || opt.workers < 1)
    throw Error("--servers and --workers must be at least 1, got " + std::to_string(opt.servers) +
                " and " + std::to_string(opt.workers));
  if (opt.replicas < 1 || opt.replicas > 2 || (opt.replicas == 2 && opt.servers < 2))
    throw Error("--replicas " + std::to_string(opt.replicas) +
                ": expected 1, or 2 with --servers 2 or more (a shard's copy lives on another)");
  if (opt.push_pull && opt.replicas > 1)
    throw Error(
        "--push-pull with --replicas 2: a push's answer would say the update is safe "
        "before the backup has it");
  if (opt.connections < 1 || opt.connections > kMaxConnections)
    throw Error("--connections " + std::to_string(opt.connections) + ": expected 1 to " +
                std::to_string(kMaxConnections));
  if (opt.connections > 1 && opt.replicas > 1) throw Error(kConnectionsWithReplicas);
  policy::check_policy_options(opt.policy);  // refuse an unknown policy before anyone registers
  if (!opt.profile.empty() && !std::ifstream(opt.profile))
    throw Error("cannot read the profile '" + opt.profile + "'");
  coordinator_detail::Coordinator c(opt);
  return c.run();
}

}  // namespace psbed::ps
