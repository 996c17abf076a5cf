// The transmission scheduler: drives a core/ policy with the real clock between the training
// loop and the parameter-server client (pulls and pushes) and the factor exchange (an SFB
// layer's factors, one transfer per peer, worker/sfb.hpp). The loop reports what happens
// (parameters needed, gradients ready, backward done); whenever something changes (an event, or a
// transfer completing) the scheduler asks the policy what to send next, given the bytes in flight,
// and issues it. The asking and the counting are core/policy_driver.hpp's, which the predictor
// drives with a simulated clock; this class adds the real clock, the lock and the threads.
//
// Who sends (the rule in DESIGN.md, "a transport thread never blocks on another connection"):
// - events from the training loop send on the training thread, which may wait for room on a
//   full link (that wait is the link's back-pressure on compute);
// - completions run on transport threads, which must never wait: they only record the ack and
//   wake the scheduler's own sender thread ("ps-sched"), which asks the policy and sends.
// A completion that sent itself could wait on another shard's full queue while that shard's
// receive thread waited on this one: neither socket would be read again (p3, two shards).
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/policy.hpp"
#include "core/policy_driver.hpp"
#include "core/push_pull_answers.hpp"
#include "core/trace.hpp"
#include "ps/client.hpp"

namespace psbed::worker {

class TransmissionScheduler {
 public:
  // Where a transfer's floats live: pulls write there, pushes read from there.
  using Buffer = std::function<float*(const policy::Transfer&)>;
  // Runs on a transport thread: must not block. `clock` is the one the transfer was sent with.
  using Done = std::function<void(const policy::Transfer&, double started_us, std::uint64_t clock)>;

  // Sends one peer's factors (policy::Direction::kFactors) of the step `clock`; `left` runs when
  // their bytes have left the link, maybe on a transport thread, maybe before this returns.
  using SendFactors =
      std::function<void(const policy::Transfer&, std::uint64_t clock, std::function<void()> left)>;

  TransmissionScheduler(ps::PsClient& client, std::unique_ptr<policy::Policy> policy, Buffer buffer,
                        Done done);
  // Stops the sender thread. One waiting for room on a full link is released by stopping the
  // client first (ps::PsClient::stop), which this does only if the sender is mid-send.
  ~TransmissionScheduler();
  TransmissionScheduler(const TransmissionScheduler&) = delete;
  TransmissionScheduler& operator=(const TransmissionScheduler&) = delete;

  const policy::Policy& policy() const { return driver_.policy(); }
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
  // Where the bytes waiting for the policy's leave go, as a counter track (set before sending).
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  // Before the first step that hands over factor transfers.
  void set_factor_sender(SendFactors send) { send_factors_ = std::move(send); }
  // Runs on a transport thread when an awaited answer arrives (still_to_pull): its layer and
  // floats. Must not block.
  using Answered = std::function<void(int layer, std::int64_t floats)>;
  // Before the first step (--push-pull): pushes go as push-pulls (ps::PsClient::push_pull), whose
  // answers write the updated floats where `answers` says (the parameters behind the gradient).
  // A push counts as done at the shard's ack (bsp, ssp: the answer waits for the clock) or at
  // its answer. With `await_answers` (bsp, ssp) answers still on their way at a step's start are
  // awaited rather than pulled again (still_to_pull), and reach `answered` as they arrive.
  void set_push_pull(Buffer answers, bool await_answers = false, Answered answered = nullptr) {
    answers_ = std::move(answers), on_answered_ = std::move(answered);
    push_pull_ = PushPullAnswers(await_answers);
  }
  // At step `step`'s start, before need(): of `wanted` (whole parts' pulls), those still to pull.
  // --push-pull: a part whose floats all came back in the answers to the last step's pushes is
  // not, nor (with await_answers) one whose floats are back or on their way; `have` gets the
  // floats back (a part's layer and count), and the Answered callback the rest as it arrives.
  std::vector<policy::Transfer> still_to_pull(
      const std::vector<policy::Transfer>& wanted, std::uint64_t step,
      const std::function<void(int layer, std::int64_t floats)>& have);

 private:
  // Asks the policy for everything it will send now; issues it outside the lock (a send may
  // wait on a full link, and completions take the lock). Never called on a transport thread.
  void pump();
  void complete(const policy::Transfer& t, double started_us, std::uint64_t clock);
  void trace_queue_locked();
  void send_loop();

  ps::PsClient& client_;
  Buffer buffer_;
  Buffer answers_;  // --push-pull: where a push's answer goes; empty: pushes are acknowledged
  Answered on_answered_;
  void answered(const policy::Transfer& t, std::uint64_t clock);
  Done done_;
  SendFactors send_factors_;
  TraceRecorder* trace_ = nullptr;
  std::mutex mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false, stopping_ = false, sending_ = false;  // under mu_
  policy::PolicyDriver driver_;                             // under mu_
  std::uint64_t clock_ = 0;
  PushPullAnswers push_pull_;  // under mu_ (--push-pull): the floats a step need not pull again
  std::thread sender_;
};

}  // namespace psbed::worker
