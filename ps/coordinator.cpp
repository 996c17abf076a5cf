#include "ps/coordinator.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json_text.hpp"
#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "ps/cluster_map.hpp"
#include "ps/control.hpp"
#include "ps/coordinator_http.hpp"
#include "ps/http_server.hpp"
#include "ps/metrics.hpp"
#include "ps/stop_signals.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {
namespace {

using json = nlohmann::json;

// Workers' JSON is input like any other: a field of the wrong type reads as the default.
// A float setting as the number it was given (0.01, not the float's 0.009999999776482582): the
// shortest text that reads back as the same float.
double as_given(float f) { return std::stod(fmt::format("{}", f)); }

double num(const json& j, const char* key, double dflt = 0) {
  if (!j.is_object()) return dflt;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : dflt;
}

// A peer's field of a kind, or the default where it is absent or of another kind (json::value
// throws on a wrong kind: a peer's message must not).
std::int64_t whole(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<std::int64_t>() : -1;
}
std::string text(const json& j, const char* key, const std::string& dflt = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : dflt;
}

// A worker's loss: JSON has no NaN, so a diverged worker's NaN arrives as null, and reads as NaN
// here (num's 0 would show a diverged run as a converged one).
double loss_of(const json& j) {
  if (j.is_object() && j.contains("loss") && j["loss"].is_null()) return std::nan("");
  return num(j, "loss");
}
using Clock = std::chrono::steady_clock;

struct Node {
  std::string role, name, address;
  PeerId peer;
  int id = 0;
  Clock::time_point last_seen;
  bool alive = true;
  std::string failure;
  json extra;
  // Workers: latest progress and the final report. Servers: latest stats.
  json progress, report, stats;
  // Workers: what the worker said it waits on, when it waited long (cleared by a step done).
  json waiting;
  // Workers: step times reported so far, binned as kStepBuckets (the last bin is +Inf).
  std::vector<double> step_bins;
  double step_sum_s = 0;
};

// Bounds of the step-time histogram in /metrics, in seconds: a tiny CNN on a fast link steps in
// a millisecond, a large one on a slow link in seconds.
const std::vector<double> kStepBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

// SIGTERM or SIGINT received by the coordinator process: it ends the run (see Coordinator::run).
std::atomic<int> g_stop_signal{0};
extern "C" void note_stop_signal(int sig) { g_stop_signal = sig; }

class Coordinator {
 public:
  explicit Coordinator(const CoordinatorOptions& opt) : opt_(opt) {
    spec_text_ = read_spec_text();
    policy_ = opt_.policy;
    policy_.seed = opt_.seed;
    ZmqOptions z;
    z.role = ZmqOptions::Role::kServer;
    z.endpoint = opt_.bind;
    z.thread_name = "coord-router";
    // No peer has more than a few control messages outstanding: one that sends requests and
    // never reads the answers loses them past this, and delays nobody.
    z.peer_max_messages = 4096;
    z.peer_max_bytes = 16 << 20;
    transport_ = std::make_unique<ZmqTransport>(z);
  }

  int run() {
    // The handlers only note the signal; the loop below acts on it. Restored on the way out.
    struct sigaction note {}, old_term {}, old_int {};
    note.sa_handler = note_stop_signal;
    sigemptyset(&note.sa_mask);
    sigaction(SIGTERM, &note, &old_term);
    sigaction(SIGINT, &note, &old_int);
    struct Restore {
      struct sigaction term, intr;
      ~Restore() {
        sigaction(SIGTERM, &term, nullptr);
        sigaction(SIGINT, &intr, nullptr);
      }
    } restore{old_term, old_int};
    started_ = Clock::now();
    started_us_ = now_us();
    {
      // The threads started here leave SIGTERM and SIGINT to this one (the handler's), so that
      // no poll of theirs is interrupted by one.
      sigset_t stop, old;
      sigemptyset(&stop);
      sigaddset(&stop, SIGTERM);
      sigaddset(&stop, SIGINT);
      pthread_sigmask(SIG_BLOCK, &stop, &old);
      transport_->start([this](Message&& m) { receive(std::move(m)); });
      if (!opt_.http.empty()) start_http();
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    if (!opt_.endpoint_file.empty()) {
      // Written whole, then renamed: a reader never sees half an address.
      const std::string tmp = opt_.endpoint_file + ".tmp";
      std::ofstream(tmp) << transport_->endpoint() << "\n";
      std::rename(tmp.c_str(), opt_.endpoint_file.c_str());
    }
    spdlog::info("coordinator on {}: waiting for {} server(s) and {} worker(s); model {}, mode {}, policy {}",
                 transport_->endpoint(), opt_.servers, opt_.workers, spec_.name, mode_.str(), opt_.policy.name);
    std::unique_lock<std::mutex> lock(mu_);
    auto next_progress = Clock::now() + dsec(opt_.progress_every_s);
    auto next_sample = Clock::now();
    const auto register_deadline = Clock::now() + dsec(opt_.register_timeout_s);
    while (!finished_) {
      cv_.wait_for(lock, dsec(std::min(opt_.heartbeat_s / 2, 0.25)));
      const auto now = Clock::now();
      // Told to stop (Ctrl-C, the launcher's --timeout): the workers stop at once and report
      // what they measured, and the summary keeps it, as it keeps a finished run's.
      if (const int sig = g_stop_signal.load(); sig != 0 && !stopping_) {
        stopping_ = true;
        stop_deadline_ = now + std::chrono::duration_cast<Clock::duration>(dsec(kStopReportS));
        stop_reason_ = std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ")";
        // Stopped while stuck (launch --timeout, say): the reason names the stall.
        if (!stall_.is_null()) stop_reason_ += " during a stall, " + stall_text_locked(now);
        if (!map_sent_) {
          fail_locked(stop_reason_ + " before every node registered");
          exit_code_ = kStoppedStatus;  // stopped, as a server or a worker stopped by a signal
          break;
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
          break;
        }
      }
      if (!map_sent_ && now > register_deadline) {
        fail_locked("not every node registered within " + format_seconds(opt_.register_timeout_s) +
                    " s: have " + std::to_string(count("server")) + "/" + std::to_string(opt_.servers) +
                    " servers and " + std::to_string(count("worker")) + "/" + std::to_string(opt_.workers) + " workers");
        break;
      }
      check_heartbeats_locked(now);
      check_stall_locked(now);
      if (switch_ && now - switch_->requested > dsec(kSwitchTimeoutS)) finish_switch_locked(true);
      if (map_sent_ && now >= next_progress) {
        print_progress_locked();
        next_progress = now + dsec(opt_.progress_every_s);
      }
      if (map_sent_ && http_ && now >= next_sample) {
        record_sample_locked();
        next_sample = now + std::chrono::seconds(1);
      }
      lock.unlock();
      flush_outbox();
      lock.lock();
    }
    if (switch_) finish_switch_locked(true);
    write_summary_locked();
    // The nodes hear why the run failed (a shutdown carries no payload): a registration timeout,
    // an interruption, a shard lost with its parameters.
    if (!failure_.empty()) broadcast_locked(Op::kControl, json{{"event", "ended"}, {"reason", failure_}});
    broadcast_locked(Op::kShutdown, json());
    lock.unlock();
    flush_outbox();
    // Give the shutdown messages time to leave before the socket closes.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (http_) http_->stop();
    transport_->stop();
    spdlog::info("coordinator done{}", exit_code_ == 0 ? "" : " (the run failed)");
    return exit_code_;
  }

 private:
  static std::chrono::duration<double> dsec(double s) { return std::chrono::duration<double>(s); }

  std::string read_spec_text() {
    spec_ = load_model(opt_.model);
    std::ifstream in(spec_.source);
    std::stringstream ss;
    ss << in.rdbuf();
    mode_ = Consistency::parse(opt_.mode);
    return ss.str();
  }

  int count(const std::string& role) const {
    int n = 0;
    for (const auto& [_, node] : nodes_) n += node.role == role;
    return n;
  }

  // Called with mu_ held: queue the message; flush_outbox() sends it once mu_ is released.
  // (A send from a thread other than the transport's owner may block until the owner thread
  // drains it, and the owner thread may be waiting for mu_ in receive().)
  void send_to(const PeerId& peer, Op op, const json& j, std::uint64_t clock = 0) {
    Message m;
    m.peer = peer;
    m.header.op = op;
    m.header.clock = clock;
    if (!j.is_null()) {
      std::string text = j.dump();
      m.header.length = text.size();
      m.payload = Payload::copy(text);
    }
    outbox_.push_back(std::move(m));
  }

  void flush_outbox() {
    std::vector<Message> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out.swap(outbox_);
    }
    for (auto& m : out) transport_->send(std::move(m));
  }

