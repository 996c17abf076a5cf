// psbed: one executable, a subcommand per role (like git or kubectl). Every subcommand takes
// --config FILE.toml (keys are the long flag names; flags given on the command line win),
// logs progress to stderr and writes machine results as JSON.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/units.hpp"
#include "worker/bench_compute.hpp"
#include "worker/train.hpp"

namespace {

using namespace psbed;

void add_common(CLI::App* app, std::string& log_level) {
  app->set_config("--config", "", "TOML file of options (keys = long flag names); flags win");
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")->capture_default_str();
}

void add_train(CLI::App& root, worker::TrainOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("train", "Single-process training (no parameter server)");
  app->footer(
      "Example: psbed train --model lenet5 --data mnist --epochs 3 --batch 64 --lr 0.05 --threads 2 --json out.json\n"
      "Models are workloads/models/*.toml (or a path to your own spec); data is 'mnist' (IDX files in\n"
      "--data-dir, default data/mnist, fetched by `make data`) or 'synthetic' (seeded, shaped like the model).");
  add_common(app, log_level);
  app->add_option("--model", o.model, "shipped model name or path to a .toml spec")->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir, "directory with IDX files (default $PSBED_DATA_DIR or data/mnist)");
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--epochs", o.epochs, "passes over the training set")->capture_default_str();
  app->add_option("--steps", o.steps, "train this many steps instead of --epochs");
  app->add_option("--batch", o.batch, "samples per step")->capture_default_str();
  app->add_option("--lr", o.sgd.lr, "learning rate")->capture_default_str();
  app->add_option("--lr-schedule", o.lr_schedule, "constant, or cosine (decay to 0 over the run)")->capture_default_str();
  app->add_option("--momentum", o.sgd.momentum, "SGD momentum")->capture_default_str();
  app->add_option("--weight-decay", o.sgd.weight_decay, "L2 weight decay")->capture_default_str();
  app->add_option("--threads", o.threads, "compute threads")->capture_default_str();
  app->add_option("--seed", o.seed, "seed for initialisation, shuffling, synthetic data")->capture_default_str();
  app->add_flag("!--no-eval", o.evaluate, "skip test-set evaluation");
  app->add_flag("!--no-standardize", o.standardize, "feed raw [0, 1] pixels instead of standardised ones");
  app->add_option("--progress-every", o.progress_every_s, "seconds between progress lines")->capture_default_str();
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

void add_bench(CLI::App& root, worker::BenchComputeOptions& o, std::string& log_level) {
  auto* bench = root.add_subcommand("bench", "Benchmarks that print tables and write JSON");
  bench->require_subcommand(1);
  auto* app = bench->add_subcommand("compute", "Training-step speed per model, beside PyTorch on this machine");
  app->footer("Rows: each model at each thread count; PyTorch runs in the same invocation, model by model.\n"
              "Make `make bench` your entry point: it installs PyTorch and OpenBLAS first.");
  add_common(app, log_level);
  app->add_option("--models", o.models, "models to run")->delimiter(',')->capture_default_str();
  app->add_option("--threads", o.threads, "thread counts")->delimiter(',')->capture_default_str();
  app->add_option("--batch", o.batch, "batch (0: 64 for 28x28 inputs, 32 for larger)")->capture_default_str();
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--min-seconds", o.min_seconds, "timed seconds per row")->capture_default_str();
  app->add_option("--min-steps", o.min_steps, "timed steps per row, at least")->capture_default_str();
  app->add_option("--warmup", o.warmup, "untimed steps per row")->capture_default_str();
  app->add_flag("!--no-torch", o.torch, "skip the PyTorch reference");
  app->add_option("--python", o.python, "interpreter with Debian's python3-torch")->capture_default_str();
  app->add_option("--json", o.json_out, "write results as JSON to this file");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App root{"psbed: a live, small-scale parameter-server testbed with a throughput predictor"};
  root.require_subcommand(1);
  root.footer("Run `psbed <subcommand> --help` for each subcommand's options.");
  std::string log_level = "info";
  worker::TrainOptions train;
  worker::BenchComputeOptions bench;
  add_train(root, train, log_level);
  add_bench(root, bench, log_level);
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return root.exit(e);
  }
  try {
    if (root.got_subcommand("train")) {
      setup_logging("train", log_level);
      worker::run_train(train);
      return 0;
    }
    if (auto* b = root.get_subcommand("bench"); b->parsed()) {
      setup_logging("bench", log_level);
      return worker::run_bench_compute(bench);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "psbed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
