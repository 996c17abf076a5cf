#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "predictor/parallel.hpp"

using namespace psbed::predictor;

TEST_CASE("parallel_for calls every index once, on as many threads as asked",
          "[predictor][parallel]") {
  for (int threads : {1, 2, 7, 64}) {
    std::vector<std::atomic<int>> calls(100);
    parallel_for(calls.size(), threads, [&](std::size_t i) { ++calls[i]; });
    for (const auto& c : calls) CHECK(c.load() == 1);
  }
  int none = 0;
  parallel_for(0, 4, [&](std::size_t) { ++none; });
  CHECK(none == 0);
}

TEST_CASE("parallel_for rethrows the lowest failing index's error, as a loop would meet it",
          "[predictor][parallel]") {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> below{0};
    CHECK_THROWS_WITH(parallel_for(200, 4,
                                   [&](std::size_t i) {
                                     if (i == 150 || i == 37)
                                       throw std::runtime_error("bad " + std::to_string(i));
                                     if (i < 37) ++below;
                                   }),
                      "bad 37");
    CHECK(below.load() == 37);  // every index below the failing one ran
  }
}

TEST_CASE("worker_threads: the jobs asked for, at most one per task", "[predictor][parallel]") {
  CHECK(worker_threads(3, 100) == 3);
  CHECK(worker_threads(8, 2) == 2);
  CHECK(worker_threads(5, 0) == 1);
  CHECK(worker_threads(0, 1000) >= 1);  // one per core this process may use
}
