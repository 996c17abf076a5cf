#include "ps/transport_thread.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace psbed::ps::transport_thread {
namespace {
thread_local bool marked = false;

bool strict() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("PSBED_STRICT_THREADS");  // only on the way to a violation
  return v != nullptr && std::strcmp(v, "1") == 0;
#endif
}
}  // namespace

Scope::Scope() : was_(marked) { marked = true; }
Scope::~Scope() { marked = was_; }

bool current() { return marked; }

void assert_may_block(const char* what) {
  if (!marked) return;
  char name[16] = "?";
  pthread_getname_np(pthread_self(), name, sizeof name);
  if (strict()) {
    spdlog::critical("{} on transport thread {}: a transport thread must never wait on a send",
                     what, name);
    std::abort();
  }
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    spdlog::error(
        "{} on transport thread {}: a transport thread must never wait on a send (logged once)",
        what, name);
}

}  // namespace psbed::ps::transport_thread
