#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"

namespace psbed::cluster {

void add_common(CLI::App* app, std::string& log_level) {
  add_config_option(app);
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
}

void add_train(CLI::App& root, worker::TrainOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("train", "Single-process training (no parameter server)");
  app->footer(
      "Example: psbed train --model lenet5 --data mnist --epochs 3 --batch 64 --lr 0.05 --threads "
      "2 --json out.json\n"
      "Models are workloads/models/*.toml (or a path to your own spec); data is 'mnist' (IDX files "
      "in\n"
      "--data-dir, default data/mnist, fetched by `make data`) or 'synthetic' (seeded, shaped like "
      "the model).");
  add_common(app, log_level);
  app->add_option("--model", o.model, "shipped model name or path to a .toml spec")
      ->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir,
                  "directory with IDX files (default $PSBED_DATA_DIR, else data/mnist here, else "
                  "the checkout's)");
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  auto* epochs = app->add_option("--epochs", o.epochs, "passes over the training set")
                     ->capture_default_str()
                     ->check(CLI::Range(1, 1000000));
  // Both given, one would be dropped without a word: refused instead.
  app->add_option("--steps", o.steps,
                  "train this many steps instead of --epochs (not with --epochs)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->excludes(epochs);
  app->add_option("--batch", o.batch, "samples per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--lr", o.sgd.lr, "learning rate")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--lr-schedule", o.lr_schedule, "constant, or cosine (decay to 0 over the run)")
      ->capture_default_str();
  add_momentum_and_decay(app, o.sgd);
  app->add_option("--threads", o.threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--seed", o.seed, "seed for initialisation, shuffling, synthetic data")
      ->capture_default_str()
      ->transform(seed_validator());
  app->add_flag("!--no-eval", o.evaluate, "skip test-set evaluation");
  app->add_flag("!--no-standardize", o.standardize,
                "feed raw [0, 1] pixels instead of standardised ones");
  as_duration(
      app->add_option("--progress-every", o.progress_every_s, "seconds between progress lines"),
      "s")
      ->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--json", o.json_out, "write results as JSON to this file");
  app->add_option("--save-params", o.save_params, "final parameters to this file (raw float32)");
}

void add_bench_ps(CLI::App* bench, ps::BenchPsOptions& o, std::string& log_level) {
  auto* app = bench->add_subcommand(
      "ps", "Push+pull throughput through the parameter server, beside raw ZeroMQ");
  app->footer(
      "Rows: 1 worker x 1 shard per model size (ratio to a raw cppzmq round trip of the same "
      "bytes),\n"
      "then aggregate throughput for workers x servers. Everything runs in this process on "
      "loopback.");
  add_common(app, log_level);
  app->add_option("--models", o.model_mib, "model sizes in MiB")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--aggregate-model", o.aggregate_mib,
                  "model size (MiB) of the workers x servers grid")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--workers", o.workers, "worker counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--servers", o.servers, "server counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--partition-bytes", o.partition, "largest part")
      ->capture_default_str()
      ->check(size_value());
  as_duration(
      app->add_option("--min-seconds", o.min_seconds, "seconds per psbed run (raw runs: half)"),
      "s")
      ->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--repeat", o.repeat, "psbed runs per single-worker row, between raw runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app->add_option("--json", o.json_out, "write results as JSON to this file");
  app->add_flag("--secure", o.secure,
                "instead of the tables above: 1 worker x 1 shard per model size with and without "
                "CURVE (docs/security.md), alternating, --repeat runs each; ratio CURVE / plain");
  app->add_flag("--push-pull", o.push_pull,
                "each round pushes every part and takes its updated values back in the push's "
                "answer (one round trip a part), instead of pushing the whole gradient, then "
                "pulling the whole model");
  app->add_option("--replicas", o.replicas,
                  "2: instead of the tables above, each --workers count on the aggregate model "
                  "and 2 shards with 1 and 2 copies of every part (docs/failures.md), "
                  "alternating, --repeat runs each; ratio 2 copies / 1")
      ->check(CLI::Range(1, 2));
  app->add_option("--connections", o.connections,
                  "N above 1: instead of the tables above, 1 worker x 1 shard per model size "
                  "over 1 and N connections (parts striped over them, launch --connections), "
                  "alternating, --repeat runs each; ratio N / 1 (with --push-pull, push-pull "
                  "rounds)")
      ->check(CLI::Range(1, 8));
}

void add_bench_coordinator(CLI::App* bench, ps::BenchCoordinatorOptions& o,
                           std::string& log_level) {
  auto* app = bench->add_subcommand(
      "coordinator", "A coordinator under many fake workers: heartbeat round trip and memory");
  app->footer(
      "Starts `psbed coordinator` as a child process (1 server, --workers workers), registers\n"
      "one fake server and --workers fake workers over ZeroMQ as real nodes do, heartbeats them\n"
      "at the real interval and times each heartbeat to the coordinator's answer. The\n"
      "coordinator's memory is read from /proc (VmRSS, VmHWM). Raises the open-file limit.");
  add_common(app, log_level);
  app->add_option("--workers", o.workers, "fake workers")
      ->capture_default_str()
      ->check(CLI::Range(1, ps::kMaxBenchWorkers));
  app->add_option("--threads", o.threads, "threads sending, each for workers/threads of them")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  as_duration(app->add_option("--seconds", o.seconds, "seconds of heartbeats measured"), "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 3600, "above 0, at most 3600"));
  as_duration(app->add_option("--heartbeat", o.heartbeat_s, "seconds between a node's heartbeats"),
              "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 60, "above 0, at most 60"));
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

void add_bench(CLI::App& root, worker::BenchComputeOptions& o, std::string& log_level) {
  auto* bench = root.add_subcommand("bench", "Benchmarks that print tables and write JSON");
  bench->require_subcommand(1);
  bench->footer("Run `psbed bench <subcommand> --help` for each benchmark's options.");
  auto* app = bench->add_subcommand(
      "compute", "Training-step speed per model, beside PyTorch on this machine");
  app->footer(
      "Rows: each model at each thread count; PyTorch runs in the same invocation, model by "
      "model.\n"
      "Make `make bench` your entry point: it installs PyTorch and OpenBLAS first.");
  add_common(app, log_level);
  app->add_option("--models", o.models, "models to run")->delimiter(',')->capture_default_str();
  app->add_option("--threads", o.threads, "thread counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--batch", o.batch, "batch (0: 64 for 28x28 inputs, 32 for larger)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  as_duration(app->add_option("--min-seconds", o.min_seconds, "timed seconds per row"), "s")
      ->capture_default_str()
      ->check(non_negative("a number of seconds"));
  app->add_option("--min-steps", o.min_steps, "timed steps per row, at least")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  app->add_option("--warmup", o.warmup, "untimed steps per row")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app->add_flag("!--no-torch", o.torch, "skip the PyTorch reference");
  app->add_option("--python", o.python, "interpreter with Debian's python3-torch")
      ->capture_default_str();
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

}  // namespace psbed::cluster
