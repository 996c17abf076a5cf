#include "core/policy.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "core/error.hpp"

namespace psbed::policy {
namespace {

// First come, first served, pulls before pushes (a step's pulls precede its pushes anyway).
class Fifo : public Policy {
 public:
  std::string name() const override { return "wfbp"; }
  void parameter_needed(double, const Transfer& t) override { pulls_.push_back(t); }
  void gradient_ready(double, const Transfer& t) override { pushes_.push_back(t); }
  std::optional<Transfer> next(double, std::int64_t) override {
    for (auto* q : {&pulls_, &pushes_})
      if (!q->empty()) {
        Transfer t = q->front();
        q->pop_front();
        return t;
      }
    return std::nullopt;
  }

 protected:
  std::deque<Transfer> pulls_, pushes_;
};

// Pull everything before forward; hold every gradient until backward ends, then send them
// last layer first (the order backward produced them).
class Bulk final : public Fifo {
 public:
  std::string name() const override { return "bulk"; }
  bool pull_all_before_forward() const override { return true; }
  void gradient_ready(double, const Transfer& t) override { held_.push_back(t); }
  void backward_done(double) override {
    std::stable_sort(held_.begin(), held_.end(),
                     [](const Transfer& a, const Transfer& b) { return a.layer > b.layer; });
    for (const auto& t : held_) pushes_.push_back(t);
    held_.clear();
  }

 private:
  std::vector<Transfer> held_;
};

// TensorFlow as the ICPE 2020 paper describes it: parameters arrive in a random order each
// step (forward of a layer still waits for its own), gradients go as produced.
class TfRandom final : public Fifo {
 public:
  explicit TfRandom(std::uint64_t seed) : rng_(seed) {}
  std::string name() const override { return "tf-random"; }
  std::optional<Transfer> next(double now, std::int64_t in_flight) override {
    if (!pulls_.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, pulls_.size() - 1);
      auto it = pulls_.begin() + std::ptrdiff_t(pick(rng_));
      Transfer t = *it;
      pulls_.erase(it);
      return t;
    }
    return Fifo::next(now, in_flight);
  }

 private:
  std::mt19937_64 rng_;
};

// Slices of parts in a strict priority queue: pulls first (a pull blocks the next forward, a push
// only the next step), then layers nearest the input, then arrival order (a valid strict weak
// ordering, unlike a `<=` comparator). Shared by the slicing policies. Factors rank as pushes
// and go whole: a peer's factors are one message.
class SliceQueue {
 public:
  explicit SliceQueue(std::int64_t slice) : slice_(slice) {}
  // A transfer's slices are contiguous in the order (same direction and layer, consecutive
  // arrival), so the heap holds whole transfers and cuts the next slice off the top one: one
  // heap entry per part rather than per slice (the simulator calls this for every slice of
  // every worker).
  void add(const Transfer& t) {
    if (t.count <= 0) return;
    heap_.push_back(Entry{t.dir == Direction::kPull ? 0 : 1, t.layer, seq_++, t, 0});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool empty() const { return heap_.empty(); }
  Transfer front() const {
    const Entry& e = heap_.front();
    Transfer s = e.t;
    s.offset = e.t.offset + e.done;
    s.count = std::min(slice_of(e.t), e.t.count - e.done);
    return s;
  }
  void pop() {
    Entry& e = heap_.front();
    e.done += std::min(slice_of(e.t), e.t.count - e.done);
    if (e.done < e.t.count) return;  // the key is unchanged: still the top
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    heap_.pop_back();
  }

 private:
  struct Entry {
    int dir_rank;
    int layer;
    std::uint64_t seq;
    Transfer t;
    std::int64_t done;  // floats of t already taken as slices
  };
  std::int64_t slice_of(const Transfer& t) const {
    return t.dir == Direction::kFactors ? t.count : slice_;
  }
  struct Later {  // max-heap comparator: true if a comes after b
    bool operator()(const Entry& a, const Entry& b) const {
      return std::tie(a.dir_rank, a.layer, a.seq) > std::tie(b.dir_rank, b.layer, b.seq);
    }
  };
  std::int64_t slice_;
  std::vector<Entry> heap_;
  std::uint64_t seq_ = 0;
};

// P3 / ByteScheduler: slices in a strict priority queue (layer, then arrival order: a valid
// strict weak ordering, unlike a `<=` comparator), at most `credit` bytes in flight, so a newly
// ready high-priority slice waits behind at most one credit of data.
class PriorityCredit final : public Policy {
 public:
  PriorityCredit(std::string name, std::int64_t slice, std::int64_t credit)
      : name_(std::move(name)), credit_(credit), queue_(slice) {}
  std::string name() const override { return name_; }
  void parameter_needed(double, const Transfer& t) override { add(t); }
  void gradient_ready(double, const Transfer& t) override { add(t); }
  std::optional<Transfer> next(double, std::int64_t in_flight) override {
    if (queue_.empty()) return std::nullopt;
    const Transfer t = queue_.front();
    // An idle link always takes the next slice, whatever its size.
    if (in_flight > 0 && in_flight + t.bytes() > credit_) return std::nullopt;
    queue_.pop();
    return t;
  }

