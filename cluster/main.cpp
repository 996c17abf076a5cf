// psbed: one executable, a subcommand per role (like git or kubectl). Every subcommand takes
// --config FILE.toml (keys are the long flag names; flags given on the command line win),
// logs progress to stderr and writes machine results as JSON.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/units.hpp"
#include "cluster/cli_config.hpp"
#include "cluster/ctl.hpp"
#include "cluster/launch.hpp"
#include "cluster/sweep.hpp"
#include "cluster/verify.hpp"
#include "predictor/commands.hpp"
#include "predictor/simulator.hpp"
#include "ps/control.hpp"
#include "core/profile.hpp"
#include "ps/bench_ps.hpp"
#include "ps/coordinator.hpp"
#include "ps/probe.hpp"
#include "ps/server.hpp"
#include "ps/stop_signals.hpp"
#include "worker/bench_compute.hpp"
#include "worker/ps_worker.hpp"
#include "worker/train.hpp"

namespace {

using namespace psbed;

void add_common(CLI::App* app, std::string& log_level) {
  cluster::add_config_option(app);
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")->capture_default_str();
}

using cluster::momentum_range;
using cluster::non_negative;
using cluster::number_in;
using cluster::positive;


// `steps_help`, if set, describes a --steps default that is not a number (validate: each run's).
void add_train(CLI::App& root, worker::TrainOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("train", "Single-process training (no parameter server)");
  app->footer(
      "Example: psbed train --model lenet5 --data mnist --epochs 3 --batch 64 --lr 0.05 --threads 2 --json out.json\n"
      "Models are workloads/models/*.toml (or a path to your own spec); data is 'mnist' (IDX files in\n"
      "--data-dir, default data/mnist, fetched by `make data`) or 'synthetic' (seeded, shaped like the model).");
  add_common(app, log_level);
  app->add_option("--model", o.model, "shipped model name or path to a .toml spec")->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir,
                  "directory with IDX files (default $PSBED_DATA_DIR, else data/mnist here, else the checkout's)");
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  auto* epochs = app->add_option("--epochs", o.epochs, "passes over the training set")
                     ->capture_default_str()
                     ->check(CLI::Range(1, 1000000));
  // Both given, one would be dropped without a word: refused instead.
  app->add_option("--steps", o.steps, "train this many steps instead of --epochs (not with --epochs)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->excludes(epochs);
  app->add_option("--batch", o.batch, "samples per step")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app->add_option("--lr", o.sgd.lr, "learning rate")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--lr-schedule", o.lr_schedule, "constant, or cosine (decay to 0 over the run)")->capture_default_str();
  app->add_option("--momentum", o.sgd.momentum, "SGD momentum")->capture_default_str()->check(momentum_range());
  app->add_option("--weight-decay", o.sgd.weight_decay, "L2 weight decay")->capture_default_str()
      ->check(non_negative("a weight decay", true));
  app->add_option("--threads", o.threads, "compute threads")->capture_default_str()->check(CLI::Range(1, 4096));
  app->add_option("--seed", o.seed, "seed for initialisation, shuffling, synthetic data")->capture_default_str()->transform(cluster::seed_validator());
  app->add_flag("!--no-eval", o.evaluate, "skip test-set evaluation");
  app->add_flag("!--no-standardize", o.standardize, "feed raw [0, 1] pixels instead of standardised ones");
  app->add_option("--progress-every", o.progress_every_s, "seconds between progress lines")->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--json", o.json_out, "write results as JSON to this file");
  app->add_option("--save-params", o.save_params, "final parameters to this file (raw float32)");
}

void add_bench_ps(CLI::App* bench, ps::BenchPsOptions& o, std::string& log_level) {
  auto* app = bench->add_subcommand("ps", "Push+pull throughput through the parameter server, beside raw ZeroMQ");
  app->footer("Rows: 1 worker x 1 shard per model size (ratio to a raw cppzmq round trip of the same bytes),\n"
              "then aggregate throughput for workers x servers. Everything runs in this process on loopback.");
  add_common(app, log_level);
  app->add_option("--models", o.model_mib, "model sizes in MiB")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--aggregate-model", o.aggregate_mib, "model size (MiB) of the workers x servers grid")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app->add_option("--workers", o.workers, "worker counts")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--servers", o.servers, "server counts")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--partition-bytes", o.partition, "largest part")->capture_default_str()->check(cluster::size_value());
  app->add_option("--min-seconds", o.min_seconds, "seconds per psbed run (raw runs: half)")->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--repeat", o.repeat, "psbed runs per single-worker row, between raw runs")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

void add_bench(CLI::App& root, worker::BenchComputeOptions& o, std::string& log_level) {
  auto* bench = root.add_subcommand("bench", "Benchmarks that print tables and write JSON");
  bench->require_subcommand(1);
  bench->footer("Run `psbed bench <subcommand> --help` for each benchmark's options.");
  auto* app = bench->add_subcommand("compute", "Training-step speed per model, beside PyTorch on this machine");
  app->footer("Rows: each model at each thread count; PyTorch runs in the same invocation, model by model.\n"
              "Make `make bench` your entry point: it installs PyTorch and OpenBLAS first.");
  add_common(app, log_level);
  app->add_option("--models", o.models, "models to run")->delimiter(',')->capture_default_str();
  app->add_option("--threads", o.threads, "thread counts")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--batch", o.batch, "batch (0: 64 for 28x28 inputs, 32 for larger)")->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--min-seconds", o.min_seconds, "timed seconds per row")->capture_default_str()
      ->check(non_negative("a number of seconds"));
  app->add_option("--min-steps", o.min_steps, "timed steps per row, at least")->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  app->add_option("--warmup", o.warmup, "untimed steps per row")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  app->add_flag("!--no-torch", o.torch, "skip the PyTorch reference");
  app->add_option("--python", o.python, "interpreter with Debian's python3-torch")->capture_default_str();
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

void add_coordinator(CLI::App& root, ps::CoordinatorOptions& o, std::string& partition, std::string& credit,
                     std::string& log_level, std::string& log_file) {
  auto* app = root.add_subcommand("coordinator", "Rendezvous, cluster map, heartbeats, barriers, progress, summary");
  app->footer("Example: psbed coordinator --bind tcp://0.0.0.0:7000 --servers 2 --workers 4 --model lenet5 --mode bsp");
  add_common(app, log_level);
  app->add_option("--log-file", log_file,
                  "write the log lines to this file as well as to stderr (launch: OUT/logs/coordinator.log)");
  app->add_option("--bind", o.bind, "ZeroMQ endpoint to listen on")->capture_default_str();
  app->add_option("--servers", o.servers, "server shards to wait for")->capture_default_str();
  app->add_option("--workers", o.workers, "workers to wait for")->capture_default_str();
  app->add_option("--model", o.model, "model name or .toml path (sent to every node)")->capture_default_str();
  app->add_option("--mode", o.mode, "consistency: async, bsp or ssp:K")->capture_default_str();
  app->add_option("--policy", o.policy.name, "transmission policy: bulk, wfbp, tf-random, p3, bytescheduler, prophet")->capture_default_str();
  app->add_option("--slice-params", o.policy.slice_params, "p3, prophet: parameters per slice")->capture_default_str();
  app->add_option("--partition-params", o.policy.partition_params, "bytescheduler: parameters per partition")->capture_default_str();
  app->add_option("--credit", credit, "p3/bytescheduler: bytes in flight at most; prophet: largest block (default, or 'default': the policy's)")
      ->transform(cluster::credit_value());
  app->add_option("--lr", o.sgd.lr, "learning rate (async needs a smaller one than bsp: docs/concepts.md, \"Consistency\")")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--momentum", o.sgd.momentum, "SGD momentum")->capture_default_str()->check(momentum_range());
  app->add_option("--weight-decay", o.sgd.weight_decay, "L2 weight decay")->capture_default_str()
      ->check(non_negative("a weight decay", true));
  app->add_option("--lr-schedule", o.lr_schedule, "constant or cosine")->capture_default_str();
  app->add_option("--epochs", o.epochs, "passes over the training set, all workers together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--steps", o.steps, "steps per worker (overrides --epochs)")->capture_default_str()
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  app->add_option("--batch", o.batch, "batch per worker")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app->add_option("--seed", o.seed, "seed for initial parameters and data order")->capture_default_str()->transform(cluster::seed_validator());
  app->add_option("--partition-bytes", partition, "largest part a tensor is cut into")->capture_default_str()
      ->check(cluster::size_value());
  app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--heartbeat-timeout", o.heartbeat_timeout_s, "seconds of silence before a node is dead (at least twice --heartbeat)")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--progress-every", o.progress_every_s, "seconds between progress lines")->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--register-timeout", o.register_timeout_s, "seconds for every node to register")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--summary", o.summary_path, "write summary.json here at the end");
  app->add_option("--endpoint-file", o.endpoint_file, "write the bound endpoint here (for --bind with port *)");
  app->add_option("--compute", o.compute, "compute mode recorded in the summary")->capture_default_str();
  app->add_option("--http", o.http, "serve the dashboard and HTTP API on HOST:PORT (:PORT = loopback; port 0 = any)");
  app->add_option("--http-token", o.http_token, "token every HTTP request must carry (required beyond loopback; default $PSBED_HTTP_TOKEN)");
  app->add_option("--http-file", o.http_file, "write the dashboard's URL here once listening");
  app->add_option("--profile", o.profile, "profile.json (psbed profile): /api/prediction predicts from it");
}

