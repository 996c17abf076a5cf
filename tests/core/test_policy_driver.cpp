// The policies' contract, checked through the driver that the live worker and the simulator
// share: every policy on random models (layers, parts, part sizes), random policy settings,
// random acknowledgment orders and delays, several steps and seeds. What each policy promises,
// read from core/policy.cpp:
// - all: every part of a step is sent once per direction, as contiguous ranges in order (a
//   slicing policy cuts it into slices of its size, the last one shorter), only once handed
//   over; an idle link never stays idle while something is pending (a step always completes).
// - wfbp: whole parts, pulls before pushes, each in the order handed over, nothing held back.
// - bulk: as wfbp for pulls; gradients held until backward_done, then the last layer first
//   (ready order within a layer).
// - tf-random: whole parts, every pending pull (in any order) before the pushes, which go in
//   ready order.
// - p3, bytescheduler, prophet: the slice sent is always the highest priority pending: pulls
//   before pushes, then the layer nearest the input, then the order handed over.
// - p3, bytescheduler: bytes in flight never exceed the credit, except one slice sent on an
//   idle link (which may be larger).
// - prophet: a block opens only on an idle link and holds at most the largest block (--credit)
//   of bytes, or a single slice; so anything it sends goes out with nothing in flight, all of
//   it in one take_sends().
// Some layers' gradients go as sufficient factors (Direction::kFactors): ordered as pushes by
// every policy, and never sliced.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/policy.hpp"
#include "core/policy_driver.hpp"

using namespace psbed::policy;

namespace {

// Cheap checks: a failing one says which policy, seed and step, and stops the case.
#define EXPECT(cond, what)                                                \
  do {                                                                    \
    if (!(cond)) FAIL(context() << ": " << what << " (" << #cond << ")"); \
  } while (0)

struct Model {
  int layers = 0;
  std::vector<int> layer;           // per part
  std::vector<std::int64_t> numel;  // per part
  std::vector<bool> factors;        // per part: its layer's gradient goes as factors
  std::vector<std::vector<int>> parts_of_layer;
};

Model random_model(std::mt19937_64& rng) {
  Model m;
  m.layers = std::uniform_int_distribution<int>(1, 7)(rng);
  m.parts_of_layer.resize(std::size_t(m.layers));
  std::uniform_int_distribution<int> parts(0, 3);
  std::uniform_int_distribution<std::int64_t> small(1, 3000), big(3001, 40000);
  std::bernoulli_distribution is_big(0.2), sfb(0.25);
  for (int l = 0; l < m.layers; ++l) {
    const bool as_factors = sfb(rng);
    // A layer may have no parameters (a pooling layer); the model has at least one part.
    int n = parts(rng);
    if (l == m.layers - 1 && m.numel.empty()) n = std::max(n, 1);
    for (int k = 0; k < n; ++k) {
      m.parts_of_layer[std::size_t(l)].push_back(int(m.numel.size()));
      m.layer.push_back(l);
      m.numel.push_back(is_big(rng) ? big(rng) : small(rng));
      m.factors.push_back(as_factors);
    }
  }
  return m;
}

PolicyOptions random_options(const std::string& name, std::mt19937_64& rng) {
  PolicyOptions o;
  o.name = name;
  o.slice_params = std::uniform_int_distribution<std::int64_t>(50, 5000)(rng);
  o.partition_params = std::uniform_int_distribution<std::int64_t>(50, 8000)(rng);
  // The default credit, one below a slice, or anything from 4 bytes up.
  switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
    case 0:
      o.credit_bytes = -1;
      break;
    case 1:
      o.credit_bytes = std::uniform_int_distribution<std::int64_t>(4, 2000)(rng);
      break;
    default:
      o.credit_bytes = std::uniform_int_distribution<std::int64_t>(4, 100000)(rng);
      break;
  }
  o.seed = rng();
  return o;
}

class Contract {
 public:
  Contract(const std::string& name, std::uint64_t seed)
      : name_(name),
        seed_(seed),
        rng_(seed),
        model_(random_model(rng_)),
        options_(random_options(name, rng_)),
        driver_(make_policy(options_)) {
    credit_ = credit_in_effect(options_);
    if (name == "p3" || name == "prophet") slice_ = options_.slice_params;
    if (name == "bytescheduler") slice_ = options_.partition_params;
  }

