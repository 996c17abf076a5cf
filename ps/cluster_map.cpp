#include "ps/cluster_map.hpp"

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"

namespace psbed::ps {

nlohmann::json ClusterMap::to_json() const {
  nlohmann::json j;
  j["experiment"] = {{"model", exp.model_name},
                     {"model_toml", exp.model_toml},
                     {"mode", exp.mode.str()},
                     {"lr", exp.sgd.lr},
                     {"momentum", exp.sgd.momentum},
                     {"weight_decay", exp.sgd.weight_decay},
                     {"lr_schedule", exp.lr_schedule},
                     {"steps", exp.steps},
                     {"batch", exp.batch},
                     {"seed", exp.seed},
                     {"partition_bytes", exp.partition_bytes},
                     {"policy", exp.policy.name},
                     {"slice_params", exp.policy.slice_params},
                     {"partition_params", exp.policy.partition_params},
                     {"credit_bytes", exp.policy.credit_bytes},
                     {"allow_nonfinite", exp.allow_nonfinite},
                     {"push_pull", exp.push_pull},
                     {"comm", exp.comm},
                     {"comm_link_bytes_per_sec", exp.comm_link_bytes_per_sec},
                     {"checkpoint_every", exp.checkpoint_every},
                     {"checkpoint_every_s", exp.checkpoint_every_s},
                     {"resume_step", exp.resume_step},
                     {"replicas", exp.replicas},
                     {"connections", exp.connections}};
  auto nodes = [](const std::vector<NodeInfo>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& n : v) {
      a.push_back({{"role", n.role}, {"id", n.id}, {"name", n.name}, {"address", n.address}});
      if (!n.link_id.empty()) a.back()["link_id"] = n.link_id;
      if (!n.curve_key.empty()) a.back()["curve_key"] = n.curve_key;
    }
    return a;
  };
  j["servers"] = nodes(servers);
  j["workers"] = nodes(workers);
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : plan.parts) parts.push_back({p.key, p.part, p.offset, p.numel, p.shard});
  j["parts"] = parts;
  if (rejoin_from >= 0) j["rejoin_from"] = rejoin_from;
  return j;
}

namespace {

// A number of the map as a T, refused where T cannot hold it (json's own conversion is a cast,
// undefined for a value out of range).
template <typename T>
T number(const nlohmann::json& v, const char* what) {
  if (!json_fits<T>(v))
    throw Error(std::string("malformed cluster map: ") + what + " is " + json_excerpt(v) +
                (std::is_floating_point_v<T> ? ", expected a finite number"
                                             : ", expected a whole number in range"));
  return v.get<T>();
}

template <typename T>
T number_or(const nlohmann::json& e, const char* key, T dflt) {
  return e.contains(key) ? number<T>(e[key], key) : dflt;
}

}  // namespace

