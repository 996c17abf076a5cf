#include "ps/stop_signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <ctime>

namespace psbed::ps {
namespace {

constexpr std::chrono::nanoseconds kRepeatGrace = std::chrono::milliseconds(500);

// SIGTERM and SIGINT, less any set to be ignored when the node started (a shell's background
// job ignores SIGINT, nohup and `trap '' TERM` their own): those stay ignored, as they would
// have been without this class. They must be left out, not just left alone: a blocked signal is
// queued even when ignored, and sigwait would take it.
sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_IGN)
      continue;
    sigaddset(&set, sig);
  }
  return set;
}

bool empty(const sigset_t& set) {
  return sigismember(&set, SIGTERM) != 1 && sigismember(&set, SIGINT) != 1;
}

}  // namespace

StopSignals::StopSignals() : set_(stop_set()) {
  // Both ignored: nothing to take, and a sigwait on no signal would never return.
  if (empty(set_)) return;
  restore_ = pthread_sigmask(SIG_BLOCK, &set_, &old_mask_) == 0;
  thread_ = std::thread([this] { run(); });
}

StopSignals::~StopSignals() {
  if (!thread_.joinable()) return;  // both signals ignored: no thread
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    wake = !unblocked_;
  }
  cv_.notify_all();
  // Still waiting for a signal (or dropping repeats): wake it with one aimed at it alone, which
  // it drops. Once it has unblocked the signals, this would end the process instead.
  // (One it takes: an ignored signal would not wake it.)
  if (wake)
    pthread_kill(thread_.native_handle(), sigismember(&set_, SIGTERM) == 1 ? SIGTERM : SIGINT);
  thread_.join();
  if (restore_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void StopSignals::run() {
  pthread_setname_np(pthread_self(), "ps-signals");
  const sigset_t set = set_;
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  {
    std::lock_guard<std::mutex> call(call_mu_);
    std::function<void(int)> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) return;
      received_ = sig;
      fn = on_stop_;
    }
    if (fn) fn(sig);
  }
  // One stop can arrive more than once within milliseconds: `timeout` passes its signal on to
  // the node and to the node's process group, a terminal to the whole group. Repeats within
  // kRepeatGrace are that one, and dropped.
  const auto until = std::chrono::steady_clock::now() + kRepeatGrace;
  for (auto left = kRepeatGrace; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::nanoseconds>(
           until - std::chrono::steady_clock::now())) {
    const timespec ts{time_t(left.count() / 1000000000), long(left.count() % 1000000000)};
    siginfo_t info;
    (void)sigtimedwait(&set, &info, &ts);
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
  }
  // From now on this thread alone takes the signals, with their default action: another one
  // ends the process at once.
  std::unique_lock<std::mutex> lock(mu_);
  if (closing_) return;
  unblocked_ = true;
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  cv_.wait(lock, [&] { return closing_; });
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void StopSignals::on_stop(std::function<void(int)> fn) {
  std::lock_guard<std::mutex> call(call_mu_);
  int sig;
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_stop_ = fn;
    sig = received_;
  }
  if (sig != 0 && fn) fn(sig);
}

int StopSignals::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

BlockedStopSignals::BlockedStopSignals(bool hangup, std::initializer_list<int> extra) {
  sigemptyset(&stops_);
  sigaddset(&stops_, SIGINT);
  sigaddset(&stops_, SIGTERM);
  struct sigaction hup {};
  if (hangup && sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN)
    sigaddset(&stops_, SIGHUP);
  set_ = stops_;
  for (int sig : extra) sigaddset(&set_, sig);
  pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
}

BlockedStopSignals::~BlockedStopSignals() {
  timespec zero{0, 0};
  siginfo_t info;
  while (sigtimedwait(&set_, &info, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

int BlockedStopSignals::wait(double timeout_s) {
  siginfo_t info;
  int sig;
  if (timeout_s < 0) {
    sig = sigwaitinfo(&set_, &info);
  } else {
    const timespec ts{time_t(timeout_s), long((timeout_s - double(time_t(timeout_s))) * 1e9)};
    sig = sigtimedwait(&set_, &info, &ts);
  }
  if (sig <= 0) return 0;
  if (received_ == 0 && is_stop(sig)) received_ = sig;
  return sig;
}

bool BlockedStopSignals::is_stop(int sig) const {
  return sig > 0 && sigismember(&stops_, sig) == 1;
}

std::string StopSignals::name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace psbed::ps