  void broadcast_locked(Op op, const json& j) {
    for (const auto& [_, n] : nodes_)
      if (n.alive) send_to(n.peer, op, j);
  }

  void receive(Message&& m) {
    handle(std::move(m));
    flush_outbox();
  }

  void handle(Message&& m) {
    json j;
    if (!m.payload.empty()) {
      try {
        j = parse_peer_json(m.payload.view());
      } catch (const json::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        if (first_drop_locked(m.peer))
          spdlog::warn("{}: unreadable JSON in a {} message ({}), dropped{}", peer_name(m.peer), op_name(m.header.op),
                       e.what(), kLaterDropped);
        return;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (m.header.op == Op::kRegister) return on_register(m.peer, j);
    // `psbed ctl` (or any peer) asking something of the run; it need not be a node.
    if (m.header.op == Op::kControl && j.is_object() && j.value("event", "") == "ctl") {
      PeerId peer = m.peer;
      return on_ctl(j, [this, peer](json reply) { ctl_reply(peer, std::move(reply)); });
    }
    auto it = nodes_.find(m.peer);
    if (it == nodes_.end()) {
      if (first_drop_locked(m.peer))
        spdlog::warn("{} message from unregistered peer {}, dropped{}", op_name(m.header.op), peer_name(m.peer),
                     kLaterDropped);
      return;
    }
    Node& n = it->second;
    n.last_seen = Clock::now();
    if (!n.alive) return;  // declared dead: too late to come back
    switch (m.header.op) {
      case Op::kHeartbeat: send_to(m.peer, Op::kHeartbeat, json()); break;  // "still here"
      case Op::kBarrier: on_barrier(n, j.value("name", "")); break;
      case Op::kControl: on_control(n, j); break;
      default:
        if (first_drop_locked(m.peer))
          spdlog::warn("{}: unexpected {} message, dropped{}", n.name, op_name(m.header.op), kLaterDropped);
    }
  }

  // Messages the coordinator drops are logged once a peer: a chatty or broken peer must not
  // flood the log, and each one that misbehaves still shows up in it. A flood of fresh
  // identities is counted but not remembered past kMaxWarnedPeers.
  static constexpr const char* kLaterDropped = " (later ones from this peer are dropped without a word)";
  static constexpr std::size_t kMaxWarnedPeers = 4096;
  bool first_drop_locked(const PeerId& peer) {
    ++dropped_messages_;
    if (warned_peers_.count(peer) || warned_peers_.size() >= kMaxWarnedPeers) return false;
    warned_peers_.insert(peer);
    return true;
  }

  void on_register(const PeerId& peer, const json& j) {
    std::string role = j.value("role", ""), name = j.value("name", "");
    if (auto it = nodes_.find(peer); it != nodes_.end()) {  // a retry: answer again
      send_to(peer, Op::kControl, {{"event", "registered"}, {"id", it->second.id}});
      return;
    }
    auto reject = [&](const std::string& why) {
      spdlog::warn("registration of '{}' refused: {}", name, why);
      send_to(peer, Op::kError, {{"error", "registration refused: " + why}});
    };
    if (role != "server" && role != "worker") return reject("unknown role '" + role + "', expected server or worker");
    if (finished_) return send_to(peer, Op::kShutdown, json());  // the run ended before it began
    if (map_sent_) return reject("the cluster has already started");
    const int want = role == "server" ? opt_.servers : opt_.workers;
    if (count(role) >= want) return reject("all " + std::to_string(want) + " " + role + "s have registered already");
    if (role == "server" && j.value("address", "").empty()) return reject("a server must give its address");
    // Barriers and policy switches count nodes by name: two of one name would never be complete.
    for (const auto& [_, other] : nodes_)
      if (!name.empty() && other.name == name)
        return reject("another node is named '" + name + "' already: give each node its own --name");
    if (role == "worker") {
      if (const std::string why = worker_mismatch_locked(j); !why.empty()) return reject(why);
    }
    // worker-5 in a 2-worker cluster would take another id, and push the real worker-1 aside.
    if (const int k = numbered_id(role, name); k >= want)
      return reject("'" + name + "' asks for " + role + " id " + std::to_string(k) + ", but the cluster has " +
                    std::to_string(want) + " " + role + "(s), ids 0 to " + std::to_string(want - 1));
    Node n;
    n.role = role, n.name = name.empty() ? peer_name(peer) : name, n.address = j.value("address", "");
    n.peer = peer, n.id = free_id_locked(role, n.name, want), n.last_seen = Clock::now(), n.extra = j;
    spdlog::info("{} registered as {} {} {}", n.name, role, n.id, n.address);
    send_to(peer, Op::kControl, {{"event", "registered"}, {"id", n.id}});
    nodes_.emplace(peer, std::move(n));
    if (count("server") == opt_.servers && count("worker") == opt_.workers) send_map_locked();
  }

  // Why a registering worker cannot train with this cluster ("" if it can): a model other than the
  // cluster's, or another data set than the workers before it (the epochs and the summary are
  // reckoned from one). A worker that says nothing of them (an older one) is not compared.
  std::string worker_mismatch_locked(const json& j) const {
    const std::int64_t params = whole(j, "parameters"), layers = whole(j, "layers");
    if ((params >= 0 && params != spec_.parameter_count()) ||
        (layers >= 0 && layers != std::int64_t(spec_.layers.size())))
      return "its model '" + text(j, "model", "?") + "' (" + std::to_string(params) +
             " parameters) is not the cluster's '" + spec_.name + "' (" + std::to_string(spec_.parameter_count()) +
             "): give it --model " + spec_.name;
    for (const auto& [_, n] : nodes_) {
      if (n.role != "worker") continue;
      const std::string set = text(j, "dataset"), other = text(n.extra, "dataset");
      const std::int64_t size = whole(j, "train_size"), other_size = whole(n.extra, "train_size");
      if ((!set.empty() && !other.empty() && set != other) || (size >= 0 && other_size >= 0 && size != other_size))
        return "its data (" + text(j, "data", set) + ") is not " + n.name + "'s (" + text(n.extra, "data", other) +
               "): every worker trains on the same data set";
      break;  // every worker registered was compared with the first
    }
    return "";
  }

  // K for a name <role>-K (worker-3; not worker-007 or worker-1234567), else -1.
  static int numbered_id(const std::string& role, const std::string& name) {
    const std::string prefix = role + "-";
    if (name.size() <= prefix.size() || name.size() - prefix.size() > 6 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
      return -1;
    const int k = std::stoi(name.substr(prefix.size()));
    return name == prefix + std::to_string(k) ? k : -1;
  }

  // A node named <role>-K (as launch and the Kubernetes manifests name them) gets id K if it is
  // free, so that a node's name and its number agree in every log, trace and summary whatever
  // order the nodes registered in; any other takes the highest free id, leaving the low ones to
  // numbered nodes still to come. Either way the ids of a role end up 0 .. want-1.
  int free_id_locked(const std::string& role, const std::string& name, int want) const {
    std::vector<bool> taken(std::size_t(want), false);
    for (const auto& [_, n] : nodes_)
      if (n.role == role && n.id >= 0 && n.id < want) taken[std::size_t(n.id)] = true;
    if (const int k = numbered_id(role, name); k >= 0 && k < want && !taken[std::size_t(k)]) return k;
    for (int k = want - 1; k >= 0; --k)
      if (!taken[std::size_t(k)]) return k;
    return want;  // not reached: registration stops at `want`
  }

  void send_map_locked() {
    ClusterMap map;
    map.exp.model_name = spec_.name;
    map.exp.model_toml = spec_text_;
    map.exp.mode = mode_;
    map.exp.sgd = opt_.sgd;
    map.exp.lr_schedule = opt_.lr_schedule;
    map.exp.batch = opt_.batch;
    map.exp.seed = opt_.seed;
    map.exp.partition_bytes = opt_.partition_bytes;
    map.exp.policy = opt_.policy;
    map.exp.policy.seed = opt_.seed;
    std::int64_t train_size = -1;
    for (const auto& [_, n] : nodes_) {
      NodeInfo info{n.role, n.id, n.name, n.address};
      (n.role == "server" ? map.servers : map.workers).push_back(info);
      if (n.role == "worker") train_size = whole(n.extra, "train_size");
    }
    auto by_id = [](const NodeInfo& a, const NodeInfo& b) { return a.id < b.id; };
    std::sort(map.servers.begin(), map.servers.end(), by_id);
    std::sort(map.workers.begin(), map.workers.end(), by_id);
    if (opt_.steps > 0) {
      map.exp.steps = opt_.steps;
    } else {
      if (train_size <= 0) return fail_locked("workers did not report their training-set size; give --steps");
      map.exp.steps = std::int64_t(opt_.epochs) * (train_size / opt_.workers / opt_.batch);
      if (map.exp.steps < 1)
        return fail_locked("a training set of " + std::to_string(train_size) + " samples gives less than one step of " +
                           std::to_string(opt_.batch) + " per worker");
    }
    map.plan = make_partition(spec_, opt_.partition_bytes, opt_.servers);
    steps_ = map.exp.steps;
    map_json_ = map.to_json();
    broadcast_locked(Op::kClusterMap, map_json_);
    map_sent_ = true;
    last_advance_ = Clock::now();
    training_started_ = Clock::now();
    spdlog::info("cluster complete: {} parts of at most {} bytes over {} shard(s) (imbalance {:.3f}); {} steps per worker",
                 map.plan.parts.size(), opt_.partition_bytes, opt_.servers, map.plan.imbalance(), steps_);
  }

  std::vector<Node*> live(const std::string& role) {
    std::vector<Node*> v;
    for (auto& [_, n] : nodes_)
      if (n.alive && (role == "all" || n.role == role)) v.push_back(&n);
    return v;
  }

  void on_barrier(Node& n, const std::string& name) {
    barriers_[name].insert(n.name);
    release_barriers_locked();
  }

  void release_barriers_locked() {
    if (stopping_) return;  // an interrupted run evaluates nothing
    for (auto it = barriers_.begin(); it != barriers_.end();) {
      bool all = true;
      for (Node* w : live("worker")) all = all && it->second.count(w->name);
      if (!all) {
        ++it;
        continue;
      }
      json rel = {{"name", it->first}};
      if (it->first == "trained") {
        auto ws = live("worker");
        int evaluator = -1;
        for (Node* w : ws) evaluator = evaluator < 0 ? w->id : std::min(evaluator, w->id);
        rel["evaluator"] = evaluator;
        evaluator_ = evaluator;
        spdlog::info("all live workers finished training; worker-{} evaluates the final parameters", evaluator);
      }
      for (Node* w : live("worker")) send_to(w->peer, Op::kBarrierRelease, rel);
      it = barriers_.erase(it);
    }
  }

  void on_control(Node& n, const json& j) {
    const std::string ev = j.value("event", "");
    if (ev == "progress") {
      if (j.value("step", std::int64_t(0)) > std::int64_t(num(n.progress, "step"))) advanced_locked(n);
      n.progress = j;
      if (n.step_bins.empty()) n.step_bins.assign(kStepBuckets.size() + 1, 0);
      if (auto it = j.find("step_ms"); it != j.end() && it->is_array()) {
        for (const auto& ms : *it) {
          if (!ms.is_number() || ms.get<double>() < 0) continue;
          const double t = ms.get<double>() / 1e3;
          n.step_bins[std::lower_bound(kStepBuckets.begin(), kStepBuckets.end(), t) - kStepBuckets.begin()] += 1;
          n.step_sum_s += t;
        }
      }
    } else if (ev == "waiting") {
      n.waiting = j;
    } else if (ev == "stats") {
      n.stats = j;
    } else if (ev == "report") {
      n.report = j;
      if (switch_) finish_switch_locked(false);  // a worker done training will not switch
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
          spdlog::warn("the model did not learn: {:.2f}% is about chance for {} classes ({:.0f}%) after {} steps per "
                       "worker ({})",
                       100 * test_accuracy_, spec_.classes, 100 * chance, steps_,
                       opt_.sgd.lr > 0 ? "too few steps, or too large an --lr: asynchronous SGD with several workers "
                                         "needs a smaller one, docs/concepts.md, \"Consistency\""
                                       : "--lr 0 changes nothing");
      } else
        spdlog::info("no test accuracy: {}", evaluation_note_.empty() ? "none reported" : evaluation_note_);
      finished_ = true;
      cv_.notify_all();
    } else if (ev == "failed") {
      fail_node_locked(n, j.value("reason", std::string("reported a failure")));
    } else {
      spdlog::warn("{}: unknown control event '{}', dropped", n.name, ev);
    }
  }

  // ---- live policy switch ----------------------------------------------------------------

  static constexpr double kSwitchTimeoutS = 30;

  // Answers a switch request: `psbed ctl` over ZeroMQ, or an HTTP client. Called with mu_ held,
  // so it must only queue its answer.
  using SwitchReply = std::function<void(json)>;

  struct Switch {
    std::uint64_t seq = 0;
    SwitchReply reply;
    policy::PolicyOptions options;
    Clock::time_point requested;
    double requested_s = 0;  // since the coordinator started
    json workers = json::object();  // worker name -> step at which it switched
  };

  void ctl_reply(const PeerId& peer, json j) {
    j["event"] = "ctl_reply";
    send_to(peer, Op::kControl, j);
  }

  void on_ctl(const json& j, const SwitchReply& reply) {
    const std::string command = j.value("command", "");
    if (command == "status") {
      json workers = json::array();
      for (const auto& [_, n] : nodes_) {
        if (n.role != "worker") continue;
        json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
        if (!n.progress.is_null())
          for (const char* k : {"step", "loss", "steps_per_sec", "images_per_sec", "policy"})
            if (n.progress.contains(k)) w[k] = n.progress[k];
        workers.push_back(w);
      }
      return reply({{"ok", true}, {"policy", policy_to_json(policy_)}, {"describe", describe_policy(policy_)},
                    {"mode", mode_.str()}, {"steps", steps_}, {"started", map_sent_}, {"workers", workers},
                    {"policy_switches", switches_}});
    }
    if (command != "policy")
      return reply({{"ok", false}, {"error", "unknown command '" + command + "', expected policy or status"}});
    json req = j;
    req.erase("event");
    req.erase("command");
    if (auto refused = start_switch_locked(req, reply)) reply({{"ok", false}, {"error", refused->second}});
  }

  // The one way a policy switch starts, for ctl and HTTP alike. A refusal comes back at once as
  // (HTTP status, reason) and nothing changes; otherwise `reply` gets the outcome later, from
  // finish_switch_locked.
  std::optional<std::pair<int, std::string>> start_switch_locked(const json& req, SwitchReply reply) {
    // A bad request is named first, whatever the run's state: the caller can fix it now.
    policy::PolicyOptions o;
    try {
      o = policy_from_request(req, policy_);
    } catch (const Error& e) {
      return std::make_pair(400, std::string(e.what()));
    }
    if (!map_sent_) return std::make_pair(503, std::string("the run has not started yet: not every node has registered"));
    if (finished_) return std::make_pair(409, std::string("the run has ended"));
    if (switch_)
      return std::make_pair(
          409, std::string("a policy switch is already under way: try again once it took effect (within a step or two)"));
    Switch sw;
    sw.seq = ++switch_seq_;
    sw.reply = std::move(reply);
    sw.options = o;
    sw.requested = Clock::now();
    sw.requested_s = (now_us() - started_us_) / 1e6;
    spdlog::info("policy switch {} requested: {} (was {})", sw.seq, describe_policy(o), describe_policy(policy_));
    for (Node* w : live("worker"))
      if (w->report.is_null())
        send_to(w->peer, Op::kControl, {{"event", "set_policy"}, {"seq", sw.seq}, {"policy", policy_to_json(o)}});
    switch_ = std::move(sw);
    finish_switch_locked(false);
    return std::nullopt;
  }

  // Answers the pending switch once every live worker still training has switched (or, with
  // `timeout`, now), and records it for the summary.
  void finish_switch_locked(bool timeout) {
    if (!switch_) return;
    std::vector<std::string> missing;
    for (Node* w : live("worker"))
      if (w->report.is_null() && !switch_->workers.contains(w->name)) missing.push_back(w->name);
    if (!missing.empty() && !timeout) return;
    Switch sw = std::move(*switch_);
    switch_.reset();
    std::int64_t step = -1;
    for (const auto& [_, s] : sw.workers.items()) step = std::max(step, s.get<std::int64_t>());
    json reply = {{"policy", policy_to_json(sw.options)}, {"describe", describe_policy(sw.options)},
                  {"workers", sw.workers}, {"step", step}, {"timed_out", !missing.empty()}};
    if (sw.workers.empty()) {
      reply["ok"] = false;
      reply["error"] = missing.empty() ? "training ended before any worker switched"
                                       : "no worker switched within " + std::to_string(int(kSwitchTimeoutS)) + " s";
    } else {
      reply["ok"] = missing.empty();
      if (!missing.empty()) {
        std::string names;
        for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
        reply["error"] = "not switched within " + std::to_string(int(kSwitchTimeoutS)) + " s: " + names;
      }
      policy_ = sw.options;
      switches_.push_back({{"seq", sw.seq}, {"policy", policy_to_json(sw.options)}, {"describe", describe_policy(sw.options)},
                           {"requested_s", sw.requested_s}, {"effective_s", (now_us() - started_us_) / 1e6},
                           {"step", step}, {"workers", sw.workers}});
      spdlog::info("policy switch {} took effect: {} from step {}", sw.seq, describe_policy(sw.options), step);
    }
    sw.reply(reply);
  }

  // ---- HTTP: status, metrics, policy switch, prediction ------------------------------------

  void start_http() {
    ControlPlaneApi api;
    api.status = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return status_locked();
    };
    api.metrics = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return metrics_locked();
    };
    api.switch_policy = [this](const json& req, std::function<void(int, json)> done) {
      std::unique_lock<std::mutex> lock(mu_);
      auto refused = start_switch_locked(req, [done](json reply) {
        const bool ok = reply.value("ok", false);
        done(ok ? 200 : reply.value("timed_out", false) ? 504 : 409, std::move(reply));
      });
      if (refused) {
        lock.unlock();
        return done(refused->first, {{"ok", false}, {"error", refused->second}});
      }
      // The set_policy messages wait in the outbox: wake the run loop to send them, so this
      // thread never blocks on the coordinator's socket.
      cv_.notify_all();
    };
    api.prediction = [this] { return prediction(); };
    api.history = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return json{{"samples", json(history_)}, {"policy_switches", switches_}};
    };
    HttpOptions h;
    h.address = opt_.http;
    h.token = opt_.http_token;
    http_ = std::make_unique<HttpServer>(h, make_control_handler(std::move(api)));
    http_->start();
    spdlog::info("dashboard on {}{}", http_->url(), opt_.http_token.empty() ? "" : " (token required)");
    if (!opt_.http_file.empty()) {
      const std::string tmp = opt_.http_file + ".tmp";
      std::ofstream(tmp) << http_->url() << "\n";
      std::rename(tmp.c_str(), opt_.http_file.c_str());
    }
  }

