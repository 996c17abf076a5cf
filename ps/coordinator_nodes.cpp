// The coordinator's nodes: registration and the ids it hands out, the cluster map, barriers,
// heartbeats, and what a node's death means for the run.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.hpp"
#include "core/partition.hpp"
#include "core/trace.hpp"
#include "ps/checkpoint.hpp"
#include "ps/cluster_map.hpp"
#include "ps/coordinator_impl.hpp"

namespace psbed::ps::coordinator_detail {

int Coordinator::count(const std::string& role) const {
  int n = 0;
  for (const auto& [_, node] : nodes_) n += node.role == role;
  return n;
}

std::vector<Node*> Coordinator::live(const std::string& role) {
  std::vector<Node*> v;
  for (auto& [_, n] : nodes_)
    if (n.alive && (role == "all" || n.role == role)) v.push_back(&n);
  return v;
}

// With the node's send time echoed and this clock read now, the node works out its clock's
// offset to this one (NodeLink::clock_sync); the traces merge on it.
json Coordinator::registered_reply(const json& reg, int id) {
  json r = {{"event", "registered"}, {"id", id}};
  if (const auto sent = reg.find("sent_us"); sent != reg.end() && sent->is_number()) {
    r["echo_us"] = *sent;
    r["clock_us"] = now_us();
    r["clock_domain"] = clock_domain();
  }
  return r;
}

void Coordinator::on_register(const PeerId& peer, const json& j) {
  std::string role = j.value("role", ""), name = j.value("name", "");
  if (auto it = nodes_.find(peer); it != nodes_.end()) {  // a retry: answer again
    send_to(peer, Op::kControl, registered_reply(j, it->second.id));
    return;
  }
  auto reject = [&](const std::string& why) {
    spdlog::warn("registration of '{}' refused: {}", name, why);
    send_to(peer, Op::kError, {{"error", "registration refused: " + why}});
  };
  if (role != "server" && role != "worker")
    return reject("unknown role '" + role + "', expected server or worker");
  if (finished_) return send_to(peer, Op::kShutdown, json());  // the run ended before it began
  if (map_sent_) {
    std::string why = "the cluster has already started";
    if (role == "server" && rejoin_locked(peer, j, why)) return;
    return reject(why);
  }
  const int want = role == "server" ? opt_.servers : opt_.workers;
  if (count(role) >= want)
    return reject("all " + std::to_string(want) + " " + role + "s have registered already");
  if (role == "server" && j.value("address", "").empty())
    return reject("a server must give its address");
  // Barriers and policy switches count nodes by name: two of one name would never be complete.
  for (const auto& [_, other] : nodes_)
    if (!name.empty() && other.name == name)
      return reject("another node is named '" + name + "' already: give each node its own --name");
  if (role == "worker") {
    if (const std::string why = worker_mismatch_locked(j); !why.empty()) return reject(why);
    if (const std::string why = link_id_problem_locked(j); !why.empty()) return reject(why);
  }
  // worker-5 in a 2-worker cluster would take another id, and push the real worker-1 aside.
  if (const int k = numbered_id(role, name); k >= want)
    return reject("'" + name + "' asks for " + role + " id " + std::to_string(k) +
                  ", but the cluster has " + std::to_string(want) + " " + role + "(s), ids 0 to " +
                  std::to_string(want - 1));
  Node n;
  n.role = role, n.name = name.empty() ? peer_name(peer) : name, n.address = j.value("address", "");
  n.peer = peer, n.id = free_id_locked(role, n.name, want), n.last_seen = Clock::now(), n.extra = j;
  spdlog::info("{} registered as {} {} {}", n.name, role, n.id, n.address);
  send_to(peer, Op::kControl, registered_reply(j, n.id));
  nodes_.emplace(peer, std::move(n));
  if (count("server") == opt_.servers && count("worker") == opt_.workers) send_map_locked();
}

// Why a registering worker cannot train with this cluster ("" if it can): a model other than the
// cluster's, or another data set than the workers before it (the epochs and the summary are
// reckoned from one). A worker that says nothing of them (an older one) is not compared.
std::string Coordinator::worker_mismatch_locked(const json& j) const {
  const std::int64_t params = whole(j, "parameters"), layers = whole(j, "layers");
  if ((params >= 0 && params != spec_.parameter_count()) ||
      (layers >= 0 && layers != std::int64_t(spec_.layers.size())))
    return "its model '" + text(j, "model", "?") + "' (" + std::to_string(params) +
           " parameters) is not the cluster's '" + spec_.name + "' (" +
           std::to_string(spec_.parameter_count()) + "): give it --model " + spec_.name;
  for (const auto& [_, n] : nodes_) {
    if (n.role != "worker") continue;
    const std::string set = text(j, "dataset"), other = text(n.extra, "dataset");
    const std::int64_t size = whole(j, "train_size"), other_size = whole(n.extra, "train_size");
    if ((!set.empty() && !other.empty() && set != other) ||
        (size >= 0 && other_size >= 0 && size != other_size))
      return "its data (" + text(j, "data", set) + ") is not " + n.name + "'s (" +
             text(n.extra, "data", other) + "): every worker trains on the same data set";
    break;  // every worker registered was compared with the first
  }
  return "";
}

// Why a worker's link id (the identity of its connections to the shards) cannot be taken: the
// shards bind its worker id to that identity, so it must be there, routable and unique.
std::string Coordinator::link_id_problem_locked(const json& j) const {
  const auto it = j.find("link_id");
  if (it == j.end() || !it->is_string())
    return "a worker must give its link_id (the identity of its connections to the shards)";
  const std::string id = it->get<std::string>();
  // Room for the "~k" of a further connection (--connections), within ZeroMQ's 255 bytes.
  if (id.size() < 16 || id.size() > 253)
    return "link_id of " + std::to_string(id.size()) + " bytes, expected 16 to 253";
  // Nor may it read as another worker's further connection, or be read as one of its own.
  const auto base = [](const std::string& s) {
    const std::size_t n = s.size();
    return n > 2 && s[n - 2] == '~' && s[n - 1] >= '0' && s[n - 1] <= '9' ? s.substr(0, n - 2) : s;
  };
  if (base(id) != id) return "link_id ends in ~ and a digit, the mark of a further connection";
  for (const auto& [_, n] : nodes_)
    if (n.role == "worker" && text(n.extra, "link_id") == id)
      return "link_id is taken by " + n.name + " already";
  return "";
}

// K for a name <role>-K (worker-3; not worker-007 or worker-1234567), else -1.
int Coordinator::numbered_id(const std::string& role, const std::string& name) {
  const std::string prefix = role + "-";
  if (name.size() <= prefix.size() || name.size() - prefix.size() > 6 ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
    return -1;
  const int k = std::stoi(name.substr(prefix.size()));
  return name == prefix + std::to_string(k) ? k : -1;
}

// A node named <role>-K (as launch and the Kubernetes manifests name them) gets id K if it is
// free, so that a node's name and its number agree in every log, trace and summary whatever
// order the nodes registered in; any other takes the highest free id, leaving the low ones to
// numbered nodes still to come. Either way the ids of a role end up 0 .. want-1.
int Coordinator::free_id_locked(const std::string& role, const std::string& name, int want) const {
  std::vector<bool> taken(std::size_t(want), false);
  for (const auto& [_, n] : nodes_)
    if (n.role == role && n.id >= 0 && n.id < want) taken[std::size_t(n.id)] = true;
  if (const int k = numbered_id(role, name); k >= 0 && k < want && !taken[std::size_t(k)]) return k;
  for (int k = want - 1; k >= 0; --k)
    if (!taken[std::size_t(k)]) return k;
  return want;  // not reached: registration stops at `want`
}

void Coordinator::send_map_locked() {
  ClusterMap map;
  map.exp.model_name = spec_.name;
  map.exp.model_toml = spec_text_;
  map.exp.mode = mode_;
  map.exp.sgd = opt_.sgd;
  map.exp.lr_schedule = opt_.lr_schedule;
  map.exp.batch = opt_.batch;
  map.exp.seed = opt_.seed;
  map.exp.partition_bytes = opt_.partition_bytes;
  map.exp.policy = opt_.policy;
  map.exp.policy.seed = opt_.seed;
  map.exp.allow_nonfinite = opt_.allow_nonfinite;
  map.exp.push_pull = opt_.push_pull;
  map.exp.connections = opt_.connections;
  map.exp.comm = opt_.comm;
  map.exp.comm_link_bytes_per_sec = comm_cost().link_bytes_per_sec;
  map.exp.replicas = opt_.replicas;
  std::int64_t train_size = -1;
  for (const auto& [_, n] : nodes_) {
    NodeInfo info;
    info.role = n.role, info.id = n.id, info.name = n.name, info.address = n.address;
    info.link_id = text(n.extra, "link_id");
    info.curve_key = text(n.extra, "curve_key");  // a shard's, for the workers' CURVE links
    (n.role == "server" ? map.servers : map.workers).push_back(info);
    if (n.role == "worker") train_size = whole(n.extra, "train_size");
  }
  auto by_id = [](const NodeInfo& a, const NodeInfo& b) { return a.id < b.id; };
  std::sort(map.servers.begin(), map.servers.end(), by_id);
  std::sort(map.workers.begin(), map.workers.end(), by_id);
  if (opt_.steps > 0) {
    map.exp.steps = opt_.steps;
  } else {
    if (train_size <= 0)
      return fail_locked("workers did not report their training-set size; give --steps");
    map.exp.steps = std::int64_t(opt_.epochs) * (train_size / opt_.workers / opt_.batch);
    if (map.exp.steps < 1)
      return fail_locked("a training set of " + std::to_string(train_size) +
                         " samples gives less than one step of " + std::to_string(opt_.batch) +
                         " per worker");
  }
  map.plan = make_partition(spec_, opt_.partition_bytes, opt_.servers);
  steps_ = map.exp.steps;
  const CheckpointEvery every =
      for_flag("--checkpoint-every", [&] { return parse_checkpoint_every(opt_.checkpoint_every); });
  map.exp.checkpoint_every = every.steps, map.exp.checkpoint_every_s = every.seconds;
  // Under sfb and hybrid the fc layers live on the workers, which checkpoint nothing.
  if ((every.on() || opt_.resume_step > 0) && opt_.comm != "ps")
    return fail_locked("checkpoints and --resume-step need --comm ps: under --comm " + opt_.comm +
                       " the workers hold the fc layers, and a checkpoint would not");
  if (opt_.resume_step >= steps_)
    return fail_locked("resuming at step " + std::to_string(opt_.resume_step) + " of a run of " +
                       std::to_string(steps_) + " steps: nothing is left to train");
  map.exp.resume_step = opt_.resume_step;
  next_checkpoint_ =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(dsec(every.seconds));
  // The shards get the workers' link ids; the workers, the status and the summary do not.
  // Each text made once and shared by every send: the map names every worker, so a copy per
  // node would hold workers^2 bytes (100 MB for 1,000 workers) until the last one left.
  map_links_json_ = map.to_json();
  const Payload with_links = json_payload(map_links_json_);
  for (NodeInfo& w : map.workers) w.link_id.clear();
  for (NodeInfo& s : map.servers) s.link_id.clear();  // a shard's, for its backup alone
  map_json_ = map.to_json();
  const Payload without = json_payload(map_json_);
  for (const auto& [_, n] : nodes_)
    if (n.alive) send_to(n.peer, Op::kClusterMap, n.role == "server" ? with_links : without);
  map_sent_ = true;
  last_advance_ = Clock::now();
  training_started_ = Clock::now();
  spdlog::info(
      "cluster complete: {} parts of at most {} bytes over {} shard(s) (imbalance {:.3f}); {} "
      "steps per worker",
      map.plan.parts.size(), opt_.partition_bytes, opt_.servers, map.plan.imbalance(), steps_);
}

void Coordinator::on_barrier(Node& n, const std::string& name) {
  barriers_[name].insert(n.name);
  release_barriers_locked();
}

void Coordinator::release_barriers_locked() {
  if (stopping_) return;  // an interrupted run evaluates nothing
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    bool all = true;
    for (Node* w : live("worker")) all = all && it->second.count(w->name);
    if (!all) {
      ++it;
      continue;
    }
    json rel = {{"name", it->first}};
    if (it->first == "trained") {
      auto ws = live("worker");
      int evaluator = -1;
      for (Node* w : ws) evaluator = evaluator < 0 ? w->id : std::min(evaluator, w->id);
      rel["evaluator"] = evaluator;
      evaluator_ = evaluator;
      spdlog::info("all live workers finished training; worker-{} evaluates the final parameters",
                   evaluator);
    }
    for (Node* w : live("worker")) send_to(w->peer, Op::kBarrierRelease, rel);
    it = barriers_.erase(it);
  }
}

void Coordinator::check_heartbeats_locked(Clock::time_point now) {
  for (auto& [_, n] : nodes_) {
    if (!n.alive) continue;
    double silent = std::chrono::duration<double>(now - n.last_seen).count();
    if (silent > opt_.heartbeat_timeout_s) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "no heartbeat for %.1f s (timeout %.1f s)", silent,
                    opt_.heartbeat_timeout_s);
      fail_node_locked(n, buf);
    }
  }
}

