// Running independent pieces of work on several threads: the predictor's simulations (each
// seeded, sharing nothing) and the reading of many run folders.
#pragma once
#include <cstddef>
#include <functional>

namespace psbed::predictor {

// Calls fn(i) once for every i in [0, n), on up to `threads` threads (the calling thread among
// them), taking indices in increasing order. If calls throw, the exception of the lowest index,
// the one a loop from 0 would meet first, is rethrown once every thread has stopped; indices
// above it that had not started are skipped. With threads <= 1, a plain loop.
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

// The threads for `tasks` pieces of work: `jobs`, 0 meaning one per core this process may run on
// (its CPU affinity: a container's or taskset's share), and no more than there are tasks (at
// least 1).
int worker_threads(int jobs, std::size_t tasks);

}  // namespace psbed::predictor
