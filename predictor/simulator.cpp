#include "predictor/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <queue>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/partition.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "predictor/parallel.hpp"

namespace psbed::predictor {

using policy::Direction;
using policy::Transfer;

LinkModel parse_link_model(const std::string& text) {
  if (text == "fair") return LinkModel::kFair;
  if (text == "bucket") return LinkModel::kBucket;
  throw Error("unknown link model '" + text + "', expected fair or bucket");
}

std::string to_string(LinkModel m) { return m == LinkModel::kFair ? "fair" : "bucket"; }

void take_host_costs(const Profile& profile, SimConfig& c) {
  c.message_cost_s = profile.message_cost_us * 1e-6;
  c.message_latency_s = profile.message_latency_us * 1e-6;
  c.transit_s_per_byte = profile.transit_ns_per_byte * 1e-9;
  c.host_cpus = profile.host_cpus;
  c.cpu_per_message_s = profile.cpu_per_message_us * 1e-6;
  c.cpu_per_byte_s = profile.cpu_per_byte_ns * 1e-9;
  c.cpu_contention = profile.contention;
}

ReceiveCost receive_cost(const SimConfig& c, bool carries_data, std::int64_t bytes) {
  if (!carries_data) return {};
  return {2 * c.message_cost_s, 2 * c.cpu_per_message_s + double(bytes) * c.cpu_per_byte_s};
}

std::int64_t default_warmup_steps(std::int64_t steps) { return warmup_steps(steps); }

double contention_scale(const SimConfig& c) {
  if (!(c.cpu_contention > 0) || !c.compute_on_cores || c.host_cpus <= 0 ||
      !(c.cpu_per_message_s + c.cpu_per_byte_s > 0))
    return 1;
  const double over = std::clamp(double(c.workers + c.servers - c.host_cpus) / c.host_cpus, 0.0, 1.0);
  return 1 + c.cpu_contention * over;
}

void scale_cpu_costs(SimConfig& c, double f) {
  c.cpu_per_message_s *= f, c.cpu_per_byte_s *= f, c.message_cost_s *= f, c.compute_cpu_scale *= f;
}

SimConfig with_contention(SimConfig c) {
  scale_cpu_costs(c, contention_scale(c));
  c.cpu_contention = 0;
  return c;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class EventType : std::uint8_t {
  kComputeDone,
  kDeliver,
  kChannelDone,
  kApplyDone,
  kEgressDone
};
enum class MsgKind : std::uint8_t { kPullRequest, kPullReply, kPushData, kPushAck };

// A first-in first-out queue in one ring buffer that doubles when full: what std::deque does
// here, for a fraction of its cost per push and pop (the simulator's queues are its hot path).
template <class T>
class Fifo {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  const T& back() const { return buf_[(head_ + size_ - 1) & (buf_.size() - 1)]; }
  void push_back(const T& v) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }

 private:
  [[gnu::noinline]] void grow() {
    std::vector<T> bigger(std::max<std::size_t>(8, 2 * buf_.size()));
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = buf_[(head_ + i) & (buf_.size() - 1)];
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> buf_;  // capacity a power of two
  std::size_t head_ = 0, size_ = 0;
};

struct Event {
  double t;
  std::uint64_t seq;  // ties at one instant go in the order they were scheduled
  EventType type;
  int a;  // worker, message id, channel, or shard lane
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Pending events, kept in the cheapest structure for their shape, since the queue is most of
// the simulator's cost:
//  - fair links deliver every message one latency after it is scheduled, so deliveries come
//    due in the order they were scheduled: one FIFO;
//  - a channel (fair links) has at most one pending completion, moved in place when rates
//    change; a stream (bucket links: one node's uplink departures, one node's arrivals) comes
//    due in order. Both are slots of one indexed heap keyed by their next event, so the heap
//    holds a slot per channel or stream, not an entry per message, and has no stale entries;
//  - compute and apply events, a few per node, and anything out of order go to a plain heap.
class EventQueue {
 public:
  void set_slots(std::size_t channels, std::size_t streams) {
    channels_ = channels;
    pos_.assign(channels + streams, -1);
    key_.assign(channels + streams, Event{});
    streams_.assign(streams, {});
  }
  void push(double t, EventType type, int a) {
    const Event e{t, seq_++, type, a};
    if (type == EventType::kDeliver && (fifo_.empty() || fifo_.back().t <= t))
      fifo_.push_back(e);
    else
      heap_.push(e);
  }
  // Appends to stream k; an event earlier than the stream's last goes to the plain heap.
  void push_stream(int k, double t, EventType type, int a) {
    const Event e{t, seq_++, type, a};
    auto& q = streams_[std::size_t(k)];
    if (!q.empty() && q.back().t > t) {
      heap_.push(e);
      return;
    }
    q.push_back(e);
    if (q.size() == 1) {
      const int slot = int(channels_) + k;
      if (slot == vacated_) vacated_ = -1;  // back in place: one sift instead of out and in
      set_slot(slot, e);
    }
  }
  // Schedules (or moves) channel c's completion.
  void set_channel(int c, double t) { set_slot(c, Event{t, seq_++, EventType::kChannelDone, c}); }
  void clear_channel(int c) { clear_slot(c); }
  bool empty() {
    settle();
    return fifo_.empty() && heap_.empty() && cheap_.empty();
  }
  const Event* top() {
    Source from;
    return earliest(from);
  }
  // Takes the earliest event into `e`; false when none is left. A channel completion stays
  // queued: its handler moves it (set_channel, the common case of a next message on the same
  // pair, costs one sift) or removes it (clear_channel).
  bool pop(Event& e) {
    Source from;
    const Event* best = earliest(from);
    if (!best) return false;
    e = *best;
    if (from == Source::kFifo) {
      fifo_.pop_front();
    } else if (from == Source::kSlot) {
      const int slot = cheap_[0].slot;
      if (slot >= int(channels_)) {
        auto& q = streams_[std::size_t(slot) - channels_];
        q.pop_front();
        if (q.empty())
          vacated_ = slot;  // most often refilled by the handler (a node's next departure)
        else
          set_slot(slot, q.front());
      }
    } else {
      heap_.pop();
    }
    return true;
  }

 private:
  enum class Source { kNone, kFifo, kHeap, kSlot };
  // The earliest pending event and where it is held; nullptr when none is left.
  const Event* earliest(Source& from) {
    settle();
    const Event* best = nullptr;
    from = Source::kNone;
    if (!fifo_.empty()) best = &fifo_.front(), from = Source::kFifo;
    if (!heap_.empty() && (!best || *best > heap_.top())) best = &heap_.top(), from = Source::kHeap;
    if (!cheap_.empty() && (!best || *best > key_[cheap_[0].slot]))
      best = &key_[cheap_[0].slot], from = Source::kSlot;
    return best;
  }
  // A stream that emptied at the last pop keeps its slot, with its old key, until the next look
  // at the queue: the handler usually schedules the stream's next event, which then moves the
  // slot once rather than leaving the heap and entering it again.
  void settle() {
    if (vacated_ >= 0) clear_slot(vacated_), vacated_ = -1;
  }
  // Sets slot s's next event. A slot not in the heap enters at the bottom and rises; one in it
  // moves whichever way its new key says (a stream's next event is never earlier than its last,
  // so it only sinks).
  void set_slot(int s, const Event& e) {
    key_[s] = e;
    const Item item{e.t, e.seq, s};
    if (pos_[s] < 0) {
      cheap_.push_back(item);
      sift_up(int(cheap_.size()) - 1, item);
    } else if (before(item, cheap_[pos_[s]])) {
      sift_up(pos_[s], item);
    } else {
      sift_down(pos_[s], item);
    }
  }
  void clear_slot(int s) {
    const int i = pos_[s];
    if (i < 0) return;
    pos_[s] = -1;
    const Item last = cheap_.back();
    cheap_.pop_back();
    if (i == int(cheap_.size())) return;
    if (i > 0 && before(last, cheap_[(i - 1) / 2]))
      sift_up(i, last);
    else
      sift_down(i, last);
  }
  struct Item {  // a slot's key, kept in the heap itself so comparisons read no other array
    double t;
    std::uint64_t seq;
    int slot;
  };
  static bool before(const Item& x, const Item& y) {
    return x.t != y.t ? x.t < y.t : x.seq < y.seq;
  }
  void place(int i, const Item& item) { cheap_[i] = item, pos_[item.slot] = i; }
  // Moves `item` up from the hole at i to its place.
  void sift_up(int i, const Item& item) {
    while (i > 0) {
      const int parent = (i - 1) / 2;
      if (!before(item, cheap_[parent])) break;
      place(i, cheap_[parent]);
      i = parent;
    }
    place(i, item);
  }
  // Moves `item` down from the hole at i to its place.
  void sift_down(int i, const Item& item) {
    const int n = int(cheap_.size());
    for (;;) {
      int c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && before(cheap_[c + 1], cheap_[c])) ++c;
      if (!before(cheap_[c], item)) break;
      place(i, cheap_[c]);
      i = c;
    }
    place(i, item);
  }
  std::size_t channels_ = 0;
  Fifo<Event> fifo_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  std::vector<Item> cheap_;  // slots with a pending event, a binary heap on their keys
  std::vector<int> pos_;     // slot -> index in cheap_, -1 if none pending
  std::vector<Event> key_;  // each slot's next event
  std::vector<Fifo<Event>> streams_;
  std::uint64_t seq_ = 0;
  int vacated_ = -1;
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
  int worker, shard;
  Transfer t;
  std::int64_t clock;
  double started;  // when the worker started the transfer (for its trace event)
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
  Fifo<int> queue;       // message ids; the head is on the wire
  double head_left = 0;  // bytes of the head still to send
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

struct Worker {
  std::unique_ptr<policy::Policy> policy;
  ComputeSampler sampler;
  std::int64_t step = 0;
  Phase phase = Phase::kStart;
  int layer = 0;
  bool computing = false;
  bool straggled = false;  // worker-0's deliberate sleep of this step is over
  bool started = false;     // the start delay (start_stagger_s) is over
  // Bucket links: replies and acks that came due while the receiving thread was stuck in a
  // send (its send buffer full), in arrival order.
  Fifo<int> held;
  double compute_started = 0;
  std::vector<std::int64_t> pulls_left;  // floats still to arrive, per layer
  std::int64_t pulls_total = 0, pushes_total = 0;
  std::int64_t in_flight = 0;
  double step_started = 0, steady_start = 0, end = 0;
  std::unique_ptr<TraceRecorder> trace;
  Worker(const Profile& p, std::uint64_t seed) : sampler(p, seed) {}
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
  Fifo<int> queue;   // pushes to apply and (bucket links) pulls to answer, in arrival order
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

class Simulation {
 public:
  Simulation(const Profile& profile, const ModelSpec& spec, const SimConfig& cfg)
      : profile_(profile), spec_(spec), cfg_(cfg) {
    if (cfg.workers < 1) throw Error("simulation: workers must be at least 1");
    if (cfg.servers < 1) throw Error("simulation: servers must be at least 1");
    if (cfg.steps < 1) throw Error("simulation: steps must be at least 1");
    if (cfg.start_stagger_s < 0) throw Error("simulation: the start stagger must not be negative");
    if (!(cfg.compute_cpu_scale > 0) || !std::isfinite(cfg.compute_cpu_scale))
      throw Error("simulation: the compute's CPU scale must be a positive number");
    if (cfg.bandwidth_bytes_per_sec < 0 || cfg.latency_s < 0)
      throw Error("simulation: bandwidth and latency must not be negative");
    profile.check_matches(spec, "profile of " + profile.model);
    plan_ = make_partition(spec, cfg.partition_bytes, cfg.servers);
    W_ = cfg.workers, S_ = cfg.servers, L_ = int(spec.layers.size());
    warmup_ = cfg.warmup_steps >= 0 ? std::min(cfg.warmup_steps, cfg.steps - 1)
                                    : default_warmup_steps(cfg.steps);
    layer_floats_.assign(L_, 0);
    part_layer_.resize(plan_.parts.size());
    for (std::size_t i = 0; i < plan_.parts.size(); ++i) {
      part_layer_[i] = spec.tensors[plan_.parts[i].key].layer;
      layer_floats_[part_layer_[i]] += plan_.parts[i].numel;
      total_floats_ += plan_.parts[i].numel;
    }
    parts_of_layer_.resize(L_);
    for (int l = 0; l < L_; ++l)
      for (int t : spec.layers[l].tensors)
        for (int i : plan_.parts_of_key[t]) parts_of_layer_[l].push_back(i);
    const bool tracing = !cfg.trace_dir.empty();
    workers_.reserve(std::size_t(W_));
    for (int w = 0; w < W_; ++w) {
      workers_.emplace_back(profile, cfg.seed * 1000003 + std::uint64_t(w));
      policy::PolicyOptions po = cfg.policy;
      po.seed = cfg.policy.seed + std::uint64_t(w);
      workers_.back().policy = policy::make_policy(po);
      if (tracing)
        workers_.back().trace = std::make_unique<TraceRecorder>("worker-" + std::to_string(w));
    }
    parts_.resize(plan_.parts.size());
    for (std::size_t i = 0; i < plan_.parts.size(); ++i) {
      PartState& p = parts_[i];
      p.bytes = plan_.parts[i].bytes();
      p.got.assign(W_, 0);
      p.completed.assign(W_, 0);
      p.at_min = W_;
    }
    // The apply lane of each part: the live shard's hash of (key, part) over its lanes.
    const int lanes = std::max(1, cfg.apply_lanes);
    lanes_.resize(std::size_t(S_) * lanes);
    for (const Part& p : plan_.parts)
      part_lane_.push_back(p.shard * lanes +
                           int((std::uint64_t(p.key) * 1000003u + std::uint64_t(p.part)) % lanes));
    lane_started_.assign(lanes_.size(), 0.0);
    if (tracing)
      for (int s = 0; s < S_; ++s)
        server_traces_.push_back(std::make_unique<TraceRecorder>("server-" + std::to_string(s)));
    // Nodes: workers 0..W-1, servers W..W+S-1; link 2n is node n's uplink, 2n+1 its downlink.
    const int nodes = W_ + S_;
    link_cap_.assign(2 * nodes, 0);
    link_n_.assign(2 * nodes, 0);
    channels_.resize(2 * std::size_t(W_) * S_);
    events_.set_slots(channels_.size(), 2 * std::size_t(W_ + S_));
    bucket_ = cfg.link_model == LinkModel::kBucket;
    if (cfg.arrival_jitter_s < 0) throw Error("simulation: the arrival jitter must not be negative");
    connection_last_.assign(channels_.size(), -kInf);
    jitter_rng_ = SplitMix(cfg.seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull);
    rx_free_.assign(std::size_t(nodes), -kInf);
    if (cfg.host_cpus > 0 && cfg.cpu_per_message_s + cfg.cpu_per_byte_s > 0)
      cores_.resize(std::size_t(cfg.host_cpus));
    if (!(cfg.cpu_contention >= 0) || !std::isfinite(cfg.cpu_contention))
      throw Error("simulation: the host's contention must be a number, 0 or more");
    contention_scale_ = contention_scale(cfg);
    cfg_ = with_contention(cfg);
    if (cfg.bandwidth_bytes_per_sec > 0)
      burst_s_ =
          std::max(64.0 * 1024, cfg.bandwidth_bytes_per_sec * 1e-3) / cfg.bandwidth_bytes_per_sec;
    egress_free_.assign(std::size_t(nodes), -kInf);
    ingress_free_.assign(std::size_t(nodes), -kInf);
    if (bucket_) {
      threads_.resize(2 * std::size_t(W_) + lanes_.size() + std::size_t(S_));
      buffers_.resize(std::size_t(W_) * S_ + S_);
      egress_.resize(std::size_t(nodes));
      for (int n = 0; n < nodes; ++n) egress_[n].per_peer.resize(std::size_t(n < W_ ? S_ : W_));
    }
    for (int w = 0; w < W_; ++w)
      for (int s = 0; s < S_; ++s) {
        Channel& push = channels_[push_channel(w, s)];
        push.up_link = 2 * w, push.down_link = 2 * (W_ + s) + 1;
        Channel& pull = channels_[pull_channel(w, s)];
        pull.up_link = 2 * (W_ + s), pull.down_link = 2 * w + 1;
      }
  }

  SimResult run() {
    const auto wall0 = std::chrono::steady_clock::now();
    for (int w = 0; w < W_; ++w) advance(w);
    Event e;
    while (events_.pop(e)) {
      now_ = e.t;
      ++processed_;
      switch (e.type) {
        case EventType::kComputeDone:
          compute_done(e.a);
          break;
        case EventType::kDeliver:
          deliver(e.a);
          break;
        case EventType::kChannelDone:
          channel_done(e.a);
          break;
        case EventType::kApplyDone:
          apply_done(e.a);
          break;
        case EventType::kEgressDone:
          egress_done(e.a);
          break;
      }
      // Rates change only when a pair starts or stops sending; events at one instant are
      // settled together so a burst of sends costs one allocation.
      if (network_dirty_ && (events_.empty() || events_.top()->t > now_)) reallocate();
    }
    SimResult r;
    for (int w = 0; w < W_; ++w)
      if (workers_[w].phase != Phase::kDone)
        throw Error("simulation stalled: worker " + std::to_string(w) + " stopped at step " +
                    std::to_string(workers_[w].step) + " (a bug in the simulator or the policy)");
    for (const Worker& w : workers_) {
      const double span = w.end - w.steady_start;
      const double sps = span > 0 ? double(cfg_.steps - warmup_) / span : 0.0;
      r.worker_steps_per_sec.push_back(sps);
      r.steps_per_sec += sps;
      r.simulated_seconds = std::max(r.simulated_seconds, w.end);
    }
    r.images_per_sec = r.steps_per_sec * profile_.batch;
    r.seed = cfg_.seed;
    r.seeds_min_images_per_sec = r.seeds_max_images_per_sec = r.images_per_sec;
    r.events = processed_;
    r.host_cpu_per_step_s = booked_cpu_s_ / (double(W_) * double(cfg_.steps));
    r.cpu_contention_scale = contention_scale_;
    r.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (!cfg_.trace_dir.empty()) write_traces();
    return r;
  }

 private:
  std::size_t push_channel(int w, int s) const { return std::size_t(w) * S_ + s; }
  std::size_t pull_channel(int w, int s) const {
    return std::size_t(W_) * S_ + std::size_t(w) * S_ + s;
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

  // ---- workers ----

  // `cpu`: the worker's own computation (not a deliberate sleep), which with real compute waits
  // for one of the host's cores and holds it throughout.
  void start_compute(Worker& w, int wi, double seconds, bool cpu = false) {
    w.computing = true;
    w.compute_started = now_;
    const bool on_core = cpu && cfg_.compute_on_cores && !cores_.empty();
    if (on_core) booked_cpu_s_ += seconds * cfg_.compute_cpu_scale;
    schedule(on_core ? run_on_core(now_, seconds * cfg_.compute_cpu_scale) : now_ + seconds,
             EventType::kComputeDone, wi);
  }

  // Runs the worker's step forward until it must wait for compute or a transfer.
  void advance(int wi) {
    Worker& w = workers_[wi];
    while (!w.computing) {
      if (bucket_ && threads_[wi].blocked) return;  // waits in a send for room in the buffer
      switch (w.phase) {
        case Phase::kStart: {
          if (w.step == 0 && !w.started) {  // as launch --start-stagger-ms
            w.started = true;
            if (cfg_.start_stagger_s > 0 && wi > 0) {
              start_compute(w, wi, cfg_.start_stagger_s * wi / W_);
              break;
            }
          }
          if (w.step == warmup_) w.steady_start = now_;
          w.step_started = now_;
          w.pulls_left = layer_floats_;
          w.pulls_total = w.pushes_total = total_floats_;
          w.policy->begin_step(now_, std::uint64_t(w.step));
          for (int i = 0; i < int(plan_.parts.size()); ++i)
            w.policy->parameter_needed(
                now_, {Direction::kPull, i, part_layer_[i], 0, plan_.parts[i].numel});
          pump(wi, true);
          w.phase = Phase::kOverhead;
          break;
        }
        case Phase::kOverhead:
          // Batch loading runs while the pulls are in flight, except under "pull everything first".
          if (w.policy->pull_all_before_forward() && w.pulls_total > 0) return;
          w.phase = Phase::kOverheadRunning;
          start_compute(w, wi, w.sampler.step_overhead_s(), true);
          break;
        case Phase::kOverheadRunning:  // only reached through compute_done
          w.phase = Phase::kForward, w.layer = 0;
          break;
        case Phase::kForward:
          if (w.layer == L_) {
            w.phase = Phase::kBackward, w.layer = L_ - 1;
            break;
          }
          if (w.pulls_left[w.layer] > 0) return;
          start_compute(w, wi, w.sampler.forward_s(w.layer), true);
          break;
        case Phase::kBackward:
          if (w.layer < 0) {
            w.phase = Phase::kStraggle;
            break;
          }
          start_compute(w, wi, w.sampler.backward_s(w.layer), true);
          break;
        case Phase::kStraggle:
          // As `psbed launch --straggler-ms`: worker-0 sleeps after backward, before backward_done.
          if (wi == 0 && cfg_.straggler_s > 0 && !w.straggled) {
            w.straggled = true;
            start_compute(w, wi, cfg_.straggler_s);
            break;
          }
          w.straggled = false;
          w.policy->backward_done(now_);
          pump(wi, true);
          w.phase = Phase::kWaitPush;
          break;
        case Phase::kWaitPush:
          if (w.pushes_total > 0) return;
          if (w.trace) record(*w.trace, "step", "step", w.step_started, now_, w.step);
          ++w.step;
          if (w.step == cfg_.steps) {
            w.end = now_;
            w.phase = Phase::kDone;
            return;
          }
          w.phase = Phase::kStart;
          break;
        case Phase::kDone:
          return;
      }
    }
  }

  void compute_done(int wi) {
    Worker& w = workers_[wi];
    w.computing = false;
    if (w.phase == Phase::kForward) {
      if (w.trace)
        record(*w.trace, "fwd:" + spec_.layers[w.layer].name, "compute", w.compute_started, now_,
               w.step);
      ++w.layer;
    } else if (w.phase == Phase::kBackward) {
      const int l = w.layer;
      if (w.trace)
        record(*w.trace, "bwd:" + spec_.layers[l].name, "compute", w.compute_started, now_, w.step);
      for (int i : parts_of_layer_[l])
        w.policy->gradient_ready(now_, {Direction::kPush, i, l, 0, plan_.parts[i].numel});
      if (!parts_of_layer_[l].empty()) pump(wi, true);
      --w.layer;
    } else if (w.phase == Phase::kStraggle) {
      if (w.trace) record(*w.trace, "straggle", "compute", w.compute_started, now_, w.step);
    } else if (w.phase == Phase::kStart) {
      if (w.trace) record(*w.trace, "start-delay", "compute", w.compute_started, now_, -1);
    }
    advance(wi);  // kOverheadRunning moves on to the first forward there
  }

  // The transmission scheduler's loop: take whatever the policy lets go now. With bucket links
  // the calling thread (compute, or the one receiving replies) hands them to the send buffer and
  // waits there while it is full.
  void pump(int wi, bool from_compute) {
    Worker& w = workers_[wi];
    const int thread = from_compute ? wi : W_ + wi;
    while (auto t = w.policy->next(now_, w.in_flight)) {
      w.in_flight += t->bytes();
      w.policy->sent(now_, *t);
      const int shard = plan_.parts[t->part].shard;
      if (t->dir == Direction::kPull) {
        const int id = new_message({MsgKind::kPullRequest, wi, shard, *t, w.step, now_});
        if (bucket_) {
          send_from(thread, id);
        } else {
          // A request is a header only: on fair links it costs latency, not bandwidth.
          arrive(id, now_ + cfg_.latency_s);
        }
      } else {
        const int id = new_message({MsgKind::kPushData, wi, shard, *t, w.step, now_});
        if (bucket_)
          send_from(thread, id);
        else
          send(push_channel(wi, shard), id);
      }
    }
  }

  void transfer_done(const Message& m) {
    Worker& w = workers_[m.worker];
    w.in_flight -= m.t.bytes();
    w.policy->acked(now_, m.t);
    if (w.trace) record_transfer(w, m);
    if (m.kind == MsgKind::kPullReply) {
      w.pulls_left[m.t.layer] -= m.t.count;
      w.pulls_total -= m.t.count;
    } else {
      w.pushes_total -= m.t.count;
    }
    pump(m.worker, false);
    advance(m.worker);
  }

  // ---- servers ----

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

  // Answers a pull (bucket links: from the lane thread that took it).
  void reply(int request_id, int lane) {
    Message& m = messages_[request_id];
    m.kind = MsgKind::kPullReply;
    if (bucket_)
      send_from(lane_thread(lane), request_id);
    else
      send(pull_channel(m.worker, m.shard), request_id);
  }

  void answer_pull(int request_id, int lane) {
    const Message& m = messages_[request_id];
    PartState& p = parts_[m.t.part];
    if (pull_ready(p, m.clock))
      reply(request_id, lane);
    else
      p.waiting.push_back(request_id);
  }

  int lane_of(const Transfer& t) const { return part_lane_[std::size_t(t.part)]; }

  // A shard's apply lane takes its messages in order: a push is applied, acknowledged, and may
  // release waiting pulls; a pull (bucket links) is answered or parked. With bucket links the
  // lane waits in a send while the shard's send buffer is full, as the live lane thread does.
  void start_lane(int li) {
    Lane& lane = lanes_[li];
    while (!lane.busy && !lane.queue.empty()) {
      if (bucket_ && threads_[lane_thread(li)].blocked) return;
      const int id = lane.queue.front();
      const Message& m = messages_[id];
      if (m.kind == MsgKind::kPushData) {
        lane.busy = true;
        lane_started_[li] = now_;
        const double cost = profile_.apply_overhead_us * 1e-6 +
                            profile_.apply_ns_per_byte * 1e-9 * double(m.t.bytes());
        schedule(now_ + cost, EventType::kApplyDone, li);
        return;
      }
      lane.queue.pop_front();
      answer_pull(id, li);
    }
  }

  void apply_done(int lane_index) {
    Lane& lane = lanes_[lane_index];
    const int id = lane.queue.front();
    lane.queue.pop_front();
    Message& m = messages_[id];
    PartState& p = parts_[m.t.part];
    if (!server_traces_.empty()) {
      const Part& part = plan_.parts[m.t.part];
      TraceEvent e;
      e.name = "apply:" + spec_.tensors[part.key].name + "#" + std::to_string(part.part);
      e.lane = "apply", e.ts_us = lane_started_[lane_index] * 1e6,
      e.dur_us = (now_ - lane_started_[lane_index]) * 1e6;
      e.step = m.clock, e.bytes = m.t.bytes(), e.key = part.key, e.part = part.part,
      e.priority = m.t.layer;
      e.has_priority = true;
      server_traces_[m.shard]->record(std::move(e));
    }
    bool released = false;
    p.got[m.worker] += m.t.bytes();
    if (p.got[m.worker] >= p.bytes) {
      p.got[m.worker] = 0;
      released = complete_clock(p, m.worker);
    }
    // The acknowledgment goes first, then the pulls this push released (as the live shard).
    m.kind = MsgKind::kPushAck;
    if (bucket_)
      send_from(lane_thread(lane_index), id);
    else
      arrive(id, now_ + cfg_.latency_s);
    if (released) {
      std::vector<int> still;
      for (int w : p.waiting)
        if (pull_ready(p, messages_[w].clock))
          reply(w, lane_index);
        else
          still.push_back(w);
      p.waiting.swap(still);
    }
    lane.busy = false;
    start_lane(lane_index);
  }

  // A worker's whole part for its current clock arrived. True if the slowest worker's clock
  // moved, which may release waiting pulls.
  bool complete_clock(PartState& p, int worker) {
    const bool was_min = p.completed[worker] == p.min_completed;
    ++p.completed[worker];
    if (!was_min || --p.at_min > 0) return false;
    p.min_completed = *std::min_element(p.completed.begin(), p.completed.end());
    p.at_min = int(std::count(p.completed.begin(), p.completed.end(), p.min_completed));
    return !p.waiting.empty();
  }

  void deliver(int id) {
    Message& m = messages_[id];
    switch (m.kind) {
      case MsgKind::kPullRequest:
        if (bucket_) {
          // As the live shard: a pull whose part is ready and not being applied right now is
          // answered on arrival by the shard's reply thread, in arrival order; otherwise the
          // part's lane takes it in turn. An apply that began within the arrival jitter (a tie
          // with this pull, or the same instant) does not count: the receiving thread answers
          // the pull before the lane thread, woken for the push, takes the part's lock.
          const int lane = lane_of(m.t);
          const Lane& l = lanes_[lane];
          const bool applying = l.busy && messages_[l.queue.front()].t.part == m.t.part &&
                                lane_started_[lane] + cfg_.arrival_jitter_s < now_;
          if (!applying && pull_ready(parts_[m.t.part], m.clock)) {
            m.kind = MsgKind::kPullReply;
            send_from(reply_thread(m.shard), id);
            break;
          }
          lanes_[lane].queue.push_back(id);
          start_lane(lane);
        } else {
          answer_pull(id, lane_of(m.t));
        }
        break;
      case MsgKind::kPushData: {
        const int lane = lane_of(m.t);
        lanes_[lane].queue.push_back(id);
        start_lane(lane);
        break;
      }
      case MsgKind::kPullReply:
      case MsgKind::kPushAck: {
        Worker& w = workers_[m.worker];
        if (bucket_ && (threads_[W_ + m.worker].blocked || !w.held.empty())) {
          w.held.push_back(id);  // the receiving thread still waits in a send
          break;
        }
        finish(id);
        break;
      }
    }
  }

  // A message reached its receiver at `at` (latency included). Each node's receiving thread
  // handles one message at a time (receive_cost: a transfer's share on its data message), so on
  // a busy node (a shard serving many workers) messages queue for software as well as for the
  // link.
  void arrive(int id, double at) {
    const Message& m = messages_[id];
    const int node = receiver_node(m);
    if (!bucket_ && cfg_.message_cost_s <= 0 && cores_.empty()) {  // now + latency: one FIFO
      events_.push(jittered(m, at + cfg_.message_latency_s), EventType::kDeliver, id);
      return;
    }
    const ReceiveCost cost = receive_cost(cfg_, carries_data(m), m.t.bytes());
    double& free = rx_free_[std::size_t(node)];
    double start = std::max(free, at);
    // The receiving thread runs when a core is free.
    if (!cores_.empty()) start = book_core(start, cost.cpu_s), booked_cpu_s_ += cost.cpu_s;
    free = start + cost.thread_s;
    events_.push_stream(W_ + S_ + node, jittered(m, free + cfg_.message_latency_s),
                        EventType::kDeliver, id);
  }

  // An arrival's delivery time with its chance share of SimConfig::arrival_jitter_s, never before
  // the previous message of the same connection (sender, receiver): one connection keeps its
  // order, different senders' messages that come due together go in any order.
  double jittered(const Message& m, double t) {
    if (cfg_.arrival_jitter_s <= 0) return t;
    double& last = connection_last_[to_server(m) ? push_channel(m.worker, m.shard)
                                                 : pull_channel(m.worker, m.shard)];
    last = std::max(last, t + cfg_.arrival_jitter_s * jitter_rng_.uniform());
    return last;
  }

  // Books `cpu` seconds of a message's work on the core that can start it first, at or after
  // `from`; returns when.
  double book_core(double from, double cpu) {
    double best = kInf;
    std::size_t best_core = 0;
    for (std::size_t k = 0; k < cores_.size(); ++k) {
      CoreSchedule& core = cores_[k];
      core.prune(now_);
      double t = from;
      for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
        if (t + cpu <= b->from) break;
        t = std::max(t, b->to);
      }
      if (t < best) best = t, best_core = k;
    }
    if (cpu > 0) cores_[best_core].insert({best, best + cpu});
    return best;
  }

  // Runs `cpu` seconds of a worker's real compute from `from` on the core that finishes it
  // first. It fills that core's gaps between the work already booked there (messages, other
  // workers' compute): a time-shared thread is held up by what runs in between rather than
  // waiting for a gap as long as itself. Returns when it is done.
  double run_on_core(double from, double cpu) {
    double best = kInf;
    std::size_t best_core = 0;
    for (std::size_t k = 0; k < cores_.size(); ++k) {
      CoreSchedule& core = cores_[k];
      core.prune(now_);
      double t = from, left = cpu;
      for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
        if (b->from - t >= left) break;
        if (b->from > t) left -= b->from - t;
        t = std::max(t, b->to);
      }
      if (t + left < best) best = t + left, best_core = k;
    }
    // Book the pieces it runs in: every gap up to its end.
    pieces_.clear();
    double t = from;
    const CoreSchedule& core = cores_[best_core];
    for (const CoreBooking* b = core.after(t); b != core.end(); ++b) {
      if (b->from >= best) break;
      if (b->from > t) pieces_.push_back({t, b->from});
      t = std::max(t, b->to);
    }
    if (t < best) pieces_.push_back({t, best});
    for (const CoreBooking& b : pieces_) cores_[best_core].insert(b);
    return best;
  }

  // A reply or an acknowledgment taken by the worker's receiving thread.
  void finish(int id) {
    const Message done = messages_[id];
    free_messages_.push_back(id);
    transfer_done(done);
  }

  // ---- bucket links: the live in-process emulation (ps/link.cpp) ----
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
  int sender_node(const Message& m) const { return to_server(m) ? m.worker : W_ + m.shard; }
  int receiver_node(const Message& m) const { return to_server(m) ? W_ + m.shard : m.worker; }
  std::size_t buffer_of(const Message& m) const {
    return to_server(m) ? std::size_t(m.worker) * S_ + m.shard : std::size_t(W_) * S_ + m.shard;
  }

  double reserve(double& next_free, double t, double bytes) const {
    next_free = std::max(next_free, t - burst_s_) + bytes / cfg_.bandwidth_bytes_per_sec;
    return next_free;
  }

  // A push or a reply; a request or an acknowledgment only names the part.
  static bool carries_data(const Message& m) {
    return m.kind == MsgKind::kPushData || m.kind == MsgKind::kPullReply;
  }
  // The tensor bytes a message carries: a push's or a reply's, none for a request or an ack.
  static double data_bytes(const Message& m) { return carries_data(m) ? double(m.t.bytes()) : 0.0; }

  double message_bytes(const Message& m) const {
    return data_bytes(m) + double(cfg_.message_overhead_bytes);
  }

  void send_from(int thread, int id) {
    if (cfg_.bandwidth_bytes_per_sec <= 0) {
      arrive(id, now_ + cfg_.latency_s + message_bytes(messages_[id]) * cfg_.transit_s_per_byte);
      return;
    }
    // A thread that is not waiting has nothing queued before this message.
    SendThread& th = threads_[std::size_t(thread)];
    if (th.blocked || !enqueue(thread, id)) th.outbox.push_back(id);
  }

  // Moves the thread's queued sends into their buffers while there is room. False if the thread
  // now waits for room.
  bool flush(int thread) {
    SendThread& th = threads_[std::size_t(thread)];
    while (!th.outbox.empty()) {
      if (!enqueue(thread, th.outbox.front())) return false;
      th.outbox.pop_front();
    }
    return true;
  }

  // A message goes alone into an empty buffer, however big.
  bool room_for(const SendBuffer& b, double bytes) const {
    return b.queued <= 0 || b.queued + bytes <= double(cfg_.send_buffer_bytes);
  }

  // Puts one message into its send buffer and in its peer's turn at the pacer, if there is room
  // (a message goes alone into an empty buffer, however big); else the thread waits for room.
  bool enqueue(int thread, int id) {
    const Message& m = messages_[id];
    SendBuffer& b = buffers_[buffer_of(m)];
    const double bytes = message_bytes(m);
    if (!room_for(b, bytes)) {
      threads_[std::size_t(thread)].blocked = true;
      b.waiting.push_back(thread);
      return false;
    }
    b.queued += bytes;
    const int node = sender_node(m);
    const int peer = to_server(m) ? m.shard : m.worker;
    Egress& e = egress_[std::size_t(node)];
    auto& q = e.per_peer[std::size_t(peer)];
    if (q.empty()) e.turn.push_back(peer);
    q.push_back(id);
    if (!e.pacing) pace(node);
    return true;
  }

  // The pacer takes the next peer's oldest message and waits for its bytes to leave. A message
  // the bucket lets go at once (a request or an ack inside the burst allowance: most of them)
  // leaves here rather than through an event at this same instant, unless threads wait for room
  // in its buffer (their retry must not run inside the caller's send); this saves a fifth of
  // the events of a many-worker run.
  void pace(int node) {
    Egress& e = egress_[std::size_t(node)];
    e.pacing = true;
    while (!e.turn.empty()) {
      const int peer = e.turn.front();
      e.turn.pop_front();
      auto& q = e.per_peer[std::size_t(peer)];
      const int id = q.front();
      q.pop_front();
      if (!q.empty()) e.turn.push_back(peer);
      const Message& m = messages_[id];
      // A reservation in the past (unused burst) means the message leaves now.
      const double out =
          std::max(now_, reserve(egress_free_[std::size_t(node)], now_, message_bytes(m)));
      if (out > now_ || !buffers_[buffer_of(m)].waiting.empty()) {
        events_.push_stream(node, out, EventType::kEgressDone, id);
        return;
      }
      depart(id);
    }
    e.pacing = false;
  }

  // A message's bytes left its sender: out of the send buffer, through the receiver's downlink.
  void depart(int id) {
    const Message& m = messages_[id];
    const double bytes = message_bytes(m);
    buffers_[buffer_of(m)].queued -= bytes;
    const double in = now_ + bytes * cfg_.transit_s_per_byte;
    const double due = std::max(in, reserve(ingress_free_[std::size_t(receiver_node(m))], in, bytes));
    arrive(id, due + cfg_.latency_s);
  }

  void egress_done(int id) {
    const int node = sender_node(messages_[id]);
    SendBuffer& b = buffers_[buffer_of(messages_[id])];
    depart(id);
    pace(node);
    // Room in the buffer: the threads waiting on it try again, in the order they blocked.
    if (b.waiting.empty()) return;
    // Swapped with a scratch list kept across calls (this runs for every other message at many
    // workers); nothing below comes back here, since departures in place retry nobody. A thread
    // whose next message still does not fit stays blocked, back in the list in its turn, as its
    // retry would leave it.
    retry_.swap(b.waiting);
    b.waiting.clear();
    for (int thread : retry_) {
      SendThread& th = threads_[std::size_t(thread)];
      if (!room_for(b, message_bytes(messages_[th.outbox.front()]))) {
        b.waiting.push_back(thread);
        continue;
      }
      th.blocked = false;
      if (flush(thread)) resume(thread);
    }
  }

  // A thread's sends all went into their buffers: it carries on where it stopped.
  void resume(int thread) {
    if (thread < W_) {
      advance(thread);
    } else if (thread < 2 * W_) {
      Worker& w = workers_[std::size_t(thread - W_)];
      while (!w.held.empty() && !threads_[std::size_t(thread)].blocked) {
        const int id = w.held.front();
        w.held.pop_front();
        finish(id);
      }
    } else if (thread < reply_thread(0)) {
      start_lane(thread - 2 * W_);
    }  // a shard's reply thread only sends: nothing else waited
  }

  // ---- network ----

  double wire_bytes(const Message& m) const {
    return double(m.t.bytes() + cfg_.message_overhead_bytes);
  }

  void send(std::size_t ci, int id) {
    if (cfg_.bandwidth_bytes_per_sec <= 0) {  // unlimited links: latency (and host copies) only
      arrive(id, now_ + cfg_.latency_s + wire_bytes(messages_[id]) * cfg_.transit_s_per_byte);
      return;
    }
    Channel& c = channels_[ci];
    c.queue.push_back(id);
    if (c.queue.size() > 1) return;
    c.head_left = wire_bytes(messages_[id]);
    c.since = now_;
    c.rate = 0;
    c.active_index = int(active_.size());
    active_.push_back(int(ci));
    network_dirty_ = true;
  }

  void channel_done(int ci) {
    Channel& c = channels_[ci];
    const int id = c.queue.front();
    c.queue.pop_front();
    arrive(id, now_ + cfg_.latency_s + wire_bytes(messages_[id]) * cfg_.transit_s_per_byte);
    if (!c.queue.empty()) {
      c.head_left = wire_bytes(messages_[c.queue.front()]);
      c.since = now_;
      if (network_dirty_) {
        c.rate = 0;  // the coming reallocation reschedules it
        events_.clear_channel(ci);
      } else {
        events_.set_channel(ci, now_ + c.head_left / c.rate);
      }
      return;
    }
    events_.clear_channel(ci);
    // Idle: leave the active list (swap with the last).
    const int pos = c.active_index;
    active_[pos] = active_.back();
    channels_[active_[pos]].active_index = pos;
    active_.pop_back();
    c.active_index = -1;
    network_dirty_ = true;
  }

  // Max-min fair rates for the active pairs by progressive filling: repeatedly saturate the
  // link with the smallest fair share and freeze the pairs crossing it.
  void reallocate() {
    network_dirty_ = false;
    const double bw = cfg_.bandwidth_bytes_per_sec;
    touched_.clear();
    for (int ci : active_) {
      Channel& c = channels_[ci];
      c.head_left = std::max(0.0, c.head_left - c.rate * (now_ - c.since));
      c.since = now_;
      for (int l : {c.up_link, c.down_link}) {
        if (link_n_[l] == 0) link_cap_[l] = bw, touched_.push_back(l);
        ++link_n_[l];
      }
    }
    frozen_.assign(active_.size(), 0);
    std::size_t left = active_.size();
    while (left > 0) {
      int best = -1;
      double share = kInf;
      for (int l : touched_)
        if (link_n_[l] > 0 && link_cap_[l] / link_n_[l] < share)
          share = link_cap_[l] / link_n_[l], best = l;
      for (std::size_t k = 0; k < active_.size(); ++k) {
        if (frozen_[k]) continue;
        Channel& c = channels_[active_[k]];
        if (c.up_link != best && c.down_link != best) continue;
        frozen_[k] = 1, --left;
        for (int l : {c.up_link, c.down_link}) link_cap_[l] -= share, --link_n_[l];
        const double rate = std::max(share, 1e-9 * bw);
        if (rate != c.rate || c.head_left == 0) {
          c.rate = rate;
          events_.set_channel(active_[k], now_ + c.head_left / c.rate);
        }
      }
      link_n_[best] = 0;
    }
    for (int l : touched_) link_n_[l] = 0;
  }

  // ---- traces ----

  static void record(TraceRecorder& tr, const std::string& name, const char* lane, double t0,
                     double t1, std::int64_t step) {
    TraceEvent e;
    e.name = name, e.lane = lane, e.ts_us = t0 * 1e6, e.dur_us = (t1 - t0) * 1e6, e.step = step;
    tr.record(std::move(e));
  }

  void record_transfer(Worker& w, const Message& m) {
    const Part& part = plan_.parts[m.t.part];
    const char* lane = m.kind == MsgKind::kPullReply ? "pull" : "push";
    TraceEvent e;
    e.name =
        std::string(lane) + ":" + spec_.tensors[part.key].name + "#" + std::to_string(part.part);
    e.lane = lane, e.ts_us = m.started * 1e6, e.dur_us = (now_ - m.started) * 1e6, e.step = m.clock;
    e.bytes = m.t.bytes(), e.key = part.key, e.part = part.part, e.priority = m.t.layer,
    e.has_priority = true;
    w.trace->record(std::move(e));
  }

  void write_traces() {
    std::filesystem::create_directories(cfg_.trace_dir);
    const nlohmann::json cluster = {{"model", spec_.name},
                                    {"mode", cfg_.mode.str()},
                                    {"steps", cfg_.steps},
                                    {"batch", profile_.batch},
                                    {"seed", cfg_.seed},
                                    {"partition_bytes", cfg_.partition_bytes},
                                    {"policy", cfg_.policy.name},
                                    {"slice_params", cfg_.policy.slice_params},
                                    {"partition_params", cfg_.policy.partition_params},
                                    {"credit_bytes", cfg_.policy.credit_bytes},
                                    {"workers", W_},
                                    {"servers", S_}};
    const std::string link = cfg_.bandwidth_bytes_per_sec > 0
                                 ? format_bandwidth(cfg_.bandwidth_bytes_per_sec * 8) + ", " +
                                       std::to_string(std::lround(cfg_.latency_s * 1e6)) + " us one way"
                                 : "unshaped";
    auto meta = [&](TraceRecorder& tr, const char* role) {
      tr.set_metadata("role", role);
      tr.set_metadata("cluster", cluster);
      tr.set_metadata("compute", "simulated");
      tr.set_metadata("link", link);
      tr.set_metadata("policy", cfg_.policy.name);
      tr.set_metadata("clock", "simulated microseconds");
      tr.write(cfg_.trace_dir + "/" + tr.node() + ".trace.json");
    };
    for (auto& w : workers_) meta(*w.trace, "worker");
    for (auto& s : server_traces_) meta(*s, "server");
  }

  const Profile& profile_;
  const ModelSpec& spec_;
  SimConfig cfg_;
  PartitionPlan plan_;
  int W_ = 0, S_ = 0, L_ = 0;
  std::int64_t warmup_ = 0;
  std::vector<std::int64_t> layer_floats_;
  std::int64_t total_floats_ = 0;
  std::vector<int> part_layer_;
  std::vector<int> part_lane_;
  std::vector<std::vector<int>> parts_of_layer_;
  std::vector<Worker> workers_;
  std::vector<PartState> parts_;
  std::vector<Lane> lanes_;
  std::vector<double> lane_started_;
  std::vector<std::unique_ptr<TraceRecorder>> server_traces_;
  std::vector<Message> messages_;
  std::vector<int> free_messages_;
  std::vector<Channel> channels_;
  std::vector<int> active_;
  std::vector<double> link_cap_;
  std::vector<int> link_n_;
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
  double burst_s_ = 0;
  std::vector<double> egress_free_, ingress_free_;  // bucket links: each node's two buckets
  std::vector<SendThread> threads_;  // bucket links: compute, receiving (per worker), lanes
  std::vector<SendBuffer> buffers_;  // bucket links: per (worker, shard), then per shard
  std::vector<Egress> egress_;       // bucket links: per node
  std::vector<int> retry_;           // bucket links: egress_done's threads to retry
  // Arrival jitter: each connection's last delivery time, and the draws (seeded by cfg.seed).
  std::vector<double> connection_last_;
  SplitMix jitter_rng_;
  EventQueue events_;
  std::uint64_t processed_ = 0;
  double contention_scale_ = 1;  // SimConfig::cpu_contention's factor for this configuration
  double booked_cpu_s_ = 0;  // CPU booked on the host's cores: messages and real compute
  double now_ = 0;
};

}  // namespace

SimResult simulate(const Profile& profile, const ModelSpec& spec, const SimConfig& config) {
  Simulation sim(profile, spec, config);
  return sim.run();
}

namespace {

// The run with the median images/s of one configuration's seeds (the lower middle one for an
// even count), with events and wall_seconds summed over them and the seeds' range.
SimResult median_of(std::vector<SimResult> runs) {
  std::uint64_t events = 0;
  double wall = 0;
  for (const SimResult& r : runs) events += r.events, wall += r.wall_seconds;
  std::stable_sort(runs.begin(), runs.end(), [](const SimResult& a, const SimResult& b) {
    return a.images_per_sec < b.images_per_sec;
  });
  SimResult r = runs[(runs.size() - 1) / 2];
  r.events = events, r.wall_seconds = wall;
  r.seeds_min_images_per_sec = runs.front().images_per_sec;
  r.seeds_max_images_per_sec = runs.back().images_per_sec;
  return r;
}

// Seed k of a configuration: seed + k for the compute draws, the jitter and tf-random; traces
// only if `trace`.
SimConfig seeded(const SimConfig& config, int k, bool trace) {
  SimConfig c = config;
  c.seed += std::uint64_t(k), c.policy.seed += std::uint64_t(k);
  if (!trace) c.trace_dir.clear();
  return c;
}

}  // namespace

std::vector<SimResult> simulate_all(
    const Profile& profile, const ModelSpec& spec, const std::vector<SimConfig>& configs,
    int seeds, int jobs, const std::function<void(std::size_t, const SimResult&)>& done) {
  if (seeds < 1) throw Error("simulation: seeds must be at least 1");
  if (jobs < 0) throw Error("simulation: jobs must be 0 (one per core) or more");
  const std::size_t tasks = configs.size() * std::size_t(seeds);
  std::vector<std::vector<SimResult>> runs(configs.size(), std::vector<SimResult>(seeds));
  std::vector<int> left(configs.size(), seeds);
  std::vector<SimResult> results(configs.size());
  std::mutex mu;  // guards runs, left, results and the calls of done
  // Task t is seed t % seeds of configuration t / seeds: configurations are taken in order,
  // each one's seeds together, so the first ones finish first.
  parallel_for(tasks, worker_threads(jobs, tasks), [&](std::size_t t) {
    const std::size_t i = t / std::size_t(seeds);
    const int k = int(t % std::size_t(seeds));
    const bool traced = !configs[i].trace_dir.empty();
    SimResult r = simulate(profile, spec, seeded(configs[i], k, traced && seeds == 1));
    SimResult median;
    {
      std::lock_guard<std::mutex> lock(mu);
      runs[i][std::size_t(k)] = std::move(r);
      if (--left[i] > 0) return;
      median = median_of(std::move(runs[i]));
    }
    // The traces are the median run's: its seed once more, tracing (seeded, so the same run).
    if (traced && seeds > 1)
      simulate(profile, spec, seeded(configs[i], int(median.seed - configs[i].seed), true));
    std::lock_guard<std::mutex> lock(mu);
    results[i] = std::move(median);
    if (done) done(i, results[i]);
  });
  return results;
}

SimResult simulate_seeds(const Profile& profile, const ModelSpec& spec, const SimConfig& config,
                         int seeds) {
  return simulate_all(profile, spec, {config}, seeds, 1).front();
}

}  // namespace psbed::predictor