void Coordinator::fail_node_locked(Node& n, const std::string& reason) {
  n.alive = false;
  n.failure = reason;
  spdlog::error("{} ({} {}) is dead: {}", n.name, n.role, n.id, reason);
  failed_.push_back({{"name", n.name}, {"role", n.role}, {"id", n.id}, {"reason", reason}});
  if (n.role == "server") return server_failed_locked(n);
  // If it is only silent, not gone, it must stop: its pushes are refused from now on. A worker
  // that said it leaves waits for this word before it goes.
  send_to(n.peer, Op::kShutdown, json());
  if (live("worker").empty()) return fail_locked("every worker died");
  // Servers stop waiting for it (bsp/ssp), barriers stop counting it.
  for (Node* s : live("server"))
    send_to(s->peer, Op::kControl, {{"event", "worker_dead"}, {"worker", n.id}});
  // Workers exchanging factors (--comm sfb/hybrid) cannot go on without its factors.
  for (Node* w : live("worker"))
    send_to(w->peer, Op::kControl, {{"event", "worker_dead"}, {"worker", n.id}, {"name", n.name}});
  release_barriers_locked();
  if (switch_) finish_switch_locked(false);
  if (comm_switch_) finish_comm_locked(false);
  if (evaluator_ == n.id) {
    // Training is over; only the evaluation is lost. Finish with no test accuracy.
    spdlog::warn("the evaluating worker {} died: finishing without a test accuracy", n.name);
    evaluation_note_ = n.name + " died while evaluating";
    finished_ = true;
    cv_.notify_all();
  }
}