ClusterMap ClusterMap::from_json(const nlohmann::json& j) {
  ClusterMap m;
  try {
    const auto& e = j.at("experiment");
    m.exp.model_name = e.at("model");
    m.exp.model_toml = e.at("model_toml");
    m.exp.mode = Consistency::parse(e.at("mode"));
    m.exp.sgd.lr = number<float>(e.at("lr"), "lr");
    m.exp.sgd.momentum = number<float>(e.at("momentum"), "momentum");
    m.exp.sgd.weight_decay = number<float>(e.at("weight_decay"), "weight_decay");
    m.exp.lr_schedule = e.at("lr_schedule");
    m.exp.steps = number<decltype(m.exp.steps)>(e.at("steps"), "steps");
    m.exp.batch = number<int>(e.at("batch"), "batch");
    m.exp.seed = number<std::uint64_t>(e.at("seed"), "seed");
    m.exp.partition_bytes = number<std::int64_t>(e.at("partition_bytes"), "partition_bytes");
    m.exp.policy.name = e.value("policy", "wfbp");
    m.exp.policy.slice_params = number_or(e, "slice_params", m.exp.policy.slice_params);
    m.exp.policy.partition_params = number_or(e, "partition_params", m.exp.policy.partition_params);
    m.exp.policy.credit_bytes = number_or(e, "credit_bytes", m.exp.policy.credit_bytes);
    m.exp.policy.seed = m.exp.seed;
    m.exp.allow_nonfinite = e.value("allow_nonfinite", false);
    m.exp.push_pull = e.value("push_pull", false);
    m.exp.comm = e.value("comm", "ps");
    parse_comm(m.exp.comm);  // an unknown route fails here, named
    m.exp.comm_link_bytes_per_sec = number_or<double>(e, "comm_link_bytes_per_sec", 0);
    if (!(m.exp.comm_link_bytes_per_sec >= 0))
      throw Error("malformed cluster map: comm_link_bytes_per_sec " +
                  std::to_string(m.exp.comm_link_bytes_per_sec) + ", expected 0 or more");
    m.exp.checkpoint_every = number_or<std::int64_t>(e, "checkpoint_every", 0);
    m.exp.checkpoint_every_s = number_or<double>(e, "checkpoint_every_s", 0);
    m.exp.resume_step = number_or<std::int64_t>(e, "resume_step", 0);
    m.exp.replicas = number_or<int>(e, "replicas", 1);
    if (m.exp.replicas < 1 || m.exp.replicas > 2)
      throw Error("malformed cluster map: replicas " + std::to_string(m.exp.replicas) +
                  ", expected 1 or 2");
    m.exp.connections = number_or<int>(e, "connections", 1);
    if (m.exp.connections < 1 || m.exp.connections > kMaxConnections)
      throw Error("malformed cluster map: connections " + std::to_string(m.exp.connections) +
                  ", expected 1 to " + std::to_string(kMaxConnections));
    if (m.exp.checkpoint_every < 0 || m.exp.resume_step < 0 || m.exp.resume_step > m.exp.steps)
      throw Error("malformed cluster map: checkpoint_every or resume_step out of range");
    policy::check_policy_options(
        m.exp.policy);  // an unknown name or bad parameter fails here, named
    auto nodes = [](const nlohmann::json& a) {
      std::vector<NodeInfo> v;
      for (const auto& n : a) {
        NodeInfo info;
        info.role = n.at("role"), info.id = number<int>(n.at("id"), "a node's id");
        info.name = n.at("name"), info.address = n.at("address");
        info.link_id = n.value("link_id", ""), info.curve_key = n.value("curve_key", "");
        v.push_back(std::move(info));
      }
      return v;
    };
    m.servers = nodes(j.at("servers"));
    m.workers = nodes(j.at("workers"));
    m.rejoin_from = number_or<int>(j, "rejoin_from", -1);
    if (m.rejoin_from >= int(m.servers.size()))
      throw Error("malformed cluster map: rejoin_from " + std::to_string(m.rejoin_from) +
                  " names no shard");
    m.spec = parse_model_spec(m.exp.model_toml, m.exp.model_name + " (from the cluster map)");
    m.plan.shards = int(m.servers.size());
    m.plan.parts_of_key.resize(m.spec.tensors.size());
    m.plan.shard_bytes.assign(m.servers.size(), 0);
    for (const auto& p : j.at("parts")) {
      Part part{number<int>(p.at(0), "a part's key"), number<int>(p.at(1), "a part's index"),
                number<std::int64_t>(p.at(2), "a part's offset"),
                number<std::int64_t>(p.at(3), "a part's size"),
                number<int>(p.at(4), "a part's shard")};
      if (part.key < 0 || part.key >= int(m.spec.tensors.size()) || part.shard < 0 ||
          part.shard >= m.plan.shards)
        throw Error("cluster map part (" + std::to_string(part.key) + ", " +
                    std::to_string(part.part) + ") names a tensor or shard that does not exist");
      // Within its tensor, so that its byte count cannot overflow either.
      const std::int64_t numel = m.spec.tensors[std::size_t(part.key)].numel;
      if (part.offset < 0 || part.numel < 0 || part.offset > numel ||
          part.numel > numel - part.offset)
        throw Error("cluster map part (" + std::to_string(part.key) + ", " +
                    std::to_string(part.part) + ") runs past its tensor of " +
                    std::to_string(numel) + " floats");
      m.plan.parts_of_key[part.key].push_back(int(m.plan.parts.size()));
      m.plan.shard_bytes[part.shard] += part.bytes();
      m.plan.parts.push_back(part);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed cluster map: ") + e.what());
  }
  return m;
}

std::string connection_identity(const std::string& link_id, int k) {
  return k == 0 ? link_id : link_id + "~" + std::to_string(k);
}

bool link_id_matches(const std::string& peer, const std::string& link_id, int connections) {
  if (peer.size() < link_id.size() || peer.compare(0, link_id.size(), link_id) != 0) return false;
  if (peer.size() == link_id.size()) return true;
  // "~k" with 1 <= k < connections <= 8: one digit.
  return peer.size() == link_id.size() + 2 && peer[link_id.size()] == '~' && peer.back() >= '1' &&
         peer.back() < char('0' + connections);
}

}  // namespace psbed::ps
