// The loop around a transmission policy, written once for the live worker (real clock, its own
// threads) and the predictor's simulator (simulated clock): hand the policy what happened, ask
// it what to send given the bytes in flight, count what leaves until it is acknowledged.
//
// The driver reads no clock, takes no lock and sends nothing: the caller passes the time, holds
// whatever lock it needs around every call, and issues the transfers take_sends() returns, in
// that order, each exactly as returned (a slice of a part is sent as that range). Both callers
// therefore see the same decisions for the same events, which is what lets the simulator
// predict the worker.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/policy.hpp"

namespace psbed::policy {

class PolicyDriver {
 public:
  explicit PolicyDriver(std::unique_ptr<Policy> policy);

  const Policy& policy() const { return *policy_; }
  // Between steps only: a new policy starts on a clean slate, so nothing may be in flight.
  // Throws psbed::Error otherwise.
  void set_policy(std::unique_ptr<Policy> policy);
  std::int64_t bytes_in_flight() const { return in_flight_; }
  // Bytes handed over (needed or ready) and not yet let go by the policy.
  std::int64_t bytes_queued() const { return queued_; }

  // What happens in a step, in the order the worker lives it. Everything that happens at one
  // moment is handed over before take_sends(): a policy that orders what is pending
  // (tf-random's shuffle, p3's priorities) then sees all of it.
  void begin_step(double now_s, std::uint64_t step);
  void parameter_needed(double now_s, const Transfer& t);
  void gradient_ready(double now_s, const Transfer& t);
  void backward_done(double now_s);

  // Everything the policy lets go now, in the order to issue it: each transfer is already
  // counted in flight and reported sent to the policy. Appends to `out` (a caller's scratch
  // list keeps its capacity); the other form returns a fresh list.
  void take_sends(double now_s, std::vector<Transfer>& out);
  std::vector<Transfer> take_sends(double now_s);
  // A transfer returned by take_sends() completed (a pull's reply arrived, a push was
  // acknowledged): it leaves the bytes in flight. Ask take_sends() again afterwards.
  void acked(double now_s, const Transfer& t);

 private:
  std::unique_ptr<Policy> policy_;
  std::int64_t in_flight_ = 0;
  std::int64_t queued_ = 0;
};

}  // namespace psbed::policy