  double since_start_s() const { return (now_us() - started_us_) / 1e6; }

  // The dashboard's memory: one sample a second of what it charts, the last ten minutes, so a
  // page opened in the middle of a run starts with its history (GET /api/history).
  static constexpr std::size_t kHistory = 600;

  void record_sample_locked() {
    const json st = status_locked();
    json workers = json::object();
    for (const auto& w : st["workers"]) {
      // Not yet reporting, finished or dead: nothing to draw (not a zero).
      if (!w["alive"].get<bool>() || w["done"].get<bool>() || !w.contains("images_per_sec")) continue;
      workers[w["name"].get<std::string>()] = {{"images_per_sec", w.value("images_per_sec", 0.0)},
                                               {"bytes_up_per_sec", w["bytes_up_per_sec"]},
                                               {"bytes_down_per_sec", w["bytes_down_per_sec"]},
                                               {"loss", w.value("loss", json(nullptr))}};
    }
    if (workers.empty()) return;
    history_.push_back({{"t_s", st["t_s"]}, {"images_per_sec", st["totals"]["images_per_sec"]}, {"workers", workers}});
    if (history_.size() > kHistory) history_.pop_front();
  }

  static double age_s(Clock::time_point now, Clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  }

  // Workers still training: a stall is a lack of steps among them, not a finished run's quiet.
  bool training_locked() const {
    if (!map_sent_ || finished_ || stopping_) return false;
    for (const auto& [_, n] : nodes_)
      if (n.role == "worker" && n.alive && n.report.is_null()) return true;
    return false;
  }