  void run_steps(int steps) {
    for (step_ = 0; step_ < steps; ++step_) run_step();
  }

 private:
  struct PartState {
    bool handed = false;
    std::uint64_t seq = 0;   // order handed over within the step
    std::int64_t sent = 0;   // floats sent, from the part's start
    std::int64_t acked = 0;  // floats acknowledged
  };

  std::string context() const {
    std::ostringstream s;
    s << name_ << " seed " << seed_ << " step " << step_ << " (" << model_.numel.size()
      << " parts over " << model_.layers << " layers, slice " << slice_ << ", credit " << credit_
      << ")";
    return s.str();
  }

  PartState& state(Direction d, int part) {
    return (d == Direction::kPull ? pulls_ : pushes_)[std::size_t(part)];
  }
  bool slicing() const { return slice_ > 0; }
  // A push of a factor part goes as factors (state() keeps both with the pushes).
  Transfer whole(Direction d, int part) const {
    if (d == Direction::kPush && model_.factors[std::size_t(part)]) d = Direction::kFactors;
    return {d, part, model_.layer[std::size_t(part)], 0, model_.numel[std::size_t(part)]};
  }

  void hand(Direction d, int part) {
    PartState& s = state(d, part);
    EXPECT(!s.handed, "a part handed over twice in one step");
    s.handed = true;
    s.seq = seq_++;
    if (d == Direction::kPull)
      driver_.parameter_needed(now_, whole(d, part));
    else
      driver_.gradient_ready(now_, whole(d, part));
  }

  bool pending(Direction d, int part) {
    const PartState& s = state(d, part);
    return s.handed && s.sent < model_.numel[std::size_t(part)];
  }
  bool any_pending(Direction d) {
    for (int i = 0; i < int(model_.numel.size()); ++i)
      if (pending(d, i)) return true;
    return false;
  }
  // Pending for the policy: bulk's gradients wait for backward_done by design.
  bool sendable_pending() {
    return any_pending(Direction::kPull) ||
           (any_pending(Direction::kPush) && !(name_ == "bulk" && !backward_over_));
  }

  // The pending part a policy must serve next, where it promises one; -1 where it does not.
  int expected_part(Direction& dir) {
    const int n = int(model_.numel.size());
    auto earliest = [&](Direction d, auto better) {
      int best = -1;
      for (int i = 0; i < n; ++i)
        if (pending(d, i) && (best < 0 || better(i, best))) best = i;
      return best;
    };
    auto by_seq = [&](Direction d) {
      return [this, d](int a, int b) { return state(d, a).seq < state(d, b).seq; };
    };
    dir = any_pending(Direction::kPull) ? Direction::kPull : Direction::kPush;
    if (name_ == "tf-random" && dir == Direction::kPull) return -1;  // any pending pull
    if (name_ == "bulk" && dir == Direction::kPush)  // the last layer first, then ready order
      return earliest(dir, [&](int a, int b) {
        const int la = model_.layer[std::size_t(a)], lb = model_.layer[std::size_t(b)];
        return la != lb ? la > lb : state(dir, a).seq < state(dir, b).seq;
      });
    if (slicing())  // the layer nearest the input, then the order handed over
      return earliest(dir, [&](int a, int b) {
        const int la = model_.layer[std::size_t(a)], lb = model_.layer[std::size_t(b)];
        return la != lb ? la < lb : state(dir, a).seq < state(dir, b).seq;
      });
    return earliest(dir, by_seq(dir));  // wfbp, tf-random's pushes, bulk's pulls
  }

