// Each policy on scripted event sequences: the exact send order it must produce.
#include <catch2/catch.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/policy.hpp"
#include "transfers.hpp"

using namespace psbed::policy;

namespace {

// Drains the policy with an always-idle link (every send acknowledged before the next).
std::vector<Transfer> drain(Policy& p) {
  std::vector<Transfer> out;
  while (auto t = p.next(0, 0)) out.push_back(*t);
  return out;
}

}  // namespace

TEST_CASE("bulk sends nothing before backward ends, then the last layer first", "[core][policy]") {
  auto p = make_policy({"bulk"});
  CHECK(p->pull_all_before_forward());
  p->begin_step(0, 0);
  p->gradient_ready(1, push(5, 9, 100));
  p->gradient_ready(2, push(3, 4, 100));
  CHECK_FALSE(p->next(2, 0).has_value());
  p->gradient_ready(3, push(0, 0, 100));
  CHECK_FALSE(p->next(3, 0).has_value());
  p->backward_done(4);
  auto order = drain(*p);
  REQUIRE(order.size() == 3);
  CHECK(order[0].layer == 9);
  CHECK(order[1].layer == 4);
  CHECK(order[2].layer == 0);
}

TEST_CASE("wfbp sends each gradient as soon as it is ready, first come first served",
          "[core][policy]") {
  auto p = make_policy({"wfbp"});
  CHECK_FALSE(p->pull_all_before_forward());
  p->gradient_ready(1, push(5, 9, 100));
  auto first = p->next(1, 0);
  REQUIRE(first);
  CHECK(first->part == 5);  // before backward ends
  p->gradient_ready(2, push(3, 4, 100));
  p->gradient_ready(3, push(0, 0, 100));
  auto rest = drain(*p);
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].part == 3);
  CHECK(rest[1].part == 0);
}

TEST_CASE("tf-random pulls every parameter once, in a seeded random order", "[core][policy]") {
  auto order_of = [](std::uint64_t seed) {
    PolicyOptions o;
    o.name = "tf-random";
    o.seed = seed;
    auto p = make_policy(o);
    for (int i = 0; i < 12; ++i) p->parameter_needed(0, pull(i, i, 10));
    std::vector<int> parts;
    for (const auto& t : drain(*p)) parts.push_back(t.part);
    return parts;
  };
  auto a = order_of(1), b = order_of(1), c = order_of(2);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(a != sorted);
}

TEST_CASE(
    "p3 sends a newly ready layer-1 slice before the remaining layer-9 slices once the credit "
    "drains",
    "[core][policy]") {
  PolicyOptions o;
  o.name = "p3";
  o.slice_params = 1000;  // 4,000-byte slices
  o.credit_bytes = 8000;  // two slices in flight
  auto p = make_policy(o);
  p->gradient_ready(0, push(9, 9, 5000));  // 5 slices of layer 9
  std::int64_t in_flight = 0;
  std::vector<Transfer> sent;
  while (auto t = p->next(0, in_flight)) sent.push_back(*t), in_flight += t->bytes();
  REQUIRE(sent.size() == 2);  // the credit is full
  CHECK(sent[0].offset == 0);
  CHECK(sent[1].offset == 1000);
  p->gradient_ready(1, push(1, 1, 1500));  // layer 1: 2 slices (1000 + 500 floats)
  CHECK_FALSE(p->next(1, in_flight));      // still no room
  in_flight -= sent[0].bytes();            // one acknowledgment
  auto t = p->next(2, in_flight);
  REQUIRE(t);
  CHECK(t->layer == 1);
  CHECK(t->offset == 0);
  in_flight += t->bytes();
  in_flight = 0;  // everything acknowledged
  auto rest = drain(*p);
  REQUIRE(rest.size() == 4);
  CHECK(rest[0].layer == 1);
  CHECK(rest[0].count == 500);
  for (int i = 1; i < 4; ++i) CHECK(rest[i].layer == 9);
  CHECK(rest[1].offset == 2000);  // FIFO among equals
  CHECK(rest[3].offset == 4000);
}

TEST_CASE("p3 pulls by priority, nearest the input first", "[core][policy]") {
  PolicyOptions o;
  o.name = "p3";
  auto p = make_policy(o);
  p->parameter_needed(0, pull(7, 7, 10));
  p->parameter_needed(0, pull(2, 2, 10));
  p->parameter_needed(0, pull(0, 0, 10));
  auto order = drain(*p);
  REQUIRE(order.size() == 3);
  CHECK(order[0].layer == 0);
  CHECK(order[1].layer == 2);
  CHECK(order[2].layer == 7);
}

TEST_CASE("bytescheduler partitions with its default credit of 4,000,000 parameters",
          "[core][policy]") {
  PolicyOptions o;
  o.name = "bytescheduler";
  auto p = make_policy(o);
  p->gradient_ready(0, push(0, 3, 3500000));
  std::int64_t in_flight = 0;
  std::vector<Transfer> sent;
  while (auto t = p->next(0, in_flight)) sent.push_back(*t), in_flight += t->bytes();
  // 1,000,000-parameter partitions; the fourth (500,000) still fits in 4,000,000 parameters.
  REQUIRE(sent.size() == 4);
  CHECK(sent[0].count == 1000000);
  CHECK(sent[3].count == 500000);
}

