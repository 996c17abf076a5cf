#include "worker/scheduler.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "ps/transport_thread.hpp"

namespace psbed::worker {

using policy::Direction;
using policy::Transfer;

namespace {
double now_s() { return now_us() / 1e6; }
}  // namespace

TransmissionScheduler::TransmissionScheduler(ps::PsClient& client,
                                             std::unique_ptr<policy::Policy> policy, Buffer buffer,
                                             Done done)
    : client_(client),
      buffer_(std::move(buffer)),
      done_(std::move(done)),
      driver_(std::move(policy)),
      sender_([this] { send_loop(); }) {}

TransmissionScheduler::~TransmissionScheduler() {
  bool mid_send;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    mid_send = sending_;
  }
  wake_cv_.notify_all();
  // A send waiting for room on a link nobody drains (a shard gone) would never return.
  if (mid_send) client_.stop();
  sender_.join();
}

void TransmissionScheduler::set_policy(std::unique_ptr<policy::Policy> policy) {
  std::lock_guard<std::mutex> lock(mu_);
  driver_.set_policy(std::move(policy));  // refused with anything in flight
}

void TransmissionScheduler::begin_step(std::uint64_t step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    clock_ = step;
    driver_.begin_step(now_s(), step);
  }
  pump();
}

void TransmissionScheduler::need(const std::vector<Transfer>& parts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_s();
    for (const Transfer& t : parts) driver_.parameter_needed(now, t);
  }
  pump();
}

void TransmissionScheduler::ready(const std::vector<Transfer>& parts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_s();
    for (const Transfer& t : parts) driver_.gradient_ready(now, t);
  }
  pump();
}

void TransmissionScheduler::backward_done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    driver_.backward_done(now_s());
  }
  pump();
}

std::int64_t TransmissionScheduler::bytes_in_flight() {
  std::lock_guard<std::mutex> lock(mu_);
  return driver_.bytes_in_flight();
}

void TransmissionScheduler::pump() {
  ps::transport_thread::assert_may_block("the transmission scheduler's pump");
  std::vector<Transfer> go;
  std::uint64_t clock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    trace_queue_locked();  // the depth it reached, then what is left
    driver_.take_sends(now_s(), go);
    clock = clock_;
    trace_queue_locked();
  }
  for (const Transfer& t : go) {
    const double t0 = now_us();
    auto cb = [this, t, t0, clock] { complete(t, t0, clock); };
    if (t.dir == Direction::kFactors) {
      if (!send_factors_)
        throw Error("factor transfers handed to a scheduler with no factor sender");
      send_factors_(t, clock, cb);
    } else if (t.dir == Direction::kPull)
      client_.pull(t.part, buffer_(t), t.offset, t.count, clock, t.layer, cb);
    else if (answers_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        push_pull_.pushed(t.part, t.count);
      }
      client_.push_pull(t.part, buffer_(t), answers_(t), t.offset, t.count, clock, t.layer, cb,
                        [this, t, clock] { answered(t, clock); });
    } else
      client_.push(t.part, buffer_(t), t.offset, t.count, clock, t.layer, cb);
  }
}

std::vector<Transfer> TransmissionScheduler::still_to_pull(
    const std::vector<Transfer>& wanted, std::uint64_t step,
    const std::function<void(int layer, std::int64_t floats)>& have) {
  if (!answers_) return wanted;
  std::vector<Transfer> pull;
  std::vector<std::pair<int, std::int64_t>> back;  // handed to `have` outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Transfer& t : wanted) {
      const PushPullAnswers::Plan plan = push_pull_.plan(t.part, t.count, step);
      if (plan.pull)
        pull.push_back(t);
      else
        back.emplace_back(t.layer, plan.have);
    }
  }
  for (const auto& [layer, floats] : back) have(layer, floats);
  return pull;
}

void TransmissionScheduler::answered(const policy::Transfer& t, std::uint64_t clock) {
  bool awaited = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    awaited = push_pull_.answered(t.part, t.count, clock);
  }
  if (awaited && on_answered_) on_answered_(t.layer, t.count);
}

void TransmissionScheduler::complete(const Transfer& t, double started_us, std::uint64_t clock) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    driver_.acked(now_s(), t);
    wake_ = true;
  }
  wake_cv_.notify_one();
  done_(t, started_us, clock);
}

// Sampled around each time the policy lets transfers go: the queue grows only between pumps,
// so the samples show how deep it got and what each leave left.
void TransmissionScheduler::trace_queue_locked() {
  if (trace_ == nullptr || !trace_->enabled()) return;
  const double now = now_us();
  trace_->counter("bytes queued", "policy", now, double(driver_.bytes_queued()));
  trace_->counter("bytes in flight", "policy", now, double(driver_.bytes_in_flight()));
}

void TransmissionScheduler::send_loop() {
  pthread_setname_np(pthread_self(), "ps-sched");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_cv_.wait(lock, [&] { return wake_ || stopping_; });
    if (stopping_) return;
    wake_ = false;
    sending_ = true;
    lock.unlock();
    try {
      pump();
    } catch (const std::exception& e) {
      // As on the transport thread that used to pump: one transfer's failure is logged, and the
      // wait for it ends with the run (a stop, or the coordinator's).
      spdlog::error("sending the next transfers failed: {}", e.what());
    }
    lock.lock();
    sending_ = false;
  }
}

}  // namespace psbed::worker
