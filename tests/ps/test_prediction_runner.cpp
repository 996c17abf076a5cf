// /api/prediction's computations away from the thread that asks: the caller is never held up by
// a slow one, requests for the same configuration share one, another configuration waits its
// turn, and a failure is answered as one.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "ps/prediction_runner.hpp"

using namespace psbed::ps;

TEST_CASE("a prediction runs on a thread of its own, once per configuration", "[ps][http]") {
  PredictionRunner runner;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int computed = 0;
  auto slow = [&] {
    std::unique_lock<std::mutex> lock(mu);
    ++computed;
    cv.wait(lock, [&] { return release; });
    return 42.0;
  };
  std::promise<double> first, second;
  auto to = [](std::promise<double>& p) {
    return [&p](std::optional<double> f, const std::string&) { p.set_value(f.value_or(-1)); };
  };
  // The caller goes on at once while the computation waits.
  REQUIRE(runner.request("a", slow, to(first)));
  REQUIRE(runner.request("a", slow, to(second)));  // the same configuration: waits for it
  CHECK_FALSE(runner.request("b", slow, [](std::optional<double>, const std::string&) {}));
  auto f1 = first.get_future(), f2 = second.get_future();
  CHECK(f1.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  CHECK(f1.get() == 42.0);
  CHECK(f2.get() == 42.0);
  // Known now: answered at once, not computed again.
  std::optional<double> again;
  REQUIRE(
      runner.request("a", slow, [&](std::optional<double> f, const std::string&) { again = f; }));
  CHECK(again == 42.0);
  CHECK(computed == 1);
  // A failure is answered with its reason, and the next request tries again.
  std::promise<std::string> failed;
  REQUIRE(runner.request(
      "c", []() -> double { throw psbed::Error("no such model"); },
      [&](std::optional<double> f, const std::string& e) { failed.set_value(f ? "" : e); }));
  CHECK(failed.get_future().get() == "no such model");
}