// A dead shard ends the run unless another holds a copy of every part it serves (--replicas 2):
// its backup (the next shard, or a shard that rejoined and took its copy), alive. Then every
// node hears who serves them now, and workers resend what the dead shard had not acknowledged.
void Coordinator::server_failed_locked(Node& n) {
  const std::string lost = "server " + n.name + " died: its parameters are lost";
  if (opt_.replicas < 2 || opt_.servers < 2) return fail_locked(lost);
  if (!map_sent_) return fail_locked(lost + " (before the run started)");
  for (auto& [server, copy] : backup_)
    if (copy == n.id) copy = -1;  // what it backed up has one copy now
  if (rejoining_.erase(n.id)) {
    // It served nothing: the shard it was copying goes on alone, and stops forwarding to it.
    spdlog::warn("{} died again while it held only copies: the parts have one copy", n.name);
    for (Node* s : live("server"))
      send_to(s->peer, Op::kControl, {{"event", "server_dead"}, {"server", n.id}, {"to", -1}});
    return;
  }
  const int backup = backup_locked(n.id);
  const int next = backup >= 0 ? backup : (n.id + 1) % opt_.servers;
  Node* to = nullptr;
  std::string backup_name = "server-" + std::to_string(next);
  for (auto& [_, s] : nodes_)
    if (s.role == "server" && s.id == next) to = s.alive ? &s : nullptr, backup_name = s.name;
  if (!to) return fail_locked(lost + ", and so is its backup " + backup_name);
  if (backup < 0)
    return fail_locked(lost + ": it served the parts of a shard that died before, of which it " +
                       "held the only copy" +
                       (rejoining_.count(next) ? " (" + backup_name + " had rejoined, but did " +
                                                     "not hold its copy yet)"
                                               : std::string()));
  took_over_.insert(backup);
  rejoining_.erase(backup);  // a shard that rejoined serves from now on
  backup_[backup] = -1;      // its own backup, for 2 shards, was the dead one
  const double at_s = since_start_s();
  spdlog::warn("{} serves the parts of {} from its copy from now on ({:.2f} s into the run)",
               to->name, n.name, at_s);
  failovers_.push_back({{"server", n.name},
                        {"to", to->name},
                        {"reason", n.failure},
                        {"at_s", at_s},
                        {"at_unix_s", std::chrono::duration<double>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()}});
  const json event = {{"event", "server_dead"}, {"server", n.id},      {"to", backup},
                      {"name", n.name},         {"to_name", to->name}, {"to_address", to->address}};
  for (Node* s : live("server")) send_to(s->peer, Op::kControl, event);
  for (Node* w : live("worker")) send_to(w->peer, Op::kControl, event);
}

}  // namespace psbed::ps::coordinator_detail