  void advanced_locked(Node& n) {
    n.waiting = json();
    last_advance_ = Clock::now();
    if (stall_.is_null()) return;
    spdlog::info("progress again after a stall of {:.0f} s: {} finished step {}",
                 age_s(last_advance_, stall_since_), n.name, std::int64_t(num(n.progress, "step")) + 1);
    stall_ = json();
  }

  // One line for the log and the launcher: who is where, and what each worker said it waits on.
  std::string stall_text_locked(Clock::time_point now) const {
    std::string line = fmt::format("no progress for {:.0f} s:", age_s(now, last_advance_));
    const char* sep = " ";
    for (const auto& [_, n] : nodes_) {
      if (n.role != "worker" || !n.alive || !n.report.is_null()) continue;
      line += fmt::format("{}{} at step {}", sep, n.name, std::int64_t(num(n.progress, "step")));
      const std::string on = text(n.waiting, "on");
      line += on.empty() ? " (said nothing of a wait: computing, or its word did not come)"
                         : " waiting on " + on;
      sep = "; ";
    }
    return line;
  }

  json stall_json_locked(Clock::time_point now) const {
    json workers = json::array();
    for (const auto& [_, n] : nodes_)
      if (n.role == "worker" && n.alive && n.report.is_null())
        workers.push_back({{"name", n.name},
                           {"step", std::int64_t(num(n.progress, "step"))},
                           {"waiting_on", text(n.waiting, "on")}});
    return {{"seconds", age_s(now, last_advance_)}, {"message", stall_text_locked(now)},
            {"workers", workers}};
  }

