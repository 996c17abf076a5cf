// The predictor's subcommands (`psbed profile | predict | validate | optimize | bench predict`):
// options as plain structs filled by cluster/main.cpp, each command a function returning the
// process exit status. Tables go to stdout, progress to stderr, results to JSON files.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/defaults.hpp"
#include "core/model_spec.hpp"
#include "predictor/profile_extract.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

// The model a profile was taken on: the spec it carries (so a model that is not shipped still
// works), else the shipped spec of its name; throws if the profile does not match it.
ModelSpec profile_model_spec(const Profile& profile, const std::string& profile_path);

struct ProfileCommandOptions {
  ProfileOptions extract;
  std::string out = "profile.json";
  // A second run of the same model and batch on the same host, with more workers + shards than
  // cores and real compute: its CPU per worker-step against the simulation's sets the profile's
  // host.contention. Empty: not measured.
  std::string contention_run;
  // A single-worker launch --push-pull run of the same host: host.cpu_per_data_message_us.
  std::string push_pull_run;
};
int run_profile(const ProfileCommandOptions& options);

// The defaults of psbed predict and validate (and of the dashboard's prediction): arrival ties
// between senders broken by chance (SimConfig::arrival_jitter_s), and each configuration
// simulated with kBandDraws seeds, each its own draw of compute, start phases and host speed:
// their median is the prediction and their range (up to 38 draws) the band a single run should
// land in 9 times in 10 (predictor/band.hpp). kPredictSeeds: the fewer draws whose median steadies
// a figure where no band is shown (optimize's confirmation, the contention run); optimize, which
// ranks many configurations, simulates each once unless told.
constexpr double kArrivalJitterUs = 1;
constexpr int kBandDraws = 20;
constexpr int kPredictSeeds = 5;
// The seeds seed, seed + 1, ... of `seeds` simulations as a report names them: "1 to 5", and
// past 2^64 - 1, where they wrap to 0, "18446744073709551614 to 18446744073709551615, then 0 to 2"
// ("18446744073709551615, then 0" for two).
std::string seed_range(std::uint64_t seed, int seeds);

// What every prediction command shares: the link, partitioning, policy parameters and length.
struct SimFlags {
  std::string bandwidth;              // "1gbit"; empty: the profile's link
  std::string latency;                // "200us"; empty: the profile's link
  std::string link_model = "bucket";  // bucket (psbed's in-process emulation) or fair
  std::string comm = "ps";            // ps, sfb or hybrid (validate: each run's own)
  std::string partition_bytes = defaults::kPartitionBytesText;
  std::int64_t slice_params = defaults::kSliceParams;
  std::int64_t partition_params = defaults::kPartitionParams;
  std::string credit;  // empty: the policy's default
  int apply_lanes = defaults::kApplyThreads;
  int replicas = 1;        // copies of each part (predict, optimize; validate: each run's own)
  bool push_pull = false;  // async pushes answered with the part (predict; validate: each run's)
  std::int64_t steps = 200;
  std::uint64_t seed = 1;
  int seeds = 1;  // simulations per configuration (seed, seed + 1, ...); their median counts
  int jobs = 0;   // simulations run at once, on as many threads (0: one per core)
  double straggler_ms = 0;
  std::vector<std::string> stragglers;  // --straggler worker-N:compute=Kx,bandwidth=B
  double start_stagger_ms = -1;         // < 0: the run's own (validate), else 0
  double arrival_jitter_us = kArrivalJitterUs;
  double host_cv = -1;          // < 0: the profile's variation.host_cv
  double start_spread_ms = -1;  // < 0: the profile's variation.start_spread_ms
  int host_cpus = -1;           // < 0: the profile's; 0: the host's CPU not modelled
  // The predicted workers' compute: "real" takes the host's cores, "replay" sleeps; "auto": as
  // the profiled run's (validate: each run's own).
  std::string compute = "auto";
  // exact: every worker simulated; fast: at most kFastGroups, each a group of identical workers;
  // auto: fast above kFastAbove workers (predictor/simulator.hpp, SimConfig::fidelity).
  std::string fidelity = "auto";
  int groups = kFastGroups;  // the fast mode's simulated workers
};

