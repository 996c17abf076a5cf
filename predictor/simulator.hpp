// The predictor's discrete-event simulator: N workers and S server shards replayed from a
// single-worker profile, after the ICPE 2020 throughput-prediction method. Each node has an uplink
// and a downlink of one bandwidth and latency; the transfers of one (sender, receiver) pair go
// one after the other (one TCP connection per peer pair, as ZeroMQ keeps it), and the pairs
// active on a link share it max-min fairly, each limited by both the sender's uplink and the
// receiver's downlink. Workers run the live worker's step (pull parts, forward layer by layer as
// parts arrive, backward, hand each gradient part to the policy, wait for every push
// acknowledgment); servers apply with the profiled cost and honour async, bsp and ssp:K. The
// transmission policy objects are the ones in core/, driven by the simulated clock.
//
// Everything random (per-layer compute draws, tf-random) is seeded: the same inputs give the
// same figures.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.hpp"
#include "core/consistency.hpp"
#include "core/defaults.hpp"
#include "core/model_spec.hpp"
#include "core/policy.hpp"
#include "core/profile.hpp"
#include "core/straggler.hpp"
#include "predictor/band.hpp"

namespace psbed::predictor {

using psbed::Consistency;  // core/consistency.hpp

// How a link carries concurrent messages.
//  kFair: the pairs sending on a link share it max-min fairly, each limited by the sender's
//         uplink and the receiver's downlink at once (TCP flows under kernel shaping).
//  kBucket: psbed's in-process emulation (ps/link.cpp): per node and direction a token bucket
//         with a burst allowance. A send goes into the sender's send buffer and returns (the
//         thread waits only while the buffer is full); the node's pacer takes queued messages
//         round-robin across peers and lets each go once the uplink bucket passed its bytes;
//         the receiver's downlink bucket passes it, then the latency, and the receiving thread
//         takes arrivals in order. This is what `psbed launch --bandwidth` measures.
enum class LinkModel { kFair, kBucket };
LinkModel parse_link_model(const std::string& text);  // "fair" | "bucket"
std::string to_string(LinkModel m);

// How closely a simulation follows the workers (SimConfig::fidelity).
enum class Fidelity { kExact, kFast, kAuto };
Fidelity parse_fidelity(const std::string& text);  // "exact" | "fast" | "auto"
std::string to_string(Fidelity f);
constexpr int kFastGroups = 16;      // simulated workers in the fast mode
constexpr int kFastAbove = 64;       // kAuto: the fast mode above this many workers
constexpr double kFastCheckPct = 2;  // SimResult::fast_check_pct the fast mode stands by
// The fast mode's check under a credit: its finer grouping's largest group, and its fewest steps.
constexpr int kCheckMembers = 8;
constexpr std::int64_t kCheckSteps = 60;

struct SimConfig {
  int workers = 1;
  int servers = 1;
  Consistency mode{Consistency::Kind::kBsp};  // the predictor's default (the testbed's is async)
  policy::PolicyOptions policy;
  // How the fc layers travel (core/comm.hpp): the layers choose_comm gives SFB skip the shards;
  // after such a layer's backward each worker sends its factors to every peer over its own
  // links, and the forward of the layer waits for the peers' factors the consistency model
  // needs, rebuilt first (docs/predictor-model.md, "Sufficient factors").
  CommMode comm = CommMode::kPs;
  double bandwidth_bytes_per_sec = 0;  // every node, each direction; 0 = unlimited
  double latency_s = 0;                // one way, every message
  // What hybrid weighs per layer, as launch's coordinator does: this link rate (its --bandwidth)
  // and core's fixed cost per message, not the profile's: the run chooses without a profile.
  CommCost comm_cost() const { return {bandwidth_bytes_per_sec}; }
  LinkModel link_model = LinkModel::kFair;
  // Software time a node spends receiving a message (transport threads, wake-ups), on average
  // over a transfer's two: a node handles its arrivals one at a time, so a shard serving many
  // workers queues them. A transfer's two shares go on its data message (receive_cost).
  double message_cost_s = 0;
  // A delay every message takes after the receiving node's serial work (thread hand-overs and
  // wake-ups): time, not a resource, so nothing else waits for it.
  double message_latency_s = 0;
  // Arrivals at a node from different senders that come due at (nearly) the same instant go in
  // an order set by chance, as threads and sockets on a real host take them, not in the order the
  // simulator scheduled them: each arrival comes up to this much later (a seeded uniform draw),
  // or later still where that keeps its connection's order (a message never arrives before one
  // sent earlier between the same two nodes, as on one TCP connection). Without it such ties
  // always go the same way, and workers that once met stay in lockstep where live ones drift
  // apart. 0: no jitter (exact hand-computable times). The psbed commands use 1 us
  // (kArrivalJitterUs in predictor/commands.hpp).
  double arrival_jitter_s = 0;
  // The host's cores, shared by every node of a local cluster (0: not modelled). A transfer
  // costs its two messages' CPU, 2 x cpu_per_message_s + bytes x cpu_per_byte_s (both ends),
  // taken on one core when its data arrives (receive_cost), so many nodes on few cores queue
  // for the CPU as well as for the links.
  int host_cpus = 0;
  double cpu_per_message_s = 0;
  double cpu_per_byte_s = 0;
  // A data message's CPU alone (Profile::cpu_per_data_message_us), which each of a push-pull's
  // two messages costs; 0: cpu_per_message_s.
  double cpu_per_data_message_s = 0;
  // Real compute (not compute replay): each worker's forward, backward and per-step overhead
  // run on one of those cores (one compute thread per worker, as launch's default), so workers
  // that outnumber the cores queue for them. Replayed compute sleeps and takes no core.
  bool compute_on_cores = false;
  // That compute's CPU x this. With the message costs above scaled alike, the simulation runs at
  // the CPU per step another run measured (psbed validate's what-if); 1: the profile's.
  double compute_cpu_scale = 1;
  // Profile::contention: with real compute on the cores and more workers + shards than cores,
  // every CPU cost above (compute, per message, per byte, the receiving threads' time) x (1 +
  // this x min(1, (workers + shards - cores) / cores)). 0: none.
  double cpu_contention = 0;
  // Host time per byte from the sender's link to the receiver's (loopback and ZeroMQ copies):
  // every message arrives bytes x this later (a delay, not a shared resource).
  double transit_s_per_byte = 0;
  std::int64_t partition_bytes = defaults::kPartitionBytes;  // largest part
  int apply_lanes = defaults::kApplyThreads;                 // apply threads per shard
  // Copies of each part (launch --replicas): 2 puts a backup of shard s on shard (s + 1) mod S,
  // which the primary forwards each push to and waits for before acknowledging it
  // (docs/predictor-model.md, "Replicated shards").
  int replicas = 1;
  // Async pushes answered with the updated floats (launch --push-pull): no acknowledgment, and a
  // part whose pushes all came back that way is not pulled the next step.
  bool push_pull = false;
  std::int64_t message_overhead_bytes = 64;  // wire header of a data message
  // Bucket links: a send buffer's size (the live ShapedTransport::kSendBufferBytes): a worker
  // has one per shard connection, a shard one for all its workers.
  std::int64_t send_buffer_bytes = defaults::kSendBufferBytes;
  std::int64_t steps = 200;        // per worker
  std::int64_t warmup_steps = -1;  // excluded from the figures; < 0: the live worker's rule
  std::uint64_t seed = 1;
  double straggler_s = 0;  // worker-0 sleeps this long every step (as launch --straggler-ms)
  // Heterogeneous workers (as launch --straggler): a worker's forward, backward and step
  // overhead x its compute factor (real compute on the cores: its CPU, then a sleep of (factor -
  // 1) x what that took, as the live worker does), and its own uplink and downlink at its
  // bandwidth instead of bandwidth_bytes_per_sec.
  std::vector<Straggler> stragglers;
  double start_stagger_s =
      0;  // worker w starts w x this / workers later (launch --start-stagger-ms)
  // Each worker starts a seeded uniform draw of [0, this) later besides: the phase at which it
  // meets the others, which decides lockstep or drift where both are stable (band draws).
  double start_spread_s = 0;
  // The run's host speed: each simulation draws one factor, exp(N(0, this)), and multiplies
  // every host cost by it (per message, per byte, the receiving threads' time and delays, and real
  // compute on the cores). A run on a shared host is faster or slower as a whole than the profiled
  // one; the profile measures how much (Profile::host_cv). 0: every run at the profile's costs.
  double host_cv = 0;
  std::string trace_dir;  // if set: one synthetic Chrome trace per node here
  // kFast: simulate at most `groups` workers, each standing for a group of identical workers
  // that move in step (stragglers alone in theirs). A group's message is its members' messages
  // at once: at a shard it takes their bytes, their receiving and apply time; at a worker, one
  // member's. Every worker is simulated regardless outside bsp (nothing holds the members in
  // step) and where SFB layers, the host's cores or traces are modelled (docs/predictor-model.md,
  // "Fast mode"). kAuto: kFast above kFastAbove workers.
  Fidelity fidelity = Fidelity::kExact;
  int groups = kFastGroups;
  bool check_groups = true;  // simulate_seeds' check of a grouped figure (fast_check_pct)
};

struct SimResult {
  double steps_per_sec = 0;  // sum over workers, steady window (as summary.json)
  double images_per_sec = 0;
  double simulated_seconds = 0;
  std::uint64_t seed = 0;    // the run's seed (simulate_seeds: the median run's)
  std::uint64_t events = 0;  // discrete events processed
  // The CPU booked on the host's cores (host_cpus > 0: messages, and real compute where it runs
  // on them) per worker-step, over the whole run; 0 where the cores are not modelled.
  double host_cpu_per_step_s = 0;
  double cpu_contention_scale = 1;  // what cpu_contention made of this configuration's CPU costs
  double wall_seconds = 0;          // time the simulation took
  std::vector<double> worker_steps_per_sec;
  // simulate_seeds: the lowest and highest images/s over the seeds (simulate: images_per_sec).
  // A wide range says the configuration sits between two regimes (workers in lockstep or
  // drifted apart) and either can happen.
  double seeds_min_images_per_sec = 0, seeds_max_images_per_sec = 0;
  // simulate_seeds: every seed's images/s, lowest first (simulate: the one run's), and the
  // range a single real run should land in with its regimes (predictor/band.hpp).
  std::vector<double> draws_images_per_sec;
  Band band;
  double host_factor = 1;     // the host speed this run drew (SimConfig::host_cv)
  int simulated_workers = 0;  // fewer than the workers: grouped (SimConfig::groups)
  // simulate_seeds, grouped: the median seed's images/s with fast_check_groups' two groupings
  // against its own, in percent, the one that moved most. Beyond kFastCheckPct the figure moves
  // with the grouping: the groups do not hold it.
  double fast_check_pct = 0;
  // (max - min) / the median's images/s, in percent; 0 for one run.
  double seeds_spread_pct() const {
    return images_per_sec > 0
               ? 100 * (seeds_max_images_per_sec - seeds_min_images_per_sec) / images_per_sec
               : 0.0;
  }
};

// What a message costs the node that receives it. A transfer's costs go on its data message, a
// push or a reply: twice SimConfig::message_cost_s of the receiving thread (both messages'
// shares) and, on one of the host's cores (host_cpus > 0), its CPU: 2 x cpu_per_message_s (both
// messages, both ends) + bytes x cpu_per_byte_s. The pull request or the acknowledgment naming
// the part is a header: the receiving thread hands it on at once, and it waits for a core but
// holds none. (A shard answers a burst of requests within a fraction of a millisecond, and
// answers a parked bsp pull after the barrier: the work is the reply's.) A push-pull is two
// messages, both with data and no header beside them (`push_pull`): each takes one share of
// the thread's time and a data message's CPU (cpu_per_data_message_s where measured).
struct ReceiveCost {
  double thread_s = 0;  // the receiving thread's serial time
  double cpu_s = 0;     // one of the host's cores
};
// Inline: every arrival asks it.
inline ReceiveCost receive_cost(const SimConfig& c, bool carries_data, std::int64_t bytes,
                                bool push_pull = false) {
  if (!carries_data) return {};
  if (push_pull)
    return {c.message_cost_s,
            (c.cpu_per_data_message_s > 0 ? c.cpu_per_data_message_s : c.cpu_per_message_s) +
                double(bytes) * c.cpu_per_byte_s};
  return {2 * c.message_cost_s, 2 * c.cpu_per_message_s + double(bytes) * c.cpu_per_byte_s};
}

// A header message's share (a request, an ack) where it goes alone: a push-pull's ack. The
// average per message less a data message's, both of a pair.
inline ReceiveCost header_message_cost(const SimConfig& c) {
  const double data = c.cpu_per_data_message_s > 0 ? c.cpu_per_data_message_s : c.cpu_per_message_s;
  return {c.message_cost_s, std::max(0.0, 2 * c.cpu_per_message_s - data)};
}

// The host costs a profile calibrated (the per-message cost, the copy cost per byte), set on `c`.
void take_host_costs(const Profile& profile, SimConfig& c);

// Throws Error if the profile does not match the model or the configuration is invalid.
SimResult simulate(const Profile& profile, const ModelSpec& spec, const SimConfig& config);
// Why `config` cannot use push-pull, as launch refuses it ("" when it can or does not ask).
std::string push_pull_problem(const SimConfig& config);

// Simulates `seeds` times, with the seeds config.seed, config.seed + 1, ... (compute draws and
// tf-random), and returns the run whose images/s is the median (the lower middle one for an even
// count), with events and wall_seconds summed over all runs. Grouped (the fast mode), the median
// seed runs again with the groups of fast_check_groups: SimResult::fast_check_pct. A configuration
// on the edge between two regimes (workers in step or drifted apart) can land in either on one
// draw; the median steadies it. With config.trace_dir set, the median run's traces are written (its
// seed simulated once more, tracing: the same figures).
SimResult simulate_seeds(const Profile& profile, const ModelSpec& spec, const SimConfig& config,
                         int seeds);
// The two groupings the fast mode's check runs a grouped `config` with: half and twice its groups,
// but under a credit (p3, ByteScheduler, Prophet) at most kCheckMembers workers a group. A
// grouping finer than twice the groups runs for fewer steps (as many simulated worker-steps as
// `config`'s own run, kCheckSteps at least), set against `config`'s groups at as many.
std::pair<int, int> fast_check_groups(const SimConfig& config);

// simulate_seeds for every configuration, the simulations (configurations x seeds) spread over
// `jobs` threads (0: one per core; predictor/parallel.hpp). Each simulation is seeded and
// independent, so the results, in the order of `configs`, are those of simulate_seeds one after the
// other; only the wall time changes. `done(i, result)`, if set, is called as configuration i
// completes (in completion order, one call at a time). If simulations fail, the error of the first
// in order (configuration, then seed), the one a serial run would meet, is rethrown here once every
// thread has stopped.
std::vector<SimResult> simulate_all(
    const Profile& profile, const ModelSpec& spec, const std::vector<SimConfig>& configs, int seeds,
    int jobs, const std::function<void(std::size_t, const SimResult&)>& done = {});

// SimConfig::cpu_contention's factor for this configuration: 1 + contention x min(1, (workers +
// shards - cores) / cores) where real compute and the messages' CPU run on the host's modelled
// cores, else 1. with_contention: the configuration with its CPU costs (per message, per byte,
// the receiving threads' time, the compute's scale) multiplied by it and the contention spent
// (0), as the simulator and the analytic bounds charge them.
double contention_scale(const SimConfig& config);
SimConfig with_contention(SimConfig config);
// Every CPU cost of `config` (per message, per byte, the receiving threads' time, the compute's
// scale) x `factor`: the contention's, or psbed validate's what-if at a run's measured CPU.
void scale_cpu_costs(SimConfig& config, double factor);

// The live worker's warm-up rule: steps excluded from the steady-state figures.
std::int64_t default_warmup_steps(std::int64_t steps);

}  // namespace psbed::predictor
