#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/profile.hpp"
#include "core/straggler.hpp"
#include "core/units.hpp"
#include "predictor/simulator.hpp"
#include "ps/checkpoint.hpp"
#include "ps/control.hpp"

namespace psbed::cluster {

namespace {

// --checkpoint-every: steps or a duration, refused in one line as the other flags are.
CLI::Validator checkpoint_every_value() {
  return CLI::Validator(
      [](std::string& v) {
        try {
          ps::parse_checkpoint_every(v);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "STEPS|DURATION");
}
// A slice or a partition of more parameters than this is no model's (and CLI11 alone reads
// 99999999999999999999 as 2^63 - 1); as `psbed ctl policy` bounds them.
constexpr std::int64_t kMaxParams = 1000000000;

CLI::Validator comm_value() {
  return CLI::Validator(
      [](std::string& v) {
        try {
          parse_comm(v);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "ps|sfb|hybrid");
}

// --comm of the run, as the coordinator and launch take it (a worker's own --comm only checks).
// --epochs, --steps and --batch, as the coordinator and launch take them alike. --steps is
// bounded as the coordinator bounds it (CLI11 alone reads 99999999999999999999 as 2^63 - 1).
template <class Options>
void add_run_length(CLI::App* app, Options& o) {
  app->add_option("--epochs", o.epochs, "passes over the training set, all workers together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--steps", o.steps, "steps per worker (overrides --epochs)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  app->add_option("--batch", o.batch, "batch per worker")->capture_default_str();
}

// --replicas, as the coordinator and launch take it.
void add_replicas(CLI::App* app, int& replicas) {
  app->add_option("--replicas", replicas,
                  "copies of every shard's parts: 2 keeps each also on the next shard, which "
                  "takes over when the shard dies; needs --servers 2 or more; with 2, a dead shard "
                  "started again rejoins as the backup (docs/failures.md)")
      ->capture_default_str()
      ->check(CLI::Range(1, 2));
}

void add_comm_flag(CLI::App* app, std::string& comm) {
  app->add_option("--comm", comm,
                  "how fc layers travel: ps (push and pull through the shards), sfb (sufficient "
                  "factors broadcast worker to worker, Poseidon) or hybrid (per layer, whichever "
                  "costs the busiest node less: bytes, and with a known link rate messages too); "
                  "sfb and hybrid need bsp or ssp:K")
      ->capture_default_str()
      ->check(comm_value());
}

// How workers and shards exchange parts: the same flags on coordinator and launch.
void add_wire_flags(CLI::App* app, bool& push_pull, int& connections) {
  app->add_flag("--push-pull", push_pull,
                "each push is answered with the updated part (one round trip, as BytePS's "
                "push_pull; bsp, ssp: acknowledged first, answered once the clock allows) and the "
                "next step pulls no part that came back; not with --replicas 2");
  app->add_option("--connections", connections,
                  "ZeroMQ connections from each worker to each shard: a part of at least 64 KiB "
                  "per connection is cut into that many stripes, one on each (for links one "
                  "connection's I/O thread cannot fill)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
}
}  // namespace

void add_coordinator(CLI::App& root, CoordinatorCommand& c, std::string& log_level) {
  ps::CoordinatorOptions& o = c.options;
  std::string &partition = c.partition, &credit = c.credit, &log_file = c.log_file;
  auto* app = root.add_subcommand(
      "coordinator", "Rendezvous, cluster map, heartbeats, barriers, progress, summary");
  app->footer(
      "Example: psbed coordinator --bind tcp://0.0.0.0:7000 --servers 2 --workers 4 --model lenet5 "
      "--mode bsp");
  add_common(app, log_level);
  app->add_option(
      "--log-file", log_file,
      "write the log lines to this file as well as to stderr (launch: OUT/logs/coordinator.log)");
  app->add_option("--bind", o.bind, "ZeroMQ endpoint to listen on")->capture_default_str();
  app->add_option("--servers", o.servers, "server shards to wait for")->capture_default_str();
  app->add_option("--workers", o.workers, "workers to wait for")->capture_default_str();
  app->add_option("--model", o.model, "model name or .toml path (sent to every node)")
      ->capture_default_str();
  app->add_option("--mode", o.mode, "consistency: async, bsp or ssp:K")->capture_default_str();
  app->add_option("--policy", o.policy.name,
                  "transmission policy: bulk, wfbp, tf-random, p3, bytescheduler, prophet")
      ->capture_default_str();
  add_comm_flag(app, o.comm);
  app->add_option("--comm-bandwidth", o.comm_bandwidth,
                  "the cluster's link rate per direction, e.g. 1gbit, against which --comm hybrid "
                  "weighs each route's messages (launch passes its --bandwidth; default: not "
                  "known, bytes alone decide)")
      ->check(bandwidth_value(false));
  app->add_option("--slice-params", o.policy.slice_params, "p3, prophet: parameters per slice")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), kMaxParams));
  app->add_option("--partition-params", o.policy.partition_params,
                  "bytescheduler: parameters per partition")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), kMaxParams));
  app->add_option("--credit", credit,
                  "p3/bytescheduler: bytes in flight at most; prophet: largest block (default, or "
                  "'default': the policy's)")
      ->transform(credit_value());
  app->add_option(
         "--lr", o.sgd.lr,
         "learning rate (async needs a smaller one than bsp: docs/concepts.md, \"Consistency\")")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  add_momentum_and_decay(app, o.sgd);
  app->add_option("--lr-schedule", o.lr_schedule, "constant or cosine")->capture_default_str();
  add_run_length(app, o);
  app->add_option("--seed", o.seed, "seed for initial parameters and data order")
      ->capture_default_str()
      ->transform(seed_validator());
  app->add_flag("--allow-nonfinite", o.allow_nonfinite,
                "shards apply gradients holding NaN or infinity (to study divergence); by default "
                "they refuse them and the worker stops, naming the tensor");
  add_wire_flags(app, o.push_pull, o.connections);
  app->add_option("--checkpoint-every", o.checkpoint_every,
                  "shards checkpoint every N steps (200) or about every duration (30s), each into "
                  "its --checkpoint-dir")
      ->check(checkpoint_every_value());
  add_replicas(app, o.replicas);
  app->add_option("--resume-step", o.resume_step,
                  "the run resumes at this step: each shard starts from its checkpoint of it")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  app->add_option("--partition-bytes", partition, "largest part a tensor is cut into")
      ->capture_default_str()
      ->check(size_value());
  as_duration(app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats"), "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  as_duration(
      app->add_option("--heartbeat-timeout", o.heartbeat_timeout_s,
                      "seconds of silence before a node is dead (at least twice --heartbeat)"),
      "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  as_duration(
      app->add_option("--progress-every", o.progress_every_s, "seconds between progress lines"),
      "s")
      ->capture_default_str()
      ->check(positive("a number of seconds"));
  as_duration(app->add_option("--register-timeout", o.register_timeout_s,
                              "seconds for every node to register"),
              "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  as_duration(
      app->add_option("--stall-timeout", o.stall_timeout_s,
                      "seconds without any worker finishing a step before the stall is reported, "
                      "naming what each "
                      "worker waits on (0 = never)"),
      "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, false, 1e6, "0 or above, below 10^6"));
  app->add_option("--summary", o.summary_path, "write summary.json here at the end");
  app->add_option("--endpoint-file", o.endpoint_file,
                  "write the bound endpoint here (for --bind with port *)");
  app->add_option("--compute", o.compute, "compute mode recorded in the summary")
      ->capture_default_str();
  app->add_option("--http", o.http,
                  "serve the dashboard and HTTP API on HOST:PORT (:PORT = loopback; port 0 = any; "
                  "on loopback only Host localhost, 127.0.0.1 or [::1] is answered, and from no "
                  "page of another origin)");
  app->add_option(
      "--http-token", o.http_token,
      "token every HTTP request must carry (required beyond loopback; default $PSBED_HTTP_TOKEN)");
  app->add_option("--http-file", o.http_file, "write the dashboard's URL here once listening");
  app->add_option("--profile", o.profile,
                  "profile.json (psbed profile): /api/prediction predicts from it");
  add_key_flags(app, o.keys, o.key_file, "coordinator");
}

namespace {

// The flags a server and a worker share, in the order both list them.
void add_liveness(CLI::App* app, ps::NodeOptions& n, const std::string& connect_help) {
  as_duration(app->add_option("--connect-timeout", n.connect_timeout_s, connect_help), "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
  as_duration(
      app->add_option("--coordinator-timeout", n.coordinator_timeout_s,
                      "once joined: seconds of silence from the coordinator (it answers every "
                      "heartbeat) after which "
                      "it is gone and this node stops with an error"),
      "s")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6));
  as_duration(app->add_option("--heartbeat", n.heartbeat_s, "seconds between heartbeats"), "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, true, 1e6, "above 0 and below 10^6"));
}

void add_link(CLI::App* app, ps::NodeOptions& n, const std::string& example_rate) {
  app->add_option("--bandwidth", n.bandwidth,
                  "emulated link rate per direction, e.g. " + example_rate +
                      " (a number needs its unit; default or 0: unshaped)")
      ->check(bandwidth_value(false));
  app->add_option("--latency", n.latency, "emulated one-way latency, e.g. 200us")
      ->check(duration_value());
}

}  // namespace

void add_server(CLI::App& root, ps::ServerOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("server", "One parameter-server shard");
  app->footer(
      "Example: psbed server --coordinator tcp://HOST:7000 --bind tcp://0.0.0.0:7100 --advertise "
      "tcp://HOST:7100");
  add_common(app, log_level);
  app->add_option("--coordinator", o.node.coordinator, "coordinator endpoint")
      ->capture_default_str();
  app->add_option("--bind", o.bind, "endpoint workers connect to (':*' = any free port)")
      ->capture_default_str();
  app->add_option("--advertise", o.advertise,
                  "address given to workers (default: the bound endpoint)");
  app->add_option("--name", o.node.name, "node name (default server-<pid>)")
      ->check(node_name_value());
  add_liveness(app, o.node, "seconds to reach the coordinator");
  app->add_option("--trace-dir", o.node.trace_dir, "write <name>.trace.json here");
  as_size(
      app->add_option("--max-message-bytes", o.max_message_bytes, "larger messages are dropped"))
      ->capture_default_str();
  app->add_option("--apply-threads", o.apply_threads,
                  "threads applying updates (each owns a subset of parts)")
      ->capture_default_str();
  app->add_option("--io-threads", o.io_threads,
                  "ZeroMQ I/O threads carrying the workers' connections (launch gives one per "
                  "--connections)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  app->add_option("--checkpoint-dir", o.checkpoint_dir,
                  "where this shard writes its checkpoints (when the run takes them) and reads the "
                  "one a resumed run starts from");
  add_link(app, o.node, "1gbit");
  add_key_flags(app, o.node.keys, o.node.key_file, "<name>");
}

void add_worker(CLI::App& root, worker::WorkerOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("worker", "A worker training through the parameter server");
  app->footer("Example: psbed worker --coordinator tcp://HOST:7000 --model lenet5 --data mnist");
  add_common(app, log_level);
  app->add_option("--coordinator", o.node.coordinator, "coordinator endpoint")
      ->capture_default_str();
  app->add_option("--name", o.node.name, "node name (default worker-<pid>)")
      ->check(node_name_value());
  app->add_option("--model", o.model,
                  "the cluster's model (its input shape is needed to load data)")
      ->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir, "directory with IDX files");
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--compute", o.compute,
                  "real, or replay:<profile.json>: sleep per layer for durations drawn from a "
                  "profile (psbed profile) instead of computing")
      ->capture_default_str();
  app->add_option("--threads", o.threads, "compute threads")->capture_default_str();
  app->add_option("--comm", o.comm,
                  "ps, sfb or hybrid: refused unless it is the cluster's (default: the cluster's)")
      ->check(comm_value());
  app->add_option("--peer-bind", o.peer_bind,
                  "where peers send this worker sufficient factors (--comm sfb, hybrid); an "
                  "address the other workers reach")
      ->capture_default_str();
  add_liveness(app, o.node, "seconds to reach the coordinator, and each server shard");
  as_duration(
      app->add_option("--progress-every", o.progress_every_s, "seconds between progress reports"),
      "s")
      ->capture_default_str()
      ->check(positive("a number of seconds"));
  app->add_option("--trace-dir", o.node.trace_dir, "write <name>.trace.json here");
  app->add_option("--save-params", o.save_params,
                  "the evaluating worker writes final parameters here (raw float32)");
  as_duration(
      app->add_option(
          "--straggler-ms,--straggle-ms", o.straggle_ms,
          "sleep this long every step (a deliberate straggler; --straggle-ms: the older name)"),
      "ms")
      ->check(non_negative("milliseconds"));
  app->add_option("--straggler", o.straggler,
                  "make this worker slow: compute=Kx (its compute K times as long) and/or "
                  "bandwidth=B (its own link, each direction, in place of --bandwidth), e.g. "
                  "compute=2x,bandwidth=100mbit")
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              Straggler s;
              parse_straggler_keys(v, s);
              return std::string();
            } catch (const Error& e) {
              return std::string(e.what());
            }
          },
          "KEYS"));
  as_duration(
      app->add_option(
          "--start-stagger-ms", o.start_stagger_ms,
          "worker i of N waits i x this / N before its first step (a de-synchronized start)"),
      "ms");
  add_link(app, o.node, "100mbit");
  add_key_flags(app, o.node.keys, o.node.key_file, "<name>");
}