 private:
  void add(const Transfer& t) { queue_.add(t); }
  std::string name_;
  std::int64_t credit_;
  SliceQueue queue_;
};

// Prophet: gradients become ready at stepwise times during backward, and those times repeat from
// step to step. The policy learns them (offsets from the step's start, per layer, from the
// previous step) and sends in blocks: a block opens when the link is idle, takes slices in strict
// priority order (pulls, then layers nearest the input) and is sized to what the link carries
// before the next gradient is predicted to become ready (gap x bandwidth estimate, at least one
// slice). A later, higher-priority gradient therefore waits at most for a block sized to end as
// it arrives, and lower priority never preempts higher. The bandwidth estimate comes from the
// caller (bandwidth_estimate) or, failing that, from the policy's own busy periods.
class Prophet final : public Policy {
 public:
  Prophet(std::int64_t slice, std::int64_t max_block) : queue_(slice), max_block_(max_block) {}
  std::string name() const override { return "prophet"; }
  void begin_step(double now, std::uint64_t) override {
    // Learned offsets follow the last step, smoothed so one hiccup does not skew every block.
    for (const auto& [layer, offset] : seen_) {
      auto it = learned_.find(layer);
      learned_[layer] = it == learned_.end() ? offset : 0.5 * it->second + 0.5 * offset;
    }
    seen_.clear();
    step_start_ = now;
    backward_over_ = false;
  }
  void parameter_needed(double, const Transfer& t) override { add(t); }
  void gradient_ready(double now, const Transfer& t) override {
    seen_.emplace(t.layer, now - step_start_);
    add(t);
  }
  void backward_done(double) override { backward_over_ = true; }
  void bandwidth_estimate(double bytes_per_s) override {
    if (bytes_per_s > 0) bandwidth_ = bytes_per_s, told_bandwidth_ = true;
  }
  // Only pushes and factors feed the estimate: a pull's reply may wait on the server (a bsp
  // barrier), which says nothing about the link.
  void sent(double now, const Transfer& t) override {
    if (t.dir == Direction::kPull) return;
    if (outstanding_ == 0) busy_start_ = now, busy_bytes_ = 0;
    outstanding_ += t.bytes();
    busy_bytes_ += t.bytes();
  }
  void acked(double now, const Transfer& t) override {
    if (t.dir == Direction::kPull) return;
    outstanding_ -= t.bytes();
    if (outstanding_ == 0 && !told_bandwidth_ && now > busy_start_) {
      const double sample = double(busy_bytes_) / (now - busy_start_);
      bandwidth_ = bandwidth_ > 0 ? 0.7 * bandwidth_ + 0.3 * sample : sample;
    }
  }
  std::optional<Transfer> next(double now, std::int64_t in_flight) override {
    if (queue_.empty()) return std::nullopt;
    if (block_left_ <= 0) {
      if (in_flight > 0) return std::nullopt;  // the current block drains first
      block_left_ = block_bytes(now);
      block_fresh_ = true;
    }
    const Transfer t = queue_.front();
    if (!block_fresh_ && t.bytes() > block_left_) {
      block_left_ = 0;  // the block is full; the next one opens when it has drained
      return std::nullopt;
    }
    queue_.pop();
    block_left_ -= t.bytes();
    block_fresh_ = false;
    if (queue_.empty()) block_left_ = 0;  // a block never outlives what was pending when it opened
    return t;
  }

