#include "core/policy_driver.hpp"

#include <utility>

#include "core/error.hpp"

namespace psbed::policy {

PolicyDriver::PolicyDriver(std::unique_ptr<Policy> policy) : policy_(std::move(policy)) {}

void PolicyDriver::set_policy(std::unique_ptr<Policy> policy) {
  if (in_flight_ != 0)
    throw Error("a policy can only be switched between steps, with nothing in flight");
  policy_ = std::move(policy);
  queued_ = 0;
}

void PolicyDriver::begin_step(double now_s, std::uint64_t step) {
  policy_->begin_step(now_s, step);
}

void PolicyDriver::parameter_needed(double now_s, const Transfer& t) {
  queued_ += t.bytes();
  policy_->parameter_needed(now_s, t);
}

void PolicyDriver::gradient_ready(double now_s, const Transfer& t) {
  queued_ += t.bytes();
  policy_->gradient_ready(now_s, t);
}

void PolicyDriver::backward_done(double now_s) { policy_->backward_done(now_s); }

void PolicyDriver::take_sends(double now_s, std::vector<Transfer>& out) {
  while (auto t = policy_->next(now_s, in_flight_)) {
    in_flight_ += t->bytes();
    queued_ -= t->bytes();
    policy_->sent(now_s, *t);
    out.push_back(*t);
  }
}

std::vector<Transfer> PolicyDriver::take_sends(double now_s) {
  std::vector<Transfer> out;
  take_sends(now_s, out);
  return out;
}

void PolicyDriver::acked(double now_s, const Transfer& t) {
  in_flight_ -= t.bytes();
  policy_->acked(now_s, t);
}

}  // namespace psbed::policy
