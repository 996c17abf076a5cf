// One simulation (predictor/simulator.hpp's simulate): its state, and the event handlers that
// move it, one file per part of the system they model: workers.cpp (the training step and the
// transmission scheduler), servers.cpp (apply lanes and consistency), host.cpp (receiving
// threads and the host's cores), bucket_links.cpp and fair_links.cpp (the two link models),
// traces.cpp (synthetic traces); simulation.cpp sets it up and runs the event loop.
// Internal to the simulator.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/policy_driver.hpp"
#include "core/profile.hpp"
#include "core/push_pull_answers.hpp"
#include "core/trace.hpp"
#include "predictor/sim/event_queue.hpp"
#include "predictor/sim/factors.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor::sim {

using policy::Direction;
using policy::Transfer;

constexpr double kInf = std::numeric_limits<double>::infinity();

// kFactors: one worker's sufficient factors of an SFB layer for one peer (SimConfig::comm).
// kReplicate: an applied update a primary shard forwards to its backup (SimConfig::replicas);
// kReplicaAck: the backup's answer once it applied it.
enum class MsgKind : std::uint8_t {
  kPullRequest,
  kPullReply,
  kPushData,
  kPushAck,
  kFactors,
  kReplicate,
  kReplicaAck
};

// A small, fast generator for the arrival jitter (one draw per message): SplitMix64.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed = 0) : state_(seed) {}
  double uniform() {  // [0, 1)
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t state_;
};

struct Message {
  MsgKind kind;
  // kFactors: the sending worker, and the receiving one in `shard`; kReplicate, kReplicaAck:
  // the pushing worker (async, ssp) and the primary shard
  int worker, shard;
  Transfer t;
  std::int64_t clock;
  double started;  // when the worker started the transfer (for its trace event)
  int held = -1;   // kReplicate, kReplicaAck: the push ack held for it
  // A push-pull acknowledged first (bsp, ssp: its answer waits for the clock): its ack, then the
  // push itself parked at the shard until it is answered as a pull of clock + 1.
  bool answer_later = false;
};

// Work booked on one of the host's cores, [from, to): a message's CPU or a piece of a worker's
// real compute.
struct CoreBooking {
  double from, to;
};

// One core's bookings, in time order; they never overlap, so their ends are in order too. Work
// is booked ahead of the clock (a node's receiving thread busy until then), so on a host the
// messages keep busy a core holds thousands of bookings between now and where the next one fits:
// a search starts where `from` falls (a binary search), not at the oldest booking, and the
// bookings that ended are dropped from the front without moving the rest each time.
class CoreSchedule {
 public:
  // The bookings that end after `t`, in time order.
  const CoreBooking* after(double t) const {
    return std::partition_point(busy_.data() + head_, busy_.data() + busy_.size(),
                                [t](const CoreBooking& b) { return b.to <= t; });
  }
  const CoreBooking* end() const { return busy_.data() + busy_.size(); }
  // Forgets the bookings that ended at or before `now`: they hold nothing up any more.
  void prune(double now) {
    head_ = std::size_t(after(now) - busy_.data());
    if (head_ > 64 && 2 * head_ > busy_.size()) {
      busy_.erase(busy_.begin(), busy_.begin() + std::ptrdiff_t(head_));
      head_ = 0;
    }
  }
  void insert(const CoreBooking& b) {
    const auto at = std::upper_bound(
        busy_.begin() + std::ptrdiff_t(head_), busy_.end(), b,
        [](const CoreBooking& x, const CoreBooking& y) { return x.from < y.from; });
    busy_.insert(at, b);
  }

 private:
  std::vector<CoreBooking> busy_;
  std::size_t head_ = 0;  // busy_[0, head_) ended: kept until compacted
};

// One (sender, receiver) pair: its messages leave one after the other.
struct Channel {
  int up_link, down_link;  // indices into the link arrays
  Fifo<int> queue;         // message ids; the head is on the wire
  double head_left = 0;    // bytes of the head still to send
  double rate = 0;         // bytes/s given by the last max-min allocation
  double since = 0;        // time head_left was last brought up to date
  int active_index = -1;   // position in the active list, -1 when idle
};