void add_server(CLI::App& root, ps::ServerOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("server", "One parameter-server shard");
  app->footer("Example: psbed server --coordinator tcp://HOST:7000 --bind tcp://0.0.0.0:7100 --advertise tcp://HOST:7100");
  add_common(app, log_level);
  app->add_option("--coordinator", o.coordinator, "coordinator endpoint")->capture_default_str();
  app->add_option("--bind", o.bind, "endpoint workers connect to (':*' = any free port)")->capture_default_str();
  app->add_option("--advertise", o.advertise, "address given to workers (default: the bound endpoint)");
  app->add_option("--name", o.name, "node name (default server-<pid>)")->check(cluster::node_name_value());
  app->add_option("--connect-timeout", o.connect_timeout_s, "seconds to reach the coordinator")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--coordinator-timeout", o.coordinator_timeout_s,
                  "once joined: seconds of silence from the coordinator (it answers every heartbeat) after which "
                  "it is gone and this node stops with an error")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6));
  app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--trace-dir", o.trace_dir, "write <name>.trace.json here");
  app->add_option("--max-message-bytes", o.max_message_bytes, "larger messages are dropped")->capture_default_str();
  app->add_option("--apply-threads", o.apply_threads, "threads applying updates (each owns a subset of parts)")->capture_default_str();
  app->add_option("--bandwidth", o.bandwidth, "emulated link rate per direction, e.g. 1gbit (a number needs its unit; default or 0: unshaped)")
      ->check(cluster::bandwidth_value(false));
  app->add_option("--latency", o.latency, "emulated one-way latency, e.g. 200us")->check(cluster::duration_value());
}

