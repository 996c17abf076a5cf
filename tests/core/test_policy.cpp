// Each policy on scripted event sequences: the exact send order it must produce.
#include <catch2/catch.hpp>

#include <vector>

#include "core/error.hpp"
#include "core/policy.hpp"

using namespace psbed::policy;

namespace {

Transfer push(int part, int layer, std::int64_t count) { return {Direction::kPush, part, layer, 0, count}; }
Transfer pull(int part, int layer, std::int64_t count) { return {Direction::kPull, part, layer, 0, count}; }

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

TEST_CASE("wfbp sends each gradient as soon as it is ready, first come first served", "[core][policy]") {
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

TEST_CASE("p3 sends a newly ready layer-1 slice before the remaining layer-9 slices once the credit drains",
          "[core][policy]") {
  PolicyOptions o;
  o.name = "p3";
  o.slice_params = 1000;       // 4,000-byte slices
  o.credit_bytes = 8000;       // two slices in flight
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

TEST_CASE("bytescheduler partitions with its default credit of 4,000,000 parameters", "[core][policy]") {
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

TEST_CASE("unknown policies and bad parameters are named", "[core][policy]") {
  CHECK_THROWS_WITH(make_policy({"fastest"}), Catch::Contains("unknown policy 'fastest'") && Catch::Contains("p3"));
  PolicyOptions o;
  o.name = "p3";
  o.slice_params = 0;
  CHECK_THROWS_AS(make_policy(o), psbed::Error);
}
