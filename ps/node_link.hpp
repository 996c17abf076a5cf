// A node's line to the coordinator: registration (retried with backoff until
// --connect-timeout), the cluster map, heartbeats on a timer thread, barriers, progress and
// final reports, and the coordinator's control messages (shutdown, a peer declared dead).
// Servers and workers both hold one.
//
// No wait here outlives the coordinator: once it has been silent for --coordinator-timeout the
// node is told to stop (shutdown_requested(), coordinator_lost()) and every wait returns. That
// is why heartbeats never wait for room on the link: a dead coordinator's queue fills up, and a
// heartbeat stuck there would also stop the clock that notices the silence.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/defaults.hpp"
#include "ps/cluster_map.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

struct NodeLinkOptions {
  std::string coordinator = "tcp://127.0.0.1:7000";
  std::string role;     // "server" or "worker"
  std::string name;     // unique; the coordinator logs the node by it
  std::string address;  // servers: endpoint workers connect to
  double connect_timeout_s = 30;
  double heartbeat_s = defaults::kHeartbeatS;
  // Once registered: silence from the coordinator this long (it answers every heartbeat) means
  // it is gone; the node then stops as if told to shut down, and coordinator_lost() says so.
  double coordinator_timeout_s = 30;
  CurveKeys curve;  // with server_key the coordinator's; empty: a plain link
};

class NodeLink {
 public:
  explicit NodeLink(NodeLinkOptions opt);
  ~NodeLink();

  // Registers and blocks until the coordinator broadcasts the cluster map. Throws Error if the
  // coordinator does not answer the registration within connect_timeout_s.
  ClusterMap join(nlohmann::json extra = {});
  int id() const { return id_; }
  // The coordinator accepted this node's registration (it has an id; the map may not have come
  // yet): from then on the coordinator counts it, and a node that stops must leave().
  bool registered() const;
  // This node's clock against the coordinator's, from the registration's round trip:
  // {"offset_us": add to this node's trace times, "rtt_us", "same_clock": one host's clock, so
  // the offset is 0}; null before registration or from a coordinator that did not say.
  nlohmann::json clock_sync() const;

  // Blocks until every live node of the role ("worker", "all") reached barrier `name`.
  void barrier(const std::string& name);
  // After barrier("trained"): the id of the worker that evaluates the final parameters.
  int evaluator();
  // Fire-and-forget JSON to the coordinator (progress, final report, ...).
  void send_control(const nlohmann::json& j);
  // send_control() that never waits long for room (50 ms at most; then it is dropped), for a
  // watcher thread that must stay free for its own work.
  bool try_send_control(const nlohmann::json& j);
  // Control messages from the coordinator other than those NodeLink handles itself.
  void on_control(std::function<void(const nlohmann::json&)> fn);
  // Blocks until the coordinator says shut down, the coordinator is lost or stop() was called
  // (or `timeout_s` passes: returns false).
  bool wait_shutdown(double timeout_s);
  // The node must stop: the coordinator said so, fell silent, or stop() was called.
  bool shutdown_requested() const { return shutdown_.load() || stop_.load(); }
  // Stops this node's part without the coordinator (a stop signal): every wait here returns
  // and shutdown_requested() turns true. `why` is kept for stopped(). Callable from any thread.
  void stop(const std::string& why);
  // stop()'s reason, or "" when it was not called.
  std::string stopped() const;
  // Why the run failed, as the coordinator said when it ended it ("" if it did not say).
  std::string ended_because() const;
  // Tells the coordinator this node is leaving and why (its "failed" event: a worker is counted
  // out of barriers and clocks at once, a server's loss ends the run), after `report` (a final
  // report, when not null), then waits up to `wait_s` for the coordinator's shutdown, which says
  // it heard. Never waits for room on the link: the coordinator may be gone.
  void leave(const std::string& why, double wait_s, const nlohmann::json& report = nullptr);
  // For a node stopped (stop()) before the cluster started: leave()s if it registered, since the
  // coordinator counts it from then on, and returns the words for the node's line ("after it
  // registered, before the cluster started; ..." or "before it registered ...").
  std::string leave_before_start();
  // Why the node stopped without being told to (the coordinator fell silent), or "".
  std::string coordinator_lost() const;
  // "interrupted" when the coordinator said, before its shutdown, that the run is being ended
  // early (a worker then stops at once, keeping what it measured); otherwise "".
  std::string shutdown_reason() const;

 private:
  void receive(Message&& m);
  void note_clock_locked(const nlohmann::json& registered);
  void heartbeat_loop();
  // Waits for room on the link unless `wait` is false (then drops the message when the queue
  // is full). A wait ends when the coordinator is declared lost (the link is stopped then).
  bool send(Op op, const std::string& json_text = "", std::uint64_t clock = 0, bool wait = true);
  void declare_lost(double silent, double timeout);

  NodeLinkOptions opt_;
  std::unique_ptr<ZmqTransport> transport_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool registered_ = false;
  std::string refused_;  // the coordinator's answer to a registration it refused (guarded by mu_)
  std::optional<nlohmann::json> map_;
  std::string released_barrier_;
  int evaluator_ = -1;
  std::uint64_t barrier_generation_ = 0;
  std::atomic<bool> shutdown_{false};  // the coordinator said so, or it is lost
  bool told_shutdown_ = false;         // the coordinator's own shutdown arrived (guarded by mu_)
  std::atomic<bool> stop_{false};
  std::string stopped_;  // stop()'s reason (guarded by mu_)
  std::atomic<bool> stop_heartbeats_{false};
  std::function<void(const nlohmann::json&)> on_control_;
  std::thread heartbeats_;
  int id_ = -1;
  nlohmann::json clock_sync_;  // guarded by mu_
  std::atomic<std::uint64_t> seq_{0};
  std::chrono::steady_clock::time_point last_heard_;  // guarded by mu_
  std::string lost_;                                  // guarded by mu_
  std::string shutdown_reason_;                       // guarded by mu_
  std::string ended_because_;  // the coordinator's failure, told as it ended the run (mu_)
};

}  // namespace psbed::ps
