// The checks of psbed launch's options, made before anything starts: a run that cannot work is
// refused with one line naming the flag, not found out after its nodes started.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cluster/launch.hpp"
#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/profile.hpp"
#include "core/straggler.hpp"
#include "core/units.hpp"
#include "ps/cluster_map.hpp"
#include "ps/http_server.hpp"
#include "ps/link.hpp"
#include "worker/net.hpp"
#include "workloads/dataset.hpp"

namespace psbed::cluster {

policy::PolicyOptions policy_options(const LaunchOptions& opt) {
  policy::PolicyOptions po;
  po.name = opt.policy, po.slice_params = opt.slice_params,
  po.partition_params = opt.partition_params;
  if (!opt.credit.empty())
    po.credit_bytes = std::int64_t(for_flag("--credit", [&] { return parse_bytes(opt.credit); }));
  return po;
}

void check_compute(const std::string& compute, const ModelSpec& spec, const std::string& flag) {
  if (compute == "real") return;
  if (compute.rfind("replay:", 0) != 0)
    throw Error(flag + " must be real or replay:<profile.json>, got '" + compute + "'");
  Profile::load(compute.substr(7)).check_matches(spec, flag + " " + compute);
}

// A profile's compute is per batch of its run: a run of another batch would replay, or be
// predicted with, another batch's times.
void check_profile_batch(const std::string& path, int batch, const std::string& flag) {
  const Profile p = Profile::load(path);
  if (p.batch > 0 && p.batch != batch)
    throw Error(flag + ": its run used batches of " + std::to_string(p.batch) +
                ", this run --batch " + std::to_string(batch) +
                " (the profiled compute is per batch: give --batch " + std::to_string(p.batch) +
                ", or profile a run of this batch)");
}

std::int64_t check_coordinator_settings(const std::string& partition_bytes, double heartbeat_s,
                                        double heartbeat_timeout_s) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error(what);
  };
  const std::string hb = fmt::format("{:g}", heartbeat_s);
  const std::string timeout = fmt::format("{:g}", heartbeat_timeout_s);
  const std::int64_t bytes =
      std::int64_t(for_flag("--partition-bytes", [&] { return parse_bytes(partition_bytes); }));
  need(bytes >= 4,
       "--partition-bytes must be at least 4 bytes (one float), got '" + partition_bytes + "'");
  // The nodes' own bounds (above 0, below 10^6 s), which they would refuse after the start.
  need(std::isfinite(heartbeat_s) && heartbeat_s > 0 && heartbeat_s < 1e6,
       "--heartbeat must be a number of seconds above 0 and below 10^6, got " + hb);
  need(heartbeat_timeout_s < 1e6, "--heartbeat-timeout must be below 10^6 s, got " + timeout);
  need(std::isfinite(heartbeat_timeout_s) && heartbeat_timeout_s >= 2 * heartbeat_s,
       "--heartbeat-timeout must be at least twice --heartbeat (" + hb + " s), got " + timeout);
  return bytes;
}

