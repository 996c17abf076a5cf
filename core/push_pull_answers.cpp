#include "core/push_pull_answers.hpp"

#include <cstddef>
#include <string>

#include "core/error.hpp"

namespace psbed {

std::int64_t& PushPullAnswers::at(std::vector<std::int64_t>& v, int part) {
  if (part < 0) throw Error("push-pull answers: part " + std::to_string(part) + ", expected >= 0");
  if (std::size_t(part) >= v.size()) v.resize(std::size_t(part) + 1, 0);
  return v[std::size_t(part)];
}

void PushPullAnswers::pushed(int part, std::int64_t count) { at(unanswered_, part) += count; }

bool PushPullAnswers::answered(int part, std::int64_t count, std::uint64_t clock) {
  at(unanswered_, part) -= count;
  std::int64_t& waits = at(awaiting_, part);
  if (waits > 0) {
    waits -= count;
    return true;
  }
  std::int64_t& when = at(clock_, part);
  std::int64_t& got = at(answered_, part);
  if (when != std::int64_t(clock)) when = std::int64_t(clock), got = 0;
  got += count;
  return false;
}

PushPullAnswers::Plan PushPullAnswers::plan(int part, std::int64_t count, std::uint64_t step) {
  // Only the answers to last step's pushes hold what this step pulls.
  std::int64_t& back = at(answered_, part);
  const std::int64_t got = at(clock_, part) + 1 == std::int64_t(step) ? back : 0;
  back = 0;
  if (got >= count) return {count, false};
  const std::int64_t coming = at(unanswered_, part);
  if (await_ && got + coming >= count) {
    at(awaiting_, part) = coming;
    return {got, false};
  }
  return {0, true};
}

}  // namespace psbed
