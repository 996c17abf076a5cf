// A simulation's set-up from the profile, the model and the configuration, and its event loop.
#include "predictor/sim/simulation.hpp"

#include <chrono>
#include <cmath>
#include <random>

#include "core/error.hpp"

namespace psbed::predictor::sim {

Simulation::Simulation(const Profile& profile, const ModelSpec& spec, const SimConfig& cfg)
    : profile_(profile), spec_(spec), cfg_(cfg) {
  if (cfg.workers < 1) throw Error("simulation: workers must be at least 1");
  if (cfg.servers < 1) throw Error("simulation: servers must be at least 1");
  if (cfg.steps < 1) throw Error("simulation: steps must be at least 1");
  if (cfg.replicas != 1 && cfg.replicas != 2)
    throw Error("simulation: replicas must be 1 or 2, not " + std::to_string(cfg.replicas));
  if (const std::string why = push_pull_problem(cfg); !why.empty())
    throw Error("simulation: " + why);
  if (cfg.start_stagger_s < 0) throw Error("simulation: the start stagger must not be negative");
  if (!(cfg.compute_cpu_scale > 0) || !std::isfinite(cfg.compute_cpu_scale))
    throw Error("simulation: the compute's CPU scale must be a positive number");
  if (cfg.bandwidth_bytes_per_sec < 0 || cfg.latency_s < 0)
    throw Error("simulation: bandwidth and latency must not be negative");
  profile.check_matches(spec, "profile of " + profile.model);
  plan_ = make_partition(spec, cfg.partition_bytes, cfg.servers);
  W_ = cfg.workers, S_ = cfg.servers, L_ = int(spec.layers.size());
  // As the live worker refuses it: async has no step to gather the factors for.
  if (const std::string why = comm_problem(cfg.comm, cfg.mode); !why.empty()) throw Error(why);
  factors_ = factor_model(spec, cfg.comm, W_, S_, profile.batch, cfg.comm_cost());
  set_up_groups();
  // Factor traffic has its own connections, buffers and receiving threads: sized only where a
  // layer is SFB, so the ps route's simulation stays the same.
  const int peers = factors_.any() ? W_ : 0;
  warmup_ = cfg.warmup_steps >= 0 ? std::min(cfg.warmup_steps, cfg.steps - 1)
                                  : default_warmup_steps(cfg.steps);
  layer_floats_.assign(L_, 0);
  part_layer_.resize(plan_.parts.size());
  for (std::size_t i = 0; i < plan_.parts.size(); ++i) {
    part_layer_[i] = spec.tensors[plan_.parts[i].key].layer;
    if (factors_.sfb[std::size_t(part_layer_[i])]) continue;  // neither pulled nor pushed
    layer_floats_[part_layer_[i]] += plan_.parts[i].numel;
    total_floats_ += plan_.parts[i].numel;
  }
  parts_of_layer_.resize(L_);
  for (int l = 0; l < L_; ++l) {
    if (factors_.sfb[std::size_t(l)]) continue;  // its gradient goes as factors
    for (int t : spec.layers[l].tensors)
      for (int i : plan_.parts_of_key[t]) parts_of_layer_[l].push_back(i);
  }
  const bool tracing = !cfg.trace_dir.empty();
  workers_.reserve(std::size_t(W_));
  for (int w = 0; w < W_; ++w) {
    policy::PolicyOptions po = cfg.policy;
    po.seed = cfg.policy.seed + std::uint64_t(w);
    workers_.emplace_back(profile, cfg.seed * 1000003 + std::uint64_t(w), policy::make_policy(po));
    workers_.back().answers = PushPullAnswers(cfg.mode.kind != Consistency::Kind::kAsync);
    if (tracing)
      workers_.back().trace = std::make_unique<TraceRecorder>("worker-" + std::to_string(w));
  }
  parts_.resize(plan_.parts.size());
  for (std::size_t i = 0; i < plan_.parts.size(); ++i) {
    PartState& p = parts_[i];
    p.bytes = plan_.parts[i].bytes();
    p.got.assign(W_, 0);
    p.completed.assign(W_, 0);
    p.at_min = W_;
  }
  // The apply lane of each part: the live shard's hash of (key, part) over its lanes.
  const int lanes = std::max(1, cfg.apply_lanes);
  lanes_.resize(std::size_t(S_) * lanes);
  for (const Part& p : plan_.parts)
    part_lane_.push_back(p.shard * lanes +
                         int((std::uint64_t(p.key) * 1000003u + std::uint64_t(p.part)) % lanes));
  lane_started_.assign(lanes_.size(), 0.0);
  if (tracing)
    for (int s = 0; s < S_; ++s)
      server_traces_.push_back(std::make_unique<TraceRecorder>("server-" + std::to_string(s)));
  // Nodes: workers 0..W-1, servers W..W+S-1; link 2n is node n's uplink, 2n+1 its downlink.
  const int nodes = W_ + S_;
  link_cap_.assign(2 * nodes, 0);
  link_n_.assign(2 * nodes, 0);
  // A shard's forwards to its backup have a connection each (--replicas 2 on 2 shards or more;
  // on one shard, as the live one, there is nothing to replicate to).
  replica_channel0_ = 2 * std::size_t(W_) * S_ + std::size_t(W_) * peers;
  const int forwarders = cfg.replicas > 1 && S_ > 1 ? S_ : 0;
  channels_.resize(replica_channel0_ + std::size_t(forwarders));
  events_.set_slots(channels_.size(), 2 * std::size_t(W_ + S_) + std::size_t(peers));
  bucket_ = cfg.link_model == LinkModel::kBucket;
  if (cfg.arrival_jitter_s < 0) throw Error("simulation: the arrival jitter must not be negative");
  connection_last_.assign(channels_.size(), -kInf);
  jitter_rng_ = SplitMix(cfg.seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull);
  rx_free_.assign(std::size_t(nodes + peers), -kInf);  // then the workers' factor threads
  if (!(cfg.start_spread_s >= 0)) throw Error("simulation: the start spread must not be negative");
  SplitMix start_rng(cfg.seed * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull);
  for (int w = 0; w < W_; ++w) start_delay_.push_back(cfg.start_spread_s * start_rng.uniform());
  if (cfg.host_cpus > 0 && cfg.cpu_per_message_s + cfg.cpu_per_byte_s > 0)
    cores_.resize(std::size_t(cfg.host_cpus));
  if (!(cfg.cpu_contention >= 0) || !std::isfinite(cfg.cpu_contention))
    throw Error("simulation: the host's contention must be a number, 0 or more");
  contention_scale_ = contention_scale(cfg_);
  cfg_ = with_contention(cfg_);
  if (!(cfg.host_cv >= 0) || !std::isfinite(cfg.host_cv))
    throw Error("simulation: the host's run-to-run variation must be a number, 0 or more");
  if (cfg.host_cv > 0) {
    std::mt19937_64 g(cfg.seed * 0xA24BAED4963EE407ull + 0x9FB21C651E98DF25ull);
    host_factor_ = std::exp(std::normal_distribution<double>(0, cfg.host_cv)(g));
    cfg_.message_cost_s *= host_factor_, cfg_.message_latency_s *= host_factor_;
    cfg_.cpu_per_message_s *= host_factor_, cfg_.cpu_per_byte_s *= host_factor_;
    cfg_.transit_s_per_byte *= host_factor_;
    if (cfg_.compute_on_cores) cfg_.compute_cpu_scale *= host_factor_;
    // psbed's link emulation paces in software on the same host (ps/link.cpp): as fast as it is.
    if (bucket_) cfg_.bandwidth_bytes_per_sec /= host_factor_;
  }
  set_up_links();
  egress_free_.assign(std::size_t(nodes), -kInf);
  ingress_free_.assign(std::size_t(nodes), -kInf);
  if (bucket_) {
    threads_.resize(2 * std::size_t(W_) + lanes_.size() + std::size_t(S_));
    replica_buffer0_ = std::size_t(W_) * S_ + S_ + std::size_t(W_) * peers;
    buffers_.resize(replica_buffer0_ + std::size_t(forwarders));
    egress_.resize(std::size_t(nodes));
    // A shard's peers: the workers, then its backup (peer W).
    for (int n = 0; n < nodes; ++n)
      egress_[n].per_peer.resize(std::size_t(n < W_ ? S_ + peers : W_ + (forwarders > 0)));
  }
  for (int w = 0; w < W_; ++w)
    for (int s = 0; s < S_; ++s) {
      Channel& push = channels_[push_channel(w, s)];
      push.up_link = 2 * w, push.down_link = 2 * (W_ + s) + 1;
      Channel& pull = channels_[pull_channel(w, s)];
      pull.up_link = 2 * (W_ + s), pull.down_link = 2 * w + 1;
    }
  for (int s = 0; s < forwarders; ++s) {
    Channel& f = channels_[replica_channel(s)];
    f.up_link = 2 * (W_ + s), f.down_link = 2 * (W_ + (s + 1) % S_) + 1;
  }
  set_up_factors();
}

// The fast mode's groups (SimConfig::groups): the stragglers (worker-0 too, under straggler_s)
// alone and first, then the other workers in groups as even as possible. Every worker simulated
// where a group could not stand for its members: outside bsp (async workers drift apart: groups
// of 3 came out 24% slow), SFB layers (each worker has other peers), the host's cores (a group's
// compute would queue on one core), traces (one per worker).
void Simulation::set_up_groups() {
  const int n = cfg_.workers;
  copies_.assign(std::size_t(n), 1);
  sim_of_.resize(std::size_t(n));
  for (int w = 0; w < n; ++w) sim_of_[std::size_t(w)] = w;
  const bool fast =
      cfg_.fidelity == Fidelity::kFast || (cfg_.fidelity == Fidelity::kAuto && n > kFastAbove);
  if (!fast || cfg_.groups <= 0 || cfg_.groups >= n || cfg_.mode.kind != Consistency::Kind::kBsp ||
      factors_.any() || !cfg_.trace_dir.empty() ||
      (cfg_.host_cpus > 0 && cfg_.cpu_per_message_s + cfg_.cpu_per_byte_s > 0))
    return;
  check_stragglers(cfg_.stragglers, n);
  std::vector<char> solo(std::size_t(n), 0);
  if (cfg_.straggler_s > 0) solo[0] = 1;
  for (const Straggler& s : cfg_.stragglers) solo[std::size_t(s.worker)] = 1;
  copies_.clear();
  for (int w = 0; w < n; ++w)
    if (solo[std::size_t(w)]) sim_of_[std::size_t(w)] = int(copies_.size()), copies_.push_back(1);
  const int solos = int(copies_.size()), rest = n - solos;
  const int groups = std::min(rest, std::max(1, cfg_.groups - solos));
  for (int g = 0; g < groups; ++g) copies_.push_back(rest / groups + (g < rest % groups));
  for (int w = 0, g = solos, in_group = 0; w < n; ++w) {
    if (solo[std::size_t(w)]) continue;
    sim_of_[std::size_t(w)] = g;
    if (++in_group == copies_[std::size_t(g)]) ++g, in_group = 0;
  }
  for (Straggler& s : cfg_.stragglers) s.worker = sim_of_[std::size_t(s.worker)];
  W_ = int(copies_.size());
}

// Each node's link rate and burst, and each worker's compute factor, from the cluster's
// bandwidth and the stragglers.
void Simulation::set_up_links() {
  check_stragglers(cfg_.stragglers, W_);
  const int nodes = W_ + S_;
  node_bw_.assign(std::size_t(nodes), cfg_.bandwidth_bytes_per_sec);
  compute_factor_.assign(std::size_t(W_), 1.0);
  for (const Straggler& s : cfg_.stragglers) {
    if (s.bandwidth_bytes_per_sec > 0)  // paced, as the cluster's link, at the draw's host speed
      node_bw_[std::size_t(s.worker)] = s.bandwidth_bytes_per_sec / (bucket_ ? host_factor_ : 1);
    compute_factor_[std::size_t(s.worker)] = s.compute_factor;
  }
  node_burst_s_.assign(std::size_t(nodes), 0.0);
  for (int n = 0; n < nodes; ++n) {
    const double bw = node_bw_[std::size_t(n)];
    // As ps/link.cpp's buckets: 1 ms of line rate, at least 64 KiB.
    if (bw > 0) node_burst_s_[std::size_t(n)] = std::max(64.0 * 1024, bw * 1e-3) / bw;
  }
}

SimResult Simulation::run() {
  const auto wall0 = std::chrono::steady_clock::now();
  for (int w = 0; w < W_; ++w) advance(w);
  Event e;
  while (events_.pop(e)) {
    now_ = e.t;
    ++processed_;
    switch (e.type) {
      case EventType::kComputeDone:
        compute_done(e.a);
        break;
      case EventType::kDeliver:
        deliver(e.a);
        break;
      case EventType::kChannelDone:
        channel_done(e.a);
        break;
      case EventType::kApplyDone:
        apply_done(e.a);
        break;
      case EventType::kEgressDone:
        egress_done(e.a);
        break;
      case EventType::kFactorsLeft:
        factors_left(e.a);
        break;
    }
    // Rates change only when a pair starts or stops sending; events at one instant are
    // settled together so a burst of sends costs one allocation.
    if (network_dirty_ && (events_.empty() || events_.top()->t > now_)) reallocate();
  }
  SimResult r;
  for (int w = 0; w < W_; ++w)
    if (workers_[w].phase != Phase::kDone)
      throw Error("simulation stalled: worker " + std::to_string(w) + " stopped at step " +
                  std::to_string(workers_[w].step) + " (a bug in the simulator or the policy)");
  for (int g : sim_of_) {  // a group's figures are each of its members'
    const Worker& w = workers_[std::size_t(g)];
    const double span = w.end - w.steady_start;
    const double sps = span > 0 ? double(cfg_.steps - warmup_) / span : 0.0;
    r.worker_steps_per_sec.push_back(sps);
    r.steps_per_sec += sps;
    r.simulated_seconds = std::max(r.simulated_seconds, w.end);
  }
  r.simulated_workers = W_;
  r.images_per_sec = r.steps_per_sec * profile_.batch;
  r.seed = cfg_.seed;
  r.seeds_min_images_per_sec = r.seeds_max_images_per_sec = r.images_per_sec;
  r.draws_images_per_sec = {r.images_per_sec};
  r.band = band_of(r.draws_images_per_sec);
  r.host_factor = host_factor_;
  r.events = processed_;
  r.host_cpu_per_step_s = booked_cpu_s_ / (double(cfg_.workers) * double(cfg_.steps));
  r.cpu_contention_scale = contention_scale_;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!cfg_.trace_dir.empty()) write_traces();
  return r;
}

}  // namespace psbed::predictor::sim
