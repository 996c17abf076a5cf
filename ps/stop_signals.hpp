// SIGTERM and SIGINT ask a server or a worker to stop cleanly: `docker compose stop`,
// `kubectl delete` and a launcher stopping its run send SIGTERM, Ctrl-C sends SIGINT. The node
// then ends its work at the next safe point, says so in one line, writes its trace and exits
// with kStoppedStatus. A second signal ends the process at once: nobody is trapped. "Second"
// means arriving more than 0.5 s after the first: repeats within 0.5 s are taken for the same
// stop and dropped, because one stop often arrives twice within milliseconds (`timeout` passes
// its signal on to the node and to the node's process group; a terminal's Ctrl-C reaches the
// whole group). A signal ignored when the node started (SIG_IGN: a background job of a
// non-interactive shell ignores SIGINT, `nohup`/`trap '' TERM` likewise) stays ignored.
//
// How: the signals are blocked in every thread and taken by one thread of their own with
// sigwait. A handler would interrupt whichever thread the kernel picks, and a ZeroMQ poll
// interrupted that way fails its transport. So construct StopSignals before any other thread
// starts (threads inherit the mask); a thread started earlier would still die of the signal.
#pragma once
#include <signal.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace psbed::ps {

// The exit status of a node stopped by a signal, as `psbed launch` and `psbed sweep` use it.
constexpr int kStoppedStatus = 130;

class StopSignals {
 public:
  // Blocks SIGTERM and SIGINT (those not ignored) in this thread and starts the one that takes
  // them.
  StopSignals();
  ~StopSignals();  // restores this thread's signal mask
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Runs `fn(signal)` on the signal thread when the first signal arrives (at once if it came
  // already). Replaces an earlier one.
  void on_stop(std::function<void(int)> fn);
  // 0, or the first signal received.
  int received() const;
  // "SIGTERM", "SIGINT".
  static std::string name(int sig);

 private:
  void run();

  mutable std::mutex mu_;
  std::mutex call_mu_;  // held while on_stop's function runs: replacing it waits for that
  std::condition_variable cv_;
  int received_ = 0;     // guarded by mu_
  bool closing_ = false;  // guarded by mu_
  bool unblocked_ = false;  // the signal thread takes the signals' default action (guarded by mu_)
  std::function<void(int)> on_stop_;
  sigset_t set_{};  // the signals taken: SIGTERM and SIGINT, less those ignored at the start
  bool restore_ = false;
  sigset_t old_mask_{};
  std::thread thread_;
};

// on_stop(fn) for as long as it lives: going, it removes fn (waiting for a call of it in
// progress), so fn may use what was declared before the hook.
class StopHook {
 public:
  StopHook(StopSignals& signals, std::function<void(int)> fn) : signals_(signals) {
    signals_.on_stop(std::move(fn));
  }
  ~StopHook() { signals_.on_stop(nullptr); }
  StopHook(const StopHook&) = delete;
  StopHook& operator=(const StopHook&) = delete;

 private:
  StopSignals& signals_;
};

}  // namespace psbed::ps