void add_worker(CLI::App& root, worker::WorkerOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("worker", "A worker training through the parameter server");
  app->footer("Example: psbed worker --coordinator tcp://HOST:7000 --model lenet5 --data mnist");
  add_common(app, log_level);
  app->add_option("--coordinator", o.coordinator, "coordinator endpoint")->capture_default_str();
  app->add_option("--name", o.name, "node name (default worker-<pid>)")->check(cluster::node_name_value());
  app->add_option("--model", o.model, "the cluster's model (its input shape is needed to load data)")->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir, "directory with IDX files");
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--compute", o.compute, "real, or replay:<profile.json>: sleep per layer for durations drawn from a profile (psbed profile) instead of computing")->capture_default_str();
  app->add_option("--threads", o.threads, "compute threads")->capture_default_str();
  app->add_option("--connect-timeout", o.connect_timeout_s, "seconds to reach the coordinator, and each server shard")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--coordinator-timeout", o.coordinator_timeout_s,
                  "once joined: seconds of silence from the coordinator (it answers every heartbeat) after which "
                  "it is gone and this node stops with an error")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6));
  app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats")->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  app->add_option("--progress-every", o.progress_every_s, "seconds between progress reports")->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--trace-dir", o.trace_dir, "write <name>.trace.json here");
  app->add_option("--save-params", o.save_params, "the evaluating worker writes final parameters here (raw float32)");
  app->add_option("--straggler-ms,--straggle-ms", o.straggle_ms,
                  "sleep this long every step (a deliberate straggler; --straggle-ms: the older name)")
      ->check(non_negative("milliseconds"));
  app->add_option("--start-stagger-ms", o.start_stagger_ms,
                  "worker i of N waits i x this / N before its first step (a de-synchronized start)");
  app->add_option("--bandwidth", o.bandwidth, "emulated link rate per direction, e.g. 100mbit (a number needs its unit; default or 0: unshaped)")
      ->check(cluster::bandwidth_value(false));
  app->add_option("--latency", o.latency, "emulated one-way latency, e.g. 200us")->check(cluster::duration_value());
}

void add_launch(CLI::App& root, cluster::LaunchOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("launch", "Start a whole cluster on this host and collect its results");
  app->footer(
      "Example: psbed launch --servers 2 --workers 4 --model lenet5 --data mnist --epochs 5 --lr 0.005 --mode async --out runs/NAME\n"
      "Writes OUT/summary.json, OUT/traces/*.trace.json (open in Perfetto) and OUT/logs/*.log.");
  add_common(app, log_level);
  app->add_option("--servers", o.servers, "server shards")->capture_default_str();
  app->add_option("--workers", o.workers, "workers")->capture_default_str();
  app->add_option("--model", o.model, "model name or .toml path")->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir, "directory with IDX files");
  app->add_option("--mode", o.mode, "async, bsp or ssp:K")->capture_default_str();
  app->add_option("--policy", o.policy, "transmission policy: bulk, wfbp, tf-random, p3, bytescheduler, prophet")->capture_default_str();
  app->add_option("--slice-params", o.slice_params, "p3, prophet: parameters per slice")->capture_default_str();
  app->add_option("--partition-params", o.partition_params, "bytescheduler: parameters per partition")->capture_default_str();
  app->add_option("--credit", o.credit, "p3/bytescheduler: bytes in flight at most; prophet: largest block; e.g. 4MiB (default, or 'default': the policy's)")
      ->transform(cluster::credit_value());
  app->add_option("--epochs", o.epochs, "passes over the training set, all workers together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--steps", o.steps, "steps per worker (overrides --epochs)")->capture_default_str();
  app->add_option("--batch", o.batch, "batch per worker")->capture_default_str();
  app->add_option("--lr", o.lr, "learning rate (async needs a smaller one than bsp: docs/concepts.md, \"Consistency\")")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str()->check(momentum_range());
  app->add_option("--weight-decay", o.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(non_negative("a weight decay", true));
  app->add_option("--lr-schedule", o.lr_schedule, "constant or cosine")->capture_default_str();
  app->add_option("--seed", o.seed, "seed")->capture_default_str()->transform(cluster::seed_validator());
  app->add_option("--partition-bytes", o.partition_bytes, "largest part a tensor is cut into")->capture_default_str()
      ->check(cluster::size_value());
  app->add_option("--threads", o.threads, "compute threads per worker")->capture_default_str();
  app->add_option("--apply-threads", o.apply_threads, "threads applying updates per server shard")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--compute", o.compute, "real, or replay:<profile.json>: sleep per layer for durations drawn from a profile (psbed profile) instead of computing")->capture_default_str();
  app->add_option("--out", o.out, "run folder (default runs/<model>-<mode>-<N>w<S>s-<time>)");
  app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats")->capture_default_str();
  app->add_option("--heartbeat-timeout", o.heartbeat_timeout_s, "seconds of silence before a node is dead")->capture_default_str();
  app->add_option("--timeout", o.timeout_s, "stop the run after this many seconds")->capture_default_str();
  app->add_flag("!--no-trace", o.trace, "do not write traces");
  app->add_option("--save-params", o.save_params, "final parameters to this file (raw float32)");
  app->add_option("--straggler-ms", o.straggler_ms, "make worker-0 a straggler: it sleeps this long every step");
  app->add_option("--start-stagger-ms", o.start_stagger_ms,
                  "worker i of N waits i x this / N before its first step (default: all start together)");
  app->add_option("--bandwidth", o.bandwidth, "emulated link rate of every server and worker, per direction (e.g. 1gbit; 0: unshaped)")
      ->check(cluster::bandwidth_value(false));
  app->add_flag("--netns", o.netns, "one network namespace per node on a bridge, --bandwidth shaped by tc tbf (needs root; all removed on exit)");
  app->add_option("--latency", o.latency, "emulated one-way latency of every link (e.g. 200us)")->check(cluster::duration_value());
  app->add_option("--http", o.http, "the coordinator serves the dashboard and HTTP API on HOST:PORT (:PORT = loopback; port 0 = any)");
  app->add_option("--http-token", o.http_token, "token for the HTTP API (required beyond loopback; default $PSBED_HTTP_TOKEN)");
  app->add_option("--profile", o.profile, "profile.json given to the coordinator for /api/prediction");
}