  void check_stall_locked(Clock::time_point now) {
    if (opt_.stall_timeout_s <= 0 || !stall_.is_null() || !training_locked()) return;
    if (age_s(now, last_advance_) < opt_.stall_timeout_s) return;
    stall_since_ = last_advance_;
    stall_ = stall_json_locked(now);
    stalls_.push_back(stall_);
    spdlog::warn("{}", stall_["message"].get<std::string>());
  }

  json status_locked() {
    const auto now = Clock::now();
    auto age = [&](Clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
    json nodes = json::array(), workers = json::array(), servers = json::array();
    double ips = 0, sps = 0, up = 0, down = 0;
    std::int64_t min_step = -1;
    for (const auto& [_, n] : nodes_) {
      json node = {{"role", n.role}, {"id", n.id}, {"name", n.name}, {"address", n.address}, {"alive", n.alive},
                   {"heartbeat_age_s", age(n.last_seen)}};
      if (!n.failure.empty()) node["failure"] = n.failure;
      nodes.push_back(node);
      if (n.role == "server") {
        json sv = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
        for (const char* k : {"pushes", "pulls", "bad_messages", "queue_depth"})
          if (n.stats.contains(k)) sv[k] = n.stats[k];
        servers.push_back(sv);
        continue;
      }
      json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}, {"done", !n.report.is_null()}};
      for (const char* k : {"step", "loss", "steps_per_sec", "images_per_sec", "policy", "bytes_pushed", "bytes_pulled"})
        if (n.progress.contains(k)) w[k] = n.progress[k];
      w["bytes_up_per_sec"] = num(n.progress, "bytes_pushed_per_sec");
      w["bytes_down_per_sec"] = num(n.progress, "bytes_pulled_per_sec");
      // A finished or dead worker adds nothing to the cluster's rate any more.
      if (n.alive && n.report.is_null()) {
        ips += num(n.progress, "images_per_sec");
        sps += num(n.progress, "steps_per_sec");
        up += w["bytes_up_per_sec"].get<double>();
        down += w["bytes_down_per_sec"].get<double>();
        const auto step = std::int64_t(num(n.progress, "step"));
        min_step = min_step < 0 ? step : std::min(min_step, step);
      }
      workers.push_back(w);
    }
    auto by_id = [](const json& a, const json& b) { return a["id"] < b["id"]; };
    std::sort(nodes.begin(), nodes.end(), [](const json& a, const json& b) {
      return std::make_pair(a["role"].get<std::string>(), a["id"].get<int>()) <
             std::make_pair(b["role"].get<std::string>(), b["id"].get<int>());
    });
    std::sort(workers.begin(), workers.end(), by_id);
    std::sort(servers.begin(), servers.end(), by_id);
    json policy = policy_to_json(policy_);
    policy["describe"] = describe_policy(policy_);
    json st = {{"t_s", since_start_s()},
               {"model", spec_.name},
               {"mode", mode_.str()},
               {"batch", opt_.batch},
               {"steps", steps_},
               {"step", std::max<std::int64_t>(min_step, 0)},
               {"started", map_sent_},
               {"finished", finished_},
               {"policy", policy},
               {"policies", policy::policy_names()},
               {"switch_pending", switch_.has_value()},
               {"policy_switches", switches_},
               {"nodes", nodes},
               {"workers", workers},
               {"servers", servers},
               {"totals", {{"images_per_sec", ips}, {"steps_per_sec", sps}, {"bytes_up_per_sec", up},
                           {"bytes_down_per_sec", down}}},
               {"prediction", {{"available", !opt_.profile.empty() && bool(opt_.predict)}}},
               {"stall", stall_.is_null() ? json() : stall_json_locked(now)}};
    return st;
  }

  std::string metrics_locked() {
    const auto now = Clock::now();
    MetricsText m;
    auto labels = [](const Node& n) { return MetricLabels{{"role", n.role}, {"node", n.name}}; };
    m.family("psbed_node_up", "gauge", "1 while the node is alive, 0 once declared dead");
    for (const auto& [_, n] : nodes_) m.sample("psbed_node_up", labels(n), n.alive ? 1 : 0);
    m.family("psbed_node_heartbeat_age_seconds", "gauge", "Seconds since the coordinator last heard from the node");
    for (const auto& [_, n] : nodes_)
      m.sample("psbed_node_heartbeat_age_seconds", labels(n), std::chrono::duration<double>(now - n.last_seen).count());
    auto workers = [&](const char* name, const char* type, const char* help, const char* key) {
      m.family(name, type, help);
      for (const auto& [_, n] : nodes_)
        if (n.role == "worker" && n.progress.contains(key))
          m.sample(name, labels(n), std::string(key) == "loss" ? loss_of(n.progress) : num(n.progress, key));
    };
    workers("psbed_worker_steps_total", "counter", "Training steps the worker has finished", "step");
    workers("psbed_bytes_pushed_total", "counter", "Gradient bytes the worker has pushed to the servers", "bytes_pushed");
    workers("psbed_bytes_pulled_total", "counter", "Parameter bytes the worker has pulled from the servers", "bytes_pulled");
    workers("psbed_worker_images_per_second", "gauge", "Images per second over the worker's last progress interval",
            "images_per_sec");
    workers("psbed_worker_loss", "gauge", "Training loss of the worker's latest step", "loss");
    m.family("psbed_step_duration_seconds", "histogram", "Duration of the worker's training steps");
    for (const auto& [_, n] : nodes_)
      if (n.role == "worker" && !n.step_bins.empty())
        m.histogram("psbed_step_duration_seconds", labels(n), kStepBuckets, n.step_bins, n.step_sum_s);
    auto servers = [&](const char* name, const char* type, const char* help, const char* key) {
      m.family(name, type, help);
      for (const auto& [_, n] : nodes_)
        if (n.role == "server" && n.stats.contains(key)) m.sample(name, labels(n), num(n.stats, key));
    };
    servers("psbed_server_pushes_total", "counter", "Gradient pushes the server shard has applied", "pushes");
    servers("psbed_server_pulls_total", "counter", "Parameter pulls the server shard has answered", "pulls");
    servers("psbed_queue_depth", "gauge", "Messages waiting in the server shard's apply queues", "queue_depth");
    m.family("psbed_bad_messages_total", "counter", "Malformed or out-of-range messages dropped");
    m.sample("psbed_bad_messages_total", {{"role", "coordinator"}, {"node", "coordinator"}},
             double(transport_->bad_messages().total() + dropped_messages_));
    for (const auto& [_, n] : nodes_)
      if (n.role == "server" && n.stats.contains("bad_messages"))
        m.sample("psbed_bad_messages_total", labels(n), num(n.stats, "bad_messages"));
    m.family("psbed_policy_switches_total", "counter", "Live policy switches that took effect");
    m.sample("psbed_policy_switches_total", {}, double(switches_.size()));
    m.family("psbed_policy_info", "gauge", "The transmission policy the workers run now (value always 1)");
    m.sample("psbed_policy_info", {{"policy", policy_.name}, {"describe", describe_policy(policy_)}}, 1);
    m.family("psbed_seconds_since_progress", "gauge",
             "Seconds since a worker last finished a step (while the workers train)");
    m.sample("psbed_seconds_since_progress", {}, training_locked() ? age_s(now, last_advance_) : 0.0);
    m.family("psbed_stalled", "gauge",
             "1 while no worker has finished a step for --stall-timeout, else 0");
    m.sample("psbed_stalled", {}, stall_.is_null() ? 0 : 1);
    m.family("psbed_dropped_unread_total", "counter",
             "Messages dropped because their peer did not read them (its own replies)");
    m.sample("psbed_dropped_unread_total", {{"role", "coordinator"}, {"node", "coordinator"}},
             double(transport_->dropped_unread()));
    for (const auto& [_, n] : nodes_)
      if (n.role == "server" && n.stats.contains("dropped_unread"))
        m.sample("psbed_dropped_unread_total", labels(n), num(n.stats, "dropped_unread"));
    m.family("psbed_run_steps", "gauge", "Steps each worker trains in this run");
    m.sample("psbed_run_steps", {}, double(steps_));
    return m.str();
  }

  // The predictor's figure for the configuration running now; computed once per configuration
  // (a simulation may take a while), outside mu_ so the coordinator goes on meanwhile.
  HttpResponse prediction() {
    if (opt_.profile.empty())
      return HttpResponse::error(404, "no prediction: start the coordinator with --profile profile.json (from psbed profile)");
    if (!opt_.predict)
      return HttpResponse::error(503, "no prediction: this psbed was built without a predictor, measured figures only");
    json config;
    {
      std::lock_guard<std::mutex> lock(mu_);
      int live_workers = 0;
      for (const auto& [_, n] : nodes_) live_workers += n.role == "worker" && n.alive;
      config = {{"model", spec_.name}, {"workers", map_sent_ ? live_workers : opt_.workers}, {"servers", opt_.servers},
                {"mode", mode_.str()}, {"batch", opt_.batch}, {"partition_bytes", opt_.partition_bytes},
                {"policy", policy_to_json(policy_)},
                {"compute", opt_.compute == "real" ? "real" : "replay"}};
    }
    std::lock_guard<std::mutex> lock(predict_mu_);
    const std::string key = config.dump();
    if (key != predicted_for_) {
      try {
        predicted_ = opt_.predict(opt_.profile, config);
      } catch (const std::exception& e) {
        return HttpResponse::error(500, std::string("the predictor failed: ") + e.what());
      }
      predicted_for_ = key;
    }
    return HttpResponse::json(200, {{"images_per_sec", predicted_}, {"config", config}, {"profile", opt_.profile},
                                    {"t_s", since_start_s()}});
  }

  void check_heartbeats_locked(Clock::time_point now) {
    for (auto& [_, n] : nodes_) {
      if (!n.alive) continue;
      double silent = std::chrono::duration<double>(now - n.last_seen).count();
      if (silent > opt_.heartbeat_timeout_s) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "no heartbeat for %.1f s (timeout %.1f s)", silent, opt_.heartbeat_timeout_s);
        fail_node_locked(n, buf);
      }
    }
  }

  void fail_node_locked(Node& n, const std::string& reason) {
    n.alive = false;
    n.failure = reason;
    spdlog::error("{} ({} {}) is dead: {}", n.name, n.role, n.id, reason);
    failed_.push_back({{"name", n.name}, {"role", n.role}, {"id", n.id}, {"reason", reason}});
    if (n.role == "server") return fail_locked("server " + n.name + " died: its parameters are lost");
    if (live("worker").empty()) return fail_locked("every worker died");
    // If it is only silent, not gone, it must stop: its pushes are refused from now on.
    send_to(n.peer, Op::kShutdown, json());
    // Servers stop waiting for it (bsp/ssp), barriers stop counting it.
    for (Node* s : live("server")) send_to(s->peer, Op::kControl, {{"event", "worker_dead"}, {"worker", n.id}});
    release_barriers_locked();
    if (switch_) finish_switch_locked(false);
    if (evaluator_ == n.id) {
      // Training is over; only the evaluation is lost. Finish with no test accuracy.
      spdlog::warn("the evaluating worker {} died: finishing without a test accuracy", n.name);
      evaluation_note_ = n.name + " died while evaluating";
      finished_ = true;
      cv_.notify_all();
    }
  }

  void fail_locked(const std::string& why) {
    spdlog::error("run failed: {}", why);
    // The first cause is the run's: a dead shard, then "every worker died" as they stop.
    if (failure_.empty()) failure_ = why;
    exit_code_ = 1;
    finished_ = true;
    cv_.notify_all();
  }

  void print_progress_locked() {
    double ips = 0, sps = 0;
    std::int64_t min_step = -1, max_step = 0;
    std::string losses;
    for (Node* w : live("worker")) {
      if (w->progress.is_null()) continue;
      std::int64_t s = std::int64_t(num(w->progress, "step"));
      min_step = min_step < 0 ? s : std::min(min_step, s);
      max_step = std::max(max_step, s);
      ips += num(w->progress, "images_per_sec");
      sps += num(w->progress, "steps_per_sec");
      char buf[48];
      std::snprintf(buf, sizeof buf, " w%d %.3f", w->id, loss_of(w->progress));
      losses += buf;
    }
    if (min_step < 0) return;
    spdlog::info("step {}..{}/{}  {:.1f} steps/s  {:.0f} images/s  loss{}", min_step, max_step, steps_, sps, ips, losses);
  }

  // The data set the workers trained on, as they described it when they registered ("mnist from
  // ... (8000 train / 2000 test)", "synthetic ..."); null if none said.
  json data_described_locked() const {
    for (const auto& [_, n] : nodes_)
      if (n.role == "worker" && n.extra.contains("data") && n.extra["data"].is_string()) return n.extra["data"];
    return nullptr;
  }

  void write_summary_locked() {
    json per = json::array();
    double ips = 0, sps = 0;
    for (const auto& [_, n] : nodes_) {
      if (n.role != "worker") continue;
      json w = {{"name", n.name}, {"id", n.id}, {"alive", n.alive}};
      if (!n.report.is_null()) {
        for (const char* k : {"steps", "images_per_sec", "steps_per_sec", "first_loss", "final_loss", "steady_steps"})
          if (n.report.contains(k)) w[k] = n.report[k];
      }
      // The aggregate is the workers' that trained to the end: one that left early (stopped by its
      // own signal, with a report of its steps so far) trained over a shorter window, and adding
      // its pace to theirs counted a worker the run no longer had; a worker that died without a
      // word has no figures at all. Either keeps its failure beside whatever it reported (one that
      // died after its last step, evaluating, still counts).
      if (n.alive || num(n.report, "steps", -1) >= double(steps_)) {
        ips += num(n.report, "images_per_sec");
        sps += num(n.report, "steps_per_sec");
      }
      if (!n.alive) w["failure"] = n.failure;
      per.push_back(w);
    }
    std::sort(per.begin(), per.end(), [](const json& a, const json& b) { return a["id"] < b["id"]; });
    json s = {{"model", spec_.name},
              {"parameters", spec_.parameter_count()},
              {"workers", opt_.workers},
              {"servers", opt_.servers},
              {"mode", mode_.str()},
              {"policy", opt_.policy.name},
              {"policy_options", policy_to_json(opt_.policy)},
              {"policy_switches", switches_},
              {"stalls", stalls_},
              {"policy_final", policy_.name},
              {"compute", opt_.compute},
              {"batch", opt_.batch},
              {"steps", steps_},
              {"lr", as_given(opt_.sgd.lr)},
              {"momentum", as_given(opt_.sgd.momentum)},
              {"weight_decay", as_given(opt_.sgd.weight_decay)},
              {"seed", opt_.seed},
              {"data", data_described_locked()},
              {"lr_schedule", opt_.lr_schedule},
              {"partition_bytes", opt_.partition_bytes},
              {"steps_per_sec", sps},
              {"images_per_sec", ips},
              {"per_worker", per},
              {"failed_nodes", failed_},
              {"test_accuracy", test_accuracy_ >= 0 ? json(test_accuracy_) : json(nullptr)},
              {"ok", exit_code_ == 0},
              {"duration_s", std::chrono::duration<double>(Clock::now() - started_).count()}};
    if (!failure_.empty()) s["failure"] = failure_;
    if (!evaluation_note_.empty()) s["evaluation"] = evaluation_note_;
    if (!map_json_.is_null()) s["cluster"] = {{"servers", map_json_["servers"]}, {"workers", map_json_["workers"]},
                                              {"parts", map_json_["parts"].size()}};
    if (opt_.summary_path.empty()) return;
    try {
      write_text_file(opt_.summary_path, s.dump(2) + "\n");
    } catch (const std::exception& e) {
      spdlog::error("the summary: {}", e.what());
      exit_code_ = exit_code_ ? exit_code_ : 1;
      return;
    }
    spdlog::info("summary written to {}: {:.1f} steps/s, {:.0f} images/s in all", opt_.summary_path, sps, ips);
  }

  CoordinatorOptions opt_;
  ModelSpec spec_;
  std::string spec_text_;
  Consistency mode_;
  std::unique_ptr<ZmqTransport> transport_;
  std::mutex mu_;
  std::set<PeerId> warned_peers_;        // first_drop_locked
  std::uint64_t dropped_messages_ = 0;  // well-formed frames whose content the coordinator dropped
  std::condition_variable cv_;
  std::map<PeerId, Node> nodes_;
  std::vector<Message> outbox_;
  std::map<std::string, std::set<std::string>> barriers_;
  json map_json_;
  json failed_ = json::array();
  policy::PolicyOptions policy_;  // what the workers run now
  std::optional<Switch> switch_;
  std::uint64_t switch_seq_ = 0;
  json switches_ = json::array();
  bool map_sent_ = false, finished_ = false;
  Clock::time_point last_advance_{};  // when a worker last finished a step (or the start)
  json stall_;                        // the stall under way, said once; null when none
  Clock::time_point stall_since_{};
  json stalls_ = json::array();       // every stall said, for the summary
  int exit_code_ = 0, evaluator_ = -1;
  std::string failure_, evaluation_note_;
  double test_accuracy_ = -1;
  std::int64_t steps_ = 0;
  Clock::time_point started_, training_started_;
  double started_us_ = 0;
  std::deque<json> history_;
  std::mutex predict_mu_;  // one prediction at a time; guards the two below
  std::string predicted_for_;
  double predicted_ = 0;
  // Interrupted: the workers were told to stop; their reports are awaited until stop_deadline_.
  static constexpr double kStopReportS = 5;
  bool stopping_ = false;
  Clock::time_point stop_deadline_;
  std::string stop_reason_;
  // Last: destroyed first, so no request is being handled while the state it reads goes away.
  std::unique_ptr<HttpServer> http_;
};

}  // namespace

int run_coordinator(const CoordinatorOptions& opt) {
  if (opt.servers < 1 || opt.workers < 1)
    throw Error("--servers and --workers must be at least 1, got " + std::to_string(opt.servers) +
                " and " + std::to_string(opt.workers));
  policy::make_policy(opt.policy);  // refuse an unknown policy before anyone registers
  if (!opt.profile.empty() && !std::ifstream(opt.profile)) throw Error("cannot read the profile '" + opt.profile + "'");
  Coordinator c(opt);
  return c.run();
}

}  // namespace psbed::ps