enum class Phase {
  kStart,
  kOverhead,
  kOverheadRunning,
  kForward,
  kBackward,
  kStraggle,
  kWaitPush,
  kDone
};

// One worker's view of one SFB layer: the factors of each step that reached it (its own
// included), the steps complete from the first, and what it rebuilt and applied.
struct FactorState {
  // Per step not yet complete: workers whose factors arrived (a few steps at most: the
  // consistency model holds the workers within them).
  std::map<std::int64_t, int> got;
  std::int64_t complete = 0;              // steps [0, complete) have every worker's
  std::int64_t applied_steps = 0;         // bsp: steps rebuilt and applied
  std::int64_t arrived = 0, applied = 0;  // workers' factors arrived and rebuilt, all steps
  // This worker's sends of the current step: the first issued, and how many have not left.
  double issued = -1;
  int in_flight = 0;
};

struct Worker {
  policy::PolicyDriver driver;  // the policy and the bytes in flight, as the live scheduler's
  ComputeSampler sampler;
  std::int64_t step = 0;
  Phase phase = Phase::kStart;
  int layer = 0;
  bool computing = false;
  bool straggled = false;  // worker-0's deliberate sleep of this step is over
  bool started = false;    // the start delay (start_stagger_s) is over
  // Bucket links: replies and acks that came due while the receiving thread was stuck in a
  // send (its send buffer full), in arrival order.
  Fifo<int> held;
  double compute_started = 0;
  std::vector<std::int64_t> pulls_left;  // floats still to arrive, per layer
  std::int64_t pulls_total = 0, pushes_total = 0;
  PushPullAnswers answers;           // push-pull: what a step need not pull again
  std::vector<FactorState> factors;  // per SFB layer (Simulation::factors_.layers)
  Fifo<Transfer> factors_gone;       // factor transfers off the link, not yet acked
  int rebuilding = -1;               // the SFB layer whose rebuild is computing, -1: none
  std::int64_t rebuild_products = 0, rebuild_steps = 0;
  double step_started = 0, steady_start = 0, end = 0;
  std::unique_ptr<TraceRecorder> trace;
  Worker(const Profile& p, std::uint64_t seed, std::unique_ptr<policy::Policy> policy)
      : driver(std::move(policy)), sampler(p, seed) {}
};

// The store's view of one part on its shard.
struct PartState {
  std::int64_t bytes = 0;
  std::vector<std::int64_t> got;        // bytes of the worker's current clock received
  std::vector<std::int64_t> completed;  // clocks completed, per worker
  std::int64_t min_completed = 0;
  int at_min = 0;            // workers whose completed == min_completed
  std::vector<int> waiting;  // pull-request message ids not yet answerable
};

struct Lane {
  Fifo<int> queue;    // pushes to apply and (bucket links) pulls to answer, in arrival order
  bool busy = false;  // applying
};

// Bucket links: a thread that sends (a worker's compute thread, its receiving thread, a shard's
// apply lane). Its sends go out in order; while the send buffer of the next one is full, the
// thread waits in send() and does nothing else, as the live ShapedTransport::send blocks.
struct SendThread {
  Fifo<int> outbox;  // message ids not yet taken by the send buffer
  bool blocked = false;
};

// Bucket links: one send buffer (a live ShapedTransport's queue): bytes queued or being paced.
struct SendBuffer {
  double queued = 0;
  std::vector<int> waiting;  // threads blocked on it, in the order they blocked
};

// Bucket links: one node's pacer, taking queued messages round-robin across peers.
struct Egress {
  std::vector<Fifo<int>> per_peer;  // queued message ids per peer (shard or worker)
  Fifo<int> turn;                   // peers with queued messages, in turn order
  bool pacing = false;              // a message waits for its bytes to leave
};

// N workers and S shards replaying a profile, one event at a time on a simulated clock.
class Simulation {
 public:
  // Throws Error if the profile does not match the model or the configuration is invalid.
  Simulation(const Profile& profile, const ModelSpec& spec, const SimConfig& cfg);
  SimResult run();  // once