// ---- predictor: profile, predict, validate, optimize, bench predict ----

struct PredictorCommands {
  predictor::ProfileCommandOptions profile;
  predictor::PredictOptions predict;
  predictor::ValidateOptions validate;
  predictor::OptimizeOptions optimize;
  cluster::VerifyOptions verify;
  predictor::BenchPredictOptions bench;
};

// `steps_help`, if set, is validate's: each run's own steps by default, and the settings a run
// records (partition, slice, credit, straggler) are taken from the run, so no flag offers them.
void add_sim_flags(CLI::App* app, predictor::SimFlags& f, const char* steps_help = nullptr) {
  const bool per_run = steps_help != nullptr;
  app->add_option("--bandwidth", f.bandwidth,
                  per_run ? "link of every node, per direction, e.g. 1gbit (0: unlimited), in place of the one each "
                            "run recorded (default: each run's own; runs that recorded different links stay apart)"
                          : "link of every node, per direction, e.g. 1gbit (0: unlimited; default: the profile's)")
      ->check(cluster::bandwidth_value(true));
  app->add_option("--latency", f.latency,
                  per_run ? "one-way latency, e.g. 200us, in place of the one each run recorded (default: each run's own)"
                          : "one-way latency, e.g. 200us (default: the profile's)")
      ->check(cluster::duration_value());
  app->add_option("--link-model", f.link_model,
                  "bucket: per-node FIFO token buckets as psbed launch --bandwidth emulates; fair: max-min fair "
                  "sharing as TCP under kernel shaping")
      ->capture_default_str()
      ->check(cluster::one_of({"bucket", "fair"}));
  if (!per_run) {
    app->add_option("--partition-bytes", f.partition_bytes, "largest part a tensor is cut into")
        ->capture_default_str()
        ->check(cluster::size_value());
    app->add_option("--slice-params", f.slice_params, "p3, prophet: parameters per slice")->capture_default_str()
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
    app->add_option("--partition-params", f.partition_params, "bytescheduler: parameters per partition")
        ->capture_default_str()->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
    app->add_option("--credit", f.credit,
                    "p3/bytescheduler: bytes in flight at most; prophet: largest block (default, or 'default': "
                    "the policy's)")
        ->transform(cluster::credit_value());
  }
  app->add_option("--apply-threads", f.apply_lanes,
                  per_run ? "apply threads per server shard, for runs that do not record theirs (launch does)"
                          : "apply threads per server shard")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  if (steps_help)
    app->add_option("--steps", f.steps, steps_help)->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  else
    app->add_option("--steps", f.steps, "simulated steps per worker")->capture_default_str()
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  app->add_option("--seed", f.seed, "seed of the compute draws and tf-random")->capture_default_str()->transform(cluster::seed_validator());
  app->add_option("--seeds", f.seeds,
                  "simulations per configuration, with seeds --seed, --seed + 1, ...: the one with the median "
                  "images/s is the prediction (steadies configurations on the edge between two regimes)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app->add_option("--jobs", f.jobs,
                  "simulations run at once, one per thread (0: one per core this process may use); "
                  "the figures do not depend on it")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  if (!per_run)
    app->add_option("--straggler-ms", f.straggler_ms, "worker-0 sleeps this long every step")
        ->check(number_in("milliseconds", 0, false, 1e7, "0 or more and below 10^7"));
  app->add_option("--start-stagger-ms", f.start_stagger_ms,
                  per_run ? "worker i of N starts i x this / N later (default: each run's own)"
                          : "worker i of N starts i x this / N later")
      ->check(number_in("milliseconds", 0, false, 1e7, "0 or more and below 10^7"));
  app->add_option("--arrival-jitter-us", f.arrival_jitter_us,
                  "arrivals at a node from different senders come up to this much later, by a seeded "
                  "draw, so that ties go in an order set by chance as on a real host (each connection "
                  "keeps its order); 0: exact times, and ties keep the order they were scheduled in, "
                  "which holds workers in lockstep")
      ->capture_default_str()
      ->check(number_in("microseconds", 0, false, 1e6, "0 or more and below 10^6 (a second)"));
  app->add_option("--compute", f.compute,
                  "the workers' compute: real (each worker's forward and backward take one of the "
                  "host's cores, so workers beyond the cores queue for them), replay (sleeps, as "
                  "--compute replay:...), or auto: as the profiled run's (validate: each run's own)")
      ->capture_default_str()
      ->check(cluster::one_of({"auto", "real", "replay"}));
  app->add_option("--host-cpus", f.host_cpus,
                  "cores every node of the cluster shares, each transfer taking the profile's "
                  "CPU for its two messages and its bytes on one where its data arrives "
                  "(default: the profile's host; 0: the host's CPU not modelled)")
      ->check(CLI::Range(0, 1 << 16));
}

