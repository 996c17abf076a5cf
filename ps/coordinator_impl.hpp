// The coordinator's one class, private to its files (ps/coordinator.hpp is its public face). It
// is a single state behind one mutex, so it stays one class; its code is split by seam:
//   coordinator.cpp           the run loop, messages in and out, a stop by signal
//   coordinator_nodes.cpp     registration, the cluster map, barriers, heartbeats and failures
//   coordinator_control.cpp   `psbed ctl`, the live policy switch, the HTTP control plane
//   coordinator_comm.cpp      the live --comm switch (`psbed ctl comm`)
//   coordinator_status.cpp    progress, stall reporting, /api/status, /metrics
//   coordinator_summary.cpp   summary.json
#pragma once
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.hpp"
#include "core/consistency.hpp"
#include "core/model_spec.hpp"
#include "core/policy.hpp"
#include "core/trace.hpp"
#include "ps/coordinator.hpp"
#include "ps/http_server.hpp"
#include "ps/prediction_runner.hpp"
#include "ps/protocol.hpp"
#include "ps/stop_signals.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps::coordinator_detail {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Workers' JSON is input like any other: a field of the wrong type reads as the default.
inline double num(const json& j, const char* key, double dflt = 0) {
  if (!j.is_object()) return dflt;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : dflt;
}

// A peer's field of a kind, or the default where it is absent or of another kind (json::value
// throws on a wrong kind: a peer's message must not).
inline std::int64_t whole(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<std::int64_t>()
                                                                        : -1;
}
inline std::string text(const json& j, const char* key, const std::string& dflt = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : dflt;
}

// A worker's loss: JSON has no NaN, so a diverged worker's NaN arrives as null, and reads as NaN
// here (num's 0 would show a diverged run as a converged one).
inline double loss_of(const json& j) {
  if (j.is_object() && j.contains("loss") && j["loss"].is_null()) return std::nan("");
  return num(j, "loss");
}

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
inline const std::vector<double> kStepBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,    1,     2.5,  5,     10};

// Functions named *_locked are called with mu_ held.
class Coordinator {
 public:
  explicit Coordinator(const CoordinatorOptions& opt);
  int run();

 private:
  static std::chrono::duration<double> dsec(double s) { return std::chrono::duration<double>(s); }
  static double age_s(Clock::time_point now, Clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  }
  double since_start_s() const { return (now_us() - started_us_) / 1e6; }

  // ---- coordinator.cpp: the run loop, messages in and out ----------------------------------
  void serve_locked(std::unique_lock<std::mutex>& lock, BlockedStopSignals& stops);
  bool go_on_after_stop_locked(int sig, Clock::time_point now);
  std::string read_spec_text();
  void send_to(const PeerId& peer, Op op, const json& j, std::uint64_t clock = 0);
  // One payload for many peers: its bytes are shared by every send, not copied per peer.
  void send_to(const PeerId& peer, Op op, const Payload& payload, std::uint64_t clock = 0);
  static Payload json_payload(const json& j);
  void flush_outbox();
  void broadcast_locked(Op op, const json& j);
  void receive(Message&& m);
  void handle(Message&& m);
  bool first_drop_locked(const PeerId& peer);
  // `psbed ctl` requests a peer may make a second: a person or a script makes a few; a flood
  // of them would take the coordinator's CPU from the run it serves.
  static constexpr int kCtlPerSecond = 50;
  bool ctl_allowed_locked(const PeerId& peer, Clock::time_point now);
  void on_control(Node& n, const json& j);
  void fail_locked(const std::string& why);

  // Messages the coordinator drops are logged once a peer: a chatty or broken peer must not
  // flood the log, and each one that misbehaves still shows up in it. A flood of fresh
  // identities is counted but not remembered past kMaxWarnedPeers.
  static constexpr const char* kLaterDropped =
      " (later ones from this peer are dropped without a word)";
  static constexpr std::size_t kMaxWarnedPeers = 4096;
  // The largest message taken at all (a worker's progress of a second's steps is a few KiB),
  // and the largest registration (a handful of fields).
  static constexpr std::uint64_t kMaxControlBytes = 1 << 20;
  static constexpr std::size_t kMaxRegisterBytes = 64 << 10;

  // ---- coordinator_nodes.cpp: registration, map, barriers, heartbeats, failures -------------
  int count(const std::string& role) const;
  std::vector<Node*> live(const std::string& role);
  void on_register(const PeerId& peer, const json& j);
  static json registered_reply(const json& reg, int id);
  std::string worker_mismatch_locked(const json& j) const;
  std::string link_id_problem_locked(const json& j) const;
  void server_failed_locked(Node& n);
  static int numbered_id(const std::string& role, const std::string& name);
  int free_id_locked(const std::string& role, const std::string& name, int want) const;
  void send_map_locked();
  void on_barrier(Node& n, const std::string& name);
  void release_barriers_locked();
  void check_heartbeats_locked(Clock::time_point now);
  void fail_node_locked(Node& n, const std::string& reason);
  // ---- coordinator_rejoin.cpp: a dead shard's process back (--replicas 2) -------------------
  // True when `j` registers a dead shard again and it was taken back in (or refused with `why`).
  bool rejoin_locked(const PeerId& peer, const json& j, std::string& why);
  void rejoined_synced_locked(Node& n);
  // The shard holding a copy of every part `server` serves: the next one until a fail-over or
  // a rejoin changes it; -1 when none does.
  int backup_locked(int server) const;

  // ---- coordinator_control.cpp: ctl, live policy switch, HTTP ------------------------------
  static constexpr double kSwitchTimeoutS = 30;

  // Answers a switch request: `psbed ctl` over ZeroMQ, or an HTTP client. Called with mu_ held,
  // so it must only queue its answer.
  using SwitchReply = std::function<void(json)>;

