// The compute thread's waits on the network, shared by the parameter-server path and the factor
// exchange (worker/sfb.hpp): when something last arrived, and per-layer counts of what is still
// to come.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace psbed::worker {

// When the servers last gave the compute thread something (a transfer completed), and whether
// that thread is waiting on them now: for a stop, which cuts a step short only once it is stuck.
class Progress {
 public:
  void moved() { last_us_ = now_us(); }
  // While one lives, the compute thread waits on the servers for `what`: a transfer, or room to
  // send one. The wait counts from its start: time spent computing is no lack of progress.
  class Waiting {
   public:
    Waiting(Progress& p, std::string what) : p_(p) {
      {
        std::lock_guard<std::mutex> lock(p_.what_mu_);
        p_.what_ = std::move(what);
      }
      p_.moved();
      ++p_.waiting_;
    }
    ~Waiting() { --p_.waiting_; }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Progress& p_;
  };
  // Waiting on the servers, and nothing came for `us` microseconds.
  bool stuck_for(double us) const {
    return waiting_.load() > 0 && now_us() - last_us_.load() >= us;
  }
  // When something last moved: one wait with nothing arriving keeps this value.
  double last_moved_us() const { return last_us_.load(); }
  std::string what() const {
    std::lock_guard<std::mutex> lock(what_mu_);
    return what_;
  }

 private:
  std::atomic<double> last_us_{0};
  mutable std::mutex what_mu_;
  std::string what_;
  std::atomic<int> waiting_{0};
};

// Counts outstanding transfers per layer and lets the compute thread wait for one layer. A wait
// also ends when `abort` says so (the coordinator shut the run down while a request was
// unanswered), so a worker never hangs on a reply that will not come.
class Arrivals {
 public:
  // `abort` returns why the wait must end, or "" to go on waiting.
  void set_abort(std::function<std::string()> abort) { abort_ = std::move(abort); }
  // Told of every arrival, and of every wait.
  void set_progress(Progress* progress) { progress_ = progress; }
  // Makes a wait look at abort() now rather than at its next tick.
  void wake() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  void reset(const std::vector<std::int64_t>& per_layer) {
    std::lock_guard<std::mutex> lock(mu_);
    remaining_ = per_layer;
    total_ = 0;
    for (auto r : per_layer) total_ += r;
  }
  void done(int layer, std::int64_t floats) {
    std::lock_guard<std::mutex> lock(mu_);
    remaining_[layer] -= floats;
    total_ -= floats;
    if (progress_) progress_->moved();
    cv_.notify_all();
  }
  void wait_layer(int layer, std::string what) {
    wait([&] { return remaining_[layer] == 0; }, std::move(what));
  }
  void wait_all(std::string what) {
    wait([&] { return total_ == 0; }, std::move(what));
  }

 private:
  template <class Pred>
  void wait(Pred ready, std::string what) {
    std::optional<Progress::Waiting> waiting;
    if (progress_) waiting.emplace(*progress_, std::move(what));
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(250), ready))
      if (abort_)
        if (const std::string why = abort_(); !why.empty())
          throw Error(why + " while waiting for the servers");
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::int64_t> remaining_;  // floats still to arrive (or be acknowledged), per layer
  std::int64_t total_ = 0;
  std::function<std::string()> abort_;
  Progress* progress_ = nullptr;
};

}  // namespace psbed::worker