 private:
  std::size_t push_channel(int w, int s) const { return std::size_t(w) * S_ + s; }
  std::size_t pull_channel(int w, int s) const {
    return std::size_t(W_) * S_ + std::size_t(w) * S_ + s;
  }
  // Worker w's factors to worker p (SFB layers only): after the shard channels.
  std::size_t factor_channel(int w, int p) const {
    return 2 * std::size_t(W_) * S_ + std::size_t(w) * W_ + p;
  }
  // Shard s's forwards to its backup: after the factor channels.
  std::size_t replica_channel(int s) const { return replica_channel0_ + std::size_t(s); }
  // A message's connection (sender, receiver), for the order of its arrivals.
  std::size_t connection_of(const Message& m) const {
    return is_replica(m)   ? replica_channel(m.shard)
           : is_factors(m) ? factor_channel(m.worker, m.shard)
           : to_server(m)  ? push_channel(m.worker, m.shard)
                           : pull_channel(m.worker, m.shard);
  }

  void schedule(double t, EventType type, int a) { events_.push(t, type, a); }

  int new_message(const Message& m) {
    if (!free_messages_.empty()) {
      const int id = free_messages_.back();
      free_messages_.pop_back();
      messages_[id] = m;
      return id;
    }
    messages_.push_back(m);
    return int(messages_.size()) - 1;
  }

  // ---- workers (workers.cpp) ----

  void start_compute(Worker& w, int wi, double seconds, bool cpu = false, bool rebuild = false);
  void advance(int wi);
  void compute_done(int wi);
  void pump(int wi, bool from_compute);
  void transfer_done(const Message& m);

  // ---- sufficient factors (factor_flow.cpp) ----

  void set_up_factors();
  void set_up_groups();
  int sfb_layer(int layer) const { return sfb_index_[std::size_t(layer)]; }
  bool factors_ready(Worker& w, int wi);
  void rebuild_done(Worker& w);
  void factors_ready_to_send(Worker& w, int wi, int layer);
  void issue_factors(int wi, int thread, const Transfer& t);
  void factor_departed(const Message& m);
  void factors_left(int wi);
  void factors_arrived(int id);

  // ---- servers (servers.cpp) ----

  bool replicating() const { return cfg_.replicas > 1 && S_ > 1; }
  int backup_of(int shard) const { return (shard + 1) % S_; }
  static bool is_replica(const Message& m) {
    return m.kind == MsgKind::kReplicate || m.kind == MsgKind::kReplicaAck;
  }

  bool pull_ready(const PartState& p, std::int64_t clock) const {
    switch (cfg_.mode.kind) {
      case Consistency::Kind::kAsync:
        return true;
      case Consistency::Kind::kBsp:
        return p.min_completed >= clock;
      case Consistency::Kind::kSsp:
        return p.min_completed + cfg_.mode.staleness >= clock;
    }
    return true;
  }

  void reply(int request_id, int lane);
  void answer_pull(int request_id, int lane);

  int lane_of(const Transfer& t) const { return part_lane_[std::size_t(t.part)]; }

  void start_lane(int li);
  void apply_done(int lane_index);
  bool complete_clock(PartState& p, int worker);
  void deliver(int id);
  // ---- replicated shards (replicas.cpp) ----
  void forward(const Message& m, int lane, int held, std::int64_t clock, const Transfer& t);
  void release_ack(int id, int lane);
  void replica_applied(int id);
  void replica_acked(int id);
  int backup_lane(int part) const;
  // ---- receiving threads and the host's cores (host.cpp) ----
  void arrive(int id, double at);
  double jittered(const Message& m, double t);
  double book_core(double from, double cpu);
  double run_on_core(double from, double cpu);
  void finish(int id);