void add_predictor(CLI::App& root, PredictorCommands& o, std::string& log_level) {
  auto* prof = root.add_subcommand("profile", "Single-worker run folder -> profile.json");
  prof->footer("Example: psbed profile runs/lenet5-1w -o profile.json");
  add_common(prof, log_level);
  prof->add_option("run", o.profile.extract.run, "run folder (the --out of psbed launch)")->required();
  prof->add_option("-o,--out", o.profile.out, "profile to write")->capture_default_str();
  prof->add_option("--worker", o.profile.extract.worker, "which worker's trace (needed if the run had several)");
  prof->add_option("--contention-run", o.profile.contention_run,
                   "a second run of the same model and batch on this host with at least twice as many "
                   "workers + shards as cores (real compute on one thread a worker, traces): the extra "
                   "CPU a crowded host spends per step, which the single-worker run cannot show "
                   "(host.contention; docs/prediction.md, \"The host's contention\")");
  prof->add_option("--skip-steps", o.profile.extract.skip_steps, "warm-up steps left out (default: the worker's rule)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  prof->add_option("--copy-ns-per-byte", o.profile.extract.copy_cpu_ns_per_byte,
                   "host CPU a byte costs (loopback copies), e.g. an earlier profile's "
                   "host.cpu_per_byte_ns, to re-extract it alike (default: measured now, "
                   "which varies with the machine's state)")
      ->check(non_negative("ns per byte"));
  prof->add_flag("!--no-calibrate", o.profile.extract.calibrate, "no fit to the run's own pace: the fitted cost (message_latency_us with host CPU, else message_cost_us or transit_ns_per_byte) stays 0");

  auto* pred = root.add_subcommand("predict", "Profile + configurations -> predicted throughput (simulated)");
  pred->footer("Example: psbed predict --profile profile.json --workers 1,2,4,8 --servers 1,2 --policy all --mode bsp "
               "--bandwidth 1gbit --json out.json");
  add_common(pred, log_level);
  pred->add_option("--profile", o.predict.profile, "profile.json from psbed profile")->required();
  pred->add_option("--workers", o.predict.workers, "worker counts")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 100000));
  pred->add_option("--servers", o.predict.servers, "server shard counts")->delimiter(',')->capture_default_str()
      ->check(CLI::Range(1, 100000));
  pred->add_option("--policy", o.predict.policies, "policies, or all")->delimiter(',')->capture_default_str();
  pred->add_option("--mode", o.predict.modes, "async, bsp, ssp:K (several: comma-separated)")->delimiter(',')->capture_default_str();
  o.predict.sim.seeds = predictor::kPredictSeeds;
  add_sim_flags(pred, o.predict.sim);
  pred->add_flag("--analytic", o.predict.analytic_only, "analytic bounds only (instant), no simulation, so no --trace-out");
  pred->add_option("--json", o.predict.json_out, "write the predictions as JSON to this file");
  pred->add_option("--trace-out", o.predict.trace_out,
                   "write synthetic Chrome traces, one per node, of each configuration's median seed: into this "
                   "folder for one configuration, into a subfolder per configuration (e.g. 4w1s-p3-bsp/) for "
                   "several; a folder that holds traces already is refused");

  auto* val = root.add_subcommand("validate", "Profile + measured run folders -> prediction error table and plot");
  val->footer("Example: psbed validate --profile profile.json runs/sweep-x/*/ --out report/\n"
              "Runs of one configuration (`psbed sweep --repeat`) are predicted once and compared by the median of\n"
              "their images/s; the report gives each one's range, and the error of every run alone beside it.\n"
              "Where a run's traces measured the host's CPU per worker-step, the report sets it beside what the\n"
              "simulation booked on the cores and simulates the run again at it: how much of an error is the CPU per\n"
              "step (no prediction: it takes the run's figure; docs/predictor-model.md, \"The host's CPU per step\").");
  add_common(val, log_level);
  val->add_option("--profile", o.validate.profile, "profile.json from psbed profile")->required();
  val->add_option("runs", o.validate.runs, "measured run folders")->required();
  val->add_option("--out", o.validate.out, "report folder")->capture_default_str();
  o.validate.sim.seeds = predictor::kPredictSeeds;
  o.validate.sim.steps = 0;  // each run's own
  add_sim_flags(val, o.validate.sim, "simulated steps per worker (default, 0: each run's own)");
  val->add_option("--python", o.validate.python, "interpreter with matplotlib for the plot")->capture_default_str();

  auto* opt = root.add_subcommand("optimize", "Profile + constraints -> best workers/servers/policy/slice/credit");
  opt->footer("Example: psbed optimize --profile profile.json --max-nodes 16 --bandwidth 1gbit\n"
              "Searched: workers, servers, policies; p3 slices 10k/40k/160k parameters x credits 1/4/16 MiB;\n"
              "bytescheduler partitions 250k/1M parameters x credits 4 MiB/16 MB. --slice-params,\n"
              "--partition-params and --credit, when given, fix theirs instead (--credit default: each\n"
              "policy's own). Settings that change nothing (a credit of at least the model's bytes, a slice of at\n"
              "least the largest part) are simulated once and listed as one row. Each configuration is\n"
              "simulated with --seeds seeds (1), and the leaders again with --confirm-seeds (5).\n"
              "With --verify it then launches the first configuration by images/s on this host, predicts that run\n"
              "for its own length and prints measured beside predicted (and RUN/verify.json).");
  add_common(opt, log_level);
  opt->add_option("--profile", o.optimize.profile, "profile.json from psbed profile")->required();
  opt->add_option("--max-nodes", o.optimize.max_nodes, "workers + servers at most")
      ->capture_default_str()
      ->check(CLI::Range(2, predictor::kOptimizeMaxNodes));
  opt->add_option("--max-servers", o.optimize.max_servers, "server shards at most")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  opt->add_option("--policy", o.optimize.policies, "policies to consider, or all")->delimiter(',')->capture_default_str();
  opt->add_option("--mode", o.optimize.mode, "async, bsp or ssp:K")->capture_default_str();
  o.optimize.sim.steps = 60;
  add_sim_flags(opt, o.optimize.sim);
  opt->add_option("--top", o.optimize.top, "configurations listed per ranking")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  opt->add_option("--confirm-seeds", o.optimize.confirm_seeds,
                  "the leaders of the search (the first 2 x --top of each ranking) are simulated again with this "
                  "many seeds and ranked by their median, so that one lucky draw on the edge between two regimes "
                  "does not rank first; a value not above --seeds skips this second pass")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  opt->add_option("--json", o.optimize.json_out,
                  "write the search's context, every configuration simulated and the rankings as JSON to this file");
  opt->add_flag("--verify", o.verify.enabled,
                "launch the first configuration by images/s on this host (psbed launch) and print measured beside "
                "predicted");
  opt->add_option("--verify-steps", o.verify.steps, "--verify: steps per worker of the run")->capture_default_str();
  opt->add_option("--verify-data", o.verify.data, "--verify: mnist or synthetic")->capture_default_str();
  opt->add_option("--verify-compute", o.verify.compute,
                  "--verify: real, or replay:<profile.json> (default: replay of --profile, so many workers fit "
                  "on few cores); the ranking predicts the same compute unless --compute says otherwise");
  opt->add_option("--verify-out", o.verify.out, "--verify: run folder (default runs/verify-<model>-<W>w<S>s-<time>)");

  auto* bench = root.get_subcommand("bench")->add_subcommand(
      "predict", "Simulator speed: events/s per worker count and slice size");
  bench->footer("Target: 1,000 steps of 64 vgg-mini workers under p3 in <= 2 s on one core.");
  add_common(bench, log_level);
  bench->add_option("--profile", o.bench.profile, "profile to simulate (default: a synthetic one for --model)");
  bench->add_option("--model", o.bench.model, "model")->capture_default_str();
  bench->add_option("--workers", o.bench.workers, "worker counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--policy", o.bench.policy, "policy")->capture_default_str();
  bench->add_option("--steps", o.bench.steps, "steps per worker")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  bench->add_option("--slice-params", o.bench.slice_params,
                    "slice sizes in parameters (p3, prophet; bytescheduler: partition sizes), each run for every "
                    "worker count: ns/slice-msg stays flat when the cost is linear in slices")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  bench->add_option("--bandwidth", o.bench.bandwidth, "link")->capture_default_str()->check(cluster::bandwidth_value(false));
  bench->add_option("--link-model", o.bench.link_model, "bucket or fair")
      ->capture_default_str()
      ->check(cluster::one_of({"bucket", "fair"}));
  bench->add_option("--json", o.bench.json_out, "write the timings as JSON to this file");
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
        for (const char* flag : {"--verify-steps", "--verify-data", "--verify-compute", "--verify-out", "--verify-timeout"})
          if (app->get_option_no_throw(flag) && app->count(flag) > 0)
            throw Error(std::string(flag) + " is for the run --verify launches: add --verify, or leave it out");
      return cluster::run_optimize_verify(opt, o.verify);
    }
  if (auto* b = root.get_subcommand("bench"); b->parsed() && b->got_subcommand("predict")) {
    setup_logging("bench", log_level);
    return predictor::run_bench_predict(o.bench, b->get_subcommand("predict")->count("--model") > 0);
  }
  return -1;
}

