// The threads that deliver received messages (a ZeroMQ transport's owner thread, a shaped link's
// delivery thread) must never wait on a send: while one waits, its connection is read by nobody,
// and a peer waiting on that connection may be what the send waits for (DESIGN.md, "a transport
// thread never blocks on another connection"). Those threads mark themselves; a call that may
// wait for room on a link asks assert_may_block() first.
#pragma once

namespace psbed::ps::transport_thread {

// While one lives, the current thread is a transport thread.
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool was_;
};

bool current();

// A transport thread here is a bug. Debug builds (and any build with PSBED_STRICT_THREADS=1 in
// the environment, as the stress tests run) abort naming `what`; release builds log it once.
void assert_may_block(const char* what);

}  // namespace psbed::ps::transport_thread