  // ---- bucket links (bucket_links.cpp): the live in-process emulation (ps/link.cpp) ----
  // Each node has a token bucket per direction with a burst of max(64 KiB, 1 ms of line rate).
  // send() puts a message in the sender's send buffer (per shard connection on a worker, one
  // per shard node) and returns, unless the buffer is full: then the sending thread waits. The
  // node's pacer takes queued messages round-robin across peers and lets each go when the
  // uplink bucket has passed its bytes; on arrival the receiver's downlink bucket passes them,
  // then one latency, and its receiving thread takes them in order.

  int lane_thread(int lane) const { return 2 * W_ + lane; }
  int reply_thread(int shard) const { return 2 * W_ + int(lanes_.size()) + shard; }
  static bool to_server(const Message& m) {
    return m.kind == MsgKind::kPullRequest || m.kind == MsgKind::kPushData;
  }
  static bool is_factors(const Message& m) { return m.kind == MsgKind::kFactors; }
  int sender_node(const Message& m) const {
    if (is_replica(m)) return W_ + (m.kind == MsgKind::kReplicate ? m.shard : backup_of(m.shard));
    return to_server(m) || is_factors(m) ? m.worker : W_ + m.shard;
  }
  int receiver_node(const Message& m) const {
    if (is_replica(m)) return W_ + (m.kind == MsgKind::kReplicate ? backup_of(m.shard) : m.shard);
    return to_server(m) ? W_ + m.shard : is_factors(m) ? m.shard : m.worker;
  }
  // Per (worker, shard) connection, then per shard, then per (worker, peer) factor connection.
  std::size_t buffer_of(const Message& m) const {
    if (is_replica(m)) return replica_buffer0_ + std::size_t(m.shard);
    if (is_factors(m)) return std::size_t(W_) * S_ + S_ + std::size_t(m.worker) * W_ + m.shard;
    return to_server(m) ? std::size_t(m.worker) * S_ + m.shard : std::size_t(W_) * S_ + m.shard;
  }

  // Node `node`'s bucket in one direction passes `bytes` from `t` on, at the node's rate.
  double reserve(int node, double& next_free, double t, double bytes) const {
    const std::size_t n = std::size_t(node);
    next_free = std::max(next_free, t - node_burst_s_[n]) + bytes / node_bw_[n];
    return next_free;
  }
  bool shaped(int node) const { return node_bw_[std::size_t(node)] > 0; }

  // A push or a reply; a request or an acknowledgment only names the part.
  static bool carries_data(const Message& m) {
    return m.kind == MsgKind::kPushData || m.kind == MsgKind::kPullReply || is_factors(m) ||
           m.kind == MsgKind::kReplicate;
  }
  // The tensor bytes a message carries: a push's or a reply's, none for a request or an ack.
  static double data_bytes(const Message& m) { return carries_data(m) ? double(m.t.bytes()) : 0.0; }

  double message_bytes(const Message& m) const {
    return data_bytes(m) + double(cfg_.message_overhead_bytes);
  }
  // How many real messages `m` stands for at `node` (SimConfig::groups): a group's members'
  // at a shard, one at a worker, which has a link and a receiving thread of its own.
  double copies_at(const Message& m, int node) const {
    return node < W_ ? 1.0 : double(copies_[std::size_t(m.worker)]);
  }
  // The bytes `m` puts through its sender's send buffer and uplink.
  double sent_bytes(const Message& m) const {
    return message_bytes(m) * copies_at(m, sender_node(m));
  }

  void send_from(int thread, int id);
  void through_ingress(int id);
  bool flush(int thread);

  // A message goes alone into an empty buffer, however big.
  bool room_for(const SendBuffer& b, double bytes) const {
    return b.queued <= 0 || b.queued + bytes <= double(cfg_.send_buffer_bytes);
  }

  bool enqueue(int thread, int id);
  void pace(int node);
  void depart(int id);
  void egress_done(int id);
  void resume(int thread);

  // ---- fair links (fair_links.cpp) ----

  double wire_bytes(const Message& m) const {
    return double(m.t.bytes() + cfg_.message_overhead_bytes);
  }

  void send(std::size_t ci, int id);
  void set_up_links();
  void channel_done(int ci);
  void reallocate();

