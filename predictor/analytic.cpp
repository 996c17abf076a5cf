#include "predictor/analytic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/partition.hpp"
#include "predictor/sim/factors.hpp"

namespace psbed::predictor {

namespace {
// The floats per transfer the policy cuts parts into; 0: whole parts.
std::int64_t slice_of(const policy::PolicyOptions& policy) {
  return policy::uses_slice_params(policy.name)       ? policy.slice_params
         : policy::uses_partition_params(policy.name) ? policy.partition_params
                                                      : 0;
}
std::int64_t transfers_of(const Part& p, std::int64_t slice) {
  return slice > 0 ? (p.numel + slice - 1) / slice : 1;
}
}  // namespace

std::int64_t transfers_per_step(const PartitionPlan& plan, const policy::PolicyOptions& policy) {
  const std::int64_t slice = slice_of(policy);
  std::int64_t transfers = 0;
  for (const auto& p : plan.parts) transfers += transfers_of(p, slice);
  return transfers;
}

namespace {

// What SFB layers (SimConfig::comm) change: their parts leave the shards (out of the plan), their
// factors go on each worker's link both ways, and their rebuild adds to each step's compute.
struct SfbLoad {
  PartitionPlan plan;  // the parts still pushed and pulled
  sim::FactorModel factors;
  double rebuild_s = 0;  // per step: every worker's products and the optimizer step, as simulated
  double messages = 0;   // factor messages a worker sends (and receives) per step
};

SfbLoad sfb_load(const Profile& profile, const ModelSpec& spec, const SimConfig& cfg) {
  SfbLoad l;
  l.plan = make_partition(spec, cfg.partition_bytes, cfg.servers);
  l.factors =
      sim::factor_model(spec, cfg.comm, cfg.workers, cfg.servers, profile.batch, cfg.comm_cost());
  l.plan.parts.erase(std::remove_if(l.plan.parts.begin(), l.plan.parts.end(),
                                    [&](const Part& p) {
                                      return l.factors.sfb[std::size_t(spec.tensors[p.key].layer)];
                                    }),
                     l.plan.parts.end());
  for (const sim::FactorLayer& f : l.factors.layers) {
    std::int64_t bytes = 0;
    for (int t : spec.layers[std::size_t(f.layer)].tensors) bytes += spec.tensors[t].bytes();
    l.rebuild_s += cfg.workers * profile.mean_forward_ms(f.layer) / 1e3 +
                   profile.apply_overhead_us * 1e-6 +
                   profile.apply_ns_per_byte * 1e-9 * double(bytes);
  }
  l.messages = double(cfg.workers - 1) * double(l.factors.layers.size());
  return l;
}

double mean_overhead_ms(const Profile& profile) {
  if (profile.step_overhead_ms.empty()) return 0;
  return std::accumulate(profile.step_overhead_ms.begin(), profile.step_overhead_ms.end(), 0.0) /
         double(profile.step_overhead_ms.size());
}

// `upper`, the lowest of the bounds, and the bottleneck that names it.
void take_upper(AnalyticBounds& a, bool straggling) {
  a.upper = a.compute_bound, a.bottleneck = "compute";
  if (a.worker_link_bound < a.upper) a.upper = a.worker_link_bound, a.bottleneck = "worker link";
  if (a.server_link_bound < a.upper) a.upper = a.server_link_bound, a.bottleneck = "server link";
  if (a.apply_bound < a.upper) a.upper = a.apply_bound, a.bottleneck = "apply";
  if (a.host_bound < a.upper) a.upper = a.host_bound, a.bottleneck = "host cpu";
  if (a.thread_bound < a.upper) a.upper = a.thread_bound, a.bottleneck = "server thread";
  if (a.latency_bound < a.upper)
    a.upper = a.latency_bound, a.bottleneck = straggling ? "straggler" : "latency";
}

}  // namespace

AnalyticBounds analytic_bounds(const Profile& profile, const ModelSpec& spec,
                               const SimConfig& config) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The host's contention charged as the simulator charges it (every CPU cost x its factor).
  const SimConfig cfg = with_contention(config);
  const double W = cfg.workers, batch = profile.batch, B = cfg.bandwidth_bytes_per_sec;
  const SfbLoad sfb = sfb_load(profile, spec, cfg);
  const PartitionPlan& plan = sfb.plan;
  const sim::FactorModel& fm = sfb.factors;
  const double rebuild_s = sfb.rebuild_s, factor_messages = sfb.messages;
  const double overhead_ms = mean_overhead_ms(profile);
  // Real compute on the host's cores runs at the CPU scale (the contention's, validate's what-if).
  const double compute_scale =
      cfg.compute_on_cores && cfg.host_cpus > 0 ? cfg.compute_cpu_scale : 1.0;
  const double compute_s =
      (profile.mean_compute_ms() + overhead_ms) / 1e3 * compute_scale + rebuild_s * compute_scale;
  const double overhead_s = overhead_ms / 1e3 * compute_scale;
  // The layers before the first that holds parameters wait for no pull, and their backward comes
  // after the last gradient is pushed: both overlap a round trip.
  int first_held = int(spec.layers.size());
  for (const auto& p : plan.parts)
    first_held = std::min(first_held, spec.tensors[std::size_t(p.key)].layer);
  double before_fwd_s = 0, before_bwd_s = 0,
         held_s = 0;  // forward, backward of those layers; the rest
  for (int l = 0; l < int(profile.layers.size()); ++l) {
    const double f = profile.mean_forward_ms(l) / 1e3 * compute_scale,
                 b = profile.mean_backward_ms(l) / 1e3 * compute_scale;
    if (l < first_held)
      before_fwd_s += f, before_bwd_s += b;
    else
      held_s += f + b;
  }
  double model_bytes = 0;  // each way, through a worker's link: its parts and its factors
  for (const auto& p : plan.parts) model_bytes += double(p.bytes() + cfg.message_overhead_bytes);
  const double factor_bytes =
      fm.link_bytes() + factor_messages * double(cfg.message_overhead_bytes);
  model_bytes += factor_bytes;
  std::vector<double> shard_bytes(std::size_t(cfg.servers), 0),
      shard_apply_s(std::size_t(cfg.servers), 0), shard_transfers(std::size_t(cfg.servers), 0);
  const std::int64_t slice = slice_of(cfg.policy);
  for (const auto& p : plan.parts) {
    shard_transfers[p.shard] += double(transfers_of(p, slice));
    shard_bytes[p.shard] += double(p.bytes() + cfg.message_overhead_bytes);
    shard_apply_s[p.shard] +=
        profile.apply_overhead_us * 1e-6 + profile.apply_ns_per_byte * 1e-9 * double(p.bytes());
  }
  const double busiest = *std::max_element(shard_bytes.begin(), shard_bytes.end());
  const double busiest_apply = *std::max_element(shard_apply_s.begin(), shard_apply_s.end());
  const double busiest_transfers =
      *std::max_element(shard_transfers.begin(), shard_transfers.end());
  // A push costs the shard's receiving thread a transfer's share (receive_cost), as a reply costs
  // the worker's.
  const double thread_per_transfer_s = receive_cost(cfg, true, 0).thread_s;
  const double shard_thread_s = busiest_transfers * thread_per_transfer_s;

