// The transmission scheduler: drives a core/ policy with the real clock between the training
// loop and the parameter-server client. The loop reports what happens (parameters needed,
// gradients ready, backward done); whenever something changes (an event, or a transfer
// completing) the scheduler asks the policy what to send next, given the bytes in flight, and
// issues it. The predictor drives the same policy objects with a simulated clock.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/policy.hpp"
#include "ps/client.hpp"

namespace psbed::worker {

class TransmissionScheduler {
 public:
  // Where a transfer's floats live: pulls write there, pushes read from there.
  using Buffer = std::function<float*(const policy::Transfer&)>;
  using Done = std::function<void(const policy::Transfer&, double started_us)>;

  TransmissionScheduler(ps::PsClient& client, std::unique_ptr<policy::Policy> policy, Buffer buffer,
                        Done done);

  const policy::Policy& policy() const { return *policy_; }
  // Between steps only (nothing in flight): the live policy switch.
  void set_policy(std::unique_ptr<policy::Policy> policy);
  void begin_step(std::uint64_t step);
  // Parameter parts needed for the current step's clock, and gradient parts of the current step.
  // Everything that happens at one moment is handed over together before the policy is asked
  // what to send: a policy that orders what is pending (tf-random's shuffle, p3's priorities)
  // then sees all of it, as the simulator shows it all at once.
  void need(const std::vector<policy::Transfer>& parts);
  void ready(const std::vector<policy::Transfer>& parts);
  void backward_done();
  std::int64_t bytes_in_flight();

 private:
  // Asks the policy for everything it will send now; issues it outside the lock (a send may
  // block on a full link, and completions, which run on transport threads, take the lock).
  void pump();
  void complete(const policy::Transfer& t, double started_us);

  ps::PsClient& client_;
  std::unique_ptr<policy::Policy> policy_;
  Buffer buffer_;
  Done done_;
  std::mutex mu_;
  std::int64_t in_flight_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace psbed::worker