  // ---- traces (traces.cpp) ----

  static void record(TraceRecorder& tr, const std::string& name, const char* lane, double t0,
                     double t1, std::int64_t step);
  void record_transfer(Worker& w, const Message& m);
  void write_traces();

  const Profile& profile_;
  const ModelSpec& spec_;
  SimConfig cfg_;
  PartitionPlan plan_;
  int W_ = 0, S_ = 0, L_ = 0;  // simulated workers (groups in the fast mode), shards, layers
  std::vector<int> copies_;    // each simulated worker's real workers (SimConfig::groups)
  std::vector<int> sim_of_;    // each real worker's simulated one
  std::int64_t warmup_ = 0;
  std::vector<std::int64_t> layer_floats_;
  std::int64_t total_floats_ = 0;
  std::int64_t factor_send_floats_ = 0;  // a worker's factor transfers of one step, all peers
  std::vector<int> part_layer_;
  std::vector<int> part_lane_;
  std::vector<std::vector<int>> parts_of_layer_;
  FactorModel factors_;         // the SFB layers (SimConfig::comm)
  std::vector<int> sfb_index_;  // per model layer: its index in factors_.layers, or -1
  std::vector<double> rebuild_product_s_, rebuild_apply_s_;  // per SFB layer
  std::vector<Worker> workers_;
  std::vector<PartState> parts_;
  std::vector<Lane> lanes_;
  std::vector<double> lane_started_;
  std::vector<std::unique_ptr<TraceRecorder>> server_traces_;
  std::vector<Message> messages_;
  std::vector<int> free_messages_;
  std::vector<Channel> channels_;
  std::size_t replica_channel0_ = 0;  // the first of the shards' forward channels
  std::size_t replica_buffer0_ = 0;   // bucket links: the first of the shards' forward buffers
  std::vector<int> active_;
  std::vector<double> link_cap_;
  std::vector<double> link_n_;  // the flows on each link, a group's channel at a shard counting
                                // its members
  std::vector<int> touched_;
  std::vector<char> frozen_;
  bool network_dirty_ = false;
  bool bucket_ = false;
  std::vector<double> rx_free_;  // when each node's receiving thread is next free
  // Each host core's booked work, [from, to) in time order (host_cpus > 0). Work is booked when
  // a message is received, possibly ahead of the clock (its node busy until then), so a core
  // keeps the gaps before such bookings for earlier work; real compute fills gaps.
  std::vector<CoreSchedule> cores_;
  std::vector<CoreBooking> pieces_;  // run_on_core's scratch
  // Each node's link rate, bytes/s per direction (0: unlimited): the cluster's, or a
  // straggler's own; the bucket links' burst allowance of each, in seconds.
  std::vector<double> node_bw_, node_burst_s_;
  std::vector<double> compute_factor_;              // each worker's (SimConfig::stragglers)
  std::vector<double> egress_free_, ingress_free_;  // bucket links: each node's two buckets
  std::vector<SendThread> threads_;  // bucket links: compute, receiving (per worker), lanes
  std::vector<SendBuffer> buffers_;  // bucket links: per (worker, shard), then per shard
  std::vector<Egress> egress_;       // bucket links: per node
  std::vector<int> retry_;           // bucket links: egress_done's threads to retry
  std::vector<Transfer> sends_;      // pump's scratch list: what the policy lets go
  // Arrival jitter: each connection's last delivery time, and the draws (seeded by cfg.seed).
  std::vector<double> connection_last_;
  SplitMix jitter_rng_;
  std::vector<double> start_delay_;
  double host_factor_ = 1;  // this run's draw of SimConfig::host_cv  // each worker's draw of
                            // SimConfig::start_spread_s
  EventQueue events_;
  std::uint64_t processed_ = 0;
  double contention_scale_ = 1;  // SimConfig::cpu_contention's factor for this configuration
  double booked_cpu_s_ = 0;      // CPU booked on the host's cores: messages and real compute
  double now_ = 0;
};

}  // namespace psbed::predictor::sim