// Exit statuses besides 0 (done) and 1 (the work failed): a usage error, or a device the
// machine lacks (--device gpu without one).
constexpr int kUsageError = 2;
constexpr int kDeviceUnavailable = 2;

// The subcommands the command line reached, as "psbed bench predict" ("psbed" if none), and
// the last of them in `leaf`.
std::string command_path(const CLI::App& root, const CLI::App** leaf = nullptr) {
  std::string path = "psbed";
  const CLI::App* app = &root;
  while (!app->get_subcommands().empty()) {
    app = app->get_subcommands().front();
    path += " " + app->get_name();
  }
  if (leaf) *leaf = app;
  return path;
}

// The option a command-line word names: `--log-level=debug` names --log-level.
std::string option_name(const std::string& word) { return word.substr(0, word.find('=')); }

// Whether `app` or a subcommand below it has an option `name` for which `pred` holds (one
// subcommand's --json may be a flag where another's takes a file).
bool any_option_below(const CLI::App& app, const std::string& name,
                      const std::function<bool(const CLI::Option&)>& pred) {
  if (const CLI::Option* o = app.get_option_no_throw(name); o != nullptr && pred(*o)) return true;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (any_option_below(*sub, name, pred)) return true;
  return false;
}

// The subcommand of `app` named `word`, or nullptr.
const CLI::App* subcommand_named(const CLI::App& app, const std::string& word) {
  const auto found = app.get_subcommands([&](const CLI::App* s) { return s->check_name(word); });
  return found.empty() ? nullptr : found.front();
}

