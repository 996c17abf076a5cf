// Checkpoints of a shard: its parts' parameters, optimizer state (momentum) and clock, taken at
// a step every shard agrees on, so that `psbed launch --resume` restarts the whole cluster from
// the last step every shard wrote.
//
// A part is copied by its own apply lane at the moment its clock reaches the step (bsp: the
// step's aggregated update applied; async and ssp: every live worker's whole part of the step
// arrived). In bsp a checkpoint is exact; in async and ssp a part may already hold a faster
// worker's gradients of later steps, so a resumed run restarts near the step, not exactly at it.
// The copies are written by a thread of their own: file I/O never holds up a lane. The file is
// written beside its final name and renamed over it, so a crash leaves the previous checkpoint or
// the new one, never half of one; its trailer (length and checksum) tells a truncated or damaged
// file from a good one.
//
// File layout, little-endian: "PSBDCKPT", u32 format version, u32 shard, u32 shards, u32 parts,
// u64 step, u64 model hash, u32 name bytes, name; per part u32 key, u32 part, u64 offset, u64
// numel, numel floats of parameters, numel floats of momentum; then u64 bytes before the
// trailer and u64 FNV-1a of them.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ps/cluster_map.hpp"
#include "ps/store.hpp"

namespace psbed::ps {

struct CheckpointPart {
  int key = 0, part = 0;
  std::int64_t offset = 0, numel = 0;
  std::vector<float> params, velocity;
};

struct Checkpoint {
  std::string model;
  std::uint64_t model_hash = 0;  // of the model spec's text: another spec is another model
  int shard = 0, shards = 1;
  std::uint64_t step = 0;  // the clock every part reached
  std::vector<CheckpointPart> parts;
};

std::uint64_t model_hash(const std::string& spec_text);
// DIR/shard-K.step-S.ckpt
std::string checkpoint_path(const std::string& dir, int shard, std::uint64_t step);
// Writes PATH.tmp, flushes it to disk and renames it to PATH. Throws Error naming the file.
void write_checkpoint(const std::string& path, const Checkpoint& c);
// Throws Error naming the file: missing, truncated, damaged (checksum), not a checkpoint.
Checkpoint read_checkpoint(const std::string& path);
// Throws Error naming `path` where `c` is not shard `shard` of this run: another model, another
// shard count or partition of the tensors.
void check_checkpoint(const Checkpoint& c, const ClusterMap& map, int shard,
                      const std::string& path);
// The newest step for which DIR holds a checkpoint of every shard 0..shards-1; -1 if none.
std::int64_t latest_checkpoint_step(const std::string& dir, int shards);
// Puts a checked checkpoint's parameters, momentum and clocks into the store.
void restore_checkpoint(Store& store, const Checkpoint& c, int workers);

// "200" (steps) or "30s" (seconds, any duration unit): what --checkpoint-every takes. Throws
// Error saying what was expected (the caller names the flag).
struct CheckpointEvery {
  std::int64_t steps = 0;  // > 0: at every multiple of this step
  double seconds = 0;      // > 0: the coordinator asks for one this often
  bool on() const { return steps > 0 || seconds > 0; }
};
CheckpointEvery parse_checkpoint_every(const std::string& text);

// One shard's checkpoints: collects its parts' copies per step and writes each complete one.
class ShardCheckpointer {
 public:
  // Every `every_steps` steps (0: only steps asked for with want()), from after `from_step`.
  ShardCheckpointer(std::string dir, const ClusterMap& map, int shard, std::int64_t every_steps,
                    std::uint64_t from_step);
  ~ShardCheckpointer();
  // A step the coordinator asks every shard to checkpoint (the seconds mode). Never blocks long.
  void want(std::uint64_t step);
  // From a part's lane, holding the part: its clock is now `clock`.
  void reached(const PartState& s, std::uint64_t clock);
  // Writes what is complete and waits for it.
  void stop();
  std::uint64_t written() const;
  std::uint64_t last_step() const;

 private:
  bool wanted_locked(std::uint64_t step) const;
  void write_loop();

  std::string dir_;
  std::string model_;
  std::uint64_t hash_;
  int shard_, shards_;
  std::size_t parts_;
  std::int64_t every_, steps_;
  std::uint64_t from_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::uint64_t> asked_;
  std::map<std::uint64_t, Checkpoint> pending_;  // step -> the parts copied so far
  std::deque<Checkpoint> ready_;
  std::uint64_t written_ = 0, last_step_ = 0;  // checkpoints on disk, and the newest
  std::uint64_t captured_ = 0;                 // the newest step copied whole
  std::deque<std::uint64_t> kept_;             // the steps written, newest last (three kept)
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace psbed::ps
