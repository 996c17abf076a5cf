// The cluster map the shard and store tests share: one fc layer of 2 x 4 weights (key 0) and 2
// biases (key 1), lr 0.5, 100 steps, on `servers` shards (with link ids when more than one, as
// shard-to-shard links need) and `workers` workers.
#pragma once
#include <string>

#include "core/consistency.hpp"
#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "ps/cluster_map.hpp"

namespace psbed::ps {

inline ClusterMap tiny_fc_map(const std::string& mode, int workers, float momentum = 0.0f,
                              int servers = 1) {
  const char* toml = "input = [1, 1, 4]\nclasses = 2\n[[layer]]\ntype = \"fc\"\nout = 2\n";
  ClusterMap m;
  m.exp.model_name = "tiny";
  m.exp.model_toml = toml;
  m.exp.mode = Consistency::parse(mode);
  m.exp.sgd = {0.5f, momentum, 0.0f};
  m.exp.steps = 100;
  m.spec = parse_model_spec(toml, "tiny");
  m.plan = make_partition(m.spec, 1 << 20, servers);
  for (int s = 0; s < servers; ++s) {
    const std::string name = "server-" + std::to_string(s);
    m.servers.push_back({"server", s, name, "x", servers > 1 ? name + "#link" : "", ""});
  }
  for (int w = 0; w < workers; ++w)
    m.workers.push_back({"worker", w, "worker-" + std::to_string(w), "", "", ""});
  return m;
}

}  // namespace psbed::ps