// `psbed --log-level debug bench ps`: a subcommand's options before it (the root takes only
// --help and the hidden --config). One line saying where they go, or naming the word that is
// no subcommand; "" if the command line has no such options.
std::string options_first_error(const CLI::App& root, int argc, char** argv) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {  // the root's own options stay where they are
    const CLI::Option* o = root.get_option_no_throw(option_name(argv[i]));
    if (o == nullptr) break;
    if (o->get_items_expected_min() > 0 && std::string(argv[i]).find('=') == std::string::npos) ++i;
  }
  if (i >= argc || argv[i][0] != '-' || std::string(argv[i]) == "--") return "";
  std::string options;
  for (; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (!word.empty() && word[0] == '-') {
      const std::string name = option_name(word);
      if (!any_option_below(root, name, [](const CLI::Option&) { return true; }))
        return "psbed: unknown option '" + name +  // a typo: its value would pass for a subcommand
               "' (a subcommand's options go after it; `psbed SUBCOMMAND --help` lists them)";
      options += (options.empty() ? "" : " ") + word;
      // `--log-level debug`: the next word is the option's value, not the subcommand.
      const bool value_next =
          word.find('=') == std::string::npos &&
          any_option_below(root, name, [](const CLI::Option& o) { return o.get_items_expected_min() > 0; });
      if (value_next && i + 1 < argc && std::string(argv[i + 1]) != "--")
        options += std::string(" ") + argv[++i];
      continue;
    }
    const CLI::App* sub = subcommand_named(root, word);
    if (sub == nullptr)
      return "psbed: unknown subcommand '" + word + "', expected one of: " +
             cluster::subcommand_names(root) + " (a subcommand's options go after it)";
    std::string path = "psbed " + word;  // and its own subcommands named after it
    for (++i; i < argc && (sub = subcommand_named(*sub, argv[i])) != nullptr; ++i)
      path += std::string(" ") + argv[i];
    return "psbed: " + options + ": a subcommand's options go after it (`" + path + " " +
           options + " ...`)";
  }
  return "psbed: no subcommand given (" + options + "); expected one of: " +
         cluster::subcommand_names(root);
}

// A usage error in one line that names the subcommand. A word where a subcommand was required
// (`psbed lanch`, `psbed ctl --run x polcy`) is named with the subcommands there are, rather
// than CLI11's "A subcommand is required"; a subcommand's options given before it are said to
// go after it.
std::string usage_error(const CLI::App& root, const CLI::ParseError& e, int argc, char** argv) {
  if (std::string first = options_first_error(root, argc, argv); !first.empty()) return first;
  const CLI::App* leaf = nullptr;
  const std::string where = command_path(root, &leaf);
  if (leaf->get_require_subcommand_min() > 0)
    for (const std::string& word : leaf->remaining())
      if (!word.empty() && word[0] != '-')
        return where + ": unknown subcommand '" + word +
               "', expected one of: " + cluster::subcommand_names(*leaf);
  return where + ": " + cluster::plain_parse_error(e.what()) + " (see `" + where + " --help`)";
}