  void check_send(const Transfer& t, std::int64_t in_flight_before) {
    const int n = int(model_.numel.size());
    EXPECT(t.part >= 0 && t.part < n, "a transfer of an unknown part " << t.part);
    EXPECT(t.layer == model_.layer[std::size_t(t.part)],
           "a transfer with another layer than its part's");
    PartState& s = state(t.dir, t.part);
    EXPECT(s.handed, "part " << t.part << " sent before it was handed over");
    const std::int64_t numel = model_.numel[std::size_t(t.part)];
    EXPECT(t.offset == s.sent, "part " << t.part
                                       << " not sent in order, or a range sent twice: offset "
                                       << t.offset << ", " << s.sent << " floats sent before");
    EXPECT(t.count > 0 && t.offset + t.count <= numel, "a range beyond part " << t.part);
    const bool factors = t.dir == Direction::kFactors;
    EXPECT(factors == (t.dir != Direction::kPull && model_.factors[std::size_t(t.part)]),
           "part " << t.part << " sent in the wrong direction");
    if (slicing() && !factors)
      EXPECT(t.count == std::min(slice_, numel - t.offset), "a slice of " << t.count << " floats");
    else
      EXPECT(t.offset == 0 && t.count == numel, "part " << t.part << " cut");
    const Direction kind = factors ? Direction::kPush : t.dir;  // factors rank as pushes
    if (name_ == "bulk" && kind == Direction::kPush)
      EXPECT(backward_over_, "bulk pushed before backward ended");

    Direction dir;
    const int want = expected_part(dir);
    EXPECT(kind == dir,
           (dir == Direction::kPull ? "a push sent while pulls were pending" : "unexpected pull"));
    if (want >= 0)
      EXPECT(t.part == want,
             "part " << t.part << " sent before part " << want << " (priority/order)");

    if (name_ == "p3" || name_ == "bytescheduler")
      EXPECT(in_flight_before == 0 || in_flight_before + t.bytes() <= credit_,
             in_flight_before + t.bytes() << " bytes in flight over the credit");
    s.sent += t.count;
    in_flight_.push_back(t);
    in_flight_bytes_ += t.bytes();
    sent_bytes_[t.dir == Direction::kPull ? 0 : 1] += t.bytes();
  }

  // Takes what the driver lets go now and checks it.
  void issue() {
    const std::int64_t before = in_flight_bytes_;
    EXPECT(driver_.bytes_in_flight() == before, "the driver counts " << driver_.bytes_in_flight()
                                                                     << " bytes in flight, "
                                                                     << before << " were");
    const std::vector<Transfer> go = driver_.take_sends(now_);
    std::int64_t block = 0;
    for (const Transfer& t : go) {
      check_send(t, in_flight_bytes_);
      block += t.bytes();
    }
    if (name_ == "prophet" && !go.empty()) {
      EXPECT(before == 0, "prophet opened a block with " << before << " bytes in flight");
      EXPECT(go.size() == 1 || block <= credit_, "a prophet block of " << block << " bytes");
    }
    EXPECT(driver_.bytes_in_flight() == in_flight_bytes_, "bytes in flight miscounted");
    // An idle link with something to send takes it: otherwise no ack would ever come back.
    if (sendable_pending()) EXPECT(in_flight_bytes_ > 0, "pending transfers on an idle link");
    if (name_ == "wfbp" || name_ == "tf-random" || name_ == "bulk")
      EXPECT(!sendable_pending(), "a policy without a credit held something back");
  }

  // Acknowledges one transfer in flight, chosen at random, after a random delay.
  void ack_one() {
    EXPECT(!in_flight_.empty(), "waiting with nothing in flight");
    const std::size_t k =
        std::uniform_int_distribution<std::size_t>(0, in_flight_.size() - 1)(rng_);
    const Transfer t = in_flight_[k];
    in_flight_.erase(in_flight_.begin() + std::ptrdiff_t(k));
    in_flight_bytes_ -= t.bytes();
    now_ += delay();
    state(t.dir, t.part).acked += t.count;
    driver_.acked(now_, t);
    issue();
  }
  void ack_some() {
    const int k = std::uniform_int_distribution<int>(0, 3)(rng_);
    for (int i = 0; i < k && !in_flight_.empty(); ++i) ack_one();
  }
  double delay() { return std::exponential_distribution<double>(2000.0)(rng_); }
  bool pulls_arrived() {
    for (int i = 0; i < int(model_.numel.size()); ++i)
      if (state(Direction::kPull, i).acked < model_.numel[std::size_t(i)]) return false;
    return true;
  }

