// psbed: one executable, a subcommand per role (like git or kubectl). Every subcommand takes
// --config FILE.toml (keys are the long flag names; flags given on the command line win),
// logs progress to stderr and writes machine results as JSON.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"
#include "cluster/ctl.hpp"
#include "cluster/launch.hpp"
#include "cluster/sweep.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/status.hpp"
#include "ps/probe.hpp"
#include "ps/stop_signals.hpp"

namespace {

using namespace psbed;

// Exit statuses besides 0 (done) and 1 (the work failed): a usage error, or a device the
// machine lacks (--device gpu without one).
constexpr int kUsageError = 2;
constexpr int kDeviceUnavailable = 2;

// Every subcommand's options, as the command line and its --config fill them.
struct Commands {
  std::string log_level = "info";
  worker::TrainOptions train;
  worker::BenchComputeOptions bench;
  ps::BenchPsOptions bench_ps;
  ps::BenchCoordinatorOptions bench_coordinator;
  cluster::CoordinatorCommand coordinator;
  ps::ServerOptions server;
  worker::WorkerOptions worker;
  cluster::LaunchOptions launch;
  cluster::CtlOptions ctl;
  cluster::SweepOptions sweep;
  cluster::PredictorCommands predictor;
  cluster::ProbeCommand probe;
  cluster::KeysCommand keys;
  cluster::TraceCommand trace;
};

// The subcommands in the order `psbed --help` lists them.
void add_commands(CLI::App& root, Commands& c) {
  cluster::add_train(root, c.train, c.log_level);
  cluster::add_bench(root, c.bench, c.log_level);
  cluster::add_bench_ps(root.get_subcommand("bench"), c.bench_ps, c.log_level);
  cluster::add_bench_coordinator(root.get_subcommand("bench"), c.bench_coordinator, c.log_level);
  cluster::add_coordinator(root, c.coordinator, c.log_level);
  cluster::add_server(root, c.server, c.log_level);
  cluster::add_worker(root, c.worker, c.log_level);
  cluster::add_launch(root, c.launch, c.log_level);
  cluster::add_ctl(root, c.ctl, c.log_level);
  cluster::add_keys(root, c.keys, c.log_level);
  c.sweep.base.lr_schedule = "constant";
  cluster::add_sweep(root, c.sweep, c.log_level);
  cluster::add_predictor(root, c.predictor, c.log_level);
  cluster::add_trace(root, c.trace, c.log_level);
  cluster::add_probe(root, c.probe, c.log_level);
}

// Runs the subcommand the command line named; its errors go to main.
int run_command(CLI::App& root, Commands& c, const std::vector<std::string>& launch_args) {
  const std::string& log_level = c.log_level;
  if (const int rc = cluster::run_predictor(root, c.predictor, log_level); rc >= 0) return rc;
  if (root.got_subcommand("train")) {
    setup_logging("train", log_level);
    // Stopped by a signal: its results kept, and the status a stopped node has.
    return worker::run_train(c.train).stopped_by.empty() ? 0 : ps::kStoppedStatus;
  }
  if (root.got_subcommand("coordinator"))
    return cluster::run_coordinator_command(c.coordinator, log_level);
  if (root.got_subcommand("server")) {
    setup_logging(c.server.node.name.empty() ? "server" : c.server.node.name, log_level);
    return ps::run_server(c.server);
  }
  if (root.got_subcommand("worker")) {
    setup_logging(c.worker.node.name.empty() ? "worker" : c.worker.node.name, log_level);
    return worker::run_worker(c.worker);
  }
  if (root.got_subcommand("probe")) {
    setup_logging("probe", log_level);
    std::printf("%d malformed messages sent\n", ps::run_probe(c.probe.endpoint, c.probe.sender));
    return 0;
  }
  if (root.got_subcommand("ctl")) {
    setup_logging("ctl", log_level);
    return cluster::run_ctl(root, c.ctl);
  }
  if (root.got_subcommand("trace")) {
    setup_logging("trace", log_level);
    return cluster::run_trace(c.trace);
  }
  if (root.got_subcommand("keys")) {
    setup_logging("keys", log_level);
    return cluster::run_keys(c.keys);
  }
  if (root.got_subcommand("sweep")) {
    setup_logging("sweep", log_level);
    return cluster::run_sweep(c.sweep);
  }
  if (root.got_subcommand("launch")) {
    setup_logging("launch", log_level);
    if (!c.launch.resume.empty())
      return cluster::run_resume(c.launch.resume, launch_args, log_level);
    c.launch.args = launch_args;
    return cluster::run_launch(c.launch);
  }
  if (auto* b = root.get_subcommand("bench"); b->parsed()) {
    setup_logging("bench", log_level);
    if (b->got_subcommand("ps")) return ps::run_bench_ps(c.bench_ps);
    if (b->got_subcommand("coordinator")) return ps::run_bench_coordinator(c.bench_coordinator);
    return worker::run_bench_compute(c.bench);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App root{"psbed: a live, small-scale parameter-server testbed with a throughput predictor"};
  root.set_version_flag("--version", std::string("psbed ") + PSBED_VERSION);
  root.require_subcommand(1);
  cluster::enable_subcommand_configs(root);
  root.footer("Run `psbed <subcommand> --help` for each subcommand's options.");
  Commands commands;
  add_commands(root, commands);
  using cluster::command_path;
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
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return root.exit(e);  // --help
    std::fprintf(stderr, "%s\n", cluster::usage_error(root, e, argc, argv).c_str());
    return kUsageError;
  }
  if (const Status items = cluster::empty_list_item(root, argc, argv); !items.ok()) {
    std::fprintf(stderr, "%s\n", items.message().c_str());
    return kUsageError;
  }
  try {
    // launch's own flags, kept for `launch --resume`.
    std::vector<std::string> launch_args;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "launch") {
        launch_args.assign(argv + i + 1, argv + argc);
        break;
      }
    return run_command(root, commands, launch_args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s (see `%s --help`)\n", command_path(root).c_str(), e.what(),
                 command_path(root).c_str());
    return kUsageError;
  } catch (const DeviceUnavailable& e) {  // the machine lacks what was asked for
    std::fprintf(stderr, "psbed: error: %s\n", e.what());
    return kDeviceUnavailable;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "psbed: error: out of memory (the model's parameters and activations, "
                 "times the batch, or the data set, need more than this process may use)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "psbed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
