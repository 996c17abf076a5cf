// A worker's answers to its push-pulls (--push-pull), part by part: what a step need not pull
// again because the answers to the last step's pushes brought it back or, in bsp and ssp, will.
// One bookkeeping for the live scheduler (worker/scheduler.cpp) and the simulator's workers
// (predictor/sim/workers.cpp), so both skip the same pulls. Not thread-safe: the live scheduler
// holds its lock around every call.
#pragma once
#include <cstdint>
#include <vector>

namespace psbed {

class PushPullAnswers {
 public:
  // `await`: bsp and ssp, where a push is acknowledged before its answer, so answers still on
  // their way at a step's start are awaited instead of pulled again.
  explicit PushPullAnswers(bool await = false) : await_(await) {}

  // A push-pull of `count` floats of `part` is on its way: its answer will follow.
  void pushed(int part, std::int64_t count);
  // `count` floats of `part` came back, answering pushes of `clock`. True when the current step
  // awaits them (plan said so): they are that step's now. Otherwise they count for step
  // clock + 1 only; a later push's answers start the count again.
  bool answered(int part, std::int64_t count, std::uint64_t clock);

  struct Plan {
    std::int64_t have = 0;  // floats back already, taken by the step now
    bool pull = true;       // pull the part; when false the floats on their way are awaited
  };
  // At step `step`'s start, for a pull of a whole part of `count` floats.
  Plan plan(int part, std::int64_t count, std::uint64_t step);

 private:
  static std::int64_t& at(std::vector<std::int64_t>& v, int part);
  bool await_;
  // Per part: floats answered and not awaited, and the clock of the pushes they answer; floats
  // pushed and not answered yet; floats of those the current step awaits.
  std::vector<std::int64_t> answered_, clock_, unanswered_, awaiting_;
};

}  // namespace psbed
