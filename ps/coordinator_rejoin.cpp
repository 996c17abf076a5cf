// A shard's process started again after the coordinator declared it dead (--replicas 2): it
// takes back its id and becomes the backup of every part its successor serves now, so that the
// run has two copies again. The successor stays primary: nothing pauses and no part moves.
#include <spdlog/spdlog.h>

#include <chrono>

#include "ps/coordinator_impl.hpp"

namespace psbed::ps::coordinator_detail {

int Coordinator::backup_locked(int server) const {
  const auto it = backup_.find(server);
  return it != backup_.end() ? it->second : (server + 1) % opt_.servers;
}

bool Coordinator::rejoin_locked(const PeerId& peer, const json& j, std::string& why) {
  const std::string name = j.value("name", "");
  Node* old = nullptr;
  for (auto& [_, n] : nodes_)
    if (n.role == "server" && n.name == name) old = &n;
  if (!old) return false;  // a shard the run never had: "the cluster has already started"
  const std::string back = name + " is back, but ";
  if (old->alive && opt_.replicas == 2 && opt_.servers == 2) {
    // A container restarted at once (a restart policy) registers before its old process missed
    // its heartbeats: that process is gone, or told to go, and its successor takes over now.
    spdlog::warn("{} registered again: its old process is taken for dead", name);
    send_to(old->peer, Op::kShutdown, json());
    fail_node_locked(*old, "it registered again (its process was started anew)");
    if (finished_) {
      why = back + "the run ended";
      return false;
    }
  }
  if (old->alive) {
    why = "another node is named '" + name + "' already, and it is alive";
    return false;
  }
  if (opt_.replicas < 2) {
    why = back + "a shard rejoins a run only with --replicas 2 (its parameters are lost)";
    return false;
  }
  if (opt_.servers != 2) {
    why = back + "a shard rejoins only a run of 2 shards (this one has " +
          std::to_string(opt_.servers) + ")";
    return false;
  }
  const int primary = 1 - old->id;
  Node* y = nullptr;
  for (auto& [_, n] : nodes_)
    if (n.role == "server" && n.id == primary && n.alive) y = &n;
  if (!y || !took_over_.count(primary)) {
    why = back + "no live shard serves its parts";
    return false;
  }
  Node n;
  n.role = "server", n.name = name, n.address = j.value("address", ""), n.peer = peer;
  n.id = old->id;
  if (n.address.empty()) {
    why = back + "it gave no address";
    return false;
  }
  n.last_seen = Clock::now(), n.extra = j;
  nodes_.erase(old->peer);
  send_to(peer, Op::kControl, registered_reply(j, n.id));
  // A shard that rejoins later (this one's primary, should it die and come back) takes forwards
  // from this process's connection.
  // Its address may be another (a new port, a new pod): the status and later maps show it.
  for (auto& s : map_links_json_["servers"])
    if (s.value("id", -1) == n.id) s["link_id"] = text(j, "link_id"), s["address"] = n.address;
  for (auto& s : map_json_["servers"])
    if (s.value("id", -1) == n.id) s["address"] = n.address;
  json map = map_links_json_;
  map["rejoin_from"] = primary;
  send_to(peer, Op::kClusterMap, map);
  send_to(y->peer, Op::kControl,
          {{"event", "backup_back"}, {"server", n.id}, {"name", name}, {"address", n.address}});
  rejoining_.insert(n.id);
  rejoins_.push_back({{"server", name}, {"backup_of", y->name}, {"at_s", since_start_s()}});
  spdlog::warn("{} rejoined ({:.2f} s into the run): it takes a copy of every part {} serves", name,
               since_start_s(), y->name);
  nodes_.emplace(peer, std::move(n));
  return true;
}

// The rejoined shard installed every part's state: the primary's parts have two copies again.
void Coordinator::rejoined_synced_locked(Node& n) {
  if (n.role != "server" || !rejoining_.count(n.id) || !n.alive) return;
  const int primary = 1 - n.id;
  backup_[primary] = n.id;
  for (auto& r : rejoins_)
    if (r.value("server", "") == n.name && !r.contains("copy_at_s"))
      r["copy_at_s"] = since_start_s();
  spdlog::warn("{} holds a copy of every part again ({:.2f} s into the run)", n.name,
               since_start_s());
}

}  // namespace psbed::ps::coordinator_detail
