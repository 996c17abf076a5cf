// `psbed launch`: a whole cluster on this host as plain processes on loopback: the
// coordinator, S server shards and N workers, each a child running this same executable. It
// shows the coordinator's live progress, collects every trace into OUT/traces/ and the logs
// into OUT/logs/, and ends with OUT/summary.json.
//
// Failure policy: Ctrl-C, or a server or the coordinator dying, stops every process (a
// shard's parameters cannot be recovered). A dying worker is reported, and the others carry on:
// the coordinator declares it dead and the servers stop waiting for it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/defaults.hpp"
#include "core/model_spec.hpp"
#include "core/policy.hpp"

namespace psbed::cluster {

struct LaunchOptions {
  int servers = 1;
  int workers = 2;
  std::string model = "lenet5";
  std::string data = "mnist";
  std::string data_dir;
  std::string mode = "async";
  std::string policy = "wfbp";
  std::string comm = "ps";  // ps | sfb | hybrid (core/comm.hpp)
  std::int64_t slice_params = defaults::kSliceParams, partition_params = defaults::kPartitionParams;
  std::string credit;  // "" = the policy's default
  int epochs = 1;
  std::int64_t steps = 0;
  int batch = 64;
  float lr = 0.03f, momentum = 0.9f, weight_decay = 0.0f;
  std::string lr_schedule = "cosine";
  std::uint64_t seed = 1;
  bool allow_nonfinite = false;  // psbed coordinator --allow-nonfinite
  bool push_pull = false;        // psbed coordinator --push-pull
  int connections = 1;           // psbed coordinator --connections, server --io-threads
  std::string partition_bytes = defaults::kPartitionBytesText;
  int threads = 1;  // compute threads per worker
  int apply_threads =
      defaults::kApplyThreads;  // apply lanes per server shard (psbed server --apply-threads)
  std::string device = "cpu";
  std::string compute = "real";  // or replay:<profile.json> (every worker)
  std::string out;               // default runs/<model>-<mode>-<N>w<S>s-<time>
  double heartbeat_s = defaults::kHeartbeatS, heartbeat_timeout_s = defaults::kHeartbeatTimeoutS;
  double timeout_s = 3600;      // the whole run
  double stall_timeout_s = 30;  // psbed coordinator --stall-timeout
  bool trace = true;
  std::string bandwidth;  // link emulation on every server and worker ("" = none)
  bool netns = false;     // one network namespace per node, links shaped by tc (root)
  std::string latency;
  double straggler_ms = 0;               // worker-0 sleeps this long every step
  std::vector<std::string> stragglers;   // --straggler worker-N:compute=Kx,bandwidth=B
  double start_stagger_ms = 0;           // worker i of N starts i x this / N later
  std::string save_params;               // evaluating worker writes the final parameters here
  std::vector<std::string> worker_args;  // extra flags passed to every worker
  std::string http;  // the coordinator's dashboard and HTTP API (HOST:PORT; "" = off)
  std::string http_token;
  std::string profile;  // for the coordinator's /api/prediction
  bool secure = false;  // CURVE on every link: fresh keys in OUT/keys, or `keys`
  std::string keys;     // a key folder (psbed keys) for --secure
  // Shard checkpoints (ps/checkpoint.hpp) under OUT/checkpoints: "N" steps or "30s" ("" = none).
  std::string checkpoint_every;
  int replicas = 1;               // copies of every shard's parts (ps/shard.hpp)
  std::string resume;             // a run folder to restart from its last checkpoint
  std::vector<std::string> args;  // this launch's command line, kept in OUT/launch.json
};

// Throws Error, naming the flag, for settings a run cannot start with (a batch of 0, a
// non-finite learning rate, a data set that is not there, a replay profile of another model...).
void check_launch_options(const LaunchOptions& opt);
// The coordinator's part of those checks, shared with `psbed coordinator`: the partition size
// (parsed and returned, at least one float) and the heartbeats (above 0, below 10^6 s, the
// timeout at least twice the interval). Throws Error naming the flag.
std::int64_t check_coordinator_settings(const std::string& partition_bytes, double heartbeat_s,
                                        double heartbeat_timeout_s);

// A --compute value a run can start with: real, or replay: of a readable profile of `spec`.
// Errors (psbed::Error) name `flag`.
void check_compute(const std::string& compute, const ModelSpec& spec, const std::string& flag);
// The run's policy settings as the policies take them: --credit read into bytes (-1: the
// policy's default). Errors (psbed::Error) name --credit.
policy::PolicyOptions policy_options(const LaunchOptions& opt);

// --comm sfb or hybrid: the route each fc layer took and the factor bytes, as the first worker
// of `summary` reported them, on one line of stdout ("" for ps).
void print_comm_routes(const std::string& comm, const nlohmann::json& summary);
int run_launch(const LaunchOptions& opt);

// ---- launch_resume.cpp ----
// Tells the coordinator at `coordinator` that node `name` ended (`why`), so that it acts now
// rather than at the heartbeat timeout; true if it took the word.
// The "failure" a run's summary.json gives, or `otherwise` when it has none (or is not there).
std::string summary_failure(const std::string& path, const std::string& otherwise);
bool tell_node_gone(const std::string& coordinator, const std::string& keys,
                    const std::string& token, const std::string& name, const std::string& why);
// The last `lines` lines of a node's log, each indented for a summary.
std::string tail_of(const std::string& path, int lines);
// Whether a node's log has a line containing `text`.
bool log_mentions(const std::string& path, const std::string& text);
// OUT/launch.json: the command line a resumed run is started with again.
void save_launch_args(const std::string& run, const std::vector<std::string>& args);
// Checks opt.resume's newest complete checkpoint (each shard's file read and checked against
// the run's model and partition: Error naming the file), moves the stopped attempt's files
// aside, and returns the checkpoint's step.
std::int64_t prepare_resume(const LaunchOptions& opt);
// `launch --resume RUN` given with `args` (the command line's own flags): RUN's command line
// parsed again and launched from its last checkpoint.
int run_resume(const std::string& run, const std::vector<std::string>& given,
               const std::string& log_level);

}  // namespace psbed::cluster