  struct Switch {
    std::uint64_t seq = 0;
    SwitchReply reply;
    policy::PolicyOptions options;
    Clock::time_point requested;
    double requested_s = 0;         // since the coordinator started
    json workers = json::object();  // worker name -> step at which it switched
  };

  void ctl_reply(const PeerId& peer, json j);
  void on_ctl(const json& j, const SwitchReply& reply);
  std::optional<std::pair<int, std::string>> start_switch_locked(const json& req,
                                                                 SwitchReply reply);
  void finish_switch_locked(bool timeout);
  void start_http();
  void prediction(HttpRespond respond);

  // ---- coordinator_comm.cpp: the live --comm switch ----------------------------------------
  // Every worker answers at its next step boundary within this, or the switch is called off
  // (a worker waits at most 20 s for the word: worker/comm_switch.hpp). Once agreed, the next
  // switch waits until every worker said it switched, or this long.
  static constexpr double kCommPrepareS = 8, kCommTakeS = 60;
  struct CommSwitch {
    std::uint64_t seq = 0;
    std::string mode;
    SwitchReply reply;
    Clock::time_point requested;
    double requested_s = 0;
    json ready = json::object();     // worker name -> the step it is about to start
    std::string refused;             // a worker's reason it cannot switch
    Clock::time_point deadline;      // to answer; once committed, to switch
    std::int64_t step = -1;          // committed: the step every worker switches at
    json switched = json::object();  // committed: worker name -> step it switched at
  };
  // The refusal, or nullopt when the switch started (`reply` answers later).
  std::optional<std::string> start_comm_locked(const json& req, SwitchReply reply);
  void on_comm_ready_locked(Node& n, const json& j);
  void on_comm_switched_locked(Node& n, const json& j);
  void took_comm_locked(bool timeout);
  void finish_comm_locked(bool timeout);

  // ---- coordinator_status.cpp: progress, stalls, status, metrics ---------------------------
  // The dashboard's memory: one sample a second of what it charts, the last ten minutes, so a
  // page opened in the middle of a run starts with its history (GET /api/history).
  static constexpr std::size_t kHistory = 600;

  void record_sample_locked();
  bool training_locked() const;
  void advanced_locked(Node& n);
  std::string stall_text_locked(Clock::time_point now) const;
  json stall_json_locked(Clock::time_point now) const;
  void check_stall_locked(Clock::time_point now);
  json status_locked();
  std::string metrics_locked();
  void print_progress_locked();
  void request_checkpoint_locked(Clock::time_point now);

  // ---- coordinator_summary.cpp -------------------------------------------------------------
  json data_described_locked() const;
  void write_summary_locked();

  CoordinatorOptions opt_;
  ModelSpec spec_;
  std::string spec_text_;
  Consistency mode_{Consistency::Kind::kAsync};  // opt_.mode's, once read_spec_text has read it
  std::unique_ptr<ZmqTransport> transport_;
  std::mutex mu_;
  std::set<PeerId> warned_peers_;  // first_drop_locked
  struct CtlWindow {
    Clock::time_point start{};
    int count = 0;
  };
  std::map<PeerId, CtlWindow> ctl_windows_;  // ctl_allowed_locked
  std::uint64_t dropped_messages_ = 0;  // well-formed frames whose content the coordinator dropped
  std::condition_variable cv_;
  std::map<PeerId, Node> nodes_;
  std::vector<Message> outbox_;
  std::map<std::string, std::set<std::string>> barriers_;
  json map_json_;
  json failed_ = json::array();
  json failovers_ = json::array();  // --replicas 2: every shard taken over, when and by which
  std::set<int> took_over_;         // shards serving a dead shard's parts
  std::map<int, int> backup_;       // backup_locked's changes from the ring, by shard
  std::set<int> rejoining_;         // shards back after a death, serving nothing
  json rejoins_ = json::array();    // every shard that rejoined, and when it held its copy
  json map_links_json_;             // the map with the link ids, for a shard that rejoins
  policy::PolicyOptions policy_;    // what the workers run now
  std::optional<Switch> switch_;
  std::uint64_t switch_seq_ = 0;
  json switches_ = json::array();
  std::optional<CommSwitch> comm_switch_;
  std::uint64_t comm_seq_ = 0;
  json comm_switches_ = json::array();
  std::string comm_now_;  // what the workers run now (opt_.comm until a switch)
  CommCost comm_cost_;    // hybrid's per-layer cost: --comm-bandwidth's rate
  const CommCost& comm_cost() const { return comm_cost_; }
  bool map_sent_ = false, finished_ = false;
  Clock::time_point last_advance_{};  // when a worker last finished a step (or the start)
  json stall_;                        // the stall under way, said once; null when none
  Clock::time_point stall_since_{};
  json stalls_ = json::array();  // every stall said, for the summary
  int exit_code_ = 0, evaluator_ = -1;
  std::string failure_, evaluation_note_;
  double test_accuracy_ = -1;
  std::int64_t steps_ = 0;
  Clock::time_point started_, training_started_;
  double started_us_ = 0;
  std::deque<json> history_;
  Clock::time_point next_checkpoint_{};  // --checkpoint-every in seconds: when to ask next
  // /api/prediction's computations; before http_, so none is answered by a server gone.
  PredictionRunner predictions_;
  // Interrupted: the workers were told to stop; their reports are awaited until stop_deadline_.
  static constexpr double kStopReportS = 5;
  bool stopping_ = false;
  Clock::time_point stop_deadline_;
  std::string stop_reason_;
  // Last: destroyed first, so no request is being handled while the state it reads goes away.
  std::unique_ptr<HttpServer> http_;
};

}  // namespace psbed::ps::coordinator_detail
