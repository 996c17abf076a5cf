// Transmission policies as clock-free decision objects. A policy is told what happens (a step
// begins, a parameter part is needed, a gradient part is ready, backward ended, a send left, an
// acknowledgment came back, the bandwidth estimate changed) with the time passed in, and answers
// "what to send next, if anything" given the bytes in flight. It never reads a clock or touches
// a socket, so the same object drives the live worker (real clock) and the predictor's
// simulator (simulated clock): a policy is implemented once, measured and predicted with the
// same code.
//
// Policies may cut a part into slices (P3, ByteScheduler); a Transfer is then a float range of
// a part, and the caller sends exactly that range.
//
// kFactors: one worker's sufficient factors of an SFB layer (core/comm.hpp) for one peer, handed
// over like a push (gradient_ready, ordered by its layer) and never sliced: it is one message.
// `part` names the peer (its worker id). It completes when its bytes have left the sender's
// link; nothing answers it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/defaults.hpp"

namespace psbed::policy {

enum class Direction { kPull, kPush, kFactors };

struct Transfer {
  Direction dir = Direction::kPush;
  int part = 0;             // index into the partition plan; kFactors: the peer's worker id
  int layer = 0;            // layer of the part's tensor: lower = nearer the input
  std::int64_t offset = 0;  // first float within the part
  std::int64_t count = 0;   // floats
  std::int64_t bytes() const { return count * 4; }
  bool operator==(const Transfer& o) const {
    return dir == o.dir && part == o.part && offset == o.offset && count == o.count;
  }
};

struct PolicyOptions {
  std::string name = "wfbp";  // bulk | wfbp | tf-random | p3 | bytescheduler | prophet
  std::int64_t slice_params = defaults::kSliceParams;  // p3, prophet: floats per slice
  std::int64_t partition_params =
      defaults::kPartitionParams;  // bytescheduler: floats per partition
  // Bytes in flight at most; < 0: the policy's default (p3 4 MiB, bytescheduler 4,000,000
  // parameters = 16,000,000 bytes). prophet: the largest block (default 4 MiB).
  std::int64_t credit_bytes = -1;
  std::uint64_t seed = 1;  // tf-random
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Whether forward must wait for every parameter (bulk) instead of layer by layer.
  virtual bool pull_all_before_forward() const { return false; }

  virtual void begin_step(double now_s, std::uint64_t step) {}
  virtual void parameter_needed(double now_s, const Transfer& t) = 0;
  virtual void gradient_ready(double now_s, const Transfer& t) = 0;
  virtual void backward_done(double now_s) {}
  virtual void sent(double now_s, const Transfer& t) {}
  virtual void acked(double now_s, const Transfer& t) {}
  virtual void bandwidth_estimate(double bytes_per_s) {}
  // The next transfer to start now, or nothing (wait for an event). The caller then sends it
  // and reports sent() / acked().
  virtual std::optional<Transfer> next(double now_s, std::int64_t bytes_in_flight) = 0;
};

// Which of PolicyOptions' settings a policy reads; the others change nothing for it, so a
// report lists, and a search varies, only these.
bool uses_slice_params(const std::string& policy);      // p3, prophet
bool uses_partition_params(const std::string& policy);  // bytescheduler
bool uses_credit(const std::string& policy);            // p3, bytescheduler; prophet: its block
// The credit (prophet: the largest block) a policy runs with: credit_bytes, or where that is
// < 0 the policy's default; -1 for a policy that has none.
std::int64_t credit_in_effect(const PolicyOptions& options);

// Throws psbed::Error naming the policy if unknown or its parameters are invalid.
std::unique_ptr<Policy> make_policy(const PolicyOptions& options);
// The same checks without a policy to keep: for options refused before anything runs.
void check_policy_options(const PolicyOptions& options);
std::vector<std::string> policy_names();

}  // namespace psbed::policy