void check_launch_options(const LaunchOptions& o) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error(what);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  need(o.servers >= 1 && o.workers >= 1, "--servers and --workers must be at least 1, got " +
                                             std::to_string(o.servers) + " and " +
                                             std::to_string(o.workers));
  need(o.batch >= 1, "--batch must be at least 1, got " + std::to_string(o.batch));
  // Under sfb and hybrid the fc layers live on the workers, which checkpoint nothing.
  need(o.comm == "ps" ||
           ((o.checkpoint_every.empty() || o.checkpoint_every == "0") && o.resume.empty()),
       "--checkpoint-every and --resume need --comm ps: under --comm " + o.comm +
           " the workers hold the fc layers, and a checkpoint would not");
  need(o.replicas == 1 || o.servers >= 2,
       "--replicas 2 needs --servers 2 or more: a shard's copy lives on another shard");
  need(!o.push_pull || o.replicas == 1,
       "--push-pull with --replicas 2: a push's answer would say the update is safe before the "
       "backup has it");
  need(o.connections == 1 || o.replicas == 1, ps::kConnectionsWithReplicas);
  need(o.threads >= 1 && o.threads <= 4096,
       "--threads must be 1 to 4096, got " + std::to_string(o.threads));
  need(o.apply_threads >= 1 && o.apply_threads <= 1024,
       "--apply-threads must be 1 to 1024, got " + std::to_string(o.apply_threads));
  need(o.steps >= 0, "--steps must be 1 or more (or 0: --epochs), got " + std::to_string(o.steps));
  need(o.steps > 0 || o.epochs >= 1,
       "--epochs must be at least 1, got " + std::to_string(o.epochs));
  for (const auto& [flag, v] : {std::pair<const char*, double>{"--lr", o.lr},
                                {"--momentum", o.momentum},
                                {"--weight-decay", o.weight_decay}})
    need(std::isfinite(v) && v >= 0,
         std::string(flag) + " must be a number, 0 or more, got " + num(v));
  need(o.momentum < 1, "--momentum must be below 1, got " + num(o.momentum));
  const std::int64_t part_bytes =
      check_coordinator_settings(o.partition_bytes, o.heartbeat_s, o.heartbeat_timeout_s);
  need(o.slice_params >= 1,
       "--slice-params must be at least 1, got " + std::to_string(o.slice_params));
  need(o.partition_params >= 1,
       "--partition-params must be at least 1, got " + std::to_string(o.partition_params));
  need(o.timeout_s > 0, "--timeout must be above 0 seconds, got " + num(o.timeout_s));
  need(std::isfinite(o.straggler_ms) && o.straggler_ms >= 0,
       "--straggler-ms must be 0 or more, got " + num(o.straggler_ms));
  need(std::isfinite(o.start_stagger_ms) && o.start_stagger_ms >= 0,
       "--start-stagger-ms must be 0 or more, got " + num(o.start_stagger_ms));
  parse_stragglers(o.stragglers, o.workers);  // a worker the cluster has, each once
  const ModelSpec spec = load_model(o.model);
  // A shard that would hold no part serves nothing: more shards than the model has parts.
  const std::size_t parts = make_partition(spec, part_bytes, 1).parts.size();
  need(std::size_t(o.servers) <= parts,
       "--servers " + std::to_string(o.servers) + ": " + spec.name + " has " +
           std::to_string(parts) + " parts of at most " + o.partition_bytes +
           " (--partition-bytes), so " + std::to_string(o.servers - int(parts)) +
           " shard(s) would hold nothing: give at most " + std::to_string(parts) +
           " servers, or a smaller --partition-bytes");
  // The data the workers will load (a missing or misshapen data set is one line here, not every
  // worker's failure and a registration timeout).
  workloads::check_dataset(o.data, o.data_dir, spec.input, spec.classes, o.seed);
  check_compute(o.compute, spec, "--compute");
  if (o.compute.rfind("replay:", 0) == 0)
    check_profile_batch(o.compute.substr(7), o.batch, "--compute " + o.compute);
  // The dashboard's prediction (--profile) reads the profile the same way.
  if (!o.profile.empty()) {
    Profile::load(o.profile).check_matches(spec, "--profile " + o.profile);
    check_profile_batch(o.profile, o.batch, "--profile " + o.profile);
  }
}

void print_comm_routes(const std::string& comm, const nlohmann::json& summary) {
  if (comm == "ps") return;
  for (const auto& w : summary.value("per_worker", nlohmann::json::array())) {
    const auto layers = w.value("comm", nlohmann::json::object()).value("layers", nlohmann::json());
    if (!layers.is_array()) continue;
    std::string routes;
    for (const auto& l : layers)
      routes += (routes.empty() ? "" : ", ") + l.value("layer", std::string()) + " " +
                l.value("route", std::string());
    std::printf("comm %s: %s; %s sent %s of factors\n", comm.c_str(), routes.c_str(),
                w.value("name", std::string()).c_str(),
                format_bytes(w.value("bytes_factors", 0.0)).c_str());
    return;
  }
}

}  // namespace psbed::cluster
