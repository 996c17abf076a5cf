// BlockedStopSignals: the stops a supervising process (launch, sweep) takes, blocked and waited
// for.
#include <signal.h>

#include <catch2/catch.hpp>

#include "ps/stop_signals.hpp"

using psbed::ps::BlockedStopSignals;

namespace {
bool blocked(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}
}  // namespace

TEST_CASE("a blocked stop is taken by wait, the first one kept, and the mask restored after",
          "[ps][signals]") {
  REQUIRE_FALSE(blocked(SIGTERM));
  {
    BlockedStopSignals stops(true, {SIGCHLD});
    CHECK(blocked(SIGTERM));
    CHECK(blocked(SIGINT));
    CHECK(blocked(SIGCHLD));
    CHECK(stops.poll() == 0);
    CHECK(stops.received() == 0);
    raise(SIGCHLD);  // an extra: returned, not a stop
    CHECK(stops.wait(1.0) == SIGCHLD);
    CHECK(stops.received() == 0);
    raise(SIGTERM);
    CHECK(stops.wait(1.0) == SIGTERM);
    CHECK(stops.is_stop(SIGTERM));
    raise(SIGINT);
    CHECK(stops.poll() == SIGINT);
    CHECK(stops.received() == SIGTERM);
    // Left pending at the end, it is dropped rather than delivered (it would end the process).
    raise(SIGTERM);
  }
  CHECK_FALSE(blocked(SIGTERM));
  CHECK_FALSE(blocked(SIGCHLD));
}

TEST_CASE("SIGHUP is a stop only where asked and not ignored", "[ps][signals]") {
  {
    BlockedStopSignals stops(false);
    CHECK_FALSE(stops.is_stop(SIGHUP));
    CHECK_FALSE(blocked(SIGHUP));
  }
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old);
  {
    BlockedStopSignals stops(true);  // nohup: a closed terminal is no stop
    CHECK_FALSE(stops.is_stop(SIGHUP));
  }
  sigaction(SIGHUP, &old, nullptr);
  BlockedStopSignals stops(true);
  CHECK(stops.is_stop(SIGHUP));
}
