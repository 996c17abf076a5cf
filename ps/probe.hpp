// `psbed probe`: sends a server shard one malformed message of each kind (each from its own
// peer identity, since a shard logs the first bad message per peer), to see that it names
// every fault, counts it, and keeps serving. For robustness tests of a live cluster.
#pragma once
#include <string>

namespace psbed::ps {

// Returns the number of malformed messages sent.
int run_probe(const std::string& endpoint, int sender);

}  // namespace psbed::ps
