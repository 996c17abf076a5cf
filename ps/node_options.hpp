// What a server shard and a worker are told the same way: where the coordinator is, the node's
// own name, its liveness settings, where its trace goes and its emulated link. One struct, so
// the two roles cannot drift apart in a default.
#pragma once
#include <string>

#include "core/defaults.hpp"

namespace psbed::ps {

struct NodeOptions {
  std::string coordinator = "tcp://127.0.0.1:7000";
  std::string name;  // default <role>-<pid>
  double connect_timeout_s = 30;
  double coordinator_timeout_s = 30;  // silence from the coordinator after joining: it is gone
  double heartbeat_s = defaults::kHeartbeatS;
  std::string trace_dir;  // write <name>.trace.json here at the end
  std::string bandwidth;  // link emulation: "1gbit" per direction ("" = none)
  std::string latency;    // link emulation: one-way latency, "200us"
  // CURVE (ps/curve.hpp): the key folder ("" = plain links) and this node's secret key file
  // ("" = <keys>/<name>.key).
  std::string keys;
  std::string key_file;
};

}  // namespace psbed::ps
