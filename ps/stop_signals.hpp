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
#include <initializer_list>
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
  int received_ = 0;        // guarded by mu_
  bool closing_ = false;    // guarded by mu_
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

// Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) as a process that supervises others
// takes them (`psbed launch`, `psbed sweep`): it passes the stop on to what it started, lets
// that wind down, and ends with what it has. The signals are blocked for as long as this lives
// and taken with wait() where the process can act on them; a handler would interrupt whatever
// the process was doing. Unlike StopSignals, SIGINT and SIGTERM are taken even where they were
// ignored at the start (a launch started with & from a script still stops on SIGINT), SIGHUP only
// where it was not (nohup): a blocked signal is queued even when ignored, so it is left out.
// Construct it before any thread starts: threads inherit the mask, and one started earlier would
// take the signals' default action.
class BlockedStopSignals {
 public:
  // Blocks SIGINT, SIGTERM, SIGHUP (if `hangup` and it is not ignored) and `extra` (launch:
  // SIGCHLD, to wake on a child's end) in this thread.
  explicit BlockedStopSignals(bool hangup = true, std::initializer_list<int> extra = {});
  // Drops the signals that came meanwhile and restores the mask: delivered on unblocking, a
  // second Ctrl-C would end the process after its work was done.
  ~BlockedStopSignals();
  BlockedStopSignals(const BlockedStopSignals&) = delete;
  BlockedStopSignals& operator=(const BlockedStopSignals&) = delete;

  // The next signal of the set (a stop or an extra) within `timeout_s` seconds, 0 if none came;
  // a negative timeout waits for one. Takes it: it is not delivered again.
  int wait(double timeout_s);
  int poll() { return wait(0); }
  bool is_stop(int sig) const;                // SIGINT, SIGTERM, or SIGHUP where it is taken
  int received() const { return received_; }  // the first stop that wait() took, 0 if none
  // The mask from before, for a child to restore between fork and exec.
  const sigset_t& old_mask() const { return old_mask_; }

 private:
  sigset_t set_{};    // stops and extras
  sigset_t stops_{};  // the stops alone
  sigset_t old_mask_{};
  int received_ = 0;
};

}  // namespace psbed::ps