TEST_CASE(
    "prophet sizes blocks from the learned gradient-ready gaps and never sends lower priority "
    "first",
    "[core][policy]") {
  PolicyOptions o;
  o.name = "prophet";
  o.slice_params = 1000;  // 4,000-byte slices
  o.credit_bytes = 100000;
  auto p = make_policy(o);
  p->bandwidth_estimate(1e6);  // 1 MB/s: 1 ms carries 1,000 bytes
  // Step 0 teaches the policy when gradients become ready: layer 2 at 10 ms, 1 at 20, 0 at 30.
  p->begin_step(0, 0);
  p->gradient_ready(0.010, push(2, 2, 5000));
  p->gradient_ready(0.020, push(1, 1, 1000));
  p->gradient_ready(0.030, push(0, 0, 1000));
  p->backward_done(0.030);
  CHECK(drain(*p).size() == 7);
  // Step 1: layer 2's 5 slices are ready at 10 ms; layer 1 is due at 20 ms, so the first block is
  // 10 ms x 1 MB/s = 10,000 bytes: two whole slices.
  p->begin_step(1.0, 1);
  p->gradient_ready(1.010, push(2, 2, 5000));
  std::int64_t in_flight = 0;
  std::vector<Transfer> block;
  auto take = [&](double now) {
    block.clear();
    while (auto t = p->next(now, in_flight))
      block.push_back(*t), in_flight += t->bytes(), p->sent(now, *t);
    return block.size();
  };
  auto ack_all = [&](double now) {
    for (const auto& t : block) p->acked(now, t);
    in_flight = 0;
  };
  REQUIRE(take(1.010) == 2);
  CHECK(block[0].offset == 0);
  CHECK(block[1].offset == 1000);
  ack_all(1.018);
  // 2 ms before layer 1: the block is a single slice (never less than one).
  REQUIRE(take(1.018) == 1);
  CHECK(block[0].layer == 2);
  // Layer 1 becomes ready while that block is in flight: it waits for the block, not longer.
  p->gradient_ready(1.020, push(1, 1, 1000));
  CHECK_FALSE(p->next(1.020, in_flight));
  ack_all(1.022);
  // Next block, 8 ms before layer 0: layer 1 first, then the remaining layer-2 slices that fit.
  REQUIRE(take(1.022) == 2);
  CHECK(block[0].layer == 1);
  CHECK(block[1].layer == 2);
  CHECK(block[1].offset == 3000);
  ack_all(1.030);
  p->gradient_ready(1.030, push(0, 0, 1000));
  p->backward_done(1.030);
  // Backward is over: one block (up to the 100,000-byte limit), highest priority first.
  REQUIRE(take(1.030) == 2);
  CHECK(block[0].layer == 0);
  CHECK(block[1].layer == 2);
  CHECK(block[1].offset == 4000);
  CHECK_FALSE(p->next(1.031, 0));
}

TEST_CASE("prophet learns the bandwidth from its own busy periods", "[core][policy]") {
  PolicyOptions o;
  o.name = "prophet";
  o.slice_params = 250;  // 1,000-byte slices
  auto p = make_policy(o);
  p->begin_step(0, 0);
  p->gradient_ready(0.001, push(1, 1, 250));
  p->gradient_ready(0.010, push(0, 0, 250));
  p->backward_done(0.010);
  auto t = p->next(0.010, 0);
  REQUIRE(t);
  p->sent(0.010, *t);
  p->acked(0.011, *t);  // 1,000 bytes in 1 ms: 1 MB/s
  auto u = p->next(0.011, 0);
  REQUIRE(u);
  p->sent(0.011, *u);
  p->acked(0.012, *u);
  // Step 1: layer 1 ready at 1 ms, layer 0 due at 10 ms: 9 ms x 1 MB/s = 9,000 bytes = 9 slices.
  p->begin_step(1.0, 1);
  p->gradient_ready(1.001, push(1, 1, 250 * 20));
  int n = 0;
  std::int64_t in_flight = 0;
  while (auto s = p->next(1.001, in_flight)) in_flight += s->bytes(), ++n;
  CHECK(n == 9);
}

TEST_CASE("unknown policies and bad parameters are named", "[core][policy]") {
  CHECK_THROWS_WITH(make_policy({"fastest"}),
                    Catch::Contains("unknown policy 'fastest'") && Catch::Contains("p3"));
  PolicyOptions o;
  o.name = "p3";
  o.slice_params = 0;
  CHECK_THROWS_AS(make_policy(o), psbed::Error);
  CHECK_THROWS_AS(check_policy_options(o), psbed::Error);
  CHECK_THROWS_WITH(check_policy_options({"fastest"}), Catch::Contains("unknown policy 'fastest'"));
  for (const auto& name : policy_names()) CHECK_NOTHROW(check_policy_options({name}));
}