void add_launch(CLI::App& root, LaunchOptions& o, std::string& log_level) {
  auto* app =
      root.add_subcommand("launch", "Start a whole cluster on this host and collect its results");
  app->footer(
      "Example: psbed launch --servers 2 --workers 4 --model lenet5 --data mnist --epochs 5 --lr "
      "0.005 --mode async --out runs/NAME\n"
      "Writes OUT/summary.json, OUT/traces/*.trace.json (open in Perfetto) and OUT/logs/*.log.");
  add_common(app, log_level);
  app->add_option("--servers", o.servers, "server shards")->capture_default_str();
  app->add_option("--workers", o.workers, "workers")->capture_default_str();
  app->add_option("--model", o.model, "model name or .toml path")->capture_default_str();
  app->add_option("--data", o.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", o.data_dir, "directory with IDX files");
  app->add_option("--mode", o.mode, "async, bsp or ssp:K")->capture_default_str();
  app->add_option("--policy", o.policy,
                  "transmission policy: bulk, wfbp, tf-random, p3, bytescheduler, prophet")
      ->capture_default_str();
  add_comm_flag(app, o.comm);
  app->add_option("--slice-params", o.slice_params, "p3, prophet: parameters per slice")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), kMaxParams));
  app->add_option("--partition-params", o.partition_params,
                  "bytescheduler: parameters per partition")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), kMaxParams));
  app->add_option("--credit", o.credit,
                  "p3/bytescheduler: bytes in flight at most; prophet: largest block; e.g. 4MiB "
                  "(default, or 'default': the policy's)")
      ->transform(credit_value());
  add_run_length(app, o);
  app->add_option(
         "--lr", o.lr,
         "learning rate (async needs a smaller one than bsp: docs/concepts.md, \"Consistency\")")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--momentum", o.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(momentum_range());
  app->add_option("--weight-decay", o.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(non_negative("a weight decay", true));
  app->add_option("--lr-schedule", o.lr_schedule, "constant or cosine")->capture_default_str();
  app->add_option("--seed", o.seed, "seed")->capture_default_str()->transform(seed_validator());
  app->add_flag("--allow-nonfinite", o.allow_nonfinite,
                "shards apply gradients holding NaN or infinity (to study divergence); by default "
                "they refuse them and the worker stops, naming the tensor");
  add_wire_flags(app, o.push_pull, o.connections);
  app->add_option("--partition-bytes", o.partition_bytes, "largest part a tensor is cut into")
      ->capture_default_str()
      ->check(size_value());
  app->add_option("--threads", o.threads, "compute threads per worker")->capture_default_str();
  app->add_option("--apply-threads", o.apply_threads, "threads applying updates per server shard")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--device", o.device, "cpu or gpu")->capture_default_str();
  app->add_option("--compute", o.compute,
                  "real, or replay:<profile.json>: sleep per layer for durations drawn from a "
                  "profile (psbed profile) instead of computing")
      ->capture_default_str();
  app->add_option("--out", o.out, "run folder (default runs/<model>-<mode>-<N>w<S>s-<time>)");
  as_duration(app->add_option("--heartbeat", o.heartbeat_s, "seconds between heartbeats"), "s")
      ->capture_default_str();
  as_duration(app->add_option("--heartbeat-timeout", o.heartbeat_timeout_s,
                              "seconds of silence before a node is dead"),
              "s")
      ->capture_default_str();
  as_duration(app->add_option("--timeout", o.timeout_s, "stop the run after this many seconds"),
              "s")
      ->capture_default_str();
  as_duration(app->add_option(
                  "--stall-timeout", o.stall_timeout_s,
                  "seconds without any worker finishing a step before the coordinator reports a "
                  "stall, naming "
                  "what each worker waits on (0 = never)"),
              "s")
      ->capture_default_str()
      ->check(number_in("a number of seconds", 0, false, 1e6, "0 or above, below 10^6"));
  app->add_flag("!--no-trace", o.trace, "do not write traces");
  app->add_option("--save-params", o.save_params, "final parameters to this file (raw float32)");
  as_duration(app->add_option("--straggler-ms", o.straggler_ms,
                              "make worker-0 a straggler: it sleeps this long every step"),
              "ms");
  app->add_option("--straggler", o.stragglers,
                  "a slow worker: worker-N:compute=Kx (its compute K times as long) and/or "
                  "bandwidth=B (its own link, each direction, in place of --bandwidth; with "
                  "--netns its veth), e.g. worker-1:compute=2x,bandwidth=100mbit; repeatable")
      ->allow_extra_args(false);
  as_duration(
      app->add_option(
          "--start-stagger-ms", o.start_stagger_ms,
          "worker i of N waits i x this / N before its first step (default: all start together)"),
      "ms");
  app->add_option(
         "--bandwidth", o.bandwidth,
         "emulated link rate of every server and worker, per direction (e.g. 1gbit; 0: unshaped)")
      ->check(bandwidth_value(false));
  app->add_flag("--netns", o.netns,
                "one network namespace per node on a bridge, --bandwidth shaped by tc tbf (needs "
                "root; all removed on exit)");
  app->add_option("--latency", o.latency, "emulated one-way latency of every link (e.g. 200us)")
      ->check(duration_value());
  app->add_option("--http", o.http,
                  "the coordinator serves the dashboard and HTTP API on HOST:PORT (:PORT = "
                  "loopback; port 0 = any; on loopback only Host localhost, 127.0.0.1 or [::1] is "
                  "answered, and from no page of another origin)");
  app->add_option("--http-token", o.http_token,
                  "token for the HTTP API (required beyond loopback; default $PSBED_HTTP_TOKEN)");
  app->add_option("--profile", o.profile,
                  "profile.json given to the coordinator for /api/prediction");
  app->add_flag("--secure", o.secure,
                "CURVE on every link (docs/security.md): fresh keys in OUT/keys unless --keys");
  app->add_option("--keys", o.keys,
                  "with --secure: this key folder (psbed keys) instead of fresh keys; it needs "
                  "coordinator, server-I, worker-I and ctl");
  app->add_option("--checkpoint-every", o.checkpoint_every,
                  "each shard writes its parameters, momentum and clock to OUT/checkpoints every N "
                  "steps (200) or about every duration (30s); --resume OUT restarts from the last")
      ->check(checkpoint_every_value());
  add_replicas(app, o.replicas);
  app->add_option("--resume", o.resume,
                  "restart the run in this folder (started with --checkpoint-every, stopped or "
                  "crashed) from its last checkpoint, with its own settings");
}