struct PredictOptions {
  std::string profile;
  std::vector<int> workers{1, 2, 4, 8};
  std::vector<int> servers{1};
  std::vector<std::string> policies{"all"};
  std::vector<std::string> modes{"bsp"};
  SimFlags sim;
  bool analytic_only = false;
  std::string json_out;
  std::string trace_out;
};
int run_predict(const PredictOptions& options);

struct ValidateOptions {
  std::string profile;
  std::vector<std::string> runs;
  std::string out = "validation";
  SimFlags sim;  // steps: 0 = each run's own
  std::string python = "/usr/bin/python3";
};
int run_validate(const ValidateOptions& options);
// Predicts each measured run's configuration (its summary.json, and worker-0's trace metadata
// for the link and policy parameters). Runs of one configuration (repeats) are predicted once
// and compared by their median: {"runs": [{run, repeats, measured_images_per_sec (median),
// measured_min/max_images_per_sec, predicted_images_per_sec, error_pct, ...}], one per
// configuration, "mean_abs_error_pct", "max_abs_error_pct" (over configurations),
// "single_run_mean_abs_error_pct", "single_run_max_abs_error_pct" (every run alone)}.
nlohmann::json validate_runs(const Profile& profile, const ModelSpec& spec,
                             const std::vector<std::string>& runs, const SimFlags& flags);

// optimize's largest --max-nodes: its search grows with the nodes (worker counts up to the budget,
// each simulated with that many workers), and 100,000 ran for minutes in over a gigabyte
// before printing a row.
constexpr int kOptimizeMaxNodes = 1024;

struct OptimizeOptions {
  std::string profile;
  int max_nodes = 16;
  int max_servers = 4;
  std::vector<std::string> policies{"all"};
  std::string mode = "bsp";
  SimFlags sim;
  int top = 5;
  // The leaders of the search (the first 2 x top of each ranking) simulated again with this
  // many seeds and ranked by their median; <= sim.seeds: the search's own figures.
  int confirm_seeds = kPredictSeeds;
  std::string json_out;
  // auto: a search of more than 200 configurations whose leaders are confirmed is scanned first
  // at a third of the steps; on: always; off: never.
  std::string scan = "auto";
  // --slice-params / --partition-params / --credit given: that value only, instead of the
  // searched ones (`--credit default`: each policy's own credit).
  bool slice_params_given = false, partition_params_given = false, credit_given = false;
};
// The configuration ranked first by images/s (what `psbed optimize --verify` launches).
struct OptimizeChoice {
  int workers = 0, servers = 0;
  std::string policy, mode;
  std::int64_t slice_params = 0, partition_params = 0,
               credit_bytes = -1;  // -1: the policy's default
  std::string bandwidth, latency;  // the simulated link, as launch flags ("" = unshaped)
  double images_per_sec = 0;
  int seeds = 1;            // the simulations images_per_sec is the median of
  std::string description;  // as the rankings name it: "p3 slice 10000 credit 1.00 MiB"
};
// `settings` (for --verify's settings check): the first configuration by images/s whose
// policy's searched settings act differently here, then every other setting of that policy the
// search simulated at its workers and servers; empty where no ranked configuration has any.
int run_optimize(const OptimizeOptions& options, OptimizeChoice* best = nullptr,
                 std::vector<OptimizeChoice>* settings = nullptr);

struct BenchPredictOptions {
  std::string profile;  // empty: a synthetic vgg-mini profile (1 ms per layer and direction)
  std::string model = "vgg-mini";
  std::vector<int> workers{8, 16, 32, 64};
  std::string policy = "p3";
  // Slice sizes (p3, prophet) or partition sizes (bytescheduler) in parameters; each is run
  // for every worker count, to show the cost per slice.
  std::vector<std::int64_t> slice_params{defaults::kSliceParams};
  std::int64_t steps = 1000;
  std::string bandwidth = "1gbit";
  std::string link_model = "bucket";
  std::string fidelity = "both";  // exact, fast, or both side by side
  int groups = kFastGroups;       // the fast mode's simulated workers
  std::string json_out;
};
// model_given: --model was on the command line (then it must be the profile's model).
int run_bench_predict(const BenchPredictOptions& options, bool model_given = false);

}  // namespace psbed::predictor
