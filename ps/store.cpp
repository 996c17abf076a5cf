#include "ps/store.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/param_init.hpp"
#include "ps/copy_counter.hpp"

namespace psbed::ps {

Store::Store(const ClusterMap& map, int shard)
    : mode_(map.exp.mode),
      sgd_(map.exp.sgd),
      schedule_(map.exp.lr_schedule),
      steps_(map.exp.steps),
      workers_(int(map.workers.size())),
      alive_(new std::atomic<bool>[map.workers.size()]) {
  for (int w = 0; w < workers_; ++w) alive_[w] = true;
  std::map<int, std::vector<float>> full;  // whole-tensor initial values, computed once per key
  for (const Part& p : map.plan.parts) {
    if (p.shard != shard) continue;
    auto it = full.find(p.key);
    if (it == full.end()) {
      std::vector<float> v(map.spec.tensors[p.key].numel);
      init_tensor(map.spec, p.key, map.exp.seed, v.data());
      it = full.emplace(p.key, std::move(v)).first;
    }
    PartState s;
    s.part = p;
    s.current = std::make_shared<std::vector<float>>(it->second.begin() + p.offset,
                                                     it->second.begin() + p.offset + p.numel);
    s.velocity.assign(p.numel, 0.0f);
    s.completed.assign(workers_, 0);
    owned_.emplace(std::make_pair(p.key, p.part), std::move(s));
  }
}

bool Store::owns(int key, int part) const { return owned_.count({key, part}) > 0; }

PartState& Store::state(int key, int part) { return owned_.at({key, part}); }

std::uint64_t Store::bytes_owned() const {
  std::uint64_t b = 0;
  for (const auto& [_, s] : owned_) b += s.part.bytes();
  return b;
}

std::vector<std::pair<int, int>> Store::parts() const {
  std::vector<std::pair<int, int>> v;
  for (const auto& [kp, _] : owned_) v.push_back(kp);
  return v;
}

void Store::drain(int key, int part) {
  if (mode_.kind != Consistency::Kind::kBsp) return;
  PartState& s = state(key, part);
  std::lock_guard<std::mutex> lock(*s.mu);
  drain_bsp(s);
}

std::vector<float>& Store::writable(PartState& s) {
  if (s.current.use_count() == 1) {
    // Pairs with the release of the last reader's reference on ZeroMQ's thread.
    std::atomic_thread_fence(std::memory_order_acquire);
    return *s.current;
  }
  // A reply still holds this version: write the next one into a free spare (or a new buffer),
  // and keep the old one as a spare for when its readers are done. `current` is never in
  // `spares`, so use_count() == 1 means "nobody else reads it".
  Buffer next;
  for (auto it = s.spares.begin(); it != s.spares.end(); ++it)
    if (it->use_count() == 1) {
      next = std::move(*it);
      s.spares.erase(it);
      break;
    }
  if (!next) next = std::make_shared<std::vector<float>>(s.current->size());
  std::memcpy(next->data(), s.current->data(), s.current->size() * sizeof(float));
  count_copy(s.current->size() * sizeof(float));
  if (s.spares.size() < 4) s.spares.push_back(s.current);
  s.current = std::move(next);
  return *s.current;
}

void Store::apply(PartState& s, std::uint64_t clock, std::uint64_t off, const float* grad,
                  std::uint64_t n, float scale) {
  SgdOptions o = sgd_;
  o.lr = scheduled_lr(schedule_, sgd_.lr, std::int64_t(clock), steps_);
  std::vector<float>& w = writable(s);
  sgd_apply(o, w.data() + off, grad, s.velocity.data() + off, n, scale);
}

Status Store::push(int worker, std::uint64_t clock, int key, int part, std::uint64_t offset_bytes,
                   const float* grad, std::uint64_t bytes, bool copy) {
  PartState& s = state(key, part);
  std::lock_guard<std::mutex> lock(*s.mu);
  const std::uint64_t off = offset_bytes / 4, n = bytes / 4;
  const std::uint64_t part_bytes = std::uint64_t(s.part.bytes());
  if (!alive_[worker] && !copy)
    return Status::error("worker " + std::to_string(worker) + " was declared dead");
  if (mode_.kind == Consistency::Kind::kBsp) {
    if (clock < s.applied_clocks)
      return Status::error("clock " + std::to_string(clock) +
                           " of this part was already applied (bsp is at " +
                           std::to_string(s.applied_clocks) + ")");
    if (clock > s.applied_clocks + 64)
      return Status::error("clock " + std::to_string(clock) +
                           " is too far ahead of the part's clock " +
                           std::to_string(s.applied_clocks));
    auto pb = s.pending_bytes.find(clock);
    if (pb != s.pending_bytes.end() && pb->second[worker] + bytes > part_bytes)
      return Status::error("more than the part's " + std::to_string(part_bytes) +
                           " bytes for clock " + std::to_string(clock));
    auto& sum = s.pending_sum[clock];
    auto& got = s.pending_bytes[clock];
    if (sum.empty()) sum.assign(s.part.numel, 0.0), got.assign(workers_, 0);
    for (std::uint64_t i = 0; i < n; ++i) sum[off + i] += double(grad[i]);
    got[worker] += bytes;
    if (got[worker] == part_bytes)
      s.completed[worker] = std::max<std::uint64_t>(s.completed[worker], clock + 1);
    if (!copy) drain_bsp(s);  // may erase this clock's entries: `sum`, `got` are dead after it
    return Status::success();
  }
  auto& got = s.partial[clock];
  if (got.empty()) got.assign(workers_, 0);
  if (got[worker] + bytes > part_bytes)
    return Status::error("more than the part's " + std::to_string(part_bytes) +
                         " bytes for clock " + std::to_string(clock));
  apply(s, clock, off, grad, n, 1.0f);
  got[worker] += bytes;
  if (got[worker] == part_bytes) {
    s.completed[worker] = std::max<std::uint64_t>(s.completed[worker], clock + 1);
    if (on_clock) on_clock(s, min_completed(s));
    bool all = true;
    for (int w = 0; w < workers_; ++w) all = all && (!alive_[w] || got[w] == part_bytes);
    if (all) s.partial.erase(clock);
  }
  return Status::success();
}

std::uint64_t Store::min_completed(const PartState& s) const {
  std::uint64_t m = UINT64_MAX;
  for (int w = 0; w < workers_; ++w)
    if (alive_[w]) m = std::min(m, s.completed[w]);
  return m == UINT64_MAX ? 0 : m;
}

bool Store::pull_ready(int key, int part, std::uint64_t clock) const {
  const PartState& s = owned_.at({key, part});
  switch (mode_.kind) {
    case Consistency::Kind::kAsync:
      return true;
    case Consistency::Kind::kBsp:
      return s.applied_clocks >= clock;
    case Consistency::Kind::kSsp:
      return min_completed(s) + std::uint64_t(mode_.staleness) >= clock;
  }
  return true;
}

Status Store::apply_pending(int key, int part, std::uint64_t clock, int contributors) {
  PartState& s = state(key, part);
  std::lock_guard<std::mutex> lock(*s.mu);
  if (clock != s.applied_clocks)
    return Status::error("clock " + std::to_string(clock) + " is not the part's next (" +
                         std::to_string(s.applied_clocks) + ")");
  const auto sum = s.pending_sum.find(clock);
  if (sum == s.pending_sum.end() || contributors < 1)
    return Status::error("clock " + std::to_string(clock) + " of " + std::to_string(contributors) +
                         " workers: no push of it was forwarded");
  const std::vector<float> g(sum->second.begin(), sum->second.end());
  apply(s, clock, 0, g.data(), s.part.numel, 1.0f / float(contributors));
  s.pending_sum.erase(sum);
  s.pending_bytes.erase(clock);
  ++s.applied_clocks;
  return Status::success();
}

std::uint64_t Store::applied_clocks(int key, int part) {
  PartState& s = state(key, part);
  std::lock_guard<std::mutex> lock(*s.mu);
  return s.applied_clocks;
}

Buffer Store::snapshot(int key, int part) const { return owned_.at({key, part}).current; }

Buffer Store::velocity(int key, int part) const {
  const PartState& s = owned_.at({key, part});
  std::lock_guard<std::mutex> lock(*s.mu);
  return std::make_shared<std::vector<float>>(s.velocity);
}

Status Store::assign(int key, int part, std::uint64_t clock, const float* values,
                     std::uint64_t floats) {
  PartState& s = state(key, part);
  std::lock_guard<std::mutex> lock(*s.mu);
  const std::uint64_t n = std::uint64_t(s.part.numel);
  if (floats != 2 * n)
    return Status::error(std::to_string(floats) + " floats, expected the part's " +
                         std::to_string(n) + " parameters and as many of momentum");
  // What the part has applied or is gathering comes before `clock`: nothing is lost under it.
  std::uint64_t at = s.applied_clocks;
  if (!s.pending_bytes.empty()) at = std::max(at, s.pending_bytes.rbegin()->first + 1);
  if (!s.partial.empty()) at = std::max(at, s.partial.rbegin()->first + 1);
  for (std::uint64_t c : s.completed) at = std::max(at, c);
  if (clock < at)
    return Status::error("clock " + std::to_string(clock) + " is below the part's " +
                         std::to_string(at) + " (applied or under way)");
  std::vector<float>& w = writable(s);
  std::memcpy(w.data(), values, n * sizeof(float));
  std::memcpy(s.velocity.data(), values + n, n * sizeof(float));
  s.applied_clocks = clock;
  std::fill(s.completed.begin(), s.completed.end(), clock);
  return Status::success();
}

Buffer Store::try_snapshot(int key, int part, std::uint64_t clock) {
  PartState& s = state(key, part);
  std::unique_lock<std::mutex> lock(*s.mu, std::try_to_lock);
  if (!lock.owns_lock() || !pull_ready(key, part, clock)) return nullptr;
  return s.current;
}

void Store::worker_dead(int worker) {
  if (worker < 0 || worker >= workers_) return;
  alive_[worker] = false;
}

// Applies pending bsp clocks in order, each once every live worker's whole part has arrived.
void Store::drain_bsp(PartState& s) {
  const std::uint64_t part_bytes = std::uint64_t(s.part.bytes());
  while (!s.pending_bytes.empty()) {
    auto first = s.pending_bytes.begin();
    if (first->first != s.applied_clocks) break;
    int contributors = 0;
    bool complete = true;
    for (int w = 0; w < workers_; ++w) {
      if (first->second[w] == part_bytes)
        ++contributors;
      else if (alive_[w])
        complete = false;
    }
    if (!complete || contributors == 0) break;
    const std::uint64_t clock = first->first;
    const std::vector<double>& exact = s.pending_sum[clock];
    const std::vector<float> sum(exact.begin(), exact.end());
    apply(s, clock, 0, sum.data(), s.part.numel, 1.0f / float(contributors));
    if (on_applied) on_applied(s, clock, contributors);
    s.pending_sum.erase(clock);
    s.pending_bytes.erase(first);
    ++s.applied_clocks;
    if (on_clock) on_clock(s, s.applied_clocks);
  }
}

}  // namespace psbed::ps
