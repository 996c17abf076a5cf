// Closed-form throughput bounds after Yan et al. (KDD 2015): a step cannot be faster than its
// compute, than a worker's own link moving the model each way, or than the busiest shard's link
// moving every worker's share of the model each way; nor, where the profile measured the host's
// CPU, than the host's cores doing every node's work for the messages and bytes of the steps;
// nor than its compute plus the two round trips of latency no overlap hides (a straggler's sleep
// on top). Instant, and the sanity band printed beside every simulated figure: `upper` assumes
// perfect overlap, `serial` none at all.
#pragma once
#include <string>

#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/profile.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

struct AnalyticBounds {
  double compute_bound = 0;      // images/s if transfers cost nothing
  double worker_link_bound = 0;  // images/s if only each worker's link limited
  double server_link_bound = 0;  // images/s if only the busiest shard's link limited
  double apply_bound = 0;        // images/s if only the busiest shard's apply lanes limited
  double host_bound = 0;         // images/s if only the host's cores limited (inf: unmeasured)
  // images/s if only the busiest shard's receiving thread limited: it takes every worker's pushes
  // one at a time, each costing a transfer's receiving time (receive_cost; inf: unmeasured).
  double thread_bound = 0;
  // images/s if a step were its compute and the two round trips no overlap hides (the first
  // pull, the last push's acknowledgment; the layers before the first with parameters, and
  // worker-0's straggling sleep, run during them) (inf: no latency, no compute).
  double latency_bound = 0;
  double upper = 0;      // min of the above: perfect overlap
  double serial = 0;     // compute, then pull, then push, no overlap (bsp-like)
  double imbalance = 1;  // busiest shard bytes / mean shard bytes
  // "compute", "worker link", "server link", "apply", "host cpu", "server thread", "latency" or
  // "straggler" (the latency bound with a straggler)
  std::string bottleneck;
};

AnalyticBounds analytic_bounds(const Profile& profile, const ModelSpec& spec,
                               const SimConfig& config);

// The transfers a worker makes per step in each direction: every part of `plan`, cut into
// slices by the policies that slice (p3, prophet: slice_params; bytescheduler:
// partition_params), whole under the others.
std::int64_t transfers_per_step(const PartitionPlan& plan, const policy::PolicyOptions& policy);

}  // namespace psbed::predictor