  // Stragglers (SimConfig::stragglers): each worker's compute factor and link rate, and worker-0's
  // straggling sleep. Under async each worker runs at its own pace; under bsp and ssp the
  // slowest holds every worker to its pace in the long run.
  std::vector<double> factor(std::size_t(W), 1.0), link(std::size_t(W), B),
      straggle(std::size_t(W), 0.0);
  for (const Straggler& s : cfg.stragglers) {
    if (s.worker < 0 || s.worker >= cfg.workers) continue;
    factor[std::size_t(s.worker)] = s.compute_factor;
    if (s.bandwidth_bytes_per_sec > 0) link[std::size_t(s.worker)] = s.bandwidth_bytes_per_sec;
  }
  straggle[0] = std::max(0.0, cfg.straggler_s);
  const bool async = cfg.mode.kind == Consistency::Kind::kAsync;
  // images/s of the W workers when worker w's step takes step_s(w) (0: no limit).
  auto rate = [&](const auto& step_s) {
    double sum = 0, slowest = 0;
    for (int w = 0; w < cfg.workers; ++w) {
      const double s = step_s(w);
      slowest = std::max(slowest, s);
      sum += s > 0 ? batch / s : kInf;
    }
    if (slowest <= 0) return kInf;
    return async ? sum : W * batch / slowest;
  };
  AnalyticBounds a;
  a.imbalance = plan.imbalance();
  a.compute_bound = rate([&](int w) { return compute_s * factor[std::size_t(w)]; });
  // Pull and push use opposite directions of a link, so each direction carries the model once
  // per step for a worker (at its own link's rate), and W shares of its part of the model for a
  // shard.
  a.worker_link_bound = rate([&](int w) {
    const double bw = link[std::size_t(w)];
    return bw > 0 ? model_bytes / bw : 0.0;
  });
  a.server_link_bound = B > 0 && busiest > 0 ? batch * B / busiest : kInf;
  const double lanes = std::max(1, cfg.apply_lanes);
  a.apply_bound = busiest_apply > 0 ? batch * lanes / busiest_apply : kInf;
  // Every worker-step's messages (four per slice: a pull request and its reply, a push and its
  // acknowledgment) and bytes (the model each way) cost CPU on the host's shared cores.
  const double transfers = std::accumulate(shard_transfers.begin(), shard_transfers.end(), 0.0);
  // Real compute takes a core for its duration as well (replayed compute sleeps).
  // A factor message costs its receiver as a data message does; the rebuild is real work on a
  // core even under compute replay.
  const double message_cpu_s = 4 * transfers * cfg.cpu_per_message_s +
                               2 * (model_bytes - factor_bytes) * cfg.cpu_per_byte_s +
                               factor_messages * (2 * cfg.cpu_per_message_s) +
                               fm.link_bytes() * cfg.cpu_per_byte_s;
  const double host_step_s =
      message_cpu_s + (cfg.compute_on_cores ? compute_s : rebuild_s * compute_scale);
  a.host_bound = cfg.host_cpus > 0 && host_step_s > 0 ? cfg.host_cpus * batch / host_step_s : kInf;
  a.thread_bound = shard_thread_s > 0 ? batch / shard_thread_s : kInf;
  // Whatever the overlap, a worker's step holds two round trips it cannot hide: the first layer
  // that holds parameters waits for its pull (a request and a reply: the batch loads, and the
  // layers before it run, meanwhile), and the step ends when the last gradient's push is
  // acknowledged, which leaves when that layer's backward is over at the earliest; the backward of
  // the layers before it, and then worker-0's straggling sleep, run meanwhile. Every message
  // takes the link's latency and the receiving side's message latency at least. Each worker at
  // its own pace: under bsp the others follow the straggler in the long run, but one step ahead
  // of it, which a short run shows, so the bound that holds for every run is this one.
  // A straggler's compute stretches by its factor.
  const double one_way_s = cfg.latency_s + cfg.message_latency_s;
  a.latency_bound = 0;
  for (int w = 0; w < cfg.workers; ++w) {
    const double f = factor[std::size_t(w)];
    const double pull_s = std::max((overhead_s + before_fwd_s) * f, 2 * one_way_s) + held_s * f;
    const double step_s =
        pull_s + std::max(before_bwd_s * f + straggle[std::size_t(w)], 2 * one_way_s);
    a.latency_bound += step_s > 0 ? batch / step_s : kInf;
  }
  const bool straggling = cfg.straggler_s > 0;
  take_upper(a, straggling);
  // No overlap: compute, the pull phase and the push phase one after the other, each phase as
  // slow as its busiest link, plus a round trip each; where the host's cores are modelled, the
  // workers' compute shares them (real compute) and every worker-step's message work waits for
  // them too. So each term is at least what one bound counts, and serial <= upper.
  const double cpus = cfg.host_cpus > 0 ? double(cfg.host_cpus) : 0.0;
  const double shard_direction_s = B > 0 ? W * busiest / B : 0.0;
  const double compute_phase_s =
      cpus > 0 && cfg.compute_on_cores ? std::max(compute_s, W * compute_s / cpus) : compute_s;
  const double serial_s = compute_phase_s + 2 * shard_direction_s +
                          4 * (cfg.latency_s + cfg.message_cost_s + cfg.message_latency_s) +
                          2 * model_bytes * cfg.transit_s_per_byte + W * busiest_apply / lanes +
                          (cpus > 0 ? W * message_cpu_s / cpus : 0.0) + W * shard_thread_s +
                          transfers * thread_per_transfer_s;
  // Each term covers one bound's work, so this is never above `upper` (unit tests check it).
  // A worker's own link, and its compute, as slow as that worker's (stragglers).
  a.serial = rate([&](int w) {
    const double bw = link[std::size_t(w)];
    const double worker_direction_s = bw > 0 ? model_bytes / bw : 0.0;
    return serial_s + (factor[std::size_t(w)] - 1) * compute_phase_s +
           2 * std::max(0.0, worker_direction_s - shard_direction_s) + straggle[std::size_t(w)];
  });
  if (!std::isfinite(a.serial)) a.serial = a.upper;
  return a;
}

}  // namespace psbed::predictor
