// PushPullAnswers: which pulls a step skips because its pushes' answers brought the floats back,
// hand-counted.
#include <catch2/catch.hpp>

#include "core/push_pull_answers.hpp"

using psbed::PushPullAnswers;

namespace psbed {
// Found by argument-dependent lookup from Catch's comparisons.
bool operator==(const PushPullAnswers::Plan& a, const PushPullAnswers::Plan& b) {
  return a.have == b.have && a.pull == b.pull;
}
}  // namespace psbed

namespace {
const PushPullAnswers::Plan kPullIt{0, true};
}  // namespace

TEST_CASE("push-pull answers: a part answered whole at the last step is not pulled",
          "[push-pull][core]") {
  PushPullAnswers a;                    // async: nothing is awaited
  CHECK(a.plan(3, 100, 0) == kPullIt);  // nothing pushed yet
  a.pushed(3, 60), a.pushed(3, 40);     // step 0 pushes part 3 in two slices
  CHECK_FALSE(a.answered(3, 60, 0));
  CHECK_FALSE(a.answered(3, 40, 0));
  CHECK(a.plan(3, 100, 1) == PushPullAnswers::Plan{100, false});
  // The count is used once: step 2 pulls unless step 1's pushes were answered too.
  CHECK(a.plan(3, 100, 2) == kPullIt);
}

TEST_CASE("push-pull answers: only the last step's pushes count", "[push-pull][core]") {
  PushPullAnswers a;
  a.pushed(0, 100);
  CHECK_FALSE(a.answered(0, 100, 4));   // answers pushes of step 4
  CHECK(a.plan(0, 100, 6) == kPullIt);  // step 6 needs step 5's
  a.pushed(0, 100), a.pushed(0, 100);   // a part answered half by one clock, half by the next
  CHECK_FALSE(a.answered(0, 50, 6));
  CHECK_FALSE(a.answered(0, 50, 7));    // starts the count again: 50 of step 7
  CHECK(a.plan(0, 100, 8) == kPullIt);  // 50 of 100 back, and async awaits nothing
  // A part whose answers are all back and another of the wrong clock, side by side.
  a.pushed(1, 10), a.pushed(2, 10);
  CHECK_FALSE(a.answered(1, 10, 8));
  CHECK_FALSE(a.answered(2, 10, 7));
  CHECK(a.plan(1, 10, 9) == PushPullAnswers::Plan{10, false});
  CHECK(a.plan(2, 10, 9) == kPullIt);
}

TEST_CASE("push-pull answers: bsp awaits answers on their way", "[push-pull][core]") {
  PushPullAnswers a(true);
  a.pushed(5, 30), a.pushed(5, 70);   // step 2's pushes of part 5, acknowledged
  CHECK_FALSE(a.answered(5, 30, 2));  // 30 came back before step 3 began
  // Step 3: 30 back, 70 on their way: not pulled, the 70 awaited.
  CHECK(a.plan(5, 100, 3) == PushPullAnswers::Plan{30, false});
  CHECK(a.answered(5, 70, 2));  // the step's: handed to it as they arrive
  // Nothing back and nothing on its way: pulled.
  CHECK(a.plan(5, 100, 4) == kPullIt);
  // On their way but too few (a part pushed in part): pulled, and the answers that come later
  // are not the step's.
  a.pushed(6, 40);
  CHECK(a.plan(6, 100, 4) == kPullIt);
  CHECK_FALSE(a.answered(6, 40, 3));
  CHECK(a.plan(6, 100, 5) == kPullIt);  // 40 of step 3: not step 4's pushes
}