  void run_step() {
    const std::size_t n = model_.numel.size();
    pulls_.assign(n, PartState{});
    pushes_.assign(n, PartState{});
    seq_ = 0;
    backward_over_ = false;
    sent_bytes_[0] = sent_bytes_[1] = 0;
    now_ += delay();
    driver_.begin_step(now_, std::uint64_t(step_));
    // Every parameter is needed at once, in part order (as the worker and the simulator hand
    // them over), then acks come back while forward runs.
    for (int i = 0; i < int(n); ++i) hand(Direction::kPull, i);
    issue();
    // Mostly backward waits for every parameter (forward needs them all); now and then it
    // starts early, so that pulls and pushes are pending together.
    const bool overlap = std::bernoulli_distribution(0.3)(rng_);
    if (!overlap)
      while (!pulls_arrived()) ack_one();
    for (int l = model_.layers - 1; l >= 0; --l) {
      now_ += delay();
      ack_some();
      for (int i : model_.parts_of_layer[std::size_t(l)]) hand(Direction::kPush, i);
      issue();
    }
    now_ += delay();
    ack_some();
    backward_over_ = true;
    driver_.backward_done(now_);
    issue();
    while (!in_flight_.empty()) ack_one();
    // The step is over: every part went once each way, and nothing is left.
    std::int64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      total += model_.numel[i] * 4;
      EXPECT(
          pulls_[i].sent == model_.numel[i] && pulls_[i].acked == model_.numel[i],
          "part " << i << ": " << pulls_[i].sent << " of " << model_.numel[i] << " floats pulled");
      EXPECT(
          pushes_[i].sent == model_.numel[i] && pushes_[i].acked == model_.numel[i],
          "part " << i << ": " << pushes_[i].sent << " of " << model_.numel[i] << " floats pushed");
    }
    EXPECT(sent_bytes_[0] == total && sent_bytes_[1] == total,
           "bytes sent differ from the model's");
    EXPECT(driver_.bytes_in_flight() == 0, "bytes in flight after the step");
    EXPECT(driver_.take_sends(now_).empty(), "something sent after the step ended");
  }

  std::string name_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  Model model_;
  PolicyOptions options_;
  PolicyDriver driver_;
  std::int64_t slice_ = 0;  // floats per slice; 0: the policy sends whole parts
  std::int64_t credit_ = -1;
  int step_ = 0;
  double now_ = 0;
  std::uint64_t seq_ = 0;
  bool backward_over_ = false;
  std::vector<PartState> pulls_, pushes_;
  std::vector<Transfer> in_flight_;
  std::int64_t in_flight_bytes_ = 0;
  std::int64_t sent_bytes_[2] = {0, 0};
};

}  // namespace

TEST_CASE(
    "every policy through the driver: each part once per step, in the order it promises, "
    "within its credit, and every step completes",
    "[core][policy][policy_driver]") {
  const std::vector<std::string> names = policy_names();
  for (std::size_t p = 0; p < names.size(); ++p)
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
      Contract c(names[p], seed * 1000 + p);
      c.run_steps(4);
    }
}

TEST_CASE("the driver refuses a policy switch with bytes in flight",
          "[core][policy][policy_driver]") {
  PolicyDriver d(make_policy({"wfbp"}));
  d.begin_step(0, 0);
  d.parameter_needed(0, {Direction::kPull, 0, 0, 0, 10});
  const auto go = d.take_sends(0);
  REQUIRE(go.size() == 1);
  CHECK(d.bytes_in_flight() == 40);
  CHECK_THROWS_AS(d.set_policy(make_policy({"p3"})), psbed::Error);
  CHECK(d.policy().name() == "wfbp");
  d.acked(1, go[0]);
  CHECK(d.bytes_in_flight() == 0);
  d.set_policy(make_policy({"p3"}));
  CHECK(d.policy().name() == "p3");
}
