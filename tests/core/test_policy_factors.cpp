// Every policy with sufficient-factor transfers (Direction::kFactors) beside the shard traffic:
// ordered by layer like a push, never sliced, counted in the credit until acknowledged.
#include <catch2/catch.hpp>
#include <vector>

#include "core/policy.hpp"
#include "core/policy_driver.hpp"
#include "transfers.hpp"

using namespace psbed::policy;

namespace {

// Everything the policy lets go with the link idle before each ask (prophet answers nothing once
// when a block is full, and opens the next on the following ask).
std::vector<Transfer> drain_all(Policy& p) {
  std::vector<Transfer> out;
  for (int idle = 0; idle < 2;)
    if (auto t = p.next(0, 0))
      out.push_back(*t), idle = 0;
    else
      ++idle;
  return out;
}

PolicyOptions options(const std::string& name) {
  PolicyOptions o;
  o.name = name;
  o.slice_params = 1000;  // p3, prophet: 4,000-byte slices
  o.partition_params = 1000;
  o.credit_bytes = 8000;
  return o;
}

}  // namespace

TEST_CASE("every policy sends a peer's factors whole, once, exactly as handed over",
          "[core][policy][factors]") {
  for (const std::string& name : policy_names()) {
    INFO(name);
    auto p = make_policy(options(name));
    p->begin_step(0, 0);
    // Layer 5's factors for peers 2 and 3, far above any slice size, then a push of layer 1.
    p->gradient_ready(0.001, factors(2, 5, 50000));
    p->gradient_ready(0.001, factors(3, 5, 50000));
    p->gradient_ready(0.002, push(0, 1, 3000));
    p->backward_done(0.003);
    std::vector<Transfer> sent = drain_all(*p);
    int whole = 0;
    std::int64_t push_floats = 0;
    for (const Transfer& t : sent) {
      if (t.dir == Direction::kFactors) {
        CHECK(t.count == 50000);
        CHECK(t.offset == 0);
        ++whole;
      } else {
        push_floats += t.count;
      }
    }
    CHECK(whole == 2);
    CHECK(push_floats == 3000);
    // The peers keep the order they were handed over in.
    std::vector<int> peers;
    for (const Transfer& t : sent)
      if (t.dir == Direction::kFactors) peers.push_back(t.part);
    CHECK(peers == std::vector<int>{2, 3});
  }
}

TEST_CASE("wfbp and bulk order factors with the pushes as they came and as backward ends",
          "[core][policy][factors]") {
  auto wfbp = make_policy(options("wfbp"));
  wfbp->gradient_ready(0, factors(1, 5, 100));
  wfbp->gradient_ready(0, push(0, 1, 100));
  auto order = drain_all(*wfbp);
  REQUIRE(order.size() == 2);
  CHECK(order[0].dir == Direction::kFactors);  // first come, first served
  CHECK(order[1].dir == Direction::kPush);

  auto bulk = make_policy(options("bulk"));
  bulk->gradient_ready(0, factors(1, 5, 100));
  CHECK_FALSE(bulk->next(0, 0));  // held until backward ends, like a gradient
  bulk->gradient_ready(0, push(0, 1, 100));
  bulk->backward_done(0);
  order = drain_all(*bulk);
  REQUIRE(order.size() == 2);
  CHECK(order[0].layer == 5);  // last layer first
  CHECK(order[1].layer == 1);

  auto tf = make_policy(options("tf-random"));
  tf->parameter_needed(0, pull(0, 0, 10));
  tf->gradient_ready(0, factors(1, 5, 100));
  order = drain_all(*tf);
  REQUIRE(order.size() == 2);
  CHECK(order[0].dir == Direction::kPull);  // pulls first, as for pushes
  CHECK(order[1].dir == Direction::kFactors);
}

TEST_CASE("p3 and bytescheduler put factors in layer order and hold them to the credit",
          "[core][policy][factors]") {
  for (const std::string name : {"p3", "bytescheduler"}) {
    INFO(name);
    PolicyDriver d(make_policy(options(name)));  // credit 8,000 bytes
    d.begin_step(0, 0);
    // Backward: the fc layer's factors (layer 5, 6,000 bytes) first, then a conv push (layer 1).
    d.gradient_ready(0, factors(1, 5, 1500));
    d.gradient_ready(0, factors(2, 5, 1500));
    d.gradient_ready(0, push(0, 1, 3000));  // 3 slices of 4,000 bytes
    auto go = d.take_sends(0);
    // Layer 1 first, two slices fill the credit; the factors wait.
    REQUIRE(go.size() == 2);
    CHECK(go[0].layer == 1);
    CHECK(go[1].layer == 1);
    CHECK(d.bytes_in_flight() == 8000);
    d.acked(1, go[0]);
    go = d.take_sends(1);
    REQUIRE(go.size() == 1);  // the last slice of layer 1 before any factors
    CHECK(go[0].layer == 1);
    d.acked(2, go[0]);
    go = d.take_sends(2);
    REQUIRE(go.size() == 0);  // 4,000 in flight + 6,000 of factors exceed the credit
    d.acked(3, Transfer{Direction::kPush, 0, 1, 1000, 1000});
    go = d.take_sends(3);
    // An idle link takes the next whole message, whatever its size; the second waits for it.
    REQUIRE(go.size() == 1);
    CHECK(go[0].dir == Direction::kFactors);
    CHECK(go[0].part == 1);
    CHECK(d.bytes_in_flight() == 6000);
    d.acked(4, go[0]);  // its bytes left the link
    go = d.take_sends(4);
    REQUIRE(go.size() == 1);
    CHECK(go[0].part == 2);
    d.acked(5, go[0]);
    CHECK(d.bytes_in_flight() == 0);
    CHECK(d.bytes_queued() == 0);
  }
}

TEST_CASE("prophet learns when factors become ready and counts their bytes toward bandwidth",
          "[core][policy][factors]") {
  PolicyOptions o = options("prophet");
  o.credit_bytes = 1000000;
  auto p = make_policy(o);
  p->begin_step(0, 0);
  // Step 0: the factors (layer 5) are ready at 1 ms and take 10 ms to leave: 4,000 bytes in
  // 10 ms is 400 kB/s. Layer 1's push is ready at 11 ms.
  p->gradient_ready(0.001, factors(1, 5, 1000));
  auto t = p->next(0.001, 0);
  REQUIRE(t);
  CHECK(t->dir == Direction::kFactors);
  p->sent(0.001, *t);
  p->acked(0.011, *t);
  p->gradient_ready(0.011, push(0, 1, 1000));
  p->backward_done(0.011);
  auto u = p->next(0.011, 0);
  REQUIRE(u);
  p->sent(0.011, *u);
  p->acked(0.021, *u);
  // Step 1: at 1 ms, layer 1 is due in 10 ms: a block of 10 ms x 400 kB/s = 4,000 bytes. Two
  // peers' factors of 4,000 bytes each: the first opens the block, the second waits for it.
  p->begin_step(1.0, 1);
  p->gradient_ready(1.001, factors(1, 5, 1000));
  p->gradient_ready(1.001, factors(2, 5, 1000));
  std::int64_t in_flight = 0;
  std::vector<Transfer> block;
  while (auto s = p->next(1.001, in_flight)) block.push_back(*s), in_flight += s->bytes();
  REQUIRE(block.size() == 1);
  CHECK(block[0].part == 1);
  CHECK(block[0].count == 1000);  // whole
}