void add_probe(CLI::App& root, ProbeCommand& o, std::string& log_level) {
  auto* app =
      root.add_subcommand("probe", "Send a server shard one malformed message of each kind");
  app->footer("The shard should log a reason for each, count it, and keep serving its workers.");
  add_common(app, log_level);
  app->add_option("--endpoint", o.endpoint, "the shard's endpoint (from its log: 'serving on ...')")
      ->required();
  app->add_option("--sender", o.sender, "worker id to claim in otherwise well-formed headers")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
}

int run_coordinator_command(CoordinatorCommand& c, const std::string& log_level) {
  ps::CoordinatorOptions& coord = c.options;
  if (!c.log_file.empty()) ensure_writable_file(c.log_file, "--log-file");
  setup_logging("coordinator", log_level, c.log_file);
  // As launch checks them: refused here, not found when the first node registers.
  coord.partition_bytes =
      check_coordinator_settings(c.partition, coord.heartbeat_s, coord.heartbeat_timeout_s);
  if (!c.credit.empty())
    coord.policy.credit_bytes =
        std::int64_t(for_flag("--credit", [&] { return parse_bytes(c.credit); }));
  if (const char* t = std::getenv("PSBED_HTTP_TOKEN"); coord.http_token.empty() && t)
    coord.http_token = t;
  // /api/prediction: the simulator on the profile's link, for the cluster as it runs now.
  coord.predict = [](const std::string& profile_path, const nlohmann::json& cfg) {
    const Profile profile = Profile::load(profile_path);
    predictor::SimConfig c;
    c.workers = cfg.at("workers").get<int>();
    c.servers = cfg.at("servers").get<int>();
    c.mode = predictor::Consistency::parse(cfg.at("mode").get<std::string>());
    c.policy = ps::policy_from_json(cfg.at("policy"));
    c.partition_bytes = cfg.at("partition_bytes").get<std::int64_t>();
    c.comm = parse_comm(cfg.value("comm", std::string("ps")));  // the fc layers' route
    c.bandwidth_bytes_per_sec = profile.bandwidth_bytes_per_sec;
    c.latency_s = profile.latency_us * 1e-6;
    c.link_model = predictor::LinkModel::kBucket;
    predictor::take_host_costs(profile, c);
    c.arrival_jitter_s = predictor::kArrivalJitterUs * 1e-6;  // as psbed predict
    c.host_cv = profile.host_cv, c.start_spread_s = profile.start_spread_ms * 1e-3;
    // The running cluster's compute: real compute takes the host's cores, replay sleeps.
    c.compute_on_cores = cfg.value("compute", std::string("real")) == "real";
    c.steps = 100;
    return predictor::simulate_seeds(profile, load_model(cfg.at("model").get<std::string>()), c,
                                     predictor::kBandDraws)
        .images_per_sec;
  };
  // Where it writes, checked now: not a finished run that cannot keep its summary.
  ensure_writable_file(coord.summary_path, "--summary");
  ensure_writable_file(coord.endpoint_file, "--endpoint-file");
  ensure_writable_file(coord.http_file, "--http-file");
  // A profile that cannot be read is one line now, not a failed prediction later.
  if (!coord.profile.empty())
    Profile::load(coord.profile)
        .check_matches(load_model(coord.model), "--profile " + coord.profile);
  return ps::run_coordinator(coord);
}

}  // namespace psbed::cluster
