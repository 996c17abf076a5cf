#include "core/policy.hpp"

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <tuple>

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
    std::stable_sort(held_.begin(), held_.end(), [](const Transfer& a, const Transfer& b) { return a.layer > b.layer; });
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

// P3 / ByteScheduler: slices in a strict priority queue (layer, then arrival order: a valid
// strict weak ordering, unlike a `<=` comparator), at most `credit` bytes in flight, so a newly
// ready high-priority slice waits behind at most one credit of data.
class PriorityCredit final : public Policy {
 public:
  PriorityCredit(std::string name, std::int64_t slice, std::int64_t credit)
      : name_(std::move(name)), slice_(slice), credit_(credit) {}
  std::string name() const override { return name_; }
  void parameter_needed(double, const Transfer& t) override { add(t); }
  void gradient_ready(double, const Transfer& t) override { add(t); }
  std::optional<Transfer> next(double, std::int64_t in_flight) override {
    if (queue_.empty()) return std::nullopt;
    const Transfer& t = queue_.begin()->t;
    // An idle link always takes the next slice, whatever its size.
    if (in_flight > 0 && in_flight + t.bytes() > credit_) return std::nullopt;
    Transfer out = t;
    queue_.erase(queue_.begin());
    return out;
  }

 private:
  struct Entry {
    int dir_rank;  // pulls first: a pull blocks the next forward, a push only the next step
    int layer;
    std::uint64_t seq;
    Transfer t;
    bool operator<(const Entry& o) const { return std::tie(dir_rank, layer, seq) < std::tie(o.dir_rank, o.layer, o.seq); }
  };
  void add(const Transfer& t) {
    for (std::int64_t off = 0; off < t.count; off += slice_) {
      Transfer s = t;
      s.offset = t.offset + off;
      s.count = std::min(slice_, t.count - off);
      queue_.insert(Entry{t.dir == Direction::kPull ? 0 : 1, t.layer, seq_++, s});
    }
  }
  std::string name_;
  std::int64_t slice_, credit_;
  std::set<Entry> queue_;
  std::uint64_t seq_ = 0;
};

}  // namespace

std::vector<std::string> policy_names() { return {"bulk", "wfbp", "tf-random", "p3", "bytescheduler"}; }

std::unique_ptr<Policy> make_policy(const PolicyOptions& o) {
  if (o.name == "bulk") return std::make_unique<Bulk>();
  if (o.name == "wfbp" || o.name == "fifo") return std::make_unique<Fifo>();
  if (o.name == "tf-random") return std::make_unique<TfRandom>(o.seed);
  if (o.name == "p3" || o.name == "bytescheduler") {
    const std::int64_t slice = o.name == "p3" ? o.slice_params : o.partition_params;
    const std::int64_t credit = o.credit_bytes >= 0 ? o.credit_bytes : (o.name == "p3" ? 4 << 20 : 4000000 * 4);
    if (slice < 1) throw Error("policy " + o.name + ": slice size must be at least 1 parameter");
    if (credit < 4) throw Error("policy " + o.name + ": credit must be at least 4 bytes");
    return std::make_unique<PriorityCredit>(o.name, slice, credit);
  }
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown policy '" + o.name + "', expected one of: " + known);
}

}  // namespace psbed::policy
