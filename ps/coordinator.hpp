// `psbed coordinator`: rendezvous, cluster map, heartbeats, barriers, live progress and the
// run's summary. It holds no parameters; it decides who is who and how tensors are split.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/defaults.hpp"
#include "core/optimizer.hpp"
#include "core/policy.hpp"

namespace psbed::ps {

struct CoordinatorOptions {
  std::string bind = "tcp://0.0.0.0:7000";
  int servers = 1;
  int workers = 1;
  std::string model = "lenet5";
  std::string mode = "async";    // async | bsp | ssp:K
  policy::PolicyOptions policy;  // name "wfbp" by default
  std::string comm = "ps";       // ps | sfb | hybrid: how fc layers travel (core/comm.hpp)
  std::string comm_bandwidth;    // the cluster's link rate for hybrid's cost ("": not known)
  SgdOptions sgd;
  std::string lr_schedule = "constant";
  int epochs = 1;          // passes over the training set, all workers together
  std::int64_t steps = 0;  // > 0: steps per worker instead of epochs
  int batch = 64;          // per worker
  std::uint64_t seed = 1;
  // Shards apply gradients holding NaN or infinity instead of refusing them (to study how a
  // run diverges); off, a worker whose gradients are not finite is stopped with the reason.
  bool allow_nonfinite = false;
  // Workers push with push-pull (ps/cluster_map.hpp Experiment::push_pull); not with replicas 2.
  bool push_pull = false;
  int connections = 1;  // per worker and shard (Experiment::connections)
  std::int64_t partition_bytes = defaults::kPartitionBytes;
  // Shard checkpoints: "N" steps or a duration ("30s"), "" = none (ps/checkpoint.hpp); a run
  // resumed from a checkpoint starts at resume_step.
  std::string checkpoint_every;
  std::int64_t resume_step = 0;
  // Copies of every shard's parts: 2 keeps each on the next shard too, which takes over when
  // the shard dies (ps/shard.hpp).
  int replicas = 1;
  double heartbeat_s = defaults::kHeartbeatS;
  double heartbeat_timeout_s = defaults::kHeartbeatTimeoutS;
  double progress_every_s = 2.0;
  double register_timeout_s = 120;  // all nodes must have registered by then
  // No worker advancing a step for this long is a stall: said in the log, /api/status, /metrics
  // and the summary, naming what each worker waits on. 0: never said.
  double stall_timeout_s = 30;
  std::string summary_path;      // summary.json, written at the end
  std::string endpoint_file;     // write the bound endpoint here once listening
  std::string compute = "real";  // recorded in the summary: real | replay:<profile>
  // Live control plane and dashboard over HTTP (ps/coordinator_http.hpp): "" = off, else
  // HOST:PORT (":PORT" = loopback). Any address beyond loopback needs `http_token`.
  std::string http;
  // Also required of `psbed ctl` over ZeroMQ when set: one secret guards every control path.
  std::string http_token;
  std::string http_file;  // write the dashboard's URL here once listening
  std::string profile;    // profile.json: /api/prediction predicts from it
  // CURVE (ps/curve.hpp): the key folder ("" = plain) and the secret key ("" =
  // keys/coordinator.key).
  std::string keys, key_file;
  // images/s the predictor expects of `config` (model, workers, servers, mode, batch,
  // partition_bytes, policy) given `profile`; set by the executable where a predictor is linked
  // in. Unset: /api/prediction answers 503 and says why.
  std::function<double(const std::string& profile, const nlohmann::json& config)> predict;
};

// A coordinator that cannot write its summary logs it on one line after these words, so that
// what the workers reported is not lost (launch takes it from the log).
inline constexpr std::string_view kUnwrittenSummary = "the summary, not written, as JSON: ";

// Runs until the workers finish (0) or the run cannot go on (non-zero), then tells every node
// to shut down.
int run_coordinator(const CoordinatorOptions& opt);

}  // namespace psbed::ps
