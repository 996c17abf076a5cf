// The subcommands of psbed, a registration file a group: what each takes (CLI11 options into
// the options structs of the folder that does the work) and, where main has more to do than call
// that folder, how it runs. main.cpp parses and dispatches; usage_errors.cpp words the errors.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cluster/launch.hpp"
#include "cluster/verify.hpp"
#include "core/defaults.hpp"
#include "core/status.hpp"
#include "predictor/commands.hpp"
#include "ps/bench_coordinator.hpp"
#include "ps/bench_ps.hpp"
#include "ps/coordinator.hpp"
#include "ps/server.hpp"
#include "worker/bench_compute.hpp"
#include "worker/ps_worker.hpp"
#include "worker/train.hpp"

namespace psbed::cluster {

// --config and --log-level, which every subcommand takes.
void add_common(CLI::App* app, std::string& log_level);

// ---- commands_train.cpp: train, bench compute, bench ps, bench coordinator ----
void add_train(CLI::App& root, worker::TrainOptions& o, std::string& log_level);
void add_bench(CLI::App& root, worker::BenchComputeOptions& o, std::string& log_level);
void add_bench_ps(CLI::App* bench, ps::BenchPsOptions& o, std::string& log_level);
void add_bench_coordinator(CLI::App* bench, ps::BenchCoordinatorOptions& o, std::string& log_level);

// ---- commands_nodes.cpp: coordinator, server, worker, launch, probe ----
struct CoordinatorCommand {
  ps::CoordinatorOptions options;
  std::string partition = defaults::kPartitionBytesText;  // --partition-bytes, read by run
  std::string credit;                                     // --credit ("" = the policy's)
  std::string log_file;
};
struct ProbeCommand {
  std::string endpoint;
  int sender = 0;
};
void add_coordinator(CLI::App& root, CoordinatorCommand& c, std::string& log_level);
void add_server(CLI::App& root, ps::ServerOptions& o, std::string& log_level);
void add_worker(CLI::App& root, worker::WorkerOptions& o, std::string& log_level);
void add_launch(CLI::App& root, LaunchOptions& o, std::string& log_level);
void add_probe(CLI::App& root, ProbeCommand& o, std::string& log_level);
// Checks what the coordinator's flags leave to it (as launch checks them), wires its
// /api/prediction to the simulator, and runs it.
int run_coordinator_command(CoordinatorCommand& c, const std::string& log_level);

// ---- commands_trace.cpp: trace merge ----
struct TraceCommand {
  std::string run, out;
};
void add_trace(CLI::App& root, TraceCommand& o, std::string& log_level);
int run_trace(const TraceCommand& o);

// ---- commands_keys.cpp: keys, and the CURVE flags of every node ----
struct KeysCommand {
  std::string out;
  int servers = 1, workers = 1;
  std::vector<std::string> names;  // more key pairs by name
};
void add_keys(CLI::App& root, KeysCommand& o, std::string& log_level);
int run_keys(const KeysCommand& o);
// --keys DIR and --key FILE (default <keys>/<own>.key).
void add_key_flags(CLI::App* app, std::string& keys, std::string& key_file, const std::string& own);

// ---- commands_predictor.cpp: profile, predict, validate, optimize, bench predict ----
struct PredictorCommands {
  predictor::ProfileCommandOptions profile;
  predictor::PredictOptions predict;
  predictor::ValidateOptions validate;
  predictor::OptimizeOptions optimize;
  VerifyOptions verify;
  predictor::BenchPredictOptions bench;
};
void add_predictor(CLI::App& root, PredictorCommands& o, std::string& log_level);
// Returns -1 if no predictor subcommand was given.
int run_predictor(CLI::App& root, const PredictorCommands& o, const std::string& log_level);

// ---- usage_errors.cpp ----
// The subcommands the command line reached, as "psbed bench predict" ("psbed" if none), and
// the last of them in `leaf`.
std::string command_path(const CLI::App& root, const CLI::App** leaf = nullptr);
std::string usage_error(const CLI::App& root, const CLI::ParseError& e, int argc, char** argv);
Status empty_list_item(const CLI::App& root, int argc, char** argv);

}  // namespace psbed::cluster
