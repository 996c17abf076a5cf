// A shard's parameters: one PartState per owned part, and the consistency rules that decide
// when a pushed gradient is applied and when a pull may be answered.
//
// Versions are copy-on-write: a pull reply shares the part's current buffer with ZeroMQ (no
// copy); an update that finds the buffer still shared writes a fresh one (from a small pool of
// spares), so a reply in flight never sees a half-applied update.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/optimizer.hpp"
#include "core/partition.hpp"
#include "core/status.hpp"
#include "ps/cluster_map.hpp"

namespace psbed::ps {

using Buffer = std::shared_ptr<std::vector<float>>;

struct PartState {
  Part part;
  // Held by the part's lane while it changes the part, and by the receiving thread while it
  // checks and snapshots the part for a pull it answers at once (Store::try_snapshot).
  std::unique_ptr<std::mutex> mu = std::make_unique<std::mutex>();
  Buffer current;
  std::vector<Buffer> spares;
  std::vector<float> velocity;
  // bsp: summed gradients per clock and how many bytes each worker contributed. The sum is kept
  // in double: a sum of a few floats is then exact, so the order the workers' pushes arrive in
  // changes nothing and a bsp run's parameters are the same every time.
  std::map<std::uint64_t, std::vector<double>> pending_sum;
  std::map<std::uint64_t, std::vector<std::uint64_t>> pending_bytes;
  std::uint64_t applied_clocks = 0;      // bsp: clocks fully aggregated and applied
  std::vector<std::uint64_t> completed;  // per worker: clocks whose whole part arrived
  std::map<std::uint64_t, std::vector<std::uint64_t>>
      partial;  // clock -> per worker bytes (ssp/async)
};

class Store {
 public:
  Store(const ClusterMap& map, int shard);

  bool owns(int key, int part) const;
  PartState& state(int key, int part);
  // Applies or accumulates a gradient range; or refuses it, saying why (a dead worker, a clock
  // bsp has already applied, more bytes than the part). `copy`: a push the primary shard took,
  // forwarded to this backup (--replicas 2): taken from a worker declared dead since, and in bsp
  // only accumulated, for the primary decides when a clock is applied (apply_pending).
  Status push(int worker, std::uint64_t clock, int key, int part, std::uint64_t offset_bytes,
              const float* grad, std::uint64_t bytes, bool copy = false);
  // Whether a pull of (key, part) for `clock` may be answered now.
  bool pull_ready(int key, int part, std::uint64_t clock) const;
  // The current version to reply with (shared, read-only while shared). From the part's lane.
  Buffer snapshot(int key, int part) const;
  // From any other thread: the current version if a pull for `clock` may be answered now and
  // the part's lane is not changing it at this moment; otherwise null (the lane answers).
  Buffer try_snapshot(int key, int part, std::uint64_t clock);
  // Marks the worker dead everywhere; then each lane calls drain(key, part) for its parts
  // (bsp clocks that waited only for it can be applied).
  void worker_dead(int worker);
  void drain(int key, int part);
  // Parts are independent: different threads may work on different parts at once.
  std::vector<std::pair<int, int>> parts() const;
  std::size_t parts_owned() const { return owned_.size(); }
  std::uint64_t bytes_owned() const;
  const Consistency& mode() const { return mode_; }
  // On a backup (--replicas 2): the primary applied bsp `clock` of the part, averaging
  // `contributors` workers; the copy applies the same sum it accumulated from the forwarded
  // pushes (exact, so the same floats). Refused unless `clock` is the part's next one.
  Status apply_pending(int key, int part, std::uint64_t clock, int contributors);
  // A copy of the part's momentum (a pull with the momentum flag). From the part's lane.
  Buffer velocity(int key, int part) const;
  // `values` (the part's parameters then its momentum) become the part's state from `clock` on,
  // as if every worker's pushes below `clock` were applied: a live --comm switch hands back a
  // layer the workers updated themselves. Refused, saying why, for a wrong size or a clock
  // below what the part has applied or is gathering.
  Status assign(int key, int part, std::uint64_t clock, const float* values, std::uint64_t floats);
  // bsp: the clocks of the part applied so far.
  std::uint64_t applied_clocks(int key, int part);
  // Called by the part's lane, holding the part, when bsp applies a clock, with how many
  // workers it averages.
  std::function<void(const PartState&, std::uint64_t clock, int contributors)> on_applied;
  // Called by the part's lane, holding the part, when the part's clock moves: bsp, a clock
  // applied; async and ssp, the clock every live worker's whole part arrived for. Unset: no cost.
  std::function<void(const PartState&, std::uint64_t clock)> on_clock;

 private:
  void apply(PartState& s, std::uint64_t clock, std::uint64_t offset_floats, const float* grad,
             std::uint64_t n, float scale);
  std::vector<float>& writable(PartState& s);
  void drain_bsp(PartState& s);
  std::uint64_t min_completed(const PartState& s) const;

  Consistency mode_{Consistency::Kind::kAsync};
  SgdOptions sgd_;
  std::string schedule_;
  std::int64_t steps_;
  int workers_;
  // Written by any apply lane when a worker dies, read by all: atomics, one per worker.
  std::unique_ptr<std::atomic<bool>[]> alive_;
  std::map<std::pair<int, int>, PartState> owned_;
};

}  // namespace psbed::ps
