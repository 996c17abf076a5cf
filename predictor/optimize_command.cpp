// `psbed optimize`: a profile and a node budget to the best configurations, by images/s and by
// images/s per node. The search: worker counts up to the budget, shard counts, policies and the
// settings of those that have some; configurations that simulate alike are simulated once; the
// leaders are simulated again with more seeds and ranked by their median.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/units.hpp"
#include "predictor/commands.hpp"
#include "predictor/report.hpp"
#include "predictor/sim_flags.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

namespace {

// What a policy's settings do in a simulation, two values that act alike made one: a slice (or
// bytescheduler's partition) of at least the largest part sends every part whole, and a credit
// (prophet: a block) of at least the model's bytes never holds a transfer back, since a worker
// has at most one step's pulls, or its pushes, in flight (pushes start once every pull has
// arrived, and a step ends when its pushes are acknowledged). Configurations of one such key
// simulate alike, event for event.
nlohmann::json acting_settings(const SimConfig& c, std::int64_t largest_part,
                               std::int64_t model_bytes) {
  const policy::PolicyOptions& p = c.policy;
  auto cut = [&](std::int64_t n) {
    return n >= largest_part ? nlohmann::json("whole parts") : nlohmann::json(n);
  };
  const std::int64_t credit = policy::credit_in_effect(p);
  return {{"workers", c.workers},
          {"servers", c.servers},
          {"policy", p.name},
          {"slice", policy::uses_slice_params(p.name) ? cut(p.slice_params) : nlohmann::json()},
          {"partition",
           policy::uses_partition_params(p.name) ? cut(p.partition_params) : nlohmann::json()},
          {"credit", !policy::uses_credit(p.name) ? nlohmann::json()
                     : credit >= model_bytes      ? nlohmann::json("unbounded")
                                                  : nlohmann::json(credit)}};
}

// optimize's name for a configuration: the policy and the settings it uses.
std::string describe_settings(const policy::PolicyOptions& p) {
  std::string d = p.name;
  if (policy::uses_slice_params(p.name)) d += " slice " + std::to_string(p.slice_params);
  if (policy::uses_partition_params(p.name))
    d += " partition " + std::to_string(p.partition_params);
  if (policy::uses_credit(p.name))
    d += (p.name == "prophet" ? " block " : " credit ") +
         format_bytes(double(policy::credit_in_effect(p)));
  return d;
}

// The base configuration of every point; every flag checked before the search.
SimConfig optimize_base(const OptimizeOptions& o, const Profile& profile) {
  SimConfig base = base_config(profile, o.sim);
  base.mode = for_flag("--mode", [&] { return Consistency::parse(o.mode); });
  if (const std::string why = comm_problem(base.comm, base.mode); !why.empty()) throw Error(why);
  if (const std::string why = push_pull_problem(base); !why.empty()) throw Error(why);
  if (o.max_nodes < 2 || o.max_nodes > kOptimizeMaxNodes)
    throw Error("optimize: --max-nodes must be 2 (one server and one worker) to " +
                std::to_string(kOptimizeMaxNodes) + ", got " + std::to_string(o.max_nodes));
  if (o.max_servers < 1) throw Error("optimize: --max-servers must be at least 1");
  if (o.top < 1) throw Error("optimize: --top must be at least 1");
  if (base.replicas > 1 && (o.max_servers < 2 || o.max_nodes < 3))
    throw Error(
        "optimize: --replicas 2 needs --max-servers 2 or more and --max-nodes 3 or more: "
        "a shard's copy lives on another shard");
  for (const auto& name : expand_policies(o.policies)) {  // an unknown name: before the search
    policy::PolicyOptions po = base.policy;
    po.name = name;
    for_flag("--policy", [&] { policy::check_policy_options(po); });
  }
  return base;
}

// The settings searched, per policy that has some.
struct SearchSpace {
  std::vector<std::int64_t> slices, p3_credits, partitions, bs_credits;
};

// The dimensions searched unless a flag fixes them (--slice-params, --partition-params,
// --credit, `--credit default` included: the policy's own): then every configuration takes the
// flag's value.
SearchSpace search_space(const OptimizeOptions& o, const SimConfig& base) {
  SearchSpace x;
  const bool credit_fixed = o.credit_given || !o.sim.credit.empty();
  x.slices = o.slice_params_given ? std::vector<std::int64_t>{o.sim.slice_params}
                                  : std::vector<std::int64_t>{10000, 40000, 160000};
  x.p3_credits = credit_fixed ? std::vector<std::int64_t>{base.policy.credit_bytes}
                              : std::vector<std::int64_t>{1 << 20, 4 << 20, 16 << 20};
  x.partitions = o.partition_params_given ? std::vector<std::int64_t>{o.sim.partition_params}
                                          : std::vector<std::int64_t>{250000, 1000000};
  x.bs_credits = credit_fixed ? std::vector<std::int64_t>{base.policy.credit_bytes}
                              : std::vector<std::int64_t>{4 << 20, 16000000};
  return x;
}

// Every configuration of the search, up to `parts` shards (a shard beyond the model's parts
// would hold nothing: launch refuses it). With two copies, from two shards on (launch refuses
// one).
std::vector<SimConfig> searched_configs(const OptimizeOptions& o, const SimConfig& base,
                                        const SearchSpace& x, int parts) {
  std::vector<SimConfig> searched;
  const bool copies = base.replicas > 1;
  for (int s = copies ? 2 : 1; s <= std::min({o.max_servers, o.max_nodes - 1, parts}); ++s) {
    // Worker counts 1, 2, 3, 4, 6, 8, 12, 16, ... and the most the node budget allows.
    std::vector<int> counts;
    for (int base_w = 1; base_w <= o.max_nodes - s; base_w *= 2)
      for (int w : {base_w, base_w + base_w / 2})
        if (w <= o.max_nodes - s && (counts.empty() || counts.back() < w)) counts.push_back(w);
    if (counts.back() != o.max_nodes - s) counts.push_back(o.max_nodes - s);
    for (int w : counts)
      for (const auto& pol : expand_policies(o.policies)) {
        SimConfig c = base;
        c.workers = w, c.servers = s, c.policy.name = pol;
        if (pol == "p3") {
          for (std::int64_t slice : x.slices)
            for (std::int64_t credit : x.p3_credits) {
              c.policy.slice_params = slice, c.policy.credit_bytes = credit;
              searched.push_back(c);
            }
        } else if (pol == "bytescheduler") {
          for (std::int64_t part : x.partitions)
            for (std::int64_t credit : x.bs_credits) {
              c.policy.partition_params = part, c.policy.credit_bytes = credit;
              searched.push_back(c);
            }
        } else {
          searched.push_back(c);
        }
      }
  }
  return searched;
}

// The configurations simulated: the searched ones, those that act alike merged into the first.
struct Grid {
  std::vector<SimConfig> configs;
  std::vector<std::vector<SimConfig>> same;  // configs[i]'s look-alikes
  std::int64_t largest_part = 0;             // parameters of the largest part, at any shard count
  std::int64_t model_bytes = 0;
};

// Configurations that simulate alike (a credit no step can fill, a slice no part needs) are
// simulated once, as the first of them, and listed as one: the others ride along as `same`.
Grid merge_alike(const OptimizeOptions& o, const ModelSpec& spec, const SimConfig& base,
                 const std::vector<SimConfig>& searched, int parts) {
  Grid g;
  for (int s = 1; s <= std::min({o.max_servers, o.max_nodes - 1, parts}); ++s)
    for (const Part& part : make_partition(spec, base.partition_bytes, s).parts)
      g.largest_part = std::max(g.largest_part, part.numel);
  for (const auto& t : spec.tensors) g.model_bytes += t.bytes();
  std::map<std::string, std::size_t> first_of;
  for (const SimConfig& c : searched) {
    const auto [at, fresh] = first_of.emplace(
        acting_settings(c, g.largest_part, g.model_bytes).dump(), g.configs.size());
    if (fresh) {
      g.configs.push_back(c), g.same.emplace_back();
    } else {
      g.same[at->second].push_back(c);
    }
  }
  return g;
}

// Progress on stderr every ten configurations: "[10/374] simulated".
std::function<void(std::size_t, const SimResult&)> progress(const char* what, std::size_t total) {
  return [what, total, finished = std::size_t(0)](std::size_t, const SimResult&) mutable {
    if (++finished % 10 == 0 || finished == total)
      std::fprintf(stderr, "[%zu/%zu] %s\n", finished, total, what);
  };
}

struct Point {
  SimConfig c;
  SimResult r;
  std::size_t config = 0;  // index into the grid
  double ips() const { return r.images_per_sec; }
};
bool by_ips(const Point& a, const Point& b) { return a.ips() > b.ips(); }
bool by_ips_per_node(const Point& a, const Point& b) {
  return a.ips() / (a.c.workers + a.c.servers) > b.ips() / (b.c.workers + b.c.servers);
}

// The first `k` points of each ranking, by images/s and by images/s per node, together and in
// the points' order.
std::vector<std::size_t> leading(const std::vector<Point>& points, std::size_t k) {
  std::vector<char> lead(points.size(), 0);
  for (auto better : {by_ips, by_ips_per_node}) {
    std::vector<std::size_t> order(points.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return better(points[a], points[b]); });
    for (std::size_t i = 0; i < std::min(k, order.size()); ++i) lead[order[i]] = 1;
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (lead[i]) out.push_back(i);
  return out;
}

// The search's figures: every grid configuration's, and the ranked points (the leaders,
// confirmed with more seeds, where --confirm-seeds asks for more than the search's).
struct Search {
  std::vector<SimResult> results;  // per grid configuration: the search's, else the scan's
  std::vector<SimResult> scanned;  // per grid configuration, where the search was scanned first
  std::vector<char> searched;      // per grid configuration: simulated by the search proper
  std::vector<Point> points;
  std::vector<SimResult> confirmed;
  std::vector<const SimResult*> confirmed_of;  // per grid configuration: into confirmed, or null
  int seeds = 1;                               // the seeds behind the points' figures
  Fidelity search_fidelity = Fidelity::kExact, confirm_fidelity = Fidelity::kExact;
  double scan_s = 0, search_s = 0, confirm_s = 0;  // wall time of each
  std::int64_t scan_steps = 0;                     // 0: no scan
};

// A large search is scanned first: every configuration at a third of the steps and, grouped,
// half the groups, about a fifth of the cost. The first 8 x --top of each ranking by the scan
// (at least 5% of the configurations) go on to the search proper, whose leaders are confirmed.
// A scan ranks well enough to keep the leaders, since the steady state shows within a few
// steps, and the leaders' figures all come from the full passes.
constexpr std::size_t kScanAbove = 200;  // configurations
constexpr std::int64_t kScanMinSteps = 15;

bool scanning(const OptimizeOptions& o, std::size_t configs, bool confirming) {
  if (o.scan == "off") return false;
  if (o.scan == "on") return true;
  return confirming && configs > kScanAbove && o.sim.steps / 3 >= kScanMinSteps;
}

// The scan of `search`; returns the configurations kept for the search proper, in its order.
std::vector<std::size_t> scan(const OptimizeOptions& o, const Profile& profile,
                              const ModelSpec& spec, const std::vector<SimConfig>& search,
                              Search& x) {
  std::vector<SimConfig> quick = search;
  x.scan_steps = std::max(kScanMinSteps, o.sim.steps / 3);
  for (SimConfig& c : quick) {
    c.steps = std::min(c.steps, x.scan_steps);
    c.groups = std::max(4, c.groups / 2);
    c.check_groups = false;
  }
  announce("optimize: scan", quick.size(), " at " + std::to_string(x.scan_steps) + " steps", 1,
           o.sim.jobs);
  const auto t0 = std::chrono::steady_clock::now();
  x.scanned = simulate_all(profile, spec, quick, 1, o.sim.jobs, progress("scanned", quick.size()));
  x.scan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<Point> scanned;
  for (std::size_t i = 0; i < search.size(); ++i) scanned.push_back({quick[i], x.scanned[i], i});
  return leading(scanned, std::max(8 * std::size_t(o.top), (search.size() + 19) / 20));
}

// One draw can put a configuration on the edge between two regimes (workers in lockstep or
// drifted apart) at the top by chance. The leaders of the search, the first 2 x --top of each
// ranking, are simulated again with --confirm-seeds seeds and ranked by their median, as
// predict and validate give it.
void confirm_leaders(const OptimizeOptions& o, const Profile& profile, const ModelSpec& spec,
                     Search& x) {
  const std::vector<std::size_t> leaders = leading(x.points, 2 * std::size_t(o.top));
  std::vector<SimConfig> again;
  for (std::size_t i : leaders) {
    again.push_back(x.points[i].c);
    again.back().fidelity = x.confirm_fidelity, again.back().check_groups = true;
  }
  announce("optimize: the leaders again", again.size(), "", o.confirm_seeds, o.sim.jobs);
  x.confirmed = simulate_all(profile, spec, again, o.confirm_seeds, o.sim.jobs,
                             progress("confirmed", again.size()));
  std::vector<Point> confirmed_points;
  for (std::size_t k = 0; k < again.size(); ++k) {
    const std::size_t config = x.points[leaders[k]].config;  // a scan leaves out some
    confirmed_points.push_back({again[k], x.confirmed[k], config});
    x.confirmed_of[config] = &x.confirmed[k];
  }
  x.points = std::move(confirmed_points);
  x.seeds = o.confirm_seeds;
}

// A configuration's name, with its look-alikes: "p3 slice 10000 credit 1.00 MiB (same: credit
// 4.00 MiB, 16.00 MiB)".
std::string describe(const Point& p, const Grid& g) {
  std::string d = describe_settings(p.c.policy);
  const auto& others = g.same[p.config];
  if (others.empty()) return d;
  auto values = [&](const char* what, auto get, auto show) {
    std::vector<std::int64_t> seen{get(p.c.policy)};
    std::string list;
    for (const SimConfig& c : others)
      if (std::find(seen.begin(), seen.end(), get(c.policy)) == seen.end()) {
        seen.push_back(get(c.policy));
        list += std::string(list.empty() ? what : ", ") + show(get(c.policy));
      }
    return list;
  };
  std::string alike;
  for (const std::string& v :
       {values(
            "slice ", [](const policy::PolicyOptions& x) { return x.slice_params; },
            [](std::int64_t n) { return std::to_string(n); }),
        values(
            "partition ", [](const policy::PolicyOptions& x) { return x.partition_params; },
            [](std::int64_t n) { return std::to_string(n); }),
        values(
            p.c.policy.name == "prophet" ? "block " : "credit ",
            [](const policy::PolicyOptions& x) { return policy::credit_in_effect(x); },
            [](std::int64_t n) { return format_bytes(double(n)); })})
    if (!v.empty()) alike += (alike.empty() ? "" : "; ") + v;
  return d + " (same: " + alike + ")";
}

// A look-alike's settings, as the JSON lists them under `same`.
nlohmann::json settings_json(const SimConfig& c) {
  return nlohmann::json{{"slice_params", c.policy.slice_params},
                        {"partition_params", c.policy.partition_params},
                        {"credit_bytes", c.policy.credit_bytes}};
}

// Every configuration the search simulated (not only the ranked top).
nlohmann::json simulated_json(const OptimizeOptions& o, const Grid& g, const Search& x) {
  nlohmann::json simulated = nlohmann::json::array();
  for (std::size_t i = 0; i < g.configs.size(); ++i) {
    const SimConfig& c = g.configs[i];
    const SimResult& r = x.results[i];
    const int nodes = c.workers + c.servers;
    nlohmann::json row = {{"workers", c.workers},
                          {"servers", c.servers},
                          {"policy", c.policy.name},
                          {"slice_params", c.policy.slice_params},
                          {"partition_params", c.policy.partition_params},
                          {"credit_bytes", c.policy.credit_bytes},
                          {"description", describe({c, r, i}, g)},
                          {"same", nlohmann::json::array()},
                          {"images_per_sec", r.images_per_sec},
                          {"images_per_sec_per_node", r.images_per_sec / nodes},
                          {"simulated_workers", r.simulated_workers},
                          {"seeds", o.sim.seeds},
                          {"searched", bool(x.searched[i])}};
    if (x.scan_steps > 0) row["scan_images_per_sec"] = x.scanned[i].images_per_sec;
    for (const SimConfig& other : g.same[i]) row["same"].push_back(settings_json(other));
    if (const SimResult* cr = x.confirmed_of[i])
      row["confirmed"] = {{"images_per_sec", cr->images_per_sec},
                          {"simulated_workers", cr->simulated_workers},
                          {"images_per_sec_per_node", cr->images_per_sec / nodes},
                          {"seeds", o.confirm_seeds},
                          {"seeds_min_images_per_sec", cr->seeds_min_images_per_sec},
                          {"seeds_max_images_per_sec", cr->seeds_max_images_per_sec},
                          {"seeds_spread_pct", cr->seeds_spread_pct()}};
    simulated.push_back(row);
  }
  return simulated;
}

// The search's context: what was searched, on what link, how long.
nlohmann::json search_json(const OptimizeOptions& o, const Profile& profile, const SimConfig& base,
                           const SearchSpace& x, const Grid& g) {
  return {{"profile", o.profile},
          {"model", profile.model},
          {"batch", profile.batch},
          {"mode", base.mode.str()},
          {"comm", to_string(base.comm)},
          {"policies", expand_policies(o.policies)},
          {"max_nodes", o.max_nodes},
          {"max_servers", o.max_servers},
          {"bandwidth", bandwidth_text(base.bandwidth_bytes_per_sec)},
          {"bandwidth_bytes_per_sec", base.bandwidth_bytes_per_sec},
          {"latency_us", base.latency_s * 1e6},
          {"link_model", to_string(base.link_model)},
          {"partition_bytes", base.partition_bytes},
          {"apply_threads", base.apply_lanes},
          {"replicas", base.replicas},
          {"steps", base.steps},
          {"seed", o.sim.seed},
          {"seeds", o.sim.seeds},
          {"confirm_seeds", o.confirm_seeds},
          {"arrival_jitter_us", base.arrival_jitter_s * 1e6},
          {"compute", base.compute_on_cores ? "real" : "replay"},
          {"host_cpus", base.host_cpus},
          {"straggler_ms", base.straggler_s * 1e3},
          {"start_stagger_ms", base.start_stagger_s * 1e3},
          {"slice_params", x.slices},
          {"partition_params", x.partitions},
          {"p3_credit_bytes", x.p3_credits},
          {"bytescheduler_credit_bytes", x.bs_credits},
          {"largest_part_params", g.largest_part},
          {"model_bytes", g.model_bytes}};
}

// One ranking: the table's rows on stdout, and out[key].
void show_ranking(const char* title, const char* key, bool (*better)(const Point&, const Point&),
                  const OptimizeOptions& o, const Grid& g, const Search& x, nlohmann::json& out) {
  std::vector<Point> v = x.points;
  std::stable_sort(v.begin(), v.end(), better);
  std::size_t label_width = 30;
  for (int k = 0; k < std::min<int>(o.top, int(v.size())); ++k)
    label_width = std::max(label_width, describe(v[k], g).size());
  const int w = int(label_width);
  std::printf("%s\n%-7s %-7s %-*s %11s %15s %7s\n", title, "workers", "servers", w, "policy",
              "images/s", "images/s/node", "spread");
  for (int k = 0; k < std::min<int>(o.top, int(v.size())); ++k) {
    const auto& p = v[k];
    const int nodes = p.c.workers + p.c.servers;
    const std::string spread = x.seeds > 1 ? fmt(p.r.seeds_spread_pct(), 0) + "%" : "-";
    std::printf("%-7d %-7d %-*s %11s %15s %7s\n", p.c.workers, p.c.servers, w,
                describe(p, g).c_str(), fmt(p.ips(), 0).c_str(), fmt(p.ips() / nodes, 1).c_str(),
                spread.c_str());
    nlohmann::json row = {{"workers", p.c.workers},
                          {"servers", p.c.servers},
                          {"policy", p.c.policy.name},
                          {"slice_params", p.c.policy.slice_params},
                          {"partition_params", p.c.policy.partition_params},
                          {"credit_bytes", p.c.policy.credit_bytes},
                          {"description", describe(p, g)},
                          {"same", nlohmann::json::array()},
                          {"mode", p.c.mode.str()},
                          {"images_per_sec", p.ips()},
                          {"images_per_sec_per_node", p.ips() / nodes},
                          {"seeds", x.seeds},
                          {"seeds_min_images_per_sec", p.r.seeds_min_images_per_sec},
                          {"seeds_max_images_per_sec", p.r.seeds_max_images_per_sec},
                          {"seeds_spread_pct", p.r.seeds_spread_pct()}};
    for (const SimConfig& other : g.same[p.config]) row["same"].push_back(settings_json(other));
    out[key].push_back(row);
  }
  std::printf("\n");
}

// The line above the rankings: what was simulated, and how many seeds the figures are of.
void print_optimize_head(const OptimizeOptions& o, const Profile& profile, const SimConfig& base,
                         const Grid& g, std::size_t searched, const Search& x) {
  std::printf("model %s, mode %s, comm %s, link %s, at most %d nodes: %zu configurations simulated",
              profile.model.c_str(), base.mode.str().c_str(), to_string(base.comm),
              bandwidth_text(base.bandwidth_bytes_per_sec).c_str(), o.max_nodes, g.configs.size());
  if (g.configs.size() < searched)
    std::printf(" (of %zu searched: %zu act alike and are listed as one)", searched,
                searched - g.configs.size());
  if (x.seeds != o.sim.seeds)
    std::printf(", the %zu leading ones again with %d seeds: images/s is their median",
                x.points.size(), x.seeds);
  else if (x.seeds > 1)
    std::printf(", %d seeds each: images/s is their median", x.seeds);
  const std::string how = x.search_fidelity == Fidelity::kFast ? "fast mode"
                          : x.search_fidelity == Fidelity::kExact
                              ? "exact"
                              : "exact, fast above " + std::to_string(kFastAbove) + " workers";
  if (x.scan_steps > 0)
    std::printf("\nscanned at %lld steps in %.1f s, the first %zu searched",
                (long long)x.scan_steps, x.scan_s,
                std::size_t(std::count(x.searched.begin(), x.searched.end(), 1)));
  std::printf("\nsearched in %.1f s (%s)", x.search_s, how.c_str());
  if (x.seeds != o.sim.seeds) std::printf(", confirmed in %.1f s", x.confirm_s);
  std::printf("\n\n");
}

// The simulated link as launch flags: the one simulated, if the profile's run was shaped or the
// flags named it; an estimate from an unshaped run's pulls is not something to emulate.
void launch_link(const OptimizeOptions& o, const Profile& profile, const SimConfig& base,
                 OptimizeChoice& choice) {
  const bool shaped = !o.sim.bandwidth.empty() || !profile.shaped.empty();
  char text[64];
  choice.bandwidth.clear(), choice.latency.clear();
  if (shaped && base.bandwidth_bytes_per_sec > 0) {
    const double bps = base.bandwidth_bytes_per_sec * 8;
    if (std::fmod(bps, 1e9) == 0)
      std::snprintf(text, sizeof text, "%.0fgbit", bps / 1e9);
    else if (std::fmod(bps, 1e6) == 0)
      std::snprintf(text, sizeof text, "%.0fmbit", bps / 1e6);
    else
      std::snprintf(text, sizeof text, "%.0fbit", bps);
    choice.bandwidth = text;
  }
  if ((shaped || !o.sim.latency.empty()) && base.latency_s > 0) {
    std::snprintf(text, sizeof text, "%.0fus", base.latency_s * 1e6);
    choice.latency = text;
  }
}

OptimizeChoice choice_of(const OptimizeOptions& o, const Profile& profile, const SimConfig& base,
                         const Grid& g, const Point& p, int seeds) {
  OptimizeChoice c;
  c.workers = p.c.workers, c.servers = p.c.servers;
  c.policy = p.c.policy.name, c.mode = p.c.mode.str();
  c.slice_params = p.c.policy.slice_params, c.partition_params = p.c.policy.partition_params;
  c.credit_bytes = p.c.policy.credit_bytes;
  launch_link(o, profile, base, c);
  c.images_per_sec = p.ips();
  c.seeds = seeds;
  c.description = describe(p, g);
  return c;
}

// What --verify launches: the configuration ranked first by images/s; and for its settings
// check, the first whose policy has settings that act differently at its workers and servers,
// with those others (each at its best figure: the leaders' pass where it ran them).
void choose_best(const OptimizeOptions& o, const Profile& profile, const SimConfig& base,
                 const Grid& g, const Search& x, OptimizeChoice* best,
                 std::vector<OptimizeChoice>* settings) {
  if (x.points.empty()) return;
  std::vector<Point> ranked = x.points;
  std::stable_sort(ranked.begin(), ranked.end(), by_ips);
  if (best) *best = choice_of(o, profile, base, g, ranked.front(), x.seeds);
  if (!settings) return;
  settings->clear();
  for (const Point& p : ranked) {
    for (std::size_t i = 0; i < g.configs.size(); ++i) {
      const SimConfig& c = g.configs[i];
      if (i == p.config || c.workers != p.c.workers || c.servers != p.c.servers ||
          c.policy.name != p.c.policy.name)
        continue;
      if (settings->empty()) settings->push_back(choice_of(o, profile, base, g, p, x.seeds));
      const SimResult* r = x.confirmed_of[i] ? x.confirmed_of[i] : &x.results[i];
      settings->push_back(choice_of(o, profile, base, g, {c, *r, i},
                                    x.confirmed_of[i] ? o.confirm_seeds : o.sim.seeds));
    }
    if (!settings->empty()) return;
  }
}

}  // namespace

