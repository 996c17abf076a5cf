#include "predictor/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace psbed::predictor {

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  std::mutex mu;           // guards failed and error
  std::size_t failed = n;  // the lowest index whose call threw
  std::exception_ptr error;
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next++) < n;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (i > failed) return;  // every index below it was taken before it, and runs
      }
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < failed) failed = i, error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t =
           std::min<std::size_t>(std::size_t(std::max(threads, 1)), std::max<std::size_t>(n, 1));
       t > 1; --t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: those started, and this one, do the work
    }
  }
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

int worker_threads(int jobs, std::size_t tasks) {
  std::size_t want = jobs > 0 ? std::size_t(jobs) : 0;
  if (want == 0) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) want = std::size_t(CPU_COUNT(&set));
    if (want == 0) want = std::thread::hardware_concurrency();
  }
  return int(std::max<std::size_t>(1, std::min(want, tasks)));
}

}  // namespace psbed::predictor