 private:
  std::int64_t block_bytes(double now) const {
    if (backward_over_ || bandwidth_ <= 0) return max_block_;
    const double elapsed = now - step_start_;
    double gap = -1;
    for (const auto& [layer, offset] : learned_)
      if (!seen_.count(layer) && offset > elapsed && (gap < 0 || offset - elapsed < gap))
        gap = offset - elapsed;
    if (gap < 0) return max_block_;
    return std::clamp<std::int64_t>(std::llround(gap * bandwidth_), 1, max_block_);
  }
  void add(const Transfer& t) { queue_.add(t); }
  SliceQueue queue_;
  std::int64_t max_block_;
  std::map<int, double> learned_, seen_;  // layer -> gradient-ready offset from the step start
  double step_start_ = 0;
  bool backward_over_ = false;
  double bandwidth_ = 0;  // bytes/s; 0 = not yet known
  bool told_bandwidth_ = false;
  std::int64_t outstanding_ = 0, busy_bytes_ = 0;
  double busy_start_ = 0;
  std::int64_t block_left_ = 0;
  bool block_fresh_ = false;
};

}  // namespace

std::vector<std::string> policy_names() {
  return {"bulk", "wfbp", "tf-random", "p3", "bytescheduler", "prophet"};
}

bool uses_slice_params(const std::string& policy) { return policy == "p3" || policy == "prophet"; }
bool uses_partition_params(const std::string& policy) { return policy == "bytescheduler"; }
bool uses_credit(const std::string& policy) {
  return policy == "p3" || policy == "bytescheduler" || policy == "prophet";
}

std::int64_t credit_in_effect(const PolicyOptions& o) {
  if (!uses_credit(o.name)) return -1;
  if (o.credit_bytes >= 0) return o.credit_bytes;
  return o.name == "bytescheduler" ? defaults::kByteSchedulerCreditBytes : defaults::kCreditBytes;
}

void check_policy_options(const PolicyOptions& o) { (void)make_policy(o); }

std::unique_ptr<Policy> make_policy(const PolicyOptions& o) {
  if (o.name == "bulk") return std::make_unique<Bulk>();
  if (o.name == "wfbp" || o.name == "fifo") return std::make_unique<Fifo>();
  if (o.name == "tf-random") return std::make_unique<TfRandom>(o.seed);
  if (o.name == "p3" || o.name == "bytescheduler") {
    const std::int64_t slice = o.name == "p3" ? o.slice_params : o.partition_params;
    const std::int64_t credit = credit_in_effect(o);
    if (slice < 1) throw Error("policy " + o.name + ": slice size must be at least 1 parameter");
    if (credit < 4) throw Error("policy " + o.name + ": credit must be at least 4 bytes");
    return std::make_unique<PriorityCredit>(o.name, slice, credit);
  }
  if (o.name == "prophet") {
    const std::int64_t max_block = credit_in_effect(o);
    if (o.slice_params < 1) throw Error("policy prophet: slice size must be at least 1 parameter");
    if (max_block < 4)
      throw Error("policy prophet: the block limit (--credit) must be at least 4 bytes");
    return std::make_unique<Prophet>(o.slice_params, max_block);
  }
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown policy '" + o.name + "', expected one of: " + known);
}

}  // namespace psbed::policy