int run_optimize(const OptimizeOptions& o, OptimizeChoice* best,
                 std::vector<OptimizeChoice>* settings) {
  const Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  const SimConfig base = optimize_base(o, profile);
  ensure_writable_file(o.json_out, "--json");
  const SearchSpace space = search_space(o, base);
  const int parts = int(make_partition(spec, base.partition_bytes, 1).parts.size());
  const std::vector<SimConfig> searched = searched_configs(o, base, space, parts);
  const Grid g = merge_alike(o, spec, base, searched, parts);
  announce("optimize", g.configs.size(),
           g.configs.size() < searched.size()
               ? " (" + std::to_string(searched.size() - g.configs.size()) +
                     " more alike, not simulated again)"
               : std::string(),
           o.sim.seeds, o.sim.jobs);
  Search x;
  // Where the leaders are confirmed, --fidelity auto searches in the fast mode at every size
  // (groups of 16: a 256-worker point costs a 16-worker one) and confirms as predict would.
  const bool confirming = o.confirm_seeds > o.sim.seeds;
  x.confirm_fidelity = base.fidelity;
  x.search_fidelity =
      confirming && base.fidelity == Fidelity::kAuto ? Fidelity::kFast : base.fidelity;
  std::vector<SimConfig> search = g.configs;
  for (SimConfig& c : search) c.fidelity = x.search_fidelity, c.check_groups = !confirming;
  std::vector<std::size_t> full(search.size());
  std::iota(full.begin(), full.end(), std::size_t(0));
  if (scanning(o, search.size(), confirming)) full = scan(o, profile, spec, search, x);
  std::vector<SimConfig> searching;
  for (std::size_t i : full) searching.push_back(search[i]);
  if (x.scan_steps > 0)
    announce("optimize: the scan's first", searching.size(), "", o.sim.seeds, o.sim.jobs);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<SimResult> found = simulate_all(profile, spec, searching, o.sim.seeds,
                                                    o.sim.jobs, progress("simulated", full.size()));
  const auto t1 = std::chrono::steady_clock::now();
  x.search_s = std::chrono::duration<double>(t1 - t0).count();
  x.results = x.scan_steps > 0 ? x.scanned : found;
  x.searched.assign(search.size(), 0);
  for (std::size_t k = 0; k < full.size(); ++k) {
    x.results[full[k]] = found[k], x.searched[full[k]] = 1;
    x.points.push_back({search[full[k]], found[k], full[k]});
  }
  x.seeds = o.sim.seeds;
  x.confirmed_of.assign(g.configs.size(), nullptr);
  if (confirming) confirm_leaders(o, profile, spec, x);
  x.confirm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  nlohmann::json out = {{"search", search_json(o, profile, base, space, g)},
                        {"simulated", simulated_json(o, g, x)},
                        {"by_images_per_sec", nlohmann::json::array()},
                        {"by_images_per_sec_per_node", nlohmann::json::array()}};
  print_optimize_head(o, profile, base, g, searched.size(), x);
  out["configurations"] = g.configs.size();
  out["configurations_searched"] = searched.size();
  out["seeds"] = o.sim.seeds;
  out["confirmed"] = x.seeds != o.sim.seeds ? x.points.size() : 0;
  out["confirm_seeds"] = o.confirm_seeds;
  out["search_fidelity"] = to_string(x.search_fidelity);
  out["search_seconds"] = x.search_s;
  out["scan_steps"] = x.scan_steps;
  out["scan_seconds"] = x.scan_s;
  out["configurations_searched_in_full"] = std::count(x.searched.begin(), x.searched.end(), 1);
  out["confirm_seconds"] = x.confirm_s;
  show_ranking("top by images/s", "by_images_per_sec", by_ips, o, g, x, out);
  show_ranking("top by images/s per node", "by_images_per_sec_per_node", by_ips_per_node, o, g, x,
               out);
  if (x.seeds > 1)
    std::printf("spread: (highest - lowest) / median of the seeds. %s\n",
                regime_edge_note().c_str());
  if (g.configs.size() < searched.size())
    std::printf(
        "same: settings that change nothing here, simulated once: a credit of at least the model's "
        "%s never holds a transfer back, a slice or partition of at least the largest part's %lld "
        "parameters sends every part whole\n",
        format_bytes(double(g.model_bytes)).c_str(), (long long)g.largest_part);
  write_json(o.json_out, out);
  choose_best(o, profile, base, g, x, best, settings);
  return 0;
}

}  // namespace psbed::predictor
