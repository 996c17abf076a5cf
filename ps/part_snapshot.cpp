#include "ps/part_snapshot.hpp"

#include <cstring>
#include <memory>
#include <vector>

namespace psbed::ps {
namespace {

struct Writer {
  std::vector<std::uint8_t> out;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void u64(std::uint64_t v) { bytes(&v, sizeof v); }
};

struct Reader {
  const std::uint8_t* p;
  std::size_t left;
  bool ok = true;
  bool bytes(void* dst, std::size_t n) {
    if (!ok || n > left) return ok = false;
    std::memcpy(dst, p, n);
    p += n, left -= n;
    return true;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    bytes(&v, sizeof v);
    return v;
  }
};

}  // namespace

Payload encode_part(const PartState& s, const std::map<int, std::uint64_t>& last_seq) {
  const std::uint64_t numel = s.current->size(), workers = s.completed.size();
  Writer w;
  for (std::uint64_t v : {numel, s.applied_clocks, workers, std::uint64_t(s.pending_sum.size()),
                          std::uint64_t(s.partial.size()), std::uint64_t(last_seq.size())})
    w.u64(v);
  w.bytes(s.current->data(), numel * sizeof(float));
  std::vector<float> velocity = s.velocity;
  velocity.resize(numel, 0.0f);
  w.bytes(velocity.data(), numel * sizeof(float));
  for (std::uint64_t c : s.completed) w.u64(c);
  for (const auto& [clock, sum] : s.pending_sum) {
    w.u64(clock);
    const auto got = s.pending_bytes.find(clock);
    for (std::uint64_t i = 0; i < workers; ++i)
      w.u64(got != s.pending_bytes.end() && i < got->second.size() ? got->second[i] : 0);
    std::vector<double> full = sum;
    full.resize(numel, 0.0);
    w.bytes(full.data(), numel * sizeof(double));
  }
  for (const auto& [clock, got] : s.partial) {
    w.u64(clock);
    for (std::uint64_t i = 0; i < workers; ++i) w.u64(i < got.size() ? got[i] : 0);
  }
  for (const auto& [worker, seq] : last_seq) w.u64(std::uint64_t(worker)), w.u64(seq);
  return Payload::share(std::make_shared<const std::vector<std::uint8_t>>(std::move(w.out)));
}

Status install_part(Store& store, int key, int part, const Payload& bytes,
                    std::map<int, std::uint64_t>& last_seq) {
  PartState& s = store.state(key, part);
  Reader r{bytes.data(), bytes.size()};
  const std::uint64_t numel = r.u64(), applied = r.u64(), workers = r.u64(), pending = r.u64(),
                      partial = r.u64(), seqs = r.u64();
  if (!r.ok || numel != std::uint64_t(s.part.numel) || workers != s.completed.size())
    return Status::error("a state of " + std::to_string(numel) + " floats for " +
                         std::to_string(workers) + " workers, expected " +
                         std::to_string(s.part.numel) + " for " +
                         std::to_string(s.completed.size()));
  // Counts bounded by the bytes there are before anything is allocated for them.
  const std::uint64_t per_pending = 8 + workers * 8 + numel * 8, per_partial = 8 + workers * 8;
  if (pending > bytes.size() / per_pending || partial > bytes.size() / per_partial ||
      seqs > bytes.size() / 16)
    return Status::error("its counts run past its " + std::to_string(bytes.size()) + " bytes");
  auto params = std::make_shared<std::vector<float>>(numel);
  std::vector<float> velocity(numel);
  std::vector<std::uint64_t> completed(workers);
  r.bytes(params->data(), numel * sizeof(float));
  r.bytes(velocity.data(), numel * sizeof(float));
  r.bytes(completed.data(), workers * 8);
  std::map<std::uint64_t, std::vector<double>> sums;
  std::map<std::uint64_t, std::vector<std::uint64_t>> got, parts;
  for (std::uint64_t i = 0; i < pending && r.ok; ++i) {
    const std::uint64_t clock = r.u64();
    auto& g = got[clock];
    g.resize(workers);
    r.bytes(g.data(), workers * 8);
    auto& sum = sums[clock];
    sum.resize(numel);
    r.bytes(sum.data(), numel * sizeof(double));
  }
  for (std::uint64_t i = 0; i < partial && r.ok; ++i) {
    const std::uint64_t clock = r.u64();
    auto& g = parts[clock];
    g.resize(workers);
    r.bytes(g.data(), workers * 8);
  }
  std::map<int, std::uint64_t> seq;
  for (std::uint64_t i = 0; i < seqs && r.ok; ++i) {
    const std::uint64_t worker = r.u64(), n = r.u64();
    if (worker < workers) seq[int(worker)] = n;
  }
  if (!r.ok || r.left != 0)
    return Status::error("its " + std::to_string(bytes.size()) + " bytes do not hold what its " +
                         "counts say");
  std::lock_guard<std::mutex> lock(*s.mu);
  s.current = std::move(params);  // a new version: a reply in flight keeps the old one
  s.spares.clear();
  s.velocity = std::move(velocity);
  s.applied_clocks = applied;
  s.completed = std::move(completed);
  s.pending_sum = std::move(sums);
  s.pending_bytes = std::move(got);
  s.partial = std::move(parts);
  last_seq = std::move(seq);
  return Status::success();
}

}  // namespace psbed::ps
