#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/profile.hpp"
#include "predictor/simulator.hpp"

namespace psbed::cluster {
namespace {

// `steps_help`, if set, is validate's: each run's own steps by default, and the settings a run
// records (partition, slice, credit, straggler) are taken from the run, so no flag offers them.
void add_sim_flags(CLI::App* app, predictor::SimFlags& f, const char* steps_help = nullptr) {
  const bool per_run = steps_help != nullptr;
  app->add_option("--bandwidth", f.bandwidth,
                  per_run ? "link of every node, per direction, e.g. 1gbit (0: unlimited), in "
                            "place of the one each "
                            "run recorded (default: each run's own; runs that recorded different "
                            "links stay apart)"
                          : "link of every node, per direction, e.g. 1gbit (0: unlimited; default: "
                            "the profile's)")
      ->check(bandwidth_value(true));
  app->add_option("--latency", f.latency,
                  per_run ? "one-way latency, e.g. 200us, in place of the one each run recorded "
                            "(default: each run's own)"
                          : "one-way latency, e.g. 200us (default: the profile's)")
      ->check(duration_value());
  app->add_option("--link-model", f.link_model,
                  "bucket: per-node FIFO token buckets as psbed launch --bandwidth emulates; fair: "
                  "max-min fair "
                  "sharing as TCP under kernel shaping")
      ->capture_default_str()
      ->check(one_of({"bucket", "fair"}));
  if (!per_run) {
    app->add_option("--comm", f.comm,
                    "how the fc layers travel, as launch --comm: ps (through the shards), sfb "
                    "(as sufficient factors, worker to worker) or hybrid (per layer, by Poseidon's "
                    "cost model); not with --mode async (docs/communication.md)")
        ->capture_default_str()
        ->check(one_of({"ps", "sfb", "hybrid"}));
    app->add_option("--partition-bytes", f.partition_bytes, "largest part a tensor is cut into")
        ->capture_default_str()
        ->check(size_value());
    app->add_option("--slice-params", f.slice_params, "p3, prophet: parameters per slice")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
    app->add_option("--partition-params", f.partition_params,
                    "bytescheduler: parameters per partition")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
    app->add_option("--credit", f.credit,
                    "p3/bytescheduler: bytes in flight at most; prophet: largest block (default, "
                    "or 'default': "
                    "the policy's)")
        ->transform(credit_value());
  }
  app->add_option(
         "--apply-threads", f.apply_lanes,
         per_run
             ? "apply threads per server shard, for runs that do not record theirs (launch does)"
             : "apply threads per server shard")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  if (!per_run)
    app->add_flag("--push-pull", f.push_pull,
                  "as launch --push-pull: each push answered with the updated part, and "
                  "a part that came back whole not pulled the next step");
  if (!per_run)
    app->add_option("--replicas", f.replicas,
                    "copies of each part, as launch --replicas: 2 forwards every applied update "
                    "(bsp: each clock's sum) to the next shard, which applies it before the push "
                    "is acknowledged")
        ->capture_default_str()
        ->check(CLI::Range(1, 2));
  if (steps_help)
    app->add_option("--steps", f.steps, steps_help)
        ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  else
    app->add_option("--steps", f.steps, "simulated steps per worker")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  app->add_option("--seed", f.seed, "seed of the compute draws and tf-random")
      ->capture_default_str()
      ->transform(seed_validator());
  app->add_option(
         "--seeds", f.seeds,
         "simulations (draws) per configuration, with seeds --seed, --seed + 1, ...: each draws "
         "its compute, each worker's start and the run's host speed; their median is the "
         "prediction, their range (less the extremes from 39 draws on) the band one real run "
         "should land in 9 times in 10, and "
         "groups of draws far apart the regimes (docs/prediction.md, \"Bands and regimes\")")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app->add_option("--host-cv", f.host_cv,
                  "run-to-run variation of the host's speed the draws take (a coefficient of "
                  "variation; default: the profile's variation.host_cv, 0: none)")
      ->check(number_in("coefficient", 0, false, 1, "0 or more and below 1"));
  as_duration(
      app->add_option("--start-spread-ms", f.start_spread_ms,
                      "each worker starts up to this much later, a draw per worker (default: the "
                      "profile's variation.start_spread_ms, 0: all at once)"),
      "ms")
      ->check(number_in("milliseconds", 0, false, 6e5, "0 or more and below 600000"));
  app->add_option("--fidelity", f.fidelity,
                  "exact: every worker simulated; fast: --groups simulated workers, each a group "
                  "of identical workers moving in step (stragglers alone), for clusters of "
                  "hundreds; auto: fast above 64 workers. Exact regardless outside bsp, with SFB "
                  "layers, the host's cores modelled (--host-cpus) or traces "
                  "(docs/predictor-model.md, \"Fast mode\")")
      ->capture_default_str()
      ->check(one_of({"exact", "fast", "auto"}));
  app->add_option("--groups", f.groups,
                  "the fast mode's simulated workers: more follow the workers more closely, at "
                  "the cost of a simulation of as many workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--jobs", f.jobs,
                  "simulations run at once, one per thread (0: one per core this process may use); "
                  "the figures do not depend on it")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  if (!per_run) {
    as_duration(
        app->add_option("--straggler-ms", f.straggler_ms, "worker-0 sleeps this long every step"),
        "ms")
        ->check(number_in("milliseconds", 0, false, 1e7, "0 or more and below 10^7"));
    app->add_option("--straggler", f.stragglers,
                    "a slow worker, as launch --straggler: worker-N:compute=Kx (its compute K "
                    "times as long) and/or bandwidth=B (its own link, each direction), e.g. "
                    "worker-1:compute=2x,bandwidth=100mbit; repeatable")
        ->allow_extra_args(false);
  }
  as_duration(
      app->add_option("--start-stagger-ms", f.start_stagger_ms,
                      per_run ? "worker i of N starts i x this / N later (default: each run's own)"
                              : "worker i of N starts i x this / N later"),
      "ms")
      ->check(number_in("milliseconds", 0, false, 1e7, "0 or more and below 10^7"));
  as_duration(
      app->add_option(
          "--arrival-jitter-us", f.arrival_jitter_us,
          "arrivals at a node from different senders come up to this much later, by a seeded "
          "draw, so that ties go in an order set by chance as on a real host (each connection "
          "keeps its order); 0: exact times, and ties keep the order they were scheduled in, "
          "which holds workers in lockstep"),
      "us")
      ->capture_default_str()
      ->check(number_in("microseconds", 0, false, 1e6, "0 or more and below 10^6 (a second)"));
  app->add_option(
         "--compute", f.compute,
         "the workers' compute: real (each worker's forward and backward take one of the "
         "host's cores, so workers beyond the cores queue for them), replay (sleeps, as "
         "--compute replay:...), or auto: as the profiled run's (validate: each run's own)")
      ->capture_default_str()
      ->check(one_of({"auto", "real", "replay"}));
  app->add_option("--host-cpus", f.host_cpus,
                  "cores every node of the cluster shares, each transfer taking the profile's "
                  "CPU for its two messages and its bytes on one where its data arrives "
                  "(default: the profile's host; 0: the host's CPU not modelled)")
      ->check(CLI::Range(0, kMaxHostCpus));
}

// profile, predict and validate.
void add_profile_predict_validate(CLI::App& root, PredictorCommands& o, std::string& log_level) {
  auto* prof = root.add_subcommand("profile", "Single-worker run folder -> profile.json");
  prof->footer("Example: psbed profile runs/lenet5-1w -o profile.json");
  add_common(prof, log_level);
  prof->add_option("run", o.profile.extract.run, "run folder (the --out of psbed launch)")
      ->required();
  // A file is written with --json FILE and a folder with --out DIR, in every command; --out
  // stays here, out of --help, for the scripts that used it.
  prof->add_option("-o,--json", o.profile.out, "profile to write")->capture_default_str();
  prof->add_option("--out", o.profile.out, "the profile to write (now --json)")->group("");
  prof->add_option("--worker", o.profile.extract.worker,
                   "which worker's trace (needed if the run had several)");
  prof->add_option(
      "--contention-run", o.profile.contention_run,
      "a second run of the same model and batch on this host with at least twice as many "
      "workers + shards as cores (real compute on one thread a worker, traces): the extra "
      "CPU a crowded host spends per step, which the single-worker run cannot show "
      "(host.contention; docs/prediction.md, \"The host's contention\")");
  prof->add_option("--push-pull-run", o.profile.push_pull_run,
                   "a single-worker run of the same model, batch and host with launch --push-pull "
                   "(traces): a data message's CPU alone, which each of a push-pull's messages "
                   "costs, where the profiled run averages data messages and headers "
                   "(host.cpu_per_data_message_us; docs/predictor-model.md, \"Push-pull\")");
  prof->add_option("--skip-steps", o.profile.extract.skip_steps,
                   "warm-up steps left out (default: the worker's rule)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  prof->add_option("--copy-ns-per-byte", o.profile.extract.copy_cpu_ns_per_byte,
                   "host CPU a byte costs (loopback copies), e.g. an earlier profile's "
                   "host.cpu_per_byte_ns, to re-extract it alike (default: measured now, "
                   "which varies with the machine's state)")
      ->check(non_negative("ns per byte"));
  prof->add_flag("!--no-calibrate", o.profile.extract.calibrate,
                 "no fit to the run's own pace: the fitted cost (message_latency_us with host CPU, "
                 "else message_cost_us or transit_ns_per_byte) stays 0");

  auto* pred = root.add_subcommand("predict",
                                   "Profile + configurations -> predicted throughput (simulated)");
  pred->footer(
      "Example: psbed predict --profile profile.json --workers 1,2,4,8 --servers 1,2 --policy all "
      "--mode bsp "
      "--bandwidth 1gbit --json out.json");
  add_common(pred, log_level);
  pred->add_option("--profile", o.predict.profile, "profile.json from psbed profile")->required();
  pred->add_option("--workers", o.predict.workers, "worker counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  pred->add_option("--servers", o.predict.servers, "server shard counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  pred->add_option("--policy", o.predict.policies, "policies, or all")
      ->delimiter(',')
      ->capture_default_str();
  pred->add_option("--mode", o.predict.modes, "async, bsp, ssp:K (several: comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  o.predict.sim.seeds = predictor::kBandDraws;
  add_sim_flags(pred, o.predict.sim);
  pred->add_flag("--analytic", o.predict.analytic_only,
                 "analytic bounds only (instant), no simulation, so no --trace-out");
  pred->add_option("--json", o.predict.json_out, "write the predictions as JSON to this file");
  pred->add_option(
      "--trace-out", o.predict.trace_out,
      "write synthetic Chrome traces, one per node, of each configuration's median seed: into this "
      "folder for one configuration, into a subfolder per configuration (e.g. 4w1s-p3-bsp/) for "
      "several; a folder that holds traces already is refused");

  auto* val = root.add_subcommand(
      "validate", "Profile + measured run folders -> prediction error table and plot");
  val->footer(
      "Example: psbed validate --profile profile.json runs/sweep-x/*/ --out report/\n"
      "Runs of one configuration (`psbed sweep --repeat`) are predicted once and compared by the "
      "median of\n"
      "their images/s; the report gives each one's range, and the error of every run alone beside "
      "it.\n"
      "Each run is predicted with the --comm its summary.json records (ps, sfb or hybrid: the fc "
      "layers'\n"
      "route; runs of different comm stay apart).\n"
      "Where a run's traces measured the host's CPU per worker-step, the report sets it beside "
      "what the\n"
      "simulation booked on the cores and simulates the run again at it: how much of an error is "
      "the CPU per\n"
      "step (no prediction: it takes the run's figure; docs/predictor-model.md, \"The host's CPU "
      "per step\").\n"
      "Calibration: the share of runs inside their band, the bands' median width, the p95 "
      "|error|, and over\n"
      "configurations alike but for the policy, the regret of the policy predicted best and "
      "Kendall's tau\n"
      "(docs/prediction.md, \"Bands and regimes\").");
  add_common(val, log_level);
  val->add_option("--profile", o.validate.profile, "profile.json from psbed profile")->required();
  val->add_option("runs", o.validate.runs, "measured run folders")->required();
  val->add_option("--out", o.validate.out, "report folder")->capture_default_str();
  o.validate.sim.seeds = predictor::kBandDraws;
  o.validate.sim.steps = 0;  // each run's own
  add_sim_flags(val, o.validate.sim, "simulated steps per worker (default, 0: each run's own)");
  val->add_option("--python", o.validate.python, "interpreter with matplotlib for the plot")
      ->capture_default_str();
}

// optimize (with the run --verify launches) and bench predict.
void add_optimize_bench(CLI::App& root, PredictorCommands& o, std::string& log_level) {
  auto* opt = root.add_subcommand(
      "optimize", "Profile + constraints -> best workers/servers/policy/slice/credit");
  opt->footer(
      "Example: psbed optimize --profile profile.json --max-nodes 16 --bandwidth 1gbit\n"
      "Searched: workers, servers, policies; p3 slices 10k/40k/160k parameters x credits 1/4/16 "
      "MiB;\n"
      "bytescheduler partitions 250k/1M parameters x credits 4 MiB/16 MB. --slice-params,\n"
      "--partition-params and --credit, when given, fix theirs instead (--credit default: each\n"
      "policy's own). Settings that change nothing (a credit of at least the model's bytes, a "
      "slice of at\n"
      "least the largest part) are simulated once and listed as one row. Each configuration is\n"
      "simulated with --seeds seeds (1), and the leaders again with --confirm-seeds (5).\n"
      "With --verify it then launches the first configuration by images/s on this host, predicts "
      "that run\n"
      "for its own length and prints measured beside predicted (and RUN/verify.json). Then it "
      "checks the\n"
      "recommended slice or partition and credit against the others searched, launched "
      "--verify-repeat\n"
      "times each (RUN-settings/settings.json); the exit status is 1 if the recommended one "
      "measured\n"
      "more than 3% below the best.");
  add_common(opt, log_level);
  opt->add_option("--profile", o.optimize.profile, "profile.json from psbed profile")->required();
  opt->add_option("--max-nodes", o.optimize.max_nodes, "workers + servers at most")
      ->capture_default_str()
      ->check(CLI::Range(2, predictor::kOptimizeMaxNodes));
  opt->add_option("--max-servers", o.optimize.max_servers, "server shards at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  opt->add_option("--policy", o.optimize.policies, "policies to consider, or all")
      ->delimiter(',')
      ->capture_default_str();
  opt->add_option("--mode", o.optimize.mode, "async, bsp or ssp:K")->capture_default_str();
  o.optimize.sim.steps = 60;
  add_sim_flags(opt, o.optimize.sim);
  opt->add_option("--top", o.optimize.top, "configurations listed per ranking")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  opt->add_option("--confirm-seeds", o.optimize.confirm_seeds,
                  "the leaders of the search (the first 2 x --top of each ranking) are simulated "
                  "again with this "
                  "many seeds and ranked by their median, so that one lucky draw on the edge "
                  "between two regimes "
                  "does not rank first; a value not above --seeds skips this second pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  opt->add_option("--scan", o.optimize.scan,
                  "scan every configuration first at a third of --steps (grouped: half the "
                  "groups) and search in full only the first 8 x --top of each ranking (5% at "
                  "least): auto does so above 200 configurations where the leaders are confirmed")
      ->capture_default_str()
      ->check(one_of({"auto", "on", "off"}));
  opt->add_option("--json", o.optimize.json_out,
                  "write the search's context, every configuration simulated and the rankings as "
                  "JSON to this file");
  opt->add_flag("--verify", o.verify.enabled,
                "launch the first configuration by images/s on this host (psbed launch) and print "
                "measured beside "
                "predicted");
  opt->add_option("--verify-steps", o.verify.steps, "--verify: steps per worker of the run")
      ->capture_default_str();
  opt->add_option("--verify-data", o.verify.data, "--verify: mnist or synthetic")
      ->capture_default_str();
  opt->add_option(
      "--verify-compute", o.verify.compute,
      "--verify: real, or replay:<profile.json> (default: replay of --profile, so many workers fit "
      "on few cores); the ranking predicts the same compute unless --compute says otherwise");
  opt->add_option("--verify-out", o.verify.out,
                  "--verify: run folder (default runs/verify-<model>-<W>w<S>s-<time>); the "
                  "settings check's runs go to the folder of that name with -settings added");
  opt->add_option("--verify-repeat", o.verify.repeat,
                  "--verify: the settings check launches the recommended slice or partition and "
                  "credit (of the first configuration whose policy has some that act differently) "
                  "and every other the search tried at its workers and servers, this many runs "
                  "each, and passes when the recommended one's median is within 3% of the best; "
                  "0: no settings check")
      ->capture_default_str();

  auto* bench = root.get_subcommand("bench")->add_subcommand(
      "predict", "Simulator speed: events/s per worker count and slice size");
  bench->footer(
      "Targets, one core: 1,000 steps of 64 vgg-mini workers under p3 in <= 2.3 s exact and <= "
      "0.3 s fast; 1,024 workers fast in <= 5 s.");
  add_common(bench, log_level);
  bench->add_option("--profile", o.bench.profile,
                    "profile to simulate (default: a synthetic one for --model)");
  bench->add_option("--model", o.bench.model, "model")->capture_default_str();
  bench->add_option("--workers", o.bench.workers, "worker counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--policy", o.bench.policy, "policy")->capture_default_str();
  bench->add_option("--steps", o.bench.steps, "steps per worker")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  bench
      ->add_option("--slice-params", o.bench.slice_params,
                   "slice sizes in parameters (p3, prophet; bytescheduler: partition sizes), each "
                   "run for every "
                   "worker count: ns/slice-msg stays flat when the cost is linear in slices")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  bench->add_option("--bandwidth", o.bench.bandwidth, "link")
      ->capture_default_str()
      ->check(bandwidth_value(false));
  bench->add_option("--link-model", o.bench.link_model, "bucket or fair")
      ->capture_default_str()
      ->check(one_of({"bucket", "fair"}));
  bench
      ->add_option("--fidelity", o.bench.fidelity,
                   "exact, fast, or both: each worker count simulated both ways, the fast one's "
                   "images/s against the exact one's")
      ->capture_default_str()
      ->check(one_of({"exact", "fast", "both"}));
  bench->add_option("--groups", o.bench.groups, "the fast mode's simulated workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--json", o.bench.json_out, "write the timings as JSON to this file");
}

}  // namespace

void add_predictor(CLI::App& root, PredictorCommands& o, std::string& log_level) {
  add_profile_predict_validate(root, o, log_level);
  add_optimize_bench(root, o, log_level);
}

// Returns -1 if no predictor subcommand was given.
int run_predictor(CLI::App& root, const PredictorCommands& o, const std::string& log_level) {
  for (const char* name : {"profile", "predict", "validate", "optimize"})
    if (root.got_subcommand(name)) {
      setup_logging(name, log_level);
      const std::string n = name;
      if (n == "profile") return predictor::run_profile(o.profile);
      if (n == "predict") return predictor::run_predict(o.predict);
      if (n == "validate") return predictor::run_validate(o.validate);
      predictor::OptimizeOptions opt = o.optimize;
      const CLI::App* app = root.get_subcommand("optimize");
      opt.slice_params_given = app->count("--slice-params") > 0;
      opt.partition_params_given = app->count("--partition-params") > 0;
      opt.credit_given = app->count("--credit") > 0;
      if (!o.verify.enabled)
        for (const char* flag : {"--verify-steps", "--verify-data", "--verify-compute",
                                 "--verify-out", "--verify-timeout", "--verify-repeat"})
          if (app->get_option_no_throw(flag) && app->count(flag) > 0)
            throw Error(std::string(flag) +
                        " is for the run --verify launches: add --verify, or leave it out");
      return run_optimize_verify(opt, o.verify);
    }
  if (auto* b = root.get_subcommand("bench"); b->parsed() && b->got_subcommand("predict")) {
    setup_logging("bench", log_level);
    return predictor::run_bench_predict(o.bench,
                                        b->get_subcommand("predict")->count("--model") > 0);
  }
  return -1;
}

}  // namespace psbed::cluster
