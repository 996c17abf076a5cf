#include "predictor/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "predictor/parallel.hpp"
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor {

LinkModel parse_link_model(const std::string& text) {
  if (text == "fair") return LinkModel::kFair;
  if (text == "bucket") return LinkModel::kBucket;
  throw Error("unknown link model '" + text + "', expected fair or bucket");
}

std::string to_string(LinkModel m) { return m == LinkModel::kFair ? "fair" : "bucket"; }

Fidelity parse_fidelity(const std::string& text) {
  if (text == "exact") return Fidelity::kExact;
  if (text == "fast") return Fidelity::kFast;
  if (text == "auto") return Fidelity::kAuto;
  throw Error("unknown fidelity '" + text + "', expected exact, fast or auto");
}

// Under p3's credit, groups of 16 workers and more all came out alike, and 10-13% off the exact
// mode at 256-1,024 workers on bucket links, while groups of 8 came within 0-3%
// (docs/results/simulator-speed.md): under a credit the finer grouping has at most kCheckMembers
// workers a group. Stragglers are alone in groups of their own, out of the same count.
std::pair<int, int> fast_check_groups(const SimConfig& c) {
  const int coarse = std::max(1, c.groups / 2), fine = 2 * c.groups;
  if (!policy::uses_credit(c.policy.name)) return {coarse, fine};
  std::set<int> solo;
  if (c.straggler_s > 0) solo.insert(0);
  for (const Straggler& s : c.stragglers) solo.insert(s.worker);
  const int solos = int(solo.size()), rest = std::max(0, c.workers - solos);
  return {coarse, std::max(fine, solos + (rest + kCheckMembers - 1) / kCheckMembers)};
}

std::string to_string(Fidelity f) {
  return f == Fidelity::kExact ? "exact" : f == Fidelity::kFast ? "fast" : "auto";
}

void take_host_costs(const Profile& profile, SimConfig& c) {
  c.message_cost_s = profile.message_cost_us * 1e-6;
  c.message_latency_s = profile.message_latency_us * 1e-6;
  c.transit_s_per_byte = profile.transit_ns_per_byte * 1e-9;
  c.host_cpus = profile.host_cpus;
  c.cpu_per_message_s = profile.cpu_per_message_us * 1e-6;
  c.cpu_per_byte_s = profile.cpu_per_byte_ns * 1e-9;
  c.cpu_per_data_message_s = profile.cpu_per_data_message_us * 1e-6;
  c.cpu_contention = profile.contention;
}

std::int64_t default_warmup_steps(std::int64_t steps) { return warmup_steps(steps); }

std::string push_pull_problem(const SimConfig& c) {
  if (!c.push_pull) return "";
  if (c.replicas > 1) return "--push-pull with --replicas 2: launch refuses it (no backup's copy)";
  return "";
}

double contention_scale(const SimConfig& c) {
  if (!(c.cpu_contention > 0) || !c.compute_on_cores || c.host_cpus <= 0 ||
      !(c.cpu_per_message_s + c.cpu_per_byte_s > 0))
    return 1;
  const double over =
      std::clamp(double(c.workers + c.servers - c.host_cpus) / c.host_cpus, 0.0, 1.0);
  return 1 + c.cpu_contention * over;
}

void scale_cpu_costs(SimConfig& c, double f) {
  c.cpu_per_message_s *= f, c.cpu_per_byte_s *= f, c.message_cost_s *= f, c.compute_cpu_scale *= f;
  c.cpu_per_data_message_s *= f;
}

SimConfig with_contention(SimConfig c) {
  scale_cpu_costs(c, contention_scale(c));
  c.cpu_contention = 0;
  return c;
}

SimResult simulate(const Profile& profile, const ModelSpec& spec, const SimConfig& config) {
  sim::Simulation sim(profile, spec, config);
  return sim.run();
}

namespace {

// The run with the median images/s of one configuration's seeds (the lower middle one for an
// even count), with events and wall_seconds summed over them and the seeds' range.
SimResult median_of(std::vector<SimResult> runs) {
  std::uint64_t events = 0;
  double wall = 0;
  for (const SimResult& r : runs) events += r.events, wall += r.wall_seconds;
  std::stable_sort(runs.begin(), runs.end(), [](const SimResult& a, const SimResult& b) {
    return a.images_per_sec < b.images_per_sec;
  });
  SimResult r = runs[(runs.size() - 1) / 2];
  r.events = events, r.wall_seconds = wall;
  r.seeds_min_images_per_sec = runs.front().images_per_sec;
  r.seeds_max_images_per_sec = runs.back().images_per_sec;
  r.draws_images_per_sec.clear();
  for (const SimResult& x : runs) r.draws_images_per_sec.push_back(x.images_per_sec);
  r.band = band_of(r.draws_images_per_sec);
  return r;
}

// The fast mode checks itself: a figure that moves when the groups change is one they do not
// hold. Neither half nor twice the groups alone caught every figure off by more than 2%. Groups
// finer than twice as many run for fewer steps (as many simulated worker-steps as `c`'s own run,
// kCheckSteps at least, so that run costs about what one seed of the answer does) and are set
// against the figure of `c`'s own groups at those steps; such figures held from 60 steps on.
void check_grouping(const Profile& profile, const ModelSpec& spec, const SimConfig& c,
                    SimResult& median) {
  const auto [coarse, fine] = fast_check_groups(c);
  for (int groups : {coarse, fine}) {
    SimConfig other = c;
    other.groups = groups;
    double against = median.images_per_sec;
    if (groups > 2 * c.groups) {
      other.steps = std::max(std::min(c.steps, kCheckSteps), c.steps * c.groups / groups);
      if (other.steps < c.steps) {
        // A warm-up given in steps shrinks with them, so the runs keep a steady window.
        if (c.warmup_steps >= 0) other.warmup_steps = c.warmup_steps * other.steps / c.steps;
        SimConfig same = c;
        same.steps = other.steps, same.warmup_steps = other.warmup_steps;
        const SimResult s = simulate(profile, spec, same);
        against = s.images_per_sec;
        median.events += s.events, median.wall_seconds += s.wall_seconds;
      }
    }
    const SimResult o = simulate(profile, spec, other);
    // A grouping that trains nothing where the other does moved as far as it can.
    const double moved = against > 0            ? 100 * (o.images_per_sec / against - 1)
                         : o.images_per_sec > 0 ? 100.0
                                                : 0.0;
    if (std::abs(moved) > std::abs(median.fast_check_pct)) median.fast_check_pct = moved;
    median.events += o.events, median.wall_seconds += o.wall_seconds;
  }
}

// Seed k of a configuration: seed + k for the compute draws, the jitter and tf-random; traces
// only if `trace`.
SimConfig seeded(const SimConfig& config, int k, bool trace) {
  SimConfig c = config;
  c.seed += std::uint64_t(k), c.policy.seed += std::uint64_t(k);
  // A traced configuration's draws are all simulated worker by worker, as its traced one is
  // (SimConfig::fidelity): the traces are the median draw's.
  if (!trace && !c.trace_dir.empty()) c.trace_dir.clear(), c.fidelity = Fidelity::kExact;
  return c;
}

}  // namespace

std::vector<SimResult> simulate_all(
    const Profile& profile, const ModelSpec& spec, const std::vector<SimConfig>& configs, int seeds,
    int jobs, const std::function<void(std::size_t, const SimResult&)>& done) {
  if (seeds < 1) throw Error("simulation: seeds must be at least 1");
  if (jobs < 0) throw Error("simulation: jobs must be 0 (one per core) or more");
  const std::size_t tasks = configs.size() * std::size_t(seeds);
  std::vector<std::vector<SimResult>> runs(configs.size(), std::vector<SimResult>(seeds));
  std::vector<int> left(configs.size(), seeds);
  std::vector<SimResult> results(configs.size());
  std::mutex mu;  // guards runs, left, results and the calls of done
  // Task t is seed t % seeds of configuration t / seeds: configurations are taken in order,
  // each one's seeds together, so the first ones finish first.
  parallel_for(tasks, worker_threads(jobs, tasks), [&](std::size_t t) {
    const std::size_t i = t / std::size_t(seeds);
    const int k = int(t % std::size_t(seeds));
    const bool traced = !configs[i].trace_dir.empty();
    SimResult r = simulate(profile, spec, seeded(configs[i], k, traced && seeds == 1));
    SimResult median;
    {
      std::lock_guard<std::mutex> lock(mu);
      runs[i][std::size_t(k)] = std::move(r);
      if (--left[i] > 0) return;
      median = median_of(std::move(runs[i]));
    }
    // The traces are the median run's: its seed once more, tracing (seeded, so the same run).
    const int median_k = int(median.seed - configs[i].seed);
    if (traced && seeds > 1) simulate(profile, spec, seeded(configs[i], median_k, true));
    if (configs[i].check_groups && median.simulated_workers < configs[i].workers &&
        median.images_per_sec > 0)
      check_grouping(profile, spec, seeded(configs[i], median_k, false), median);
    std::lock_guard<std::mutex> lock(mu);
    results[i] = std::move(median);
    if (done) done(i, results[i]);
  });
  return results;
}

SimResult simulate_seeds(const Profile& profile, const ModelSpec& spec, const SimConfig& config,
                         int seeds) {
  return simulate_all(profile, spec, {config}, seeds, 1).front();
}

}  // namespace psbed::predictor