// A list flag's empty item (`--workers 1,,2`, `--workers ""`): CLI11 drops empty items between
// commas (1,,2 ran as 1,2) and reads an empty value as 0, so the raw words are looked at after a
// parse. One line naming the flag, or "" if there is none.
std::string empty_list_item(const CLI::App& root, int argc, char** argv) {
  const CLI::App* leaf = nullptr;
  const std::string where = command_path(root, &leaf);
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = option_name(word);
    const CLI::Option* o = nullptr;
    for (const CLI::App* app = leaf; app != nullptr && o == nullptr; app = app->get_parent())
      o = app->get_option_no_throw(name);
    if (o == nullptr || o->get_delimiter() == '\0') continue;
    const bool inline_value = word.find('=') != std::string::npos;
    if (!inline_value && i + 1 >= argc) continue;
    // The words CLI11 takes for the list: the next one, and those after it up to an option.
    std::vector<std::string> values = {inline_value ? word.substr(word.find('=') + 1) : argv[++i]};
    if (!inline_value)
      while (i + 1 < argc && argv[i + 1][0] != '-') values.push_back(argv[++i]);
    const char d = o->get_delimiter();
    const std::string doubled(2, d);
    const std::string separated =
        (d == ',' ? std::string("comma") : "'" + std::string(1, d) + "'") + "-separated";
    // An empty value of a number list reads as 0; of a text list it may mean something
    // (sweep --bandwidth "": unshaped), and the command checks it.
    const std::string type = o->get_type_name();
    const bool numbers =
        type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 || type.rfind("FLOAT", 0) == 0;
    for (const std::string& value : values) {
      if (value.empty() && numbers)
        return where + ": " + name + ": an empty value (expected one or more numbers, " +
               separated + ")";
      if ((!value.empty() && (value.front() == d || value.back() == d)) ||
          value.find(doubled) != std::string::npos)
        return where + ": " + name + ": an empty item in '" + value + "' (expected values " +
               separated + ", none empty)";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App root{"psbed: a live, small-scale parameter-server testbed with a throughput predictor"};
  root.require_subcommand(1);
  cluster::enable_subcommand_configs(root);
  root.footer("Run `psbed <subcommand> --help` for each subcommand's options.");
  std::string log_level = "info";
  worker::TrainOptions train;
  worker::BenchComputeOptions bench;
  add_train(root, train, log_level);
  add_bench(root, bench, log_level);
  ps::BenchPsOptions bench_ps;
  add_bench_ps(root.get_subcommand("bench"), bench_ps, log_level);
  ps::CoordinatorOptions coord;
  std::string partition = "4MiB";
  ps::ServerOptions server;
  worker::WorkerOptions wopt;
  cluster::LaunchOptions launch;
  std::string coord_credit;
  std::string coord_log_file;
  add_coordinator(root, coord, partition, coord_credit, log_level, coord_log_file);
  add_server(root, server, log_level);
  add_worker(root, wopt, log_level);
  add_launch(root, launch, log_level);
  cluster::CtlOptions ctl;
  cluster::add_ctl(root, ctl, log_level);
  cluster::SweepOptions sweep;
  sweep.base.lr_schedule = "constant";
  cluster::add_sweep(root, sweep, log_level);
  PredictorCommands predictor_commands;
  add_predictor(root, predictor_commands, log_level);
  std::string probe_endpoint;
  int probe_sender = 0;
  {
    auto* app = root.add_subcommand("probe", "Send a server shard one malformed message of each kind");
    app->footer("The shard should log a reason for each, count it, and keep serving its workers.");
    add_common(app, log_level);
    app->add_option("--endpoint", probe_endpoint, "the shard's endpoint (from its log: 'serving on ...')")->required();
    app->add_option("--sender", probe_sender, "worker id to claim in otherwise well-formed headers")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
  }
  // Usage errors (an unknown subcommand or option, a value of the wrong kind, a missing one) get
  // one line naming the subcommand and exit status 2, as other command-line tools; --help prints
  // and exits 0; a failure of the work itself exits 1.
  try {
    root.parse(argc, argv);
  } catch (const CLI::ConfigError& e) {
    // A key CLI11 cannot place gets the hint; a syntax error names its file and line already.
    const bool key = std::string(e.what()).find("INI was not able to parse") != std::string::npos;
    std::fprintf(stderr, "%s: --config: %s%s\n", command_path(root).c_str(), e.what(),
                 key ? " (keys are the subcommand's long flag names)" : "");
    return kUsageError;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return root.exit(e);  // --help
    std::fprintf(stderr, "%s\n", usage_error(root, e, argc, argv).c_str());
    return kUsageError;
  }
  if (const std::string empty = empty_list_item(root, argc, argv); !empty.empty()) {
    std::fprintf(stderr, "%s\n", empty.c_str());
    return kUsageError;
  }
  try {
    if (const int rc = run_predictor(root, predictor_commands, log_level); rc >= 0) return rc;
    if (root.got_subcommand("train")) {
      setup_logging("train", log_level);
      // Stopped by a signal: its results kept, and the status a stopped node has.
      return worker::run_train(train).stopped_by.empty() ? 0 : ps::kStoppedStatus;
    }
    if (root.got_subcommand("coordinator")) {
      if (!coord_log_file.empty()) ensure_writable_file(coord_log_file, "--log-file");
      setup_logging("coordinator", log_level, coord_log_file);
      // As launch checks them: refused here, not found when the first node registers.
      coord.partition_bytes =
          cluster::check_coordinator_settings(partition, coord.heartbeat_s, coord.heartbeat_timeout_s);
      if (!coord_credit.empty())
        coord.policy.credit_bytes =
            std::int64_t(for_flag("--credit", [&] { return parse_bytes(coord_credit); }));
      if (const char* t = std::getenv("PSBED_HTTP_TOKEN"); coord.http_token.empty() && t) coord.http_token = t;
      // /api/prediction: the simulator on the profile's link, for the cluster as it runs now.
      coord.predict = [](const std::string& profile_path, const nlohmann::json& cfg) {
        const Profile profile = Profile::load(profile_path);
        predictor::SimConfig c;
        c.workers = cfg.at("workers").get<int>();
        c.servers = cfg.at("servers").get<int>();
        c.mode = predictor::Consistency::parse(cfg.at("mode").get<std::string>());
        c.policy = ps::policy_from_json(cfg.at("policy"));
        c.partition_bytes = cfg.at("partition_bytes").get<std::int64_t>();
        c.bandwidth_bytes_per_sec = profile.bandwidth_bytes_per_sec;
        c.latency_s = profile.latency_us * 1e-6;
        c.link_model = predictor::LinkModel::kBucket;
        predictor::take_host_costs(profile, c);
        c.arrival_jitter_s = predictor::kArrivalJitterUs * 1e-6;  // as psbed predict
        // The running cluster's compute: real compute takes the host's cores, replay sleeps.
        c.compute_on_cores = cfg.value("compute", std::string("real")) == "real";
        c.steps = 100;
        return predictor::simulate_seeds(profile, load_model(cfg.at("model").get<std::string>()), c,
                                         predictor::kPredictSeeds)
            .images_per_sec;
      };
      // Where it writes, checked now: not a finished run that cannot keep its summary.
      ensure_writable_file(coord.summary_path, "--summary");
      ensure_writable_file(coord.endpoint_file, "--endpoint-file");
      ensure_writable_file(coord.http_file, "--http-file");
      // A profile that cannot be read is one line now, not a failed prediction later.
      if (!coord.profile.empty())
        Profile::load(coord.profile).check_matches(load_model(coord.model), "--profile " + coord.profile);
      return ps::run_coordinator(coord);
    }
    if (root.got_subcommand("server")) {
      setup_logging(server.name.empty() ? "server" : server.name, log_level);
      return ps::run_server(server);
    }
    if (root.got_subcommand("worker")) {
      setup_logging(wopt.name.empty() ? "worker" : wopt.name, log_level);
      return worker::run_worker(wopt);
    }
    if (root.got_subcommand("probe")) {
      setup_logging("probe", log_level);
      std::printf("%d malformed messages sent\n", ps::run_probe(probe_endpoint, probe_sender));
      return 0;
    }
    if (root.got_subcommand("ctl")) {
      setup_logging("ctl", log_level);
      return cluster::run_ctl(root, ctl);
    }
    if (root.got_subcommand("sweep")) {
      setup_logging("sweep", log_level);
      return cluster::run_sweep(sweep);
    }
    if (root.got_subcommand("launch")) {
      setup_logging("launch", log_level);
      return cluster::run_launch(launch);
    }
    if (auto* b = root.get_subcommand("bench"); b->parsed()) {
      setup_logging("bench", log_level);
      if (b->got_subcommand("ps")) return ps::run_bench_ps(bench_ps);
      return worker::run_bench_compute(bench);
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s (see `%s --help`)\n", command_path(root).c_str(), e.what(),
                 command_path(root).c_str());
    return kUsageError;
  } catch (const DeviceUnavailable& e) {  // the machine lacks what was asked for
    std::fprintf(stderr, "psbed: error: %s\n", e.what());
    return kDeviceUnavailable;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "psbed: error: out of memory (the model's parameters and activations, "
                         "times the batch, or the data set, need more than this process may use)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "psbed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
