// What every node of a live cluster must agree on, decided once by the coordinator and
// broadcast as JSON: the experiment (model spec text, optimizer, consistency, length), the
// nodes with their ids and addresses, and the partition of every tensor onto server shards.
// Servers need no model files: the spec travels as TOML text inside the map.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/consistency.hpp"
#include "core/defaults.hpp"
#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "ps/part_sizes.hpp"

namespace psbed::ps {

using psbed::Consistency;  // core/consistency.hpp

// A shard that took over a dead one's parts tells a resent push by its sequence, the last it
// applied per worker: that holds on one connection, whose order ZeroMQ keeps, not across several.
inline constexpr const char* kConnectionsWithReplicas =
    "--connections above 1 with --replicas 2: a shard that takes over tells a resent push by "
    "the order of one connection";

struct Experiment {
  std::string model_name;
  std::string model_toml;  // the spec's full text
  Consistency mode{Consistency::Kind::kAsync};
  SgdOptions sgd;
  std::string lr_schedule = "constant";
  std::int64_t steps = 0;  // steps per worker
  int batch = 64;
  std::uint64_t seed = 1;
  std::int64_t partition_bytes = defaults::kPartitionBytes;
  policy::PolicyOptions policy;  // transmission policy of every worker
  bool allow_nonfinite = false;  // shards apply gradients holding NaN or infinity
  // Workers push with push-pull (PsClient::push_pull): each push is answered with the updated
  // part, and a part whose every pushed float came back that way is not pulled next step.
  // Under bsp and ssp the shard acknowledges a push whose answer must wait for other workers.
  bool push_pull = false;
  std::string comm = "ps";  // ps | sfb | hybrid (core/comm.hpp): fc layers' route
  // The cluster's link rate per direction (launch's --bandwidth), which hybrid's per-layer cost
  // weighs messages against; 0: not known (bytes alone decide).
  double comm_link_bytes_per_sec = 0;
  CommCost comm_cost() const { return {comm_link_bytes_per_sec}; }
  // Checkpoints (ps/checkpoint.hpp): every this many steps (0: none, unless the coordinator asks
  // for them every checkpoint_every_s); a resumed run starts at resume_step.
  std::int64_t checkpoint_every = 0;
  double checkpoint_every_s = 0;
  std::int64_t resume_step = 0;
  // Copies of every part (--replicas): 1, or 2 when each shard's parts also live on the next
  // shard, its backup (backup_of), which takes them over when the shard dies.
  int replicas = 1;
  // ZeroMQ connections from each worker to each shard (--connections): a part of at least
  // connections x kMinStripeBytes is cut into that many stripes, one on each, so that no one
  // connection's I/O thread carries it all (PsClient::stripes).
  int connections = 1;
};

inline constexpr int kMaxConnections = 8;  // one digit after "~" (link_id_matches)
inline constexpr std::int64_t kMinStripeBytes = 64 << 10;
// The routing identity of a worker's connection `k` to a shard: its link id, then "~k" past the
// first. A shard takes the worker's id from each of them (link_id_matches) and from no other.
std::string connection_identity(const std::string& link_id, int k);
bool link_id_matches(const std::string& peer, const std::string& link_id, int connections);

struct NodeInfo {
  std::string role;     // "server" or "worker"
  int id = 0;           // 0-based within its role
  std::string name;     // "server-0", "worker-3"
  std::string address;  // servers: the endpoint workers connect to; workers: their peer endpoint
  // Workers: the routing identity of their connections to the shards, a random tag only the
  // coordinator and the shards learn. A shard takes a worker id only from that connection.
  std::string link_id;
  std::string curve_key;  // servers with --keys: their CURVE public key (Z85), else ""
};

struct ClusterMap {
  Experiment exp;
  std::vector<NodeInfo> servers, workers;
  PartitionPlan plan;
  ModelSpec spec;  // parsed from exp.model_toml (not serialised)
  // The map a shard gets when it rejoins a running cluster (--replicas 2): the shard serving its
  // parts now, whose copy it becomes; -1 for a shard that starts with the run.
  int rejoin_from = -1;

  nlohmann::json to_json() const;
  // The shard holding the backup of `shard`'s parts under --replicas 2: the next one.
  int backup_of(int shard) const { return (shard + 1) % int(servers.size()); }
  // The shard whose parts `shard` backs up: the previous one.
  int replica_source(int shard) const {
    return (shard + int(servers.size()) - 1) % int(servers.size());
  }
  static ClusterMap from_json(const nlohmann::json& j);  // throws Error naming the bad field
};

// The (key, part) -> bytes table the validator checks ranges against.
class PlanPartSizes final : public PartSizes {
 public:
  explicit PlanPartSizes(const PartitionPlan& plan) : plan_(plan) {}
  std::uint32_t tensor_count() const override { return std::uint32_t(plan_.parts_of_key.size()); }
  std::uint32_t part_count(std::uint32_t key) const override {
    return std::uint32_t(plan_.parts_of_key[key].size());
  }
  std::uint64_t part_bytes(std::uint32_t key, std::uint32_t part) const override {
    return std::uint64_t(plan_.at(int(key), int(part)).bytes());
  }

 private:
  const PartitionPlan& plan_;
};

}  // namespace psbed::ps
